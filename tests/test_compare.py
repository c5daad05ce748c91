"""Mismatch messages: what differs, where, by how much, and a hint."""
import math

import torch

from grader.compare import describe_mismatch


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


def test_nan_where_a_value_was_expected_is_called_unwritten():
    e = torch.ones(10)
    g = e.clone()
    g[7:] = math.nan
    msg = describe_mismatch("op", g, e, 1e-5, 1e-5)
    assert "3 elements were never written" in msg and "(7,)" in msg


def test_nan_in_both_is_fine():
    e = torch.tensor([1.0, math.nan])
    assert describe_mismatch("op", e.clone(), e, 1e-5, 1e-5) is None


def test_shape_dtype_type_mistakes_are_named():
    e = torch.ones(3, 4)
    assert "got shape (4, 3)" in describe_mismatch("op", torch.ones(4, 3), e, 0, 0)
    assert "got dtype float16" in describe_mismatch("op", e.half(), e, 0, 0)
    assert "got NoneType" in describe_mismatch("op", None, e, 0, 0)
