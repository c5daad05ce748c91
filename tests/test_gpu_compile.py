"""Without a GPU, a visible check also compiles the student's kernels for the grading GPU (sm_90)."""
import inspect

import pytest
import torch
import triton
import triton.language as tl

import grader
from conftest import on_cpu_only
from grader.compare import CheckFailed
from grader.student import gpu_compile, guard

pytestmark = on_cpu_only   # on a GPU the kernels are compiled for real by the checks themselves

SCALE = tl.constexpr(2.0)   # a global a kernel reads must be a constexpr (the compiler says so)
LOOSE_SCALE = 2.0


@triton.jit
def _twice(x):
    return x * SCALE


@triton.jit
def add_with_helper(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, _twice(x) - x + tl.load(y_ptr + offs, mask=m), mask=m)


def add(x, y):
    out = torch.empty_like(x)
    add_with_helper[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK=128)
    return out


@triton.jit
def row_sums(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    s = 0                     # an int, re-assigned a float in the loop: the compiler refuses
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        s += tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0))
    tl.store(out_ptr, s)


def add_and_sum(x, y):
    row_sums[(1,)](x, torch.empty(1, dtype=torch.float32, device=x.device), x.numel(), BLOCK=64)
    return add(x, y)


def test_kernels_with_helpers_and_constants_compile_for_the_grading_gpu(capsys):
    grader.check("day1.vector_add", add)
    out = capsys.readouterr().out
    assert "Triton compiles your kernels for the grading H100 (sm_90) and Colab's T4 (sm_75) too" in out
    # ... and says what the kernel asks of the H100's SMs, as ptxas compiled it
    line = next(l for l in out.splitlines() if l.startswith("  `add_with_helper` on the grading H100 (sm_90): "))
    assert "registers per thread" in line and "no spills" in line and "4 warps" in line, line
    assert "one SM holds" in line and "occupancy" in line, line


@triton.jit
def _twice_loosely(x):
    return x * LOOSE_SCALE


@triton.jit
def add_with_a_plain_global(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, _twice_loosely(x) - x + tl.load(y_ptr + offs, mask=m), mask=m)


def add_loosely(x, y):
    out = torch.empty_like(x)
    add_with_a_plain_global[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK=128)
    return out


def test_the_compiler_s_message_from_inside_a_called_function_is_shown():
    judged, failures, _ = gpu_compile.check(_launches_of(add_loosely))
    if not failures:
        pytest.skip(f"Triton {triton.__version__} accepts a plain global in a kernel")
    assert "LOOSE_SCALE" in failures[0][2], failures


def _launches_of(fn):
    x = torch.randn(300)
    with guard.interpreted_launches() as launches, guard.watch():
        try:
            fn(x, x)
        except Exception as e:  # noqa: BLE001 - a launch Triton's front end refused stops there, once noted
            if not grader.student.checks.refused_launch(e):
                raise
    return launches


def test_what_only_the_interpreter_accepts_fails_the_visible_check():
    with pytest.raises(grader.CheckFailed) as failed:
        grader.check("day1.vector_add", add_and_sum)
    message = str(failed.value)
    assert "`row_sums` runs in Triton's CPU interpreter, but Triton's compiler rejects it" in message
    assert "Loop-carried variable s" in message


def test_a_global_that_cannot_be_rebuilt_gives_no_verdict_rather_than_a_failure():
    unknown = object()

    @triton.jit
    def uses_an_object(out_ptr):
        tl.store(out_ptr, unknown)

    globals()["unknown"] = unknown
    out = torch.empty(1)
    with guard.interpreted_launches() as launches, guard.watch():
        try:
            uses_an_object[(1,)](out)
        except Exception:  # noqa: BLE001 - the interpreter may refuse it too; what matters is below
            pass
    assert gpu_compile.check(launches)[1] == []


