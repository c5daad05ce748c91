"""Collecting submissions from LMS and Colab downloads, and sanitizing them before grading."""
import copy
import zipfile

import nbformat
import pytest

from grader import colab
from grader.pipeline import submissions
from conftest import REPO

DAY2 = ["cross_entropy", "rmsnorm", "softmax"]
RELEASE = REPO / "exercises" / "day1" / "vector_add.ipynb"
SOLUTION = REPO / "solutions" / "day1" / "vector_add.ipynb"


@pytest.mark.parametrize("path, student, notebook", [
    ("alice_day2_softmax.ipynb", "alice", "softmax"),
    ("alice_day2_softmax (1).ipynb", "alice", "softmax"),
    ("Bob Smith - day2_rmsnorm.ipynb", "bob_smith", "rmsnorm"),
    ("carol/Copy of day2_cross_entropy.ipynb", "carol", "cross_entropy"),
    ("dave/softmax.ipynb", "dave", "softmax"),
    # Canvas (name, user id, submission id; "late_"; "-1" for a resubmission), with Colab's "Copy of"
    ("leeanna_34567_890123_copy_of_day2_softmax.ipynb", "leeanna_34567", "softmax"),
    ("late_leeanna_34567_890777_Copy of day2_softmax-1.ipynb", "leeanna_34567", "softmax"),
    # Moodle (full name, participant id), flat or one folder per submission
    ("Bob Jones_45678_assignsubmission_file_day2_rmsnorm.ipynb", "bob_jones", "rmsnorm"),
    ("Bob Jones_45678_assignsubmission_file_/Copy of rmsnorm.ipynb", "bob_jones", "rmsnorm"),
    # Blackboard (assignment name, username, attempt date), the assignment's name with spaces and "_"
    ("Day 2 reductions_jsmith7_attempt_2026-11-02-09-15-00_day2_softmax.ipynb", "jsmith7", "softmax"),
    ("HW_2_k.lee_attempt_2026-11-03-23-59-59_Copy of cross_entropy.ipynb", "k.lee", "cross_entropy"),
])
def test_names_map_to_student_and_notebook(tmp_path, path, student, notebook):
    f = tmp_path / path
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text("{}")
    assert submissions.match_name(f, "day2", DAY2, tmp_path) == (student, notebook)


def test_collect_from_a_zip_reports_what_it_could_not_match(tmp_path):
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("alice_day2_softmax.ipynb", "{}")
        z.writestr("alice_day2_softmax (1).ipynb", '{"newer": 1}')
        z.writestr("erin/Copy of day2_rmsnorm.ipynb", "{}")
        z.writestr("Copy of day2_softmax.ipynb", "{}")          # Colab name, no folder: whose?
        z.writestr("frank_day2_homework.ipynb", "{}")           # not one of the day's notebooks
        z.writestr("notes.txt", "hello")
        z.writestr("__MACOSX/._junk", "")
    report = submissions.collect(archive, "day2", DAY2, tmp_path / "submitted")
    assert sorted((s, n) for _, s, n in report.copied) == [("alice", "softmax"), ("erin", "rmsnorm")]
    reasons = dict(report.unmatched)
    assert "no student name" in reasons["Copy of day2_softmax.ipynb"]
    assert "matches none of day2's notebooks" in reasons["frank_day2_homework.ipynb"]
    assert "not an .ipynb" in reasons["notes.txt"]
    assert len(report.replaced) == 1 and "NOT COLLECTED" in report.summary()
    assert (tmp_path / "submitted" / "erin" / "day2" / "rmsnorm.ipynb").exists()
    assert archive.exists()  # the original is untouched


def test_of_two_attempts_the_newer_is_kept(tmp_path):
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(zipfile.ZipInfo("ann_11_1_day2_softmax.ipynb", (2026, 11, 2, 9, 0, 0)), '{"attempt": "first"}')
        z.writestr(zipfile.ZipInfo("ann_11_2_day2_softmax-1.ipynb", (2026, 11, 1, 9, 0, 0)), '{"attempt": "canvas -1"}')
        z.writestr(zipfile.ZipInfo("bo_day2_softmax.ipynb", (2026, 11, 3, 9, 0, 0)), '{"attempt": "later"}')
        z.writestr(zipfile.ZipInfo("bo/softmax.ipynb", (2026, 11, 1, 9, 0, 0)), '{"attempt": "earlier"}')
    report = submissions.collect(archive, "day2", DAY2, tmp_path / "submitted")
    assert len(report.replaced) == 2
    assert "canvas -1" in (tmp_path / "submitted" / "ann_11" / "day2" / "softmax.ipynb").read_text()
    assert "later" in (tmp_path / "submitted" / "bo" / "day2" / "softmax.ipynb").read_text()


