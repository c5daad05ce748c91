"""The student's side of a graded check: call the student's function on request, hand the results over.

At grading time the verdict of every graded cell comes from the grading checker (`grader.checker`),
which runs in nbgrader's process, never in the student's. It asks the notebook's kernel, through the
functions below, to call the student's function on inputs made from a seed it chooses for that one
case, and to write what the function returned into an exchange folder that the checker created for
this kernel. The checker makes the same inputs itself, computes the expected values, and compares.

Speed checks are timed by the grader's clock (`grader.checker.timer`), a process of its own: here the
kernel only calls the student's function on the inputs the clock shares, in the batches it asks for.

Everything here runs in the student's process, so nothing here is trusted. A notebook that replaces
these functions cannot make a wrong answer pass (the checker compares) nor report a time (the clock
measures), but it can hand over right answers that PyTorch computed: the in-process guard kept here
(launch count, PyTorch-op watch, poisoned allocations, unchanged inputs, the profiled call) is what
still judges "Triton, not PyTorch", and docs/threat-model.md lists how it is bypassed.
"""
from __future__ import annotations

import contextlib
import json
import mmap
import os
import socket
import time
import warnings
from collections import Counter

import torch
import triton
import triton.language as tl

from grader import exercises, shared_tensors
from grader.compare import CheckFailed
from grader.quiet import stderr_to_stdout
from grader.student.checks import compile_ahead as checks_compile_ahead
from grader.student.checks import (_as_tuple, _plain, collect_young_garbage, from_a_function, judged_outputs,
                                   no_automatic_collection, no_saved_tensor_hooks, refuse, run_student, step,
                                   step_leaves, step_memory, student_backward, watch_student, where_it_raised)
from grader.student import integrity
from grader.student.guard import foreign_gpu_work


# The index that names the timed shape among a kernel exercise's cases.
SPEED = -1
# How long the kernel tries to reach the grader's clock (s): it may still be loading torch.
CONNECT_TIMEOUT_S = 120
# The most times the GPU reads the clock's start flag before it starts anyway (a read over the bus takes
# about a microsecond: seconds; the clock sets the flag within milliseconds of the kernel's answer).
START_WAIT_PASSES = 5_000_000


def case_shapes(spec, gpu: bool) -> tuple:
    """Every shape a kernel exercise is checked on, visible then hidden: cases are named by index."""
    return spec.gpu_shapes + spec.hidden_gpu_shapes if gpu else spec.cpu_shapes + spec.hidden_cpu_shapes


def case_shape(spec, gpu: bool, index: int):
    return spec.speed_shape if index == SPEED else case_shapes(spec, gpu)[index]


def case_inputs(spec, shape, dtype, device: str, seed: int):
    """The inputs of one case and the generator that made them, from the case's seed: the checker
    makes the very same ones in its own process."""
    gen = torch.Generator(device=device).manual_seed(seed)
    return spec.make_inputs(shape, dtype, device, gen), gen


def _write(folder: str, request: str, result: dict, tensors=()) -> None:
    """The result of one request: tensors as raw bytes, then a JSON summary written last."""
    described = []
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise CheckFailed(f"your function returned a {type(t).__name__} where a tensor was expected.")
        data = t.detach().contiguous().cpu()
        name = f"{request}-{i}.bin"
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data.reshape(-1).view(torch.uint8).numpy().data if data.numel() else b"")
        described.append({"file": name, "dtype": str(data.dtype).replace("torch.", ""),
                          "shape": list(data.shape), "device": t.device.type})
    result["outputs"] = described
    with open(os.path.join(folder, f"{request}.json"), "w") as f:
        json.dump(result, f)


def _failed(folder: str, request: str, message: str) -> None:
    with open(os.path.join(folder, f"{request}.json"), "w") as f:
        json.dump({"ok": False, "message": message}, f)