def test_the_whole_compile_can_be_switched_off_and_is_off_while_grading_but_not_the_front_end(monkeypatch, capsys):
    # The whole compile after a visible check (for both GPUs, with what each kernel asks of an SM) is the
    # student's to switch off, and is not made while grading; Triton's front end, which each interpreted
    # launch is handed to (guard._as_compiled), is part of the verdict and runs either way.
    monkeypatch.setenv("GRADER_GPU_COMPILE", "0")
    grader.check("day1.vector_add", add)
    with pytest.raises(CheckFailed, match="Loop-carried variable s"):
        grader.check("day1.vector_add", add_and_sum)
    monkeypatch.delenv("GRADER_GPU_COMPILE")
    monkeypatch.setattr(grader.student.checks, "grading", lambda: True)
    grader.check("day1.vector_add", add)
    with pytest.raises(CheckFailed, match="Loop-carried variable s"):
        grader.check("day1.vector_add", add_and_sum)
    assert "compiles your kernels" not in capsys.readouterr().out


@triton.jit
def through_fp8(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x.to(tl.float8e4nv).to(tl.float32), mask=offs < n)


def add_and_round_to_fp8(x, y):
    through_fp8[(triton.cdiv(x.numel(), 128),)](x, torch.empty_like(x), x.numel(), BLOCK=128)
    return add(x, y)


def test_a_kernel_a_t4_cannot_compile_is_said_and_costs_nothing(capsys):
    # fp8 e4m3 needs sm_89 or newer: fine on the grading H100, not on Colab's T4
    judged, failures, _ = gpu_compile.check(_launches_of(add_and_round_to_fp8))
    if not failures:
        pytest.skip(f"Triton {triton.__version__} does not judge fp8 on sm_75 here")
    assert [f[1] for f in failures] == ["Colab's T4 (sm_75)"] and "fp8e4nv" in failures[0][2]
    grader.check("day1.vector_add", add_and_round_to_fp8)
    out = capsys.readouterr().out
    assert "`through_fp8` does not compile for Colab's T4 (sm_75)" in out and "costs no points" in out
    assert "compiles your kernels for the grading H100 (sm_90) too" in out


def test_spilled_registers_are_named_with_what_helps():
    lines = gpu_compile.describe_usage([{"kernel": "k", "target": "the grading H100 (sm_90)", "registers": 255,
                                         "local_bytes": 96, "num_warps": 8, "shared": 0}])
    assert "96 bytes per thread of local memory" in lines[0] and "smaller blocks" in lines[0]
    assert "one SM holds 1 of its programs at once (8 warps, 12% occupancy, limited by registers)" in lines[0]


@triton.jit
def scale_block(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 3.0, mask=m)


def _usage_of(*inputs):
    """What gpu_compile says of scale_block launched on each of `inputs` in one visible check."""
    def run(x):
        out = torch.empty_like(x)
        scale_block[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    with guard.interpreted_launches() as launches, guard.watch():
        for x in inputs:
            run(x)
    judged, failures, usage = gpu_compile.check(launches)
    assert failures == []
    return judged, [u for u in usage if u["kernel"] == "scale_block"]


def test_the_kernel_is_compiled_as_the_launcher_would_specialize_it():
    # On a GPU, Triton's launcher compiles for addresses and sizes that are multiples of 16, and the
    # compiler then loads 16 bytes at a time: fewer registers than a kernel that cannot assume it.
    memory = torch.randn(4097)
    aligned, odd = memory[:4096], memory[1:4096]      # an address 4 bytes past a multiple of 16, 4095 elements
    _, [specialized] = _usage_of(aligned)
    _, [plain] = _usage_of(odd)
    assert specialized["registers"] < plain["registers"], (specialized, plain)
    # Launches that differ only in that are compiled once, as the specialized one (the timed sizes are)
    judged, [both] = _usage_of(odd, aligned)
    assert both["registers"] == specialized["registers"]
    assert judged == _usage_of(aligned)[0]


NEG_INF = tl.constexpr(float("-inf"))


@triton.jit
def add_after_a_max(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=NEG_INF)
    tl.store(out_ptr + offs, tl.maximum(x, NEG_INF) + tl.load(y_ptr + offs, mask=m), mask=m)


def add_with_an_infinite_constant(x, y):
    out = torch.empty_like(x)
    add_after_a_max[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK=128)
    return out


def test_the_back_end_compiles_the_module_the_front_end_judged():
    # A seventh red team's: a `tl.constexpr(float("-inf"))` global was written as `-inf` (no Python) into the
    # module the back end compiled, which then gave no verdict; it compiles what the front end compiled now
    judged, failures, usage = gpu_compile.check(_launches_of(add_with_an_infinite_constant))
    assert judged == 2 and failures == [] and [u["kernel"] for u in usage] == ["add_after_a_max"], (judged, failures)


@triton.jit
def _scale_a_row(x_ptr, out_ptr, start, n, scale, BLOCK: tl.constexpr):
    offs = start + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * scale, mask=offs < n)


