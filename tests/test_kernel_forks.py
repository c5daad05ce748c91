"""Sandboxed kernels forked from the batch's kernel server (grader/pipeline/kernel_forks.py): the same
kernel as one started as a new process, in the same sandbox, for less CPU.

tests/test_redteam.py checks that a kernel cannot reach the server's socket; every sandboxed batch test
grades through the server.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import psutil

import classroom
from adversarial_class import filled, insert_before
from conftest import REPO, require_sandbox
from grader.pipeline import batch, kernel_forks, sandbox

# What a kernel sees of its own process, printed from a cell before the answer.
FINGERPRINT = '''
import ctypes, json, os, sys, tempfile
import numpy, torch
print("FINGERPRINT " + json.dumps({
    "uid": os.getuid(), "euid": os.geteuid(), "groups": os.getgroups(),
    "parent": open(f"/proc/{os.getppid()}/cmdline").read().replace("\\0", " "),
    "session leader": os.getsid(0) == os.getpid(),
    "path": sys.path, "environment": sorted(os.environ),
    "home": os.environ["HOME"], "tmp": tempfile.gettempdir(), "cwd": os.getcwd(),
    "argv": sys.argv[:1], "main": sorted(k for k in vars(sys.modules["__main__"]) if not k.startswith("_")),
    "dumpable": ctypes.CDLL(None).prctl(3, 0, 0, 0, 0),
    "numpy draw": float(numpy.random.random()), "torch seed": torch.initial_seed(),
    "triton cache": __import__("triton").knobs.cache.dir if hasattr(__import__("triton"), "knobs") else None,
}))
'''


def test_the_server_imports_what_every_checked_kernel_imports_and_starts_nothing():
    # no thread (a fork keeps only the thread that forked), no CUDA (a fork cannot use it); torch._dynamo is
    # what the grader's watch imports first (grader/student/guard.py), and Triton with it
    code = ("import sys; from grader.pipeline import fork_server as f, kernel_forks as k\n"
            "f.load(k.PRELOAD)\n"
            "print(f._python_threads(), f._cuda_initialized())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["1", "False"], out.stdout + out.stderr
    # what a started kernel imports first, what the watch imports, and what Triton's first launch imports
    # (where this Triton has it)
    assert set(kernel_forks.PRELOAD) <= set(sandbox.KERNEL_MAIN.replace(";", " ").split()) | {
        "ipykernel.kernelapp", "torch._dynamo", "triton.experimental.gluon?"}
    # ... and the one beyond a started kernel's first imports is what the grader's watch imports in any case
    code = ("import sys, torch; from grader.student import guard\nbefore = 'torch._dynamo' in sys.modules\n"
            "with guard.watch(poison=False, ops=False):\n    torch.ones(2) + 1\n"
            "print(before, 'torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["False", "True"], out.stdout + out.stderr


def test_a_launcher_ends_as_its_kernel_was_killed_without_leaving_a_core_file(tmp_path):
    # The launcher (root, in the student's folder) re-raises the signal that killed its forked kernel; under a
    # core-file limit above 0 an abort left the launcher's core there (a red team's). Where cores are written
    # as files, a plain abort beside it shows that one would be.
    unlimited = "import resource; resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY,) * 2)\n"
    ends = {"plain": "import os; os.abort()", "launcher": "from grader.pipeline import kernel_forks; kernel_forks.end_as(-6)"}
    for name, end in ends.items():
        (tmp_path / name).mkdir()
        out = subprocess.run([sys.executable, "-c", unlimited + end], cwd=tmp_path / name, capture_output=True,
                             text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert out.returncode == -signal.SIGABRT, out.stdout + out.stderr
    assert not list((tmp_path / "launcher").iterdir())
    if Path("/proc/sys/kernel/core_pattern").read_text().strip() == "core":
        assert list((tmp_path / "plain").iterdir())


def test_a_launcher_without_a_server_starts_the_kernel_itself(monkeypatch):
    monkeypatch.delenv(kernel_forks.SOCKET_ENV, raising=False)
    assert kernel_forks.run_forked(1, "/nowhere", "/nowhere/c.json", [], {}) is None
    monkeypatch.setenv(kernel_forks.SOCKET_ENV, "/nonexistent/kernels.sock")   # gone: started as before
    assert kernel_forks.run_forked(1, "/nowhere", "/nowhere/c.json", [], {}) is None


def _fingerprints(root, monkeypatch, forked: bool) -> dict:
    monkeypatch.setenv(kernel_forks.OFF_ENV, "1" if forked else "0")
    for student in ("s1", "s2"):
        nb = filled("day1", "vector_add")
        insert_before(nb, "add", FINGERPRINT)
        classroom.submit(root, student, "day1", "vector_add", nb)
    runs = batch.autograde_day(root, "day1", timeout_s=120, students=["s1", "s2"], log=lambda *a: None)
    printed = {}
    for student in ("s1", "s2"):
        run = next(r for r in runs if r.student == student and r.notebook == "vector_add")
        assert run.status == "graded", run
        graded = nbformat.read(root / "grading" / "autograded" / student / "day1" / "vector_add.ipynb", 4)
        text = "".join(o.get("text", "") for c in graded.cells if c.cell_type == "code" for o in c.outputs)
        line = next(line for line in text.splitlines() if line.startswith("FINGERPRINT "))
        printed[student] = json.loads(line[len("FINGERPRINT "):])
    return printed, classroom.exported(root)


def _batch_folder_named(value):
    return json.loads(re.sub(r"/tmp/grader-batch-[^/\"]+", "BATCH", json.dumps(value)))


def test_a_forked_kernel_is_a_started_one_in_the_same_sandbox(course_copy, monkeypatch):
    require_sandbox()
    from conftest import nbgrader
    nbgrader(course_copy, "generate_assignment", "day1", "--force")
    started, started_scores = _fingerprints(course_copy, monkeypatch, forked=False)
    forked, forked_scores = _fingerprints(course_copy, monkeypatch, forked=True)
    assert "kernel_forks" in forked["s1"]["parent"] and "kernel_forks" not in started["s1"]["parent"]
    assert forked_scores == started_scores and forked_scores["s1"] > 0   # graded alike, the answer counted
    for kernel in (*started.values(), *forked.values()):
        assert kernel["uid"] == kernel["euid"] >= sandbox.UID_BASE and kernel["groups"] == []
        assert kernel["tmp"] == kernel["home"] and kernel["session leader"] and kernel["dumpable"] == 1
        # Triton, imported by the server, compiles into the kernel's own home (on a GPU the answer's score
        # above says the compile worked; without one the interpreter compiles nothing)
        assert kernel["triton cache"] in (None, os.path.join(kernel["home"], "triton")), kernel["triton cache"]
    assert forked["s1"]["uid"] != forked["s2"]["uid"]
    # not the server's generator states (a red team's two kernels drew the same torch.randn)
    assert forked["s1"]["numpy draw"] != forked["s2"]["numpy draw"]
    assert forked["s1"]["torch seed"] != forked["s2"]["torch seed"]
    for what in ("path", "environment", "argv", "main"):   # (each batch has a folder of its own)
        assert _batch_folder_named(forked["s1"][what]) == _batch_folder_named(started["s1"][what]), what
    assert not {kernel_forks.SOCKET_ENV, sandbox.UIDS_ENV, *sandbox.SECRETS} & set(forked["s1"]["environment"])


def test_a_forked_kernels_launcher_passes_on_signals_and_its_exit_status():
    # Jupyter signals a kernel's process, which is the launcher: the forked kernel must get the signal,
    # and the launcher must end as the kernel ended.
    require_sandbox()
    from jupyter_client.connect import write_connection_file
    scratch = Path(tempfile.mkdtemp(prefix="kernel-forks-"))   # as the batch's: entered by kernels' users
    try:
        os.chmod(scratch, 0o755)
        (scratch / "server").mkdir(mode=0o700)
        server = kernel_forks.server(scratch / "server", sandbox.kernel_env(scratch, dict(os.environ)), cwd=REPO)
        assert server.ready
        results = []
        for connection in (str(scratch / "none.json"), write_connection_file(str(scratch / "kernel.json"))[0]):
            uid, home = sandbox.kernel_uid() + len(results), scratch / f"home{len(results)}"
            home.mkdir()
            os.chown(home, uid, uid)
            os.chmod(connection, 0o644) if os.path.exists(connection) else None
            launcher = subprocess.Popen(
                [sys.executable, "-c", "import os, sys; from grader.pipeline import kernel_forks as k\n"
                 "print(k.run_forked(int(sys.argv[1]), sys.argv[2], sys.argv[3], [], dict(os.environ)), flush=True)",
                 str(uid), str(home), connection],
                env=dict(os.environ, **{kernel_forks.SOCKET_ENV: server.path}), cwd=scratch,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if results:   # a kernel that runs: stopped by a signal to its launcher
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline and not any(p.uids().real == uid for p in psutil.process_iter()):
                    time.sleep(0.2)
                time.sleep(2)
                launcher.send_signal(signal.SIGTERM)
            out, err = launcher.communicate(timeout=120)
            results.append(out.strip().splitlines()[-1] if out.strip() else err)
        # no connection file: ipykernel fails, its status is the launcher's; a running one ends by the signal
        assert results[0] not in ("None", "0") and int(results[0]) > 0, results
        assert results[1] == str(-signal.SIGTERM), results
    finally:
        server.close()
        shutil.rmtree(scratch, ignore_errors=True)


def test_the_kernel_server_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv(kernel_forks.OFF_ENV, "0")
    server = kernel_forks.server(tmp_path, dict(os.environ), tmp_path)
    assert not server.ready
    server.close()
