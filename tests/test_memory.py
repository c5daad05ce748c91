"""Peak memory as a graded figure (day5.linear_cross_entropy): what the guard counts as a step's memory,
the credit it gives, and (on a GPU) the figures of honest, wasteful and workspace-keeping steps."""
import dataclasses

import pytest
import torch
import triton
import triton.language as tl

from grader import exercises
from grader.compare import CheckFailed
from grader.student import checks
from grader.student.checks import SpeedResult
from grader.student.guard import watch
from conftest import DEVICE, needs_gpu

SPEC = exercises.get("day5.linear_cross_entropy")


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def _scale(x, out):
    _scale_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    return out


def _kept(fn, x):
    with watch(poison=False, memory=True) as record:
        fn(x)
    return record.kept_bytes([x])


def test_memory_made_in_the_call_is_not_kept_memory():
    x = torch.randn(1000, device=DEVICE.torch_device)
    assert _kept(lambda x: _scale(x, torch.empty_like(x)), x) == 0


def test_a_workspace_kept_between_calls_counts_whether_a_kernel_or_pytorch_writes_it():
    x = torch.randn(1000, device=DEVICE.torch_device)
    workspace = torch.empty(50_000, device=DEVICE.torch_device)    # 200,000 bytes, made before the call
    assert _kept(lambda x: _scale(x, workspace[:1000]), x) == 200_000               # a view, to a kernel
    assert _kept(lambda x: torch.mul(x, 2, out=workspace[:1000]), x) == 200_000     # out= of an op
    assert _kept(lambda x: _scale(x, workspace), x) == 200_000                      # the whole of it


def test_the_inputs_are_not_kept_memory_even_through_views():
    x = torch.randn(1000, device=DEVICE.torch_device)
    assert _kept(lambda x: _scale(x[:500], torch.empty(500, device=x.device)), x) == 0


def _result(yours_ms=10.0, yours_gib=1.0, target=0.85, memory_target=3.0):
    return SpeedResult("linear + cross-entropy", (8, 4, 16, 0.1), "bfloat16", "a GPU", "eager", yours_ms, 10.0,
                       target, yours_bytes=int(yours_gib * 2**30), baseline_bytes=6 * 2**30,
                       memory_target=memory_target, memory_hint="sum in bf16")


@pytest.mark.parametrize("yours_ms, yours_gib, credit", [
    (10.0, 1.0, 1.0),      # as fast as eager, 6x less memory
    (10.0, 6.0, 0.0),      # as fast, as much memory as eager: none
    (10.0, 2.4, 2 / 3),    # 2.5x less memory: two thirds of the way from 1.5x to 3x
    (25.0, 1.0, 0.0),      # 6x less memory, but 0.4x the speed (below half the time target)
])
def test_the_speed_credit_is_the_lower_of_time_and_memory(yours_ms, yours_gib, credit):
    assert _result(yours_ms, yours_gib).credit == pytest.approx(credit)


def test_the_report_gives_both_figures_and_says_what_memory_would_pass():
    report = _result(yours_gib=3.0).report()
    assert "peak memory above the inputs: yours 3.000 GiB, eager 6.000 GiB -> 2.00x less (target 3.00x" in report
    assert "2.000 GiB or less above the inputs gets full credit" in report and "sum in bf16" in report
    assert "why it needs memory" not in _result(yours_gib=1.0).report()


def test_without_a_memory_target_the_credit_is_times_alone():
    plain = dataclasses.replace(_result(), yours_bytes=None, baseline_bytes=None, memory_target=None)
    assert plain.credit == 1.0 and "peak memory" not in plain.report()


class _GradientsInForward(torch.autograd.Function):
    """A loss that computes its gradient in its forward (a kernel), whose backward only scales it."""
    @staticmethod
    def forward(ctx, x):
        ctx.grad = _scale(x, torch.empty_like(x))
        return _scale(x, torch.empty_like(x)).sum()

    @staticmethod
    def backward(ctx, dy):
        return ctx.grad.mul(dy)


