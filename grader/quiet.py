"""Keep a student's kernel from writing to stderr during a graded call.

nbgrader scores a test cell 0 when anything appears on stderr, and a correct kernel may still print
a compiler or deprecation warning. Those messages are moved to stdout (where they stay visible),
both Python's and the C-level ones written straight to file descriptor 2.
"""
from __future__ import annotations

import contextlib
import os
import sys
import types
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
    caught: list = []
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(sys.stdout):
            warnings.simplefilter("always")
            yield
    finally:
        sys.stdout.flush()
        if saved_fd is not None:
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
        # (also when the call raised: a warning may be what explains the failure)
        for (who, category, message), times in _tallied(caught).items():
            print(f"(warning from {who}{f', {times} times' if times > 1 else ''}) {category}: {message}")


def _tallied(caught) -> dict:
    """Each different warning once, with how often it came and whose code gave it: Triton's interpreter
    under some NumPy warns at every load of a kernel (hundreds of the same line), and that is no
    mistake of the student's.

    This runs after the call, where nothing watches it: no method of the notebook's may run here (a
    warning whose __str__ or a file name whose startswith computed the answer was a red team's way to
    fill an output unseen). So the text is read only from plain strings, by the built-in types' own
    descriptors, never by asking the objects."""
    tally: dict = {}
    owners: dict = {}
    for w in caught:
        key = _plain_key(w, owners)
        tally[key] = tally.get(key, 0) + 1
    return tally


def _plain_key(w, owners: dict) -> tuple:
    """(whose, category, text) of a recorded warning, all plain strings; `owners` caches files' owners."""
    if type(w.message) is _Plain:   # (made plain already, inside a watched call: let_go_of_warnings)
        return tuple(_ARGS.__get__(w.message, BaseException))
    filename = w.filename if type(w.filename) is str else None
    if filename not in owners:
        owners[filename] = _whose(filename) if filename is not None else "your code"
    return owners[filename], _name_of(w.category), _text_of(w.message)


class _Plain(UserWarning):
    """A warning of a watched call, as plain text: (whose, category, text)."""


@contextlib.contextmanager
def let_go_of_warnings():
    """Inside a watched call (checks.watch_student): its warnings are recorded, and at the end, still
    watched, made plain text and handed on to the enclosing stderr_to_stdout, while the call's own objects
    (the warnings, their `source=` objects, the filters it added) are let go here. Let go later, after the
    watch, a finalizer or __del__ of the notebook's on one of them ran PyTorch unseen and filled the
    call's output in (a red team's, through the pipeline, with each of those three)."""
    caught: list = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:
        owners: dict = {}
        plain = [_plain_key(w, owners) for w in caught]
        caught.clear()
        for key in plain:
            warnings.warn(_Plain(*key))


_TYPE_NAME = type.__dict__["__name__"]
_ARGS = BaseException.__dict__["args"]


def _name_of(category) -> str:
    return _TYPE_NAME.__get__(category, type) if issubclass(type(category), type) else "Warning"


def _text_of(message) -> str:
    """The warning's text where it is a plain string; else what kind of object it is."""
    if type(message) is str:
        return message
    if issubclass(type(message), BaseException):   # (by its type: isinstance may ask the object)
        args = _ARGS.__get__(message, BaseException)
        if type(args) is tuple and all(type(arg) is str for arg in args):
            return args[0] if len(args) == 1 else ", ".join(args)
    return f"(not shown: a message of class {_TYPE_NAME.__get__(type(message), type)})"


def _whose(filename: str) -> str:
    """The package a warning's file belongs to (triton, torch, numpy), or "your code"."""
    path = os.path.realpath(filename)
    for name, module in list(sys.modules.items()):   # (plain modules only, read from their own dicts)
        if type(name) is not str or "." in name or type(module) is not types.ModuleType:
            continue
        file = module.__dict__.get("__file__")
        if type(file) is str and os.path.basename(file) == "__init__.py" \
                and path.startswith(os.path.dirname(os.path.realpath(file)) + os.sep):
            return name
    return "your code"
