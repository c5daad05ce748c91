"""The whole course on this machine: every lecture notebook run, every day autograded, each timed.

`course-grader course-run` is what proves a GPU machine ready for a class: each lecture notebook
runs top to bottom in a Jupyter kernel (as a student would run it), and each day's reference
solutions and untouched exercises go through nbgrader's autograde in a throwaway copy of the course.
The solutions must score full marks (on a GPU; without one, the points that need none) and the
untouched exercises zero. The wall time of every notebook goes into the report (docs/course-run.md).
"""
from __future__ import annotations

import contextlib
import csv
import datetime
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from grader.course import REPO, Course


@dataclass
class Result:
    part: str        # "lecture", or "autograde <student>"
    notebook: str
    seconds: float
    ok: bool
    detail: str


def run_lecture(path: Path, timeout_s: float = 900, attempts: int = 2) -> Result:
    """Execute one lecture notebook in a fresh kernel, in a scratch folder.

    A cell that raises fails the notebook. Anything else (the kernel dying, a lost connection to it)
    is the machine's trouble rather than the lesson's: the notebook gets one more try, and the report
    says so.
    """
    import nbformat
    from nbclient.exceptions import CellExecutionError

    from grader.checker.headless import HeadlessClient

    start, notes = time.monotonic(), []
    for attempt in range(attempts):
        nb = nbformat.read(path, as_version=4)
        with tempfile.TemporaryDirectory() as scratch:
            client = HeadlessClient(nb, timeout=timeout_s, kernel_name="python3",
                                    resources={"metadata": {"path": scratch}})
            try:
                client.execute()
                ok, detail = True, "; ".join(notes)
                break
            except CellExecutionError as e:  # the lesson itself is broken: no second try
                ok, detail = False, _last_line(e)
                break
            except Exception as e:
                ok, detail = False, f"{type(e).__name__}: {_last_line(e)} (attempt {attempt + 1} of {attempts})"
                notes.append(f"attempt {attempt + 1} failed ({detail}), run again")
    name = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    return Result("lecture", str(name), time.monotonic() - start, ok, detail)


def _last_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[-1][:300] if text else repr(e)[:300]


@contextlib.contextmanager
def _own_gradebook():
    """While the block runs, a course is graded in a SQLite gradebook of its own, whatever gradebook the
    instructor's NBGRADER_DB_URL names (nbgrader_config.py reads it, in nbgrader and in the batch)."""
    url = os.environ.pop("NBGRADER_DB_URL", None)
    try:
        yield
    finally:
        if url is not None:
            os.environ["NBGRADER_DB_URL"] = url


def autograde_days(days: list, timeout_s: float = 1800, log=print) -> tuple:
    """(results per notebook, {(day, student): (score, max)}) for the solutions and the untouched release.
    The batch says each notebook's end as it comes (`log`): a run cut short still shows how far it got."""
    from grader.pipeline import batch

    results, scores = [], {}
    with tempfile.TemporaryDirectory() as tmp, _own_gradebook():
        course = Course.of(REPO).scratch_copy(Path(tmp) / "course")
        for day in days:
            course.nbgrader("generate_assignment", day, "--force")
            for student, folder in (("reference", course.source), ("untouched", course.release)):
                shutil.copytree(folder / day, course.submitted / student / day)
        for day in days:
            started = time.monotonic()
            for run in batch.autograde_day(course.root, day, timeout_s=timeout_s, log=log):
                results.append(Result(f"autograde {run.student}", f"{day}/{run.notebook}",
                                      run.seconds, run.status == "graded", run.reason))
            # The day's whole batch, both students: what an instructor waits for (notebooks overlap).
            results.append(Result("autograde batch", day, time.monotonic() - started, True, ""))
        course.nbgrader("export", "--to", "grades.csv")
        keep = os.environ.get("GRADER_ARTIFACTS")  # where to keep the graded notebooks, for the record
        if keep:
            shutil.make_archive(os.path.join(keep, "autograded"), "zip", course.autograded)
        for row in csv.DictReader(open(course.root / "grades.csv")):
            scores[(row["assignment"], row["student_id"])] = (float(row["score"]), float(row["max_score"]))
    return results, scores


# The graded calls that earn points only on a GPU (they measure speed, or predict a GPU's runtime).
GPU_ONLY_CALLS = ("check_speed", "check_prediction_on_gpu")


def points_without_gpu(day: str) -> float:
    """What a correct solution earns where speed cannot be measured: the test cells that need no GPU."""
    import nbformat

    total = 0.0
    for path in (Course.of(REPO).source / day).glob("*.ipynb"):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade") and not any(call in cell.source for call in GPU_ONLY_CALLS):
                total += meta.get("points", 0)
    return total


def main(days: list, lectures: bool, autograde: bool, out: Path, log=print, cell_timeout_s: float = 900) -> int:
    import grader

    dev = grader.setup(quiet=True)
    days = days or Course.of(REPO).days()
    results, verdicts = [], []
    if lectures:
        for day in days:
            for path in sorted((REPO / "course" / day).glob("*.ipynb")):
                r = run_lecture(path, timeout_s=cell_timeout_s)
                log(f"{r.notebook}: {'ok' if r.ok else 'FAILED'} in {r.seconds:.0f} s {r.detail}")
                results.append(r)
    if autograde:
        runs, scores = autograde_days(days, log=log)
        results += runs
        for r in runs:
            log(f"{r.part} {r.notebook}: {'ok' if r.ok else 'FAILED'} in {r.seconds:.0f} s {r.detail}")
        for day in days:
            ref, full = scores.get((day, "reference"), (0.0, 0.0))
            untouched = scores.get((day, "untouched"), (0.0, 0.0))[0]
            want = full if dev.is_gpu else points_without_gpu(day)
            ok = abs(ref - want) < 1e-6 and untouched == 0.0
            verdicts.append((day, ref, want, full, untouched, ok))
            log(f"{day}: solutions {ref:g} of {full:g} (expected {want:g}), untouched exercises {untouched:g}: "
                f"{'ok' if ok else 'FAILED'}")
    passed = all(r.ok for r in results if r.part == "lecture") and all(v[-1] for v in verdicts)
    lines = ["# The whole course on one machine", "",
             f"`course-grader course-run` on {datetime.date.today().isoformat()}: **{dev.name}**, torch "
             f"{dev.torch_version}, triton {dev.triton_version}. Result: **{'passed' if passed else 'FAILED'}**.", ""]
    if autograde:
        from grader.pipeline import sandbox
        why_not = sandbox.unavailable()
        lines += [f"Autograded kernels ran as {sandbox.USER} (grader/pipeline/sandbox.py)." if why_not is None
                  else f"Autograded kernels ran with the grader's rights: {why_not}.", ""]
    if verdicts:
        lines += ["| day | reference solutions | expected | of | untouched exercises | verdict |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {d} | {ref:g} | {want:g} | {full:g} | {u:g} | {'ok' if ok else 'FAILED'} |"
                  for d, ref, want, full, u, ok in verdicts]
        lines.append("")
    lines += ["| part | notebook | wall time (s) | result |", "|---|---|---|---|"]
    lines += [f"| {r.part} | {r.notebook} | {r.seconds:.1f} | {'ok' if r.ok else 'FAILED: ' + r.detail} |"
              for r in results]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    log(f"report: {out}")
    return 0 if passed else 1
