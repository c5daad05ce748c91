"""The grader's clock: a helper process that times the student's function and the PyTorch baseline.

A speed check's times come from here, not from the student's kernel. The checker starts this helper
for each notebook, as the kernel's own user (CUDA shares memory and events only between processes of
one user) but out of the kernel's reach:

- it starts as the checker's user and makes itself non-dumpable before it becomes the kernel's user
  (which leaves it non-dumpable), so the kernel can neither trace it nor read or write its memory
  through /proc; its environment is the checker's, without the instructor's secrets;
- any signal it receives (a stop, which it sees when it is continued, or any other) voids its checks
  from then on;
- it never runs the student's code.

For one speed check it
1. allocates a few sets of the exercise's inputs at the timed shape in its own GPU memory and hands
   the kernel their handles (`grader.shared_tensors`);
2. in rounds, alternately for the student's function and for the baseline: draws fresh values into
   every set and computes each set's expected result (float64 reference); then times a batch of one
   call per set. For the student: the kernel queues its calls, in the order given, behind a wait on
   a start flag (a page of host memory its GPU reads) and records an interprocess CUDA event after
   the last; the clock starts when it sets the flag and stops when the event has completed. For the
   baseline: the helper calls it on each set itself, from the start to the end of its stream's work.
   Milliseconds per call are the batch's wall time over its calls;
3. checks every timed call's output in place, in the kernel's GPU memory, against the expected
   result, as soon as the clock stops: a kernel that signals completion before its work is done shows
   unfinished outputs there.

So every timed call gets inputs the kernel has never seen, every timed call's output is checked, and
both the clock and the completion it waits for belong to the grader; the baseline is timed the same
way, by the same clock, in a process that never ran student code, interleaved with the student's
batches (a GPU slowed by something else slows both). What stays in the kernel: "Triton, not PyTorch"
(the guard counts launches on every call, and one extra call, outside the clock, runs under the
profiler), docs/threat-model.md.

The checker side is `Timer`; `main` is the helper process. On the CPU the same protocol runs on files
mapped by both processes, at its fewest sets and rounds (speed is never graded there; the tests use it).
"""
from __future__ import annotations

import json
import mmap
import os
import random
import secrets
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

SOCKET_NAME = "timer.sock"
SET_BYTES = 4 << 30           # the inputs of one batch at most (the sets are allocated once per check)
# Without a GPU the clock's figures are never graded and every call runs in Triton's interpreter (a
# FlashAttention backward, 0.3 s): there the protocol runs whole, at MIN_SETS and MIN_ROUNDS.
MAX_SETS, MIN_SETS = 8, 2     # calls per batch
BUDGET_MS = 150               # timed batches per side, about this long in all
MIN_ROUNDS, MAX_ROUNDS = 3, 12
CONNECT_TIMEOUT_S = 120       # for the kernel to connect (it may still be compiling the student's kernel)
REPLY_TIMEOUT_S = 600         # for the kernel to answer one message (a first batch may autotune)
START_TIMEOUT_S = 120         # for the helper to start (importing torch and starting CUDA)
_chooser = random.SystemRandom()


class TimerError(RuntimeError):
    """The helper could not time the function (what the student's feedback says)."""


# -- the checker's side ---------------------------------------------------------------------------------

