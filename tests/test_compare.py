"""Mismatch messages: what differs, where, by how much, and a hint."""
import math

import torch

from grader.compare import CheckFailed, describe_mismatch, is_poison, poison_


def test_equal_within_tolerance_is_none():
    e = torch.randn(5, 7)
    assert describe_mismatch("op", e + 1e-7, e, 1e-5, 1e-5) is None


def test_message_names_count_index_values_and_hint():
    e = torch.zeros(4, 5)
    g = e.clone()
    g[2, 3] = 1.5
    msg = describe_mismatch("op", g, e, 1e-5, 1e-5, hint="look at the mask")
    assert "1 of 20 elements differ" in msg
    assert "(2, 3)" in msg and "expected 0" in msg and "got 1.5" in msg
    assert "hint: look at the mask" in msg


def test_poison_left_in_place_is_called_unwritten():
    e = torch.ones(10)
    g = e.clone()
    poison_(g[7:])
    msg = describe_mismatch("op", g, e, 1e-5, 1e-5)
    assert "3 elements were never written" in msg and "(7,)" in msg
    assert "inf or NaN" not in msg


def test_a_computed_nan_or_inf_is_called_an_overflow():
    e = torch.ones(10)
    g = e.clone()
    g[2] = math.inf
    g[5] = math.nan
    msg = describe_mismatch("op", g, e, 1e-5, 1e-5)
    assert "2 elements are inf or NaN" in msg and "overflow" in msg and "never written" not in msg


def test_poison_is_recognised_in_every_float_dtype():
    for dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
        t = poison_(torch.empty(4, dtype=dtype))
        assert torch.isnan(t).all() and is_poison(t).all(), dtype
        assert not is_poison(torch.full((4,), math.nan, dtype=dtype)).any(), dtype


def test_nan_in_both_is_fine():
    e = torch.tensor([1.0, math.nan])
    assert describe_mismatch("op", e.clone(), e, 1e-5, 1e-5) is None


def test_shape_dtype_type_mistakes_are_named():
    e = torch.ones(3, 4)
    assert "got shape (4, 3)" in describe_mismatch("op", torch.ones(4, 3), e, 0, 0)
    assert "got dtype float16" in describe_mismatch("op", e.half(), e, 0, 0)
    assert "got NoneType" in describe_mismatch("op", None, e, 0, 0)



def test_a_failed_check_shows_its_message_not_the_graders_frames(capsys):
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    result = shell.run_cell("import grader\ngrader.check('day1.vector_add', lambda x, y: x)")
    assert isinstance(result.error_in_exec, CheckFailed)
    shown = capsys.readouterr().out
    assert "CheckFailed" in shown and "did not launch a Triton kernel" in shown, shown
    assert "Traceback" not in shown and "checks.py" not in shown, shown
