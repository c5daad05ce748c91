"""A small class through the instructor's pipeline on this machine: collect, sanitize, autograde, export.

Each synthetic student stands for a case met in real classes; the expected score of each is written
down. Without a GPU only correctness earns points (day1: 8 of 14). Two workers grade the class (as on a
machine with two GPUs); grading it again changes nothing.
"""
import copy
import csv
import subprocess
import sys

import nbformat
import pytest

from grader.pipeline import batch, submissions
from classroom import filled as _filled
from conftest import DEVICE, REPO, nbgrader

pytestmark = pytest.mark.skipif(DEVICE.is_gpu, reason="expected scores are those without a GPU")

DAY = "day1"
NOTEBOOKS = ["bias_gelu", "predict_runtime", "vector_add"]
SPIN = '''
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    i = 0
    while i >= 0:
        i += 1
'''
CHEAT = '''
def add(x, y):
    add_kernel[(1,)](x, y, torch.empty_like(x), 1, BLOCK_SIZE=16)   # a launch, for show
    return x + y
'''

# student -> (what they hand in, expected score without a GPU)
EXPECTED = {
    "alice": 8.0,   # everything right
    "bob": 0.0,     # handed in the untouched notebooks
    "carol": 0.0,   # vector_add is not a notebook any more; nothing else handed in
    "dave": 8.0,    # right, but deleted a test cell and duplicated a graded cell
    "erin": 3.0,    # only vector_add, saved by Colab without nbgrader's metadata
    "frank": 5.0,   # vector_add's kernel never ends: that notebook killed, 0 for it; his other two are right
    "grace": 0.0,   # vector_add launches a kernel but computes with torch: 0
}


def _hand_in(folder):
    """An LMS download: files named in the ways students and Colab name them."""
    def save(nb, name):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(nb if isinstance(nb, str) else nbformat.writes(nb))

    for name in NOTEBOOKS:
        save(_filled(DAY, name), f"alice_{DAY}_{name}.ipynb")
        save(nbformat.read(REPO / "exercises" / DAY / f"{name}.ipynb", as_version=4), f"bob_{DAY}_{name} (1).ipynb")
        dave = _filled(DAY, name)
        if name == "vector_add":
            dave.cells = [c for c in dave.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "test_add_speed"]
            dave.cells.append(copy.deepcopy(dave.cells[3]))
        save(dave, f"dave/{name}.ipynb")
        frank = _filled(DAY, name)
        if name == "vector_add":
            cell = next(c for c in frank.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "add")
            cell.source = SPIN + cell.source.split("def add(", 1)[1].join(["\ndef add(", ""])
        save(frank, f"frank_{DAY}_{name}.ipynb")
    save('{"cells": [', f"carol_{DAY}_vector_add.ipynb")
    erin = _filled(DAY, "vector_add")
    for c in erin.cells:
        c.metadata = {}
    erin.metadata = {"colab": {"provenance": []}, "kernelspec": {"name": "python3", "display_name": "Python 3"}}
    save(erin, f"erin/Copy of {DAY}_vector_add.ipynb")
    grace = nbformat.read(REPO / "exercises" / DAY / "vector_add.ipynb", as_version=4)
    for c in grace.cells:
        if c.metadata.get("nbgrader", {}).get("grade_id") == "add":
            c.source = _filled(DAY, "vector_add").cells[3].source.split("def add(")[0] + CHEAT
    save(grace, f"grace_{DAY}_vector_add.ipynb")


def test_a_class_grades_to_the_expected_scores_and_regrading_changes_nothing(course_copy, tmp_path):
    nbgrader(course_copy, "generate_assignment", DAY, "--force")
    downloads = tmp_path / "lms"
    _hand_in(downloads)
    report = submissions.collect(downloads, DAY, NOTEBOOKS, course_copy / "grading" / "submitted")
    assert not report.unmatched, report.summary()
    fixes = submissions.sanitize_day(course_copy / "grading" / "submitted", course_copy / "exercises" / DAY, DAY)
    assert "not a readable notebook" in fixes[("carol", "vector_add")][0]
    assert any("deleted" in f for f in fixes[("dave", "vector_add")])

    def grade():
        runs = batch.autograde_day(course_copy, DAY, timeout_s=60, workers=2, log=lambda *a: None)
        nbgrader(course_copy, "export", "--to", "grades.csv")
        rows = csv.DictReader(open(course_copy / "grades.csv"))
        return runs, {r["student_id"]: float(r["score"]) for r in rows if r["assignment"] == DAY}

    runs, scores = grade()
    assert scores == EXPECTED
    status = {(r.student, r.notebook): r for r in runs}
    spin = status[("frank", "vector_add")]
    assert spin.status == "timed out" and "scored 0" in spin.reason, (spin.status, spin.seconds, spin.reason)
    assert all(r.status in ("graded", "not submitted") for key, r in status.items() if key != ("frank", "vector_add")), \
        [(key, r.status, r.reason) for key, r in status.items()]
    log = list(csv.DictReader(open(course_copy / "grading" / f"runs-{DAY}.csv")))
    assert {(row["student"], row["notebook"]) for row in log} == {(s, nb) for s in EXPECTED for nb in NOTEBOOKS}
    assert all(row["torch"] for row in log)

    _, again = grade()
    assert again == scores


def test_the_quicker_nbgrader_process_keeps_nbgrader_s_exit_status(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "grader.pipeline.nbgrader_process", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
    assert run("--version").returncode == 0
    failed = run("autograde", "nosuchday", "--student", "x")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    # and jsonschema's optional IRI parser (about 1.5 s of imports per process) stays out
    probe = subprocess.run([sys.executable, "-c", "import sys, grader.pipeline.nbgrader_process, nbformat.validator; "
                            "import jsonschema; print(sys.modules.get('rfc3987_syntax'))"],
                           capture_output=True, text=True, timeout=120)
    assert probe.stdout.strip() == "None", probe.stdout + probe.stderr
