"""The course model (grader/course.py): folders as nbgrader_config.py names them, days, notebooks, students."""
from conftest import REPO
from grader.course import SQLITE_BUSY_TIMEOUT_S, Course, with_busy_timeout


def test_the_course_is_where_nbgrader_s_config_says():
    course = Course.of(REPO)
    assert (course.source, course.release) == (REPO / "solutions", REPO / "exercises")
    assert course.submitted == REPO / "grading" / "submitted" and course.grading == REPO / "grading"
    assert course.autograded == REPO / "grading" / "autograded" and course.feedback == REPO / "grading" / "feedback"
    assert course.days() == sorted(p.name for p in (REPO / "solutions").iterdir() if p.is_dir())
    assert course.notebooks("day1") == ["bias_gelu", "predict_runtime", "vector_add"]
    assert course.notebooks("day9") == []


def test_a_folder_renamed_in_the_config_is_renamed_for_the_whole_grader(tmp_path):
    copy = Course.of(REPO).scratch_copy(tmp_path / "course")
    assert copy.root == tmp_path / "course" and copy.days() == Course.of(REPO).days()
    assert copy.db_url.startswith(f"sqlite:///{copy.root}/grading/")   # a gradebook of its own
    config = copy.root / "nbgrader_config.py"
    config.write_text(config.read_text().replace('"grading/submitted"', '"inbox"'))
    course = Course.of(copy.root)
    assert course.submitted == copy.root / "inbox"
    (course.submitted / "ann" / "day1").mkdir(parents=True)
    (course.submitted / "bob" / "day2").mkdir(parents=True)
    assert course.students("day1") == ["ann"] and course.students("day3") == []


def test_nbgrader_runs_on_the_course_with_this_environment(tmp_path):
    course = Course.of(REPO).scratch_copy(tmp_path / "course")
    env = course.nbgrader_env({"PATH": "/usr/bin", "NBGRADER_EXECUTION": "autograde"})
    assert "NBGRADER_EXECUTION" not in env and str(REPO) in env["PYTHONPATH"].split(":")
    listed = course.nbgrader("db", "assignment", "list")
    assert listed.returncode == 0, listed.stdout + listed.stderr


def test_a_sqlite_gradebook_waits_for_a_busy_writer_and_other_urls_are_kept():
    assert with_busy_timeout("sqlite:////g/gradebook.db") == f"sqlite:////g/gradebook.db?timeout={SQLITE_BUSY_TIMEOUT_S}"
    assert with_busy_timeout("sqlite:////g/gradebook.db?timeout=9") == "sqlite:////g/gradebook.db?timeout=9"
    url = "postgresql+psycopg2://grader@/gradebook?host=/run/pg"
    assert with_busy_timeout(url) == url
