"""The watcher around a student's call: launches counted, PyTorch compute flagged, allocations poisoned."""
import importlib.util
from contextlib import contextmanager

import pytest
import torch
import triton

from grader.compare import CheckFailed, is_poison
from grader.student import bounds, guard
from grader.student.guard import Refused, watch
from conftest import DEVICE, needs_gpu, on_gpu_only
import kernels


def test_counts_launches_and_allows_allocation_and_views():
    x = torch.randn(3000, device=DEVICE.torch_device)
    with watch() as record:
        out = kernels.add(x.view(3, 1000).reshape(-1), x.clone())
        out.view(3, 1000).t().contiguous()
    assert record.launches == 1
    assert record.forbidden() == []


def test_flags_every_kind_of_pytorch_compute():
    x = torch.randn(100)
    with watch() as record:
        x + 1
        torch.softmax(x, dim=0)
        torch.nn.functional.gelu(x)
        x.sum()
    assert record.launches == 0
    assert {"aten.add", "aten._softmax", "aten.gelu", "aten.sum"} <= set(record.forbidden())


def test_flags_moving_data_to_another_device():
    x = torch.randn(10)
    with watch() as record:
        x.to("meta")
    assert record.forbidden() == ["copy to meta"]


def test_poisons_fresh_allocations_but_not_initialised_ones():
    with watch() as record:
        a = torch.empty(10)
        b = torch.empty_like(torch.ones(3, dtype=torch.int32))
        c = torch.zeros(4)
    assert torch.isnan(a).all() and is_poison(a).all()
    assert (b == torch.iinfo(torch.int32).max).all()
    assert (c == 0).all()
    assert record.forbidden() == []


def test_restores_triton_after_the_block():
    import triton.runtime.interpreter as interp
    import triton.runtime.jit as jit
    before = jit.JITFunction.__dict__["run"], interp.GridExecutor.__dict__["__call__"]
    try:
        with watch():
            raise RuntimeError("student code failed")
    except RuntimeError:
        pass
    assert (jit.JITFunction.__dict__["run"], interp.GridExecutor.__dict__["__call__"]) == before


@pytest.mark.skipif(DEVICE.is_gpu, reason="about the CPU interpreter")
def test_an_interpreter_launch_is_counted_however_the_kernel_is_reached():
    # Before Triton 3.6, kernel[grid] built the interpreter's GridExecutor directly (InterpretedFunction
    # had no run method of its own): the executor is where every version's launch passes.
    from triton.runtime.interpreter import GridExecutor
    kernel = kernels.add_kernel
    x = torch.randn(100)
    out = torch.empty_like(x)
    with watch() as record:
        GridExecutor(kernel.rewrite(), kernel.arg_names, lambda meta: (1,))(x, x, out, 100, BLOCK=128)
    assert record.launches == 1 and record.forbidden() == [] and torch.equal(out, 2 * x)


def test_an_exercise_may_allow_extra_ops():
    x = torch.randn(10)
    with watch(also_allowed=("sum",)) as record:
        x.sum()
    assert record.forbidden() == []


def test_flags_launches_on_a_side_stream():
    import pytest
    if not DEVICE.is_gpu:
        pytest.skip("needs CUDA streams")
    x = torch.randn(3000, device="cuda")
    side = torch.cuda.Stream()
    with watch() as record:
        with torch.cuda.stream(side):
            kernels.add(x, x)
    assert record.side_streams == 1 and record.forbidden() == []


def test_a_cuda_graphs_replay_is_counted_in_a_watched_call_only():
    # A replay runs kernels captured before the call, unwatched (PyTorch's as well as Triton's): the
    # verdict refuses it (checks.refuse). Both classes a replay goes through carry the count.
    import torch.cuda.graphs
    assert torch.cuda.graphs.CUDAGraph.replay.__name__ == "replay" and \
        torch.cuda.graphs.CUDAGraph.replay.__code__ is guard._graph_replay_wrapper(len).__code__
    replay = guard._graph_replay_wrapper(lambda self: "replayed")
    assert replay(None) == "replayed"                     # outside a watch: counted nowhere
    with watch() as record:
        assert replay(None) == "replayed"
    assert record.graph_replays == 1 and record.forbidden() == []


@needs_gpu("a CUDA graph needs a GPU")
def test_on_a_gpu_replaying_a_captured_graph_is_counted_however_it_is_reached():
    x = torch.randn(3000, device="cuda")
    static = {}
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        static["y"] = x + x                       # (a warm-up off the capture, as PyTorch's docs advise)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static["y"] = x + x
    graphed = torch.cuda.make_graphed_callables(lambda t: t * 2, (x.clone().requires_grad_(),))
    with watch() as record:
        kernels.add(x, x)
        graph.replay()
        torch._C._CUDAGraph.replay(graph)         # the compiled class's method, past the subclass's
        graphed(x.clone().requires_grad_())
    assert record.graph_replays >= 3 and record.launches == 1
    torch.testing.assert_close(static["y"], 2 * x)


def test_an_autotuner_that_benchmarks_in_cuda_graphs_is_timed_plainly_under_the_guard_and_put_back():
    import warnings
    configs = [triton.Config({"BLOCK": 256})]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graphed = triton.autotune(configs, key=["n"], use_cuda_graph=True)(kernels.add_kernel)
    plain = triton.autotune(configs, key=["n"])(kernels.add_kernel)
    assert guard._benchmarks_in_graphs(graphed) and not guard._benchmarks_in_graphs(plain)
    before = dict(vars(graphed))
    with guard._benchmark_replaced(graphed, guard._quick_bench):
        assert graphed.do_bench is guard._quick_bench
    assert {k: vars(graphed).get(k) for k in ("_do_bench", "do_bench")} == \
        {k: before.get(k) for k in ("_do_bench", "do_bench")}


    class Loud:   # the notebook's object as the flag: its methods are not called where nothing watches
        def __bool__(self):
            raise AssertionError("called")
        __eq__ = __bool__
    plain.use_cuda_graph = Loud()
    plain.do_bench = Loud()
    assert not guard._benchmarks_in_graphs(plain)


def _graph_benchmarking_autotuners():
    """The ways an autotuner asks for Triton's CUDA-graph benchmark, each honest."""
    import functools
    import warnings
    from triton.testing import do_bench_cudagraph

    def own_benchmark(kernel_call, quantiles=None):   # a notebook's benchmark that calls it
        return do_bench_cudagraph(kernel_call, rep=5, quantiles=quantiles)
    configs = [triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 1024})]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")             # (the argument is deprecated for do_bench=, still honest)
        yield "use_cuda_graph=True", triton.autotune(configs, key=["n"], use_cuda_graph=True)(kernels.add_kernel)
    for name, bench in (("do_bench=do_bench_cudagraph", do_bench_cudagraph),
                        ("a partial", functools.partial(do_bench_cudagraph, rep=5)),
                        ("a lambda", lambda call, quantiles=None: do_bench_cudagraph(call, quantiles=quantiles)),
                        ("the notebook's own benchmark", own_benchmark)):
        yield name, triton.autotune(configs, key=["n"], do_bench=bench)(kernels.add_kernel)


@pytest.mark.parametrize("way", [name for name, _ in _graph_benchmarking_autotuners()])
def test_an_autotuner_that_benchmarks_in_cuda_graphs_is_honest_however_it_asks(way):
    # triton.testing.do_bench_cudagraph captures and replays each candidate on a stream of its own while
    # the autotuner tunes: Triton's work, or the notebook's own benchmark, not the graded computation; it
    # cannot capture under the guard, and on the CPU there is no CUDA. At the timed shape the autotuner
    # tunes as it would anywhere (tune_briefly=False), in a correctness check quickly.
    from grader import exercises
    from grader.student.checks import run_student
    tuned = dict(_graph_benchmarking_autotuners())[way]

    def add(x, y):
        out = torch.empty_like(x)
        tuned[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, out, x.numel())
        return out

    spec = exercises.get("day1.vector_add")
    n = (1 << 20) if DEVICE.is_gpu else 3000
    x, y = torch.randn(n, device=DEVICE.torch_device), torch.randn(n, device=DEVICE.torch_device)
    for briefly in (False, True):
        tuned.cache.clear()
        torch.testing.assert_close(run_student(spec, add, (x, y), "the timed shape", tune_briefly=briefly), x + y)
    assert triton.testing.do_bench_cudagraph.__wrapped__.__module__ == "triton.testing"   # (Triton's outside a watch)
    if not DEVICE.is_gpu:
        return
    # ... while the same autotuner entered on a side stream launches there
    side = torch.cuda.Stream()

    def add_on_a_side_stream(x, y):
        with torch.cuda.stream(side):
            return add(x, y)
    tuned.cache.clear()
    with pytest.raises(CheckFailed, match="on another CUDA stream"):
        run_student(spec, add_on_a_side_stream, (x, y), "the timed shape", tune_briefly=False)


