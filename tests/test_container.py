"""The grading image's build context and base, checked without a container engine (CI has none)."""
import fnmatch
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _patterns() -> list:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    return [line.strip().lstrip("/") for line in lines if line.strip() and not line.startswith("#")]


def _left_out(path: str, patterns: list) -> bool:
    """Docker's rule for these patterns (no "!" exceptions here): a path is left out when it, or a folder
    above it, matches; "**/" matches any depth, including none."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for pattern in patterns:
        assert not pattern.startswith("!"), "extend _left_out before using exceptions"
        forms = [pattern, pattern[3:]] if pattern.startswith("**/") else [pattern]
        for prefix in prefixes:
            candidates = [prefix] + (["/".join(prefix.split("/")[i:]) for i in range(len(prefix.split("/")))]
                                     if pattern.startswith("**/") else [])
            if any(fnmatch.fnmatchcase(c, f) for c in candidates for f in forms):
                return True
    return False


@pytest.mark.parametrize("path", [".venv/bin/python", ".git/HEAD", "grading/submitted/alice/day1/vector_add.ipynb",
                                  "grading/gradebook.db", "gradebook.db", ".whl/torch.whl",
                                  "test-artifacts/lab.png", "grader/__pycache__/guard.cpython-312.pyc",
                                  "gpu_course.egg-info/PKG-INFO", "course/day1/.ipynb_checkpoints/a.ipynb"])
def test_local_state_and_students_work_stay_out_of_the_image(path):
    assert _left_out(path, _patterns()), path


@pytest.mark.parametrize("path", ["grader/student/guard.py", "grader/checker/verdicts.py",
                                  "solutions/day1/vector_add.ipynb",
                                  "exercises/day4/flash_attention.ipynb", "course/day1/01_what_is_a_kernel.ipynb",
                                  "pyproject.toml", "README.md", "nbgrader_config.py", "tests/test_guard.py"])
def test_what_the_image_needs_goes_in(path):
    assert not _left_out(path, _patterns()), path


def test_the_image_has_one_cuda_the_torch_wheels_and_says_which_driver_it_needs():
    dockerfile = (REPO / "Dockerfile").read_text()
    base = re.search(r"^FROM\s+(\S+)", dockerfile, re.M).group(1)
    assert not base.startswith("nvidia/cuda"), "the torch wheel brings CUDA: a CUDA base image is a second copy"
    pin = re.search(r"torch==([\d.]+)", dockerfile).group(1)
    assert f"torch=={pin}" in (REPO / "environment.yml").read_text()
    assert f"torch=={pin}" in (REPO / "Makefile").read_text()
    assert re.search(r"driver \d+ or newer", dockerfile)


def test_reading_a_notebook_builds_no_parsers_for_a_format_no_schema_uses():
    # rfc3987-syntax builds 39 parsers whenever jsonschema is imported (1.4 s of CPU in each nbgrader and
    # nbconvert process); `make install` and the image take it out, and nbformat still validates
    import subprocess
    import sys
    assert "pip uninstall -y rfc3987-syntax" in (REPO / "Dockerfile").read_text()
    probe = ("import sys, nbformat\n"
             "nbformat.validate(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('x = 1')]))\n"
             "print('rfc3987_syntax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False", "rfc3987-syntax is installed here: `make install` uninstalls it"