def kernel_case(fn, key: str, shape, dtype_name: str, device: str, seed: int, dy_shape, timed: bool, folder: str,
                request: str) -> None:
    """Run the student's function on one case (`timed`: the timed shape's) and write its outputs (or why it
    failed). The checker names the shape: this process needs no list of the hidden cases."""
    spec = exercises.get(key)
    shape = tuple(shape)
    dtype = getattr(torch, dtype_name)
    label = f"shape {shape}, {dtype_name}"
    result = {"ok": True}
    try:
        # No automatic garbage collection from before the call until its outputs are written: a finalizer
        # of the notebook's would run wherever a collection fell, unwatched where the guard looks away
        # (Triton's own work inside a launch) or after the call, over its outputs (docs/threat-model.md)
        with no_automatic_collection(spec, label):
            args, gen = case_inputs(spec, shape, dtype, device, seed)
            if spec.judge:
                outputs = judged_outputs(spec, fn, args, gen, label)
            elif spec.backward:
                # the output gradient, drawn after the inputs as checks.expected_gradients draws it
                dy = torch.randn(tuple(dy_shape), generator=gen, device=device).to(dtype)
                outputs = student_backward(spec, fn, args, dy, label)
                if timed and spec.memory_target and device == "cuda":
                    # Measured here, in the student's process, under the guard (docs/threat-model.md)
                    result["memory"] = step_memory(spec, fn, step_leaves(args), dy)
            else:
                # At the timed shape an autotuner tunes as Triton does: the timed calls use what it chooses.
                outputs = _plain(spec, _as_tuple(run_student(spec, fn, args, label, tune_briefly=False if timed
                                                             else None)), label)
            _write(folder, request, result, outputs)
    except CheckFailed as e:
        _failed(folder, request, str(e))


def compile_ahead(fn, key: str, cases: list, device: str, folder: str, request: str) -> None:
    """Compile what the student's function launches on every (shape, dtype name) case, side by side,
    before the checked cases run one by one (checks.compile_ahead); hands over how many it got through."""
    spec = exercises.get(key)
    done = checks_compile_ahead(spec, fn, [(tuple(shape), getattr(torch, d)) for shape, d in cases], device)
    _write(folder, request, {"ok": True, "cases": done})


def predictions(fn, cases: list, folder: str, request: str) -> None:
    """The student's prediction for each case, as numbers (or the error it raised)."""
    answers = []
    for case in cases:
        try:
            answers.append(float(fn(*case)))
        except Exception as e:
            _failed(folder, request, f"your function raised {type(e).__name__}: {e} for arguments {tuple(case)}.")
            return
    _write(folder, request, {"ok": True, "answers": answers})


class _Clock:
    """The kernel's end of the grader's clock (grader.checker.timer): a Unix socket in the exchange folder."""

    def __init__(self, path: str):
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while True:   # the clock may still be starting (it loads torch)
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.sock.connect(path)
                break
            except OSError:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise CheckFailed("the grader's clock could not be reached") from None
                time.sleep(0.05)
        self.reader = shared_tensors.Reader(self.sock)

    def send(self, message: dict) -> None:
        shared_tensors.send(self.sock, message)

    def receive(self) -> dict:
        return self.reader.receive()


@contextlib.contextmanager
def _host_waits(waits: list):
    """Notes in `waits` every explicit synchronize the block makes (a read of values back to the host,
    `.item()` or `.tolist()`, the guard's record shows): calls that make the host wait for the GPU
    cannot be queued behind the clock's start signal."""
    cuda = torch.cuda
    kept = (cuda.synchronize, cuda.Stream.synchronize, cuda.Event.synchronize)

    def noted(original):
        def synchronize(*args, **kwargs):
            waits.append("synchronize")
            return original(*args, **kwargs)
        return synchronize

    cuda.synchronize, cuda.Stream.synchronize, cuda.Event.synchronize = map(noted, kept)
    try:
        yield
    finally:
        cuda.synchronize, cuda.Stream.synchronize, cuda.Event.synchronize = kept


def _one_call(spec, fn, args, on_gpu: bool, launched: Counter, waits: list, compiled: dict,
              graph: tuple | None = None) -> tuple:
    """One timed call of the student's function under the guard (all of it but poisoned allocations,
    which are GPU work the clock would time: its Python runs before the clock starts, while the GPU
    waits for the start signal), with the checks only this process can make. The names of the Triton
    kernels it launched are added to `launched`, their resource usage to `compiled`; values it read back
    to the host, to `waits`. For a backward exercise `graph` is what _forward_graph made: the call is
    then one backward pass, and its results are the input gradients."""
    stream = torch.cuda.current_stream() if on_gpu else None
    for t in args:   # as an in-place write would: a cache that watches version counters misses
        if isinstance(t, torch.Tensor):
            torch.autograd.graph.increment_version(t)
    with watch_student(spec, args, poison=False, tune_briefly=False, follow_copies=False) as record:
        if spec.times_step:   # a whole step: the set's last tensor is the output's gradient
            *inputs, dy = args
            with no_saved_tensor_hooks(spec):
                out = _plain(spec, step(fn, step_leaves(inputs), dy, spec), "a timed step")
        elif graph is None:
            out = _plain(spec, _as_tuple(fn(*args)), "a timed call")
        else:
            y, leaves, dy = graph
            with no_saved_tensor_hooks(spec):
                out = _plain(spec, torch.autograd.grad(y, leaves, dy, retain_graph=True), "a timed backward pass")
    launched.update(record.kernels)
    for name, usage in record.compiled.items():
        compiled.setdefault(name, usage)
    if record.values_read or record.device_moves:
        waits.append("a value read back")
    if on_gpu and torch.cuda.current_stream() != stream:
        raise CheckFailed(f"{spec.title}: a timed call of your function changed the current CUDA stream. The "
                          f"grader's completion marker would go on that stream and miss your work: leave it as it was.")
    refuse(spec, record, "your function" if graph is None else "your backward", "in one of its timed calls",
           timed=True)
    return out