def test_a_few_values_read_out_are_honest_an_element_by_element_answer_is_not():
    from grader.student.guard import HOST_ELEMENTS
    x = torch.arange(100.0)
    big = torch.zeros(10**6)
    with watch() as record:
        n = int(x[0].item()) + int(x[1].item())    # a count or a size read before launching
        shown = f"{x[:4].tolist()} {big} {x[:3]!r}"  # debugging prints: a few values, a summary
    assert record.forbidden() == [] and n == 1 and "..." in shown
    with watch() as record:
        [x[i].item() for i in range(HOST_ELEMENTS + 1)]
    assert record.forbidden() == [f"Tensor.item (more than {HOST_ELEMENTS} values read out of tensors into "
                                  "Python; printing a few is fine)"]
    for take_out in (lambda t: t.tolist(), lambda t: t.numpy(), lambda t: bytes(t.untyped_storage()),
                     lambda t: __import__("pickle").dumps(t), lambda t: [repr(t[i:i + 30]) for i in range(0, 100, 30)]):
        with watch() as record:
            take_out(x)
        # (bytes() of a storage also makes a tensor of it, put in: said as well)
        assert any("values read out" in f for f in record.forbidden()), take_out
    torch.set_printoptions(threshold=10**9, precision=10)
    try:
        with watch() as record:
            text = repr(x)        # whatever the print options, a print during a graded call is a summary
        assert record.forbidden() == [] and "..." in text and len(text) < 300
        assert "..." not in repr(x)    # and the notebook's options are back afterwards
    finally:
        torch.set_printoptions(profile="default")


def test_a_few_values_put_into_tensors_are_honest_a_mask_from_the_host_is_not():
    import numpy as np
    from grader.student.guard import HOST_ELEMENTS
    with watch() as record:    # a seed, p, a few constants
        torch.tensor([12345]), torch.tensor(0.1), torch.from_numpy(np.arange(8.0)), torch.as_tensor([1.0, 2.0])
    assert record.forbidden() == []
    drawn = (np.random.default_rng(0).random(HOST_ELEMENTS + 1) >= 0.5).astype(np.uint8)
    for put_in, name in ((lambda: torch.from_numpy(drawn), "torch.tensor or torch.from_numpy"),
                         (lambda: torch.tensor(drawn.tolist()), "torch.tensor or torch.from_numpy"),
                         (lambda: torch.as_tensor(drawn), "torch.tensor or torch.from_numpy"),
                         (lambda: torch.frombuffer(bytearray(drawn.tobytes()), dtype=torch.uint8), "torch.frombuffer"),
                         (lambda: torch.utils.dlpack.from_dlpack(drawn), "torch.utils.dlpack.from_dlpack"),
                         (lambda: torch.UntypedStorage.from_buffer(drawn.tobytes(), dtype=torch.uint8),
                          "UntypedStorage.from_buffer")):
        with watch() as record:
            put_in()
        assert record.forbidden() == [f"{name} (more than {HOST_ELEMENTS} values put into tensors from Python or "
                                      f"NumPy: what they hold was computed outside Triton)"], name
    assert torch.frombuffer(bytearray(drawn.tobytes()), dtype=torch.uint8).numel() == drawn.size   # outside: as before


def test_fills_of_numbers_count_once_per_place_and_value():
    from grader.student.guard import HOST_ELEMENTS
    c, keep = torch.empty(32, 32), torch.zeros(1000, dtype=torch.uint8)
    with watch() as record:   # an autotuner's pre_hook zeroing C before each of its benchmarked runs
        for _ in range(10 * HOST_ELEMENTS):
            c.fill_(0)
        torch.full((4,), float("-inf")), torch.full_like(c, 1.0)
    assert record.forbidden() == []
    with watch() as record:   # a mask drawn in Python, written as runs of ones
        for start in range(0, 2 * HOST_ELEMENTS + 2, 2):
            keep[start:start + 1].fill_(1)
    assert record.forbidden() == [f"{HOST_ELEMENTS + 1} fills by aten.fill_ and ops like it (values from Python written "
                                  f"into tensors a few at a time: what they hold was computed outside Triton)"]
    with watch(linear_above=100) as record:   # where an exercise has rows, 4 more a row (a chunk loop's fills)
        for start in range(0, 2 * HOST_ELEMENTS + 2, 2):
            keep[start:start + 1].fill_(1)
    assert record.forbidden() == []


def test_numbers_handed_to_launches_count_their_bits_where_they_change():
    # A random op's mask drawn in Python has a way in without a tensor: numbers handed to launches (as
    # arguments, tuples of them, a grid's sizes, a grid function's, where a view starts in its memory).
    import numpy as np
    from grader.student.guard import _bits, _numbers_in
    x = torch.zeros(4096, device=DEVICE.torch_device)
    pool = [torch.zeros(4096, device=DEVICE.torch_device) for _ in range(8)]   # a pointer difference is a number
    launch = kernels.scale_in_place_kernel
    refused = ["more than 400 bits of numbers handed to kernel launches (a mask or values drawn in Python and "
               "passed in as arguments: draw them in the kernel)"]
    with watch(launch_bits=400) as record:   # the same sizes and scale, 32 times over: 32 x (1 + 6) and the first's
        for _ in range(32):
            launch[(4,)](x, x.numel(), 0.5, BLOCK=1024)
    assert record.forbidden() == []
    ways_in = {"arguments": lambda i: launch[(1,)](x, 8, 1.0 + i, BLOCK=8),
               "a tuple": lambda i: kernels.tuple_kernel[(1,)](x, tuple((i >> k) & 1 for k in range(64))),
               "grid sizes": lambda i: launch[(1 + i,)](x, 8, 1.0, BLOCK=8),
               "a grid function's sizes": lambda i: launch[lambda meta: (1 + i,)](x, 8, 1.0, BLOCK=8),
               "views' offsets": lambda i: launch[(1,)](x[37 * i:], 8, 1.0, BLOCK=8),
               "a choice of tensor": lambda i: launch[(1,)](pool[i % len(pool)], 8, 1.0, BLOCK=8)}
    for way, launched in ways_in.items():
        with pytest.raises(Refused, match="not launched"), watch(launch_bits=400) as record:
            for i in range(48):
                launched(i)
        assert record.forbidden() == refused, way
        # the launch that crossed the limit, and any after it, did not run (the interpreter took a minute
        # for such a call): one launch a few bits of a mask, a cheat's whole call, stops there
        assert 0 < record.launches < 48, (way, record.launches)
    with watch() as record:   # no bound where none is asked for (outputs computed from inputs: reads are bound)
        for i in range(48):
            launch[(1,)](x, 8, 1.0 + i, BLOCK=8)
    assert record.forbidden() == []
    import triton.language as tl
    assert list(_numbers_in(((1, np.int64(2), (tl.constexpr(3),)), {"s": "ab"}, None))) == \
        [((0, 0), 1), ((0, 1), 2), ((0, 2, 0), 3), ((1, "s"), "ab")]
    assert list(_numbers_in([x]))[1:] == [((0, "dtype"), "torch.float32")]
    assert [_bits(v) for v in (True, 0, 5, -5, 0.5, "ab")] == [1, 1, 3, 4, 64, 16]
    assert _bits(1000 + 4 * 512, last=1000) == 12   # an address a row of 512 floats further on


@pytest.mark.skipif(DEVICE.is_gpu, reason="an interpreted kernel's assert is Python (a GPU's is fatal to the context)")
def test_a_kernel_error_the_students_code_catches_is_a_refused_call():
    # Whether a launch raised is a bit of the kernel's values: a bisection reads x[0] 20 launches later.
    from grader import exercises
    from grader.compare import CheckFailed
    from grader.student.checks import refuse
    x = torch.tensor([0.3141])
    with watch() as record:
        assert abs(kernels.first_value_by_bisection(x) - 0.3141) < 1e-5
    assert record.launch_errors[0] == "kernel `below_kernel` raised InterpreterError"
    with pytest.raises(CheckFailed, match="raised InterpreterError on a case, and your code caught it and went on"):
        refuse(exercises.get("day1.vector_add"), record, "your function", "on a case")
    with watch() as record:   # launches that do not raise
        kernels.below_kernel[(1,)](x, 1.0)
    assert record.launch_errors == []


def test_a_sum_over_more_than_the_limit_is_refused_slice_by_slice_too():
    x, losses = torch.randn(8, 100), torch.randn(2, 8)
    with watch(sum_limit=32, also_allowed=("sum",)) as record:
        losses.sum(dim=1), losses[0].sum()
        x[:, :2].sum()              # a few of a large allocation's elements
    assert record.forbidden() == []
    at_once = "aten.sum of {} elements (PyTorch may sum at most 32 elements at once here)"
    in_call = ("aten.sum: {} elements computed from one tensor summed in this call (PyTorch may sum at most "
               "128 elements of them in a call here)")
    for sums, refused in ((lambda: x.sum(dim=1), [at_once.format(800), in_call.format(800)]),
                          (lambda: x[:, :5].sum(), [at_once.format(40)]),
                          (lambda: [x[r, c:c + 10].sum() for r in range(8) for c in range(0, 100, 10)],
                           [in_call.format(130)])):
        with watch(sum_limit=32, also_allowed=("sum",)) as record:
            sums()
        assert sorted(record.forbidden()) == sorted(refused)


def test_a_few_numbers_of_a_workspace_kept_between_calls_are_summed_as_what_they_are():
    # grown by a call of 4096 rows, then read for one of 1 (an honest answer on a GPU's graded shapes)
    workspace = torch.zeros(2 * 4096)
    with watch(sum_limit=32, also_allowed=("sum",)) as record:
        workspace[:2].view(2, 1).sum(dim=1)
    assert record.forbidden() == []
    with watch(sum_limit=32, also_allowed=("sum", "sub")) as record:   # summed by additions: the same count
        for _ in range(40):
            workspace[:2].sub(workspace[2:4])
    assert record.forbidden() == ["aten.sub: 130 elements computed from one tensor summed in this call "
                                  "(PyTorch may sum at most 128 elements of them in a call here)"]


