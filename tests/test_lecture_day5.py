"""Unit tests for grader/lectures/day5.py: column sums across programs, and sums in different orders."""
import numpy as np
import pytest
import torch

from conftest import DEVICE
from grader.lectures import day5 as L


@pytest.mark.parametrize("method", L.METHODS)
@pytest.mark.parametrize("shape, row_programs, block_n", [
    ((1, 1), 4, 16), ((37, 300), 4, 64), ((100, 33), 7, 16), ((257, 130), 64, 128), ((64, 64), 1, 64),
])
def test_every_method_adds_up_the_columns(method, shape, row_programs, block_n):
    gen = torch.Generator(device=DEVICE.torch_device).manual_seed(0)
    x = torch.randn(shape, generator=gen, device=DEVICE.torch_device)
    got = L.column_sums(x, method, row_programs=row_programs, block_n=block_n)
    assert got.dtype == torch.float32 and got.shape == (shape[1],)
    torch.testing.assert_close(got.double(), x.double().sum(0), atol=1e-4, rtol=1e-5)


def test_rows_with_a_stride_and_16_bit_values_are_summed_in_float32():
    x = torch.randn(64, 200, device=DEVICE.torch_device).half()[:, :150]   # rows 200 apart
    torch.testing.assert_close(L.column_sums(x, "two stages", row_programs=8, block_n=64).double(),
                               x.double().sum(0), atol=1e-3, rtol=1e-4)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="method"):
        L.column_sums(torch.zeros(2, 2), "magic")
    with pytest.raises(ValueError, match="contiguous"):
        L.column_sums(torch.zeros(4, 4).t(), "atomics")


def test_the_two_stage_sum_gives_the_same_bits_every_time():
    x = torch.randn(512, 64, device=DEVICE.torch_device)
    assert L.distinct_results(lambda: L.column_sums(x, "two stages", row_programs=32, block_n=64), runs=3) == 1


def test_the_same_float32_numbers_added_in_other_orders_round_differently():
    values = np.random.default_rng(1).standard_normal(10_000).astype(np.float32) * 1000
    sums = L.sums_in_random_orders(values, orders=20)
    assert sums.dtype == np.float32 and len(sums) == 20
    assert len(set(sums.tolist())) > 1                                    # not one answer
    exact = float(np.sum(values.astype(np.float64)))
    assert np.max(np.abs(sums.astype(np.float64) - exact)) < 1e-3 * np.sum(np.abs(values))   # all close
