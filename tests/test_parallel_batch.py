"""Autograding a class notebook by notebook, with several workers, on this machine (CPU, day1: 8 of 14).

- A notebook whose kernel never ends is killed at the per-notebook limit and scores 0; the same
  student's other notebooks are still graded (frank's spinning notebook comes first alphabetically:
  a limit per student would have cost him the two after it).
- Two workers grade the class to the same runs log and the same exported grades as one worker.
- A notebook killed on a regrade loses the score of the earlier run (nbgrader alone would keep it).
- A SQLite gradebook locked for longer than Python's sqlite3 waits by default (5 s) does not fail a notebook.
- Workers each get a GPU of their own (with a stand-in nvidia-smi and nbgrader: no grading), and
  --shard K/N splits a class into disjoint, deterministic shares.
"""
import csv
import os
import shutil
import sqlite3
import sys
import threading
import time
from types import SimpleNamespace

import nbformat
import psutil
import pytest

from classroom import CPU_POINTS, DAY, copy_course, exported, filled, spinning, submit
from conftest import DEVICE, nbgrader, nbgrader_server_pids
from grader.course import Course
from grader.pipeline import batch, cli, gpus

pytestmark = pytest.mark.skipif(DEVICE.is_gpu, reason="expected scores are those without a GPU")

TIMEOUT_S = 45  # per notebook: a day1 notebook takes 5-25 s on two busy CPU cores

