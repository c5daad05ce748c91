"""nbgrader settings for the course: solutions/ is the source, exercises/ the release (one assignment a day).

The grading workspace (submissions, autograded copies, feedback, the gradebook) lives in grading/,
which git ignores. Paths are relative to this file, so a copy of the repository is a course of its own.
"""
import os

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file

root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.root = root
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = "grading/submitted"
c.CourseDirectory.autograded_directory = "grading/autograded"
c.CourseDirectory.feedback_directory = "grading/feedback"
os.makedirs(os.path.join(root, "grading"), exist_ok=True)  # ignored by git; absent in a fresh clone
c.CourseDirectory.db_url = os.environ.get("NBGRADER_DB_URL", f"sqlite:///{root}/grading/gradebook.db")
if os.environ.get("NBGRADER_DB_URL"):
    # PostgreSQL enforces the assignment -> course foreign key that SQLite ignores, and nbgrader's default
    # course id "" has no course row: name the course (docs/grading-at-scale.md).
    c.CourseDirectory.course_id = os.environ.get("NBGRADER_COURSE_ID", "gpu-course")

# Triton compiles (or interprets, without a GPU) on first use and speed checks time dozens of runs:
# nbgrader's 30 s default per cell is far too short.
c.Execute.timeout = 900
c.ExecutePreprocessor.timeout = 900
c.Execute.interrupt_on_timeout = False
# A kernel, started as a user of its own and importing torch, may take more than nbclient's default 60 s
# to answer on a busy machine (2 cores grading a class: a notebook scored 0 with "Kernel didn't respond in
# 60 seconds"). A busy machine is no reason for a zero; the batch's --timeout still bounds the notebook.
c.Execute.startup_timeout = 300
c.ExecutePreprocessor.startup_timeout = 300
# Once the last cell has run, the kernel is killed rather than asked to exit: its answers are all in,
# and a kernel that has imported torch took 0.5 to 1 s to wind down. The batch kills what it leaves.
c.Execute.shutdown_kernel = "immediate"

# nbgrader's executor can stall on a cell that writes into an ipywidgets.Output (an `interact` or a plot
# a student left in an answer): the course's subclass does not (grader/checker/headless.py explains why).
from grader.checker.headless import Execute as HeadlessExecute  # noqa: E402
from nbgrader.converters.autograde import Autograde  # noqa: E402

c.Autograde.autograde_preprocessors = [HeadlessExecute if pp.__name__ == "Execute" else pp
                                       for pp in Autograde.class_traits()["autograde_preprocessors"].default()]