def test_what_a_call_allocated_is_known_by_weak_reference():
    kept = []
    with watch(allocations=True) as record:
        a, b = torch.empty(100), torch.zeros(50)
        kept.append(b.view(5, 10))
        a.view(10, 10)              # a view makes nothing
    assert [shape for _, _, shape, _, _ in record.allocations] == [(100,), (50,)]
    assert [n for _, n, *_ in record.allocations] == [400, 200]   # what each spans, not the guard bytes
    allocations = record.allocations
    del a, b, record      # (the record holds the guard bytes around `a` while it lives)
    assert [ref.expired() for ref, *_ in allocations] == [True, False]   # b lives on in the view


def test_the_memory_a_calls_ops_read_or_write_is_noted_and_a_view_s_is_not():
    # copy_ into a slice, a setitem, an in-place op and out=: each writes into memory from before the call
    # (a red team kept a dropout mask in a module-level buffer by copy_); a sum and a clone of a slice read
    # it (another cloned numbers drawn before the call out of a pool); taking a view reads nothing
    buffers = [torch.zeros(64) for _ in range(7)]
    with watch(allocations=True) as record:
        buffers[0][:8].copy_(torch.ones(8))
        buffers[1][8:16] = torch.ones(8)
        buffers[2].mul_(2.0)
        torch.add(torch.ones(64), 1.0, out=buffers[3])
        buffers[4].sum()
        buffers[5][:16].clone()
        buffers[6][:32].view(4, 8).t()
    noted = {address: nbytes for address, (nbytes, _, _) in record.reached.items()}
    addresses = [b.untyped_storage().data_ptr() for b in buffers]
    assert [noted.get(address, 0) for address in addresses] == [32, 32, 256, 256, 256, 64, 0]   # the bytes used


def test_memory_a_resize_adds_is_poisoned_and_what_it_kept_is_not():
    # What a resize adds holds whatever was there last: on a GPU the caching allocator hands a freed block
    # back as it was, so a dropout backward could find the mask its forward freed. ATen's resize_ (also
    # behind torch.empty(out=)) and the storage's own resize_, which no ATen op shows.
    kept, grown, into, raw = torch.arange(4.0), torch.empty(0), torch.empty(0), torch.empty(0)
    with watch():
        kept.resize_(8)
        grown.resize_(5)
        torch.empty(6, out=into)
        raw.untyped_storage().resize_(16)
    assert kept[:4].tolist() == [0.0, 1.0, 2.0, 3.0] and is_poison(kept[4:]).all()
    assert is_poison(grown).all() and is_poison(into).all()
    assert torch.empty(0, dtype=torch.uint8).set_(raw.untyped_storage()).eq(0xFF).all()


@needs_gpu("the caching allocator is CUDA's")
def test_a_freed_block_that_resize_hands_back_on_a_gpu_is_poisoned():
    # The caching allocator hands the block just freed back to the next request of its size, values and all
    freed = torch.full((1 << 20,), 7.0, device="cuda")
    address = freed.data_ptr()
    del freed
    with watch():
        found = torch.empty(0, device="cuda").resize_(1 << 20)
    assert found.data_ptr() == address     # the same memory (else this test shows nothing)
    assert is_poison(found).all()


def test_honest_hooks_run_watched_and_pass():
    # Triton's own idioms: an autotune config whose pre_hook zeroes the output (an atomics kernel does),
    # a heuristic that picks a block size. They run inside the launch but are the student's code, so
    # they are watched (tests/test_redteam.py: PyTorch computing in them is refused).
    import triton
    import triton.language as tl

    @triton.autotune(configs=[triton.Config({"BLOCK_SIZE": 1024}, pre_hook=lambda nargs: nargs["out_ptr"].zero_())],
                     key=["n"])
    @triton.heuristics({"EVEN": lambda args: args["n"] % 1024 == 0})
    @triton.jit
    def copy_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr, EVEN: tl.constexpr):
        offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)

    x = torch.randn(3000, device=DEVICE.torch_device)
    out = torch.empty_like(x)
    with watch() as record:
        copy_kernel[(triton.cdiv(3000, 1024),)](x, out, 3000)
    assert record.launches == 1 and record.forbidden() == []
    assert torch.equal(out, x)


def _launch_that_asks_the_allocator():
    """What Triton's launcher does for a kernel that makes tensor descriptors: inside the launch, it asks
    the allocator set by triton.set_allocator for global memory (only a GPU launch does it for real)."""
    from triton.runtime import _allocation
    from grader.student import guard

    def launcher_body(self):
        current = _allocation._allocator
        (current.get() if hasattr(current, "get") else current)(64, 16, None)
    return guard._launch_wrapper(launcher_body, counts=False, tritons=True, entry=False)


@pytest.mark.parametrize("computes", [False, True], ids=["allocates", "computes"])
def test_the_allocator_triton_calls_inside_a_launch_is_watched_as_the_students_code(computes):
    import triton
    from triton.runtime import _allocation
    x = torch.randn(100)

    def allocator(size, alignment, stream):
        if computes:
            x.mul(2)        # where the guard would not look if the allocator ran as Triton's own code
        return torch.empty(size, dtype=torch.int8)

    before = _allocation._allocator.get() if hasattr(_allocation._allocator, "get") else _allocation._allocator
    triton.set_allocator(allocator)
    try:
        with watch() as record:
            _launch_that_asks_the_allocator()(object())
    finally:
        triton.set_allocator(before)
    assert ("aten.mul" in record.forbidden()) == computes, record.forbidden()