# student -> {notebook: what they hand in}; a notebook left out is not handed in
CLASS = {
    "alice": {"bias_gelu": filled, "predict_runtime": filled, "vector_add": filled},
    "frank": {"bias_gelu": spinning, "predict_runtime": filled, "vector_add": filled},
    "heidi": {"vector_add": filled},
}
EXPECTED = {
    "alice": 8.0,
    "frank": 8.0 - CPU_POINTS["bias_gelu"],   # killed in bias_gelu, his other two notebooks right
    "heidi": CPU_POINTS["vector_add"],
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A course with day1 released and the class handed in, nothing graded yet."""
    root = copy_course(tmp_path_factory.mktemp("pristine") / "course")
    nbgrader(root, "generate_assignment", DAY, "--force")
    for student, notebooks in CLASS.items():
        for name, make in notebooks.items():
            submit(root, student, DAY, name, make(DAY, name))
    return root


def _copy(root, dest):
    shutil.copytree(root, dest, symlinks=True)
    return dest


@pytest.fixture(scope="module")
def graded(pristine, tmp_path_factory):
    """The class graded by one worker: its runs, exported scores and both CSV files as written."""
    root = _copy(pristine, tmp_path_factory.mktemp("one_worker") / "course")
    lines = []
    start = time.monotonic()
    runs = batch.autograde_day(root, DAY, timeout_s=TIMEOUT_S, workers=1, log=lines.append)
    seconds = time.monotonic() - start
    scores = exported(root)
    return SimpleNamespace(root=root, runs=runs, log=lines, scores=scores, seconds=seconds,
                           runs_csv=_rows(root / "grading" / f"runs-{DAY}.csv"),
                           grades_csv=(root / "grades.csv").read_text())


def _rows(path, drop=("seconds",)):
    return [{k: v for k, v in row.items() if k not in drop} for row in csv.DictReader(open(path))]


def test_a_notebook_that_never_ends_scores_0_and_the_students_other_notebooks_are_graded(graded):
    assert graded.scores == EXPECTED
    run = {(r.student, r.notebook): r for r in graded.runs}
    assert len(run) == 9  # one row per (student, notebook), handed in or not
    spun = run[("frank", "bias_gelu")]
    assert spun.status == "timed out" and "scored 0" in spun.reason and spun.seconds >= TIMEOUT_S
    assert run[("frank", "predict_runtime")].status == run[("frank", "vector_add")].status == "graded"
    assert run[("heidi", "bias_gelu")].status == run[("heidi", "predict_runtime")].status == "not submitted"
    assert sum(r.status == "graded" for r in graded.runs) == 6
    assert not (graded.root / "grading" / "autograded" / "frank" / DAY / "bias_gelu.ipynb").exists()
    assert (graded.root / "grading" / "autograded" / "frank" / DAY / "vector_add.ipynb").exists()
    # one progress line per notebook handed in, then the summary
    progress = [line for line in graded.log if line.startswith("[")]
    assert len(progress) == 7 and progress[-1].startswith("[7/7] ")
    assert "frank bias_gelu: timed out" in "\n".join(progress)
    assert "6 graded, 1 timed out, 0 failed, 2 not submitted" in graded.log[-1]
    # the spinning kernel's process tree is gone (the tests' own nbgrader server aside)
    left = [" ".join(p.cmdline()) for p in psutil.Process().children(recursive=True)
            if p.pid not in nbgrader_server_pids()]
    assert not [cmd for cmd in left if "ipykernel" in cmd or "nbgrader" in cmd], left


def _cell_times(notebook):
    """When the notebook's first cell started and its last cell ended, as nbclient recorded them."""
    times = [c.metadata.get("execution", {}) for c in nbformat.read(notebook, as_version=4).cells]
    starts = [t["iopub.execute_input"] for t in times if "iopub.execute_input" in t]
    ends = [t["shell.execute_reply"] for t in times if "shell.execute_reply" in t]
    return min(starts), max(ends)


def _at(timestamp: str) -> float:
    """Seconds since the epoch of a time nbclient recorded (ISO 8601, UTC)."""
    from datetime import datetime
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def test_the_next_notebook_runs_no_cell_before_the_one_before_it_has_ended(graded):
    # The batch starts a worker's next notebook early, held at its gate: nbgrader gets ready meanwhile,
    # but the cells (which use the GPU on a GPU machine) wait for their turn.
    folder = graded.root / "grading" / "autograded" / "alice" / DAY
    spans = [_cell_times(folder / f"{nb}.ipynb") for nb in sorted(CLASS["alice"])]
    for (_, end), (next_start, _) in zip(spans, spans[1:]):
        assert end < next_start, spans


def test_a_notebook_started_ahead_keeps_its_submission_from_other_kernels(tmp_path):
    # nbgrader copies the submission in while the notebook before (another student's) still runs.
    from grader.pipeline import sandbox
    folder = tmp_path / "autograded" / "bob" / DAY
    sandbox.close_ahead(folder)
    assert folder.stat().st_mode & 0o777 == 0o700 and folder.parent.stat().st_mode & 0o777 == 0o711


def test_two_workers_grade_the_class_to_the_same_csvs_as_one(graded, pristine, tmp_path):
    root = _copy(pristine, tmp_path / "course")  # a fresh gradebook: no earlier grade can hide a lost one
    start = time.monotonic()
    runs = batch.autograde_day(root, DAY, timeout_s=TIMEOUT_S, workers=2, log=lambda *a: None)
    seconds = time.monotonic() - start
    assert _rows(root / "grading" / f"runs-{DAY}.csv") == graded.runs_csv
    exported(root)
    assert (root / "grades.csv").read_text() == graded.grades_csv
    # The two workers graded at the same time: alice's notebooks ran while frank's first one spun until it
    # was killed (one worker grades alice's before frank's turn begins). Clock-free: by the cells' own times.
    spun = next(r for r in runs if (r.student, r.notebook) == ("frank", "bias_gelu"))
    graded_folder = root / "grading" / "autograded"
    frank_next = _cell_times(graded_folder / "frank" / DAY / "predict_runtime.ipynb")[0]
    alice_end = max(_cell_times(graded_folder / "alice" / DAY / f"{nb}.ipynb")[1] for nb in CLASS["alice"])
    assert _at(alice_end) > _at(frank_next) - spun.seconds, (alice_end, frank_next, spun.seconds, seconds)
    print(f"one worker {graded.seconds:.0f} s, two workers {seconds:.0f} s")


def test_a_notebook_killed_on_a_regrade_loses_the_score_of_the_earlier_run(graded):
    root = graded.root  # alice's bias_gelu was graded right (3 points)
    submit(root, "alice", DAY, "bias_gelu", spinning(DAY, "bias_gelu"))  # she hands in a broken version
    run = batch.autograde_notebook(Course.of(root), DAY, "alice", "bias_gelu", 10, batch.grading_env(),
                                   gpus.machine())
    assert run.status == "timed out"
    assert exported(root)["alice"] == 8.0 - CPU_POINTS["bias_gelu"]
    assert not (root / "grading" / "autograded" / "alice" / DAY / "bias_gelu.ipynb").exists()
    assert (root / "grading" / "autograded" / "alice" / DAY / "vector_add.ipynb").exists()


def test_a_gradebook_locked_longer_than_sqlites_default_wait_does_not_fail_a_notebook(graded):
    # Another program (formgrader, a sqlite3 shell, a backup) holds the gradebook for 15 s: nbgrader, which
    # reads it a few seconds after it starts, waits longer than the 5 s Python's sqlite3 waits by default.
    db = sqlite3.connect(graded.root / "grading" / "gradebook.db", isolation_level=None, check_same_thread=False)
    db.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(15, db.execute, ["COMMIT"])
    release.start()
    try:
        run = batch.autograde_notebook(Course.of(graded.root), DAY, "heidi", "vector_add", TIMEOUT_S,
                                       batch.grading_env(), gpus.machine())
    finally:
        release.join()
        db.close()
    assert run.status == "graded", run.reason
    assert run.seconds >= 15


# --------------------------------------------------------------------------------------------
# Workers and GPUs, shards: a stand-in nvidia-smi and a stand-in nbgrader (no grading)
# --------------------------------------------------------------------------------------------

FAKE_SMI = """#!/bin/sh
case "$1" in
  --query-gpu=index) printf '0\\n1\\n' ;;
  --query-gpu=name,driver_version) printf 'Fake GPU A, 999.1\\nFake GPU B, 999.1\\n' ;;
  --query-gpu=index,uuid,name) printf '0, GPU-aaa, Fake GPU A\\n1, GPU-bbb, Fake GPU B\\n' ;;
  *) exit 1 ;;
esac
"""
# Waits for its turn as nbgrader's executor does (grader.checker.headless), then records which GPU it was
# given and when it ran.
FAKE_NBGRADER = """import os, sys, time
go = os.environ.get("GRADER_GO_FILE")
if go:
    open(go + ".ready", "w").close()
while go and not os.path.exists(go):
    time.sleep(0.01)
start = time.time(); time.sleep(0.4)
with open(sys.argv[1], "a") as f:
    f.write(f"{os.environ.get('CUDA_VISIBLE_DEVICES')} {sys.argv[2]} {sys.argv[3]} {start} {time.time()}\\n")
"""


@pytest.fixture
def two_fake_gpus(pristine, tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    calls = tmp_path / "calls.txt"
    monkeypatch.setattr(batch, "nbgrader_command",
                        lambda day, student, notebook, url, sandboxed=False: [sys.executable, "-c", FAKE_NBGRADER, str(calls), student, notebook])
    root = _copy(pristine, tmp_path / "course")
    return SimpleNamespace(root=root, calls=calls)


def _calls(path):
    return [dict(zip(["device", "student", "notebook", "start", "end"], line.split())) for line in open(path)]


def test_each_worker_has_a_gpu_of_its_own(two_fake_gpus):
    root = two_fake_gpus.root
    assert gpus.visible_gpus() == ["0", "1"]
    runs = batch.autograde_day(root, DAY, timeout_s=30, log=lambda *a: None)  # default: one worker per GPU
    calls = _calls(two_fake_gpus.calls)
    assert len(calls) == 7 and {c["device"] for c in calls} == {"0", "1"}
    for device in ("0", "1"):  # never two notebooks on one GPU at once
        spans = sorted((float(c["start"]), float(c["end"])) for c in calls if c["device"] == device)
        assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:]))
    log = {(row["student"], row["notebook"]): row for row in csv.DictReader(open(root / "grading" / f"runs-{DAY}.csv"))}
    for c in calls:
        row = log[(c["student"], c["notebook"])]
        assert row["gpu_index"] == c["device"] and row["gpu"] == {"0": "Fake GPU A", "1": "Fake GPU B"}[c["device"]]
    assert sum(r.status == "graded" for r in runs) == 7  # the stand-in "grades" frank's spinning notebook too

    with pytest.raises(ValueError, match="2 GPU"):
        batch.autograde_day(root, DAY, workers=3, log=lambda *a: None)


