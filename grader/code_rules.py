"""Rules for the code a student submits, checked before grading (by `course-grader sanitize`).

Test cells run in the same Python process as the student's cells, so a student's cell could rebind
`grader.check`, swap `torch.cuda.Event` for a fake, or patch a module through `sys.modules`, and the
test cells that run after it would call the fakes. The grader's run-time integrity checks catch
replaced timers and checkers that it knows of; these rules stop the rest before any code runs. A
submitted cell that breaks them is not run at grading: its code is replaced by a `raise` that says
why, so the student sees the reason in the feedback. Shell commands and most IPython magics are
dropped (with a comment) instead: they are common in scratch cells, and grading never needs them.

None of this is needed to write a kernel. The rules, in the words the student sees:
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

# Calls and names that reach around the language: running strings as code, setting attributes by
# name, reading or writing a module's namespace.
FORBIDDEN_NAMES = frozenset({"exec", "eval", "compile", "__import__", "setattr", "delattr", "globals", "vars",
                             "__builtins__", "get_ipython"})
# Modules whose only use in a notebook cell would be to patch, introspect or escape the process.
FORBIDDEN_MODULES = frozenset({"builtins", "importlib", "ctypes", "gc", "inspect", "unittest", "subprocess",
                               "multiprocessing", "threading", "signal", "pty"})
# `sys` attributes that reach other modules or hook execution.
FORBIDDEN_SYS = frozenset({"modules", "settrace", "setprofile", "_getframe", "meta_path", "path_hooks",
                           "addaudithook"})
ALLOWED_DUNDERS = frozenset({"__init__", "__name__", "__qualname__", "__doc__", "__class__"})
# Modules a notebook uses under these names even where the cell that imports them is not checked.
KNOWN_MODULES = frozenset({"grader", "torch", "triton", "tl", "F", "nn", "np", "math", "time", "os", "sys"})
# Magics that only time or configure plotting; their code is checked like a cell's.
ALLOWED_MAGICS = frozenset({"time", "timeit", "matplotlib"})


@dataclass
class Verdict:
    problems: list = field(default_factory=list)   # rules broken: the cell is not run
    dropped: list = field(default_factory=list)    # shell commands and magics removed

    @property
    def clean(self) -> bool:
        return not self.problems and not self.dropped


def _python_of(source: str) -> str:
    """The cell as IPython would run it: magics and `!` commands become get_ipython() calls."""
    from IPython.core.inputtransformer2 import TransformerManager
    return TransformerManager().transform_cell(source)


def _root(node):
    """The name at the root of an attribute chain (`torch` in `torch.cuda.Event`), or None."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _chain(node) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # pragma: no cover
        return "an attribute"


