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


def occurs_as_code(source: str, snippet: str) -> bool:
    """Whether `snippet` occurs in `source` somewhere other than inside a comment (no `#` before it on its
    line). A variant whose edit lands only in a comment runs the answer unchanged: a wrong variant that
    edited a comment once graded right, and so tested nothing."""
    start = source.find(snippet)
    while start >= 0:
        if "#" not in source[source.rfind("\n", 0, start) + 1:start]:
            return True
        start = source.find(snippet, start + 1)
    return False


def is_answer_cell(cell) -> bool:
    """A cell the student writes in (nbgrader's `solution`): in the solutions, the reference's code."""
    return bool(cell.metadata.get("nbgrader", {}).get("solution")) and cell.cell_type == "code"


def run_code_cells(path: Path, namespace: dict | None = None, replace: dict | None = None,
                   examples: bool = True) -> dict:
    """Execute every code cell except the graded test cells; return the resulting namespace.

    `replace` maps snippets of code to what they become, to run a deliberately broken variant of a
    notebook (each snippet must occur in it as code, not only in a comment). `examples=False` leaves out
    the worked examples: the code cells after the first answer that are neither answers nor tests (they
    run the answer on a small case and print; a check needs only the definitions). In the interpreter
    they cost as much as a check.
    """
    nb = nbformat.read(path, as_version=4)
    namespace = {"__name__": "__notebook__"} if namespace is None else namespace
    sources = [c.source for c in nb.cells]
    for old, new in (replace or {}).items():
        hits = [i for i, src in enumerate(sources) if old in src]
        if not any(occurs_as_code(sources[i], old) for i in hits):
            raise ValueError(f"{path}: no cell contains {old!r}" + (" outside a comment" if hits else ""))
        for i in hits:
            sources[i] = sources[i].replace(old, new)
    answered = False
    for i, (cell, source) in enumerate(zip(nb.cells, sources)):
        if cell.cell_type != "code" or is_test_cell(cell) or not source.strip():
            continue
        answer = is_answer_cell(cell)
        answered = answered or answer
        if not examples and answered and not answer:
            continue
        filename = f"<{Path(path).stem}-cell-{i}>"
        lines = [line + "\n" for line in source.splitlines()]
        linecache.cache[filename] = (len(source), None, lines, filename)
        exec(compile(source, filename, "exec"), namespace)
    return namespace


def graded_calls(path: Path) -> list:
    """(check function, exercise key, student function name) for every call in the test cells."""
    nb = nbformat.read(path, as_version=4)
    calls = []
    for cell in nb.cells:
        if is_test_cell(cell):
            calls += CHECK_CALL.findall(cell.source)
    return calls


GRADING_NOTE_START = "**How this notebook is graded.**"


def state_grading_note(path: Path) -> bool:
    """Write code_rules.GRADING_NOTE into the notebook's introduction, in place of the paragraph that
    starts like it (the rules are written once, in code_rules; the release brings every exercise up to
    date). True if the notebook changed."""
    import textwrap
    from grader.pipeline.code_rules import GRADING_NOTE
    nb = nbformat.read(path, as_version=4)
    note = "\n".join(textwrap.wrap(GRADING_NOTE, 100, break_on_hyphens=False, break_long_words=False))
    for cell in nb.cells:
        start = cell.source.find(GRADING_NOTE_START)
        if cell.cell_type != "markdown" or start < 0:
            continue
        end = cell.source.find("\n\n", start)
        end = len(cell.source) if end < 0 else end
        source = cell.source[:start] + note + cell.source[end:]
        if source == cell.source:
            return False
        cell.source = source
        nbformat.write(nb, path)
        return True
    return False
