"""What a notebook's test cells call: correctness, speed and prediction checks for one exercise."""
from __future__ import annotations

import atexit
import contextlib
import gc
import io
import math
import os
import random
import secrets
import statistics
import sys
import traceback
from dataclasses import dataclass

import torch
import triton

from grader import _GRADING_AT_IMPORT  # read when the package was imported, before any student cell
from grader import _PACKAGE_DIR, exercises, hardware, timing
from grader.exercises import reference_figures
from grader import device as _device
from grader.compare import TOLERANCES, CheckFailed, describe_mismatch
from grader.quiet import let_go_of_warnings, stderr_to_stdout
from grader.student import gpu_compile, integrity, memcheck
from grader.student.bounds import OutOfBounds
from grader.student.interpreter_lang import CombineOrderMatters
from grader.student.lane_races import LaneRace
from grader.student.program_races import ProgramRace
from grader.student.guard import DESCRIPTOR_RULE, HOST_ELEMENTS, Refused, _storage, _tensors_in, compile_only, interpreted_launches, watch


class GPURequired(RuntimeError):
    """A speed check ran where there is no CUDA GPU, during grading: it earns no points."""


def grading() -> bool:
    """True while nbgrader autogrades this notebook."""
    return _GRADING_AT_IMPORT or os.environ.get("NBGRADER_EXECUTION") == "autograde"


def _grader_functions() -> dict:
    # Looked up at call time: a cell that rebinds one of these names is caught by integrity.verify.
    return {"check": check, "check_speed": check_speed, "run_student": run_student,
            "_check_case": _check_case, "describe_mismatch": describe_mismatch, "watch": watch,
            "timing.compare": timing.compare, "credit": credit, "measure_speed": measure_speed,
            "student_call": student_call}


def _seed(hidden: bool) -> int:
    # Fresh inputs on every run; at grading time the instructor may fix a secret seed.
    secret = os.environ.get("GRADER_SECRET_SEED")
    if hidden and secret:
        return int(secret)
    return secrets.randbelow(2**31)


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _as_tuple(x):
    # Only a plain tuple or list is taken apart: iterating a subclass would run the student's __iter__,
    # which could do the work only when a result is looked at (outside the guard's watch, untimed).
    # (`is`, not `in`: a tuple's `in` compares with ==, which runs a metaclass's __eq__: a red team's did
    # the work there)
    return tuple(x) if type(x) is tuple or type(x) is list else (x,)


# Where Python's, PyTorch's, Triton's (which may be installed elsewhere) and the grader's own code lives.
_LIBRARY_DIRS = tuple({os.path.dirname(os.__file__), os.path.dirname(os.path.dirname(torch.__file__)),
                       os.path.dirname(os.path.dirname(triton.__file__)), _PACKAGE_DIR})


def where_it_raised(e: BaseException) -> str:
    """The student's frames of a traceback (not the grader's, Python's or a library's, whose paths are
    the grading machine's) and the error itself: what a student needs to find the line."""
    frames = traceback.extract_tb(e.__traceback__)
    own = [f for f in frames if not f.filename.startswith(_LIBRARY_DIRS)] or frames[-1:]
    lines = [_frame_line(f) for f in own[-3:]]
    cause = e if isinstance(e, (OutOfBounds, ProgramRace)) else e.__cause__
    if isinstance(cause, (OutOfBounds, ProgramRace)):   # the grader's own words are the point
        return "\n".join(lines + [str(cause)])
    if type(e).__name__ == "InterpreterError" and cause is not None:
        # The error of an interpreted kernel's line (a tl.dot of tiles that do not fit, a failed assert):
        # its traceback, not the launch's, has the kernel's own line.
        inside = [f for f in traceback.extract_tb(cause.__traceback__) if not f.filename.startswith(_LIBRARY_DIRS)]
        lines += ["  in the kernel:"] + [_frame_line(f) for f in inside[-2:]] if inside else []
    if isinstance(cause, (LaneRace, CombineOrderMatters)):
        return "\n".join(lines + [str(cause)])
    said = "\n".join(lines + traceback.format_exception_only(type(e), e)).rstrip()
    if isinstance(cause, AttributeError) and str(cause).startswith("'int' object has no attribute"):
        said += "\n" + INTERPRETER_INT
    if illegal_access(e):
        said += "\n" + ILLEGAL_ACCESS
    return said


def _frame_line(f) -> str:
    name = os.path.basename(f.filename) if f.filename.startswith(_LIBRARY_DIRS) else f.filename
    return f'  File "{name}", line {f.lineno}, in {f.name}\n    {(f.line or "").strip()}'


def illegal_access(e: BaseException) -> bool:
    """Whether CUDA stopped a kernel at an address outside every allocation (the context is broken then)."""
    return "illegal memory access" in str(e) or "misaligned address" in str(e)


# On a GPU an access outside every allocation stops the kernel with a CUDA error, which then poisons the
# process's CUDA context: every later call fails the same way until the notebook's kernel restarts.
ILLEGAL_ACCESS = ("A kernel read or wrote memory outside its tensors (a missing or wrong `mask=`, an offset that "
                  "overflows int32, a wrong stride). After this error every CUDA call in the notebook fails: "
                  "restart it. To find the access, run the check on a CPU (Triton's interpreter stops it and "
                  "names the kernel, the tensor and the element), or, after the restart, run one call under "
                  "compute-sanitizer where it is installed: `grader.memcheck(your_function, *its_inputs)` names "
                  "the kernel, the thread and how far past which tensor it went.")


# The interpreter runs a kernel as Python: values that are tensors once compiled for a GPU can be plain
# ints there (a `for` loop's variable, whatever its bounds), and a tensor's method fails on them only there.
INTERPRETER_INT = ("In Triton's CPU interpreter the variable of a `for ... in range(...)` loop is a plain Python "
                   "int, even when its bounds are tensors (compiled for a GPU it is a tensor), so a tensor method "
                   "such as `.to(tl.int64)` fails on it there only. Write `tl.cast(i, tl.int64)`, which works in "
                   "both, or widen the bounds before the loop.")


@contextlib.contextmanager
def watch_student(spec, inputs, **options):
    """guard.watch with what the exercise permits on a call with these `inputs` (the forward's, first):
    its extra ops, and only linear maps of large tensors where it says so (spec.linear_above). The call's
    warnings are let go of inside the watch (quiet.let_go_of_warnings)."""
    bound = spec.linear_above(*_tensors_in(inputs)) if spec.linear_above else None
    sum_limit = spec.sum_limit(*_tensors_in(inputs)) if spec.sum_limit else None
    with watch(also_allowed=spec.also_allowed, linear_above=bound, sum_limit=sum_limit,
               launch_bits=_launch_bits(spec, inputs), pieces=_pieces(spec, inputs), **options) as record, \
            let_go_of_warnings():
        yield record


def _rows(inputs) -> int:
    """The rows of a call's first input (its elements over its last dimension), 1 for a vector."""
    first = next(_tensors_in(inputs), None)
    return first.numel() // first.shape[-1] if first is not None and first.dim() >= 2 and first.shape[-1] else 1


def _pieces(spec, inputs) -> int | None:
    """How many pieces a call of a random op (spec.judge) may join or copy into place with PyTorch
    (guard._Watcher._joined): 64, and 4 a row of its first input, as many as its fills with numbers."""
    return None if spec.judge is None else HOST_ELEMENTS + 4 * _rows(inputs)


def _launch_bits(spec, inputs) -> int | None:
    """How many bits a call of a random op (spec.judge: dropout) may hand its launches in numbers
    (guard._Watcher.handed_to_launch): 64 numbers of 64 bits, and 128 bits a row of its first input (a
    launch a row hands a new offset or two, of 26 bits at most on the graded shapes). Its output depends
    on no input's values, so a mask drawn in Python needs no reading out, only a way in: numbers passed
    as arguments. Where the output is computed from the inputs, reading them out is what is bounded
    (guard.HOST_ELEMENTS; a kernel that prints is refused), and launch arguments are not counted."""
    if spec.judge is None:
        return None
    return 64 * HOST_ELEMENTS + 128 * _rows(inputs)


