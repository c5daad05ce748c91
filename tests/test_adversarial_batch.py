"""50 students' submissions across the five days, graded by the real pipeline: collect, sanitize, autograde, export.

Each submission's expected score is written down in tests/adversarial_class.py, without a GPU and on
one (the speed parts). None may get points it does not deserve, crash the batch or cost another
student a grade; grading the batch again changes nothing.
"""
import csv
import os
import re
import shutil

import nbformat
import pytest

from grader.course import Course
from grader.pipeline import batch, failure_feedback, submissions
from adversarial_class import EXPECTED, NOTEBOOKS, hand_in
from conftest import DEVICE, nbgrader

# ADVERSARIAL_DAYS=day1 grades part of the class (to fit a short run on a GPU machine).
DAYS = [d for d in NOTEBOOKS if d in os.environ.get("ADVERSARIAL_DAYS", ",".join(NOTEBOOKS)).split(",")]
COLUMN = 2 if DEVICE.is_gpu else 1
# Without a GPU, two workers (as many as CI's cores): the notebook that never ends holds one of them until
# its time limit while the other grades the class. On a GPU, one worker per GPU (the batch's default).
WORKERS = None if DEVICE.is_gpu else 2
# The time limit per notebook, which the endless one waits out on each grading. Without a GPU the
# slowest honest notebook of the class took 10 s on 2 idle cores (day 4's FlashAttention), about three
# times that while CI runs other tests beside it; on a GPU, compiling adds more.
TIMEOUT_S = 150 if DEVICE.is_gpu else 90
# ... but day 1's, whose notebooks take 5 to 25 s on two busy cores (tests/test_parallel_batch.py): the endless
# notebook (in the interpreter a kernel spinning on a core) is stopped sooner, and its core given back.
DAY_TIMEOUT_S = {} if DEVICE.is_gpu else {"day1": 45}
# ADVERSARIAL_STUDENTS=d1_spins,d1_crashes grades only those (to check one case on a GPU).
ONLY = set(filter(None, os.environ.get("ADVERSARIAL_STUDENTS", "").split(",")))


REGRADED = {"d1_full", "d1_only_add", "d1_blank", "d1_patches_check", "d1_cache", "d1_torch_add", "d1_crashes",
            "d1_truncated"}


def _scores(root):
    nbgrader(root, "export", "--to", "grades.csv")
    return {(r["assignment"], r["student_id"]): float(r["score"]) for r in csv.DictReader(open(root / "grades.csv"))}