def test_of_two_blackboard_attempts_the_later_date_is_kept_whatever_the_zip_says(tmp_path):
    archive = tmp_path / "gradebook.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(zipfile.ZipInfo("Day 2_ann_attempt_2026-11-02-09-00-00_softmax.ipynb", (2026, 11, 5, 9, 0, 0)),
                   '{"attempt": "first"}')
        z.writestr(zipfile.ZipInfo("Day 2_ann_attempt_2026-11-04-18-30-00_softmax.ipynb", (2026, 11, 1, 9, 0, 0)),
                   '{"attempt": "second"}')
        z.writestr("Day 2_ann_attempt_2026-11-04-18-30-00.txt", "Name: Ann\nSubmission Field: ...")
    report = submissions.collect(archive, "day2", DAY2, tmp_path / "submitted")
    assert "second" in (tmp_path / "submitted" / "ann" / "day2" / "softmax.ipynb").read_text()
    assert dict(report.unmatched) == {"Day 2_ann_attempt_2026-11-04-18-30-00.txt": "not an .ipynb file"}


def test_an_id_map_names_students_and_reports_anyone_it_does_not_list(tmp_path):
    ids = tmp_path / "ids.csv"
    ids.write_text("lms_id,student_id\nleeanna_34567,s1001\nBob Jones,s1002\n")
    id_map = submissions.read_id_map(ids)
    assert id_map == {"leeanna_34567": "s1001", "bob_jones": "s1002"}
    folder = tmp_path / "download"
    folder.mkdir()
    for name in ("leeanna_34567_890123_copy_of_day2_softmax.ipynb",
                 "Bob Jones_45678_assignsubmission_file_day2_rmsnorm.ipynb", "mallory_99_1_day2_softmax.ipynb"):
        (folder / name).write_text("{}")
    report = submissions.collect(folder, "day2", DAY2, tmp_path / "submitted", id_map)
    assert sorted((s, n) for _, s, n in report.copied) == [("s1001", "softmax"), ("s1002", "rmsnorm")]
    assert dict(report.unmatched) == {"mallory_99_1_day2_softmax.ipynb": "mallory_99 is not in the id map"}
    assert not (tmp_path / "submitted" / "mallory_99").exists()


@pytest.mark.parametrize("text", ["lms_id,student_id\nalice\n", "alice,\n"])
def test_an_id_map_with_a_missing_column_is_refused_with_its_row(tmp_path, text):
    ids = tmp_path / "ids.csv"
    ids.write_text(text)
    with pytest.raises(ValueError, match="row 1: expected two columns"):
        submissions.read_id_map(ids)


def _filled(release, solution):
    """The release with the reference's code in its solution cells: a complete student submission."""
    nb = copy.deepcopy(release)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in solution.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    for c in nb.cells:
        gid = c.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            c.source = answers[gid]
    return nb


def _ids(nb):
    return [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]


def test_sanitize_restores_deleted_and_edited_tests_and_drops_duplicates():
    release = nbformat.read(RELEASE, as_version=4)
    student = _filled(release, nbformat.read(SOLUTION, as_version=4))
    student.cells = [c for c in student.cells if _ids(nbformat.v4.new_notebook(cells=[c]))[0] != "test_add_speed"]
    for c in student.cells:
        if c.metadata.get("nbgrader", {}).get("grade_id") == "test_add_correct":
            c.source = "print('all good')"
    add = _ids(student).index("add")
    student.cells.append(copy.deepcopy(student.cells[add]))     # a duplicated solution cell
    student.cells.insert(add + 1, nbformat.v4.new_code_cell("HELPER = 1"))
    nb, fixes = submissions.sanitize_notebook(nbformat.writes(student), release)
    assert "duplicated cell 'add' dropped" in fixes
    assert "cell 'test_add_speed' had been deleted: restored" in fixes
    assert "cell 'test_add_correct' had been edited: restored" in fixes
    assert [i for i in _ids(nb) if i] == [i for i in _ids(release) if i]
    sources = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in nb.cells}
    assert "tl.program_id" in sources["add"] and "grader.check(" in sources["test_add_correct"]
    helper = [c.source for c in nb.cells].index("HELPER = 1")
    assert _ids(nb)[helper - 1] == "add"   # the student's own cell stays after the cell it followed
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    nbformat.validate(nb)