def run_student(spec, fn, args, label: str, tune_briefly: bool | None = None, records: list | None = None):
    """Call the student's function once under the guard; raise CheckFailed with a reason if it cheats.
    (`tune_briefly`: see guard.watch; the case at the timed shape tunes as Triton does, for the timing.
    `records`: a list the call's CallRecord is appended to, noting what its PyTorch ops allocated and what
    its launches were handed or its ops wrote: CallRecord.allocations and .reached.)"""
    saved = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    on_host = memcheck.host_copies(args)   # for the sanitizer, if the call breaks the CUDA context
    try:
        with stderr_to_stdout(), watch_student(spec, args, tune_briefly=tune_briefly,
                                               allocations=records is not None) as record:
            got = fn(*args)
        if records is not None:
            records.append(record)
        if _device.current().is_gpu:
            torch.cuda.synchronize()
    except CheckFailed:
        raise
    except Exception as e:  # the student's code raised: show where, briefly
        if refused_launch(e):   # the rule it broke, not the error that stopped it
            refuse(spec, record, "your function", f"on {label}")
        said = where_it_raised(e)
        if on_host is not None and illegal_access(e):
            said += "\n" + memcheck.after_illegal_access(fn, on_host)
        raise CheckFailed(f"{spec.title}: your function raised on {label}:\n{said}") from None
    refuse(spec, record, "your function", f"on {label}")
    # The guard bytes have been looked at: let go of the memory around what the call allocated, so that
    # what outlives the call is what the student keeps (a temporary the function freed is freed now).
    record.guards.clear()
    for i, (before, after) in enumerate(zip(saved, args)):
        if isinstance(before, torch.Tensor) and not torch.equal(before, after):
            raise CheckFailed(f"{spec.title}: your function changed its input argument {i} on {label}. "
                              f"Write results to a new output tensor, never into an input.")
    return got


def computed_with_pytorch(spec, record, who: str, where: str, timed: bool = False) -> CheckFailed:
    """The verdict on a call whose record holds PyTorch computations (or numbers handed to launches, or
    values read out, past their limits: record.forbidden())."""
    bounded = getattr(record, "beyond_bookkeeping", False)
    return CheckFailed(f"{spec.title}: {who} computed with PyTorch ({', '.join(record.forbidden())}) "
                       f"{where}. Allocating outputs and taking views is fine; the computation itself "
                       f"must happen in your Triton kernels{', timed or not' if timed else ''}."
                       + (" Here PyTorch may also add, sum, multiply by a number or a smaller tensor, take "
                          "products, cast to another float type of 16 bits or more, copy and join tensors larger "
                          "than one number per row (a token, a row of logits), and use per-row values a few "
                          "times per row; everything nonlinear (a softmax, a norm, an activation, a loss) is "
                          "your kernels'." if bounded else ""))


def refused_launch(error: BaseException) -> bool:
    """Whether the guard stopped a launch (guard.Refused), as raised or as the cause of an error that the
    interpreter or Triton raised in its place."""
    return isinstance(error, Refused) or isinstance(error.__cause__, Refused) or isinstance(error.__context__, Refused)


def refuse(spec, record, who: str, where: str, *, timed: bool = False, launches: bool = True) -> None:
    """Raise CheckFailed if what the guard recorded of one call (`who`: "your function", "your backward")
    breaks a rule: a store outside an output it allocated, PyTorch computing, no Triton launch (unless
    `launches` is False), work on another stream. The one place that turns a record into a verdict, for
    checked and timed calls alike."""
    overrun = record.overruns()
    if overrun:
        raise CheckFailed(f"{spec.title}: {where} {overrun}")
    if getattr(record, "not_triton", None):
        raise CheckFailed(f"{spec.title}: {', '.join(record.not_triton[:3])} {where}: Python that is not Triton. "
                          f"In the CPU interpreter a kernel's body runs as plain Python, so this ran here; a "
                          f"GPU's compiler refuses it, and the grade is the GPU's. A kernel computes with tl.* "
                          f"and other @triton.jit functions only.")
    if getattr(record, "not_compiled", None):
        raise not_compiled(spec, *record.not_compiled[0], next(iter(gpu_compile.GRADING_TARGETS)))
    if getattr(record, "overreaching_descriptors", None):
        raise CheckFailed(f"{spec.title}: {record.overreaching_descriptors[0]} {where}. {DESCRIPTOR_RULE}")
    if getattr(record, "launch_errors", None):
        raise CheckFailed(f"{spec.title}: {record.launch_errors[0]} {where}, and your code caught it and went "
                          f"on. A kernel that fails is a failed call: let its error through (an error's message "
                          f"and whether it came are values that leave the kernel besides its outputs).")
    if getattr(record, "prints", None):
        raise CheckFailed(f"{spec.title}: {', '.join(record.prints[:3])} {where}: remove the prints from your "
                          f"kernels before they are checked. A print is a way for values to leave a kernel "
                          f"besides its outputs (the grader counts what is read out of those), and a printing "
                          f"kernel is slow on a GPU too. tl.static_assert and tl.device_assert are fine.")
    if record.forbidden():
        raise computed_with_pytorch(spec, record, who, where, timed)
    if launches and record.launches == 0:
        raise CheckFailed(f"{spec.title}: {who} launched no Triton kernel {where}. Every call must compute "
                          f"its result: handing back a result kept from an earlier call is not allowed."
                          if timed else f"{spec.title}: {who} did not launch a Triton kernel {where}. Launch "
                          f"your @triton.jit kernel with kernel[grid](...).")
    if record.side_streams:
        raise CheckFailed(f"{spec.title}: {who} launched {record.side_streams} kernels on another CUDA "
                          f"stream {where}. Launch on the current stream: the grader's clock only sees "
                          f"work there.")
    if record.graph_replays:
        raise replayed_a_graph(spec, who, where)


def replayed_a_graph(spec, who: str, where: str) -> CheckFailed:
    where = f" {where}" if where else ""
    return CheckFailed(f"{spec.title}: {who} replayed a CUDA graph{where}. A graph runs again kernels captured "
                       f"before the call, where the grader did not watch them: it cannot tell what they "
                       f"compute, nor count the memory the graph keeps. Launch your kernels in the call "
                       f"itself. (Graphs do save launch time, and you may use them in your own code; a graded "
                       f"call must show its work.)")


def _compare_outputs(spec, got, expected, dtype, label):
    if len(got) != len(expected):
        raise CheckFailed(f"{spec.title}: expected {len(expected)} outputs, got {len(got)} on {label}.")
    atol, rtol = spec.tolerances.get(dtype, TOLERANCES[dtype])
    for i, (g, e) in enumerate(zip(got, expected)):
        name = spec.title + (f" ({spec.output_names[i]})" if spec.output_names else
                             (f", output {i}" if len(expected) > 1 else ""))
        # Sums over many terms (dweight over rows, a dot product over K) grow with their length, and
        # so does the rounding error of a correct kernel.
        how = spec.atol_scale.get(spec.output_names[i]) if spec.output_names else None
        how, scale = how if isinstance(how, tuple) else (how, 1.0)   # (kind, a factor of its own)
        if how and e.numel():
            ed = e.detach().double()
            if how == "relative":
                scale *= float(ed.abs().max()) or 1.0
            else:
                scale *= max(1.0, float(ed.abs().max() if how == "max" else ed.pow(2).mean().sqrt()))
        message = describe_mismatch(f"{name} on {label}", g, e, atol * scale, rtol, spec.hint)
        if message:
            raise CheckFailed(message)


def _check_case(spec, fn, shape, dtype, dev, gen, seed):
    if spec.backward:
        return _check_backward_case(spec, fn, shape, dtype, dev, gen, seed)
    args = spec.make_inputs(shape, dtype, dev.torch_device, gen)
    label = f"shape {shape}, {_dtype_name(dtype)} (seed {seed})"
    if spec.judge:
        outputs = judged_outputs(spec, fn, args, gen, label)
        spec.judge(args, outputs, judged_dy(spec, args, gen), label)
        return
    # The student's function runs first: no expected result exists yet for it to find (in a caller's
    # frame) or to be handed (memory the reference freed). Inputs are checked unchanged by run_student.
    got = _plain(spec, _as_tuple(run_student(spec, fn, args, label)), label)
    expected = _as_tuple(spec.reference(*args))
    _compare_outputs(spec, got, expected, dtype, label)


def _plain(spec, outputs: tuple, label: str) -> tuple:
    """The outputs, refused unless plain tensors: a subclass could change how they compare, and any other
    object could compute its values only when it is read."""
    for t in outputs:
        _no_subclass(spec, t, f"on {label} your function returned")
        if not issubclass(type(t), torch.Tensor):
            raise CheckFailed(f"{spec.title}: on {label} your function returned a {type(t).__name__} where a "
                              f"tensor was expected; return the tensor your kernel wrote (several as a tuple).")
    return outputs


def _no_subclass(spec, value, what: str) -> None:
    """Refuse a subclass of torch.Tensor (but a Parameter): its methods are the student's own code, which
    would run wherever the grader touches the value, outside the guard. Asked by type(), which runs no
    code of the value's (isinstance also reads a `__class__` the value may define: a red team's did the
    work there)."""
    kind = type(value)
    if issubclass(kind, torch.Tensor) and not _is_plain_tensor(value):
        raise CheckFailed(f"{spec.title}: {what} a {kind.__name__}, a subclass of torch.Tensor; use plain "
                          f"tensors (the one your kernel wrote).")


def _is_plain_tensor(value) -> bool:
    """A torch.Tensor or Parameter itself, asked with `is` (== on types runs a metaclass's __eq__)."""
    return type(value) is torch.Tensor or type(value) is torch.nn.Parameter


