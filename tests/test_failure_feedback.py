"""A notebook whose grading did not finish still gets feedback: what happened and what to check."""
import csv
import shutil

from conftest import REPO
from grader.course import Course
from grader.pipeline import failure_feedback
from grader.pipeline.batch import Run

FIELDS = list(Run.__dataclass_fields__)


def _runs(root, rows) -> Course:
    """A course in `root` whose day 1 run log holds `rows`."""
    shutil.copy(REPO / "nbgrader_config.py", root)
    course = Course.of(root)
    with open(course.grading / "runs-day1.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for student, notebook, status, reason in rows:
            writer.writerow(dict.fromkeys(FIELDS, "") | dict(student=student, day="day1", notebook=notebook,
                                                             status=status, seconds="1", reason=reason))
    return course


def test_a_notebook_that_died_or_ran_too_long_gets_a_page_that_explains(tmp_path):
    course = _runs(tmp_path, [
        ("ann", "vector_add", "timed out", "still running after 900 s (an endless loop or a hung kernel?): scored 0"),
        ("bob", "vector_add", "failed", "[AutogradeApp | ERROR] DeadKernelError: Kernel died | "
                                        "Traceback (most recent call last): scored 0"),
        ("cy", "bias_gelu", "failed", "[AutogradeApp | ERROR] /srv/course/grading/submitted/cy/day1/bias_gelu.ipynb "
                                      "is not valid JSON: scored 0"),
        ("dee", "vector_add", "graded", ""),
        ("eve", "bias_gelu", "not submitted", "not handed in: scored 0"),
    ])
    written = failure_feedback.write(course, "day1")
    feedback = tmp_path / "grading" / "feedback"
    assert sorted(p.relative_to(feedback).as_posix() for p in written) == [
        "ann/day1/vector_add.html", "bob/day1/vector_add.html", "cy/day1/bias_gelu.html"]
    spun = (feedback / "ann/day1/vector_add.html").read_text()
    assert "still running after 900 s" in spun and "loop" in spun and "Restart" in spun
    died = (feedback / "bob/day1/vector_add.html").read_text()
    assert "kernel running your notebook died" in died and "mask" in died and "Traceback" not in died
    broken = (feedback / "cy/day1/bias_gelu.html").read_text()
    assert "not valid JSON" in broken and "/srv/course" not in broken and "&lt;path&gt;" in broken
    assert all(": scored 0" not in p.read_text() and "Every graded cell of this notebook scored 0" in p.read_text()
               for p in written)


def test_nothing_is_written_when_every_notebook_finished(tmp_path):
    course = _runs(tmp_path, [("ann", "vector_add", "graded", "")])
    assert failure_feedback.write(course, "day1") == []
    assert not (tmp_path / "grading" / "feedback").exists()
