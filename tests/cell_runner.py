"""Run a notebook's code cells in a fresh IPython shell of their own process, as nbgrader's kernel runs
them, and say which ran without an error.

Each run is a process forked from a server that has imported torch, torch._dynamo (the guard's first
watch imports it), Triton and IPython once: a new Python process spent about 4 of its 5 s importing
them, for each of test_redteam's twenty notebooks, under each version pair. The batch's kernels are
forks of such a server too (grader/pipeline/kernel_forks.py). Nothing of the grader is imported there:
each run imports it anew, so what one cell patches is gone with its process.
"""
from __future__ import annotations

import atexit
import json
import multiprocessing
import os
import sys
from pathlib import Path

PRELOAD = ["torch", "torch._dynamo", "triton", "IPython.core.interactiveshell"]
_server = []   # this test process's multiprocessing context, its fork server started on first use


def run_cells(sources: list, folder: Path, env: dict, timeout_s: float = 300) -> list:
    """[whether each cell ran without an error], run in `folder` with environment `env` (its output
    in folder/output.txt)."""
    if not _server:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        _server.append(context)
    (folder / "cells.json").write_text(json.dumps(sources))
    proc = _server[0].Process(target=_run, args=(str(folder), env))
    proc.start()
    proc.join(timeout_s)
    if proc.is_alive():
        proc.kill()
        proc.join()
    results = folder / "results.json"
    assert results.exists(), f"the cells did not finish (exit code {proc.exitcode}): " + \
        (folder / "output.txt").read_text()[-4000:]
    return json.loads(results.read_text())


def _run(folder: str, env: dict) -> None:
    os.chdir(folder)
    os.environ.clear()
    os.environ.update(env)
    with open("output.txt", "w") as out:   # the shell's prints here, not in the test process's output
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
    sys.path[:0] = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    ok = [bool(shell.run_cell(source).success) for source in json.loads(Path("cells.json").read_text())]
    Path("results.json").write_text(json.dumps(ok))
    sys.stdout.flush()
    atexit._run_exitfuncs()   # as a process that ends normally would (a forked one ends with os._exit)
