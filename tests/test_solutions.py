"""The reference solutions pass their own checks when run outside Jupyter (as `make bench` runs them)."""
import pytest

import grader
from grader.pipeline import notebooks
from conftest import REPO

SOLUTIONS = sorted((REPO / "solutions").glob("*/*.ipynb"))


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_reference_solution_passes_its_correctness_checks(path, monkeypatch):
    calls = notebooks.graded_calls(path)
    assert calls, f"{path} has no graded calls"
    namespace = notebooks.run_code_cells(path)
    for kind, key, name in calls:
        if kind == "check":
            grader.check(key, namespace[name], hidden=True)
        elif kind == "check_prediction":
            grader.check_prediction(key, namespace[name])
            with monkeypatch.context() as m:      # and the fresh cases drawn at grading time
                m.setenv("NBGRADER_EXECUTION", "autograde")
                grader.check_prediction(key, namespace[name])


def test_graded_calls_are_found_with_their_keys():
    calls = notebooks.graded_calls(REPO / "solutions" / "day1" / "vector_add.ipynb")
    assert ("check", "day1.vector_add", "add") in calls
    assert ("check_speed", "day1.vector_add", "add") in calls
