"""The grader's clock (grader.checker.timer): a process of its own times the student's function and the
baseline, checks every timed call's output, and cannot be reached by the kernel's user.

On the CPU the protocol runs on files both processes map (speed is never graded there); the GPU's
CUDA handles, start signal and event are exercised by the autograde runs on a GPU (docs/course-run.md)
and by the GPU tests in test_redteam.py and test_timing_cheats.py.
"""
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch

import kernels
from clock import time_with_the_clock
from conftest import DEVICE, on_cpu_only
from grader import shared_tensors
from grader.checker import timer
from grader.checker.exchange import Exchange
from grader.lectures import day5 as day5_lectures
from grader.pipeline import sandbox


def test_an_honest_function_and_the_baseline_are_timed_by_the_same_clock(tmp_path):
    measured, handed = time_with_the_clock(kernels.add, tmp_path)
    assert handed["ok"], handed
    assert "error" not in measured, measured
    assert timer.MIN_ROUNDS <= len(measured["yours"]) == len(measured["baseline"]) <= timer.MAX_ROUNDS + 2
    assert all(ms > 0 for ms in measured["yours"] + measured["baseline"])
    assert timer.MIN_SETS <= measured["calls_per_batch"] <= timer.MAX_SETS
    if not DEVICE.is_gpu:   # figures never graded, every call interpreted: the fewest sets and rounds
        assert measured["calls_per_batch"] == timer.MIN_SETS and len(measured["yours"]) <= timer.MIN_ROUNDS + 2
    # what the kernel asked of an SM, for the feedback: only a GPU's driver loads a compiled kernel
    assert bool(handed["compiled"]) == DEVICE.is_gpu, handed
    if DEVICE.is_gpu:
        assert {"registers", "local_bytes", "num_warps", "shared", "kernel"} <= set(handed["compiled"][0])


def _add_reading_a_value(x, y):
    out = kernels.add(x, y)
    assert out[0].item() == out[0].item()   # a debugging read: the host waits for the GPU
    return out


def test_a_function_that_reads_values_back_is_timed_from_go_with_its_python(tmp_path):
    # Queued behind the start signal, its read would wait for a GPU that waits for the signal.
    measured, handed = time_with_the_clock(_add_reading_a_value, tmp_path)
    assert "error" not in measured and measured["waits_for_host"] is True, measured
    measured, handed = time_with_the_clock(kernels.add, tmp_path / "honest")
    assert measured["waits_for_host"] is False, measured


@pytest.mark.parametrize("cheat, said", [
    # skips the work on every other call: its output there is whatever the allocation held
    ("add_every_other_call", "checked by the grader's clock"),
    # hands back what it computed for the same tensors before
    ("add_cached_by_address", "launched no Triton kernel"),
    ("add_wrong_op", "checked by the grader's clock"),
    ("add_skipping_the_last_block", "checked by the grader's clock"),
    ("add_that_raises", "raised while it was timed"),
    # launches a kernel for show and computes with PyTorch (on a GPU, perhaps on a stream the clock's
    # event does not wait for): the guard watches every timed call
    ("add_with_torch", "computed with PyTorch"),
])
def test_a_function_that_does_not_do_the_work_in_every_timed_call_gets_no_time(tmp_path, cheat, said):
    measured, handed = time_with_the_clock(getattr(kernels, cheat), tmp_path)
    assert "error" in measured and said in measured["error"], measured


@pytest.mark.parametrize("cache", ["add_cached_by_fingerprint", "add_cached_by_version"])
def test_a_cache_keyed_on_the_values_or_their_version_never_hits(tmp_path, cache):
    # every batch gets fresh values, and each call marks its inputs as written: the honest path of
    # these functions is the one that is timed
    measured, handed = time_with_the_clock(getattr(kernels, cache), tmp_path)
    assert "error" not in measured and handed["ok"], measured


