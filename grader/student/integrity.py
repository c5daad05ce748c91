"""Refuse to grade when the tools the grader relies on were replaced from a notebook cell.

A student's earlier cell runs in the same process as the test cells, so it could swap the timer,
the CUDA events or a checker for a fake. Genuine versions of these come from files inside the
torch, triton and grader packages (or are built-in); a replacement defined in a notebook does not.
"""
from __future__ import annotations

import inspect
import os
import re
import sys
import time
import types

import torch

from grader import _PACKAGE_DIR


class TamperingDetected(RuntimeError):
    pass


def _origin(obj) -> str | None:
    """The file an object's code comes from, or None for built-ins."""
    if isinstance(obj, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        return None
    target = inspect.unwrap(obj) if callable(obj) else obj
    try:
        return os.path.abspath(inspect.getfile(target))
    except TypeError:
        return None


def _check(name, obj, package_dir, allow_builtin=True):
    origin = _origin(obj)
    if origin is None and allow_builtin:
        return
    if origin is None or not origin.startswith(package_dir):
        raise TamperingDetected(
            f"{name} has been replaced (it now comes from {origin or 'an unknown place'}). "
            f"Restart the kernel, remove the cell that changes it, and run the notebook again.")


def verify(grader_functions: dict | None = None) -> None:
    """Raise TamperingDetected if a timer, event, comparison or grader function is not the original."""
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    if not isinstance(time.perf_counter, types.BuiltinFunctionType):
        raise TamperingDetected("time.perf_counter has been replaced. Restart the kernel and run again.")
    for name in ("isclose", "equal", "allclose"):
        if not isinstance(getattr(torch, name), types.BuiltinFunctionType):
            raise TamperingDetected(f"torch.{name} has been replaced. Restart the kernel and run again.")
    _check("torch.cuda.Event", torch.cuda.Event, torch_dir)
    _check("torch.cuda.Event.elapsed_time", torch.cuda.Event.elapsed_time, torch_dir)
    _check("torch.cuda.Event.record", torch.cuda.Event.record, torch_dir)
    _check("torch.cuda.synchronize", torch.cuda.synchronize, torch_dir)
    _check("torch.Tensor.double", torch.Tensor.double, torch_dir)
    import triton.runtime.jit as jit
    triton_dir = os.path.dirname(os.path.dirname(os.path.abspath(jit.__file__)))
    # the grader's own guard wraps it for good (grader/student/guard.py), so either origin is genuine
    _check("triton's JITFunction.run", jit.JITFunction.run, (triton_dir, _PACKAGE_DIR))
    for name, fn in (grader_functions or {}).items():
        _check(f"grader's {name}", fn, _PACKAGE_DIR, allow_builtin=False)


def no_event_hooks() -> None:
    """Raise TamperingDetected if a tracer, a profiler hook or (Python 3.12+) a sys.monitoring tool is
    installed: their callbacks see every value the grader's own functions return (which timed runs are
    checked, the guard's record) while the student's work is graded."""
    if sys.gettrace() is not None or sys.getprofile() is not None:
        raise TamperingDetected("a trace or profile function is installed (sys.settrace / sys.setprofile); none "
                                "may be while your work is graded. Restart the kernel and run again.")
    monitoring = getattr(sys, "monitoring", None)
    tools = [monitoring.get_tool(i) for i in range(6)] if monitoring is not None else []
    if any(tool is not None for tool in tools):
        raise TamperingDetected(f"a sys.monitoring tool is registered ({', '.join(t for t in tools if t)}); none "
                                f"may be while your work is graded. Restart the kernel and run again.")


# The grader's modules that run in the student's process at grading time: the checker calls into these.
KERNEL_SIDE = ("grader.student.serve", "grader.student.checks", "grader.student.guard", "grader.student.integrity",
               "grader.exercises", "grader.shared_tensors", "grader.compare", "grader.device", "grader.quiet")


class SealedModule(types.ModuleType):
    """A grader module at grading time: no name in it can be rebound or deleted from outside it.

    The submission rules refuse every way they know to reach the grader's modules from a cell
    (grader/pipeline/code_rules.py); this is what holds if a cell finds another. The grader's own code
    is unaffected: a module changes its globals through its dictionary (`global x; x = ...`), not by
    setting its own attributes."""

    def __setattr__(self, name, value):
        # the import system recording a submodule on its package, as `import grader.x.y` does
        if isinstance(value, types.ModuleType) and value.__name__ == f"{self.__name__}.{name}":
            return super().__setattr__(name, value)
        raise AttributeError(f"{self.__name__}.{name} belongs to the grader and cannot be changed while "
                             f"your work is graded")

    def __delattr__(self, name):
        raise AttributeError(f"{self.__name__}.{name} belongs to the grader and cannot be deleted while "
                             f"your work is graded")


# The process's own memory as a file (and the folders that lead to it, where an os.open with dir_fd
# would start from): on the CPU a tensor's values are there, and reading them skips every way out of
# PyTorch that the guard counts (the red team graded a NumPy vector add 3/3 this way).
_OWN_MEMORY = re.compile(r"/proc(/(self|thread-self|\d+)(/task(/\d+)?)?(/(mem|pagemap))?)?|/dev/k?mem")
# A relative path is opened against a folder the event does not name (`dir_fd`): refused by its end.
_MEMORY_FILES = frozenset({"mem", "pagemap", "kmem"})


def _no_process_memory(event: str, args: tuple, realpath=os.path.realpath, abspath=os.path.abspath,
                       fsdecode=os.fsdecode, isabs=os.path.isabs, basename=os.path.basename) -> None:
    # The functions it uses are bound when it is defined: a cell that replaced os.path's would not change it.
    if event != "open" or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    path = fsdecode(args[0])
    if _OWN_MEMORY.fullmatch(realpath(path)) or _OWN_MEMORY.fullmatch(abspath(path)) \
            or (not isabs(path) and basename(path.rstrip("/")) in _MEMORY_FILES):
        raise PermissionError(f"{path}: a process's memory may not be opened while your work is graded")


def _formula_withheld(*case):
    raise RuntimeError("the prediction exercises' formulas are the grading checker's alone at grading time")


def _without_answers() -> None:
    """Drop the hidden cases' shapes and the prediction exercises' formulas from this process: the
    checker names each case's shape when it asks for it and judges predictions in its own process, and
    here a formula would be the answer to copy."""
    from grader import exercises
    for spec in exercises.all_exercises():
        for field in ("hidden_cpu_shapes", "hidden_gpu_shapes"):
            if getattr(spec, field, None):
                object.__setattr__(spec, field, ())   # a frozen dataclass: its own setattr refuses
        model = getattr(spec, "model", None)
        if model is None or model is _formula_withheld:
            continue
        module = sys.modules[model.__module__]
        for name, value in list(vars(module).items()):
            if value is model:
                del vars(module)[name]
        object.__setattr__(spec, "model", _formula_withheld)   # a frozen dataclass: its own setattr refuses


def seal() -> None:
    """At grading time, before any student cell: import the grader's side of the protocol and seal every
    grader module now loaded, so that a cell cannot swap a function the checker will call
    (`checks.run_student`, `serve.kernel_case`, the guard) for its own."""
    import importlib
    for name in KERNEL_SIDE:
        importlib.import_module(name)
    _without_answers()
    for name, module in list(sys.modules.items()):
        if (name == "grader" or name.startswith("grader.")) and type(module) is types.ModuleType:
            module.__class__ = SealedModule
    # An audit hook stays for the life of the process: no cell can remove it.
    sys.addaudithook(_no_process_memory)
    # The threads running now are Jupyter's: one a cell starts and leaves running fails a checked call.
    from grader.student import guard
    guard.watch_threads()
