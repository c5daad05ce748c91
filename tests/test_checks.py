"""The correctness, speed and prediction checks that test cells call, each rule both ways."""
import torch
import pytest

import grader
from grader.student import checks
from grader import exercises
from grader.pipeline import notebooks
from grader.compare import CheckFailed
from conftest import DEVICE, REPO, on_cpu_only, timed_runs
import kernels


def fails_with(fn, *words, key="day1.vector_add"):
    with pytest.raises(grader.CheckFailed) as info:
        grader.check(key, fn)
    for word in words:
        assert word in str(info.value), str(info.value)
    return str(info.value)


def test_right_kernel_passes_visible_and_hidden(capsys):
    grader.check("day1.vector_add", kernels.add)
    grader.check("day1.vector_add", kernels.add, hidden=True)
    assert "correct on" in capsys.readouterr().out


def test_unwritten_tail_is_caught_by_the_poison():
    msg = fails_with(kernels.add_grid_too_small, "never written", "triton.cdiv", "first bad index")
    assert "hint:" in msg


def test_computing_with_pytorch_is_refused():
    fails_with(kernels.add_with_torch, "computed with PyTorch", "aten.add")


def test_a_function_that_launches_no_kernel_is_refused():
    fails_with(kernels.add_without_kernel, "did not launch a Triton kernel")


def test_changing_an_input_is_refused():
    fails_with(kernels.add_in_place, "changed its input argument 0")


def test_wrong_values_show_where_and_by_how_much():
    fails_with(kernels.add_wrong_op, "elements differ", "expected", "got", "largest difference")


def test_wrong_dtype_is_named():
    fails_with(kernels.add_wrong_dtype, "dtype float64")


def test_an_exception_in_the_student_code_is_reported():
    fails_with(kernels.add_that_raises, "raised", "I forgot something")


def test_warnings_from_student_code_do_not_reach_stderr(capfd):
    import warnings

    def noisy_add(x, y):
        warnings.warn("something deprecated")
        return kernels.add(x, y)

    grader.check("day1.vector_add", noisy_add)
    out, err = capfd.readouterr()
    assert err == ""
    assert "something deprecated" in out


def test_the_secret_seed_fixes_hidden_inputs(monkeypatch):
    monkeypatch.setenv("GRADER_SECRET_SEED", "1234")
    assert checks._seed(hidden=True) == 1234
    assert {checks._seed(hidden=False) for _ in range(5)} != {1234}


@pytest.mark.parametrize("ratio, expected", [(2.0, 1.0), (0.9, 1.0), (0.675, 0.5), (0.45, 0.0), (0.1, 0.0)])
def test_partial_credit_is_linear_between_half_the_target_and_the_target(ratio, expected):
    assert grader.credit(ratio, 0.9) == pytest.approx(expected)


@on_cpu_only
def test_speed_check_without_gpu_says_so_to_a_student(monkeypatch, capsys):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert grader.check_speed("day1.vector_add", kernels.add) is None
    assert "needs a CUDA GPU" in capsys.readouterr().out