def _fake_kernel(path, answer):
    """A kernel's side written by hand: connects, then answers each message with answer(message)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    deadline = time.monotonic() + 60
    while True:
        try:
            sock.connect(path)
            break
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    reader = shared_tensors.Reader(sock)
    try:
        while True:
            message = reader.receive()
            if message["op"] == "end":
                return
            for reply in answer(message):
                shared_tensors.send(sock, reply)
    except shared_tensors.WireError:
        return
    finally:
        sock.close()


def _forging(outputs):
    def answer(message):
        if message["op"] == "inputs":
            return [{"op": "ready", "event": None}]
        if message["op"] == "go":
            return [{"op": "queued"}, {"op": "outputs", "outputs": outputs(message)}]
        return [{"op": "profiled"}]
    return answer


@on_cpu_only
@pytest.mark.parametrize("outputs, said", [
    # a tensor described as larger than the memory behind it
    (lambda message: [[{"kind": "file", "path": "/dev/null", "size": 4, "dtype": "float32", "shape": [4099],
                        "stride": [1], "offset": 0}]] * len(message["order"]), "could not be read"),
    # no output at all for some calls
    (lambda message: [], "results for"),
    # a dtype outside the list
    (lambda message: [[{"kind": "file", "path": "x", "size": 4, "dtype": "object", "shape": [1], "stride": [1],
                        "offset": 0}]] * len(message["order"]), "could not be read"),
])
def test_a_forged_kernel_side_gets_no_time(tmp_path, outputs, said):
    clock = timer.Timer(str(tmp_path), None, "cpu")
    try:
        clock.request("day1.vector_add", "float32", (4099,))
        _fake_kernel(clock.socket_path, _forging(outputs))
        measured = clock.result()
    finally:
        clock.close()
    assert "error" in measured and said in measured["error"], measured


@on_cpu_only
def test_a_kernel_that_answers_out_of_turn_gets_no_time(tmp_path):
    clock = timer.Timer(str(tmp_path), None, "cpu")
    try:
        clock.request("day1.vector_add", "float32", (4099,))
        _fake_kernel(clock.socket_path, lambda message: [{"op": "outputs", "outputs": []}])
        measured = clock.result()
    finally:
        clock.close()
    assert "error" in measured and "where 'ready' was due" in measured["error"], measured


def test_a_signal_to_the_clock_voids_its_measurements(tmp_path):
    # The kernel's user may signal the clock (it is the same user): a stop, to slow the baseline's
    # batches, shows as a SIGCONT when it goes on, and any signal voids the measurement.
    def signal_it(clock):
        clock.started()   # its handlers are in place
        os.kill(clock.process.pid, signal.SIGUSR1)

    measured, handed = time_with_the_clock(kernels.add, tmp_path, before_kernel=signal_it)
    assert "error" in measured and "SIGUSR1" in measured["error"], measured


def test_the_clock_starts_without_the_instructors_secrets(monkeypatch, tmp_path):
    monkeypatch.setenv("NBGRADER_DB_URL", "postgresql://grader:secret@db/gradebook")
    env = timer._helper_env(str(tmp_path))
    assert "NBGRADER_DB_URL" not in env and env["HOME"] == str(tmp_path)


def _readable_by(uid, path) -> bool:
    probe = subprocess.run([sys.executable, "-c", f"open({path!r}, 'rb').read()"], preexec_fn=sandbox._drop(uid),
                           capture_output=True, text=True, timeout=60)
    return probe.returncode == 0


@pytest.mark.skipif(bool(sandbox.unavailable()), reason="needs root and a plain user that can run Python")
def test_the_kernels_user_cannot_reach_the_clock_though_it_is_the_same_user():
    uid = sandbox.kernel_uid() + 7
    exchange = Exchange(uid)   # the kernel's folder, as grading makes it
    clock = timer.Timer(exchange.folder, uid, DEVICE.torch_device)
    plain = subprocess.Popen(["sleep", "60"], preexec_fn=sandbox._drop(uid))
    try:
        assert clock.started()
        status = open(f"/proc/{clock.process.pid}/status").read()
        assert f"Uid:\t{uid}\t{uid}" in status, status
        # a plain process of that user is open to it: the test can fail
        assert _readable_by(uid, f"/proc/{plain.pid}/environ")
        for what in ("environ", "maps", "mem"):
            assert not _readable_by(uid, f"/proc/{clock.process.pid}/{what}"), what
    finally:
        plain.kill()
        clock.close()
        exchange.close()
        sandbox.kill_user(uid)


def test_a_clock_that_cannot_start_or_ends_fails_the_check_with_a_reason(tmp_path):
    far = tmp_path / ("x" * 120)     # no Unix socket can be made there: the path is too long
    far.mkdir()
    clock = timer.Timer(str(far), None, "cpu")
    with pytest.raises(timer.TimerError, match="did not start: OSError"):
        clock.started()
    clock.close()
    clock = timer.Timer(str(tmp_path), None, "cpu")
    assert clock.started()
    clock.process.kill()
    with pytest.raises(timer.TimerError, match="ended unexpectedly"):
        clock.result()
    clock.close()


def test_the_wire_reads_json_objects_only():
    # What the kernel sends the clock (and writes for the checker) is parsed as JSON, never unpickled
    from grader import shared_tensors
    a, b = socket.socketpair()
    with a, b:
        reader = shared_tensors.Reader(b)
        for sent, said in ((b'{"ok": true}\n', None), (b"\x80\x04K\x01.\n", "is not JSON"), (b"[1, 2]\n", "not a JSON object")):
            a.sendall(sent)
            if said is None:
                assert reader.receive() == {"ok": True}
            else:
                with pytest.raises(shared_tensors.WireError, match=said):
                    reader.receive()
    from grader.checker.exchange import ExchangeError
    with pytest.raises(ExchangeError, match="the result summary is not a JSON object"):
        shared_tensors.json_object(b'"text"', "the result summary", ExchangeError)


def test_a_check_the_clock_cannot_prepare_ends_the_kernels_wait_at_once(tmp_path):
    # The clock takes the kernel's connection before anything that may fail (here an unknown exercise):
    # the kernel is told "end" at once instead of waiting for a word until its reply timeout.
    clock = timer.Timer(str(tmp_path), None, "cpu")
    try:
        clock.request("day1.no_such_exercise", "float32", (4099,))
        assert clock.started()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(60)
        sock.connect(clock.socket_path)
        assert shared_tensors.Reader(sock).receive() == {"op": "end"}
        sock.close()
        assert "error" in clock.result()
    finally:
        clock.close()


def test_in_a_sandboxed_batch_the_clock_imports_the_batchs_grader_without_answers(monkeypatch, tmp_path):
    # The batch closes the instructor's exercise data to the kernels' users, which the clock becomes: it
    # imports the copy the kernels import (sandbox.kernel_grader), and times with it.
    copy = sandbox.kernel_grader(tmp_path / "code")
    monkeypatch.setenv(sandbox.KERNEL_GRADER_ENV, str(copy))
    measured, handed = time_with_the_clock(kernels.add, tmp_path / "exchange")
    assert handed["ok"] and "error" not in measured, (handed, measured)
    clock = timer.Timer(str(tmp_path), None, "cpu")
    try:
        assert clock.started() and clock.grader == str(copy / "grader")
    finally:
        clock.close()


class _BackwardWithoutD(torch.autograd.Function):
    """The lectures' FlashAttention with the delta pre-pass left out (D taken as 0): wrong gradients."""

    @staticmethod
    def forward(ctx, q, k, v, causal):
        return day5_lectures.FlashAttention.forward(ctx, q, k, v, causal)

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        return *day5_lectures.attention_backward(q, k, v, torch.zeros_like(o), lse, do.contiguous(), ctx.causal), None


