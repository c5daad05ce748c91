"""The course's grader: device set-up, correctness, speed and honesty checks for Triton exercises.

Notebooks use it as:

    import grader
    dev = grader.setup()                        # first: picks the GPU or Triton's CPU interpreter
    grader.check("day1.vector_add", add)        # correctness (raises with a teaching message)
    grader.check_speed("day1.vector_add", add)  # speed vs PyTorch on the GPU (returns the points)

The names below are imported on first use, so that a process which needs one submodule (nbgrader
loading grader.checker.headless from its config, the instructor's command line) does not pay for torch.
"""
import importlib
import os

# Read when a notebook imports the grader, before any student cell runs, so that a cell that removes
# NBGRADER_EXECUTION from the environment does not turn grading off (grader.student.checks.grading).
_GRADING_AT_IMPORT = os.environ.get("NBGRADER_EXECUTION") == "autograde"

# The grader's own code, all of its subpackages: frames and functions from here are the grader's.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

_PUBLIC = {
    "setup": "device", "current": "device", "Device": "device",
    "check": "student.checks", "check_speed": "student.checks", "check_prediction": "student.checks",
    "check_prediction_on_gpu": "student.checks", "report_speed": "student.checks", "credit": "student.checks",
    "grading": "student.checks", "GPURequired": "student.checks",
    "CheckFailed": "compare", "bench": "timing", "memcheck": "student.memcheck",
}
__all__ = list(_PUBLIC)


def __getattr__(name):
    if name in _PUBLIC:
        value = getattr(importlib.import_module(f".{_PUBLIC[name]}", __name__), name)
    else:  # a submodule, as `grader.timing` after `import grader`
        try:
            value = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module 'grader' has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))