@on_cpu_only
def test_speed_check_without_gpu_scores_zero_under_autograde(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with pytest.raises(grader.GPURequired, match="needs a CUDA GPU"):
        grader.check_speed("day1.vector_add", kernels.add)
    with pytest.raises(grader.GPURequired):
        grader.check_prediction_on_gpu("day1.predict_add", lambda n, bw: 1.0)


def test_prediction_following_the_model_passes():
    grader.check_prediction("day1.predict_add", lambda n, bw: 12 * n / (bw * 1e9) * 1e3)
    grader.check_prediction("day1.predict_mul_add_eager", lambda n, bw: 24 * n / (bw * 1e9) * 1e3)


@pytest.mark.parametrize("wrong", [
    lambda n, bw: 8 * n / (bw * 1e9) * 1e3,         # forgot the output
    lambda n, bw: 12 * n / (bw * 1e9),              # seconds, not milliseconds
    lambda n, bw: 12 * n / (bw * 2**30) * 1e3,      # GiB instead of GB: 7% off
])
def test_prediction_with_a_wrong_count_or_unit_fails_without_giving_the_answer(wrong):
    with pytest.raises(grader.CheckFailed, match="is too (high|low)") as failed:
        grader.check_prediction("day1.predict_add", wrong)
    message = str(failed.value)
    right = [12 * n / (bw * 1e9) * 1e3 for n, bw in exercises.get("day1.predict_add").cases]
    assert not any(f"{x:.4g}" in message or f"{x:.3g}" in message for x in right), message


def test_how_far_gives_a_direction_and_a_band():
    assert checks.how_far(2000.0, 1.0) == "too high by a factor of 100 or more"
    assert checks.how_far(0.5, 1.5) == "too low by a factor between 2 and 100"
    assert checks.how_far(1.07, 1.0) == "too high by less than a factor of 2"
    assert checks.how_far(float("nan"), 1.0) == "not a positive number"


# Answers tabulated from the visible cases (as a student could from failure messages), else a guess.
def _tabulated(key):
    spec = exercises.get(key)
    table = {case: spec.model(*case) for case in spec.cases}
    return lambda *case: table.get(case, 1.0)


@pytest.mark.parametrize("key", ["day1.predict_add", "day1.predict_mul_add_eager", "day3.gemm_intensity",
                                 "day3.naive_bytes", "day3.tiled_bytes"])
def test_tabulated_predictions_fail_at_grading_and_the_model_passes(key, monkeypatch):
    spec = exercises.get(key)
    grader.check_prediction(key, _tabulated(key))            # the visible cases alone cannot tell
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with pytest.raises(grader.CheckFailed, match="is too"):
        grader.check_prediction(key, _tabulated(key))
    for _ in range(20):                                      # the hidden cases differ on every run
        grader.check_prediction(key, spec.model)


def test_prediction_that_forgets_the_eager_temporary_is_wrong():
    with pytest.raises(grader.CheckFailed, match="two kernels"):
        grader.check_prediction("day1.predict_mul_add_eager", lambda n, bw: 16 * n / (bw * 1e9) * 1e3)


def test_unknown_exercise_names_the_known_ones():
    with pytest.raises(KeyError, match="day1.vector_add"):
        grader.check("day9.nothing", kernels.add)


def test_speed_report_names_baseline_ratio_placements_and_ceilings():
    from grader.student.checks import SpeedResult
    r = SpeedResult("tiled matmul", (8192, 8192, 8192), "float16", "NVIDIA H200", "torch.matmul (cuBLAS)",
                    yours_ms=2.0, baseline_ms=1.8, target=0.85, tflops=550.0, peak_tflops=989.4,
                    placements={"yours": [2.0, 2.1], "baseline": [1.8, 1.8]})
    text = r.report()
    assert r.ratio == pytest.approx(0.9) and r.credit == 1.0
    assert "torch.matmul (cuBLAS) 1.8000 ms" in text and "0.90x (target 0.85x" in text
    assert "2 placements" in text and "0.86x to 0.90x" in text
    assert "550 TFLOP/s (56% of this GPU's dense 16-bit peak" in text and "cuBLAS) 611 TFLOP/s" in text
    assert "(not graded)" in r.report(graded=False)
    r = SpeedResult("add", (10,), "float32", "GPU", "torch.add", 1.0, 0.5, 0.9, gbs=3000.0, ceiling_gbs=4000.0)
    assert "3000 GB/s = 75% of this GPU's measured copy bandwidth (4000 GB/s)" in r.report()
    assert r.credit == pytest.approx((0.5 - 0.45) / 0.45)


def test_a_speed_below_target_is_explained_from_the_measured_rates():
    from grader.student.checks import SpeedResult
    hint = grader.exercises.get("day1.bias_gelu").speed_hint
    slow = SpeedResult("bias + GELU", (8192, 8192), "bfloat16", "GPU", "eager", 1.0, 1.2, 1.8, gbs=1000.0,
                       ceiling_gbs=4000.0, speed_hint=hint)
    text = slow.report()
    assert "why it may be slow: your kernel moves its bytes at 25% of what this GPU can copy" in text
    assert "a fast kernel here: eager PyTorch writes x + b" in text
    at_the_wall = SpeedResult("bias + GELU", (8192, 8192), "bfloat16", "GPU", "eager", 1.0, 1.2, 1.8, gbs=3600.0,
                              ceiling_gbs=4000.0, speed_hint=hint)
    assert "already moves its bytes at 90%" in at_the_wall.report() and "move fewer" in at_the_wall.report()
    matmul = SpeedResult("matmul", (8192,) * 3, "bfloat16", "GPU", "cuBLAS", 2.0, 1.0, 0.85, tflops=300.0,
                         peak_tflops=1000.0)
    assert "reaches 30% of the tensor cores' peak; the baseline reaches 60%" in matmul.report()
    fast = SpeedResult("bias + GELU", (8192, 8192), "bfloat16", "GPU", "eager", 1.0, 2.0, 1.8, gbs=3600.0,
                       ceiling_gbs=4000.0, speed_hint=hint)
    assert "why it may be slow" not in fast.report() and "why it may be slow" not in slow.report(graded=False)
    # the class report reads the same numbers as data, advice or not
    record = slow.record(0.0, 2)
    assert record["ratio"] == 1.2 and record["gbs"] == 1000 and record["pct_of_ceiling"] == 25


def test_every_timed_exercise_says_what_a_fast_kernel_does():
    from grader.exercises import _ALL
    # (RMSNorm's backward speed is printed, not graded)
    timed = [spec for spec in _ALL.values() if hasattr(spec, "speed_shape") and spec.key != "day2.rmsnorm_backward"]
    assert timed and all(spec.speed_hint for spec in timed), [s.key for s in timed if not s.speed_hint]


def test_datasheet_peaks_match_specific_names_first():
    from grader.hardware import peak_tflops
    assert peak_tflops("NVIDIA H100 PCIe") == 756.0
    assert peak_tflops("NVIDIA H100 80GB HBM3") == 989.4
    assert peak_tflops("Tesla T4") == 65.0
    assert peak_tflops("NVIDIA L40S") == 362.0  # not the L4's figure, whose name it contains
    assert peak_tflops("NVIDIA L4") == 121.0
    assert peak_tflops("Some Future GPU") is None


def _timed_loop(fn):
    timed_runs("day1.vector_add", fn, (3000,))


def test_an_honest_function_passes_the_timing_rules():
    _timed_loop(kernels.add)


def test_a_result_cached_by_input_address_launches_nothing_when_timed():
    with pytest.raises(grader.CheckFailed, match="launched no Triton kernel"):
        _timed_loop(kernels.add_cached_by_address)


def test_a_cache_that_watches_in_place_writes_must_recompute_every_timed_call():
    # The version bump before each timed call makes it miss: it launches every time, and is right.
    _timed_loop(kernels.add_cached_by_version)


def test_a_token_launch_does_not_hide_a_cached_result():
    with pytest.raises(grader.CheckFailed, match="timed run 1 .*new input values"):
        _timed_loop(kernels.add_with_tiny_launch_and_cache)


def test_a_cache_keyed_on_a_fingerprint_of_the_values_never_hits_when_timed():
    # Every timed run has new values, so a fingerprint cache recomputes (and is right) every time.
    _timed_loop(kernels.add_cached_by_fingerprint)


def test_a_function_that_skips_work_on_some_timed_runs_is_caught_on_the_checked_ones():
    with pytest.raises(grader.CheckFailed, match="elements differ|never written"):
        _timed_loop(kernels.add_every_other_call)


def test_a_timed_run_that_overwrites_its_inputs_is_caught():
    with pytest.raises(grader.CheckFailed, match="changed its input argument 0 on timed run"):
        _timed_loop(kernels.add_then_zero_inputs)


def test_a_backward_is_timed_on_a_new_graph_and_output_gradient_each_run():
    path = REPO / "solutions" / "day2" / "rmsnorm.ipynb"
    name = next(fn for kind, k, fn in notebooks.graded_calls(path) if k == "day2.rmsnorm_backward")
    namespace = notebooks.run_code_cells(path)
    timed_runs("day2.rmsnorm_backward", namespace[name], (5, 96), runs=2)

    honest = namespace["RMSNormFunction"]

    class KeptGradients(honest):
        """Computes every time, but hands back the gradients of its first backward."""
        kept = []

        @staticmethod
        def backward(ctx, dy):
            grads = honest.backward(ctx, dy)
            KeptGradients.kept = KeptGradients.kept or [grads]
            return KeptGradients.kept[0]

    with pytest.raises(grader.CheckFailed, match="timed run 1"):
        timed_runs("day2.rmsnorm_backward", KeptGradients.apply, (5, 96), runs=2)


def test_a_backward_is_held_to_the_same_rules_as_a_forward():
    # checks.refuse judges every record, checked and timed, forward and backward
    path = REPO / "solutions" / "day2" / "rmsnorm.ipynb"
    honest = notebooks.run_code_cells(path)["RMSNormFunction"]

    class ScaledByPyTorch(honest):
        @staticmethod
        def backward(ctx, dy):
            dx, *rest = honest.backward(ctx, dy)
            return (dx * 1.0, *rest)     # one PyTorch op after the Triton kernels

    class NoKernel(honest):
        @staticmethod
        def backward(ctx, dy):
            return dy.new_zeros(dy.shape), dy.new_zeros(dy.shape[-1:])    # allocations, no kernel

    with pytest.raises(grader.CheckFailed, match="your backward computed with PyTorch .*aten.mul"):
        grader.check("day2.rmsnorm_backward", ScaledByPyTorch.apply)
    with pytest.raises(grader.CheckFailed, match="your backward did not launch a Triton kernel"):
        grader.check("day2.rmsnorm_backward", NoKernel.apply)


def test_a_backward_cannot_finish_its_gradients_when_its_graph_is_freed():
    # A red team's backward handed back zeros and filled them in from a __del__ on ctx (or a
    # weakref.finalize), which ran as the grader freed the graph: after the guard's watch, before the
    # gradients were handed over. The grader now copies them first, then frees the graph under the guard.
    import weakref
    path = REPO / "solutions" / "day2" / "rmsnorm.ipynb"
    honest = notebooks.run_code_cells(path)["RMSNormFunction"]

    class Later:
        def __init__(self, returned, computed, scale):
            self.returned, self.computed, self.scale = returned, computed, scale

        def __del__(self):
            for r, c in zip(self.returned, self.computed):
                r.copy_(c * self.scale if self.scale != 1 else c)

    def filled_later(scale, finalizer=False):
        class FilledLater(honest):
            @staticmethod
            def backward(ctx, dy):
                computed = honest.backward(ctx, dy)                        # the real kernels, then zeros
                returned = tuple(torch.zeros_like(g) for g in computed)
                if finalizer:
                    weakref.finalize(ctx, Later(returned, computed, scale).__del__)
                else:
                    ctx.later = Later(returned, computed, scale)
                return returned
        return FilledLater.apply

    for finalizer in (False, True):
        # copy_ alone (no computation) runs unseen, but too late: the copies handed over are the zeros
        with pytest.raises(grader.CheckFailed, match="elements differ"):
            grader.check("day2.rmsnorm_backward", filled_later(1, finalizer))
        # PyTorch computing there is seen
        with pytest.raises(grader.CheckFailed, match="code of yours that ran when your autograd graph was freed computed with PyTorch .*aten.mul"):
            grader.check("day2.rmsnorm_backward", filled_later(1.5, finalizer))


def test_predictions_are_measured_on_a_fresh_size_at_grading(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert checks.measured_size() == 2**26
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    sizes = {checks.measured_size() for _ in range(20)}
    assert len(sizes) > 1 and all(2**25 <= n <= 2**27 and n % 2**20 == 0 for n in sizes)


def test_an_error_in_the_student_s_code_shows_their_line_not_the_grading_machine_s_files():
    def broken(x, y):
        return x.reshape(3, 7)    # the line a student must find

    with pytest.raises(CheckFailed) as failed:
        grader.check("day1.vector_add", broken)
    message = str(failed.value)
    assert "return x.reshape(3, 7)" in message and "RuntimeError" in message
    assert "site-packages" not in message and "grader/student/checks.py" not in message


@pytest.mark.parametrize("registers, shared, warps, capability, programs, limited_by", [
    (16, 0, 4, (9, 0), 16, "warps"),              # a small kernel: the SM's 64 warps run out first
    (32, 0, 1, (9, 0), 32, "programs"),           # one-warp programs: at most 32 resident
    (255, 0, 8, (9, 0), 1, "registers"),          # 255 -> 8192 per warp (units of 256): 65536 / (8 x 8192)
    (128, 160 * 1024, 8, (9, 0), 1, "shared memory"),   # 2 by registers, 1 by (160 + 1) KiB of 228
    (96, 48 * 1024, 4, (9, 0), 4, "shared memory"),     # 228 KiB // 49 KiB = 4; registers would allow 5
    (200, 0, 4, (7, 5), 2, "registers"),          # a T4: 200 -> 6400 per warp; 65536 // 25600 = 2
])
def test_occupancy_counts_what_runs_out_first(registers, shared, warps, capability, programs, limited_by):
    from grader.hardware import occupancy
    fit = occupancy(registers, shared, warps, capability)
    assert (fit.programs, fit.limited_by) == (programs, limited_by)
    assert fit.warps == programs * warps


def test_occupancy_of_an_unknown_gpu_is_not_guessed():
    from grader.hardware import occupancy
    assert occupancy(32, 0, 4, (12, 0)) is None


def test_a_launched_kernels_resource_usage_is_noted_and_said_in_the_speed_feedback():
    from types import SimpleNamespace
    from grader.student.gpu_compile import usage_said as _compiled_said   # the checker's and a notebook's
    from grader.student.guard import CallRecord, _note_compiled
    record = CallRecord()
    kernel = SimpleNamespace(n_regs=168, n_spills=6, metadata=SimpleNamespace(name="matmul_kernel", num_warps=8,
                                                                              shared=96 * 1024))
    _note_compiled(record, kernel)
    _note_compiled(record, None)          # the interpreter's launches return nothing: no figures, no error
    assert record.compiled == {"matmul_kernel": {"registers": 168, "local_bytes": 24, "num_warps": 8,
                                                 "shared": 96 * 1024}}
    dev = SimpleNamespace(name="NVIDIA H100 80GB HBM3", capability=(9, 0))
    lines = _compiled_said([dict(u, kernel=k) for k, u in record.compiled.items()], dev)
    assert lines[0] == "  what your kernels ask of each SM:"
    assert lines[1].startswith("  `matmul_kernel`: 168 registers per thread, 24 bytes per thread of local memory")
    assert "one SM holds 1 of its programs at once (8 warps, 12% occupancy, limited by registers)" in lines[1]
    # the kernel's process reports them: anything not of that form is left out, and nothing breaks
    assert _compiled_said([{"kernel": "k", "registers": -1, "local_bytes": 0, "num_warps": 4, "shared": 0},
                           {"kernel": 3}, "x"], dev) == []
    assert _compiled_said({"not": "a list"}, dev) == []


def test_a_composed_exercise_takes_autograd_through_the_student_s_functions_only():
    # The capstone's output comes from PyTorch's products over the student's Functions: accepted where
    # a Function of the student's lies below it, refused where autograd has only PyTorch's own nodes.
    spec = exercises.get("day5.training_step")

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, dy):
            return dy * 2

    x = torch.ones(3, 3, requires_grad=True)
    through_one = Twice.apply(x) @ torch.ones(3, 3)
    assert checks.from_a_function(spec, through_one, "the output") is through_one
    with pytest.raises(CheckFailed, match="not computed through any torch.autograd.Function"):
        checks.from_a_function(spec, (x * 2) @ torch.ones(3, 3), "the output")
    single = exercises.get("day5.attention_backward")     # not composed: the output itself must be one
    with pytest.raises(CheckFailed, match="does not come from a torch.autograd.Function"):
        checks.from_a_function(single, through_one, "the output")


@on_cpu_only
def test_a_tensor_method_on_an_interpreter_int_is_explained():
    # In the interpreter a loop variable is a Python int even where its bounds are tensors: `.to` fails
    # there, and only there. The error says why and what works on both.
    import triton
    import triton.language as tl

    @triton.jit
    def ones_kernel(x_ptr, n):
        for i in range(tl.program_id(0), n, 4):
            tl.store(x_ptr + i.to(tl.int64), 1.0)

    x = torch.zeros(8)
    with pytest.raises(Exception) as info:
        ones_kernel[(2,)](x, 8)
    said = checks.where_it_raised(info.value)
    assert "'int' object has no attribute 'to'" in said and "tl.cast(i, tl.int64)" in said, said


@on_cpu_only
def test_an_error_on_a_kernel_s_line_in_the_interpreter_shows_that_line():
    # The interpreter raises at the launch; the line that failed (here a tl.dot of tiles whose inner sizes
    # differ) is the kernel's, and the failure shows it too.
    import triton
    import triton.language as tl

    @triton.jit
    def dot_kernel(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        a = tl.load(a_ptr + offs[:, None] * BLOCK + offs[None, :])
        b = tl.load(b_ptr + offs[:, None] * 2 * BLOCK + tl.arange(0, 2 * BLOCK)[None, :])
        tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], tl.dot(b, a))

    with pytest.raises(Exception) as info:
        dot_kernel[(1,)](torch.randn(16, 16), torch.randn(16, 32), torch.empty(16, 16), BLOCK=16)
    said = checks.where_it_raised(info.value)
    assert "tl.dot(b, a)" in said and "dot_kernel[(1,)]" in said, said
    if type(info.value).__name__ == "InterpreterError":     # (a Triton that wraps the kernel's error)
        assert "in the kernel:" in said, said