def test_sanitize_finds_solutions_when_metadata_was_stripped():
    release = nbformat.read(RELEASE, as_version=4)
    student = _filled(release, nbformat.read(SOLUTION, as_version=4))
    for c in student.cells:
        c.metadata = {}
    student.metadata = {"colab": {"provenance": []}}
    nb, fixes = submissions.sanitize_notebook(nbformat.writes(student), release)
    assert any("recognised by its content" in f for f in fixes)
    solution = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "add")
    assert "tl.program_id" in solution.source
    assert nb.metadata["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("text", ["", "{not json", '{"cells": 5}', "\x00\x01binary"])
def test_an_unreadable_file_becomes_the_blank_release_with_a_reason(text):
    release = nbformat.read(RELEASE, as_version=4)
    nb, fixes = submissions.sanitize_notebook(text, release)
    assert "graded as blank" in fixes[0]
    assert _ids(nb) == _ids(release)


def test_cells_added_above_the_setup_run_after_it():
    release = nbformat.read(RELEASE, as_version=4)
    student = copy.deepcopy(release)
    student.cells.insert(0, nbformat.v4.new_code_cell("@triton.jit\ndef helper(x): pass"))
    nb, _ = submissions.sanitize_notebook(nbformat.writes(student), release)
    ids = _ids(nb)
    assert ids[:3] == ["intro", "colab", "setup"] and nb.cells[3].source.startswith("@triton.jit")


def test_the_colab_install_cell_comes_back_as_released():
    # Colab keeps nbgrader's metadata; a student who edited or deleted the (locked) cell gets it back.
    release = nbformat.read(RELEASE, as_version=4)
    for change in ("edit", "delete"):
        student = copy.deepcopy(release)
        i = _ids(student).index("colab")
        if change == "edit":
            student.cells[i].source = "!pip install something-else"
        else:
            del student.cells[i]
        nb, fixes = submissions.sanitize_notebook(nbformat.writes(student), release)
        assert _ids(nb)[:3] == ["intro", "colab", "setup"]
        assert nb.cells[1].source == release.cells[i].source and fixes


def test_copies_of_locked_cells_without_metadata_are_not_kept_twice():
    # E.g. an editor that strips cell metadata: the install and set-up cells come back once, from the release.
    release = nbformat.read(RELEASE, as_version=4)
    student = _filled(release, nbformat.read(SOLUTION, as_version=4))
    for c in student.cells:
        c.metadata = {}
    nb, _ = submissions.sanitize_notebook(nbformat.writes(student), release)
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    assert sum(s == colab.install_cell_source() for s in sources) == 1 and sum("grader.setup()" in s for s in sources) == 1


def test_a_cell_of_the_students_own_marked_graded_becomes_a_plain_cell():
    # nbgrader metadata on a cell the release does not have (here a graded test worth 50 points without a
    # grade_id, which made nbgrader raise KeyError and score the whole notebook 0): dropped, the cell kept.
    release = nbformat.read(RELEASE, as_version=4)
    student = _filled(release, nbformat.read(SOLUTION, as_version=4))
    for meta in ({"grade": True, "solution": False, "points": 50, "locked": False}, {"solution": True},
                 {"grade": True, "grade_id": None, "points": 5}):
        student.cells.insert(_ids(student).index("test_add_correct"),
                             nbformat.v4.new_code_cell("print('mine')", metadata={"nbgrader": meta, "tags": ["x"]}))
    nb, _ = submissions.sanitize_notebook(nbformat.writes(student), release)
    mine = [c for c in nb.cells if c.source == "print('mine')"]
    assert len(mine) == 3 and all("nbgrader" not in c.metadata and c.metadata["tags"] == ["x"] for c in mine)
    assert [i for i in _ids(nb) if i] == [i for i in _ids(release) if i]
    nbformat.validate(nb)
