"""`course-grader doctor` finds what a grading machine lacks and says how to fix it."""
import os
import sys

from grader.pipeline import doctor
from conftest import REPO, on_cpu_only


def _by_prefix(findings, prefix):
    return next(f for f in findings if f.what.startswith(prefix))


def test_a_ready_environment_passes_its_software_checks(monkeypatch):
    monkeypatch.setenv("PATH", os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]))
    findings = doctor.check(REPO)
    for prefix in ("torch ", "triton ", "nbgrader ", "nbgrader config", "released assignments", "alembic",
                   "kernel 'python3'"):
        assert _by_prefix(findings, prefix).ok, _by_prefix(findings, prefix).line()


@on_cpu_only
def test_no_gpu_is_a_finding_with_a_fix():
    gpu = _by_prefix(doctor.check(REPO), "no CUDA GPU")
    assert not gpu.ok and "--gpus all" in gpu.fix


def test_a_missing_alembic_says_which_folder_to_put_on_path(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    finding = _by_prefix(doctor.check(REPO), "alembic")
    assert not finding.ok and os.path.dirname(sys.executable) in finding.fix


def test_outside_a_container_it_warns(monkeypatch):
    monkeypatch.delenv("GRADER_IN_CONTAINER", raising=False)
    assert "open to student code" in _by_prefix(doctor.check(REPO), "not in the grading container").what


def test_it_says_whether_student_kernels_are_sandboxed():
    from grader.pipeline import sandbox
    finding = _by_prefix(doctor.check(REPO), "student kernels")
    why_not = sandbox.unavailable()
    assert (why_not is None and "a user of its own" in finding.what) or (why_not and why_not in finding.what)
