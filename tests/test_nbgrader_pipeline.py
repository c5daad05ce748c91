"""The real nbgrader pipeline on this machine: release, submit, autograde, export.

On a machine without a GPU the reference solutions earn every correctness point and nothing for
speed (with the "needs a CUDA GPU" message in their feedback); untouched exercises earn nothing.
"""
import csv
import json
import os
import re
import shutil

import nbformat
import pytest

from conftest import DEVICE, REPO, nbgrader
from grader.pipeline.course_run import points_without_gpu

DAYS = sorted(p.name for p in (REPO / "solutions").iterdir() if p.is_dir())
# GRADER_DAYS=day2,day4 limits the round trip to some days (to fit a short run on a GPU machine).
if os.environ.get("GRADER_DAYS"):
    DAYS = [d for d in DAYS if d in os.environ["GRADER_DAYS"].split(",")]


def _grade_cells(notebook_path):
    nb = nbformat.read(notebook_path, as_version=4)
    return [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]


def _canonical(path):
    nb = json.loads(path.read_text())
    return json.dumps(nb, sort_keys=True, indent=1)


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A copy of the course whose exercises nbgrader generated from the solutions, every day once (both
    tests below need them: generating a day takes seconds)."""
    from grader.course import Course
    root = Course.of(REPO).scratch_copy(tmp_path_factory.mktemp("released") / "course").root
    for day in DAYS:
        shutil.rmtree(root / "exercises" / day)
        nbgrader(root, "generate_assignment", day, "--force")
    return root


@pytest.mark.parametrize("day", DAYS)
def test_exercises_are_exactly_what_nbgrader_generates_from_solutions(released, day):
    generated = sorted(p.name for p in (released / "exercises" / day).glob("*.ipynb"))
    committed = sorted(p.name for p in (REPO / "exercises" / day).glob("*.ipynb"))
    assert generated == committed
    for name in generated:
        assert _canonical(released / "exercises" / day / name) == _canonical(REPO / "exercises" / day / name), \
            f"exercises/{day}/{name} differs from what nbgrader generates: run `make exercises`"


def test_every_notebook_is_committed_without_outputs():
    for path in REPO.glob("*/**/*.ipynb"):
        if ".ipynb_checkpoints" in path.parts or path.parts[len(REPO.parts)] in ("grading", ".venv"):
            continue
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            assert cell.cell_type != "code" or not cell.outputs, f"{path} has outputs"


def test_an_answer_cell_s_top_level_stub_stands_last_in_its_cell():
    # A part outside the graded functions (an optional Hopper kernel, helpers) is released as a stub that
    # raises where it stands. Left in by a student who skipped it or wrote everything inside the graded
    # function, a stub before that function kept it from being defined: 0 points
    # (tests/adversarial_class.py, d4_no_hopper_stub_left).
    for path in sorted((REPO / "exercises").glob("*/*.ipynb")):
        for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if not cell.metadata.get("nbgrader", {}).get("solution"):
                continue
            lines = cell.source.splitlines()
            stubs = [k for k, line in enumerate(lines) if line.startswith("raise NotImplementedError()")]
            later = [line for k in stubs[:1] for line in lines[k + 1:] if line.strip() and not line.startswith("#")]
            assert not later, f"{path.name} cell {i}: code after its top-level stub on line {stubs[0] + 1}: {later[:2]}"


def test_every_day_points_to_further_reading():
    # the GPU MODE lectures and the PMPP book at least, in a day's lectures
    for day in sorted(p for p in (REPO / "course").iterdir() if p.is_dir() and p.name.startswith("day")):
        text = "\n".join(c.source for path in sorted(day.glob("*.ipynb"))
                         for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
        assert "Further reading" in text, f"{day.name} has no further reading"
        assert "GPU MODE" in text and ("Programming Massively Parallel" in text or "PMPP" in text), day.name


def test_speed_cells_return_at_most_their_points():
    # nbgrader takes a float returned by a test cell as its score, and refuses one above the cell's points.
    for path in (REPO / "solutions").glob("*/*.ipynb"):
        for cell in _grade_cells(path):
            if "check_speed" in cell.source:
                declared = re.search(r"points=([\d.]+)", cell.source)
                assert declared and float(declared.group(1)) == cell.metadata.nbgrader["points"], path


POINTS_STATED = re.compile(r"\((\d+(?:\.\d+)?) points?( each)?\)")


def test_the_text_states_the_points_that_are_graded():
    # A cell's points are stated once in its metadata; the text a student reads says the same: the
    # nearest statement before a graded cell ("(3 points)" for the cells up to the next statement, or
    # "(1 point each)") agrees with the metadata of the cells it covers.
    for path in (REPO / "solutions").glob("*/*.ipynb"):
        groups = []   # [(points stated, each?, [metadata points of the graded cells it covers])]
        for cell in nbformat.read(path, as_version=4).cells:
            stated = POINTS_STATED.findall(cell.source) if cell.cell_type == "markdown" else []
            if stated:
                groups.append((stated, []))
            elif cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade"):
                assert groups, f"{path.name}: graded cell {cell.metadata.nbgrader['grade_id']} has no stated points"
                groups[-1][1].append(cell.metadata.nbgrader["points"])
        for stated, points in groups:
            if not points:
                continue   # an introduction that lists the parts; each part's heading states its own
            assert len(stated) == 1, f"{path.name}: which of {stated} covers cells worth {points}?"
            (number, each), = stated
            assert (all(p == float(number) for p in points) if each else sum(points) == float(number)), \
                f"{path.name}: the text says {number} point(s){each}, the cells are worth {points}"


# Plain `nbgrader autograde` (what formgrader's button runs), without the batch: every day on a GPU, where this
# is the check that the solutions earn full marks; without one, day 1 (the batch grades every day's solutions
# and untouched release in tests/test_adversarial_batch.py, for a fraction of the kernel start-ups).
PLAIN_DAYS = DAYS if DEVICE.is_gpu else DAYS[:1]


def test_autograde_gives_solutions_correctness_points_and_exercises_zero(released):
    for day in PLAIN_DAYS:
        for student, folder in (("reference", "solutions"), ("untouched", "exercises")):
            shutil.copytree(released / folder / day, released / "grading" / "submitted" / student / day)
    for student in ("reference", "untouched"):
        nbgrader(released, "db", "student", "add", student)
    for day in PLAIN_DAYS:
        nbgrader(released, "autograde", day, "--force")
    nbgrader(released, "export", "--to", "grades.csv")

    artifacts = os.environ.get("GRADER_ARTIFACTS")  # keep what a GPU run graded, for the record
    if artifacts:
        shutil.copy(released / "grades.csv", artifacts)
        shutil.make_archive(os.path.join(artifacts, "autograded"), "zip", released / "grading" / "autograded")

    rows = list(csv.DictReader(open(released / "grades.csv")))
    scores = {(r["assignment"], r["student_id"]): float(r["score"]) for r in rows}
    max_scores = {r["assignment"]: float(r["max_score"]) for r in rows}
    for day in PLAIN_DAYS:
        expected = max_scores[day] if DEVICE.is_gpu else points_without_gpu(day)
        assert scores[(day, "reference")] == pytest.approx(expected), (day, scores)
        assert scores[(day, "untouched")] == 0.0, (day, scores)

    if not DEVICE.is_gpu and "day1" in DAYS:
        graded = (released / "grading" / "autograded" / "reference" / "day1" / "vector_add.ipynb").read_text()
        assert "needs a CUDA GPU" in graded


EXPECTED_TIME = re.compile(r"\*Expected time: (\d+) minutes(?: \(core\), (\d+) with the optional parts)?")


def test_every_notebook_states_its_time_and_the_readme_adds_them_up():
    # Each lecture and exercise says how long it takes, and the README's table is their sum (core, with the
    # optional parts, exercises); days 1 and 3 have no optional parts.
    readme = (REPO / "README.md").read_text()
    days = sorted(path.name for path in (REPO / "course").glob("day*"))
    assert days == [f"day{n}" for n in range(1, 6)]
    for day in days:
        core = optional = exercises = 0
        for folder in ("course", "solutions"):
            for path in sorted((REPO / folder / day).glob("*.ipynb")):
                found = EXPECTED_TIME.search(nbformat.read(path, as_version=4).cells[0].source)
                assert found, f"{path.relative_to(REPO)} states no expected time"
                minutes, with_optional = int(found.group(1)), int(found.group(2) or found.group(1))
                if folder == "course":
                    core, optional = core + minutes, optional + with_optional
                else:
                    exercises += minutes
        row = f"| {day[3:]} | {core} min | {optional} min | {exercises} min |"
        assert row in readme, f"README: expected the row {row}"
