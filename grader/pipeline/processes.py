"""The processes a batch starts, and what they leave behind.

Each notebook's nbgrader is started through `start` and registered until `forget`; anything else among
this process's children that appeared since grading began is a leftover of a graded notebook (adopted
here as an orphan, see adopt_orphans) and `kill_orphans` kills it.
"""
from __future__ import annotations

import ctypes
import subprocess
import threading
import time

import psutil

_ACTIVE: set = set()          # pids of the nbgrader processes running now (one per worker)
_ACTIVE_LOCK = threading.Lock()
_BATCH_START = [0.0]          # when this process started grading (psutil's create_time clock)


def kill_tree(pid: int) -> None:
    # Jupyter starts each kernel in a session of its own, so killing nbgrader's process group is not
    # enough: walk the tree and kill every descendant, the spinning kernel included.
    try:
        parent = psutil.Process(pid)
        procs = parent.children(recursive=True) + [parent]
    except psutil.Error:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=10)   # reaps those that are (or have become) our children


def adopt_orphans(on: bool = True) -> None:
    """While grading, make this process the one that inherits orphans of its descendants (not init).

    A notebook's process that forks, detaches (setsid) and outlives its kernel would otherwise escape
    every kill and could run for ever. Linux's PR_SET_CHILD_SUBREAPER, where available; switched off
    again when the batch ends.
    """
    if on:
        _BATCH_START[0] = time.time()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1 if on else 0, 0, 0, 0)   # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def kill_orphans(passes: int = 20) -> None:
    """Kill what graded notebooks left behind: our children started since grading began that are not a
    running nbgrader (the only children a worker starts). Again while a pass finds one: an orphan that
    forks and exits leaves a new orphan behind."""
    for _ in range(passes):
        with _ACTIVE_LOCK:  # no worker starts an nbgrader while its siblings are told apart from orphans
            orphans = []
            for child in psutil.Process().children():
                try:
                    if child.pid not in _ACTIVE and (child.status() == psutil.STATUS_ZOMBIE
                                                     or child.create_time() >= _BATCH_START[0] - 1):
                        orphans.append(child.pid)   # a zombie among them is an adopted orphan that ended: reap it
                except psutil.Error:
                    pass
        if not orphans:
            return
        for pid in orphans:
            kill_tree(pid)


def start(command: list, **popen_args) -> subprocess.Popen:
    """Start a process the batch waits for, registered at once: another worker's clean-up must not take
    it for an orphan."""
    with _ACTIVE_LOCK:
        proc = subprocess.Popen(command, **popen_args)
        _ACTIVE.add(proc.pid)
    return proc


def forget(pid: int) -> None:
    """The process has ended (or is being killed): from now on a child with its pid is an orphan."""
    with _ACTIVE_LOCK:
        _ACTIVE.discard(pid)