@needs_gpu("in-kernel tensor descriptors run only on a GPU")
@pytest.mark.parametrize("computes", [False, True], ids=["allocates", "computes"])
def test_a_kernel_that_makes_tensor_descriptors_gets_its_scratch_from_the_watched_allocator(computes):
    # The real thing on a GPU (Hopper or newer): tl.make_tensor_descriptor inside a kernel makes Triton's
    # launcher ask the allocator for global scratch memory, in the middle of the launch.
    import triton
    import triton.language as tl
    from triton.runtime import _allocation
    if torch.cuda.get_device_capability()[0] < 9 or not hasattr(tl, "make_tensor_descriptor"):
        pytest.skip("in-kernel tensor descriptors need Hopper and a Triton that has them")

    @triton.jit
    def copy_tiles(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
        src = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
        dst = tl.make_tensor_descriptor(out_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
        m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
        dst.store([m, n], src.load([m, n]))

    x = torch.randn(256, 192, device="cuda")
    out = torch.empty_like(x)
    asked = []

    def allocator(size, alignment, stream):
        asked.append(size)
        if computes:
            x.mul(2)
        return torch.empty(size, dtype=torch.int8, device="cuda")

    before = _allocation._allocator.get() if hasattr(_allocation._allocator, "get") else _allocation._allocator
    triton.set_allocator(allocator)
    try:
        with watch() as record:
            copy_tiles[(256 // 64, triton.cdiv(192, 64))](x, out, 256, 192, BM=64, BN=64)
        torch.cuda.synchronize()
    finally:
        triton.set_allocator(before)
    assert asked, "the launch did not ask the allocator: the test no longer tests it"
    assert torch.equal(out, x)
    assert record.launches == 1
    assert ("aten.mul" in record.forbidden()) == computes, record.forbidden()


def test_custom_operators_are_looked_into():
    # torch.library.triton_op is PyTorch's documented way to wrap a Triton kernel: it passes. A custom op
    # is opaque to a dispatch mode, so its name proves nothing: `ns::clone` may add, and is refused.
    import triton
    from torch.library import custom_op, triton_op, wrap_triton

    @triton_op("course_guard_test::add", mutates_args={})
    def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        wrap_triton(kernels.add_kernel)[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
        return out

    @custom_op("course_guard_test::clone", mutates_args=())
    def named_clone(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y

    library = torch.library.Library("course_guard_test_lib", "DEF")
    library.define("clone(Tensor x, Tensor y) -> Tensor")
    library.impl("clone", lambda x, y: x + y, "CompositeExplicitAutograd")

    x, y = (torch.randn(3000, device=DEVICE.torch_device) for _ in range(2))
    try:
        with watch() as record:
            out = add(x, y)
    except RuntimeError as e:   # PyTorch 2.7's wrap_triton takes no kernel of Triton's CPU interpreter
        assert not DEVICE.is_gpu and "wrap_triton only works on functions annotated" in str(e), e
    else:
        assert record.launches == 1 and record.forbidden() == [] and torch.allclose(out, x + y)
    with watch() as record:
        named_clone(x, y)
    assert record.forbidden() == ["aten.add"]
    with watch() as record:
        torch.ops.course_guard_test_lib.clone(x, y)
    assert record.forbidden() == ["course_guard_test_lib::clone (a custom operator)"]


def test_gpu_work_outside_the_students_triton_kernels_is_measured_by_name_and_time():
    # What the profiler reports is (kernel name, µs) in order; the guard counts the Triton launches by name.
    from collections import Counter
    from grader.student.guard import foreign_gpu_work
    launched = Counter(matmul_kernel=1)
    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"
    assert foreign_gpu_work([(fill, 3.0), ("matmul_kernel", 900.0)], launched)[:2] == ([], 0.0)
    cublas = "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x256x64"
    names, share, allowed = foreign_gpu_work([("matmul_kernel", 2.0), (cublas, 800.0)], launched)
    assert names == [cublas] and share > 0.99 and share > allowed
    # a Triton kernel named like the cuBLAS one accounts for its own launch, not for cuBLAS's
    names, share, allowed = foreign_gpu_work([(cublas, 2.0), (cublas, 800.0)], Counter({cublas: 1}))
    assert names == [cublas] and share > allowed
    # an exercise's permitted finish in PyTorch (a mean over rows) is a small share
    names, share, allowed = foreign_gpu_work([("ce_kernel", 95.0), ("reduce_kernel<MeanOps>", 5.0)],
                                             Counter(ce_kernel=1))
    assert names == ["reduce_kernel<MeanOps>"] and share <= allowed
    # the same finish beside a faster kernel (the reference cross-entropy on an H200: a mean, a count and
    # a division, 11% of the call) is still allowed: its few µs do not shrink with the GPU
    ran = [("ce_kernel", 62.0), ("reduce_kernel<MeanOps<float>>", 3.0), ("reduce_kernel<SumOps<long>>", 2.5),
           ("BinaryFunctor<float>", 2.5)]
    names, share, allowed = foreign_gpu_work(ran, Counter(ce_kernel=1))
    assert 0.1 < share <= allowed
    # while the whole loss computed by PyTorch beside a token Triton launch is not
    ran = [("ce_kernel", 2.0), ("cunn_SoftMaxForward", 45.0), ("nll_loss_forward_reduce_cuda_kernel_2d", 20.0)]
    names, share, allowed = foreign_gpu_work(ran, Counter(ce_kernel=1))
    assert share > allowed


def test_an_autotuners_candidates_are_compiled_once_for_each_new_key():
    # What the guard compiles ahead of Triton's benchmark is keyed as the autotuner keys its results.
    from types import SimpleNamespace
    from grader.student.guard import _new_key
    tuner = SimpleNamespace(arg_names=["x_ptr", "n", "BLOCK"], keys=["n"], cache={})
    x = torch.empty(4, dtype=torch.float16)
    assert _new_key(tuner, (x, 4096), {"grid": (1,), "warmup": False}) == (4096, "torch.float16")
    assert _new_key(tuner, (x, 4096), {}) is None             # compiled for already
    assert _new_key(tuner, (x.float(), 4096), {}) == (4096, "torch.float32")
    tuner.cache[(8, "torch.float16")] = "tuned"
    assert _new_key(tuner, (x, 8), {}) is None                 # the autotuner has chosen already


def test_a_timed_call_is_not_slowed_by_walking_the_autotuners_state(monkeypatch):
    # The walk of an autotuner's state (_students_objects_in) took 0.3 to 0.6 ms a launch; in a timed call
    # (ops=False: no op is watched, and whatever the GPU runs is timed) the clock took that for the
    # student's time: on an H200 the Day 3 epilogue reference was graded 0.47x instead of 2.16x.
    import triton
    walked = []
    real = guard._students_objects_in
    monkeypatch.setattr(guard, "_students_objects_in", lambda launcher: walked.append(launcher) or real(launcher))
    tuned = triton.autotune(configs=[triton.Config({"BLOCK": 128})], key=["n"])(kernels.add_kernel)
    x = torch.randn(300, device=DEVICE.torch_device)
    out = torch.empty_like(x)
    for ops, walks in ((False, False), (True, True)):
        walked.clear()
        with watch(ops=ops) as record:
            tuned[lambda meta: (triton.cdiv(300, meta["BLOCK"]),)](x, x, out, 300)
        torch.testing.assert_close(out, x + x)
        assert record.launches == 1 and bool(walked) == walks, (ops, walked)


def test_what_the_guard_keeps_of_compiling_ahead_leaves_the_autotuner_as_triton_made_it():
    # On an H200 the reference matmul was refused from its second shape on: the guard had kept the keys it
    # compiled for in a set on the autotuner, and then took that set for the student's own object there.
    import triton
    tuned = triton.autotune(configs=[triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256})],
                            key=["n"])(kernels.add_kernel)
    before = dict(vars(tuned))
    x = torch.empty(4)
    assert guard._new_key(tuned, (x, x, x, 4), {}) is not None
    assert guard._new_key(tuned, (x, x, x, 4), {}) is None      # remembered, by the guard
    assert vars(tuned) == before
    assert guard._students_objects_in(tuned) is None


@needs_gpu("compiling ahead needs a GPU (the interpreter compiles nothing)")
def test_autotune_candidates_compiled_ahead_give_the_same_launch_and_result():
    import triton
    import triton.language as tl

    @triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((128, 4), (256, 4), (512, 8))],
                     key=["n"])
    @triton.jit
    def scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    x = torch.randn(10_000, device="cuda")
    y = torch.empty_like(x)
    grid = lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)  # noqa: E731
    with watch() as record:      # a new key: every candidate compiled ahead, then benchmarked (launched)
        scale[grid](x, y, x.numel())
    torch.testing.assert_close(y, x * 2)
    assert record.forbidden() == []
    assert len(scale.fn.device_caches[torch.cuda.current_device()][0]) == 3   # each compiled once, not twice
    with watch() as record:      # tuned: one launch of the chosen candidate
        scale[grid](x, y.zero_(), x.numel())
    torch.testing.assert_close(y, x * 2)
    assert record.launches == 1 and record.forbidden() == []


@pytest.mark.skipif(DEVICE.is_gpu, reason="about the CPU interpreter")
def test_compile_only_changes_nothing_in_the_interpreter(tmp_path):
    import json
    from grader.student import serve
    from grader.student.guard import compile_only
    x = torch.randn(3000, device=DEVICE.torch_device)
    with compile_only() as on:
        assert on is False
        torch.testing.assert_close(kernels.add(x, x), x + x)     # runs as usual: nothing is held back
    serve.compile_ahead(kernels.add, "day1.vector_add", [[[1000], "float32"]], "cpu", str(tmp_path), "r")
    assert json.loads((tmp_path / "r.json").read_text())["cases"] == 0


@needs_gpu("compiling ahead needs a GPU (the interpreter compiles nothing)")
def test_compile_only_compiles_every_case_and_runs_nothing():
    import triton
    import triton.language as tl
    from grader.student.guard import compile_only

    @triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (128, 256)], key=["n"])
    @triton.jit
    def triple(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 3, mask=offs < n)

    @triton.jit
    def plain(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 3, mask=offs < n)

    def f(x):
        y = torch.zeros_like(x)
        triple[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())
        plain[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
        return y

    cases = [torch.randn(n, device="cuda", dtype=dt) for n in (1000, 4096) for dt in (torch.float16, torch.float32)]
    with compile_only() as on:
        assert on is True
        for x in cases:
            assert not f(x).any()            # launched nothing: the output is as allocated
    device = torch.cuda.current_device()
    compiled_plain = len(plain.device_caches[device][0])
    compiled_tuned = len(triple.fn.device_caches[device][0])
    assert compiled_plain == 4 and compiled_tuned == 8      # every case's kernels, each candidate
    assert triple.cache == {}                                # nothing benchmarked
    for x in cases:                                          # the real calls compile nothing more
        torch.testing.assert_close(f(x), x * 3)
    assert len(plain.device_caches[device][0]) == compiled_plain
    assert len(triple.fn.device_caches[device][0]) == compiled_tuned


@needs_gpu("compiling ahead needs a GPU (the interpreter compiles nothing)")
def test_compiling_ahead_stops_a_function_that_waits_for_its_kernel(tmp_path, monkeypatch):
    import json
    import triton
    from grader.student import checks, serve
    monkeypatch.setattr(checks, "AHEAD_BUDGET_S", 2)

    def add_and_wait(x, y):     # honest, but waits until its kernel has written: never, when nothing runs
        out = torch.zeros_like(x)
        kernels.add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
        while out.abs().sum().item() == 0:
            pass
        return out

    serve.compile_ahead(add_and_wait, "day1.vector_add", [[[1000], "float32"], [[4096], "float32"]], "cuda", str(tmp_path), "r")
    assert json.loads((tmp_path / "r.json").read_text()) == {"ok": True, "cases": 0, "outputs": []}
    x = torch.randn(1000, device="cuda")
    torch.testing.assert_close(add_and_wait(x, x), x + x)   # and the alarm is gone


@needs_gpu("autotuning benchmarks on a GPU")
def test_correctness_checks_tune_quickly_speed_checks_as_triton_does(monkeypatch):
    import triton
    import triton.language as tl
    from grader.student import guard
    benched = []

    def spy(kernel_call, quantiles=None):
        benched.append(kernel_call)
        return guard.triton_quick_bench(kernel_call, quantiles)

    monkeypatch.setattr(guard, "triton_quick_bench", guard._quick_bench, raising=False)
    monkeypatch.setattr(guard, "_quick_bench", spy)

    @triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (128, 256)], key=["n"])
    @triton.jit
    def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    def f(x):
        y = torch.empty_like(x)
        double[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())
        return y

    x = torch.randn(5000, device="cuda")
    with watch():                       # a correctness check: both candidates timed quickly
        torch.testing.assert_close(f(x), x * 2)
    assert len(benched) == 2 and double._do_bench is None and double.__dict__.get("do_bench") is not spy
    x = torch.randn(7000, device="cuda")
    with watch(ops=False):              # a speed check: Triton's own benchmark
        torch.testing.assert_close(f(x), x * 2)
    assert len(benched) == 2 and len(double.cache) == 2


def test_a_store_outside_a_tensor_the_function_allocated_shows_in_its_guard_bytes():
    with watch() as record:
        out = torch.empty(10, device=DEVICE.torch_device)
        other = torch.empty((3, 5), dtype=torch.float16, device=DEVICE.torch_device)
    assert is_poison(out).all() and record.overruns() is None
    out.as_strided((12,), (1,))[10:].zero_()            # two elements past its end (outside the watch)
    message = record.overruns()
    assert "past the end of" in message and "(10,)" in message, message
    with watch() as record:
        out = torch.empty(10, device=DEVICE.torch_device)
    out.as_strided((1,), (1,), out.storage_offset() - 1).zero_()   # the element before it
    assert "before the start of" in record.overruns() and "1 element" in record.overruns()
    del other


