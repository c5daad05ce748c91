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
    for w in caught:
        print(f"(warning from your code) {w.category.__name__}: {w.message}")
