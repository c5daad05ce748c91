"""Batches at once on one machine: what one closes for its kernels (the solutions, grading/) stays closed
until the last of them ends (grader/pipeline/sandbox.py, _closed_together). In CI two test workers grade
at once, and the first to end used to open the exercise data while the other's notebooks ran."""
import subprocess
import sys

from conftest import REPO
from grader.course import Course
from grader.pipeline import sandbox

HOLD = """
import sys, time
from pathlib import Path
from grader.course import Course
from grader.pipeline import sandbox
with sandbox.closed_workspace(Course.of(Path(sys.argv[1])), log=lambda *a: None):
    print("closed", flush=True)
    sys.stdin.readline()     # until the test says so
"""


def _mode(path):
    return path.stat().st_mode & 0o777


def _another_batch(course_copy):
    """(the course's solutions, open to all; a process whose batch holds them closed)."""
    Course.of(course_copy).grading.mkdir(parents=True, exist_ok=True)
    solutions = Course.of(course_copy).source
    solutions.chmod(0o755)
    other = subprocess.Popen([sys.executable, "-c", HOLD, str(course_copy)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert other.stdout.readline().strip() == "closed"
    return solutions, other


def test_a_folder_stays_closed_until_the_last_batch_holding_it_ends(course_copy):
    solutions, other = _another_batch(course_copy)
    try:
        assert _mode(solutions) == 0o700
        with sandbox.closed_workspace(Course.of(course_copy), log=lambda *a: None):
            assert _mode(solutions) == 0o700
        assert _mode(solutions) == 0o700, "opened while another batch still runs"
        other.stdin.write("\n")
        other.stdin.flush()
        assert other.wait(timeout=60) == 0
    finally:
        other.kill()
    assert _mode(solutions) == 0o755, "not opened again after the last batch"


def test_a_batch_that_died_holding_a_folder_does_not_keep_it_closed(course_copy):
    solutions, died = _another_batch(course_copy)
    died.kill()
    died.wait(timeout=60)
    with sandbox.closed_workspace(Course.of(course_copy), log=lambda *a: None):
        assert _mode(solutions) == 0o700
    assert _mode(solutions) == 0o755, "the mode from before the dead batch closed it is put back"
