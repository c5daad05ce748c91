"""A test cell refuses to grade when a student's earlier cell replaced the tools it relies on."""
import time

import pytest
import torch

import grader
from grader.student.integrity import TamperingDetected
import kernels


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
