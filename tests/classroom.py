"""Helpers for the tests that grade a synthetic class: a course to grade in, notebooks as students hand
them in (right, untouched, or with a kernel that never ends), and the scores nbgrader exports."""
from __future__ import annotations

import csv
from pathlib import Path

import nbformat

from conftest import REPO, nbgrader
from grader.course import Course

DAY = "day1"
# Points per day1 notebook without a GPU (the speed cells need one): 8 of 14 for the day.
CPU_POINTS = {"bias_gelu": 3.0, "predict_runtime": 2.0, "vector_add": 3.0}

# A kernel body that never ends in Triton's CPU interpreter: only a kill stops it. It sleeps between turns, so
# that it holds no core of the 2-core machine running the tests for its time limit (45 s a grading); the class
# of tests/test_adversarial_batch.py has one that spins on a core (d1_spins). (On a GPU its int32 counter
# wraps negative after about a second; tests/adversarial_class.py polls memory instead.)
SPIN_BODY = ["    i = 0", "    while i >= 0:", "        i += 1", "        time.sleep(0.05)"]


def copy_course(root: Path) -> Path:
    """A throwaway copy of the course (as conftest's course_copy fixture makes), for wider-scoped fixtures."""
    return Course.of(REPO).scratch_copy(root).root


def untouched(day, name):
    return nbformat.read(REPO / "exercises" / day / f"{name}.ipynb", as_version=4)


def filled(day, name):
    """The released notebook with the reference solution in its answer cells, as a good student's."""
    release = untouched(day, name)
    solution = nbformat.read(REPO / "solutions" / day / f"{name}.ipynb", as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in solution.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    for c in release.cells:
        gid = c.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            c.source = "\n".join(line for line in answers[gid].splitlines()
                                 if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)
    return release


def spinning(day, name):
    """The filled notebook whose first @triton.jit kernel loops forever (SPIN_BODY)."""
    nb = filled(day, name)
    cell = next(c for c in nb.cells if "@triton.jit" in c.source and c.metadata.get("nbgrader", {}).get("solution"))
    lines = cell.source.splitlines()
    signature = next(i for i, line in enumerate(lines) if line.startswith("def "))
    body_end = next(i for i in range(signature + 1, len(lines)) if lines[i] and not lines[i][0].isspace())
    cell.source = "\n".join(["import time"] + lines[:signature + 1] + SPIN_BODY + ["", ""] + lines[body_end:])
    return nb


def submit(root: Path, student: str, day: str, name: str, nb) -> None:
    """Put a notebook where `course-grader collect` would (grading/submitted/STUDENT/DAY/NAME.ipynb)."""
    folder = root / "grading" / "submitted" / student / day
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{name}.ipynb")


def exported(root: Path, day: str = DAY) -> dict:
    """student -> score, as `nbgrader export` writes them."""
    nbgrader(root, "export", "--to", "grades.csv")
    return {r["student_id"]: float(r["score"]) for r in csv.DictReader(open(root / "grades.csv"))
            if r["assignment"] == day}


def graded_cells(root: Path, student: str, day: str, name: str) -> tuple:
    """(the autograded notebook, {grade_id: its graded test cells})."""
    nb = nbformat.read(root / "grading" / "autograded" / student / day / f"{name}.ipynb", as_version=4)
    return nb, {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells
                if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")}


def points(c) -> float:
    """What nbgrader scored a graded test cell: 0 where it raised, its printed score, or its full points."""
    for o in c.outputs:
        if o.output_type == "error":
            return 0.0
        if o.output_type == "execute_result":
            return float(o.data["text/plain"])
    return float(c.metadata["nbgrader"]["points"])