def test_launches_that_differ_in_values_the_compiler_does_not_see_share_one_front_end_compile():
    # one launch a row, each with its own offset and scale: the front end compiled each of them before
    # (hundreds for Day 5's dropout done a row at a time); the compiler sees an integer's type and whether it
    # is a multiple of 16, and a float's type, so three compiles remain: BLOCK 16 at offsets that are all
    # multiples of 16, and BLOCK 8 (a new kernel) at 8, which is not one, and at 48, which is
    if gpu_compile._frontend_process() is None:
        pytest.skip("no compiler front end runs here")
    x, out = torch.randn(64), torch.empty(64)
    before = gpu_compile._frontend_state.get("compiled", 0)
    with guard.watch():
        for start, scale in ((0, 1.5), (32, 2.5), (16, 0.5), (48, 3.0)):
            _scale_a_row[(1,)](x, out, start, 64, scale, BLOCK=16)
        _scale_a_row[(1,)](x, out, 8, 64, 1.0, BLOCK=8)
        _scale_a_row[(1,)](x, out, 48, 64, 1.0, BLOCK=8)
    assert gpu_compile._frontend_state["compiled"] - before == 3
    assert torch.equal(out[:8], x[:8] * 1.5) and torch.equal(out[8:16], x[8:16]) and torch.equal(out[48:56], x[48:56]) and torch.equal(out[56:], x[56:] * 3.0)


@triton.jit
def _negated_or_not(x_ptr, out_ptr, n, NEGATE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    if NEGATE:     # the branch the compiler did not take is made to raise in the interpreter's copy
        x = -x
    tl.store(out_ptr + offs, x, mask=offs < n)


def test_the_interpreters_copy_of_a_kernel_as_compiled_is_made_once_and_anew_for_a_new_definition(monkeypatch, tmp_path):
    # the copy was made for every launch: 868 for Day 5's dropout done a row at a time
    if gpu_compile._frontend_process() is None:
        pytest.skip("no compiler front end runs here")
    made = []
    copy = gpu_compile._copy_as_compiled
    monkeypatch.setattr(gpu_compile, "_copy_as_compiled", lambda *a: made.append(a[0]) or copy(*a))
    x, out = torch.randn(16), torch.empty(16)
    with guard.watch():
        for negate in (False, False, True, False, True):
            _negated_or_not[(1,)](x, out, 16, NEGATE=negate, BLOCK=16)
            assert torch.equal(out, -x if negate else x)
    assert len(made) == 2, made   # one copy for each branch the compiler took
    # the kernel defined again, as a cell run again would, doing something else: a copy of its own,
    # which runs the new definition
    import importlib.util
    path = tmp_path / "again.py"
    path.write_text("import triton\nimport triton.language as tl\n\n\n" + inspect.getsource(_negated_or_not.fn).replace("mask=offs < n)\n", "mask=offs < n) * 3\n", 1))
    spec = importlib.util.spec_from_file_location("again", path)
    again = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(again)
    with guard.watch():
        again._negated_or_not[(1,)](x, out, 16, NEGATE=True, BLOCK=16)
    assert len(made) == 3 and torch.equal(out, -3 * x), made


def test_the_front_end_removes_its_folder_when_it_is_let_go():
    # its folder of modules was left in /tmp by every process that checked a kernel (937 of them here)
    proc = gpu_compile._frontend_process()
    if proc is None:
        pytest.skip("no compiler front end runs here")
    import os
    folder = gpu_compile._frontend_state["folder"]
    assert os.path.isdir(folder)
    gpu_compile._stop_frontend(proc)     # as when the checked process ends
    assert not os.path.exists(folder)
    assert gpu_compile._frontend_process() is not None   # the next launch starts another