@contextlib.contextmanager
def no_saved_tensor_hooks(spec):
    """While a graded backward runs or is checked, no saved-tensor hook may be installed.

    Autograd calls such a hook whenever a tensor is saved for backward, the grader's own float64
    reference included: a hook a notebook left installed could do the student's work only when a result
    is about to be checked. PyTorch refuses to enter (or to install one inside) with the message below."""
    message = (f"{spec.title}: a saved-tensor hook (torch.autograd.graph.saved_tensors_hooks) is installed. "
               f"None may be active while your function is checked or timed: remove the cell that installs it.")
    try:
        with torch.autograd.graph.disable_saved_tensors_hooks(message):
            yield
    except RuntimeError as e:
        if str(e) != message:
            raise
        raise CheckFailed(message) from None


def _differentiable(args):
    return [a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]


def _student_graph(spec, fn, args, label, records: list | None = None):
    """Run the student's forward on copies that require grad; return (output, leaves)."""
    leaves = [a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point()
              else a for a in args]
    y = run_student(spec, fn, leaves, label, records=records)
    (y,) = _plain(spec, (y,), label)   # by type(), before the grader reads its grad_fn (a red team's property)
    return from_a_function(spec, y, f"the output on {label}"), _differentiable(leaves)


def from_a_function(spec, y, what: str):
    """y, if it is the output of a torch.autograd.Function (whose backward is the student's), or, for a
    composed exercise (spec.composed), of autograd through the student's Functions and the products and
    additions the exercise permits (the guard holds PyTorch to linear maps there, forward and backward)."""
    if spec.composed:
        if _reaches_a_function(getattr(y, "grad_fn", None)):
            return y
        raise CheckFailed(f"{spec.title}: {what} is not computed through any torch.autograd.Function of yours "
                          f"(its grad_fn is {type(getattr(y, 'grad_fn', None)).__name__}). Wrap each kernel "
                          f"in a Function whose backward is your kernels, and call it with .apply(...).")
    if _function_node(getattr(y, "grad_fn", None)) is None:
        raise CheckFailed(f"{spec.title}: {what} does not come from a torch.autograd.Function (its grad_fn is "
                          f"{type(getattr(y, 'grad_fn', None)).__name__}). Return YourFunction.apply(...) so "
                          f"that autograd calls your backward.")
    return y