@needs_gpu("on a GPU an unmasked store writes into whatever memory follows (the interpreter stops it first)")
def test_an_unmasked_store_past_the_end_of_the_output_fails_the_check():
    import triton
    from grader import exercises
    from grader.compare import CheckFailed
    from grader.student.checks import run_student

    def add_unmasked(x, y):
        out = torch.empty_like(x)
        kernels.add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, 1 << 30, BLOCK=1024)  # no real bound
        return out

    x, y = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    with pytest.raises(CheckFailed, match="past the end of a tensor your function allocated") as failed:
        run_student(exercises.get("day1.vector_add"), add_unmasked, (x, y), "a test case")
    # named as the interpreter names it: the kernel, its pointer argument, how far past the end
    assert "kernel `add_kernel` (its argument `out_ptr`) wrote" in str(failed.value), failed.value
    assert "as far as 24 elements past its end" in str(failed.value), failed.value


# What Day 5's linear + cross-entropy permits: cuBLAS's products, counts, sums and scalings.
PRODUCTS_AND_SUMS = ("mm", "addmm", "addmm_", "t", "ne", "ge", "eq", "sum", "clamp", "clamp_min", "reciprocal", "div",
                     "mul", "mul_", "add", "add_", "sub", "rsub", "neg", "zeros", "zero_", "fill_", "copy_", "_to_copy",
                     "count_nonzero")


def _bookkeeping_only(work):
    """What the guard says of `work(h, w, t)` where PyTorch may apply only linear maps to tensors of more
    elements than there are rows (6)."""
    h, w = torch.randn(6, 4, device=DEVICE.torch_device), torch.randn(9, 4, device=DEVICE.torch_device)
    t = torch.tensor([0, 8, -100, 3, 4, 5], device=DEVICE.torch_device)
    with watch(also_allowed=PRODUCTS_AND_SUMS, linear_above=6) as record:
        work(h, w, t)
    return record.forbidden()


def _honest_chunked_step(h, w, t):
    # lecture 04's shape of a step: a count, the chunk's logits, a kernel over them, then products and sums
    count = (t != -100).sum().clamp(min=1).to(torch.float32)
    grad_w = torch.zeros(w.shape, dtype=torch.float32, device=w.device)
    losses = torch.zeros(h.shape[0], device=h.device)
    for start in (0, 3):
        z = torch.mm(h[start:start + 3], w.t())
        z = kernels.square(z)                                   # the kernel: the logits' gradient
        losses[start:start + 3].copy_(kernels.add(z[:, 0].contiguous(), torch.ones(3, device=h.device)))
        weights = (t[start:start + 3] != -100).to(torch.float32)
        kernels.add(weights, z[0, :3].contiguous())             # per-row weights, passed with the logits
        grad_h = torch.mm(z, w)
        grad_w.add_(torch.mm(z.t(), h[start:start + 3] * count.reciprocal()))   # a float32 sum of dW, scaled
        grad_h.mul_(count.reciprocal())
    torch.count_nonzero(losses * losses.clamp_min(0.0))        # per-row values: anything goes, a few times
    (1 - (losses - count) * -losses).sum()
    (losses.sum() / count).mul(2.0), grad_w.to(torch.float16) * torch.tensor(0.5, device=w.device)


def _column_at_a_time(h, w, t):
    z = torch.mm(h, w.t())
    for j in range(z.shape[1]):
        for _ in range(10):
            z[:, j].clone().mul(z[:, j])                         # squares of 6 numbers at a time


@pytest.mark.parametrize("work, what", [
    (lambda h, w, t: torch.mm(h, w.t()).mul(torch.mm(h, w.t())), "aten.mul of two tensors of more than 6 elements"),
    (lambda h, w, t: torch.mm(h, w.t()).ge(0).sum(), "aten.ge making or using a tensor of more than 6 elements of bool"),
    (lambda h, w, t: torch.clamp(torch.mm(h, w.t())[:, :2], min=torch.mm(h, w.t())[:, 2:4]), "aten.clamp on a tensor"),
    (lambda h, w, t: (h[:, None, :] * w[None]).sum(-1), "aten.mul of two tensors of more than 6"),  # logits, no mm
    (lambda h, w, t: torch.mm(h, w.t()).view(torch.int32).add_(1), "aten.view making or using a tensor of more than 6 elements of int32"),
    (lambda h, w, t: torch.mm(h, w.t()).to(torch.int32), "aten._to_copy making or using a tensor of more than 6 elements of int32"),
    (lambda h, w, t: torch.view_as_real(torch.zeros(6, 9, dtype=torch.complex64, device=h.device)), "of complex64"),
    (lambda h, w, t: torch.mm(h, w.t()).to(torch.float8_e4m3fn), "of float8_e4m3fn"),
    (lambda h, w, t: torch.empty(0, device=h.device).set_(torch.mm(h, w.t()).untyped_storage()), "aten.set_ of a storage"),
    (lambda h, w, t: [torch.mm(h[:1], w.t()) for _ in range(200)], "more than 160 PyTorch ops on tensors of more than 6"),
    (lambda h, w, t: [torch.ones((), device=h.device).clamp(0.0).reciprocal() for _ in range(100)], "more than 88 PyTorch ops other than"),
    (lambda h, w, t: torch.ones(6, 9, device=h.device).div(torch.mm(h, w.t())), "aten.div of two tensors of more than 6"),
    (lambda h, w, t: torch.ones(1, device=h.device).div(torch.mm(h, w.t())), "aten.div by a tensor of more than 6"),
    (lambda h, w, t: torch.div(torch.mm(h, w.t()), 0.25, rounding_mode="floor"), "aten.div with rounding"),
    (lambda h, w, t: kernels.add(torch.mm(h, w.t()), torch.zeros(6, 9, device=h.device)).reciprocal(), "aten.reciprocal on a tensor"),
    (_column_at_a_time, "more than 160 PyTorch ops on tensors of more than 6 elements (or slices of them)"),
    # squares by products (a red team's norm, softmax and SwiGLU with no Triton math): the product of a
    # tensor with itself, with a copy of itself, with another made from it, or a row at a time
    (lambda h, w, t: torch.mm(h, h.t()).reshape(-1)[::7], "aten.mm of two factors computed from the same tensor"),
    (lambda h, w, t: torch.mm(h.clone() * 2, h.t()), "aten.mm of two factors computed from the same tensor"),
    (lambda h, w, t: torch.mm(torch.mm(h, w.t())[:, :1], torch.mm(h, w.t())[:1, :]),
     "aten.mm of two factors computed from the same tensor"),
    (lambda h, w, t: [torch.dot(h[i], h[i]) for i in range(6)], "aten.dot of two factors computed from the same"),
], ids=["square", "step function", "row maximum by clamp", "logits by broadcasting", "bits as int", "cast to int", "complex", "float8", "a storage",
        "too many ops on large tensors", "a number at a time",
        "reciprocal by div", "reciprocal by div of a number", "floor", "kernel copy", "a column at a time",
        "x x^T", "x times a copy of x", "outer product of logits", "a row's dot with itself"])
def test_only_linear_maps_of_large_tensors_are_pytorch_s_where_an_exercise_says_so(work, what):
    forbidden = _bookkeeping_only(work)
    assert any(what in f for f in forbidden), forbidden


# A kernel that only copies a tensor (scaled, shifted, rearranged, with its signs flipped, in place or with
# a little noise): the copy keeps the tensor's sources, so the products that pair the two are refused
# however the pairing is undone (a view, a permutation matrix, a sign vector, an orthogonal mixing).
_G = torch.Generator().manual_seed(5)
_Q = torch.linalg.qr(torch.randn(4, 4, generator=_G))[0].to(DEVICE.torch_device)        # orthogonal
_Q_INVERSE_T = _Q.clone()        # (Q^-1)^T = Q, in a tensor of its own: the two factors share no weight
_ROWS_REVERSED = torch.arange(24).view(6, 4).flip(0).reshape(-1).to(DEVICE.torch_device)
_REVERSE = torch.eye(6).flip(0).to(DEVICE.torch_device)                                   # undoes it
_FEATURES = torch.randperm(4, generator=_G)
_FEATURES_PERMUTED = torch.arange(24).view(6, 4)[:, _FEATURES].reshape(-1).to(DEVICE.torch_device)
_UNPERMUTE = torch.eye(4)[_FEATURES].to(DEVICE.torch_device)                              # c @ it is h
_SIGNS = (torch.randint(0, 2, (4,), generator=_G) * 2 - 1).float().to(DEVICE.torch_device)
_NOISE = 0.03 * torch.randn(6, 4, generator=_G).to(DEVICE.torch_device)


def _token_squares(h, c):
    """Each token's sum of squares, h's rows times c's (a copy of h): a batch of (1, d) x (d, 1) products."""
    return torch.bmm(h.reshape(6, 1, 4), c.reshape(6, 4, 1))


def _kernel_clone_scaled_in_place(h):
    c = h.clone()
    return kernels.scale_in_place(c, 2.0)


def _twice_then_read_by_a_kernel(h, w, t):
    twice = h * 2
    kernels.square(h)                 # h only read: it still holds h (an earlier rule took it as new)
    return torch.mm(h, twice.t())