class Timer:
    """One notebook's helper, started in `folder` (the exchange folder, the kernel's) as user `uid`."""

    def __init__(self, folder: str, uid: int | None, device: str, env: dict | None = None):
        self.folder, self.device = folder, device
        self.socket_path = os.path.join(folder, SOCKET_NAME)
        # Its imports from the checker's own path, not from the notebook's folder (which the kernel writes).
        # In a sandboxed batch the instructor's exercise data is closed to the kernel's user, which the
        # clock becomes: it imports the batch's grader without answers, as the kernel does (it needs the
        # reference and the timed shape, which that copy keeps; it is the grader's, read-only to kernels).
        from grader.pipeline.sandbox import KERNEL_GRADER_ENV
        path = [p for p in [os.environ.get(KERNEL_GRADER_ENV, ""), *sys.path] if os.path.isabs(p)]
        code = f"import sys; sys.path[:0] = {path!r}; from grader.checker.timer import main; main()"
        # Its warnings go to a file of the checker's (a pipe nobody reads while it runs could fill and stop it).
        self._errors = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-c", code, str(os.getuid() if uid is None else uid), device, folder],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._errors, cwd=folder,
            env=_helper_env(folder) if env is None else env, bufsize=0, start_new_session=True)
        self._started, self._output, self.grader = False, b"", None   # grader: where the helper imported it from

    def _line(self, timeout: float) -> dict:
        """The helper's next line of output, read as it comes (a buffered reader would hide a second
        line from select), within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._output:
            left = deadline - time.monotonic()
            ready = left > 0 and select.select([self.process.stdout], [], [], left)[0]
            chunk = os.read(self.process.stdout.fileno(), 65536) if ready else b""
            if not chunk:
                if self.process.poll() is None:
                    self.process.kill()
                self.process.wait()
                self._errors.seek(0)
                err = self._errors.read().decode(errors="replace")[-2000:].strip()
                self.close()
                raise TimerError("the grader's timing helper " + ("did not answer in time" if not ready else
                                 f"ended unexpectedly{': ' + err if err else ''}"))
            self._output += chunk
        line, self._output = self._output.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            raise TimerError(f"the grader's timing helper said {line[:200]!r}") from None

    def request(self, key: str, dtype_name: str, shape) -> None:
        """Start one speed check: the helper prepares the inputs and waits for the kernel to connect
        (once it has started: the request waits in its input until then)."""
        try:
            self.process.stdin.write(json.dumps({"key": key, "dtype": dtype_name, "shape": list(shape)}).encode() + b"\n")
        except OSError:
            raise TimerError("the grader's timing helper has ended") from None

    def started(self) -> bool:
        """Wait until the helper has started (it says so once); raise TimerError if it cannot."""
        if not self._started:
            said = self._line(START_TIMEOUT_S)
            if not said.get("ready"):
                raise TimerError(f"the grader's timing helper did not start: {said.get('error', said)}")
            self._started, self.grader = True, said.get("grader")
        return True

    def result(self) -> dict:
        """{"yours": [ms per call, one per round], "baseline": [...]}, or {"error": why}."""
        self.started()
        return self._line(CONNECT_TIMEOUT_S + 3 * REPLY_TIMEOUT_S)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._errors.close()


def _helper_env(folder: str) -> dict:
    """The checker's environment without the instructor's secrets, with the exchange folder as home."""
    from grader.pipeline.sandbox import SECRETS
    env = {k: v for k, v in os.environ.items() if k not in SECRETS}
    env.update(HOME=folder, TMPDIR=folder, XDG_CACHE_HOME=folder, USER="student", LOGNAME="student")
    return env


# -- the helper process -----------------------------------------------------------------------------------

_signalled = []


def _noticed(signum, frame):
    _signalled.append(signal.Signals(signum).name)


def _become(uid: int) -> None:
    """Non-dumpable first, then the kernel's user: no moment when the kernel could reach this process."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_DUMPABLE = 4
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")
    if uid != os.getuid():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)   # changing user leaves it so; said again all the same
    for signum in (signal.SIGCONT, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1,
                   signal.SIGUSR2, signal.SIGALRM, signal.SIGTERM, signal.SIGTSTP,
                   signal.SIGTTIN, signal.SIGTTOU, signal.SIGURG, signal.SIGWINCH, signal.SIGXCPU):
        signal.signal(signum, _noticed)


