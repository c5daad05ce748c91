"""Run the code of a notebook outside Jupyter, e.g. to benchmark the reference solutions.

Triton reads a kernel's source with `inspect.getsource`, which needs the code in `linecache`; each
cell is registered there under its own name, as IPython does.
"""
from __future__ import annotations

import linecache
import re
from pathlib import Path

import nbformat

CHECK_CALL = re.compile(r"grader\.(check|check_speed|check_prediction|check_prediction_on_gpu)"
                        r"\(\s*\"([\w.]+)\"\s*,\s*(\w+)")


def is_test_cell(cell) -> bool:
    return bool(cell.metadata.get("nbgrader", {}).get("grade")) and cell.cell_type == "code"


def run_code_cells(path: Path, namespace: dict | None = None) -> dict:
    """Execute every code cell except the graded test cells; return the resulting namespace."""
    nb = nbformat.read(path, as_version=4)
    namespace = {"__name__": "__notebook__"} if namespace is None else namespace
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or is_test_cell(cell) or not cell.source.strip():
            continue
        filename = f"<{Path(path).stem}-cell-{i}>"
        lines = [line + "\n" for line in cell.source.splitlines()]
        linecache.cache[filename] = (len(cell.source), None, lines, filename)
        exec(compile(cell.source, filename, "exec"), namespace)
    return namespace


def graded_calls(path: Path) -> list:
    """(check function, exercise key, student function name) for every call in the test cells."""
    nb = nbformat.read(path, as_version=4)
    calls = []
    for cell in nb.cells:
        if is_test_cell(cell):
            calls += CHECK_CALL.findall(cell.source)
    return calls