def test_an_illegal_memory_access_on_a_gpu_is_explained():
    # CUDA's own words name no kernel and leave the notebook's CUDA context unusable: the failure says
    # what it means, that the notebook must restart, and how to find the access.
    try:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    except RuntimeError as e:
        said = checks.where_it_raised(e)
    assert "illegal memory access" in said and "restart" in said and "compute-sanitizer" in said, said


def test_the_reference_solution_s_figures_are_said_beside_a_student_s_on_the_card_they_were_measured_on():
    from grader.exercises import reference_figures as rf
    from grader.student.checks import SpeedResult
    run = SpeedResult("softmax", (4096, 4096), "float32", "NVIDIA H200", "torch.softmax", 0.05, 0.1, 1.2,
                      gbs=2800.0, ceiling_gbs=4000.0,
                      usage=[{"kernel": "softmax_kernel", "registers": 40, "local_bytes": 0, "num_warps": 8,
                              "shared": 0, "target": "x"}],
                      context={"torch.compile of the baseline": 0.04, "another": "RuntimeError: no compiler"})
    figures = rf.with_card({}, "NVIDIA H200", "2026-11-29, torch 2.11, triton 3.6", {"day2.softmax": rf.of_result(run)})
    assert figures["NVIDIA H200"]["exercises"]["day2.softmax"] == {
        "ratio": 2.0, "baseline": "torch.softmax", "rate": "2800 GB/s = 70% of the copy bandwidth",
        "usage": [{"kernel": "softmax_kernel", "registers": 40, "local_bytes": 0, "num_warps": 8, "shared": 0}],
        "beside": {"torch.compile of the baseline": 0.8}}          # what was not timed is left out
    here = rf.said("day2.softmax", "NVIDIA H200", figures)
    assert here[0] == ("  the course's reference solution, in its benchmark on this GPU (2026-11-29, torch 2.11, "
                       "triton 3.6): 2.00x torch.softmax, 0.80x torch.compile of the baseline, 2800 GB/s = 70% of "
                       "the copy bandwidth:")
    assert here[1].startswith("    `softmax_kernel`: 40 registers per thread, no spills, 8 warps") and "occupancy" in here[1]
    elsewhere = rf.said("day2.softmax", "Tesla T4", figures)
    assert "on an NVIDIA H200, not this GPU" in elsewhere[0] and len(elsewhere) == 2
    assert rf.said("day1.vector_add", "NVIDIA H200", figures) == []      # not measured: nothing said
    assert rf.ratio_on("day2.softmax", "NVIDIA H200", figures) == 2.0
    assert rf.ratio_on("day2.softmax", "Tesla T4", figures) is None      # the plot's line: this card's only
    # ... and against the baseline the student is graded on: one timed beside, or none (Day 4's attention
    # was measured against SDPA's FlashAttention-2 backend before its graded baseline became the default)
    assert rf.ratio_on("day2.softmax", "NVIDIA H200", figures, baseline="torch.softmax") == 2.0
    assert rf.ratio_on("day2.softmax", "NVIDIA H200", figures, baseline="torch.compile of the baseline") == 0.8
    assert rf.ratio_on("day2.softmax", "NVIDIA H200", figures, baseline="something else") is None
    # a run of some days updates that card's entries and keeps the rest; the module reads back as written
    later = rf.with_card(figures, "NVIDIA H200", "2026-11-30", {"day1.vector_add": dict(rf.of_result(run), rate=None)})
    assert set(later["NVIDIA H200"]["exercises"]) == {"day1.vector_add", "day2.softmax"}
    assert set(figures["NVIDIA H200"]["exercises"]) == {"day2.softmax"}      # the original is untouched
    namespace = {}
    exec(rf.module_text(later), namespace)
    assert namespace["MEASURED"] == later
    assert rf.said("day1.vector_add", "NVIDIA H200", later)[0].endswith("2.00x torch.softmax, 0.80x torch.compile of "
                                                                         "the baseline:")
    report = run.report()      # a student's own check says the same beside the graded ratio
    assert "beside it, not graded: torch.compile of the baseline 0.0400 ms -> yours 0.80x" in report
    assert "beside it, not graded: another not timed (RuntimeError: no compiler)" in report