def main() -> None:
    uid, device, folder = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    try:
        _become(uid)
        import torch  # noqa: F401 - after the change of user: nothing of it runs as the checker's user
        if device == "cuda":
            torch.cuda.init()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        path = os.path.join(folder, SOCKET_NAME)
        if os.path.lexists(path):
            os.unlink(path)
        listener.bind(path)
        os.chmod(path, 0o600)
        listener.listen(1)
    except Exception as e:   # noqa: BLE001 - said to the checker, which fails the check with it
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
        return
    import grader   # said with "ready": which grader the clock computes with (the batch's copy, sandboxed)
    print(json.dumps({"ready": True, "grader": os.path.dirname(grader.__file__)}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            result = measure(listener, device, folder, request["key"], request["dtype"], tuple(request["shape"]))
        except TimerError as e:
            result = {"error": str(e)}
        except Exception as e:   # noqa: BLE001 - the kernel's messages may be anything: fail the check
            result = {"error": f"the grader's timing failed ({type(e).__name__}: {str(e)[:300]})"}
        print(json.dumps(result), flush=True)


class _Kernel:
    """The connection to the student's kernel for one speed check."""

    def __init__(self, listener, device: str):
        from grader import shared_tensors
        self.wire = shared_tensors
        listener.settimeout(CONNECT_TIMEOUT_S)
        try:
            self.sock, _ = listener.accept()
        except socket.timeout:
            raise TimerError("the notebook's kernel did not connect to the grader's clock") from None
        self.sock.settimeout(REPLY_TIMEOUT_S)
        self.reader = shared_tensors.Reader(self.sock)
        self.device = device
        self.gate, self.gate_path, self.batches = None, None, 0
        self.waits_for_host = False   # the student's calls read values back: no start signal (_student_batch)
        if device == "cuda":   # the start signal (see _student_batch): a page both processes map
            # in memory (CUDA registers a page of /dev/shm, not one of a file on a disk)
            where = "/dev/shm" if os.access("/dev/shm", os.W_OK) else os.path.dirname(listener.getsockname())
            self.gate_path = os.path.join(where, f"grader-start-{secrets.token_hex(8)}")
            with open(os.open(self.gate_path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600), "wb+") as f:
                f.truncate(mmap.PAGESIZE)
                self.gate = mmap.mmap(f.fileno(), mmap.PAGESIZE)

    def send(self, message: dict) -> None:
        self.wire.send(self.sock, message)

    def receive(self, expected: str) -> dict:
        try:
            message = self.reader.receive()
        except (OSError, self.wire.WireError) as e:
            raise TimerError(f"the notebook's kernel stopped answering the grader's clock ({e})") from None
        if message.get("op") == "failed":
            raise TimerError(str(message.get("message", "the timed calls failed"))[:4000])
        if message.get("op") != expected:
            raise TimerError(f"the notebook's kernel answered {str(message.get('op'))[:40]!r} to the grader's "
                             f"clock where {expected!r} was due")
        return message

    def close(self) -> None:
        if self.gate is not None:   # whatever happened, nothing the kernel queued waits for ever
            struct.pack_into("<i", self.gate, 0, 2**31 - 1)
            self.gate.close()
        try:
            self.send({"op": "end"})
        except OSError:
            pass
        self.sock.close()
        if self.gate_path is not None:
            os.unlink(self.gate_path)


def _sets(spec, shape, dtype, device, folder, gen) -> list:
    """As many input sets as fit SET_BYTES (MIN_SETS to MAX_SETS), in memory the kernel can map."""
    import torch
    from grader import shared_tensors
    first = spec.make_inputs(shape, dtype, device, gen)
    if spec.backward:   # a backward pass also takes the output's gradient: the set's last tensor
        first = (*first, torch.empty(_output_shape(spec, first), dtype=dtype, device=device))
    size = sum(a.numel() * a.element_size() for a in first if isinstance(a, torch.Tensor))
    count = max(MIN_SETS, min(MAX_SETS, SET_BYTES // max(size, 1))) if device != "cpu" else MIN_SETS
    sets = []
    for _ in range(count):
        sets.append([shared_tensors.new_shared(tuple(a.shape), a.dtype, device, folder)
                     if isinstance(a, torch.Tensor) else a for a in first])
    return sets


def _refill(spec, sets, shape, dtype, device, gen, expect: bool = True) -> list:
    """Fresh values in every set; the expected result of each (computed before any call sees them).

    Without `expect` (a baseline batch, whose outputs are not checked) no expected result is computed:
    the float64 reference is most of a round's time where the exercise is a large one."""
    import torch
    from grader.student.checks import _as_tuple, expected_gradients
    expected = []
    for args in sets:
        with torch.no_grad():
            for a, new in zip(args, spec.make_inputs(shape, dtype, device, gen)):
                if isinstance(a, torch.Tensor):
                    a.copy_(new)
        if not expect:
            if spec.backward:   # a fresh output gradient all the same
                with torch.no_grad():
                    args[-1].copy_(torch.randn(args[-1].shape, generator=gen, device=args[-1].device))
            expected.append(None)
        elif spec.judge:      # a random operation: its judge decides from the inputs, after the call
            expected.append(None)
        elif spec.backward:   # the input gradients, for a gradient dy drawn after the inputs
            grads, dy = expected_gradients(spec, args[:-1], gen, dtype)
            with torch.no_grad():
                args[-1].copy_(dy)
            expected.append(grads)
        else:
            with torch.no_grad():
                expected.append(_as_tuple(spec.reference(*args)))
    _synchronize(device)
    return expected


def _output_shape(spec, args) -> tuple:
    """The shape of the function's output on these inputs (of the gradient a backward pass takes)."""
    import torch
    with torch.no_grad():
        return tuple(spec.reference(*args).shape)


def _synchronize(device: str) -> None:
    import torch
    if device == "cuda":
        torch.cuda.synchronize()


def _describe_sets(sets) -> list:
    import torch
    from grader import shared_tensors
    return [[{"tensor": shared_tensors.describe(a)} if isinstance(a, torch.Tensor) else {"value": a}
             for a in args] for args in sets]


def _student_batch(kernel, event, spec, sets, expected, dtype, device, shape, warm_up: bool = False) -> float:
    """Milliseconds per call of one batch of the student's calls, each call's output checked."""
    from grader.student.checks import _compare_outputs
    order = list(range(len(sets)))
    _chooser.shuffle(order)
    _synchronize(device)
    if kernel.gate is None or warm_up or kernel.waits_for_host:
        # On the CPU, in the warm-up, and for a function that makes the host wait for its GPU during a
        # call (a value read back with .item(), a synchronize), which a start signal would hold up until
        # it gave up: the clock runs from "go", the kernel's Python included, as in a program.
        start = time.perf_counter()
        kernel.send({"op": "go", "order": order, "start": 0})
        queued = kernel.receive("queued")
        if warm_up:
            kernel.waits_for_host = bool(queued.get("waits_for_host"))
    else:
        # The kernel queues its calls behind a wait on the start signal, a flag in host memory that its
        # GPU reads; the clock starts when this process sets it, so none of the kernel's Python (the
        # message, the launches) is timed, as none of the baseline's is.
        kernel.batches += 1
        kernel.send({"op": "go", "order": order, "start": kernel.batches})
        kernel.receive("queued")
        if event.query():
            raise TimerError(f"{spec.title}: the timed calls finished before the grader's start signal: they did "
                             f"not wait for it. (A call that makes the host wait for the GPU now and then, with "
                             f"a synchronize or a value read back, holds up the calls queued behind the signal.)")
        start = time.perf_counter()
        struct.pack_into("<i", kernel.gate, 0, kernel.batches)
    if event is not None:
        # Polled from the host: cudaEventSynchronize on another process's event keeps a wait queued in
        # this process's context, and the GPU then shares its time between the two contexts (the
        # student's vector add ran at 60% of its speed on an H100).
        while not event.query():
            pass
    ms = (time.perf_counter() - start) * 1e3 / len(order)
    described = kernel.receive("outputs")["outputs"]
    if not isinstance(described, list) or len(described) != len(order):
        raise TimerError(f"{spec.title}: the kernel handed over {len(described)} results for {len(order)} calls")
    # Straight away, in an order the kernel does not know: an output whose work is not finished shows here.
    check = list(range(len(order)))
    _chooser.shuffle(check)
    for i in check:
        try:
            got = tuple(kernel.wire.rebuild(d, device) for d in described[i])
        except (kernel.wire.WireError, TypeError) as e:
            raise TimerError(f"{spec.title}: the output of a timed call could not be read ({e})") from None
        label = f"timed call {i + 1} of a batch at shape {shape} (new input values, checked by the grader's clock)"
        if spec.judge:
            spec.judge(sets[order[i]], got, None, label)
        else:
            _compare_outputs(spec, got, expected[order[i]], dtype, label)
        del got
    return ms


def _baseline_batch(spec, sets, device) -> float:
    """Milliseconds per call of the baseline on every set, by the same clock."""
    from grader.student.checks import baseline_call
    order = list(range(len(sets)))
    _chooser.shuffle(order)
    # The forward call, or for a backward exercise (whose sets end with the output's gradient) one
    # backward pass through a graph made beforehand.
    calls = [baseline_call(spec, sets[i][:-1], sets[i][-1]) if spec.backward else baseline_call(spec, sets[i])
             for i in order]
    _synchronize(device)
    start = time.perf_counter()
    for call in calls:
        call()
    _synchronize(device)
    return (time.perf_counter() - start) * 1e3 / len(order)


def measure(listener, device: str, folder: str, key: str, dtype_name: str, shape: tuple) -> dict:
    """Time one exercise's student function (in the kernel) and baseline (here) in interleaved rounds."""
    import torch
    from grader.compare import CheckFailed
    # The kernel is asked to connect as the check starts: taken first, so that whatever fails below,
    # closing the connection tells the kernel at once (it would otherwise wait REPLY_TIMEOUT_S for a word).
    kernel = _Kernel(listener, device)
    sets = None
    try:
        from grader import exercises
        spec = exercises.get(key)
        dtype = getattr(torch, dtype_name)
        gen = torch.Generator(device=device).manual_seed(_chooser.randrange(2**63))
        sets = _sets(spec, shape, dtype, device, folder, gen)
        kernel.send({"op": "inputs", "sets": _describe_sets(sets), "device": device, "gate": kernel.gate_path})
        ready = kernel.receive("ready")
        event = None
        if device == "cuda":
            try:
                event = torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), bytes.fromhex(ready["event"]))
            except Exception as e:   # noqa: BLE001 - a handle that is not one
                raise TimerError(f"{spec.title}: the kernel's completion event could not be opened ({e})") from None
        # Warm-up, untimed: compiling, autotuning, cuBLAS's choice. The student's outputs are checked all the same.
        _student_batch(kernel, event, spec, sets, _refill(spec, sets, shape, dtype, device, gen), dtype, device, shape,
                       warm_up=True)
        _refill(spec, sets, shape, dtype, device, gen, expect=False)
        estimate = max(_baseline_batch(spec, sets, device), 1e-3)
        rounds = max(MIN_ROUNDS, min(MAX_ROUNDS, int(BUDGET_MS / (estimate * len(sets))))) if device != "cpu" else MIN_ROUNDS
        rounds += _chooser.randint(0, 2)   # the kernel cannot count its way to the last one
        profiled = _chooser.randrange(rounds)
        samples = {"yours": [], "baseline": []}
        for r in range(rounds):
            for side in (("yours", "baseline") if r % 2 == 0 else ("baseline", "yours")):
                expected = _refill(spec, sets, shape, dtype, device, gen, expect=side == "yours")
                if side == "yours":
                    samples[side].append(_student_batch(kernel, event, spec, sets, expected, dtype, device, shape))
                else:
                    samples[side].append(_baseline_batch(spec, sets, device))
            if r == profiled:   # outside the clock: which kernels the GPU ran for one call (in the kernel)
                kernel.send({"op": "profile", "set": _chooser.randrange(len(sets))})
                kernel.receive("profiled")
        if _signalled:
            raise TimerError(f"{spec.title}: the grader's clock received a signal ({', '.join(sorted(set(_signalled)))}) "
                             f"while it timed: not credited")
        return dict(samples, calls_per_batch=len(sets), waits_for_host=kernel.waits_for_host)
    except CheckFailed as e:
        return {"error": str(e)}
    finally:
        kernel.close()
        del sets
        if device == "cuda":
            torch.cuda.empty_cache()
