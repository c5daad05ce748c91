"""The batch's writes to nbgrader's gradebook, beside nbgrader's own: every student and submission made
before workers start, and 0 for a notebook whose autograde did not finish."""
from __future__ import annotations

from grader.course import Course


def open_gradebook(course: Course):
    from nbgrader.api import Gradebook
    # The course id as nbgrader's apps pass it: Gradebook's own default would add a course row.
    return Gradebook(course.db_url, course.course_id)


def prepare_gradebook(course: Course, day: str, students: list) -> None:
    """Create every student and submission before workers start, so that a notebook killed before
    nbgrader reached the gradebook can still be zeroed, and concurrent writers mostly update rows."""
    import warnings

    from nbgrader.api import MissingEntry
    from sqlalchemy.exc import SAWarning
    try:
        gradebook = open_gradebook(course)
    except ModuleNotFoundError as e:  # e.g. postgresql:// means psycopg 3 to SQLAlchemy 2.1
        raise ValueError(f"the gradebook's database driver is not installed ({e.name}): install it, or name the "
                         f"installed one in the URL, such as postgresql+psycopg2://") from None
    with gradebook as gb, warnings.catch_warnings():
        # nbgrader's add_submission builds rows in a way SQLAlchemy 2 warns about; they are saved all the same.
        warnings.simplefilter("ignore", SAWarning)
        try:
            gb.find_assignment(day)
        except MissingEntry:
            raise ValueError(f"{day} is not in the gradebook: release it first (course-grader release {day})") from None
        for student in students:
            gb.update_or_create_student(student)
            gb.update_or_create_submission(day, student)


def zero_notebook(course: Course, day: str, student: str, notebook: str) -> None:
    """Score 0 for every graded cell of a notebook whose autograde did not finish.

    nbgrader saves a notebook's grades only after running it, one cell at a time, so a kill leaves the
    grades of an earlier run (a regrade would keep a stale score) or half of this run's. nbgrader marks a
    notebook that was not handed in the same way: auto_score 0, nothing to grade by hand.
    """
    with open_gradebook(course) as gb:
        for grade in gb.find_submission_notebook(notebook, day, student).grades:
            grade.auto_score = 0
            grade.needs_manual_grade = False
        gb.db.commit()