def _magic_call(node):
    """('line'|'cell'|'system', name, code) for a get_ipython().run_*_magic / system call, else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Call) and isinstance(node.func.value.func, ast.Name)
            and node.func.value.func.id == "get_ipython"):
        return None
    args = [a.value if isinstance(a, ast.Constant) else None for a in node.args]
    kind = node.func.attr
    if kind == "run_line_magic" and len(args) >= 2:
        return "line", args[0], args[1]
    if kind == "run_cell_magic" and len(args) >= 3:
        return "cell", args[0], args[2]
    return "system", kind, None


def imported_names(sources) -> set:
    """Names bound to modules (or things imported from them) by import statements in these cells."""
    names = set(KNOWN_MODULES)
    for source in sources:
        try:
            tree = ast.parse(_python_of(source))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def check_cell(source: str, modules: set = KNOWN_MODULES) -> Verdict:
    """Which rules a student's cell breaks; `modules` are the notebook's imported names."""
    verdict = Verdict()
    try:
        tree = ast.parse(_python_of(source))
    except SyntaxError:
        return verdict  # it fails when run, like any cell with a syntax error: no rule is needed
    _check_tree(tree, modules, verdict)
    return verdict


def _check_tree(tree, modules, verdict):
    problems = verdict.problems
    magic_nodes = set()
    for node in ast.walk(tree):
        magic = _magic_call(node)
        if magic is None:
            continue
        magic_nodes.add(id(node.func.value.func))
        kind, name, code = magic
        if kind != "system" and name in ALLOWED_MAGICS and isinstance(code, str):
            try:
                _check_tree(ast.parse(_python_of(code)), modules, verdict)
            except SyntaxError:
                pass
        elif kind == "system":
            verdict.dropped.append("a shell command")
        else:
            verdict.dropped.append(f"the magic %{name}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES and id(node) not in magic_nodes:
            problems.append(f"uses {node.id}")
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("__") and node.attr not in ALLOWED_DUNDERS:
                problems.append(f"reaches into {node.attr}")
            root = _root(node)
            if root == "sys" and node.attr in FORBIDDEN_SYS:
                problems.append(f"uses sys.{node.attr}")
            elif root in modules and node.attr.startswith("_") and not node.attr.startswith("__"):
                problems.append(f"uses the private {_chain(node)}")
            if isinstance(node.ctx, (ast.Store, ast.Del)) and root in modules:
                problems.append(f"{'assigns' if isinstance(node.ctx, ast.Store) else 'deletes'} "
                                f"{_chain(node)}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for mod in mods:
                parts = mod.split(".")
                if parts[0] in FORBIDDEN_MODULES or (mod != "__future__" and any(p.startswith("_") for p in parts)):
                    problems.append(f"imports {mod}")
            for alias in node.names:
                bound = (alias.asname or alias.name).split(".")[0]
                if bound == "grader" and not (isinstance(node, ast.Import) and alias.name == "grader"):
                    problems.append("binds the name grader to something else")
        elif isinstance(node, ast.Name) and node.id == "grader" and isinstance(node.ctx, (ast.Store, ast.Del)):
            problems.append("rebinds the name grader")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == "grader":
            problems.append("rebinds the name grader")
        elif isinstance(node, ast.Global) and "grader" in node.names:
            problems.append("rebinds the name grader")
    # One mention of each problem, in the order found.
    verdict.problems = list(dict.fromkeys(problems))
    verdict.dropped = list(dict.fromkeys(verdict.dropped))


RULES = ("Submitted cells may not change the grader, PyTorch, Triton or any imported module (no "
         "assignments to their attributes, no `sys.modules`, no private `_` attributes), may not run "
         "strings as code (`exec`, `eval`, `__import__`, `setattr`, `globals`) and may not import "
         "builtins, importlib, inspect, gc, ctypes, unittest, subprocess or threading. Shell commands "
         "and magics other than %time, %timeit and %matplotlib are removed before grading.")


def neutralize(source: str, modules: set) -> tuple:
    """(source to grade, list of what was done) for one student cell."""
    verdict = check_cell(source, modules)
    if verdict.problems:
        why = "; ".join(verdict.problems)
        return (f"# This cell was not run at grading: it {why}.\n# {RULES}\n"
                f"raise RuntimeError({('This cell was not run at grading: it ' + why)!r})\n"), \
            [f"breaks the submission rules ({why}): not run"]
    if verdict.dropped:
        first = source.lstrip()
        if first.startswith("%%") and not first[2:].startswith(tuple(ALLOWED_MAGICS)):
            # a cell magic (%%bash, %%writefile, ...): its whole body belongs to it
            return "\n".join(f"# removed before grading: {line}" for line in source.splitlines()), \
                [f"{', '.join(verdict.dropped)} removed"]
        kept = []
        for line in source.splitlines():
            stripped = line.lstrip()
            if stripped.startswith(("!", "%")) and not any(stripped.lstrip("%").startswith(m)
                                                          for m in ALLOWED_MAGICS):
                kept.append(f"# removed before grading: {stripped}")
            else:
                kept.append(line)
        return "\n".join(kept), [f"{', '.join(verdict.dropped)} removed"]
    return source, []