def test_gpus_set_by_a_scheduler_are_the_ones_used(two_fake_gpus, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbb")  # as Slurm or Kubernetes would give one GPU
    batch.autograde_day(two_fake_gpus.root, DAY, timeout_s=30, log=lambda *a: None)
    assert {c["device"] for c in _calls(two_fake_gpus.calls)} == {"GPU-bbb"}
    rows = list(csv.DictReader(open(two_fake_gpus.root / "grading" / f"runs-{DAY}.csv")))
    assert {row["gpu"] for row in rows if row["status"] == "graded"} == {"Fake GPU B"}
    assert gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}) == []
    assert gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}) == ["2", "3"]


def test_shards_split_the_class_into_disjoint_deterministic_shares(two_fake_gpus):
    students = [f"s{i:02d}" for i in range(11)]
    for n in (1, 2, 3, 4, 11, 12):
        shares = [batch.shard_of(students, k, n) for k in range(n)]
        assert sorted(s for share in shares for s in share) == students  # each student in exactly one
        assert max(map(len, shares)) - min(map(len, shares)) <= 1
        assert shares == [batch.shard_of(list(reversed(students)), k, n) for k in range(n)]  # order of listing
    assert batch.parse_shard("1/4") == (1, 4)
    for bad in ("4/4", "-1/4", "1/0", "1", "a/b"):
        with pytest.raises(ValueError):
            batch.parse_shard(bad)
    assert cli.main(["autograde", DAY, "--shard", "4/4"]) == 2  # refused before anything is graded

    root = two_fake_gpus.root  # the class is alice, frank, heidi: shard 1 of 2 is frank alone
    runs = batch.autograde_day(root, DAY, timeout_s=30, workers=1, shard=(1, 2), log=lambda *a: None)
    assert {r.student for r in runs} == {"frank"} and {c["student"] for c in _calls(two_fake_gpus.calls)} == {"frank"}
    assert (root / "grading" / f"runs-{DAY}-shard1of2.csv").exists()


