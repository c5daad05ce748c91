"""Where a sandboxed kernel may write, enforced by Linux's Landlock as well as by file modes.

A kernel's user (grader/pipeline/sandbox.py) can write its home, its notebook's folder and /tmp by the
file modes alone. Landlock adds what modes cannot say: the process may not write its own memory through
/proc/self/mem, a way around the grader's guard in its own process that needs no refused module, only a
path built at run time. Nor may it write any other file outside those folders and /dev (the GPU's device
files, /dev/null, /dev/shm). Reading files and running programs are not restricted.

It needs Linux 5.13 or newer with Landlock enabled (most distributions since 2022; `abi()` says). Where
it is missing, `restrict_writes` says why and the file modes alone apply.
"""
from __future__ import annotations

import ctypes
import os

# The system calls have the same numbers on every architecture (they came after numbering was unified).
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_EXECUTE, _WRITE_FILE, _READ_FILE, _TRUNCATE = 1 << 0, 1 << 1, 1 << 2, 1 << 14
# The write-type rights each Landlock version knows (a ruleset naming a right its kernel does not know is
# refused): writing, removing and making files of every kind; linking or renaming across folders (v2);
# truncating (v3). Device ioctls (v5) are left alone: the GPU is driven by them.
_WRITES_BY_VERSION = {1: _WRITE_FILE | sum(1 << bit for bit in range(4, 13)), 2: 1 << 13, 3: _TRUNCATE}
# The rights a rule on a single file (not a folder) may carry.
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1   # packed in the kernel's header
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _syscall(number: int, *args) -> int:
    return _libc().syscall(ctypes.c_long(number), *args)


def abi() -> int:
    """The Landlock version this Linux kernel offers; 0 without Landlock (or off Linux)."""
    try:
        version = _syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(version, 0)


def restrict_writes(folders: list) -> str | None:
    """From now on this process, and every process it starts, writes only beneath `folders`.
    Returns None when that is in force, else why not (nothing changed)."""
    version = abi()
    if version < 1:
        return "this Linux kernel has no Landlock"
    handled = sum(rights for v, rights in _WRITES_BY_VERSION.items() if v <= version)
    attr = _RulesetAttr(handled)
    ruleset = _syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        return f"Landlock refused the ruleset ({os.strerror(ctypes.get_errno())})"
    try:
        for folder in folders:
            try:
                fd = os.open(folder, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue   # a folder that does not exist gets no right
            try:
                rights = handled if os.path.isdir(folder) else handled & _FILE_RIGHTS
                rule = _PathBeneathAttr(rights, fd)
                if _syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule),
                            ctypes.c_uint32(0)) != 0:
                    return f"Landlock refused a rule for {folder} ({os.strerror(ctypes.get_errno())})"
            finally:
                os.close(fd)
        # Required of a process without privileges: nothing it runs may gain rights (no set-user-id programs).
        if _libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return f"no_new_privs could not be set ({os.strerror(ctypes.get_errno())})"
        if _syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return f"Landlock could not restrict this process ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    return None
