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
FORBIDDEN_NAMES = frozenset({"exec", "eval", "compile", "__import__", "setattr", "delattr", "getattr", "globals",
                             "vars", "locals", "__builtins__", "get_ipython"})
# Modules whose only use in a notebook cell would be to patch, introspect or escape the process (or, for
# threads, to run PyTorch where the grader's per-thread watcher does not look). Their names may not be
# used either: the Colab install cell, which is not checked, binds some of them.
FORBIDDEN_MODULES = frozenset({"builtins", "importlib", "ctypes", "gc", "inspect", "unittest", "subprocess",
                               "multiprocessing", "threading", "concurrent", "asyncio", "signal", "pty"})
# What a student's cell may use of the grader: its public functions (grader.__all__), not its modules.
GRADER_API = frozenset({"setup", "current", "Device", "check", "check_speed", "check_prediction",
                        "check_prediction_on_gpu", "report_speed", "credit", "grading", "bench", "CheckFailed",
                        "GPURequired"})
# The only objects whose attributes a student's code sets: an autograd.Function's ctx and its own objects.
SETTABLE_ROOTS = frozenset({"ctx", "self"})
# PyTorch's switches that a kernel's author may set (TF32, reduced-precision reductions). They change
# only what runs in the student's own process: the graded baseline is timed in the grading checker's.
SETTABLE_FLAGS = ("torch.backends.",)
# `sys` attributes that reach other modules or hook execution.
FORBIDDEN_SYS = frozenset({"modules", "settrace", "setprofile", "_getframe", "meta_path", "path_hooks",
                           "addaudithook",
                           # frames and tracebacks: a way up to the grader's local variables
                           "f_back", "f_locals", "f_globals", "tb_frame", "tb_next", "gi_frame", "cr_frame",
                           "ag_frame", "exc_info", "exception"})
# Not a rule: taking data out of PyTorch (`.numpy()`, `.tolist()`, a debugging print). While a graded
# call runs, the grader's guard sees every way out (grader/guard.py) and refuses the answer; outside
# it, a student's own print of a result harms nothing.
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


