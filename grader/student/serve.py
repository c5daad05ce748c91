"""The student's side of a graded check: call the student's function on request, hand the results over.

At grading time the verdict of every graded cell comes from the grading checker (`grader.checker`),
which runs in nbgrader's process, never in the student's. It asks the notebook's kernel, through the
functions below, to call the student's function on inputs made from a seed it chooses for that one
case, and to write what the function returned into an exchange folder that the checker created for
this kernel. The checker makes the same inputs itself, computes the expected values, and compares.

Everything here runs in the student's process, so nothing here is trusted. A notebook that replaces
these functions cannot make a wrong answer pass (the checker compares), but it can hand over right
answers that PyTorch computed, and (on a GPU) report a time it did not take: the in-process guard kept
here (launch count, PyTorch-op watch, poisoned allocations, unchanged inputs) is what still judges
"Triton, not PyTorch", and docs/threat-model.md lists how it is bypassed.
"""
from __future__ import annotations

import contextlib
import json
import os
import random
import statistics
import warnings

import torch

from grader import exercises, timing
from grader.compare import CheckFailed
from grader.quiet import stderr_to_stdout
from grader.student.checks import compile_ahead as checks_compile_ahead
from grader.student.checks import (PLACEMENTS, SPACER_MIB, _as_tuple, _plain, _student_grads, _student_graph,
                                   no_saved_tensor_hooks, run_student, student_call, where_it_raised)
from grader.student import integrity
from grader.student.guard import foreign_gpu_work, watch


# The index that names the timed shape among a kernel exercise's cases.
SPEED = -1


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


def kernel_case(fn, key: str, index: int, dtype_name: str, device: str, seed: int, dy_shape, folder: str,
                request: str) -> None:
    """Run the student's function on case `index` and write its outputs (or why it failed)."""
    spec = exercises.get(key)
    shape = case_shape(spec, device == "cuda", index)
    dtype = getattr(torch, dtype_name)
    label = f"shape {shape}, {dtype_name}"
    try:
        args, gen = case_inputs(spec, shape, dtype, device, seed)
        if spec.backward:
            # the output gradient, drawn after the inputs as checks.expected_gradients draws it
            dy = torch.randn(tuple(dy_shape), generator=gen, device=device).to(dtype)
            with no_saved_tensor_hooks(spec):
                y, leaves = _student_graph(spec, fn, args, label)
                outputs = _student_grads(spec, y, leaves, dy, label)
        else:
            outputs = _plain(spec, _as_tuple(run_student(spec, fn, args, label)), label)
        _write(folder, request, {"ok": True}, outputs)
    except CheckFailed as e:
        _failed(folder, request, str(e))


def compile_ahead(fn, key: str, cases: list, device: str, folder: str, request: str) -> None:
    """Compile what the student's function launches on every (index, dtype name) case, side by side,
    before the checked cases run one by one (checks.compile_ahead); hands over how many it got through."""
    spec = exercises.get(key)
    done = checks_compile_ahead(spec, fn, [(case_shape(spec, device == "cuda", i), getattr(torch, d))
                                           for i, d in cases], device)
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


def time_student(fn, key: str, dtype_name: str, seed: int, folder: str, request: str) -> None:
    """Median milliseconds of the student's function at the timed shape, over several input placements.

    Only the student's function is timed here; the PyTorch baseline is timed by the checker in a
    process that never ran student code.
    """
    spec = exercises.get(key)
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    medians, spacers = [], []
    # One extra run, among the timed runs of a placement chosen at random and as they run, goes under
    # PyTorch's profiler: the GPU itself says which kernels ran. A function that computes with Triton
    # only while it is watched, and with cuBLAS or PyTorch otherwise, shows those kernels there.
    profiled_placement = random.SystemRandom().randrange(PLACEMENTS)
    try:
        integrity.no_event_hooks()
        with watch(poison=False, ops=False) as record:  # counts launches only: nothing slows the calls
            for placement, mib in enumerate(SPACER_MIB[:PLACEMENTS]):
                spacers.append(torch.empty(mib * 2**20 + 4096, dtype=torch.uint8, device="cuda"))
                args = spec.make_inputs(spec.speed_shape, dtype, "cuda", gen)
                call = student_call(spec, fn, args, spec.speed_shape, dtype, gen, record)
                if placement == profiled_placement:
                    call.profile = gpu_profile
                with stderr_to_stdout():
                    medians.append(timing.compare({"yours": call}, budget_ms=200 / PLACEMENTS)["yours"])
                if placement == profiled_placement:
                    ran = call.profiled
        names, share, allowed = foreign_gpu_work(ran, record.kernels)
        if share > allowed:
            raise CheckFailed(f"{spec.title}: run as in the timed calls, your function spent {share:.0%} of its "
                              f"GPU time in kernels that are not its Triton kernels "
                              f"({', '.join(n[:80] for n in names[:3])}). The work must be done by your "
                              f"Triton kernels, timed or not.")
    except (CheckFailed, integrity.TamperingDetected) as e:
        _failed(folder, request, f"{spec.title}: {e}" if isinstance(e, integrity.TamperingDetected) else str(e))
        return
    except Exception as e:
        _failed(folder, request, f"{spec.title}: your function raised while it was timed:\n{where_it_raised(e)}")
        return
    _write(folder, request, {"ok": True, "ms": statistics.median(medians), "placements": medians})


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
