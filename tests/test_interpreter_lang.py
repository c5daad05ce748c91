"""In the CPU interpreter, triton.language is replaced once per launch, not at every helper's call
(grader/student/interpreter_lang.py), and kernels compute what they computed before."""
import importlib
import sys

import pytest
import torch
import triton
import triton.language as tl

from conftest import on_cpu_only

pytestmark = on_cpu_only   # on a GPU no kernel is interpreted

interp = pytest.importorskip("triton.runtime.interpreter")
from grader.student import interpreter_lang  # noqa: E402


@triton.jit
def _add_one(x):
    return x + 1.0


@triton.jit
def _count_up(x_ptr, out_ptr, TIMES: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    for _ in range(TIMES):
        x = _add_one(x)           # a helper called in a loop: each call used to replace tl again
    tl.store(out_ptr + offs, x)


def _walks_of_the_language(monkeypatch) -> list:
    """A list that grows by one each time Triton walks a module's members to replace them."""
    walks = []
    walk = interp._patch_builtin
    monkeypatch.setattr(interp, "_patch_builtin", lambda *args, **kw: (walks.append(args[0]), walk(*args, **kw))[1])
    return walks


def test_a_helper_called_in_a_loop_does_not_walk_the_language_again(monkeypatch):
    assert getattr(interp._patch_lang, "once_per_launch", False), "grader.setup did not install interpreter_lang"
    walks = _walks_of_the_language(monkeypatch)
    x = torch.arange(16, dtype=torch.float32)
    counts = {}
    for times in (1, 25):
        out = torch.empty_like(x)
        walks.clear()
        _count_up[(1,)](x, out, TIMES=times, BLOCK=16)
        assert torch.equal(out, x + times)
        counts[times] = len(walks)
    assert counts[1] > 0, "the launch itself no longer replaces the language"
    assert counts[25] == counts[1], counts


def test_a_helper_that_names_another_language_module_still_gets_it_replaced(tmp_path, monkeypatch):
    # The helper's module names triton.language.core, which the kernel's module does not: its first call
    # in a launch must replace that module too, or `core.load` would be the compiler's and fail here.
    (tmp_path / "helper_of_core.py").write_text(
        "import triton\nfrom triton.language import core\n\n\n"
        "@triton.jit\ndef load_twice(p, offs):\n    return core.load(p + offs) * 2.0\n")
    (tmp_path / "kernel_of_tl.py").write_text(
        "import triton\nimport triton.language as tl\nfrom helper_of_core import load_twice\n\n\n"
        "@triton.jit\ndef kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n"
        "    tl.store(out_ptr + offs, load_twice(x_ptr, offs) + tl.load(x_ptr + offs))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("helper_of_core", "kernel_of_tl"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    kernel = importlib.import_module("kernel_of_tl").kernel
    x = torch.randn(32)
    out = torch.empty_like(x)
    kernel[(1,)](x, out, BLOCK=32)
    torch.testing.assert_close(out, 3 * x)


def test_a_launch_that_fails_leaves_the_next_one_working():
    @triton.jit
    def fails(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.static_assert(BLOCK == 8, "BLOCK must be 8")
        tl.store(x_ptr + offs, _add_one(tl.load(x_ptr + offs)))

    x = torch.zeros(16)
    with pytest.raises(Exception, match="BLOCK must be 8"):
        fails[(1,)](x, BLOCK=16)
    out = torch.empty_like(x)
    _count_up[(1,)](x, out, TIMES=3, BLOCK=16)
    assert torch.equal(out, x + 3)


# A reduction by a combine function of the kernel's own folds pairwise in the interpreter, as on a GPU
# (interpreter_lang.install_tree_reduce): whole blocks at a time, a float sum as exact as tl.sum's.

@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _larger_first(a, a_index, b, b_index):   # Python's `if`: the compiler hands a combine one element
    if a >= b:
        return a, a_index
    else:
        return b, b_index


@triton.jit
def _sum_by_own_add(x_ptr, out_ptr, BLOCK: tl.constexpr):
    tl.store(out_ptr, tl.reduce(tl.load(x_ptr + tl.arange(0, BLOCK)), 0, _add))


@triton.jit
def _argmax_by_if(x_ptr, value_ptr, index_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    value, index = tl.reduce((tl.load(x_ptr + offs), offs), 0, _larger_first)
    tl.store(value_ptr, value)
    tl.store(index_ptr, index)


@triton.jit
def _sums_of_a_tile(x_ptr, all_ptr, rows_ptr, cols_ptr, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + r * C + c)
    tl.store(all_ptr, tl.reduce(x, None, _add))
    tl.store(rows_ptr + r, tl.reduce(x, 1, _add, keep_dims=True))
    tl.store(cols_ptr + tl.arange(0, C), tl.reduce(x, 0, _add))


def _error_of_own_sum(n: int) -> float:
    x = torch.rand(n, generator=torch.Generator().manual_seed(3)) + 0.5
    out = torch.empty(1)
    _sum_by_own_add[(1,)](x, out, BLOCK=n)
    exact = x.double().sum().item()
    return abs(out.item() - exact) / exact


def test_a_long_sum_by_an_own_combine_is_as_exact_as_tl_sum(monkeypatch):
    calls = []
    fold = interp.ReduceOps._combine_blocks
    monkeypatch.setattr(interp.ReduceOps, "_combine_blocks", lambda *a: (calls.append(1), fold(*a))[1])
    assert _error_of_own_sum(32768) < 2e-6
    # 15 steps, each folded left with right and right with left
    assert len(calls) == 30, "the combine function was called element by element, not on whole blocks"


def test_triton_s_own_fold_one_by_one_misses_that_bound(monkeypatch):
    # what the bound above tells apart: 8192 float32 terms near 1 summed left to right
    monkeypatch.setattr(interp.ReduceOps, "generic_reduce", interp.ReduceOps.generic_reduce.tritons)
    assert _error_of_own_sum(8192) > 2e-6


def test_a_combine_function_with_a_python_if_still_folds_element_by_element():
    for seed in range(3):
        x = torch.randn(64, generator=torch.Generator().manual_seed(seed))
        value, index = torch.empty(1), torch.empty(1, dtype=torch.int32)
        _argmax_by_if[(1,)](x, value, index, BLOCK=64)
        assert index.item() == x.argmax().item() and value.item() == x.max().item()


def test_reductions_over_all_one_or_the_other_axis_keep_their_shapes():
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(0))
    whole, rows, cols = torch.empty(1), torch.empty(8), torch.empty(16)
    _sums_of_a_tile[(1,)](x, whole, rows, cols, R=8, C=16)
    torch.testing.assert_close(whole, x.sum().reshape(1))
    torch.testing.assert_close(rows, x.sum(1))
    torch.testing.assert_close(cols, x.sum(0))


@triton.jit
def _add_and_tell_pairs_apart(a, b):   # a block of two here, a scalar to the compiler: u == v there
    u, v = tl.split(tl.broadcast_to(a, [2]))
    return a + b + (u - v)


@triton.jit
def _first(a, b):
    return a


@triton.jit
def _larger_then_smaller_index(a, a_index, b, b_index):
    larger = (a > b) | ((a == b) & (a_index < b_index))
    return tl.where(larger, a, b), tl.where(larger, a_index, b_index)


@triton.jit
def _reduce_with(x_ptr, out_ptr, BLOCK: tl.constexpr, COMBINE: tl.constexpr):
    tl.store(out_ptr, tl.reduce(tl.load(x_ptr + tl.arange(0, BLOCK)), 0, COMBINE))


@triton.jit
def _argmax_with_ties(x_ptr, index_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    _, index = tl.reduce((tl.load(x_ptr + offs), offs), 0, _larger_then_smaller_index)
    tl.store(index_ptr, index)


def test_a_combine_function_that_reads_a_shape_gets_one_element_at_a_time_as_compiled():
    # the eleventh red team's: on whole blocks u and v were two elements, and the sum of 0..3 came out 2
    out = torch.empty(1)
    _reduce_with[(1,)](torch.arange(4, dtype=torch.float32), out, BLOCK=4, COMBINE=_add_and_tell_pairs_apart)
    assert out.item() == 6.0
    assert not interpreter_lang._elementwise_only(_add_and_tell_pairs_apart)
    assert interpreter_lang._elementwise_only(_larger_then_smaller_index) and interpreter_lang._elementwise_only(_add)


def test_a_combine_function_whose_result_depends_on_the_order_of_its_arguments_is_stopped():
    # the eleventh red team's: keeping the first argument gave element 0 here; on a GPU each lane keeps its own
    with pytest.raises(Exception, match=r"_first\(0.0, 1.0\) gives 0.0, and with its arguments swapped 1.0"):
        _reduce_with[(1,)](torch.arange(8, dtype=torch.float32), torch.empty(1), BLOCK=8, COMBINE=_first)


def test_ties_broken_by_the_index_give_the_first_largest_as_torch_does():
    x = torch.tensor([1.0, 3.0, 2.0, 3.0, 0.0, 3.0, 1.0, 2.0])
    index = torch.empty(1, dtype=torch.int32)
    _argmax_with_ties[(1,)](x, index, BLOCK=8)
    assert index.item() == 1


@triton.jit
def _to_integers(x_ptr, i32_ptr, u32_ptr, i64_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(i32_ptr + offs, x.to(tl.int32))
    tl.store(u32_ptr + offs, x.to(tl.uint32))
    tl.store(i64_ptr + offs, x.to(tl.int64))


def test_a_float_past_an_integers_range_converts_as_on_a_gpu():
    # PTX's cvt.rzi saturates and takes NaN to 0; NumPy on x86 gave -2**31 for all three (the eleventh
    # red team's: a kernel that branched on `(3e9).to(tl.int32) < 0`)
    x = torch.tensor([3e9, -3e9, float("nan"), 2.7, -2.7, 300.0, -5.0, 1e30])
    i32, u32, i64 = (torch.empty(8, dtype=d) for d in (torch.int32, torch.uint32, torch.int64))
    _to_integers[(1,)](x, i32, u32, i64, BLOCK=8)
    top, bottom = 2**31 - 1, -2**31
    assert i32.tolist() == [top, bottom, 0, 2, -2, 300, -5, top]
    assert u32.tolist() == [3000000000, 0, 0, 2, 0, 300, 0, 2**32 - 1]
    assert i64.tolist() == [3000000000, -3000000000, 0, 2, -2, 300, -5, 2**63 - 1]


@triton.jit
def _to_narrow_integers(x_ptr, i8_ptr, u8_ptr, i16_ptr, u16_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(i8_ptr + offs, x.to(tl.int8))
    tl.store(u8_ptr + offs, x.to(tl.uint8))
    tl.store(i16_ptr + offs, x.to(tl.int16))
    tl.store(u16_ptr + offs, x.to(tl.uint16))


def test_a_float_converted_to_8_or_16_bits_gives_what_an_h200_gave():
    # 16 bits clamp; 8 bits clamp to 16 and keep the low byte (NumPy kept the low byte of an int32: 70000.0
    # to int8 was 112, on the GPU -1). The expected rows are an H200's (Triton 3.6) for these inputs.
    x = torch.tensor([300.0, -300.0, 70000.0, -70000.0, float("nan"), 2.7, -2.7, 1e30, -1e30, 128.0, 255.5,
                      65535.9, float("inf"), -float("inf"), -1.0, 3e9])
    outs = [torch.empty(16, dtype=d) for d in (torch.int8, torch.uint8, torch.int16, torch.uint16)]
    _to_narrow_integers[(1,)](x, *outs, BLOCK=16)
    assert [o.tolist() for o in outs] == [
        [44, -44, -1, 0, 0, 2, -2, -1, 0, -128, -1, -1, -1, 0, -1, -1],
        [44, 0, 255, 0, 0, 2, 0, 255, 0, 128, 255, 255, 255, 0, 0, 255],
        [300, -300, 32767, -32768, 0, 2, -2, 32767, -32768, 128, 255, 32767, 32767, -32768, -1, 32767],
        [300, 0, 65535, 0, 0, 2, 0, 65535, 0, 128, 255, 65535, 65535, 0, 0, 65535]]


@triton.jit
def _online_max_and_sum(m1, s1, m2, s2):   # Liger-Kernel's manner: a constant made by float("-inf")
    m = tl.maximum(m1, m2)
    return m, tl.where(m == float("-inf"), 0.0, s1 * tl.exp(m1 - m) + s2 * tl.exp(m2 - m))


def test_float_of_a_constant_keeps_a_combine_function_elementwise():
    assert interpreter_lang._elementwise_only(_online_max_and_sum)


@triton.jit
def _loop_indices(out_ptr, n):
    halves = 0
    for i in range(-3, 0):            # a loop the compiler keeps: its index an int32 block
        halves += i // 2              # -3 // 2 is -1 on a GPU (it truncates), -2 in Python
    tl.store(out_ptr, halves)
    wide = 0
    for i in range(1, 2):
        wide = i * 65536 * 65536      # wraps to 0 in int32; 2**32 in Python
    tl.store(out_ptr + 1, wide)
    unrolled = 0
    for i in tl.static_range(-3, 0):  # unrolled: a Python int in the compiler too, which floor-divides
        unrolled += i // 2
    tl.store(out_ptr + 2, unrolled)
    last = n * 0                      # (an int64, as the loop makes it)
    for i in tl.range(n - 2, n, num_stages=1):   # an int64 bound: an int64 index, which does not wrap
        last = i * 4
    tl.store(out_ptr + 3, last)
    down = 0
    for i in range(3, -1, -1):        # a negative constant step, which the compiler turns round
        for j in range(i):            # bounds that are blocks themselves
            down += j
    tl.store(out_ptr + 4, down)


def test_a_loops_index_computes_as_the_compilers_int32_block():
    # the eleventh red team's: `i // 2` and `i * 65536 * 65536` on a loop's index gave Python's answers
    # here and int32's on a GPU, so a kernel could be right in one place only
    from grader.student import guard
    out = torch.zeros(5, dtype=torch.int64)
    with guard.watch():
        _loop_indices[(1,)](out, 2**31)
    assert out.tolist() == [-1 + -1 + 0, 0, -2 + -1 + -1, (2**31 - 1) * 4, 3 + 1 + 0]


@triton.jit
def _gpu_math(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.sqrt(x))
    tl.store(out_ptr + BLOCK + offs, tl.rsqrt(x))
    tl.store(out_ptr + 2 * BLOCK + offs, tl.exp2(x - 160.0))
    tl.store(out_ptr + 3 * BLOCK + offs, tl.exp(x))
    tl.store(out_ptr + 4 * BLOCK + offs, tl.sqrt_rn(x))


def test_float32_math_flushes_and_rounds_as_the_gpus_instructions():
    # sqrt.approx.ftz and rsqrt.approx.ftz read a subnormal as 0, ex2.approx.ftz writes one as 0, and exp is
    # ex2.approx of x * log2(e) rounded to float32 first (the twelfth red team's probes); sqrt_rn is IEEE's
    subnormal = float(torch.tensor(1e-40).item())
    x = torch.tensor([subnormal, 4.0, 45.0, 1.0])
    out = torch.empty(20)
    _gpu_math[(1,)](x, out, BLOCK=4)
    sqrt, rsqrt, exp2, exp, sqrt_rn = out.view(5, 4).tolist()
    assert sqrt[:2] == [0.0, 2.0] and rsqrt[:2] == [float("inf"), 0.5]
    assert exp2[0] == 0.0 and exp2[2] > 0           # 2**-160: flushed; 2**-115: kept
    product = torch.tensor(45.0) * torch.tensor(1.4426950408889634)   # (both float32)
    assert exp[2] == torch.exp2(product.double()).float().item() != torch.exp(torch.tensor(45.0)).item()
    assert sqrt_rn[0] > 0                           # 1e-20: IEEE's square root keeps subnormals


@triton.jit
def _copy_by_descriptor(src_desc, dst_ptr, ROWS: tl.constexpr, COLS: tl.constexpr):
    block = src_desc.load([0, 0])
    rows, cols = tl.arange(0, ROWS), tl.arange(0, COLS)
    tl.store(dst_ptr + rows[:, None] * COLS + cols[None, :], block)


def test_a_descriptor_s_strides_are_checked_in_bytes_as_tma_checks_them():
    # Triton 3.4 and 3.5's interpreter asked for strides of 16 elements; TMA asks for 16 bytes, which a
    # float16 matrix of 8 columns has (one of 4 columns has not, and is refused as on a GPU).
    descriptors = pytest.importorskip("triton.tools.tensor_descriptor")
    import numpy as np
    x = torch.randn(16, 8).to(torch.float16)
    out = torch.empty_like(x)
    _copy_by_descriptor[(1,)](descriptors.TensorDescriptor(x, list(x.shape), list(x.stride()), [16, 8]), out,
                              ROWS=16, COLS=8)
    assert torch.equal(out, x)

    def handle(row_stride):
        made = object.__new__(interp.TensorDescHandle)
        made.base = interp.TensorHandle(np.array([x.data_ptr()], dtype=np.uint64), tl.pointer_type(tl.float16))
        made.strides = [interp.TensorHandle(np.array([s], dtype=np.int64), tl.int64) for s in (row_stride, 1)]
        made.ndim, made.block_shape, made.shape = 2, [16, 8], made.strides
        return made
    handle(8).validate()
    with pytest.raises(AssertionError, match="stride must be 16-byte aligned"):
        handle(4).validate()