def test_the_class_grades_to_the_expected_scores_and_regrading_changes_nothing(course_copy, tmp_path):
    downloads = tmp_path / "lms"
    hand_in(downloads, only=ONLY)
    fixes = {}
    for day in DAYS:
        nbgrader(course_copy, "generate_assignment", day, "--force")
        report = submissions.collect(downloads / day, day, NOTEBOOKS[day], course_copy / "grading" / "submitted")
        assert not report.unmatched, report.summary()
        fixes.update(submissions.sanitize_day(course_copy / "grading" / "submitted",
                                              course_copy / "exercises" / day, day))
    if "day1" in DAYS and not ONLY:  # sanitize says what it did, and kept each raw copy
        assert any("breaks the submission rules (assigns grader.check" in f for f in fixes[("d1_patches_check", "vector_add")])
        assert any("uses exec" in f for f in fixes[("d1_exec_credit", "vector_add")])
        assert any("shell command" in f for f in fixes[("d1_shell", "vector_add")])
        assert "not a readable notebook" in fixes[("d1_empty_file", "vector_add")][0]
        assert any("deleted" in f for f in fixes[("d1_cells_moved", "vector_add")])

    def grade(days, but=()):
        runs = []
        for day in days:
            students = [s for s in Course.of(course_copy).students(day) if s not in but]
            limit = os.environ.get("ADVERSARIAL_TIMEOUT", DAY_TIMEOUT_S.get(day, TIMEOUT_S))
            runs += batch.autograde_day(course_copy, day, timeout_s=float(limit),
                                        students=students, workers=WORKERS, log=lambda *a: None)
        return runs, _scores(course_copy)

    runs, scores = grade(DAYS)
    artifacts = os.environ.get("GRADER_ARTIFACTS")  # keep what a GPU run graded, for the record
    if artifacts:
        for path in [course_copy / "grades.csv", *(course_copy / "grading").glob("runs-*.csv")]:
            shutil.copy(path, os.path.join(artifacts, f"adversarial-{path.name}"))
    expected = {(day, s): float(e[COLUMN]) for s, e in EXPECTED.items() for day in [e[0]]
                if day in DAYS and (not ONLY or s in ONLY)}
    got = {key: scores.get(key) for key in expected}
    wrong = {f"{day}/{s} ({EXPECTED[s][3]})": (got[(day, s)], want,
                                               [(r.notebook, r.status, r.seconds, r.reason, _errors(course_copy, day, s, r.notebook))
                                                for r in runs if (r.day, r.student) == (day, s)])
             for (day, s), want in expected.items() if got[(day, s)] != pytest.approx(want)}
    assert not wrong, f"(got, expected): {wrong}"
    # Every handed-in notebook is in the run log, graded, except the endless one: named, with the reason.
    status = {(r.student, r.notebook): r for r in runs}
    for day in DAYS:
        log = list(csv.DictReader(open(course_copy / "grading" / f"runs-{day}.csv")))
        assert {(row["student"], row["notebook"]) for row in log} == \
            {(s, nb) for s, e in EXPECTED.items() if e[0] == day and (not ONLY or s in ONLY) for nb in NOTEBOOKS[day]}
        assert all(row["torch"] and row["triton"] for row in log)
    unfinished = [(key, r.status, r.reason) for key, r in status.items()
                  if r.status not in ("graded", "not submitted") and key not in (("d1_spins", "vector_add"),
                                                                                   ("d1_dies", "vector_add"))]
    assert not unfinished, unfinished
    if "day1" in DAYS and (not ONLY or {"d1_spins", "d1_crashes"} <= ONLY):
        spun = status[("d1_spins", "vector_add")]
        assert spun.status == "timed out" and "scored 0" in spun.reason, (spun.status, spun.seconds, spun.reason)
        # ... told where it stood: the cell that launched the kernel, by number and first line
        assert re.search(r"in cell 7 \('x = torch.randn", spun.reason), spun.reason
        # ... and its student still gets feedback, which nbgrader has none for: what happened, what to check
        failure_feedback.write(Course.of(course_copy), "day1")
        page = (course_copy / "grading" / "feedback" / "d1_spins" / "day1" / "vector_add.html").read_text()
        assert "still running after" in page and "loop" in page
        # Reading 4 TB out of bounds: in the interpreter the grader stops the load before it happens (it
        # used to kill the kernel's process), on a GPU it raises "illegal memory access"; either way the
        # cell fails, scores 0, and the notebook is graded on.
        assert status[("d1_crashes", "vector_add")].status == "graded"
        assert status[("d1_crashes", "bias_gelu")].status == "graded"
    if "day1" in DAYS and (not ONLY or "d1_dies" in ONLY):
        # A kernel that dies (here by os.abort(), as a segfault would end it): the notebook scores 0, the
        # student's other notebooks are graded, and the feedback says what happened and what to check
        died = status[("d1_dies", "vector_add")]
        assert died.status == "failed" and failure_feedback.kind_of({"status": died.status, "reason": died.reason}) == "died", \
            (died.status, died.reason)
        failure_feedback.write(Course.of(course_copy), "day1")
        page = (course_copy / "grading" / "feedback" / "d1_dies" / "day1" / "vector_add.html").read_text()
        assert "kernel running your notebook died" in page and "mask" in page, page

    if "day5" in DAYS and DEVICE.is_gpu and (not ONLY or "d5_lce_graph" in ONLY):
        # The CUDA graph's replay is what scored 0, and the student's feedback says so
        said = _errors(course_copy, "day5", "d5_lce_graph", "linear_cross_entropy")
        assert any("replayed a CUDA graph" in e for e in said), said

    # Grading again changes nothing: day 1 again (each day is graded on its own, so the others would only
    # repeat the same path), for one student of each kind the first grading met: full marks, partial, the
    # untouched release, a cheat that sanitize cut out, one whose credit the clock withholds, one the guard
    # refuses, an out-of-bounds crash, a broken file. Not the endless notebook, which would hold a worker
    # for its whole time limit again (test_parallel_batch kills one on a regrade), nor the one that dies.
    # ADVERSARIAL_REGRADE=0 skips it.
    if os.environ.get("ADVERSARIAL_REGRADE", "1") == "1":
        runs_again, again = grade(DAYS[:1], but=[s for s in EXPECTED if s not in REGRADED])
        again = {key: score for key, score in again.items() if key[1] in REGRADED}
        assert again or ONLY, "nothing was graded again"
        changed = {key for key in again if again[key] != scores.get(key)}
        assert not changed, [(key, scores.get(key), again[key],
                              [(r.notebook, r.status, r.seconds, r.reason, _errors(course_copy, *key, r.notebook))
                               for r in runs_again if (r.day, r.student) == key])
                             for key in sorted(changed)]


def _errors(course_copy, day, student, notebook) -> list:
    """The errors a graded notebook shows (what its student's feedback says), for a failure's message."""
    path = Course.of(course_copy).autograded / student / day / f"{notebook}.ipynb"
    if not path.exists():
        return ["no graded notebook"]
    return [f"{o.get('ename')}: {str(o.get('evalue'))[:300]}" for c in nbformat.read(path, as_version=4).cells
            for o in c.get("outputs", []) if o.get("output_type") == "error"]