def _reaches_a_function(grad_fn) -> bool:
    """Whether the autograd graph below grad_fn holds a torch.autograd.Function's node."""
    seen, stack = set(), [grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        if isinstance(node, torch.autograd.function.BackwardCFunction):
            return True
        seen.add(id(node))
        stack.extend(next_fn for next_fn, _ in node.next_functions)
    return False


def _student_grads(spec, y, leaves, dy, label):
    """Backpropagate dy through the student's graph under the guard; return the input gradients."""
    try:
        with stderr_to_stdout(), watch_student(spec, (leaves, dy)) as record:
            grads = torch.autograd.grad(y, leaves, dy, allow_unused=True, retain_graph=True)
    except Exception as e:
        if refused_launch(e):
            refuse(spec, record, "your backward", f"on {label}", launches=not spec.times_step)
        raise CheckFailed(f"{spec.title}: your backward raised on {label}:\n{where_it_raised(e)}") from None
    # (the backward of a loss whose forward computed the gradients only scales them: spec.times_step)
    refuse(spec, record, "your backward", f"on {label}", launches=not spec.times_step)
    return grads


def judged_dy(spec, args, gen):
    """The output gradient of a judged exercise's backward check, drawn from the case's generator after
    its inputs (the kernel and the checker each draw it): shaped like the first input. (A state copy,
    so that drawing it twice from one generator gives the same values.)"""
    if not spec.judged_backward:
        return None
    first = args[0]
    copy = torch.Generator(device=first.device)
    copy.set_state(gen.get_state())
    return torch.randn(tuple(first.shape), generator=copy, device=first.device).to(first.dtype)


def judged_outputs(spec, fn, args, gen, label) -> tuple:
    """A judged exercise's outputs on one case: the student's function on each argument tuple that
    spec.judge_calls names, then (judged_backward) the input gradient of the first call, its output's
    gradient drawn as judged_dy draws it. All under the guard, as any checked call."""
    outputs, dy, graph = [], judged_dy(spec, args, gen), []
    for i, call_args in enumerate(spec.judge_calls(args)):
        if spec.judged_backward and i == 0:
            with no_saved_tensor_hooks(spec), no_automatic_collection(spec, label):
                records = [] if spec.keeps_no_tensor else None
                graph += _student_graph(spec, fn, call_args, label, records)
                y, leaves = graph
                outputs.append(y.detach().clone())
                if spec.keeps_no_tensor:
                    _overwrite(y)   # first: code of the student's that looking at ctx runs finds nothing
                    _keeps_no_tensor(spec, y, leaves, label, records[0])
                grads = _student_grads(spec, y, leaves, dy, label)
            del y, leaves
        else:
            got = _plain(spec, _as_tuple(run_student(spec, fn, call_args, label)), label)
            # (a helper's honest-looking answer returned one cached buffer every call: the next call changed
            # the last one's result, which the check then blamed on the mask)
            if {_storage_address(t) for t in got} & {_storage_address(t) for t in outputs}:
                raise CheckFailed(f"{spec.title}: on {label} your function returned memory it had returned "
                                  f"before: a later call changes an earlier result under its caller. Return a new "
                                  f"tensor from every call.")
            outputs += got
    if spec.judged_backward:
        outputs += _plain(spec, tuple(g for g in grads if g is not None), label)
        del grads
    return let_go(spec, tuple(outputs), graph, label)


def let_go(spec, outputs: tuple, graph: list, label) -> tuple:
    """Copies of a backward case's outputs, taken while the student's autograd graph is alive (`graph`
    holds the only references the grader keeps to it: the output and the leaves); then that graph
    freed, and the garbage collected, under the guard. A red team's backward handed back zeros and
    filled them in from a __del__ (or a weakref.finalize) that ran when its graph was freed: after the
    guard's watch, before the gradients were handed over. Now such code runs where it is seen, and
    what it writes cannot reach the copies."""
    copies = tuple(o.detach().clone() if _is_plain_tensor(o) else o for o in outputs)
    def free():
        graph.clear()
        gc.collect()
    _watched(spec, free, "code of yours that ran when your autograd graph was freed",
             f"on {label} (a __del__, or a finalizer)")
    return copies


def _watched(spec, work, who: str, where: str):
    """work() (the grader's own code that may run the student's: a finalizer at a collection, a property
    of an object on ctx) under the guard; CheckFailed if the student's code computed with PyTorch or
    launched a kernel there, or made or wrote a tensor: a finalizer may let go of what it holds, not copy it
    (a red team's, on an object in a cycle with the forward's mask, cloned the mask into a module-level dict
    for the backward when the grader's collection freed both). Its result."""
    with watch(poison=False, allocations=True) as record:
        result = work()
    refuse(spec, record, who, where, launches=False)
    if record.launches:
        raise CheckFailed(f"{spec.title}: {who} launched a Triton kernel {where}. Compute in your forward "
                          f"and backward, before they return, and nowhere else.")
    made = [shape for _, nbytes, shape, _, _ in record.allocations if nbytes > KEPT_BYTES]
    used = [shape for nbytes, shape, _ in record.reached.values() if nbytes > KEPT_BYTES]
    if made or used:
        raise CheckFailed(f"{spec.title}: {who} {'made' if made else 'read or wrote'} a tensor of shape "
                          f"{tuple((made or used)[0])} {where}. Such code may let go of what it holds, not copy "
                          f"or keep it: compute in your forward and backward, before they return.")
    return result


@contextlib.contextmanager
def no_automatic_collection(spec, label: str):
    """No garbage collection but the grader's own, which runs under the guard (let_go, _keeps_no_tensor),
    while a student's autograd graph lives: a red team's finalizer, on an object in a reference cycle,
    waited for a collection outside the guard to copy the forward's mask, and made a new such object
    each time it ran inside one. (Notebooks may not import gc: code_rules.)

    What exists before is frozen (gc.freeze): the collections look for the garbage of the calls that
    follow, and scanning the whole heap (torch's and the interpreter's objects, about 400,000) took
    0.2 s each time, half of a dropout check's time on the CPU. An older object is then never
    collected: a finalizer on one never runs, and what it holds counts as kept. The young garbage is
    collected first, as an automatic collection there would have (cycles left by earlier calls, which
    may hold GPU memory, are not frozen with it), under the guard as the grader's other collections: a
    finalizer run there is the student's code too (a red team's made a new object like itself each time,
    which the freeze then kept out of every later collection)."""
    was = gc.isenabled()
    gc.disable()
    try:
        collect_young_garbage(spec, label)
        gc.freeze()
        yield
    finally:
        if was:
            gc.enable()


def collect_young_garbage(spec, label: str) -> None:
    """Collect the garbage made since the last collection, under the guard: a finalizer or __del__ of the
    notebook's that runs here is the student's code, and computing with PyTorch in it fails the case."""
    _watched(spec, lambda: gc.collect(1), "code of yours that ran when the grader collected garbage before a "
             "case", f"on {label} (a __del__, or a finalizer)")


# What a window froze is unfrozen at exit: the interpreter's last collection then frees it as it would have
# (left frozen, Triton's bindings report its objects as leaked).
atexit.register(gc.unfreeze)


# What a forward pass that keeps nothing for its backward may still keep, in bytes: a seed, p or an offset
# held as a small tensor (a mask of so few bits would cover too few elements to pass)
KEPT_BYTES = 64


def _keeps_no_tensor(spec, y, leaves, label, record) -> None:
    """The forward pass kept no tensor for the backward (its ctx is the Function's node below y): none
    saved, none set on ctx (but its inputs, or a few bytes: a seed), none of the memory it allocated still
    alive once it returned, other than its output's (a red team kept its mask in a list on ctx, in a
    module-level dict and in a closure), and no memory from before the call handed to its kernels or
    written by its PyTorch ops (a buffer kept between calls: a red team copied its mask into one)."""
    made, reached = record.allocations, record.reached
    inputs = {_storage_address(t) for t in leaves if isinstance(t, torch.Tensor)}
    output = _storage_address(y)
    node = _function_node(y.grad_fn)
    # What ctx holds is looked at by type() and under the guard: an object's `__class__`, a tensor
    # subclass's numel() and a finalizer the collection runs are the student's code (a red team's each
    # copied the mask, still in the output then, outside the guard)
    values, saved = dict(vars(node)), node.saved_tensors
    for name, value in [*values.items(), *(("save_for_backward", t) for t in saved)]:
        _no_subclass(spec, value, f"on {label} your forward pass keeps on ctx.{name}")
    kept_by_ctx = lambda t: _storage_address(t) not in inputs and t.numel() * t.element_size() > KEPT_BYTES
    kept = [name for name, value in values.items() if _is_plain_tensor(value) and kept_by_ctx(value)]
    if any(kept_by_ctx(t) for t in saved if t is not None) or kept:
        what = f"ctx.{kept[0]}" if kept else "ctx.save_for_backward"
        _refuse_kept(spec, label, f"your forward pass keeps a tensor for the backward ({what})")
    _watched(spec, gc.collect, "code of yours that ran when the grader collected garbage after your forward pass",
             f"on {label} (a __del__, or a finalizer)")
    alive = [(shape, dtype) for ref, nbytes, shape, dtype, address in made
             if nbytes > KEPT_BYTES and address != output and not ref.expired()]
    if alive:
        shape, dtype = alive[0]
        _refuse_kept(spec, label, f"a tensor your forward pass made (shape {tuple(shape)}, "
                                  f"{str(dtype).replace('torch.', '')}) is still alive after it returned, besides its "
                                  f"output: kept for the backward, in a list, a dict, a global or a closure")
    ours = inputs | {output} | {address for *_, address in made}
    # (added up over every such storage: many small buffers hold a mask as well as one large one)
    older = sorted((entry for address, entry in reached.items() if address not in ours), key=lambda e: -e[0])
    if sum(nbytes for nbytes, _, _ in older) > KEPT_BYTES:
        nbytes, shape, dtype = older[0]
        _refuse_kept(spec, label, f"your forward pass read or wrote memory from before the call, or handed it to "
                                  f"its kernel ({sum(n for n, _, _ in older):,} bytes in {len(older)} tensor(s); the "
                                  f"largest {nbytes:,} bytes, reached through a tensor of shape {tuple(shape)}, "
                                  f"{str(dtype).replace('torch.', '')}: a buffer kept between calls)")


def _refuse_kept(spec, label, what: str):
    raise CheckFailed(f"{spec.title} on {label}: {what}. The backward pass must draw the mask again from what it "
                      f"keeps of the forward: the seed and p, two numbers.")


def _function_node(grad_fn):
    """The torch.autograd.Function's node of an output, through the views a wrapper may take of it
    (`Fn.apply(x.reshape(-1), ...).view_as(x)`), or None."""
    while grad_fn is not None and not isinstance(grad_fn, torch.autograd.function.BackwardCFunction):
        nexts = [f for f, _ in grad_fn.next_functions if f is not None]
        if len(nexts) != 1 or not type(grad_fn).__name__.startswith(VIEW_NODES):
            return None
        grad_fn = nexts[0]
    return grad_fn


# Autograd's nodes for views, which a wrapper may put between a Function's output and what it returns
VIEW_NODES = ("ViewBackward", "ReshapeAliasBackward", "UnsafeViewBackward", "AsStridedBackward", "AliasBackward",
              "ExpandBackward", "PermuteBackward", "TransposeBackward", "TBackward", "SqueezeBackward",
              "UnsqueezeBackward", "SliceBackward", "SelectBackward")


def _storage_address(t: torch.Tensor) -> int:
    return _storage(t).data_ptr()


def _overwrite(y: torch.Tensor) -> None:
    """Fill the memory of the forward's output with NaNs (all bits set) before the backward runs: one that
    keeps nothing needs none of it, and a mask read from the output (y != 0), or hidden in its memory past
    the elements, is lost. (The output's values were copied before.)"""
    torch.empty(0, dtype=torch.uint8, device=y.device).set_(_storage(y)).fill_(0xFF)


def expected_gradients(spec, args, gen, dtype) -> tuple:
    """(the exact input gradients, the output gradient fed in) of a backward case: PyTorch's autograd
    through the reference in float64, dy drawn from the case's generator after its inputs. A whole step
    (spec.times_step) is checked on its output too: (output, *gradients)."""
    ref_leaves = [a.detach().double().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point()
                  else a for a in args]
    y_ref = spec.reference(*ref_leaves)
    dy = torch.randn(y_ref.shape, generator=gen, device=y_ref.device).to(dtype)
    grads = torch.autograd.grad(y_ref, _differentiable(ref_leaves), dy.double())
    if spec.times_step:
        grads = (y_ref.detach(), *grads)
    return tuple(g.to(dtype) for g in grads), dy


def _check_backward_case(spec, fn, shape, dtype, dev, gen, seed):
    args = spec.make_inputs(shape, dtype, dev.torch_device, gen)
    label = f"shape {shape}, {_dtype_name(dtype)} (seed {seed})"
    with no_saved_tensor_hooks(spec):
        expected, dy = expected_gradients(spec, args, gen, dtype)
    _compare_outputs(spec, student_backward(spec, fn, args, dy, label), expected, dtype, label)


def student_backward(spec, fn, args, dy, label) -> tuple:
    """A backward case of the student's function, forward and backward each under the guard: the input
    gradients for dy, after the output for a whole step (step_outputs). The output is copied as the
    forward returned it: a backward may not fill in the loss later (a red team's forward returned a
    placeholder)."""
    with no_saved_tensor_hooks(spec), no_automatic_collection(spec, label):
        graph = list(_student_graph(spec, fn, args, label))
        y, leaves = graph
        returned = y.detach().clone() if spec.times_step else y
        grads = _student_grads(spec, y, leaves, dy, label)
        _plain(spec, tuple(g for g in grads if g is not None), label)   # before let_go copies them (a red team's)
        outputs = step_outputs(spec, returned, grads)
        del y, leaves, returned, grads
        return let_go(spec, outputs, graph, label)


def step_outputs(spec, y, grads) -> tuple:
    """What a backward case hands over: the input gradients, after the output itself for a whole step
    (spec.times_step: a loss whose value is logged, an attention output used downstream)."""
    return (y.detach(), *grads) if spec.times_step else tuple(grads)


def check(key: str, fn, hidden: bool = False) -> None:
    """Check fn against the reference on several shapes and dtypes; raises CheckFailed if wrong."""
    integrity.verify(_grader_functions())
    spec = exercises.get(key)
    dev = _device.current()
    seed = _seed(hidden)
    gen = torch.Generator(device=dev.torch_device).manual_seed(seed)
    shapes = spec.shapes(dev, hidden)
    dtypes = spec.dtypes(dev)
    if dev.is_gpu:
        compile_ahead(spec, fn, [(shape, dtype) for dtype in dtypes for shape in shapes], dev.torch_device)
    with interpreted_launches() as launches:
        for dtype in dtypes:
            for shape in shapes:
                _check_case(spec, fn, shape, dtype, dev, gen, seed)
    kind = "hidden and visible" if hidden else "visible"
    print(f"OK: {spec.title} is correct on {len(shapes)} {kind} shapes x "
          f"{', '.join(_dtype_name(d) for d in dtypes)}.")
    if launches and not grading() and gpu_compile.enabled():
        _compiles_for_the_gpu(spec, launches)


# How long compile_ahead may call the student's function before it leaves the rest to the cases (s).
AHEAD_BUDGET_S = 60


class _OutOfTime(BaseException):
    """Raised by the alarm that ends compile_ahead's calls when they run past their budget."""


def compile_ahead(spec, fn, cases, device: str) -> int:
    """Call the student's function once on each (shape, dtype) case with its kernels compiled, side by
    side, and not run (guard.compile_only), so that the checked cases that follow find them compiled.
    Decides nothing: whatever goes wrong here, the checked case reports. Returns how many cases it got
    through (none where Triton cannot compile ahead: in the interpreter, or before Triton 3.6)."""
    import signal
    done, returned = 0, False

    def out_of_time(signum, frame):
        raise _OutOfTime

    with contextlib.ExitStack() as stack:
        if not stack.enter_context(compile_only()):
            return 0
        with contextlib.suppress(ValueError):   # only the main thread can have the alarm
            # a function that waits for a value its (never run) kernel would write stops at the budget
            stack.callback(signal.signal, signal.SIGALRM, signal.signal(signal.SIGALRM, out_of_time))
            signal.setitimer(signal.ITIMER_REAL, AHEAD_BUDGET_S)
            stack.callback(signal.setitimer, signal.ITIMER_REAL, 0)
        try:
            for shape, dtype in cases:
                # what the function prints here would be about values of no importance: not shown
                with contextlib.suppress(Exception), contextlib.redirect_stdout(io.StringIO()), \
                        contextlib.redirect_stderr(io.StringIO()):
                    _call_once(spec, fn, shape, dtype, device)
                    returned = True
                done += 1
            # The guard's dispatch mode imports torch._dynamo when it first sees an operation (PyTorch
            # wraps every mode's __torch_dispatch__ so): seconds of Python, done here while the
            # compiler threads work, rather than in the first checked case. Not for a function that
            # only raised (one not written yet): its cases fail before any operation.
            if returned and "torch._dynamo" not in sys.modules:
                with contextlib.suppress(Exception):
                    import torch._dynamo  # noqa: F401
        except _OutOfTime:
            pass
    return done


def _call_once(spec, fn, shape, dtype, device: str) -> None:
    """The student's function (and backward) on inputs of this shape, values of no importance."""
    gen = torch.Generator(device=device).manual_seed(secrets.randbits(31))
    args = spec.make_inputs(shape, dtype, device, gen)
    if not spec.backward:
        fn(*args)
        return
    leaves = [a.detach().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
              for a in args]
    y = fn(*leaves)
    torch.autograd.grad(y, [a for a in leaves if getattr(a, "requires_grad", False)], torch.randn_like(y),
                        allow_unused=True)


def not_compiled(spec, kernel: str, message: str, target: str) -> CheckFailed:
    """The verdict on a kernel that runs in the interpreter and that Triton's compiler refuses for the GPU
    where it is graded (at each launch: guard._as_compiled; after a visible check: _compiles_for_the_gpu)."""
    return CheckFailed(f"{spec.title}: your kernel `{kernel}` runs in Triton's CPU interpreter, but Triton's "
                       f"compiler rejects it for {target}, where it is graded:\n{message[-2000:]}\n  The interpreter "
                       f"runs Python as written; the compiler also checks types and shapes, and takes only Triton "
                       f"in a kernel (tl.*, other @triton.jit functions, tl.constexpr globals). Fix this here: on the "
                       f"grading GPU the check fails.")


def _compiles_for_the_gpu(spec, launches: list) -> None:
    """In the CPU interpreter: the kernels the check launched must also compile for the grading GPU; where
    they do not compile for a student's GPU (a T4), the check says so."""
    judged, failures, usage = gpu_compile.check(launches)
    for kernel, target, message in failures:
        if target in gpu_compile.GRADING_TARGETS:
            raise not_compiled(spec, kernel, message, target)
    for kernel, target, message in failures:
        first = message.strip().splitlines()[-1] if message.strip() else "a compile error"
        print(f"Note: {spec.title}: your kernel `{kernel}` does not compile for {target} ({first}). Grading "
              f"is on the H100, so this costs no points, but the notebook will not run on such a GPU.")
    if judged:
        compiled = [t for t in gpu_compile.TARGETS if t not in {f[1] for f in failures}]
        print(f"OK: {spec.title}: Triton compiles your kernels for {' and '.join(compiled)} too "
              f"(checked without a GPU).")
        for line in gpu_compile.describe_usage(usage):
            print(line)


def credit(ratio: float, target: float) -> float:
    """Full credit at the target, none below half of it, linear in between."""
    if ratio >= target:
        return 1.0
    if ratio <= target / 2:
        return 0.0
    return (ratio - target / 2) / (target / 2)


def _no_gpu(what: str):
    message = f"{what} needs a CUDA GPU, and this machine has none: nothing was measured."
    if grading():
        raise GPURequired(message + " Speed is graded on the instructor's GPU; here it scores 0.")
    print(message + " Run on a GPU to see the measurement.")


# A memory-bound kernel below this share of the measured copy bandwidth is waiting on memory badly.
MEMORY_BOUND_SHARE = 0.7


@dataclass
class SpeedResult:
    """One speed measurement of a student's function against the exercise's baseline."""
    title: str
    shape: tuple
    dtype: str
    device: str
    baseline_name: str
    yours_ms: float
    baseline_ms: float
    target: float
    gbs: float | None = None
    ceiling_gbs: float | None = None
    tflops: float | None = None
    peak_tflops: float | None = None
    placements: dict | None = None   # per-placement medians, {"yours": [...], "baseline": [...]}
    speed_hint: str = ""             # the exercise's: what a fast kernel does
    # Peak memory, graded with the speed where the exercise has a memory target (step_memory's bytes)
    yours_bytes: int | None = None
    baseline_bytes: int | None = None
    memory_target: float | None = None
    memory_hint: str = ""
    usage: list | None = None        # what the kernels asked of an SM, as launched ({kernel, registers, ...})
    # Timed beside the baseline, not graded: {name: median ms, or why it was not timed} (context_baselines),
    # in runs of their own with the student's function, whose median there is yours_beside_ms
    context: dict | None = None
    yours_beside_ms: float | None = None

    @property
    def ratio(self) -> float:
        return self.baseline_ms / self.yours_ms

    def beside(self, name: str) -> float | None:
        """The context baseline `name`'s time over the student's in the runs they shared, or None if it
        was not timed."""
        ms = (self.context or {}).get(name)
        return ms / (self.yours_beside_ms or self.yours_ms) if isinstance(ms, float) else None

    @property
    def of_same_copy(self) -> float | None:
        """Speed as a share of a copy of the same bytes timed in the same runs (COPY_SAME), where timed."""
        return self.beside(COPY_SAME)

    @property
    def memory_ratio(self) -> float | None:
        if self.yours_bytes is None:
            return None
        return self.baseline_bytes / max(self.yours_bytes, 1)

    @property
    def credit(self) -> float:
        """Time's credit, and where memory is graded too, the lower of the two."""
        time_credit = credit(self.ratio, self.target)
        if self.memory_target is None:
            return time_credit
        return min(time_credit, credit(self.memory_ratio, self.memory_target))

    def report(self, graded: bool = True) -> str:
        target = (f" (target {self.target:.2f}x; full credit from there, none below {self.target / 2:.2f}x)"
                  if graded else " (not graded)")
        lines = [f"{self.title}, shape {self.shape}, {self.dtype}, on {self.device}:",
                 f"  yours {self.yours_ms:.4f} ms, {self.baseline_name} {self.baseline_ms:.4f} ms "
                 f"-> {self.ratio:.2f}x{target}"]
        if self.memory_target is not None:
            aim = (f" (target {self.memory_target:.2f}x; full credit from there, none below "
                   f"{self.memory_target / 2:.2f}x)") if graded else ""
            lines.append(f"  peak memory above the inputs: yours {self.yours_bytes / 2**30:.3f} GiB, "
                         f"{self.baseline_name} {self.baseline_bytes / 2**30:.3f} GiB -> {self.memory_ratio:.2f}x "
                         f"less{aim}; the score is the lower of time's and memory's")
        if self.placements and len(self.placements["yours"]) > 1:
            ratios = [b / y for b, y in zip(self.placements["baseline"], self.placements["yours"])]
            lines.append(f"  (medians over {len(ratios)} placements of the inputs in memory; ratio "
                         f"{min(ratios):.2f}x to {max(ratios):.2f}x across them)")
        for name, ms in (self.context or {}).items():
            lines.append(f"  beside it, not graded: {name} {ms:.4f} ms -> yours {self.beside(name):.2f}x"
                         if isinstance(ms, float) else f"  beside it, not graded: {name} not timed ({ms})")
        if self.gbs is not None:
            lines.append(f"  {self.gbs:.0f} GB/s = {100 * self.gbs / self.ceiling_gbs:.0f}% of this GPU's "
                         f"measured copy bandwidth ({self.ceiling_gbs:.0f} GB/s)")
        if self.tflops is not None:
            peak = (f" ({100 * self.tflops / self.peak_tflops:.0f}% of this GPU's dense 16-bit peak, "
                    f"{self.peak_tflops:.0f} TFLOP/s by its datasheet)") if self.peak_tflops else ""
            lines.append(f"  yours {self.tflops:.0f} TFLOP/s{peak}; {self.baseline_name} "
                         f"{self.tflops / self.ratio:.0f} TFLOP/s")
        if graded and self.ratio < self.target:
            lines += [f"  why it may be slow: {line}" for line in self.advice()]
        if graded and self.memory_target is not None and self.memory_ratio < self.memory_target:
            lines.append(f"  why it needs memory: {self.baseline_bytes / self.memory_target / 2**30:.3f} GiB or less "
                         f"above the inputs gets full credit. Memory your function keeps between calls counts "
                         f"as its own. {self.memory_hint}")
        return "\n".join(lines)

    def record(self, points: float, of: float) -> dict:
        """The measurement as data (what the report prints), for the class report to read back."""
        return {"kind": "speed", "title": self.title, "shape": str(tuple(self.shape)), "dtype": self.dtype,
                "gpu": self.device, "baseline": self.baseline_name, "yours_ms": self.yours_ms,
                "baseline_ms": self.baseline_ms, "ratio": self.ratio, "target": self.target, "gbs": self.gbs,
                "pct_of_ceiling": None if self.gbs is None else 100 * self.gbs / self.ceiling_gbs,
                "pct_of_same_copy": None if self.of_same_copy is None else 100 * self.of_same_copy,
                "tflops": self.tflops, "yours_bytes": self.yours_bytes, "baseline_bytes": self.baseline_bytes,
                "memory_target": self.memory_target, "score": f"{points:.2f}/{of:g}"}

    def advice(self) -> list:
        """What the measured rates say about a kernel below its target, and what the fast one does."""
        said = []
        if self.gbs is not None and self.ceiling_gbs:
            share = self.gbs / self.ceiling_gbs
            if share < MEMORY_BOUND_SHARE:
                said.append(f"your kernel moves its bytes at {100 * share:.0f}% of what this GPU can copy: it "
                            f"waits on memory more than it needs to (blocks too small to keep enough loads in "
                            f"flight, loads that are not contiguous along a block, or a tensor read twice).")
            else:
                said.append(f"your kernel already moves its bytes at {100 * share:.0f}% of what this GPU can "
                            f"copy: to be faster it must move fewer of them (read each input once, write no "
                            f"intermediate).")
        if self.tflops is not None and self.peak_tflops:
            said.append(f"your kernel reaches {100 * self.tflops / self.peak_tflops:.0f}% of the tensor cores' "
                        f"peak; the baseline reaches {100 * self.tflops / self.ratio / self.peak_tflops:.0f}%.")
        if self.speed_hint:
            said.append(f"a fast kernel here: {self.speed_hint}")
        return said


def step_leaves(args) -> list:
    """The arguments of one whole step (spec.times_step): the same tensors, detached, the floating ones
    taking a gradient (no copy: a copy would be timed as part of the step)."""
    return [a.detach().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in args]


def output_shape(spec, args) -> tuple:
    """The shape of the exercise's output on these arguments, from the baseline on meta tensors (no
    memory, no computation)."""
    meta = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in args]
    with torch.no_grad():
        return tuple(spec.baseline(*meta).shape)


