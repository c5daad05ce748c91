"""Which checks a graded test cell asks for, read from its source (the instructor's, at grading time)."""
from __future__ import annotations

import ast
from dataclasses import dataclass

# The grader functions a graded cell may call, and the keywords each accepts.
KINDS = {"check": {"hidden"}, "check_speed": {"points"}, "check_prediction": set(),
         "check_prediction_on_gpu": set()}


@dataclass(frozen=True)
class GradedCall:
    """One `grader.<kind>("<key>", <function>, ...)` statement of a graded cell."""
    kind: str
    key: str
    function: str          # the expression naming the student's function, as written ("add")
    hidden: bool = False
    points: float = 1.0


def _function_expression(node) -> str | None:
    # A name or a dotted name only: it is evaluated in the student's kernel to find the function.
    probe = node
    while isinstance(probe, ast.Attribute):
        probe = probe.value
    return ast.unparse(node) if isinstance(probe, ast.Name) else None


def _call(statement) -> GradedCall | None:
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return None
    call = statement.value
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "grader"
            and func.attr in KINDS and len(call.args) == 2):
        return None
    key, function = call.args
    if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
        return None
    function = _function_expression(function)
    options = {}
    for keyword in call.keywords:
        if keyword.arg not in KINDS[func.attr] or not isinstance(keyword.value, ast.Constant):
            return None
        options[keyword.arg] = keyword.value.value
    if function is None:
        return None
    return GradedCall(func.attr, key.value, function, hidden=bool(options.get("hidden", False)),
                      points=float(options.get("points", 1.0)))


def graded_calls(source: str) -> list[GradedCall] | None:
    """The checks a cell makes, in order, or None if the cell is anything but such calls."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    calls = [_call(statement) for statement in tree.body]
    if not calls or any(c is None for c in calls):
        return None
    return calls