def test_the_speed_figure_shows_each_placement_against_the_target_and_the_reference():
    import matplotlib
    matplotlib.use("Agg")
    from grader.student.checks import SpeedResult, speed_figure
    run = SpeedResult("softmax", (8, 8), "float32", "NVIDIA H200", "torch.softmax", 0.05, 0.06, 1.5,
                      placements={"yours": [0.05, 0.04], "baseline": [0.06, 0.06]})
    fig = speed_figure(run, reference_ratio=2.9)
    ax = fig.axes[0]
    assert [round(p.get_width(), 2) for p in ax.patches] == [1.2, 1.5]              # one bar per placement
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "full credit (1.50x)", "no credit below (0.75x)", "reference solution (2.90x)"]
    assert ax.get_xlim()[1] > 2.9                                                   # every mark in view
    assert len(speed_figure(run).axes[0].get_legend().get_texts()) == 2             # no reference measured


def test_beside_the_graded_baseline_pytorch_s_default_and_torch_compile_are_timed_or_said_missing(monkeypatch):
    from grader.student import checks
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda f, **kw: compiled.append((f, kw)) or f)   # compiles nothing
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    softmax = exercises.get("day2.softmax")
    specs, missing = checks.context_baselines(softmax, (torch.randn(4, 8),))
    assert list(specs) == [checks.COMPILED] and missing == {}             # its baseline is PyTorch's default
    assert compiled == [(softmax.baseline, {"dynamic": False})]

    # an exercise graded against a path PyTorch does not take by itself (here attention pinned to the
    # MATH backend) gets PyTorch's default path timed beside it
    import dataclasses
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from grader.exercises import day4

    def pinned(q, k, v, causal):
        with sdpa_kernel([SDPBackend.MATH]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    attention = dataclasses.replace(exercises.get("day4.attention"), baseline=pinned, default_baseline=day4.sdpa_default,
                                    default_baseline_name="SDPA's default dispatch")
    args = attention.make_inputs((1, 1, 8, 16), torch.float32, "cpu", torch.Generator().manual_seed(0))
    specs, _ = checks.context_baselines(attention, args)
    assert list(specs) == ["SDPA's default dispatch", checks.COMPILED]
    default = specs["SDPA's default dispatch"]
    torch.testing.assert_close(checks.baseline_call(default, args)(), attention.reference(*args))

    def no_compiler(f, **kw):
        raise RuntimeError("Dynamo is not supported on this Python\nmore")
    monkeypatch.setattr(torch, "compile", no_compiler)
    specs, missing = checks.context_baselines(softmax, (torch.randn(4, 8),))
    assert specs == {} and missing == {checks.COMPILED: "RuntimeError: Dynamo is not supported on this Python"}


def test_rmsnorm_backward_s_float32_tolerance_holds_a_correct_dx_of_one_element_rows():
    # One element a row: dx = r g (1 - x^2 r^2), two nearly equal terms when x^2 >> eps. CI found the
    # reference refused at shape (1, 1) against the default 1e-5 (1.88e-5 off, 1 draw in about 1,000).
    from grader import exercises
    from grader.exercises import day2
    spec = exercises.get("day2.rmsnorm_backward")
    atol, rtol = spec.tolerances[torch.float32]
    gen = torch.Generator().manual_seed(0)
    x, dy = torch.randn(400_000, generator=gen), torch.randn(400_000, generator=gen)
    w = 1 + 0.5 * torch.randn(400_000, generator=gen)

    def dx(x, dy, w):
        g, r = dy * w, 1 / torch.sqrt(x * x + day2.EPS)
        return r * (g - x * (r * r) * (g * x))

    expected, got = dx(x.double(), dy.double(), w.double()), dx(x, dy, w).double()
    assert bool(((got - expected).abs() > 1e-5 + rtol * expected.abs()).any())     # the old bound: refused
    assert not bool(((got - expected).abs() > atol + rtol * expected.abs()).any())  # this one: none


def test_what_is_timed_beside_a_grade_runs_apart_from_the_graded_runs():
    # A baseline timed in the graded runs changed the student's time between them (torch.compile's Day 4
    # block: the reference at 0.80x of eager instead of 0.99x), so the graded pair is timed alone, and what
    # is only shown beside it is timed with the student's function again, in runs of its own.
    from grader.student import checks
    rounds = []

    def compare(fns, budget_ms):
        rounds.append(sorted(fns))
        slowed = len(rounds) > 1             # the student's function runs slower beside the compiled baseline
        return {name: {"baseline": 2.0, "compiled": 1.5}.get(name, 1.25 if slowed else 1.0) for name in fns}

    ms = checks.time_placement("base", "mine", {"compiled": "c", checks.COPY_SAME: "copy"}, compare=compare)
    assert rounds == [["baseline", "yours"], sorted(["compiled", checks.COPY_SAME, "yours"])]
    assert ms == {"baseline": 2.0, "yours": 1.0, "compiled": 1.5, checks.COPY_SAME: 1.25, "yours (beside)": 1.25}
    rounds.clear()
    assert checks.time_placement("base", "mine", {}, compare=compare) == {"baseline": 2.0, "yours": 1.0}
    assert rounds == [["baseline", "yours"]]
    # the grade's ratio is from the graded runs; each ratio beside, from the runs it shared
    run = checks.SpeedResult("softmax", (8, 8), "float32", "NVIDIA H200", "torch.softmax", 1.0, 2.0, 1.5,
                             context={"compiled": 1.5, checks.COPY_SAME: 1.25, "other": "not compiled"},
                             yours_beside_ms=1.25)
    assert run.ratio == 2.0 and run.credit == 1.0
    assert run.beside("compiled") == 1.2 and run.of_same_copy == 1.0 and run.beside("other") is None
    assert "beside it, not graded: compiled 1.5000 ms -> yours 1.20x" in run.report()


def test_a_backward_exercises_output_that_is_no_tensor_is_refused_before_the_grader_reads_it():
    # A red team returned a list whose grad_fn property computed the gradients with PyTorch, outside the
    # guard, when the grader read it: the output's type is asked first, by type()
    spec = exercises.get("day5.linear_cross_entropy")
    read = []

    class Loss(list):
        @property
        def grad_fn(self):
            read.append("grad_fn")
            return None

    x, y = torch.randn(64, device=DEVICE.torch_device), torch.randn(64, device=DEVICE.torch_device)
    with pytest.raises(CheckFailed, match="returned a Loss where a tensor was expected"):
        checks._student_graph(spec, lambda *args: Loss([kernels.add(x, y)]), [x, y], "a case")
    assert read == []


def test_a_backward_case_s_collections_find_its_garbage_and_skip_the_heap_before_it():
    """Inside a case's window (no_automatic_collection) automatic collection is off and what existed before
    is frozen; a cycle made inside is still found by the grader's collection, its finalizer run there."""
    import gc
    import weakref

    class Node:
        pass

    older = Node()
    older.me = older            # a cycle from before the window: frozen, not collected there
    older_ref = weakref.ref(older)
    ran = []
    with checks.no_automatic_collection(exercises.get("day5.dropout"), "a case"):
        assert not gc.isenabled() and gc.get_freeze_count() > 0
        del older               # garbage now, but older than the window
        young = Node()
        young.me = young
        weakref.finalize(young, ran.append, "finalized")
        del young
        assert gc.collect() >= 1 and ran == ["finalized"]
        assert older_ref() is not None
    assert gc.isenabled()


def test_a_finalizer_the_collection_before_a_case_runs_is_watched_as_at_the_others():
    """The young garbage a case's window collects before freezing the heap is collected under the guard: a
    finalizer there that computes with PyTorch is refused (a red team's made a new object like itself each
    time it ran, which the freeze then kept from every later collection), and the window is left as it was."""
    import gc

    class Echo:
        def __init__(self):
            self.me = self

        def __del__(self):
            torch.rand(16).sum()

    honest = type("Node", (), {})()
    honest.me = honest          # young garbage without a finalizer: collected, nothing said
    del honest
    with checks.no_automatic_collection(exercises.get("day5.dropout"), "a case"):
        pass
    Echo()
    with pytest.raises(CheckFailed, match="collected garbage before a case computed with PyTorch"):
        with checks.no_automatic_collection(exercises.get("day5.dropout"), "a case"):
            pass
    assert gc.isenabled()


def test_the_in_process_clock_gives_every_function_the_same_head_start_from_the_longest_launch(monkeypatch):
    """timing.compare queues one GPU wait before every timed run of every function it compares: twice the
    longest time the host took to launch one of them (its last warm-up call: the first may compile), within
    HOST_HEADSTART_CYCLES and MAX_HEADSTART_CYCLES. Run here with CUDA's clock calls stood in for."""
    import time
    from grader import timing

    class Event:
        def __init__(self, enable_timing=False):
            pass

        def record(self, stream=None):
            pass

        def elapsed_time(self, other):
            return 1.0

    waits = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: None)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *args: None)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "_sleep", waits.append, raising=False)
    monkeypatch.setattr(timing, "_flush_buffer", lambda: torch.empty(1))
    calls = []

    def launches_slowly():           # its first call compiles (60 ms), later ones launch in 0.5 ms
        calls.append(1)
        time.sleep(0.06 if len(calls) == 1 else 0.0005)

    timing.compare({"slow": launches_slowly, "fast": lambda: None}, budget_ms=1, min_reps=2, max_reps=2)
    assert len(waits) >= 2 + 2 * 2 and len(set(waits)) == 1, waits
    assert timing.HOST_HEADSTART_CYCLES < waits[0] < timing.MAX_HEADSTART_CYCLES, waits[0]


