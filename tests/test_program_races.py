"""Two programs of one launch that touch an element, one of them storing it, with no atomic to order them,
stop an interpreted kernel (grader/student/program_races.py): the interpreter runs programs one after the
other and gets a loop's answer, a GPU runs them at once and gets the race's."""
import pytest
import torch
import triton
import triton.language as tl

from conftest import on_cpu_only
from grader.student.program_races import ProgramRace

pytestmark = on_cpu_only   # (the interpreter's; on a GPU the kernels are compiled)


@triton.jit
def sum_by_load_and_store(x_ptr, out_ptr, BLOCK: tl.constexpr):
    part = tl.sum(tl.load(x_ptr + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)), axis=0)
    tl.store(out_ptr, tl.load(out_ptr) + part)


@triton.jit
def sum_by_atomic(x_ptr, out_ptr, BLOCK: tl.constexpr):
    tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)), axis=0))


@triton.jit
def mean_by_the_last_program(x_ptr, parts_ptr, count_ptr, out_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    tl.store(parts_ptr + pid, tl.sum(tl.load(x_ptr + pid * BLOCK + tl.arange(0, BLOCK)), axis=0))
    if tl.atomic_add(count_ptr, 1) == N - 1:    # the ticket orders every program's store before this load
        tl.store(out_ptr, tl.sum(tl.load(parts_ptr + tl.arange(0, N)), axis=0) / (N * BLOCK))


@triton.jit
def flag_and_own_rows(x_ptr, flag_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(flag_ptr, 1.0)                                        # every program stores the same value
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2.0)            # in place, each program its own elements


@triton.jit
def shift_left_in_place(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs + 1, mask=offs + 1 < n)             # the first element of the next program's block
    tl.store(x_ptr + offs, v, mask=offs + 1 < n)


@triton.jit
def last_program_wins(out_ptr):
    tl.store(out_ptr, tl.program_id(0).to(tl.float32))


def test_a_sum_across_programs_by_load_and_store_is_a_race_and_says_so():
    x, out = torch.randn(64), torch.zeros(1)
    with pytest.raises(ProgramRace, match=r"kernel `sum_by_load_and_store`: program \(0, 0, 0\) loaded byte 0 "
                                          r"of `out_ptr`.*program \(1, 0, 0\) stored it.*tl\.atomic_add"):
        sum_by_load_and_store[(4,)](x, out, BLOCK=16)


def test_programs_that_read_a_neighbours_elements_in_place_race():
    x = torch.randn(64)
    with pytest.raises(ProgramRace, match="shift_left_in_place"):
        shift_left_in_place[(4,)](x, 64, BLOCK=16)


def test_programs_storing_different_values_to_one_element_race():
    with pytest.raises(ProgramRace, match=r"program \(0, 0, 0\) stored .* program \(1, 0, 0\) stored it"):
        last_program_wins[(3,)](torch.zeros(1))


def test_atomics_a_ticket_the_same_value_and_each_programs_own_elements_are_no_race():
    x = torch.randn(64)
    out = torch.zeros(1)
    sum_by_atomic[(4,)](x, out, BLOCK=16)
    torch.testing.assert_close(out, x.sum().reshape(1))
    parts, count, mean = torch.zeros(4), torch.zeros(1, dtype=torch.int32), torch.zeros(1)
    mean_by_the_last_program[(4,)](x, parts, count, mean, N=4, BLOCK=16)
    torch.testing.assert_close(mean, x.mean().reshape(1))
    y, flag = x.clone(), torch.zeros(1)
    flag_and_own_rows[(4,)](y, flag, BLOCK=16)
    torch.testing.assert_close(y, 2 * x)
    assert flag.item() == 1.0


def test_one_program_may_touch_an_element_many_times():
    out = torch.zeros(1)
    sum_by_load_and_store[(1,)](torch.randn(16), out, BLOCK=16)