def step(fn, args, dy, spec=None) -> tuple:
    """One whole step: fn's forward on `args` (from step_leaves), then the gradients of its floating
    inputs for the output gradient dy. With `spec`, fn is the student's: its output must come from an
    autograd.Function, and the output comes first (step_outputs)."""
    y = fn(*args)
    if spec is None:
        return torch.autograd.grad(y, _differentiable(args), dy)
    from_a_function(spec, y, "the output of a timed step")
    return step_outputs(spec, y, torch.autograd.grad(y, _differentiable(args), dy))


def baseline_call(spec, args, dy=None):
    """What is timed of the exercise's PyTorch baseline: the forward call, one whole step (times_step),
    or one backward pass (of the output gradient dy, random where none is given) through a forward
    graph made here, untimed."""
    if not spec.backward:
        return lambda: spec.baseline(*args)
    if spec.times_step:
        leaves = step_leaves(args)
        dy = torch.randn(output_shape(spec, args), device=leaves[0].device).to(leaves[0].dtype) if dy is None else dy
        return lambda: step(spec.baseline, leaves, dy)
    base_leaves = [a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point()
                   else a for a in args]
    y_base = spec.baseline(*base_leaves)
    dy = torch.randn_like(y_base) if dy is None else dy
    return lambda: torch.autograd.grad(y_base, _differentiable(base_leaves), dy, retain_graph=True)


