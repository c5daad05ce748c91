"""The grader package imports what a process needs and no more."""
import subprocess
import sys


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_nbgrader_config_loads_the_executor_without_torch():
    # nbgrader imports grader.checker.headless from nbgrader_config.py in every process it starts.
    assert _run("import sys, grader.checker.headless; print('torch' in sys.modules)") == "False"


def test_public_names_and_submodules_are_there_on_first_use():
    out = _run("import grader; print(grader.check.__module__, grader.timing.__name__, callable(grader.setup))")
    assert out == "grader.student.checks grader.timing True"
    err = subprocess.run([sys.executable, "-c", "import grader; grader.no_such_thing"], capture_output=True, text=True)
    assert "has no attribute 'no_such_thing'" in err.stderr
