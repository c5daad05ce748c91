"""Autograde a whole class with nbgrader, one student at a time, each under a hard time limit.

nbgrader alone stops at the first notebook that crashes it and cannot stop a kernel that spins on the
GPU (such a kernel ignores interrupts). Here each student's autograde is its own process tree, killed
when it outlives `timeout_s`: that student gets 0 with the reason, and the batch goes on. Every run
is recorded, with the GPU and the versions it ran on, in grading/runs-<day>.csv.
"""
from __future__ import annotations

import csv
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

import psutil


@dataclass
class Run:
    student: str
    day: str
    status: str          # "graded", "timed out", "failed"
    seconds: float
    reason: str
    gpu: str
    driver: str
    torch: str
    triton: str


def machine() -> dict:
    """The GPU, its driver and the library versions that grades are computed with."""
    gpu, driver = "none (CPU: speed cells score 0)", ""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        if out:
            gpu, driver = (part.strip() for part in out[0].split(",", 1))
    except (OSError, subprocess.TimeoutExpired):
        pass

    def version(name):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"
    return {"gpu": gpu, "driver": driver, "torch": version("torch"), "triton": version("triton")}


def _kill_tree(pid: int) -> None:
    # Jupyter starts each kernel in a session of its own, so killing nbgrader's process group is not
    # enough: walk the tree and kill every descendant, the spinning kernel included.
    try:
        parent = psutil.Process(pid)
        procs = parent.children(recursive=True) + [parent]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10)


def _nbgrader(root: Path, *args, env=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "nbgrader", *args], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def autograde_student(root: Path, day: str, student: str, timeout_s: float, env: dict, info: dict) -> Run:
    start = time.monotonic()
    proc = _nbgrader(root, "autograde", day, "--student", student, "--force", env=env)
    try:
        log, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_tree(proc.pid)
        proc.communicate()
        return Run(student, day, "timed out", time.monotonic() - start,
                   f"still running after {timeout_s:.0f} s (an endless loop or a hung kernel?): scored 0",
                   **info)
    seconds = time.monotonic() - start
    if proc.returncode != 0 or "[AutogradeApp | ERROR]" in log:
        errors = [line for line in log.splitlines() if "ERROR" in line or "Error" in line]
        return Run(student, day, "failed", seconds, " | ".join(errors[-3:])[:500] or "nbgrader failed", **info)
    return Run(student, day, "graded", seconds, "", **info)


def students_of(root: Path, day: str) -> list:
    submitted = root / "grading" / "submitted"
    return sorted(p.name for p in submitted.iterdir() if (p / day).is_dir()) if submitted.is_dir() else []


def autograde_day(root: Path, day: str, timeout_s: float = 1800, students=None, log=print) -> list:
    """Autograde every collected submission of a day; returns one Run per student."""
    root = Path(root)
    students = students or students_of(root, day)
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    info = machine()
    log(f"autograding {day} for {len(students)} students on {info['gpu']} "
        f"(torch {info['torch']}, triton {info['triton']}, {platform.node()})")
    if not os.environ.get("GRADER_IN_CONTAINER"):
        log("note: student code runs with this account's rights; grade untrusted work in the container "
            "(see README, 'Grading untrusted submissions').")
    for student in students:
        subprocess.run([sys.executable, "-m", "nbgrader", "db", "student", "add", student], cwd=root, env=env,
                       capture_output=True, text=True)
    runs = []
    for i, student in enumerate(students, 1):
        run = autograde_student(root, day, student, timeout_s, env, info)
        runs.append(run)
        log(f"[{i}/{len(students)}] {student}: {run.status} ({run.seconds:.0f} s)"
            + (f" - {run.reason}" if run.reason else ""))
    path = root / "grading" / f"runs-{day}.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(runs[0]).keys()) if runs else ["student"])
        writer.writeheader()
        for run in runs:
            writer.writerow(asdict(run))
    return runs