@pytest.mark.parametrize("work, what", [
    (lambda h, w, t: _token_squares(h, kernels.add(h, torch.zeros_like(h))), "aten.bmm"),
    (lambda h, w, t: torch.mm(h, kernels.add(h, torch.zeros_like(h)).t()).as_strided((6,), (7,)), "aten.mm"),
    (lambda h, w, t: _token_squares(h, kernels.add(h, h)), "aten.bmm"),
    (lambda h, w, t: _token_squares(h, kernels.add(h, torch.ones_like(h))) - h.sum(1).view(6, 1, 1), "aten.bmm"),
    (lambda h, w, t: _token_squares(h, torch.mm(_REVERSE, kernels.gather(h, _ROWS_REVERSED))), "aten.bmm"),
    (lambda h, w, t: _token_squares(h, torch.mm(kernels.gather(h, _FEATURES_PERMUTED), _UNPERMUTE)), "aten.bmm"),
    (lambda h, w, t: _token_squares(h, kernels.mul(h, _SIGNS.expand(6, 4).contiguous()).mul(_SIGNS)), "aten.bmm"),
    (lambda h, w, t: _token_squares(torch.mm(h, _Q.t()), torch.mm(kernels.add(h, torch.zeros_like(h)), _Q_INVERSE_T)),
     "aten.bmm"),
    (lambda h, w, t: _token_squares(h, _kernel_clone_scaled_in_place(h)), "aten.bmm"),
    (lambda h, w, t: _token_squares(h, kernels.add(h, _NOISE)), "aten.bmm"),
    (_twice_then_read_by_a_kernel, "aten.mm"),
], ids=["a copy", "a copy, x c^T's diagonal", "2 x", "x + 1", "rows reversed, undone by a product",
        "features permuted, undone by a product", "signs flipped, undone by a scaling", "mixed apart by Q",
        "a PyTorch clone scaled in place", "a little noise", "x after a kernel read it"])
def test_a_kernel_s_copy_of_a_tensor_keeps_its_sources(work, what):
    forbidden = _bookkeeping_only(work)
    assert any(f"{what} of two factors computed from the same tensor" in f for f in forbidden), forbidden


def test_an_honest_chunked_step_does_only_linear_maps_of_large_tensors():
    assert _bookkeeping_only(_honest_chunked_step) == []
    # a kernel's output is a value of its own: its product with the tensor it was computed from is fine
    assert _bookkeeping_only(lambda h, w, t: torch.mm(kernels.square(h).t(), h)) == []
    # ... and so is one that holds the tensor with large noise added: the kernel computed it from another
    noise = torch.randn(6, 4, device=DEVICE.torch_device)
    assert _bookkeeping_only(lambda h, w, t: torch.mm(kernels.add(h, noise).t(), h)) == []
    with watch(also_allowed=PRODUCTS_AND_SUMS) as record:   # the rule applies only where asked for
        torch.mm(torch.ones(20, 20), torch.ones(20, 20)).clamp_min(0.0)
    assert record.forbidden() == []


def test_guard_bytes_of_launches_inside_an_autotuner_are_looked_at_once_it_returns(monkeypatch):
    # Looking synchronizes with the GPU: after every benchmarked launch it was timed with the candidate
    # (0.4 to 0.5 ms more on each of Day 4's attention candidates on an H200), and the autotuner picked a
    # slower one. A launch of its own is still looked at right after it.
    from grader.student import guard

    class Jit:       # stands for a JITFunction: what the wrapper reads of it
        __name__ = "store_kernel"
        arg_names = ["out_ptr", "n"]

    class Tuner:     # stands for an Autotuner, which benchmarks candidates by launching the kernel
        pass

    jit, tuner = Jit(), Tuner()
    launch = guard._launch_wrapper(lambda self, *a, **k: None, counts=True, tritons=True, entry=True)
    tune = guard._launch_wrapper(lambda self, *a, **k: [launch(jit, *a, **k) for _ in range(20)][-1],
                                 counts=False, tritons=True, entry=True)
    out = torch.empty(64)
    with watch() as record:
        looked = []
        record.guards.append((out, 0, out))   # a guarded allocation, as watch makes them
        monkeypatch.setattr(record, "look_at_guards", lambda kernel, named: looked.append((kernel, named["out_ptr"])))
        tune(tuner, out, 64)
        assert len(looked) == 1 and looked[0][0] == "store_kernel" and looked[0][1] is out
        assert not record.unlooked
        launch(jit, out, 64)
        assert len(looked) == 2
    assert record.launches == 21


class _Values(dict):
    """A dict whose methods a cheat could override: Triton's autotuner calls keys(), items(), ..."""


class _Names(list):
    """A list whose __iter__ a cheat could override: the autotuner iterates its keys on every call."""


def _launchers():
    """(what it is, a launcher of kernels.add_kernel, the launch's extra arguments, refused?): Triton's own
    types pass; a student's subclass of anything Triton's autotuner or heuristics call methods of inside
    their run, where the grader does not watch, is refused. A red team computed the softmax with torch
    in a subclass of each (prune_configs, Config.all_kwargs, dict.keys, dict.items, list.__iter__)."""
    import triton
    from triton.runtime.autotuner import Autotuner

    def tuned(configs, key=("n",), **options):
        return triton.autotune(configs=configs, key=list(key) if type(key) is tuple else key, **options)(
            kernels.add_kernel)

    class Sneaky(Autotuner):
        pass
    subclassed = tuned([triton.Config({}, num_warps=4)])
    subclassed.__class__ = Sneaky   # (Autotuner's constructor differs between Triton versions)

    class MyConfig(triton.Config):
        pass
    return [
        ("a plain autotuned kernel", tuned([triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)]),
         {"BLOCK": 128}, False),
        ("a config with a pre_hook, reset_to_zero and pruning",
         tuned([triton.Config({}, num_warps=4, pre_hook=lambda nargs: nargs["out_ptr"].zero_())],
               reset_to_zero=["out_ptr"], prune_configs_by={"early_config_prune": lambda configs, named, **kw: configs}),
         {"BLOCK": 128}, False),
        ("a plain heuristic", triton.heuristics({"BLOCK": lambda args: 128})(kernels.add_kernel), {}, False),
        ("a subclass of Autotuner", subclassed, {"BLOCK": 128}, True),
        ("a subclass of Config", tuned([MyConfig({}, num_warps=4)]), {"BLOCK": 128}, True),
        ("a config's values in a dict subclass", tuned([triton.Config(_Values(), num_warps=4)]), {"BLOCK": 128}, True),
        ("the keys in a list subclass", tuned([triton.Config({}, num_warps=4)], key=_Names(["n"])), {"BLOCK": 128}, True),
        ("a heuristic's values in a dict subclass",
         triton.heuristics(_Values(BLOCK=lambda args: 128))(kernels.add_kernel), {}, True),
    ]


@pytest.mark.parametrize("case", [what for what, *_ in _launchers()])
def test_a_students_own_class_inside_tritons_autotuning_is_refused_and_tritons_own_types_pass(case):
    import triton
    what, launcher, extra, refused = next(entry for entry in _launchers() if entry[0] == case)
    x = torch.randn(300, device=DEVICE.torch_device)
    y = torch.randn(300, device=DEVICE.torch_device)
    out = torch.empty_like(x)
    with watch() as record:
        launcher[(triton.cdiv(300, 128),)](x, y, out, 300, **extra)
    said = [op for op in record.forbidden() if "Triton calls its methods inside its own work" in op]
    assert bool(said) == refused, (what, record.forbidden())
    if not refused:
        torch.testing.assert_close(out, x + y)


def test_what_a_view_reaches_counts_negative_strides_before_its_first_element():
    # A descriptor's strides may be negative (rows read backwards): what it reaches starts before its base.
    assert bounds.reach([4, 3], [3, 1]) == (0, 12)
    assert bounds.reach([4, 3], [-3, 1]) == (-9, 3)
    assert bounds.reach([4, 0, 3], [3, 3, 1]) == (0, 0)                  # no elements, nothing reached
    assert bounds.span_elements(torch.empty(4, 6)[:, ::2]) == 1 + 3 * 6 + 2 * 2


# Tensor descriptors made on the host: a Triton that makes them and, on a GPU, TMA (Hopper or newer).
needs_host_descriptors = pytest.mark.skipif(
    importlib.util.find_spec("triton.tools.tensor_descriptor") is None or (DEVICE.is_gpu and DEVICE.capability < (9, 0)),
    reason="host tensor descriptors need a Triton that makes them and, on a GPU, Hopper or newer")


@needs_host_descriptors
def test_a_tensor_descriptor_that_reaches_past_its_tensor_is_not_launched():
    # TMA moves whatever a descriptor's shape and strides span, with no mask: one that describes more
    # rows than its tensor has would read the memory after it (another tensor, a buffer kept hidden).
    from triton.tools.tensor_descriptor import TensorDescriptor
    x = torch.randn(32, 16, device=DEVICE.torch_device)
    rows = torch.randn(64, 16, device=DEVICE.torch_device)
    with watch() as record:
        whole = kernels.copy_by_descriptors(x)
    assert record.overreaching_descriptors == [] and record.forbidden() == []
    assert torch.equal(whole, x)
    with watch() as record, pytest.raises(ValueError, match="not launched"):
        kernels.copy_by_descriptors(x, rows=64)
    assert record.overreaching_descriptors == [
        "a tensor descriptor of shape [64, 16] and strides [16, 1] over a tensor of shape (32, 16) reaches its "
        "element 1,023 (counted from the tensor's first), where the tensor's elements span 0 to 511"]
    # The rest of a view's storage is not its own, as in the interpreter's bounds check: the first half of a
    # tensor described as the whole is refused (it passed before, on a GPU only) ...
    with watch() as record, pytest.raises(ValueError, match="not launched"):
        kernels.copy_by_descriptors(rows[:32], rows=64)
    # ... and so are the last columns of a padded view's last row; the view's own span, in any shape, is fine.
    padded = torch.randn(32, 24, device=DEVICE.torch_device)[:, :16]
    assert guard._past_its_tensor(TensorDescriptor(padded, [32, 24], [24, 1], [16, 16]))
    assert guard._past_its_tensor(TensorDescriptor(padded, [32, 16], [24, 1], [16, 16])) == []
    assert guard._past_its_tensor(TensorDescriptor(x, [16, 32], [32, 1], [16, 32])) == []


