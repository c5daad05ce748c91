"""A load of what another lane of the same program stored, with no barrier between, stops an interpreted
kernel (grader/student/lane_races.py): right in the interpreter, which computes a block at once, and a
race on a GPU, whose threads hold different elements of a block."""
import pytest
import torch
import triton
import triton.language as tl

import grader
from conftest import on_cpu_only
from grader.compare import CheckFailed

pytestmark = on_cpu_only   # (the interpreter's; on a GPU the kernels are compiled)


@triton.jit
def neighbours(x_ptr, out_ptr, n, BLOCK: tl.constexpr, BARRIER: tl.constexpr, SHIFT: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
    if BARRIER:
        tl.debug_barrier()
    back = tl.load(out_ptr + (offs + SHIFT) % n, mask=offs < n)   # each lane reads lane + SHIFT's store
    tl.store(out_ptr + n + offs, back, mask=offs < n)


@triton.jit
def scalar_then_block(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))
    tl.store(out_ptr + 1 + offs, tl.load(out_ptr + offs * 0), mask=offs < n)


def _run(kernel, *constexprs, **named):
    x = torch.arange(8, dtype=torch.float32)
    out = torch.zeros(17)
    kernel[(1,)](x, out, 8, *constexprs, **named)
    return out


def test_a_lane_that_reads_its_neighbours_store_without_a_barrier_stops_the_kernel():
    with pytest.raises(Exception) as raised:
        _run(neighbours, BLOCK=8, BARRIER=False, SHIFT=1)
    said = str(raised.value)
    assert "LaneRace" in said and "element (0,) of its block, what element (1,)" in said, said
    assert "tl.debug_barrier()" in said


def test_a_barrier_a_lanes_own_store_and_a_scalar_read_by_a_block_pass():
    out = _run(neighbours, BLOCK=8, BARRIER=True, SHIFT=1)      # the barrier orders them
    assert out[8:16].tolist() == [2.0 * ((i + 1) % 8) for i in range(8)]
    out = _run(neighbours, BLOCK=8, BARRIER=False, SHIFT=0)     # each lane reads its own store
    assert out[8:16].tolist() == [2.0 * i for i in range(8)]
    out = _run(scalar_then_block, BLOCK=8)   # (another shape: which lanes share a thread is the compiler's)
    assert out[1:9].tolist() == [28.0] * 8


@triton.jit
def softmax_summed_from_memory(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * x_stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * out_stride + offs, e, mask=mask)
    # the row's sum read back from memory, each lane its neighbour's element: the same sum, in the interpreter
    rotated = tl.load(out_ptr + row * out_stride + (offs + 1) % n_cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * out_stride + offs, e / tl.sum(rotated, axis=0), mask=mask)


def softmax(x):
    out = torch.empty_like(x)
    softmax_summed_from_memory[(x.shape[0],)](x, out, x.shape[1], x.stride(0), out.stride(0),
                                              BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


def test_a_softmax_that_sums_its_neighbours_stores_fails_its_check_with_the_reason():
    with pytest.raises(CheckFailed) as failed:
        grader.check("day2.softmax", softmax)
    said = str(failed.value)
    assert "stored earlier, with no barrier between" in said and "softmax_summed_from_memory" in said, said