def _forward_graph(spec, fn, args, on_gpu: bool, launched: Counter, compiled: dict) -> tuple:
    """For a backward exercise, the forward pass of one timed call, run before the clock starts: the
    clock's set is the function's inputs and then the output's gradient dy. Returns (output, the
    inputs that take a gradient, dy). The forward is the student's code too: it runs under the guard."""
    *inputs, dy = args
    leaves = [a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
              for a in inputs]
    (y,) = _one_call(spec, fn, leaves, on_gpu, launched, [], compiled)
    from_a_function(spec, y, "the output of a timed call")
    return y, [a for a in leaves if isinstance(a, torch.Tensor) and a.is_floating_point()], dy


def _shared(outputs, device: str, folder: str) -> list:
    """Descriptions of a call's outputs for the clock to map: GPU memory as it is; on the CPU, a copy
    into a file the clock maps (speed is not graded there)."""
    if device == "cpu":
        copies = []
        for t in outputs:
            copy = shared_tensors.new_shared(tuple(t.shape), t.dtype, "cpu", folder)
            copy.copy_(t)
            copies.append(copy)
        outputs = copies
    return [shared_tensors.describe(t) for t in outputs]


@triton.jit
def _wait_for_start(flag_ptr, batch, most_passes):
    # Spins until the grader's clock writes this batch's number into the flag (host memory, read
    # through the bus on every pass): the calls queued behind it start when the clock starts. After
    # most_passes (seconds) it gives up, so that nothing can leave the GPU waiting for ever.
    passes = 0
    while (tl.load(flag_ptr, volatile=True) < batch) & (passes < most_passes):
        passes += 1


class _StartSignal:
    """The clock's start flag: a page of a file both processes map, which this process's GPU reads."""

    def __init__(self, path: str):
        with open(path, "r+b") as f:
            self.page = mmap.mmap(f.fileno(), mmap.PAGESIZE)
        self.flag = torch.frombuffer(self.page, dtype=torch.int32)
        error = int(torch.cuda.cudart().cudaHostRegister(self.flag.data_ptr(), mmap.PAGESIZE, 3))  # portable, mapped
        if error != 0:
            raise CheckFailed(f"the grader's clock could not give this kernel its start signal (CUDA error {error})")
        self.dtype = torch.int32

    def data_ptr(self) -> int:   # what Triton passes to the kernel: the page's address, which the GPU maps
        return self.flag.data_ptr()

    def queue_wait(self, batch: int) -> None:
        _wait_for_start[(1,)](self, batch, START_WAIT_PASSES)

    def close(self) -> None:
        """Whatever went wrong, every wait queued ends; then the page is let go (a later check maps it
        again, perhaps at the same address, which CUDA refuses to register twice)."""
        self.page[:4] = (2**31 - 1).to_bytes(4, "little")
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaHostUnregister(self.flag.data_ptr())
        del self.flag
        self.page.close()