@pytest.mark.parametrize("fn, said", [
    (day5_lectures.flash_attention, None),
    (lambda q, k, v, causal=False: _BackwardWithoutD.apply(q, k, v, causal), "checked by the grader's clock"),
    (lambda q, k, v, causal=False: day5_lectures.attention_forward(q, k, v, causal)[0],
     "does not come from a torch.autograd.Function"),
], ids=["honest", "wrong gradients", "no autograd.Function"])
def test_a_backward_exercise_times_and_checks_the_backward_pass(tmp_path, fn, said):
    # The clock's set ends with the output's gradient; the kernel runs the forward passes before the
    # clock starts and hands over the input gradients, which the clock checks against float64 autograd.
    # (a small causal case on the CPU: the interpreter runs every timed call)
    measured, handed = time_with_the_clock(fn, tmp_path, key="day5.attention_backward", cpu_shape=(1, 1, 20, 16, "causal"))
    if said is None:
        assert handed["ok"] and "error" not in measured, (measured, handed)
        assert all(ms > 0 for ms in measured["yours"] + measured["baseline"])
    else:
        assert said in measured.get("error", "") + handed.get("message", ""), (measured, handed)


@pytest.mark.parametrize("fn, said", [
    (lambda x, p, seed: day5_lectures.seeded_dropout(x.contiguous(), p, seed), None),
    # a kernel that drops nothing: every timed output is judged (here its unscaled values fail first)
    (lambda x, p, seed: day5_lectures.seeded_dropout(x.contiguous(), 0.0, seed), "elements you kept"),
], ids=["honest", "drops nothing"])
def test_a_random_operations_timed_outputs_are_judged(tmp_path, fn, said):
    measured, handed = time_with_the_clock(fn, tmp_path, key="day5.dropout")
    if said is None:
        assert handed["ok"] and "error" not in measured, (measured, handed)
    else:
        assert said in measured.get("error", ""), (measured, handed)


