"""The student edition (`course-grader student-edition`): what students clone holds no answer, and works."""
import filecmp
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.pipeline import cli, edition
from grader import exercises
from grader.exercises import KernelExercise, PredictionExercise

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return edition.build(tmp_path_factory.mktemp("student") / "edition")


def _run_in(folder: Path, script: str) -> subprocess.CompletedProcess:
    """Run Python in the edition, with the edition's grader first on the path (not this repository's)."""
    path = folder / "_probe.py"
    path.write_text(textwrap.dedent(script))
    try:
        return subprocess.run([sys.executable, str(path)], cwd=folder, capture_output=True, text=True, timeout=600,
                              env=dict(os.environ, PYTHONPATH=str(folder)))
    finally:
        path.unlink()


def test_the_edition_holds_no_solution_and_no_hidden_test(built):
    assert not (built / "solutions").exists() and not (built / "tests").exists()
    notebooks = list(built.rglob("*.ipynb"))
    assert len(notebooks) == len(list((REPO / "course").rglob("*.ipynb")) + list((REPO / "exercises").rglob("*.ipynb")))
    for path in notebooks:      # the markers of nbgrader's solution regions and hidden test cells
        text = path.read_text()
        for secret in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "hidden=True"):
            assert secret not in text, (path, secret)
    # the released exercises are nbgrader's, unchanged
    assert not filecmp.dircmp(REPO / "exercises", built / "exercises").diff_files
    # every measurement a notebook cites is there too
    cited = {found for path in notebooks for found in re.findall(r"docs/[\w-]+\.md", path.read_text())}
    assert cited and all((built / name).is_file() for name in cited), cited


@pytest.fixture(scope="module")
def kernels_grader(tmp_path_factory):
    """The grader a sandboxed batch's kernels import (grader/pipeline/sandbox.py)."""
    from grader.pipeline import sandbox
    return sandbox.kernel_grader(tmp_path_factory.mktemp("kernel") / "code")


@pytest.mark.parametrize("which", ["built", "kernels_grader"])
def test_no_hidden_case_and_no_prediction_formula_is_left_in_the_grader(which, request):
    built = request.getfixturevalue(which)
    sources = "".join(p.read_text() for p in (built / "grader" / "exercises").glob("day*.py"))
    for spec in exercises.all_exercises():
        if isinstance(spec, PredictionExercise):
            assert f"def {spec.model.__name__}(" not in sources, spec.key   # the formula is gone
    probe = _run_in(built, """
        import grader.exercises as ex
        from grader.exercises import KernelExercise
        assert ex.__file__.startswith(__import__("os").getcwd()), ex.__file__
        for spec in ex.all_exercises():
            if isinstance(spec, KernelExercise):
                assert spec.hidden_cpu_shapes == () and spec.hidden_gpu_shapes == (), spec.key
            else:
                assert spec.model.__qualname__.startswith("visible_answers"), spec.key
        print("clean", len(ex.all_exercises()))
    """)
    assert probe.returncode == 0 and "clean" in probe.stdout, probe.stderr[-2000:]
    instructor_hidden = [s for s in exercises.all_exercises() if isinstance(s, KernelExercise) and s.hidden_cpu_shapes]
    assert instructor_hidden      # what the edition empties is really there in the instructor's copy


def test_the_edition_s_grader_passes_honest_work_and_fails_wrong_work(built):
    probe = _run_in(built, """
        import grader
        dev = grader.setup()
        import torch, triton, triton.language as tl

        @triton.jit
        def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

        def add(x, y):
            out = torch.empty_like(x)
            add_kernel[(triton.cdiv(x.numel(), 256),)](x, y, out, x.numel(), BLOCK=256)
            return out

        grader.check("day1.vector_add", add)
        grader.check_prediction("day3.gemm_intensity", lambda M, N, K, s: 2 * M * N * K / ((M * K + K * N + M * N) * s))
        try:
            grader.check_prediction("day3.gemm_intensity", lambda M, N, K, s: 2 * M * N * K / ((M * K + K * N) * s))
        except grader.CheckFailed as e:
            print("refused:", e)
    """)
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert "OK: vector add" in probe.stdout and "OK: arithmetic intensity" in probe.stdout, probe.stdout
    assert "refused: arithmetic intensity" in probe.stdout, probe.stdout


def test_the_edition_s_own_test_command_runs_the_lectures(built):
    dry = subprocess.run(["make", "-n", "test", "OS_NAME=Linux", f"VENV={built / '.venv'}"], cwd=built,
                         capture_output=True, text=True, timeout=60)
    assert "pytest course --nbval-lax" in dry.stdout and "tests" not in dry.stdout.split("pytest")[-1]
    lecture = "course/day1/01_what_is_a_kernel.ipynb"
    run = subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "-p", "no:cacheprovider",
                          "-q", lecture], cwd=built, capture_output=True, text=True, timeout=900,
                         env=dict(os.environ, PYTHONPATH=str(built)))
    assert run.returncode == 0, run.stdout[-3000:]


def test_the_command_refuses_a_folder_that_is_not_empty(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert cli.main(["student-edition", str(tmp_path)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