def timed_batches(fn, key: str, clock_path: str, folder: str, request: str) -> None:
    """Call the student's function in the batches the grader's clock asks for (grader.checker.timer).

    The clock writes fresh inputs into memory it shares with this kernel and says "go" with the order
    of the calls. On a GPU they are queued behind a wait for the clock's start signal, with an event
    recorded after the last; the clock times the batch from its signal to that event, then checks
    every call's output where it lies. This side calls the function, counts its Triton launches and,
    once, runs one call under the profiler: what only this process can see.
    """
    spec = exercises.get(key)
    outputs, failure, clock, start = [], None, None, None
    launched = Counter()   # the student's Triton kernels by name, over every timed call
    compiled = {}          # what each asks of an SM (guard.CallRecord.compiled): said in the feedback
    uncollected = contextlib.ExitStack()
    try:
        # (no automatic garbage collection while the clock's calls run and their outputs are read: a
        # finalizer of the notebook's that computed after a call would not be timed, as in kernel_case)
        uncollected.enter_context(no_automatic_collection(spec, "the timed calls"))
        clock = _Clock(clock_path)
        integrity.no_event_hooks()
        setup = clock.receive()
        device = setup.get("device")
        if setup.get("op") != "inputs" or device not in ("cuda", "cpu"):
            raise CheckFailed("the grader's clock sent no inputs")
        sets = [[shared_tensors.rebuild(a["tensor"], device) if "tensor" in a else a["value"] for a in args]
                for args in setup["sets"]]
        on_gpu = device == "cuda"
        event = torch.cuda.Event(interprocess=True) if on_gpu else None
        start = _StartSignal(setup["gate"]) if on_gpu else None
        clock.send({"op": "ready", "event": event.ipc_handle().hex() if on_gpu else None})
        ran = None
        while True:
            message = clock.receive()
            if message.get("op") == "go":
                outputs = graphs = None   # the last batch's, which the clock has checked
                collect_young_garbage(spec, "the timed calls")   # (what they left in cycles: GPU memory too)
                if spec.times_backward_only:
                    # A backward exercise times backward passes only: the forward passes run first, and
                    # have finished on the GPU before the calls queue behind the start signal.
                    with stderr_to_stdout():
                        graphs = [_forward_graph(spec, fn, sets[i], on_gpu, launched, compiled)
                                  for i in message["order"]]
                    if on_gpu:
                        torch.cuda.synchronize()
                if on_gpu and int(message["start"]):
                    start.queue_wait(int(message["start"]))
                waits = [[] for _ in message["order"]]
                with stderr_to_stdout():
                    outputs = []
                    for n, (i, waited) in enumerate(zip(message["order"], waits)):
                        with _host_waits(waited):
                            outputs.append(_one_call(spec, fn, sets[i], on_gpu, launched, waited, compiled,
                                                     graphs[n] if graphs else None))
                graphs = None
                if on_gpu:
                    event.record(torch.cuda.current_stream())
                # (the first call may tune or load a kernel, once: the others say what every call does)
                clock.send({"op": "queued", "waits_for_host": any(waits[1:])})
                clock.send({"op": "outputs", "outputs": [_shared(o, device, folder) for o in outputs]})
            elif message.get("op") == "profile":
                # One call outside the clock under PyTorch's profiler: the GPU itself says which kernels
                # ran. A function that computes with Triton only while it is watched shows cuBLAS here.
                with gpu_profile() if on_gpu else contextlib.nullcontext([]) as ran:
                    args = sets[message["set"]]
                    graph = _forward_graph(spec, fn, args, on_gpu, launched, compiled) \
                        if spec.times_backward_only else None
                    _one_call(spec, fn, args, on_gpu, launched, [], compiled, graph)
                clock.send({"op": "profiled"})
            elif message.get("op") == "end":
                break
            else:
                raise CheckFailed("the grader's clock sent a message this kernel does not know")
        if ran:
            names, share, allowed = foreign_gpu_work(ran, launched, spec.library_kernels)
            if share > allowed:
                raise CheckFailed(f"{spec.title}: run as in the timed calls, your function spent {share:.0%} of its "
                                  f"GPU time in kernels that are not its Triton kernels "
                                  f"({', '.join(n[:80] for n in names[:3])}). The work must be done by your "
                                  f"Triton kernels, timed or not.")
    except (CheckFailed, integrity.TamperingDetected) as e:
        failure = f"{spec.title}: {e}" if isinstance(e, integrity.TamperingDetected) else str(e)
    except shared_tensors.WireError as e:
        failure = f"{spec.title}: the grader's clock stopped ({e})"
    except Exception as e:
        failure = f"{spec.title}: your function raised while it was timed:\n{where_it_raised(e)}"
    finally:
        if start is not None:
            start.close()
        uncollected.close()
    if failure is not None:
        if clock is not None:
            with contextlib.suppress(OSError):
                clock.send({"op": "failed", "message": failure})
        _failed(folder, request, failure)
    else:
        _write(folder, request, {"ok": True, "compiled": [dict(u, kernel=k) for k, u in list(compiled.items())[:8]]})
    if clock is not None:
        clock.sock.close()


@contextlib.contextmanager
def gpu_profile():
    """The GPU kernels (and memory copies) that ran inside the block, as (name, µs) in order, as the
    profiler (CUPTI) sees them: from the device's side, whatever Python path launched them. The list
    is filled when the block ends."""
    from torch.profiler import ProfilerActivity, profile
    ran = []
    torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")           # the profiler's own notices are not the student's
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            with stderr_to_stdout():
                yield ran
            torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    events.sort(key=lambda e: e.time_range.start)
    ran.extend((e.name, e.time_range.end - e.time_range.start) for e in events)