def _is_plain_getattr(node) -> bool:
    """`getattr(obj, "name")` or `getattr(obj, "name", default)` with a public name written out: the same
    as reading `obj.name`, which the other rules check (Liger-Kernel's helpers look up Triton's
    functions this way). A name built at run time, or a private or dunder one, stays refused."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
            and len(node.args) in (2, 3) and not node.keywords):
        return False
    name = node.args[1]
    if not (isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.isidentifier()
            and not name.value.startswith("_")):
        return False
    return _root(node.args[0]) != "grader" or name.value in GRADER_API


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


def _parses(code: str) -> bool:
    try:
        ast.parse(_python_of(code))
        return True
    except SyntaxError:
        return False


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
        # Not Python, but IPython may still run it: `time exec(...)` is the %time magic (automagic).
        verdict.problems.append("does not parse as Python")
        return verdict
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
        # A timing magic is kept only when what it runs is plain Python that passes the rules: its
        # options (`-n1 -r1 ...`) and a %%timeit setup line are code that would otherwise go unchecked.
        setup = node.args[1].value if kind == "cell" and isinstance(node.args[1], ast.Constant) else ""
        if kind != "system" and name in ALLOWED_MAGICS and isinstance(code, str) and _parses(code) \
                and (not setup.strip() or (name == "matplotlib")):
            _check_tree(ast.parse(_python_of(code)), modules, verdict)
        elif kind == "system":
            verdict.dropped.append("a shell command")
        else:
            verdict.dropped.append(f"the magic %{name}")

    plain_getattr = {id(node.func) for node in ast.walk(tree) if _is_plain_getattr(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES and id(node) not in magic_nodes \
                and id(node) not in plain_getattr:
            problems.append(f"uses {node.id}")
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_MODULES:
            problems.append(f"uses {node.id}")
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("__") and node.attr not in ALLOWED_DUNDERS:
                problems.append(f"reaches into {node.attr}")
            root = _root(node)
            if node.attr in FORBIDDEN_SYS or node.attr == "sys":
                problems.append(f"uses {_chain(node)}")
            elif node.attr.startswith("_") and not node.attr.startswith("__"):
                problems.append(f"uses the private {_chain(node)}")
            if isinstance(node.value, ast.Name) and node.value.id == "grader" and node.attr not in GRADER_API:
                problems.append(f"uses {_chain(node)}, which is not part of the grader's public functions")
            if isinstance(node.ctx, (ast.Store, ast.Del)) and root not in SETTABLE_ROOTS \
                    and not (isinstance(node.ctx, ast.Store) and _chain(node).startswith(SETTABLE_FLAGS)):
                problems.append(f"{'assigns' if isinstance(node.ctx, ast.Store) else 'deletes'} "
                                f"{_chain(node)}")
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)) \
                and (isinstance(node.value, ast.Attribute) or _root(node) in modules) \
                and _root(node) not in SETTABLE_ROOTS:
            problems.append(f"{'assigns' if isinstance(node.ctx, ast.Store) else 'deletes'} {_chain(node)}")
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
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "grader" \
                        and (node.module != "grader" or alias.name not in GRADER_API):
                    problems.append(f"imports {alias.name} from {node.module}, which is not part of the grader's "
                                    f"public functions")
            if isinstance(node, ast.Import) and any(a.name.startswith("grader.") for a in node.names):
                problems.append("imports a module of the grader")
        elif isinstance(node, ast.Name) and node.id == "grader" and isinstance(node.ctx, (ast.Store, ast.Del)):
            problems.append("rebinds the name grader")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == "grader":
            problems.append("rebinds the name grader")
        elif isinstance(node, ast.Global) and "grader" in node.names:
            problems.append("rebinds the name grader")
    # One mention of each problem, in the order found.
    verdict.problems = list(dict.fromkeys(problems))
    verdict.dropped = list(dict.fromkeys(verdict.dropped))


RULES = ("Submitted cells may not change the grader, PyTorch, Triton or any other object they did not "
         "create (attributes may be set only on `ctx`, `self` and PyTorch's `torch.backends` switches; no "
         "`sys.modules`, no private `_` attributes), may use only the grader's public functions "
         "(`grader.check`, `grader.setup`, ...), may not run strings as code or reach names by a string "
         "built at run time (`exec`, `eval`, `__import__`, `setattr`, `globals`; `getattr(obj, \"name\")` "
         "with the name written out is fine) and may not use builtins, importlib, inspect, gc, ctypes, "
         "unittest, subprocess, threads or other processes. Shell commands and magics other than %time, "
         "%timeit and %matplotlib (without options) are removed before grading.")


# The paragraph every exercise notebook's introduction ends with (tests/test_code_rules.py checks it).
GRADING_NOTE = ("**How this notebook is graded.** The graded cells do not run in your notebook: the grader's own "
                "process makes new random inputs (hidden shapes and cases included), has your notebook call "
                "your function on them, and checks every result itself. Cells you hand in must keep these "
                "rules; a cell that breaks one is not run, and your feedback says which rule. " + RULES)


def neutralize(source: str, modules: set) -> tuple:
    """(source to grade, list of what was done) for one student cell."""
    verdict = check_cell(source, modules)
    if verdict.problems:
        why = "; ".join(verdict.problems)
        return (f"# This cell was not run at grading: it {why}.\n# {RULES}\n"
                f"raise RuntimeError({('This cell was not run at grading: it ' + why)!r})\n"), \
            [f"breaks the submission rules ({why}): not run"]
    if verdict.dropped:
        if source.lstrip().startswith("%%"):
            # a cell magic (%%bash, %%writefile, %%timeit with a setup line, ...): its body belongs to it
            return "\n".join(f"# removed before grading: {line}" for line in source.splitlines()), \
                [f"{', '.join(verdict.dropped)} removed"]
        kept = []
        for line in source.splitlines():
            stripped = line.lstrip()
            # a line magic or shell line stays only if, alone, it is an allowed magic that passes the rules
            if stripped.startswith(("!", "%")) and not check_cell(stripped, modules).clean:
                kept.append(f"# removed before grading: {stripped}")
            else:
                kept.append(line)
        return "\n".join(kept), [f"{', '.join(verdict.dropped)} removed"]
    return source, []