def test_an_output_s_atol_scales_by_its_rms_times_its_own_factor():
    # The training step's weight gradients: atol times twice their rms (day5.training_step's comment says why)
    from dataclasses import replace
    spec = exercises.get("day5.training_step")
    assert spec.atol_scale["dw3"] == ("rms", 2.0) and spec.atol_scale["dx"] == "rms"
    atol, _ = spec.tolerances[torch.float32]
    expected = torch.full((4, 8), 3.0)                      # rms 3
    names = ("dx", "dw3")
    two = replace(spec, output_names=names, atol_scale={"dx": "rms", "dw3": ("rms", 2.0)})
    off = expected.clone()
    off[0, 0] += 1.5 * atol * 3 + spec.tolerances[torch.float32][1] * 3   # 1.5 times atol * rms past rtol
    checks._compare_outputs(two, (expected, off), (expected, expected), torch.float32, "a case")
    with pytest.raises(CheckFailed, match=r"\(dx\) on a case.*1 of 32 elements differ"):
        checks._compare_outputs(two, (off, expected), (expected, expected), torch.float32, "a case")
    further = expected.clone()
    further[0, 0] += 2.5 * atol * 3 + spec.tolerances[torch.float32][1] * 3
    with pytest.raises(CheckFailed, match=r"\(dw3\) on a case"):
        checks._compare_outputs(two, (expected, further), (expected, expected), torch.float32, "a case")
