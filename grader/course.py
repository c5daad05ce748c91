"""Where the course lives: the repository root that holds course/, exercises/, solutions/ and grading/.

Every module that needs a path of the course asks here, so that moving a module never moves the course.
"""
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