class _ShapeThatComputes(list):
    """A descriptor's shape of the notebook's own class, which computes with PyTorch whenever it is read:
    inside Triton's work, where the guard does not watch, that would go unseen."""
    def __init__(self, values, x, out):
        super().__init__(values)
        self.x, self.out = x, out

    def __iter__(self):
        self.out.copy_(torch.softmax(self.x, dim=-1))
        return list.__iter__(self)


class _Lie(int):
    """An int that says one size to int() and is another to the launcher."""
    def __int__(self):
        return 32


@needs_host_descriptors
def test_a_tensor_descriptor_of_anything_but_a_tensor_and_plain_ints_is_not_launched():
    import triton
    from triton.tools.tensor_descriptor import TensorDescriptor
    x = torch.randn(32, 16, device=DEVICE.torch_device)
    out = torch.empty_like(x)
    made = {
        "shape is a _ShapeThatComputes": lambda: TensorDescriptor(x, _ShapeThatComputes([32, 16], x, out), [16, 1],
                                                                  [16, 16]),
        "shape is a list of _Lie, int": lambda: TensorDescriptor(x, [_Lie(32), 16], [16, 1], [16, 16]),
        "over a TensorWrapper": lambda: TensorDescriptor(triton.reinterpret(x, triton.language.float32), [32, 16],
                                                         [16, 1], [16, 16]),
    }
    for said, make in made.items():
        desc = make()
        with watch() as record, pytest.raises(ValueError, match="not launched"):
            kernels.copy_rows_kernel[(2,)](desc, TensorDescriptor.from_tensor(out, [16, 16]), BLOCK_M=16, BLOCK_N=16)
        assert len(record.overreaching_descriptors) == 1 and said in record.overreaching_descriptors[0], said


@needs_host_descriptors
def test_what_a_descriptor_launches_is_what_was_checked_though_the_grid_function_widens_its_list():
    # On a GPU the grid function runs after the check, and the launcher reads the descriptor after it:
    # widening the shape list the notebook kept would make TMA read the memory after the tensor. The
    # launch has a copy. (The interpreter copies the arguments before the grid runs: there the list's
    # change never reached the kernel.)
    from triton.tools.tensor_descriptor import TensorDescriptor
    x = torch.randn(32, 16, device=DEVICE.torch_device)
    out = torch.zeros(64, 16, device=DEVICE.torch_device)
    shape = [32, 16]
    x_desc = TensorDescriptor(x, shape, [16, 1], [16, 16])

    def grid(meta):
        shape[0] = 64
        return (4,)
    with watch() as record:
        kernels.copy_rows_kernel[grid](x_desc, TensorDescriptor.from_tensor(out, [16, 16]), BLOCK_M=16, BLOCK_N=16)
    assert record.overreaching_descriptors == [] and shape[0] == 64
    assert torch.equal(out[:32], x) and torch.equal(out[32:], torch.zeros_like(out[32:]))   # TMA's zero padding


@needs_host_descriptors
def test_memory_and_numbers_handed_to_a_launch_in_a_descriptor_count_as_handed_in_the_open():
    from triton.tools.tensor_descriptor import TensorDescriptor
    kept = torch.zeros(128, 16, device=DEVICE.torch_device)       # a buffer kept between calls
    with watch(allocations=True) as record:
        x = torch.randn(64, 16, device=DEVICE.torch_device)
        kernels.copy_rows_kernel[(4,)](TensorDescriptor.from_tensor(x, [16, 16]),
                                       TensorDescriptor.from_tensor(kept, [16, 16]), BLOCK_M=16, BLOCK_N=16)
    assert kept.nbytes in [size for size, _, _ in record.reached.values()]
    # numbers in a descriptor's shape count against the launch bits, as the same numbers in the open do
    wide = torch.zeros(4096, 16, device=DEVICE.torch_device)
    with pytest.raises(Refused), watch(launch_bits=1024) as record:
        for i in range(100):
            kernels.copy_rows_kernel[(1,)](TensorDescriptor(wide, [1 + i * 7919 % 4096, 16], [16, 1], [16, 16]),
                                           TensorDescriptor.from_tensor(torch.empty(16, 16, device=wide.device),
                                                                        [16, 16]), BLOCK_M=16, BLOCK_N=16)
    assert any("more than 1024 bits" in f for f in record.forbidden())


@contextmanager
def _tritons_launch_hook(hook, name="launch_exit_hook"):
    """Leave `hook` in Triton's settings as a notebook could, as long as the block runs (a chain's `add`
    since Triton 3.5, the setting itself in 3.4, a class attribute of CompiledKernel before); yields where
    the setting is, (owner, name)."""
    owner, name = next((owner, n) for owner, n in guard._code_slots() if n == name)
    chain = getattr(owner, name, None)
    if type(getattr(chain, "calls", None)) is list:
        chain.add(hook)
        try:
            yield owner, name
        finally:
            chain.remove(hook)
    else:
        setattr(owner, name, hook)
        try:
            yield owner, name
        finally:
            setattr(owner, name, chain)


def test_code_left_in_tritons_settings_is_watched_where_triton_calls_it():
    # Triton calls its launch hooks inside the launch, where PyTorch is Triton's own work and not
    # watched: a hook added with a method call (`triton.knobs.runtime.launch_exit_hook.add(f)`), which
    # the submission rules cannot tell from any other, could compute the answer there unseen. While a
    # launch runs, such code is the student's, watched like a grid function. (Here Triton's call of the
    # hook is played by hand: the interpreter calls no launch hooks.)
    x, out = torch.randn(64), torch.empty(64)
    seen = []
    cheat = lambda *args: out.copy_(torch.softmax(x, 0))          # noqa: E731
    honest = lambda *args: seen.append(len(args))                  # noqa: E731 (counts launches, say)
    for hook, refused in ((cheat, True), (honest, False)):
        with _tritons_launch_hook(hook) as (owner, name), watch() as record:
            watcher = guard._active.watcher
            with guard._unwatched(watcher), guard._hooks_watched(object(), watcher):   # inside Triton's launch
                getattr(owner, name)({})
            setting = getattr(owner, name)   # afterwards, as it was: the hook itself, not the watched one
            assert hook in getattr(setting, "calls", [setting])
        assert any("softmax" in op for op in record.forbidden()) == refused, record.forbidden()
    assert seen == [1]


@pytest.mark.skipif(not hasattr(__import__("triton"), "knobs"), reason="Triton before 3.4 reads no cache manager class")
def test_a_class_of_the_notebooks_in_tritons_settings_is_refused(monkeypatch):
    # Triton makes a cache manager from the class its setting names (or the environment variable
    # TRITON_CACHE_MANAGER) while it compiles: a notebook's class there would run unwatched.
    import triton
    from triton.runtime.cache import FileCacheManager

    class MyCache(FileCacheManager):
        pass
    assert guard._settings_classes() is None
    monkeypatch.setitem(vars(triton.knobs.cache), "manager_class", MyCache)
    said = guard._settings_classes()
    assert said and "MyCache" in said
    monkeypatch.setitem(vars(triton.knobs.cache), "manager_class", FileCacheManager)   # Triton's own: fine
    assert guard._settings_classes() is None


def test_a_driver_of_the_notebooks_is_refused(monkeypatch):
    # Triton asks its active driver for the device, the stream and the launcher inside every launch:
    # a driver of the notebook's (`triton.runtime.driver.set_active(mine)`) would run unwatched there.
    import sys
    config = sys.modules["triton.runtime.driver"].driver
    name = "_active" if "_active" in vars(config) else "active"    # (`active` before Triton 3.4)
    assert guard._settings_classes() is None

    class MyDriver:
        pass
    monkeypatch.setitem(vars(config), name, MyDriver())
    assert "MyDriver" in (guard._settings_classes() or "")


@on_gpu_only
def test_a_launch_hook_of_the_notebooks_is_watched_on_a_gpu():
    x = torch.randn(4096, device="cuda")
    y, out = torch.randn_like(x), torch.empty_like(x)
    with _tritons_launch_hook(lambda *args: out.copy_(torch.softmax(x, 0))), watch() as record:
        kernels.add_kernel[(16,)](x, y, out, 4096, BLOCK=256)
    assert any("softmax" in op for op in record.forbidden()), record.forbidden()


@on_gpu_only
def test_a_kernel_compiled_ahead_and_launched_by_hand_is_watched_like_any_launch():
    # Triton's softmax tutorial compiles with kernel.warmup(...), reads the register count, and launches
    # the compiled kernel by hand. That launch counts, and its arguments are checked, as kernel[grid]'s.
    x = torch.randn(1000, device="cuda")
    y, out = torch.randn_like(x), torch.empty_like(x)
    compiled = kernels.add_kernel.warmup(x, y, out, 1000, BLOCK=256, grid=(1,))
    compiled._init_handles()
    assert compiled.n_regs > 0
    with watch() as record:
        compiled[(4, 1, 1)](x, y, out, 1000, 256)
    assert record.launches == 1 and record.kernels["add_kernel"] == 1 and not record.forbidden()
    torch.testing.assert_close(out, x + y)

    class Count(int):   # a number that could say one thing to a check and another to the launcher
        pass

    class Grid(tuple):  # Triton's launcher indexes the grid
        pass
    for args, grid, said in (((x, y, out, Count(1000), 256), (4, 1, 1), "Count"),
                             ((x, y, out, 1000, 256), Grid((4, 1, 1)), "grid of type Grid")):
        with watch() as record:
            compiled[grid](*args)
        assert any(said in op for op in record.forbidden()), record.forbidden()
    with watch() as record:   # another stream, handed to the launch
        compiled[(4, 1, 1)](x, y, out, 1000, 256, stream=torch.cuda.Stream().cuda_stream)
    assert record.side_streams == 1


