"""A test cell refuses to grade when a student's earlier cell replaced the tools it relies on."""
import os
import time

import pytest
import torch

import grader
from grader.student.integrity import TamperingDetected
import kernels
from conftest import REPO


def test_genuine_tools_pass():
    grader.check("day1.vector_add", kernels.add)


@pytest.mark.parametrize("target, name", [
    (time, "perf_counter"),
    (torch, "isclose"),
    (torch.cuda, "synchronize"),
    (torch.cuda.Event, "elapsed_time"),
])
def test_replaced_tool_is_detected(monkeypatch, target, name):
    monkeypatch.setattr(target, name, lambda *a, **k: 0.0)
    with pytest.raises(TamperingDetected, match="replaced"):
        grader.check("day1.vector_add", kernels.add)


def test_replaced_event_class_is_detected(monkeypatch):
    class FakeEvent:
        def __init__(self, **kw):
            pass
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    with pytest.raises(TamperingDetected):
        grader.check_speed("day1.vector_add", kernels.add)


def test_replaced_checker_function_is_detected(monkeypatch):
    from grader.student import checks
    monkeypatch.setattr(checks, "run_student", lambda *a, **k: None)
    with pytest.raises(TamperingDetected, match="run_student"):
        checks.check("day1.vector_add", kernels.add)


def test_at_grading_time_the_graders_modules_are_sealed_against_a_cell_that_reaches_them():
    # The red team reached grader.student.checks by routes the submission rules then missed and swapped
    # run_student (which runs the guard) for a function that computed with PyTorch: 3/3 for a wrong
    # answer. At grading time setup() seals every grader module, however a cell reaches it.
    import subprocess
    import sys
    code = """
import grader
grader.setup(quiet=True)
import grader.student.checks as checks, grader.student.serve as serve, grader.exercises as exercises
for module, name in ((checks, "run_student"), (serve, "kernel_case"), (exercises, "get"), (grader, "check")):
    for change in (lambda: setattr(module, name, print), lambda: delattr(module, name)):
        try:
            change()
        except AttributeError as e:
            assert "belongs to the grader" in str(e), e
        else:
            raise SystemExit(f"{module.__name__}.{name} could be changed")
import os
pid = os.getpid()
for way in (lambda: open("/proc/self/mem", "rb"), lambda: open(f"/proc/{pid}/task/{pid}/mem", "rb"),
            lambda: os.open("mem", os.O_RDONLY, dir_fd=os.open(f"/proc/{pid}", os.O_RDONLY)),
            lambda: open(os.path.join("/proc", "self", "..", str(pid), "mem"), "rb"),
            lambda: os.open("self/mem", os.O_RDONLY, dir_fd=os.open("/proc", os.O_RDONLY)),
            lambda: os.open("proc/self/mem", os.O_RDONLY, dir_fd=os.open("/", os.O_RDONLY))):
    try:
        way()
    except PermissionError as e:
        assert "memory" in str(e), e
    else:
        raise SystemExit("the process's memory could be opened")
assert open("/proc/self/status").read() and open(os.devnull).read() == ""    # other files as usual
assert exercises.get("day1.vector_add").hidden_cpu_shapes == () == exercises.get("day1.vector_add").hidden_gpu_shapes
spec = exercises.get("day1.predict_add")
try:
    spec.model(1, 1)
except RuntimeError as e:
    assert "checker's alone" in str(e)
else:
    raise SystemExit("a formula is still in the kernel")
import grader.timing   # a submodule imported later is still recorded on its package
assert grader.timing.__name__ == "grader.timing"
print("sealed")
"""
    env = {**os.environ, "NBGRADER_EXECUTION": "autograde", "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO)
    assert done.stdout.strip().endswith("sealed"), done.stdout + done.stderr
    # Outside grading nothing is sealed: a student's own experiments and the tests may patch freely
    env.pop("NBGRADER_EXECUTION")
    done = subprocess.run([sys.executable, "-c", "import grader; grader.setup(quiet=True)\n"
                           "import grader.student.checks as c\nc.run_student = print\nprint('free')"],
                          env=env, capture_output=True, text=True, cwd=REPO)
    assert done.stdout.strip() == "free", done.stderr
