"""Keep a student's kernel from writing to stderr during a graded call.

nbgrader scores a test cell 0 when anything appears on stderr, and a correct kernel may still print
a compiler or deprecation warning. Those messages are moved to stdout (where they stay visible),
both Python's and the C-level ones written straight to file descriptor 2.
"""
from __future__ import annotations

import contextlib
import os
import sys
import warnings


@contextlib.contextmanager
def stderr_to_stdout():
    sys.stdout.flush()
    sys.stderr.flush()
    saved_fd = None
    try:
        saved_fd = os.dup(2)
        os.dup2(1, 2)
    except OSError:  # no real file descriptors (some embedded front ends): Python level only
        saved_fd = None
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(sys.stdout):
            warnings.simplefilter("always")
            yield
    finally:
        sys.stdout.flush()
        if saved_fd is not None:
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
    for (who, category, message), times in _tallied(caught).items():
        print(f"(warning from {who}{f', {times} times' if times > 1 else ''}) {category}: {message}")


def _tallied(caught) -> dict:
    """Each different warning once, with how often it came and whose code gave it: Triton's interpreter
    under some NumPy warns at every load of a kernel (hundreds of the same line), and that is no
    mistake of the student's."""
    tally: dict = {}
    for w in caught:
        key = (_whose(w.filename), w.category.__name__, str(w.message))
        tally[key] = tally.get(key, 0) + 1
    return tally


def _whose(filename: str) -> str:
    """The package a warning's file belongs to (triton, torch, numpy), or "your code"."""
    path = os.path.realpath(filename or "")
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None) or ""
        if "." not in name and os.path.basename(file) == "__init__.py" \
                and path.startswith(os.path.dirname(os.path.realpath(file)) + os.sep):
            return name
    return "your code"