def student_call(spec, fn, args, shape, dtype, gen, record) -> timing.Fresh:
    """The student's function as it is timed: the forward call, or for a backward exercise one backward
    pass, with new input values before every timed run and a few runs' results checked.

    A function could compute once and then hand back what it kept (a cache keyed on the input tensors,
    or on a fingerprint of their values), and be timed at nothing. So before each timed run new values
    are drawn from `gen` into the same input tensors (the same addresses: placement is the caller's
    choice), and for a backward exercise a new forward graph and output gradient are made. The runs
    `timing.compare` picks at random are checked afterwards against the reference on that run's
    inputs, remade from the generator's saved state: no expected value exists while the student's
    function runs. Every run must also launch a Triton kernel, on the current stream.
    """
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    device = tensors[0].device
    on_gpu = device.type == "cuda"
    state = {}

    def prepare():
        state["rng"] = gen.get_state()
        with torch.no_grad():
            for a, new in zip(args, spec.make_inputs(shape, dtype, device, gen)):
                if isinstance(a, torch.Tensor):
                    a.copy_(new)
        if spec.times_step:     # the whole step is timed: only its output gradient is drawn here
            dy = torch.randn(output_shape(spec, args), generator=gen, device=device).to(dtype)
            state["step"] = (step_leaves(args), dy)
        elif spec.backward:
            leaves = [a.detach().clone().requires_grad_() if a.is_floating_point() else a for a in tensors]
            with stderr_to_stdout(), no_saved_tensor_hooks(spec):
                y = fn(*leaves)
            dy = torch.randn(tuple(y.shape), generator=gen, device=device).to(dtype)
            state["graph"] = (y, _differentiable(leaves), dy)

    def call():
        launches, side, replays = record.launches, record.side_streams, record.graph_replays
        stream = torch.cuda.current_stream() if on_gpu else None
        if spec.times_step:
            with no_saved_tensor_hooks(spec):
                out = step(fn, *state["step"], spec)
        elif spec.backward:
            y, leaves, dy = state["graph"]
            with no_saved_tensor_hooks(spec):
                out = torch.autograd.grad(y, leaves, dy, retain_graph=True)
        else:
            for t in tensors:  # as an in-place write would: a cache that watches version counters misses
                torch.autograd.graph.increment_version(t)
            out = _as_tuple(fn(*args))
        if on_gpu and torch.cuda.current_stream() != stream:
            raise CheckFailed(f"{spec.title}: a timed call of your function changed the current CUDA stream. "
                              f"The timer's end marker would go on that stream and miss your work: leave "
                              f"the stream as it was.")
        if record.launches == launches:
            raise CheckFailed(f"{spec.title}: one of the timed calls of your function launched no Triton "
                              f"kernel. Every call must compute its result: handing back a result kept "
                              f"from an earlier call is not allowed.")
        if record.side_streams != side:
            raise CheckFailed(f"{spec.title}: a timed call of your function launched work on another CUDA "
                              f"stream, where the timer does not see it. Launch on the current stream.")
        if record.graph_replays != replays:
            raise replayed_a_graph(spec, "one of the timed calls of your function", "")
        return out

    def verify(out, run):
        label = f"timed run {run + 1} at shape {shape} (new input values, checked after the run)"
        remade = torch.Generator(device=device)
        remade.set_state(state["rng"])
        inputs = spec.make_inputs(shape, dtype, device, remade)
        if spec.backward:
            with no_saved_tensor_hooks(spec):
                expected, _ = expected_gradients(spec, inputs, remade, dtype)
        else:
            for i, (a, want) in enumerate(zip(args, inputs)):
                if isinstance(a, torch.Tensor) and not torch.equal(a, want):
                    raise CheckFailed(f"{spec.title}: your function changed its input argument {i} on {label}. "
                                      f"Write results to a new output tensor, never into an input.")
            if spec.judge:
                spec.judge(inputs, _plain(spec, out, label), None, label)
                return
            expected = _as_tuple(spec.reference(*inputs))
        _compare_outputs(spec, _plain(spec, out, label), expected, dtype, label)

    prepare()  # the warm-up calls run on these
    return timing.Fresh(call, prepare, verify)