# A ninth red team's ways for the notebook's own objects into Triton's work, where Triton hashed, compared,
# iterated or formatted them unwatched, and the honest arguments the guard had refused (NumPy numbers,
# a torch.Size). Each cheat computes the softmax with PyTorch when Triton touches its object.
class _Cheat:
    """Computes the answer with PyTorch whenever Python asks it anything."""
    def __init__(self, x, out):
        self.x, self.out = x, out

    def work(self):
        self.out.copy_(torch.softmax(self.x, 0))

    def __hash__(self):
        self.work()
        return 0

    def __eq__(self, other):
        self.work()
        return other == "zero"

    def __str__(self):
        self.work()
        return "fp32"


class _Fraction(float):
    def __le__(self, other):
        _Fraction.cheat.work()
        return float.__le__(self, other)


class _Names(list):
    def copy(self):
        _Names.cheat.work()
        return list(self)


class _Wrapped:
    """Stands where an autotuner or heuristics expects a kernel, and launches one itself."""
    def __init__(self, kernel, cheat):
        self.fn, self.kernel, self.arg_names, self.cheat = kernel.fn, kernel, kernel.arg_names, cheat

    def run(self, *args, **kwargs):
        self.cheat.work()
        return self.kernel.run(*args, **kwargs)


def _own_objects_in_tritons_work(cheat, x, y, out):
    """(case, make, refused): make() builds what the notebook would before its call (outside the watch)
    and returns the launch."""
    import numpy as np
    import triton
    import triton.language as tl
    from triton.runtime.autotuner import Heuristics

    def tuned(configs, key=("n",), **options):
        return triton.autotune(configs=configs, key=list(key), **options)(kernels.add_kernel)
    two = [triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256})]
    _Fraction.cheat = _Names.cheat = cheat

    def padded():
        from triton.tools.tensor_descriptor import TensorDescriptor
        x_desc = TensorDescriptor(x[:256].view(16, 16), [16, 16], [16, 1], [16, 16], cheat)
        out_desc = TensorDescriptor(out[:256].view(16, 16), [16, 16], [16, 1], [16, 16])
        return lambda: kernels.copy_rows_kernel[(1,)](x_desc, out_desc, BLOCK_M=16, BLOCK_N=16)
    return [
        ("a constexpr's value hashed as an autotune key",
         lambda: lambda: tuned(two)[(3,)](x, y, out, tl.constexpr(cheat)), True),
        ("a config's value in a constexpr",
         lambda: lambda: tuned([triton.Config({"BLOCK": 128, "C": tl.constexpr(cheat)})])[(3,)](x, y, out, 300), True),
        ("a reinterpreted tensor's dtype",
         lambda: lambda: kernels.add_kernel[(3,)](triton.reinterpret(x, cheat), y, out, 300, BLOCK=128), True),
        ("the pruning's top_k a float of its own",
         lambda: lambda: tuned(two, prune_configs_by={"perf_model": lambda **kw: 1.0, "top_k": _Fraction(1.0)})[(3,)](
             x, y, out, 300), True),
        ("a heuristic around an object of its own",
         lambda: lambda: triton.heuristics({"BLOCK": lambda args: 128})(_Wrapped(kernels.add_kernel, cheat))[(3,)](
             x, y, out, 300), True),
        ("a heuristic's argument names a list of its own",
         lambda: lambda: Heuristics(kernels.add_kernel, _Names(kernels.add_kernel.arg_names), {"BLOCK": lambda a: 128})[
             (3,)](x, y, out, 300), True),
        *([("a descriptor's padding", padded, True)]
          if importlib.util.find_spec("triton.tools.tensor_descriptor") is not None else []),
        # (Triton's interpreter itself takes no NumPy number, a GPU's launcher does: the guard's view of them)
        ("NumPy numbers as arguments (honest)",
         lambda: lambda: _numpy_numbers_pass(np.int64(300), np.float32(1.5)), False),
        ("a kernel given a torch.Size (honest)", lambda: lambda: kernels.tuple_kernel[(1,)](out, x.shape), False),
    ]


def _numpy_numbers_pass(*numbers):
    assert guard._past_its_tensor(list(numbers)) == [] and guard._odd_arguments(numbers, {}) == []


@pytest.mark.parametrize("case", [c for c, *_ in _own_objects_in_tritons_work(None, None, None, None)])
def test_the_notebooks_own_objects_are_refused_wherever_triton_would_touch_them(case):
    x = torch.randn(300, device=DEVICE.torch_device)
    y, out = torch.randn_like(x), torch.zeros_like(x)
    cheat = _Cheat(x, out)
    make, refused = next((m, r) for c, m, r in _own_objects_in_tritons_work(cheat, x, y, out) if c == case)
    launch = make()
    out.zero_()
    with watch() as record:
        try:
            launch()
        except Exception:   # a refusal may also stop the launch; what counts is the record
            if not refused:
                raise       # honest code launches
    assert bool(record.forbidden()) == refused, (case, record.forbidden())


def test_a_way_into_pytorch_that_reads_the_notebooks_own_object_is_watched():
    x, out = torch.randn(300), torch.zeros(300)
    cheat = _Cheat(x, out)

    class Sequence:
        def __len__(self):
            cheat.work()
            return 1

        def __getitem__(self, i):
            if i:
                raise IndexError
            return 1.0
    with watch() as record:
        torch.asarray(Sequence())
    assert any("softmax" in op or "asarray of a Sequence" in op for op in record.forbidden()), record.forbidden()
    with watch() as record:   # honest: lists of numbers and NumPy arrays
        import numpy as np
        torch.asarray([1.0, 2.0]), torch.asarray(np.arange(3))
    assert record.forbidden() == []


def test_printing_a_tensor_of_the_notebooks_own_class_runs_none_of_its_methods():
    x, out = torch.randn(300), torch.zeros(300)
    cheat = _Cheat(x, out)

    class Shown(torch.Tensor):
        def is_neg(self):
            cheat.work()
            return False
    with watch() as record:
        repr(torch.zeros(40).as_subclass(Shown))
    assert not torch.equal(out, torch.softmax(x, 0)) or record.forbidden()


def test_a_kernels_launch_metadata_function_is_watched_where_triton_calls_it():
    # @triton.jit(launch_metadata=f): Triton calls f inside the launch whenever a launch hook is set (a
    # profiler's), so a hook that does nothing and an f that computes would put the work where the guard
    # does not watch. While the launch runs, f is the student's code.
    import triton
    x, out = torch.randn(64), torch.empty(64)

    def metadata(grid, kernel, args):
        out.copy_(torch.softmax(x, 0))
        return {}
    # (the GPU's JITFunction, made here by hand: the interpreter's kernels keep no launch_metadata)
    kernel = triton.runtime.jit.JITFunction(kernels.add_kernel.fn, launch_metadata=metadata)
    with watch() as record:
        watcher = guard._active.watcher
        with guard._unwatched(watcher), guard._hooks_watched(kernel, watcher):   # inside Triton's launch
            kernel.launch_metadata((1,), None, {})
    assert any("softmax" in op for op in record.forbidden()), record.forbidden()
    assert kernel.launch_metadata is metadata   # as it was, afterwards


def test_arguments_and_tuning_state_in_real_projects_styles_are_plain():
    # A sweep of honest code in other projects' styles found these refused by the stricter check: integer
    # dtypes (their signedness is a class nested in tl.dtype), a kernel as a config's value, a method of the
    # student's own object (an nn.Module's) as a hook or cost model.
    import numpy as np
    import triton
    import triton.language as tl

    class Zeroer(torch.nn.Module):
        def hook(self, nargs):
            nargs["out_ptr"].zero_()

    class CostModel:
        def estimate(self, **kwargs):
            return 1.0
    x = torch.randn(8)
    for value in (tl.int32, tl.uint8, tl.int1, tl.float16, tl.constexpr(tl.int64), triton.reinterpret(x, tl.int32),
                  kernels.add_kernel, np.int64(3), np.float32(1.5), x.shape, x.stride()):
        assert guard._odd_part(value) is None, value
    assert guard._odd_part(Zeroer().hook, functions=True) is None     # (held by an autotuner, as a hook)
    assert guard._odd_part(lambda: 0) == "function"                      # (handed to a launch: of no use there)
    tuned = triton.autotune(
        configs=[triton.Config({"BLOCK": 128, "OUT": tl.int32, "ACTIVATION": kernels.add_kernel},
                               pre_hook=Zeroer().hook)],
        key=["n"], prune_configs_by={"perf_model": CostModel().estimate, "top_k": 2})(kernels.add_kernel)
    assert guard._students_objects_in(tuned) is None

    class Hashing:   # ... but a method of an object that hashes in its own way is its object's code
        def __hash__(self):
            return 0

        def hook(self, nargs):
            pass
    assert guard._odd_part(Hashing().hook, functions=True) == "Hashing"
    tuned = triton.autotune(configs=[triton.Config({"BLOCK": 128}, pre_hook=Hashing().hook)], key=["n"])(
        kernels.add_kernel)
    assert guard._students_objects_in(tuned) == "Autotuner configs holding a Hashing"