def test_notebooks_are_made_ready_ahead_only_where_cores_are_to_spare():
    assert batch.notebooks_ahead([""], cores=2) == batch.AHEAD           # no GPU: nothing is timed
    assert batch.notebooks_ahead(["0"], cores=16) == batch.AHEAD
    assert batch.notebooks_ahead([str(i) for i in range(8)], cores=128) == batch.AHEAD
    assert batch.notebooks_ahead(["0"], cores=4) == 1
    assert batch.notebooks_ahead(["0"], cores=2) == 0                    # a small GPU machine: one at a time
    assert batch.notebooks_ahead(["0", "1"], cores=4) == 0


def test_a_notebook_whose_kernel_never_started_is_graded_again_and_no_other():
    # Two kernels starting at once can pick the same port: nbgrader then reports a kernel that died or
    # never answered before any cell ran. No student code ran, so the batch grades the notebook again.
    from grader.pipeline.batch import Run, kernel_never_started

    def run(status, reason):
        return Run("s", "day1", "vector_add", status, 1.0, reason, "", "", "", "", "")
    assert kernel_never_started(run("failed", "RuntimeError: Kernel died before replying to kernel_info | ...: scored 0"))
    assert kernel_never_started(run("failed", "zmq.error.ZMQError: Address already in use: scored 0"))
    assert kernel_never_started(run("timed out", "still running after 90 s before its first cell ran (its kernel "
                                                 "did not start or did not answer): scored 0"))
    assert not kernel_never_started(run("timed out", "still running after 90 s in cell 7 ('x = torch.randn"))
    assert not kernel_never_started(run("failed", "DeadKernelError: Kernel died: scored 0"))   # while a cell ran
    assert not kernel_never_started(run("graded", ""))


def _fake_nbgrader(tmp_path, code: str) -> batch.Started:
    """A started 'notebook' that is a Python process writing to its log as nbgrader would."""
    import subprocess
    import tempfile
    out = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=out)
    return batch.Started(proc, out, DAY, "s", "vector_add", {k: "" for k in ("gpu", "driver", "torch", "triton")},
                         "", False)


def test_a_notebook_that_starts_no_cell_is_killed_at_the_startup_limit_and_one_that_does_is_not(tmp_path,
                                                                                                  monkeypatch):
    # A kernel that never started used to hold its worker until the notebook's time limit (240 s of a CI
    # run); after batch.STARTUP_S without a cell it is killed, and graded once more (kernel_never_started).
    from grader.pipeline import sandbox
    zeroed = []
    monkeypatch.setattr(batch, "_kill_leftovers", lambda started: None)   # the test's own children stay
    monkeypatch.setattr(batch.gradebook, "zero_notebook", lambda course, *key: zeroed.append(key))
    course = Course.of(copy_course(tmp_path / "course"))
    t = time.monotonic()
    stuck = batch.finish_notebook(course, _fake_nbgrader(tmp_path, "import time; time.sleep(60)"), timeout_s=60,
                                  startup_s=1)
    assert time.monotonic() - t < 10 and stuck.status == "timed out" and batch.kernel_never_started(stuck), stuck
    assert zeroed == [(DAY, "s", "vector_add")]
    # a cell started, then printed more than the log's tail keeps: it runs to its end
    running = (f"import sys, time; print({sandbox.RUNNING_CELL!r} + ' 1', file=sys.stderr, flush=True); "
               f"print('x\\n' * (2 * {batch.LOG_LINES}), flush=True); time.sleep(2.5)")
    ran = batch.finish_notebook(course, _fake_nbgrader(tmp_path, running), timeout_s=60, startup_s=1)
    assert ran.status == "graded" and ran.seconds >= 2.5, ran
    # with no startup limit (the second try) only the time limit counts
    slow = batch.finish_notebook(course, _fake_nbgrader(tmp_path, "import time; time.sleep(2.5)"), timeout_s=60)
    assert slow.status == "graded" and slow.seconds >= 2.5, slow