def step_memory(spec, fn, args, dy, student: bool = True) -> int:
    """Bytes of GPU memory one whole step of fn (spec.times_step: forward and backward, on step_leaves)
    needs above its inputs: how far the CUDA caching allocator's count of live tensors rose during the
    step (the gradients it returns included), or the most its own allocations held at once where that is
    more (own_peak: memory from before the step that it freed lowers nothing), plus the memory it used
    that existed before and is not one of its inputs: a workspace or a cache kept between calls counts as
    the step's own, as it would if it were allocated in it. Memory reserved in a private pool (a CUDA
    graph's, a torch.cuda.MemPool's) that no tensor held when the step began counts too, less what the
    step's allocations took of it: only that pool's allocations can use it, and a graph's replay, which
    allocates nothing, computes in it (idle_in_private_pools). The student's step runs under the guard,
    which notes that memory; the function should have run once at this shape already (compiled and
    tuned). GPU only."""
    import gc
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()   # the pools of graphs no longer referenced go back here: what stays is in use
    idle, pools = idle_in_private_pools(torch.cuda.memory._snapshot().get("segments", []),
                                        torch.cuda.current_device())
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    with _allocations_traced() as trace:
        if student:
            with stderr_to_stdout(), no_saved_tensor_hooks(spec), \
                    watch_student(spec, (args, dy), poison=False, tune_briefly=False, memory=True) as record:
                grads = step(fn, args, dy, spec)
            refuse(spec, record, "your function", "in the step whose memory is measured")
            kept = record.kept_bytes(args)
        else:
            grads, kept = step(fn, args, dy), 0
        torch.cuda.synchronize()
    if len(trace) >= HISTORY_ENTRIES:
        raise CheckFailed(f"{spec.title}: your step made over {HISTORY_ENTRIES:,} allocations and frees of GPU "
                          f"memory, more than the grader records to count its memory: allocate once per "
                          f"tensor you need, not in a loop of tiny pieces.")
    peak = max(torch.cuda.max_memory_allocated() - before, own_peak(trace))
    reused = own_peak(e for e in trace if any(start <= e["addr"] < end for start, end in pools)) if pools else 0
    del grads
    return peak + kept + max(0, idle - reused)


def idle_in_private_pools(segments: list, device: int) -> tuple:
    """(bytes, [(start, end)]): of the CUDA caching allocator's segments on `device` (the "segments" of
    torch.cuda.memory._snapshot()) that belong to a private pool, the bytes no tensor holds, and the
    address ranges of all of them. A CUDA graph keeps the temporaries of what it captured in such a pool,
    free between replays but reserved for it; the default pool is (0, 0)."""
    private = [s for s in segments
               if s.get("device", device) == device and tuple(s.get("segment_pool_id", (0, 0))) != (0, 0)]
    return (sum(s["total_size"] - s["active_size"] for s in private),
            [(s["address"], s["address"] + s["total_size"]) for s in private])


# The most allocator events one measured step may make (one event an allocation or a free; a training
# step makes a few hundred).
HISTORY_ENTRIES = 1 << 20


def own_peak(events) -> int:
    """The most bytes that allocations made in a step held at once, from the CUDA caching allocator's trace
    of the step (torch.cuda.memory._snapshot()'s device_traces: "alloc" and "free_completed" events with
    an address and a size, in order). Memory that existed before the step and was freed in it counts
    nothing: the allocator's own peak is counted from memory_allocated() at the start, and a step that
    first freed a tensor kept between calls (in a global, made again at the end) lowered that floor and
    hid as much of its own peak."""
    live, held, peak = {}, 0, 0
    for event in events:
        if event["action"] == "alloc":
            live[event["addr"]] = event["size"]
            held += event["size"]
            peak = max(peak, held)
        elif event["action"] == "free_completed" and event["addr"] in live:
            held -= live.pop(event["addr"])
    return peak


# The bindings every public reset of the CUDA allocator's peak (torch.cuda.reset_peak_memory_stats and
# its older names) goes through: a step that reset the peak after a large temporary would hide it.
_PEAK_RESETS = ("_cuda_resetPeakMemoryStats", "_cuda_resetAccumulatedMemoryStats")


# The bindings that turn the allocator's trace on and off (torch.cuda.memory._record_memory_history):
# a step that turned it off would make its own allocations unseen.
_HISTORY_SWITCHES = ("_cuda_record_memory_history", "_cuda_record_memory_history_legacy")


@contextlib.contextmanager
def _allocations_traced():
    """Yields a list that, once the block has run, holds the allocator's trace of it (no stacks: only the
    events). Inside the block the trace cannot be turned off, nor the allocator's peak reset."""
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                             max_entries=HISTORY_ENTRIES)
    trace = []
    try:
        with _neutralized(_HISTORY_SWITCHES + _PEAK_RESETS):
            yield trace
    finally:
        snapshot = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        traces = snapshot.get("device_traces", [])
        device = torch.cuda.current_device()
        trace.extend(traces[device] if device < len(traces) else [])


@contextlib.contextmanager
def _neutralized(names):
    """While the block runs, those of torch._C's bindings named do nothing."""
    kept = {name: getattr(torch._C, name) for name in names if hasattr(torch._C, name)}
    for name in kept:
        setattr(torch._C, name, lambda *args, **kwargs: None)
    try:
        yield
    finally:
        for name, original in kept.items():
            setattr(torch._C, name, original)


def measure_memory(spec, fn, dtype, gen) -> tuple:
    """(yours, the baseline's) step_memory at the timed shape, on the same inputs."""
    args = step_leaves(spec.make_inputs(spec.speed_shape, dtype, "cuda", gen))
    dy = torch.randn(output_shape(spec, args), generator=gen, device="cuda").to(dtype)
    with stderr_to_stdout():
        step(fn, args, dy)   # compiled and tuned before it is measured
    return step_memory(spec, fn, args, dy), step_memory(spec, spec.baseline, args, dy, student=False)


# Where tensors land in GPU memory moves a memory-bound kernel's time by up to about 15% (measured on an
# H200: the same RMSNorm kernel ran 0.068 or 0.078 ms depending on placement; docs/gpu-notes.md). Each
# speed check therefore times several copies of the inputs at different addresses and takes the median.
PLACEMENTS = 4
SPACER_MIB = (0, 37, 101, 211)


def context_baselines(spec, args) -> tuple:
    """({name: spec-like baseline}, {name: why it is not timed}): what a user of PyTorch would otherwise
    call, timed beside the graded baseline but never graded: PyTorch's default path where the graded
    baseline pins another (spec.default_baseline), and torch.compile of the graded baseline, compiled
    here on `args` before any timing (where it cannot compile, the reason instead)."""
    import dataclasses
    specs, missing = {}, {}
    if spec.default_baseline is not None:
        specs[spec.default_baseline_name] = dataclasses.replace(spec, baseline=spec.default_baseline)
    print(f"{spec.title}: compiling the baseline with torch.compile, to time it beside (a large "
          f"one can take a minute the first time) ...", flush=True)
    try:
        compiled = dataclasses.replace(spec, baseline=torch.compile(spec.baseline, dynamic=False))
        with stderr_to_stdout():
            baseline_call(compiled, args)()          # compiles (and tunes) now, not in a timed call
            torch.cuda.synchronize()
        specs[COMPILED] = compiled
    except Exception as e:  # noqa: BLE001 - no compiler here, an op it cannot trace: said, not fatal
        missing[COMPILED] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:160] if str(e).strip() else ''}"
    return specs, missing


COMPILED = "torch.compile of the baseline"
# Timed beside a memory-bound exercise: a device copy moving as many bytes as the exercise does (half read,
# half written). The copy bandwidth (timing.copy_bandwidth_gbs, a 1 GiB copy) is more than a copy of a
# graded size reaches: on an H200 a 64 MiB copy ran at 89% of it, fixed costs counting for more.
COPY_SAME = "a copy of the same bytes"