def test_a_backward_that_only_scales_is_fine_for_a_loss_whose_forward_made_the_gradients():
    x = torch.randn(100, device=DEVICE.torch_device).requires_grad_()
    dy = torch.tensor(1.5, device=DEVICE.torch_device)
    also = dataclasses.replace(SPEC, also_allowed=SPEC.also_allowed + ("mul",))
    (dx,) = checks._student_grads(also, _GradientsInForward.apply(x), [x], dy, "a case")   # no launch needed
    assert torch.allclose(dx, 3 * x.detach())   # the kept "gradient" 2x, scaled by 1.5
    timed_backward_only = dataclasses.replace(also, times_step=False)   # a backward timed alone: it must
    with pytest.raises(CheckFailed, match="did not launch a Triton kernel"):
        checks._student_grads(timed_backward_only, _GradientsInForward.apply(x), [x], dy, "a case")


# -- on a GPU: the figures themselves ---------------------------------------------------------------------

# Four of the reference's chunks of 2048 rows, and a weight large enough next to one chunk's logits that
# a float32 sum of its gradient misses the memory target, as at the graded shape.
SMALL = dataclasses.replace(SPEC, speed_shape=(8192, 3072, 32_000, 0.1))


def _solution(tmp_path, replace=()):
    """The exercise's solution notebook's function (its code cell, with `replace`'s (old, new) edits),
    imported from a file (Triton reads a kernel's source from its file)."""
    import importlib.util
    import nbformat
    from conftest import REPO
    nb = nbformat.read(REPO / "solutions/day5/linear_cross_entropy.ipynb", as_version=4)
    source = next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "linear_cross_entropy")
    for old, new in replace:
        assert old in source, old
        source = source.replace(old, new)
    name = f"lce_solution_{len(list(tmp_path.iterdir()))}"
    path = tmp_path / f"{name}.py"
    path.write_text("import torch\nimport triton\nimport triton.language as tl\n" + source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.linear_cross_entropy


# A float32 sum of the weight's gradient, converted at the end: the lecture's default, 1.8x on an H200.
FLOAT32_SUM = (("torch.empty_like(w)", "torch.empty_like(w, dtype=torch.float32)"),
               ("torch.mm(z.t(), h[start:end], out=grad_w)", "grad_w.copy_(z.t() @ h[start:end])"),
               ("grad_w.addmm_(z.t(), h[start:end])", "grad_w.add_(z.t() @ h[start:end])"),
               ("return grad_h, grad_w, None", "return grad_h, grad_w.to(grad_h.dtype), None"))


@needs_gpu("peak memory is counted by the CUDA caching allocator")
def test_on_a_gpu_the_chunked_step_needs_less_memory_and_a_kept_workspace_counts(tmp_path):
    solution = _solution(tmp_path)
    gen = torch.Generator(device="cuda").manual_seed(0)
    yours, eager = checks.measure_memory(SMALL, solution, torch.bfloat16, gen)
    n, d, v, _ = SMALL.speed_shape
    logits = n * v * 2
    assert eager >= 3 * logits                       # eager holds three logits-sized tensors at once
    assert yours < eager / 3 and yours >= (n + v) * d * 2   # at least its gradients (|h| + |W|)

    workspace = torch.empty(n, v, dtype=torch.bfloat16, device="cuda")   # all the logits, kept between calls

    def with_workspace(h, w, t):
        torch.mm(h.detach(), w.detach().t(), out=workspace)
        return solution(h, w, t)

    kept, _ = checks.measure_memory(SMALL, with_workspace, torch.bfloat16, gen)
    # (less 2 MiB: the caching allocator rounds large blocks up to whole 2 MiB, so the same tensors can
    # count a MiB apart in two steps; one chunk's logits here are 62.5 of them)
    assert kept >= yours + logits - 2 * 2**20


@needs_gpu("peak memory is counted by the CUDA caching allocator")
def test_on_a_gpu_a_float32_sum_of_the_weights_gradient_misses_the_memory_target(tmp_path):
    gen = torch.Generator(device="cuda").manual_seed(1)
    yours, eager = checks.measure_memory(SMALL, _solution(tmp_path, FLOAT32_SUM), torch.bfloat16, gen)
    n, d, v, _ = SMALL.speed_shape
    assert yours >= 3 * v * d * 2            # the float32 sum (2|W|) and its bf16 conversion (|W|)
    assert eager / yours < SPEC.memory_target


@pytest.mark.parametrize("reported, why", [(1000, "less than"), ("1e9", "could not be read"), (True, "could not be read")])
def test_the_checker_refuses_a_step_memory_below_its_gradients_or_not_a_count(reported, why):
    # The kernel's process reports its step's memory: a figure below the gradients the step returns is
    # impossible, and is refused and flagged for the instructor (checked before any GPU measurement).
    from grader.checker.verdicts import Checker
    flagged = []
    checker = Checker(run_in_kernel=None, exchange=None, secret_seed="1", force_cpu=True, flag=flagged.append)
    with pytest.raises(CheckFailed, match=why):
        checker._memory(SMALL, {"ok": True, "memory": reported}, torch.float32)
    assert bool(flagged) == (why == "less than")


def test_the_profiled_call_counts_permitted_library_kernels_as_the_students_and_nothing_else():
    from collections import Counter
    from grader.student.guard import foreign_gpu_work
    ran = [("ce_grad_kernel", 10.0), ("nvjet_tst_192x192_64x4_2x1_v_bz_coopA_TNT", 70.0),
           ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", 20.0)]
    launched = Counter({"ce_grad_kernel": 1})
    assert foreign_gpu_work(ran, launched, SPEC.library_kernels)[1] == 0.0
    assert foreign_gpu_work(ran, launched)[1] == pytest.approx(0.9)                  # elsewhere: foreign
    eager = ran + [("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, float>", 25.0)]
    names, share, allowed = foreign_gpu_work(eager, launched, SPEC.library_kernels)
    assert names == [eager[-1][0]] and share > allowed                               # the loss in PyTorch


@needs_gpu("peak memory is counted by the CUDA caching allocator")
def test_on_a_gpu_a_step_that_resets_the_peak_counter_after_a_large_temporary_still_counts_it(tmp_path):
    solution = _solution(tmp_path)
    n, d, v, _ = SMALL.speed_shape

    def hides_its_logits(h, w, t):
        z = torch.mm(h.detach(), w.detach().t())          # all the logits, then gone
        del z
        torch.cuda.reset_peak_memory_stats()
        return solution(h, w, t)

    gen = torch.Generator(device="cuda").manual_seed(2)
    hidden, _ = checks.measure_memory(SMALL, hides_its_logits, torch.bfloat16, gen)
    assert hidden >= n * v * 2
    big = torch.empty(2**26, device="cuda")          # and outside a measured step, a reset resets again
    del big
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.max_memory_allocated() == torch.cuda.memory_allocated()


# -- memory held from before the step and freed in it --------------------------------------------------------

def _alloc(addr, size):
    return {"action": "alloc", "addr": addr, "size": size}


def _free(addr, size):
    return [{"action": "free_requested", "addr": addr, "size": size},
            {"action": "free_completed", "addr": addr, "size": size}]


def test_a_steps_own_peak_counts_what_it_allocated_and_not_what_it_freed_from_before():
    # A ballast of 100 kept in a global from the last call (address 1) is freed first, then the step's
    # 80 of logits come and go and 10 of gradients stay; a new ballast of 100 is made at the end. The
    # allocator's peak from memory_allocated() at the start says 10 (its floor fell by 100); the step's
    # own allocations held 100 + 10 at once at the end, and 80 + 10 before.
    trace = _free(1, 100) + [_alloc(2, 10), _alloc(3, 80)] + _free(3, 80) + [_alloc(3, 100)]
    assert checks.own_peak(trace) == 110
    honest = [_alloc(2, 10), _alloc(3, 80)] + _free(3, 80) + [_alloc(4, 5)] + _free(4, 5)
    assert checks.own_peak(honest) == 90                       # as the allocator's peak would say
    assert checks.own_peak([]) == 0
    # a free requested but not completed in the step (a block a side stream still uses) still holds its memory
    assert checks.own_peak([_alloc(2, 10), {"action": "free_requested", "addr": 2, "size": 10}, _alloc(3, 5)]) == 15


def test_the_allocators_trace_cannot_be_turned_off_during_a_measured_step():
    names = ("_cuda_record_memory_history", "_peak_test_binding")
    torch._C._peak_test_binding = original = lambda *args: "ran"
    try:
        with checks._neutralized(names):
            assert torch._C._peak_test_binding(None) is None     # a call does nothing
        assert torch._C._peak_test_binding is original           # and the binding is back afterwards
    finally:
        del torch._C._peak_test_binding
    assert "_cuda_record_memory_history" in checks._HISTORY_SWITCHES


@needs_gpu("peak memory is counted by the CUDA caching allocator")
def test_on_a_gpu_a_step_that_frees_a_tensor_kept_from_the_last_call_still_counts_its_peak(tmp_path):
    # The red team's ballast: a tensor kept in a global between calls, freed as the step starts (its
    # room takes the step's logits unseen by a count from memory_allocated() at the start) and made again
    # at the end. Its step's figure was its gradients alone, a third of the honest step's here.
    solution = _solution(tmp_path)
    n, d, v, _ = SMALL.speed_shape
    ballast = []

    def with_ballast(h, w, t):
        ballast.clear()
        loss = solution(h, w, t)
        ballast.append(torch.empty(n * v, dtype=torch.bfloat16, device="cuda"))
        return loss

    gen = torch.Generator(device="cuda").manual_seed(3)   # (measure_memory's first, unmeasured step makes it)
    honest, _ = checks.measure_memory(SMALL, solution, torch.bfloat16, gen)
    hidden, _ = checks.measure_memory(SMALL, with_ballast, torch.bfloat16, gen)
    assert hidden >= honest - 2 * 2**20


@needs_gpu("peak memory is counted by the CUDA caching allocator")
def test_on_a_gpu_a_step_of_more_allocator_events_than_the_trace_keeps_is_refused(tmp_path, monkeypatch):
    # The trace keeps the last HISTORY_ENTRIES events: a step of more could push its peak out of it.
    solution = _solution(tmp_path)
    gen = torch.Generator(device="cuda").manual_seed(4)
    monkeypatch.setattr(checks, "HISTORY_ENTRIES", 4096)
    checks.measure_memory(SMALL, solution, torch.bfloat16, gen)      # the reference: far fewer events

    def many_small_tensors(h, w, t):
        for _ in range(3000):
            torch.empty(1, device="cuda")
        return solution(h, w, t)

    with pytest.raises(CheckFailed, match="allocations and frees"):
        checks.measure_memory(SMALL, many_small_tensors, torch.bfloat16, gen)


# -- CUDA graphs: work captured before the step, and the memory their pools keep ------------------------------

def test_a_graph_replayed_in_a_watched_call_is_refused_with_what_to_do():
    from grader.student.guard import CallRecord
    with pytest.raises(CheckFailed, match="replayed a CUDA graph in the step.*Launch your kernels in the call"):
        checks.refuse(SPEC, CallRecord(launches=2, graph_replays=1), "your function", "in the step")


def _segment(address, size, active, pool=(0, 0), device=0):
    return {"address": address, "total_size": size, "active_size": active, "segment_pool_id": pool,
            "device": device}


def test_idle_memory_of_private_pools_counts_and_the_default_pools_does_not():
    segments = [_segment(0, 100, 10),                      # the default pool: free memory anyone can take
                _segment(1000, 64, 4, pool=(0, 7)),          # a graph's pool: 60 held for its replays
                _segment(2000, 32, 32, pool=(3, 0)),         # a MemPool full of live tensors
                _segment(5000, 50, 0, pool=(0, 9), device=1)]   # another GPU's
    assert checks.idle_in_private_pools(segments, 0) == (60, [(1000, 1064), (2000, 2032)])
    assert checks.idle_in_private_pools([_segment(0, 100, 10)], 0) == (0, [])


def _graphed_logits():
    """A step's part that replays a graph of all the logits (and their float32 copy), captured in the first
    call for each pair of input addresses, outside the measured step (measure_memory's first call): the
    graph's temporaries stay in its private pool, which a replay uses and allocates nothing from. `replay`
    is how the step replays it."""
    graphs = {}

    def logits(h, w, replay):
        key = (h.data_ptr(), w.data_ptr())
        if key not in graphs:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                z = torch.mm(h.detach(), w.detach().t())
                total = z.float().sum()
            graphs[key] = graph, total
        replay(graphs[key][0])
        return graphs[key][1]
    return logits


@needs_gpu("a CUDA graph needs a GPU")
def test_on_a_gpu_a_step_that_replays_a_graph_is_refused(tmp_path):
    solution = _solution(tmp_path)
    logits = _graphed_logits()

    def replays(h, w, t):
        logits(h, w, torch.cuda.CUDAGraph.replay)
        return solution(h, w, t)

    gen = torch.Generator(device="cuda").manual_seed(5)
    with pytest.raises(CheckFailed, match="replayed a CUDA graph"):
        checks.measure_memory(SMALL, replays, torch.bfloat16, gen)


@needs_gpu("a CUDA graph needs a GPU")
def test_on_a_gpu_a_graphs_pool_counts_in_the_step_even_when_its_replay_goes_unseen(tmp_path):
    # A replay through the compiled method itself, as a binding saved past the guard would reach it: the
    # memory its pool keeps still counts, from the allocator's segments.
    import inspect
    solution = _solution(tmp_path)
    n, d, v, _ = SMALL.speed_shape
    logits = _graphed_logits()
    unseen = inspect.unwrap(torch._C._CUDAGraph.replay)

    def replays_unseen(h, w, t):
        logits(h, w, unseen)
        return solution(h, w, t)

    gen = torch.Generator(device="cuda").manual_seed(6)
    honest, _ = checks.measure_memory(SMALL, solution, torch.bfloat16, gen)
    graphed, _ = checks.measure_memory(SMALL, replays_unseen, torch.bfloat16, gen)
    assert graphed >= honest + n * v * 2           # at least the bf16 logits, which the pool keeps


@needs_gpu("a torch.cuda.MemPool needs a GPU")
def test_on_a_gpu_a_steps_tensors_in_a_mempool_count_once(tmp_path):
    # Honest code may allocate in a pool of its own (torch.cuda.MemPool): what the step allocates in the
    # pool's idle memory is the step's peak already, and counts once, as the same tensors in the default pool.
    solution = _solution(tmp_path)
    n, d, v, _ = SMALL.speed_shape
    pool = torch.cuda.MemPool()

    def logits_then_solution(h, w, t):
        z = torch.mm(h.detach(), w.detach().t())
        del z
        return solution(h, w, t)

    def logits_in_a_pool(h, w, t):
        with torch.cuda.use_mem_pool(pool):
            z = torch.mm(h.detach(), w.detach().t())
        del z
        return solution(h, w, t)

    gen = torch.Generator(device="cuda").manual_seed(7)
    plain, _ = checks.measure_memory(SMALL, logits_then_solution, torch.bfloat16, gen)
    pooled, _ = checks.measure_memory(SMALL, logits_in_a_pool, torch.bfloat16, gen)
    assert plain >= n * v * 2 and abs(pooled - plain) <= 4 * 2**20