@pytest.mark.parametrize("fn, said", [
    (day5_lectures.linear_cross_entropy, None),
    # a backward pass that forgets the incoming gradient: the clock's random dy shows it
    (lambda h, w, t: _Unscaled.apply(h, w, t), "checked by the grader's clock"),
], ids=["honest", "backward not scaled"])
def test_a_loss_that_computes_its_gradients_forward_is_timed_as_a_whole_step(tmp_path, fn, said):
    # (times_step: each timed call is the forward and the backward; the gradients are checked)
    measured, handed = time_with_the_clock(lambda h, w, t: fn(h, w, t), tmp_path, key="day5.linear_cross_entropy",
                                           cpu_shape=(16, 8, 300, 0.25))
    if said is None:
        assert handed["ok"] and "error" not in measured, (measured, handed)
        assert all(ms > 0 for ms in measured["yours"] + measured["baseline"])
    else:
        assert said in measured.get("error", "") + handed.get("message", ""), (measured, handed)


class _Unscaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, w, t):
        return day5_lectures.ChunkedLinearCrossEntropy.forward(ctx, h, w, t, 16)

    @staticmethod
    def backward(ctx, grad_loss):
        grad_h, grad_w, _ = ctx.grads
        return grad_h, grad_w, None


@pytest.mark.parametrize("key", ["day1.vector_add", "day5.linear_cross_entropy"])
def test_a_baseline_batch_gets_fresh_inputs_but_no_expected_result(key, tmp_path):
    # The float64 reference is most of a round's time for a large exercise, and the baseline's outputs are
    # not checked: its batches get new values (a backward exercise's output gradient too), no reference.
    import dataclasses
    from grader import exercises
    calls = []
    reference = exercises.get(key).reference
    spec = dataclasses.replace(exercises.get(key), reference=lambda *a: calls.append(1) or reference(*a))
    shape, dtype = spec.cpu_shapes[-1], torch.float32
    gen = torch.Generator().manual_seed(0)
    sets = timer._sets(spec, shape, dtype, "cpu", str(tmp_path), gen)
    before = [[a.clone() for a in args if isinstance(a, torch.Tensor)] for args in sets]
    calls.clear()   # _sets runs the reference once, for a backward exercise's output shape
    expected = timer._refill(spec, sets, shape, dtype, "cpu", gen, expect=False)
    assert expected == [None] * len(sets) and not calls
    for old, args in zip(before, sets):
        new = [a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
        assert all(not torch.equal(o, n) for o, n in zip([o for o in old if o.is_floating_point()], new))
    expected = timer._refill(spec, sets, shape, dtype, "cpu", gen)
    assert calls and all(e is not None for e in expected)


@pytest.mark.gpu
@pytest.mark.skipif(not DEVICE.is_gpu or not hasattr(torch.cuda, "use_mem_pool"),
                    reason="CUDA's allocation segments, and a torch with memory pools")
def test_a_shared_tensor_lies_in_no_segment_with_the_clocks_other_memory():
    # Another process maps a shared tensor's whole allocation segment: anything else of the clock's in
    # that segment (an expected result) would be in reach of the kernel's pointer arithmetic past it.
    def segment(t):   # the segment's IPC handle: the same for every tensor placed in one segment
        return t.untyped_storage()._share_cuda_()[1]
    plain_a, plain_b = torch.empty(1024, device="cuda"), torch.empty(1024, device="cuda")
    assert segment(plain_a) == segment(plain_b)   # small allocations share segments: the danger is real
    shared = [shared_tensors.new_shared((1024,), torch.float32, "cuda", "") for _ in range(2)]
    expected = torch.empty(1024, dtype=torch.float64, device="cuda")
    assert segment(shared[0]) == segment(shared[1])   # (the shared ones among themselves: all the kernel's)
    assert segment(expected) not in {segment(t) for t in shared}