def _copy_of(moved: int):
    """A device copy of moved / 2 bytes into another buffer: as many bytes read and written as `moved`."""
    source = torch.empty(moved // 2, dtype=torch.uint8, device="cuda")
    target = torch.empty_like(source)
    return lambda: target.copy_(source)


def time_placement(baseline, yours, beside: dict, compare=None) -> dict:
    """Median ms of one placement of the inputs: {"baseline", "yours"} from runs of the two alone, then
    what is timed beside them but never graded (`beside`, {name: call}) with the student's function again,
    in runs of their own ({name, ..., "yours (beside)"}). Timed in the graded runs, torch.compile's Day 4
    block slowed the reference's between them: 0.80x of eager on an H200, 0.99x without it."""
    compare = compare or timing.compare   # looked up at the call, as a monkeypatched clock would be
    budget = 400 / PLACEMENTS
    ms = compare({"baseline": baseline, "yours": yours}, budget_ms=budget)
    if beside:
        ms.update({"yours (beside)" if name == "yours" else name: t
                   for name, t in compare({**beside, "yours": yours}, budget_ms=budget).items()})
    return ms


def measure_speed(key: str, fn, context: bool = False) -> SpeedResult:
    """Check fn at the timed size, then time it against the baseline (GPU only). With `context`, PyTorch's
    default path and torch.compile of the baseline (SpeedResult.context), and for a memory-bound exercise a
    copy of as many bytes (COPY_SAME), are timed beside fn in runs of their own (time_placement)."""
    spec = exercises.get(key)
    dev = _device.current()
    dtype = spec.timed_dtype(dev)
    seed = _seed(True)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    # A wrong result is worth nothing however fast: check at the timed size first.
    _check_case(spec, fn, spec.speed_shape, dtype, dev, gen, seed)
    others, missing = context_baselines(spec, spec.make_inputs(spec.speed_shape, dtype, "cuda", gen)) \
        if context else ({}, {})
    spacers, samples = [], {"baseline": [], "yours": []}
    with watch(poison=False, ops=False) as record:  # counts launches only: nothing slows the calls
        for mib in SPACER_MIB[:PLACEMENTS]:
            spacers.append(torch.empty(mib * 2**20 + 4096, dtype=torch.uint8, device="cuda"))
            args = spec.make_inputs(spec.speed_shape, dtype, "cuda", gen)
            yours = student_call(spec, fn, args, spec.speed_shape, dtype, gen, record)
            beside = {name: baseline_call(other, args) for name, other in others.items()}
            if context and spec.bytes_moved:
                beside[COPY_SAME] = _copy_of(spec.bytes_moved(spec.speed_shape, dtype))
            with stderr_to_stdout():
                ms = time_placement(baseline_call(spec, args), yours, beside)
            for name in ms:
                samples.setdefault(name, []).append(ms[name])
    del spacers, args, yours, beside
    result = SpeedResult(spec.title, spec.speed_shape, _dtype_name(dtype), dev.name, spec.baseline_name,
                         statistics.median(samples["yours"]), statistics.median(samples["baseline"]),
                         spec.target, placements={k: samples[k] for k in ("baseline", "yours")},
                         speed_hint=spec.speed_hint,
                         usage=[dict(u, kernel=name) for name, u in record.compiled.items()],
                         context={**{name: statistics.median(samples[name]) for name in samples
                                     if name not in ("baseline", "yours", "yours (beside)")}, **missing},
                         yours_beside_ms=statistics.median(samples["yours (beside)"])
                         if "yours (beside)" in samples else None)
    if spec.memory_target:
        result.yours_bytes, result.baseline_bytes = measure_memory(spec, fn, dtype, gen)
        result.memory_target, result.memory_hint = spec.memory_target, spec.memory_hint
    if spec.bytes_moved:
        result.gbs = spec.bytes_moved(spec.speed_shape, dtype) / (result.yours_ms * 1e-3) / 1e9
        result.ceiling_gbs = timing.copy_bandwidth_gbs()
    if spec.flops:
        result.tflops = spec.flops(spec.speed_shape, dtype) / (result.yours_ms * 1e-3) / 1e12
        result.peak_tflops = hardware.peak_tflops(dev.name)
    return result


def speed_figure(result, reference_ratio: float | None = None):
    """The measured ratio over each placement of the inputs, against the target (full credit), half of it
    (no credit below) and, where the benchmark measured it on this GPU, the reference solution's ratio."""
    import matplotlib.pyplot as plt
    placements = result.placements or {"yours": [result.yours_ms], "baseline": [result.baseline_ms]}
    ratios = [b / y for b, y in zip(placements["baseline"], placements["yours"])]
    fig, ax = plt.subplots(figsize=(7, 0.6 + 0.35 * len(ratios)))
    colour = "tab:green" if result.ratio >= result.target else "tab:orange"
    ax.barh([f"placement {i + 1}" for i in range(len(ratios))], ratios, color=colour)
    marks = [(result.target, "full credit", "black", "-"), (result.target / 2, "no credit below", "grey", ":")]
    if reference_ratio:
        marks.append((reference_ratio, "reference solution", "tab:blue", "--"))
    for x, label, c, style in marks:
        ax.axvline(x, color=c, linestyle=style, label=f"{label} ({x:.2f}x)")
    ax.set_xlim(0, 1.15 * max(ratios + [m[0] for m in marks]))
    ax.set_xlabel(f"speed-up over {result.baseline_name} (higher is better)", fontsize=8)
    ax.set_title(f"{result.title} on {result.device}: {result.ratio:.2f}x", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.invert_yaxis()
    fig.tight_layout()
    return fig


def _show(fig) -> None:
    """Show a figure as a cell output (in IPython), and free it."""
    import matplotlib.pyplot as plt
    try:
        from IPython import get_ipython
        from IPython.display import display
        if get_ipython() is not None:
            display(fig)
    finally:
        plt.close(fig)


def check_speed(key: str, fn, points: float = 1.0):
    """Time fn against the exercise's PyTorch baseline on the GPU; returns the points earned."""
    integrity.verify(_grader_functions())
    spec = exercises.get(key)
    if not _device.current().is_gpu:
        return _no_gpu(f"The speed check of {spec.title}")
    result = measure_speed(key, fn, context=True)
    print(result.report())
    for line in gpu_compile.usage_said(result.usage, _device.current()):   # as the grader's feedback says it
        print(line)
    for line in reference_figures.said(key, result.device):
        print(line)
    if not grading():
        _show(speed_figure(result, reference_figures.ratio_on(key, result.device, baseline=result.baseline_name)))
    print(f"  speed score: {result.credit * points:.2f} of {points:g}")
    return round(result.credit * points, 4)


# Random cases a prediction must also get right at grading time: no table of visible answers passes.
HIDDEN_PREDICTION_CASES = 4


def prediction_cases(spec) -> list:
    """The visible cases, and at grading time fresh ones drawn from the hidden seed."""
    cases = list(spec.cases)
    if grading() and spec.sample is not None:
        rng = random.Random(_seed(hidden=True))
        cases += [spec.sample(rng) for _ in range(HIDDEN_PREDICTION_CASES)]
    return cases


def how_far(got: float, want: float) -> str:
    """Which way an answer is off and roughly how far, without the right answer itself."""
    if not math.isfinite(got) or got <= 0:
        return "not a positive number"
    ratio = got / want
    side = "too high" if ratio > 1 else "too low"
    off = max(ratio, 1 / ratio)
    if off >= 100:
        return f"{side} by a factor of 100 or more"
    if off >= 2:
        return f"{side} by a factor between 2 and 100"
    return f"{side} by less than a factor of 2"


def check_prediction(key: str, predict) -> None:
    """Check a prediction function against the performance model's own answer on a few cases.

    A failure says which way the answer is off and roughly how far, never the right number: at
    grading time fresh random cases are checked too, so answers copied from a message do not pass.
    """
    spec = exercises.get(key)
    cases = prediction_cases(spec)
    for case in cases:
        want = spec.model(*case)
        try:
            got = float(predict(*case))
        except Exception as e:
            raise CheckFailed(f"{spec.title}: your function raised {type(e).__name__}: {e} "
                              f"for arguments {case}.") from None
        if not abs(got - want) <= spec.formula_tolerance * abs(want):
            raise CheckFailed(f"{spec.title}: for arguments {case} your answer, {got:.4g} {spec.unit}, is "
                              f"{how_far(got, want)}; within {100 * spec.formula_tolerance:g}% of the "
                              f"model passes.\n  hint: {spec.hint}")
    hidden = len(cases) - len(spec.cases)
    print(f"OK: {spec.title} is right on {len(spec.cases)} cases" + (f" and {hidden} hidden ones." if hidden else "."))


def report_speed(key: str, fn) -> None:
    """Print fn's speed against the baseline without grading it (e.g. a backward pass)."""
    spec = exercises.get(key)
    if not _device.current().is_gpu:
        print(f"Timing {spec.title} needs a CUDA GPU, and this machine has none: nothing was measured.")
        return None
    try:
        result = measure_speed(key, fn)
    except CheckFailed as e:  # not graded: say why there is no timing instead of failing the cell
        print(f"Not timed, because the result at the timed size is wrong:\n{e}")
        return None
    print(result.report(graded=False))


def measured_size() -> int:
    """Elements of the vectors a prediction is measured on: 2**26, at grading time a fresh size near it."""
    if not grading():
        return 2**26
    return random.Random(_seed(hidden=True)).randrange(2**25, 2**27 + 1, 2**20)


def measure_prediction(key: str, predict) -> tuple:
    """(arguments, predicted ms, measured ms, copy bandwidth) on this GPU."""
    spec = exercises.get(key)
    bandwidth = timing.copy_bandwidth_gbs()
    case, measured = spec.measure(bandwidth, measured_size())
    return case, float(predict(*case)), measured, bandwidth


def check_prediction_on_gpu(key: str, predict) -> None:
    """Compare the prediction, given this GPU's measured bandwidth, with the measured time."""
    spec = exercises.get(key)
    dev = _device.current()
    if not dev.is_gpu:
        return _no_gpu(f"Checking the {spec.title} against a measurement")
    case, predicted, measured, bandwidth = measure_prediction(key, predict)
    off = abs(predicted - measured) / measured
    print(f"{spec.title} on {dev.name} (measured copy bandwidth {bandwidth:.0f} GB/s), arguments {case}:")
    print(f"  predicted {predicted:.4f} ms, measured {measured:.4f} ms: off by {100 * off:.0f}% "
          f"(allowed {100 * spec.gpu_tolerance:.0f}%)")
    if off > spec.gpu_tolerance:
        raise CheckFailed(f"{spec.title}: your prediction is {predicted / measured:.2f}x the measured time."
                          f"\n  hint: {spec.hint}")
