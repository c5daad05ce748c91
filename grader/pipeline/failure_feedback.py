"""Feedback for a notebook whose grading did not finish: what happened, and what to check.

nbgrader writes a student's feedback from the autograded notebook. A notebook whose kernel died, or
that was still running at the time limit, has none (the batch removes what a killed run left, and
scores it 0), so `nbgrader generate_feedback` would leave that student with a 0 and no word of why.
`course-grader report` writes this page in its place, at the path nbgrader uses for feedback, from
the run log (grading/runs-DAY.csv): the reason in words, without the grading machine's paths or
tracebacks, and what to try before handing in again.
"""
from __future__ import annotations

import csv
import html
import re

from grader.course import Course

FAILED = ("timed out", "failed")

# The run log's reason for a failure is nbgrader's last error lines: kept only as far as they teach.
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:/[\w.@+-]+){2,}/?")

_ADVICE = {
    "timed out": [
        "A loop that never ends is the usual cause: in a Triton kernel, a `while` whose condition never "
        "changes or a `range` bound computed from the wrong value; in Python, a loop that waits for a value.",
        "A size that is far too large for the code path (an int32 offset that wraps around, so a loop "
        "runs for billions of steps) has the same effect.",
        "Restart your notebook and run it top to bottom (Kernel > Restart Kernel and Run All Cells): the "
        "cell that does not finish is the one to look at. On a CPU, try the small sizes of the visible checks.",
    ],
    "died": [
        "The process running your notebook stopped at once, without a Python error: most often a Triton "
        "kernel that reads or writes outside its tensors (a missing or wrong `mask=`), or the GPU running "
        "out of memory.",
        "Run the notebook's checks on a CPU (Triton's interpreter stops an access outside a tensor and "
        "names the kernel, the tensor and the element), and check every `tl.load` and `tl.store` has a mask "
        "that covers the ragged end.",
        "On a GPU, `compute-sanitizer python your_script.py` names the first bad access, if it is installed.",
    ],
    "failed": [
        "nbgrader could not run your notebook to the end. Check that it opens in JupyterLab, that it runs "
        "top to bottom after a restart, and that you handed in the notebook the course released (its "
        "graded cells unchanged).",
    ],
}


def failed_runs(course: Course, day: str) -> list:
    """Rows of grading/runs-DAY.csv (and its shards) for notebooks whose grading did not finish."""
    rows = []
    for path in sorted(course.grading.glob(f"runs-{day}*.csv")):
        with open(path, newline="") as f:
            rows += [r for r in csv.DictReader(f) if r.get("status") in FAILED]
    return rows


def kind_of(row: dict) -> str:
    if row["status"] == "timed out":
        return "timed out"
    return "died" if re.search(r"DeadKernel|[Kk]ernel died|Kernel.*restart", row.get("reason", "")) else "failed"


def student_reason(row: dict) -> str:
    """The run log's reason as a student may read it: no machine paths, no traceback."""
    reason = row.get("reason", "")
    if kind_of(row) == "timed out":
        return reason.replace(": scored 0", "")
    if kind_of(row) == "died":
        return "the Jupyter kernel running your notebook died."
    lines = [line.strip() for line in reason.split("|") if line.strip() and "Traceback" not in line]
    text = _PATH.sub("<path>", "; ".join(lines)).replace(": scored 0", "")
    return (text[:300] + "...") if len(text) > 300 else (text or "nbgrader failed.")


def page(row: dict) -> str:
    """The feedback page of one notebook whose grading did not finish."""
    name, day = html.escape(row["notebook"]), html.escape(row["day"])
    advice = "".join(f"<li>{html.escape(a)}</li>" for a in _ADVICE[kind_of(row)])
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{day}/{name}: not graded to the end"
            f"</title></head>\n<body>\n<h1>{day} / {name}.ipynb: grading did not finish</h1>\n"
            f"<p><strong>What happened:</strong> {html.escape(student_reason(row))}</p>\n"
            f"<p>Every graded cell of this notebook scored 0. The other notebooks of {day} were graded "
            f"as usual.</p>\n<p><strong>What to check:</strong></p>\n<ul>{advice}</ul>\n</body></html>\n")


def write(course: Course, day: str) -> list:
    """Write the page of every notebook of `day` whose grading did not finish, where nbgrader puts a
    notebook's feedback (grading/feedback/STUDENT/DAY/NOTEBOOK.html); returns the paths written."""
    written = []
    for row in failed_runs(course, day):
        path = course.feedback / row["student"] / day / f"{row['notebook']}.html"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page(row))
        written.append(path)
    return written
