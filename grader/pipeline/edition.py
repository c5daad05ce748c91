"""The student edition: the repository students clone (and Colab installs from), built from this one.

It holds the lectures, the released exercises and the grader, and leaves out what would give answers
away: `solutions/` (the reference solutions and the hidden tests), the hidden cases of every exercise,
and the prediction exercises' formulas, replaced by their answers on the visible cases (the formula is
what the student writes). Grading always uses the instructor's own repository, so nothing that is graded
depends on what the edition leaves out. `course-grader student-edition OUT` builds it.
"""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

from grader.course import REPO, Course

# What the edition holds, as it is here (the grader's exercise data and the Makefile are rewritten).
KEPT = ("course", "exercises", "grader", "pyproject.toml", "environment.yml", "Dockerfile", "Makefile",
        ".gitignore", ".dockerignore",
        # the measurements the lectures and the exercises' targets cite
        "docs/benchmarks.md", "docs/benchmarks-h100.md")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info")
HIDDEN_FIELDS = ("hidden_cpu_shapes", "hidden_gpu_shapes")
# Makefile targets that need what the edition leaves out (solutions/, the test suite).
INSTRUCTOR_TARGETS = ("test-fast", "exercises", "bench", "lab-instructor")
GENERATED = "# Generated for the student edition by `course-grader student-edition`: edit the instructor's copy.\n"


def build(out: Path, repo: Path = REPO) -> Path:
    """Write the student edition into `out` (which must not exist or be empty); returns it."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty: give a new folder for the student edition")
    out.mkdir(parents=True, exist_ok=True)
    for name in KEPT:
        source = repo / name
        if source.is_dir():
            shutil.copytree(source, out / name, ignore=IGNORED)
        elif source.exists():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, out / name)
    for module in sorted((out / "grader" / "exercises").glob("day*.py")):
        module.write_text(GENERATED + without_answers(module.read_text(), f"grader.exercises.{module.stem}"))
    (out / "Makefile").write_text(student_makefile((repo / "Makefile").read_text()))
    (out / "README.md").write_text(student_readme(repo))
    return out


def without_answers(source: str, module_name: str) -> str:
    """An exercise module's source with no hidden case and no prediction formula.

    Every hidden-shape field becomes empty; a prediction exercise's `model` becomes a table of its
    answers on the visible cases (computed here from the instructor's module); private functions that
    nothing refers to any more (the formulas), with the comments just above them, are dropped. The rest
    of the source is kept as written, comments included.
    """
    import importlib
    specs = {spec.key: spec for spec in importlib.import_module(module_name).EXERCISES}
    edits, tables = [], False
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in HIDDEN_FIELDS:
            edits.append((node.value, "()"))
        elif isinstance(node, ast.Dict):
            edits += [(v, "()") for k, v in zip(node.keys, node.values)
                      if isinstance(k, ast.Constant) and k.value in HIDDEN_FIELDS]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "PredictionExercise":
            key = next(ast.literal_eval(k.value) for k in node.keywords if k.arg == "key")
            model = next(k.value for k in node.keywords if k.arg == "model")
            spec = specs[key]
            edits.append((model, f"visible_answers({ {tuple(c): spec.model(*c) for c in spec.cases}!r})"))
            tables = True
    source = _spliced(source, edits)
    if tables:
        spec_import = "from grader.exercises.spec import "
        source = source.replace(spec_import, spec_import + "visible_answers, ", 1)
    return _without_unused_functions(source)


def _spliced(source: str, edits: list) -> str:
    """source with each (node, text) edit's node replaced by text, by the node's position."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line.encode()))
    data = source.encode()
    spans = sorted(((starts[n.lineno - 1] + n.col_offset, starts[n.end_lineno - 1] + n.end_col_offset, text)
                    for n, text in edits), reverse=True)
    for begin, end, text in spans:
        data = data[:begin] + text.encode() + data[end:]
    return data.decode()


def _without_unused_functions(source: str) -> str:
    while True:
        tree = ast.parse(source)
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        unused = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("_")
                  and n.name not in used]
        if not unused:
            return source
        lines = source.splitlines(keepends=True)
        drop = set()
        for node in unused:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            while first > 0 and lines[first - 1].lstrip().startswith("#"):
                first -= 1        # its comment says what the formula is
            last = node.end_lineno
            while last < len(lines) and not lines[last].strip():
                last += 1         # and the blank lines after it
            drop.update(range(first, last))
        source = "".join(line for i, line in enumerate(lines) if i not in drop)


def student_makefile(text: str) -> str:
    """The instructor's Makefile without the targets that need solutions/ or the test suite; `make test`
    runs every lecture notebook top to bottom."""
    blocks = text.split("\n\n")
    kept = []
    for block in blocks:
        lines = [line for line in block.splitlines() if line and not line.startswith("#")]
        target = lines[0].split(":")[0] if lines and ":" in lines[0] and not lines[0].startswith("\t") else None
        if target in INSTRUCTOR_TARGETS:
            continue
        if target == "test":
            block = ("# Every lecture notebook, run top to bottom (nbval).\n"
                     "test: install-test\n\t$(BIN)/python -m pytest course --nbval-lax --nbval-current-env "
                     "-p no:cacheprovider")
        kept.append(block)
    text = "\n\n".join(kept)
    text = "\n".join(line for line in text.splitlines()
                     if not any(f'@echo "make {t} ' in line for t in INSTRUCTOR_TARGETS))
    return GENERATED + text + ("\n" if not text.endswith("\n") else "")


def student_readme(repo: Path) -> str:
    from grader.pipeline.code_rules import GRADING_NOTE
    days = Course.of(repo).days()
    return f"""# GPU programming for AI, in Triton: the course

```bash
make lab    # installs the course into .venv and opens it in JupyterLab (Linux; elsewhere use Colab)
make test   # runs every lecture notebook top to bottom
```

Without a CUDA GPU, Triton kernels run on the CPU in Triton's interpreter: slowly and at small sizes,
but every lesson and every correctness check runs. Speed is measured only on a CUDA GPU.

## How to work

1. Read and run the lectures in `course/day1/`, in order.
2. Open the day's exercises in `exercises/day1/` ({", ".join(days)} in all), replace each
   `raise NotImplementedError()` with your code and run the test cells. A failed check says which
   shape, which element, expected against what you gave, and what to look at.
3. Hand in the notebooks as your instructor asks. They are graded on more cases than the ones you see
   here, and on a GPU also for speed.

## Grading rules

{GRADING_NOTE}

This is the student edition of the course: the instructor's repository, which builds it
(`course-grader student-edition`), also holds the reference solutions and the hidden tests.
"""
