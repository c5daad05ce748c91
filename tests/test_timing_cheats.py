"""Cells that pass the submission rules and try to do less work in timed runs than their result shows.

Found by a red-team pass on the timed-run checks (each timed run gets new inputs and a few, chosen at
random, are checked): each file in tests/timing_cheats/ is a cell a student could submit. The rules let
them through, so the run-time defences must stop them.
"""
import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

import grader
from conftest import DEVICE, on_gpu_only, timed_runs
from grader.pipeline import code_rules
from grader.student import integrity, serve

CELLS = Path(__file__).parent / "timing_cheats"


def cell(name):
    """A cell of tests/timing_cheats/, checked against the submission rules, then run as a module."""
    path = CELLS / f"{name}.py"
    source = path.read_text()
    assert code_rules.check_cell(source, code_rules.NotebookFacts(modules=code_rules.imported_names([source]))).problems == [], name
    spec = importlib.util.spec_from_file_location(f"timing_cheat_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_result_computed_only_when_the_grader_looks_at_it_is_refused(tmp_path):
    lazy = cell("lazy_list")
    with pytest.raises(grader.CheckFailed, match="returned a Later where a tensor was expected"):
        grader.check("day1.vector_add", lazy.add)
    with pytest.raises(grader.CheckFailed, match="returned a Later where a tensor was expected"):
        timed_runs("day1.vector_add", lazy.add, (3000,))
    # the kernel's side of a graded case hands nothing over
    serve.kernel_case(lazy.add, "day1.vector_add", [1000], "float32", DEVICE.torch_device, 5, None, False,
                      str(tmp_path), "r")
    result = json.loads((tmp_path / "r.json").read_text())
    assert not result["ok"] and "where a tensor was expected" in result["message"], result


def test_a_backward_finished_by_a_saved_tensor_hook_when_checked_is_refused():
    lazy = cell("lazy_backward")
    try:
        with pytest.raises(grader.CheckFailed, match="saved-tensor hook"):
            timed_runs("day2.rmsnorm_backward", lazy.rmsnorm, (5, 96))
        with pytest.raises(grader.CheckFailed, match="saved-tensor hook"):
            grader.check("day2.rmsnorm_backward", lazy.rmsnorm)
    finally:
        lazy.hooks.close()  # the cell left its hook installed for good
    # the same backward without its hook is judged on its work: the timed runs get unfilled gradients
    with pytest.raises(grader.CheckFailed, match="timed run 1"):
        timed_runs("day2.rmsnorm_backward", lazy.rmsnorm, (5, 96))


def test_event_hooks_are_refused_by_the_rules_and_at_grading_time():
    for source in ("import sys\nsys.monitoring.use_tool_id(4, 'x')", "from sys import monitoring",
                   "import sys as s\ns.monitoring.set_events(4, 1)", "from sys import settrace"):
        assert code_rules.check_cell(source, code_rules.NotebookFacts(modules=code_rules.imported_names([source]))).problems, source
    integrity.no_event_hooks()
    sys.setprofile(lambda *a: None)
    try:
        with pytest.raises(integrity.TamperingDetected, match="trace or profile function"):
            integrity.no_event_hooks()
    finally:
        sys.setprofile(None)
    if hasattr(sys, "monitoring"):  # Python 3.12+
        sys.monitoring.use_tool_id(4, "a notebook's tool")
        try:
            with pytest.raises(integrity.TamperingDetected, match="a notebook's tool"):
                integrity.no_event_hooks()
        finally:
            sys.monitoring.free_tool_id(4)


def _timed(fn, tmp_path):
    """What the grader's clock says of fn's timed calls: {"ok": True} or {"ok": False, "message": why}."""
    from clock import time_with_the_clock
    measured, handed = time_with_the_clock(fn, tmp_path)
    if not handed["ok"]:
        return handed
    return {"ok": "error" not in measured, "message": measured.get("error", "")}


@on_gpu_only
def test_a_function_that_leaves_another_stream_current_gets_no_time(tmp_path):
    result = _timed(cell("stream_switch").add, tmp_path)
    assert not result["ok"] and "changed the current CUDA stream" in result["message"], result
    torch.cuda.set_stream(torch.cuda.default_stream())


@on_gpu_only
def test_a_function_honest_only_on_its_first_call_with_new_tensors_gets_no_time(tmp_path):
    # The profiled run is one of the timed runs, on their tensors, at a random point among them.
    result = _timed(cell("first_call_honest").add, tmp_path)
    # the guard watches each timed call, and one more runs under the profiler: either says so
    assert not result["ok"] and ("not its Triton kernels" in result["message"]
                                or "computed with PyTorch" in result["message"]), result


def test_a_function_honest_only_on_its_first_call_with_new_tensors_gets_no_time_from_the_clock(tmp_path):
    # On any device: the grader's clock reuses its input tensors across batches, and the guard
    # watches every timed call.
    result = _timed(cell("first_call_honest").add, tmp_path)
    assert not result["ok"] and "computed with PyTorch" in result["message"], result
