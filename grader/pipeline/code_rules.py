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
from collections import Counter
import functools
import importlib
import re
import types
from dataclasses import dataclass, field

import grader

# Calls and names that reach around the language: running strings as code, setting attributes by
# name, reading or writing a module's namespace.
FORBIDDEN_NAMES = frozenset({"exec", "eval", "compile", "__import__", "setattr", "delattr", "getattr", "globals",
                             "vars", "locals", "__builtins__", "get_ipython", "InteractiveShell"})
# Those of them that are also reached as another module's attribute (`IPython.get_ipython`,
# `builtins.exec`); `compile` is left out here, since `re.compile` is everyday code.
ESCAPES = FORBIDDEN_NAMES - {"compile", "getattr"}
# Modules whose only use in a notebook cell would be to patch, introspect or escape the process (or, for
# threads, to run PyTorch where the grader's per-thread watcher does not look). Their names may not be
# used either: the Colab install cell, which is not checked, binds some of them.
FORBIDDEN_MODULES = frozenset({"builtins", "importlib", "ctypes", "gc", "inspect", "unittest", "subprocess",
                               "multiprocessing", "threading", "concurrent", "asyncio", "signal", "pty",
                               # modules that run code given as a string, a file or serialized bytes
                               "pickle", "marshal", "shelve", "dill", "cloudpickle", "code", "codeop", "runpy",
                               "timeit", "cProfile", "profile", "pdb", "bdb", "trace", "doctest", "pydoc",
                               "zipimport", "pkgutil", "imp", "site", "cffi",
                               # modules that start a program by another route (a red team started a
                               # detached Python through webbrowser's "browser" command)
                               "webbrowser", "_posixsubprocess",
                               # one that sets attributes on any object it is handed (a parser's namespace)
                               "argparse", "optparse",
                               # libraries that evaluate expressions or load objects named in strings
                               "jinja2", "sympy", "yaml", "numexpr",
                               # NumPy's ways to raw memory: ctypes, and views with any strides
                               "ctypeslib", "stride_tricks",
                               # Jupyter's machinery: its shell runs strings as code (`ex`, `run_cell`) and
                               # its threads run what they are handed (the IOPub thread's `schedule`), where
                               # the grader's watch of the kernel's thread does not look
                               "ipykernel", "jupyter_client", "zmq", "tornado", "traitlets", "comm"})
# Submodules that import a module named by a string (logging.config's configurators resolve any dotted
# name, a grader module included), refused by their dotted name however they are reached.
# IPython's shell (and the application that holds it) runs strings as code past these rules; IPython.display
# stays allowed.
FORBIDDEN_SUBMODULES = {"logging.config": "it imports modules named by strings",
                        **dict.fromkeys(("IPython.core", "IPython.terminal", "IPython.kernel", "IPython.InteractiveShell",
                                         "IPython.Application"), "Jupyter's shell runs strings as code")}
# torch.library's functions whose first argument names a namespace or an operator: written out, so that
# the rule on PyTorch's own namespaces below can read it ("at" + "en" was not)
LIBRARY_NAMERS = frozenset({"Library", "define", "impl", "custom_op", "triton_op", "register_kernel", "register_fake",
                            "register_autograd", "register_torch_dispatch", "register_vmap", "impl_abstract"})
# Attribute and imported names that run code or start processes by another route: a process (os.system,
# os.exec*), native code compiled at run time, code objects built by hand, serialized objects that run
# code when loaded (torch.load with weights_only=False, NumPy's allow_pickle), packages of code.
FORBIDDEN_CALLS = frozenset({"system", "popen", "fork", "forkpty", "execv", "execve", "execl", "execle", "execlp",
                             "execlpe", "execvp", "execvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv",
                             "spawnve", "spawnvp", "spawnvpe", "posix_spawn", "posix_spawnp", "startfile",
                             "cpp_extension", "load_inline", "CodeType", "FunctionType", "hub",
                             # copies attributes (and a __dict__) onto any object: setattr by another name
                             "update_wrapper",
                             # string.Formatter().get_field("0.__globals__", ...): attributes by a string
                             "get_field",
                             # a Formatter subclass is handed every object its format string's path reaches
                             "Formatter",
                             # evaluate string annotations in a module's globals
                             "get_type_hints", "singledispatch", "singledispatchmethod"})
# (a metaclass's __eq__ ran when the grader compared a returned object's type: a red team's did the work there)
FORBIDDEN_KEYWORDS = frozenset({"weights_only", "allow_pickle", "metaclass"})
# operator's ways to reach attributes by name: allowed, as getattr is, with public names written out.
NAMED_GETTERS = frozenset({"attrgetter", "methodcaller"})
# What a student's cell may use of the grader: its public functions (grader.__all__), not its modules.
GRADER_API = frozenset(grader.__all__)
# The only objects whose attributes a student's code sets: an autograd.Function's ctx and its own objects.
SETTABLE_ROOTS = frozenset({"ctx", "self", "cls"})   # cls: a classmethod's own class (a kernel cache on it)
# Attributes of Triton's own objects that its documented idioms set or call: a tensor descriptor's block
# shape, set by an autotune config's pre_hook (Triton's fused-attention tutorial), and a compiled
# kernel's `_init_handles()`, called before reading its register count (Triton's softmax tutorial).
# Neither name belongs to PyTorch or the grader, so setting or calling it changes nothing of theirs.
TRITON_IDIOMS = frozenset({"block_shape", "_init_handles"})
# PyTorch's switches that a kernel's author may set (TF32, reduced-precision reductions). They change
# only what runs in the student's own process: the graded baseline is timed in the grading checker's.
SETTABLE_FLAGS = ("torch.backends.",)
# `sys` attributes that reach other modules or hook execution.
FORBIDDEN_SYS = frozenset({"modules", "settrace", "setprofile", "_getframe", "meta_path", "path_hooks",
                           "addaudithook",
                           # Python 3.12's event hooks: a callback sees every return value and yield (the
                           # grader's choice of checked runs, the guard's record), as a tracer would
                           "monitoring",
                           # frames and tracebacks: a way up to the grader's local variables
                           "f_back", "f_locals", "f_globals", "f_builtins", "f_code", "tb_frame", "tb_next",
                           "gi_frame", "cr_frame", "ag_frame", "gi_code", "cr_code", "exc_info", "exception",
                           # functions that hand back the caller's frames (logging's, traceback's)
                           "currentframe", "walk_stack", "walk_tb"})
# Protocols by which another library reads a tensor's memory or an object answers for one (NumPy's array
# interface, DLPack, PyTorch's own overrides), and the hooks that make any attribute lookup run code:
# a submission may neither define them nor name them, since each hands PyTorch's data to code the
# grader does not watch. Classes built at run time (`type(name, bases, namespace)`) are refused too.
PROTOCOL_NAMES = frozenset({"__array__", "__array_interface__", "__array_struct__", "__array_function__",
                            "__array_ufunc__", "__array_priority__", "__cuda_array_interface__", "__dlpack__",
                            "__dlpack_device__", "to_dlpack", "from_dlpack", "__torch_function__",
                            "__torch_dispatch__", "__getattr__", "__getattribute__", "__module__",
                            "__init_subclass__", "__set_name__", "__class_getitem__", "__prepare__"})
# Attribute names that reach a class's bases, where the grader's watch on torch.Tensor would be skipped.
FORBIDDEN_ATTRIBUTES = frozenset({"mro"})
# PyTorch's own operator namespaces: `torch.library` may add operators of the student's own, not
# replace these.
TORCH_NAMESPACES = ("aten", "prims", "prim", "_")
# Not a rule: taking data out of PyTorch (`.numpy()`, `.tolist()`, a debugging print). While a graded
# call runs, the grader's guard sees every way out (grader/student/guard.py) and refuses the answer; outside
# it, a student's own print of a result harms nothing.
ALLOWED_DUNDERS = frozenset({"__init__", "__post_init__", "__name__", "__qualname__", "__doc__", "__class__",
                             "__version__"})
# Names a module or class of the student's own may bind: what `import *` exports, a class's fixed
# attributes, its version. Each only describes the student's own code.
BINDABLE_DUNDERS = frozenset({"__all__", "__slots__", "__version__"})
# Modules a notebook uses under these names even where the cell that imports them is not checked.
KNOWN_MODULES = frozenset({"grader", "torch", "triton", "tl", "F", "nn", "np", "math", "time", "os", "sys"})
# Forbidden modules whose names are also everyday words (a helper `profile`, a `signal` tensor, a `code`
# string). Importing the module stays refused; the name itself is the notebook's own wherever no import
# in the notebook binds it, since the only cell that runs unchecked (the Colab install) binds importlib,
# os, subprocess and sys alone.
EVERYDAY_WORDS = frozenset({"code", "profile", "signal", "site", "trace", "comm"})
# Triton's language modules, whose `load(pointer, mask, other)` takes a third positional argument that
# is no pickle switch: exempt from the `.load` rule below when the notebook binds the name to them alone.
TRITON_LANGUAGES = frozenset({"triton.language", "triton.experimental.gluon.language"})
# A namedtuple's public API, named with a `_` so as not to clash with its fields. No grader module
# defines these names; on a foreign object they only read fields or make a new tuple.
NAMEDTUPLE_API = frozenset({"_asdict", "_replace", "_fields", "_make"})
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
            and not name.value.startswith("_") and name.value not in FORBIDDEN_SYS | FORBIDDEN_ATTRIBUTES | {"sys"}):
        return False
    return _root(node.args[0]) != "grader" or name.value in GRADER_API


class _GetattrAsAttribute(ast.NodeTransformer):
    """Writes each plain getattr (_is_plain_getattr) as the attribute it reads: `getattr(os, "system")`
    as `os.system`, `getattr(x, "n", d)` as `x.n or d`. Every rule that looks at an attribute's name or
    chain (forbidden calls, modules, the grader's public functions, a method through its class, `.load`)
    then sees the same code however it is spelled: a red team ran `getattr(os, "system")(...)` and
    `getattr(functools, "update_wrapper")` past rules that read `os.system` alone. (hasattr is left
    alone: it returns a bool, never the attribute.)"""

    def visit_Call(self, node):
        self.generic_visit(node)      # inner getattrs first: getattr(getattr(a, "b"), "c") is a.b.c
        if not _is_plain_getattr(node):
            return node
        attribute = ast.copy_location(ast.Attribute(value=node.args[0], attr=node.args[1].value, ctx=ast.Load()),
                                      node)
        if len(node.args) == 3:      # the default is code too: checked as the other value of an `or`
            return ast.copy_location(ast.BoolOp(op=ast.Or(), values=[attribute, node.args[2]]), node)
        return attribute


def _parse(source: str):
    """A cell's syntax tree as the rules read it: IPython's magics as calls, plain getattrs as attributes."""
    return ast.fix_missing_locations(_GetattrAsAttribute().visit(ast.parse(_python_of(source))))


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


def _trees(sources):
    """The syntax tree of each cell that parses (one that does not is refused by check_cell), and of the
    code its magics run (`%time x = ...` binds `x` in the notebook as a plain line would)."""
    for source in sources:
        try:
            tree = ast.parse(_python_of(source))
        except SyntaxError:
            continue
        yield tree
        yield from _magic_trees(tree)


def _magic_trees(tree):
    for node in ast.walk(tree):
        magic = _magic_call(node)
        if magic is not None and magic[0] != "system" and isinstance(magic[2], str):
            yield from _trees([magic[2]])


def imported_names(sources) -> set:
    """Names bound to modules (or things imported from them) by import statements in these cells."""
    names = set(KNOWN_MODULES)
    for tree in _trees(sources):
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def plain_imports(sources) -> dict:
    """{name: module} for the names that the notebook binds, in every cell, only by importing one and the
    same module (`import triton.language as tl`, `from triton import language as tl`, `import logging`),
    and by nothing else (no assignment, parameter, definition, loop or other import): names that are that
    module wherever a cell uses them. A rule that trusts a spelling (`tl.load`, `logging.Formatter`) asks
    here, for the whole notebook, as _torch_is_torch does for torch: `import numpy as tl`, or
    `import string as logging` in any other cell, would otherwise make the spelling lie."""
    modules, other = {}, set()
    for tree in _trees(sources):
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    bound = (a.asname or a.name).split(".")[0]
                    if isinstance(node, ast.ImportFrom):
                        module = None if node.level or not node.module else f"{node.module}.{a.name}"
                    else:
                        module = a.name if a.asname else bound    # `import a.b` binds a, to the module a
                    if module is None or modules.setdefault(bound, module) != module:
                        other.add(bound)
            elif not isinstance(node, ast.alias):     # an import's names are read above
                other.update([node.id] if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load)
                             else _bound_names(node))
    return {name: module for name, module in modules.items() if name not in other}


def _plain_classes(trees) -> set:
    """The notebook's plain classes: no decorator but @dataclass, no metaclass or __new__ (any of which
    could make `Plan()` return a module), no base but object or another such class, and a name that
    nothing but its class statements binds (`def Plan(): return some_module` after it would)."""
    defined = {node.name: node for tree in trees for node in tree.body if isinstance(node, ast.ClassDef)}
    statements = Counter(node.name for tree in trees for node in ast.walk(tree) if isinstance(node, ast.ClassDef))
    rebound = {name for tree in trees for node in ast.walk(tree) if not isinstance(node, ast.ClassDef)
               for name in _bound_names(node)} | \
              {node.id for tree in trees for node in ast.walk(tree)
               if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load)} | \
              {(a.asname or a.name).split(".")[0] for tree in trees for node in ast.walk(tree)
               if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names} | \
              {name for name, n in statements.items() if n > 1}    # a second class statement, anywhere
    dataclass_ok = _dataclass_names_are_dataclasses(trees)
    classes, changed = set(), True
    while changed:
        changed = False
        for name, node in defined.items():
            if name not in classes and name not in rebound \
                    and all(dataclass_ok and _is_dataclass(d) for d in node.decorator_list) \
                    and not node.keywords \
                    and not any(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) and b.name == "__new__"
                                for b in node.body) \
                    and all(isinstance(b, ast.Name) and (b.id == "object" and "object" not in rebound
                                                         or b.id in classes) for b in node.bases):
                classes.add(name)
                changed = True
    return classes


def own_objects(sources) -> frozenset:
    """Names that the notebook binds only, at the top level of its cells, to a new instance of a class
    it defines (`PLAN = Plan()`), and never to anything else anywhere (no other assignment, parameter,
    import, loop or `global`): objects of its own, whose attributes it may set like `self`'s."""
    trees = list(_trees(sources))
    classes = _plain_classes(trees)
    made, other = set(), set()
    for tree in trees:
        instances = set()   # the targets of `NAME = OwnClass(...)` at the top level
        for statement in tree.body:
            if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Call) \
                    and isinstance(statement.value.func, ast.Name) and statement.value.func.id in classes \
                    and all(isinstance(t, ast.Name) for t in statement.targets):
                instances.update(id(t) for t in statement.targets)
                made.update(t.id for t in statement.targets)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and id(node) not in instances:
                other.add(node.id)
            elif isinstance(node, ast.arg):
                other.add(node.arg)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                other.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                other.add(node.name)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                other.update(node.names)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                other.add(node.name)
            elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
                other.add(node.name)
            elif isinstance(node, ast.MatchMapping) and node.rest:
                other.add(node.rest)
    return frozenset(made - other)


# A tensor's autograd flags, which a student's own test code sets (`x.requires_grad = True`,
# `x.grad = None`) on tensors it made: allowed on a name bound only to a new tensor (own_tensors).
TENSOR_FLAGS = frozenset({"requires_grad", "grad"})
# torch's functions that return a new tensor, and tensor methods that return one (`.cuda()`, `.half()`).
TENSOR_MAKERS = frozenset({"randn", "rand", "randint", "randn_like", "rand_like", "randint_like", "randperm",
                           "zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like",
                           "full_like", "tensor", "arange", "linspace", "eye"})
TENSOR_METHODS = frozenset({"to", "cuda", "cpu", "float", "half", "bfloat16", "double", "contiguous", "clone",
                            "detach", "requires_grad_",
                            # in-place initialisers, which return the tensor they fill
                            "normal_", "uniform_", "fill_", "zero_"})


def _is_number(node) -> bool:
    """`0.5`, `-2.3`: a number written out."""
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _makes_tensor(value) -> bool:
    """`torch.randn(...)`, `torch.zeros(...).cuda().half()`: a new tensor, whatever the arguments; and
    arithmetic on new tensors and numbers written out (`-2.3 + 0.5 * torch.randn(...)`, Triton's
    layer-norm test), which PyTorch's operators answer with a new tensor. An operand of any other kind
    (a name, an object of the notebook's class) could answer with anything, a module included."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
            and value.func.attr in TENSOR_METHODS:
        value = value.func.value
    if isinstance(value, ast.BinOp) or isinstance(value, ast.UnaryOp) \
            and isinstance(value.op, (ast.USub, ast.UAdd, ast.Invert)):    # `not` gives a bool
        operands = [value.left, value.right] if isinstance(value, ast.BinOp) else [value.operand]
        return any(_makes_tensor(o) for o in operands) and all(_makes_tensor(o) or _is_number(o) for o in operands)
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
        and isinstance(value.func.value, ast.Name) and value.func.value.id == "torch" \
        and value.func.attr in TENSOR_MAKERS


def _in_scope(nodes):
    """Every node of a scope's statements, without the bodies of the functions, lambdas and classes
    defined there (their own scopes); a comprehension is walked whole (what it binds counts here too,
    which only ever refuses more)."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # decorators, defaults and annotations are evaluated here (a walrus in one binds here)
            a = node.args
            stack += node.decorator_list + a.defaults + [d for d in a.kw_defaults if d] + \
                [x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]
                 if x is not None and x.annotation is not None] + ([node.returns] if node.returns else [])
        elif isinstance(node, ast.ClassDef):
            stack += node.decorator_list + node.bases + [k.value for k in node.keywords]
        elif isinstance(node, ast.Lambda):
            stack += node.args.defaults + [d for d in node.args.kw_defaults if d]
        else:
            stack += ast.iter_child_nodes(node)


def _scope_made(nodes, params=(), makes=_makes_tensor) -> tuple:
    """(names bound in a scope, those bound there only by `name = <what makes(value) accepts>`: a new
    tensor, or an instance of the notebook's own plain class)."""
    nodes = list(_in_scope(nodes))
    made = {id(t) for n in nodes if isinstance(n, ast.Assign) and makes(n.value)
            and all(isinstance(t, ast.Name) for t in n.targets) for t in n.targets}
    bound, other = set(params), set(params)
    for n in nodes:
        names = [n.id] if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) else \
            [(a.asname or a.name).split(".")[0] for a in n.names] if isinstance(n, (ast.Import, ast.ImportFrom)) \
            else list(_bound_names(n))
        bound.update(names)
        if id(n) not in made:
            other.update(names)
    return bound, bound - other


def _torch_is_torch(trees) -> bool:
    """The name torch is bound by `import torch` and nothing else, in every cell."""
    for tree in trees:
        for n in ast.walk(tree):
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                if any((a.asname or a.name).split(".")[0] == "torch" and not (isinstance(n, ast.Import)
                       and a.name.split(".")[0] == "torch" and a.asname is None) for a in n.names):
                    return False
            elif "torch" in ([n.id] if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
                             else list(_bound_names(n))):
                return False
    return True


def own_tensors(sources) -> frozenset | None:
    """Names that the notebook's top level binds only to a new tensor (`x = torch.randn(...)`), in every
    cell, and no function declares global: tensors of its own, whose autograd flags it may set. None
    where the notebook binds the name torch to anything but the module: then no name is a new tensor."""
    trees = list(_trees(sources))
    if not _torch_is_torch(trees):
        return None
    bound, tensors = set(), set()
    for tree in trees:
        b, t = _scope_made(tree.body)
        bound |= b
        tensors |= t
    declared = {name for tree in trees for n in ast.walk(tree) if isinstance(n, (ast.Global, ast.Nonlocal))
                for name in n.names}
    rebound = {name for tree in trees for b, t in [_scope_made(tree.body)] for name in b - t}
    return frozenset(tensors - rebound - declared)


def _made_uses(tree, top_level: frozenset | None, makes=_makes_tensor) -> set:
    """The ast.Name nodes (ids) of a cell that name an object the notebook made (`makes`: a new tensor by
    default): bound in their own function only to such objects, or, where their function binds nothing
    of that name, in the one around it or at the top level (top_level: own_tensors, say)."""
    uses = set()
    # A name that a function declares nonlocal or global may be rebound there, out of its scope's sight.
    declared = {name for n in ast.walk(tree) if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names}

    def visit(nodes, scopes):
        for node in _in_scope(nodes):
            if isinstance(node, ast.Name):
                for bound, tensors in reversed(scopes):
                    if node.id in bound:
                        if node.id in tensors and node.id not in declared:
                            uses.add(id(node))
                        break
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                a = node.args
                params = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x]
                body = node.body if isinstance(node.body, list) else [node.body]
                visit(body, scopes + [_scope_made(body, params, makes)])
            elif isinstance(node, ast.ClassDef):
                visit(node.body, scopes + [(_scope_made(node.body)[0], set())])   # refused there: simpler

    if top_level is None or (makes is _makes_tensor and not _torch_is_torch([tree])):
        return uses
    visit(tree.body, [(set(_scope_made(tree.body, (), makes)[0]) | set(top_level), set(top_level))])
    return uses


def _dataclass_names_are_dataclasses(trees) -> bool:
    """`dataclass` and `dataclasses` are bound, if at all, only by `from dataclasses import dataclass` and
    `import dataclasses` (a notebook's own `def dataclass` could return anything)."""
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    bound = (a.asname or a.name).split(".")[0]
                    if bound in ("dataclass", "dataclasses") and not (
                            a.asname is None and (isinstance(node, ast.Import) and a.name == "dataclasses"
                                                  or isinstance(node, ast.ImportFrom) and node.module == "dataclasses"
                                                  and a.name == "dataclass")):
                        return False
            elif {"dataclass", "dataclasses"} & set([node.id] if isinstance(node, ast.Name)
                                                    and not isinstance(node.ctx, ast.Load) else _bound_names(node)):
                return False
    return True


def _is_dataclass(decorator) -> bool:
    """`@dataclass`, `@dataclasses.dataclass` or either called with options: it adds methods that set
    the instance's own fields, never a `__new__`."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return _chain(target) in ("dataclass", "dataclasses.dataclass")


def _method_selves(tree) -> set:
    """The `self` and `ctx` names (ids of their ast.Name nodes) that are a method's own first parameter:
    in a function written directly in a class body, whose first parameter has that name and which binds
    that name nowhere else (a closure inside the method sees the same object). Any other `self` (a
    variable, a plain function's parameter) may be bound to anything, a module included."""
    parents = {id(child): parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    functions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    selves = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Name) and node.id in SETTABLE_ROOTS):
            continue
        scope = parents.get(id(node))
        while scope is not None and not (isinstance(scope, functions) and _binds(scope, node.id)):
            scope = parents.get(id(scope))
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and isinstance(parents.get(id(scope)), ast.ClassDef) and _first_parameter(scope) == node.id \
                and _own_first_parameter(scope, parents[id(scope)]) \
                and not any(isinstance(n, ast.Name) and n.id == node.id and not isinstance(n.ctx, ast.Load)
                            or isinstance(n, (ast.Global, ast.Nonlocal)) and node.id in n.names
                            for n in ast.walk(scope)):
            selves.add(id(node))
    return selves


# An autograd.Function's static methods that autograd calls with its ctx.
CTX_METHODS = frozenset({"forward", "backward", "setup_context", "jvp", "vjp", "vmap"})


def _own_first_parameter(method, cls) -> bool:
    """Whether a method's first parameter can only be an object of the notebook's own: a plain method
    or a property's (called on an instance, or through its class with another method's own `self`), or
    an autograd.Function's static method that autograd calls with its ctx. A static method, or one behind
    another decorator, takes whatever it is called with, on an instance too (`P().put(torch.cuda, v)`)."""
    decorators = [_chain(d) for d in method.decorator_list]
    if decorators == ["classmethod"]:    # its class, or a subclass, however it is called
        return _first_parameter(method) == "cls"
    if _first_parameter(method) == "cls":
        return False
    if all(d == "property" or d.endswith((".setter", ".getter", ".deleter")) for d in decorators):
        return True
    return _is_ctx_method(method, cls)


def _is_ctx_method(method, cls) -> bool:
    """An autograd.Function's static method that autograd calls with its ctx (other decorators allowed,
    such as Liger-Kernel's `ensure_contiguous`). Called by hand, it would take any first argument: the
    rules refuse that call (_methods_reached_through_a_class)."""
    return "staticmethod" in [_chain(d) for d in method.decorator_list] and method.name in CTX_METHODS \
        and _first_parameter(method) == "ctx" and any(_chain(b).split(".")[-1] == "Function" for b in cls.bases)


def _required_positional(function) -> int:
    positional = function.args.posonlyargs + function.args.args
    return len(positional) - len(function.args.defaults)


def _first_parameter(function):
    positional = function.args.posonlyargs + function.args.args
    return positional[0].arg if positional else None


def _binds(function, name) -> bool:
    """Whether a function binds `name` itself (a parameter, or a name it assigns), as Python resolves it."""
    arguments = function.args
    parameters = arguments.posonlyargs + arguments.args + arguments.kwonlyargs + \
        [a for a in (arguments.vararg, arguments.kwarg) if a]
    return any(a.arg == name for a in parameters) or any(
        isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) for n in ast.walk(function))


def _acts_on_its_object(name, parents, methods) -> bool:
    """Whether this use of a method's own `self` or `ctx` is one that the rules allow only on the
    notebook's own object (the ast.Name nodes of _method_selves): setting or deleting its attributes, a
    store into one (`self.cache[k] = v`), a private attribute, a subscript of it, or handing it as the
    first argument of a method called through a class (`Base.put(self, v)`, `Base.__init__(self)`;
    `methods` are the notebook's method names). Reading a public attribute (`self.n`, `self.put(v)`),
    or handing it on otherwise (`dataclasses.fields(self)`, `return self`), the rules allow on any
    object, and a name it is handed to is no method's own."""
    node, parent = name, parents.get(id(name))
    if isinstance(parent, ast.Call):
        return bool(parent.args) and parent.args[0] is node and isinstance(parent.func, ast.Attribute) \
            and parent.func.attr in methods | {"__init__"}
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return True
    if not isinstance(parent, ast.Attribute):
        return False
    if parent.attr.startswith("_"):
        return True
    while isinstance(parent, (ast.Attribute, ast.Subscript)) and parent.value is node:
        if not isinstance(parent.ctx, ast.Load):
            return True
        node, parent = parent, parents.get(id(parent))
    return False


def _acting_classes(trees) -> set:
    """The notebook's classes that may not be used as values (`C = P`, `f(P)`, `for m in [P, Q]`), since
    a method of theirs, reached through the class under a name the rules cannot follow, would be called
    with any first argument (`C.put(torch.cuda, fake)`): those with a method, of their own or of a base
    of the notebook's, that acts on its own `self` or `ctx` (_acts_on_its_object). A class that only
    reads its object's public attributes (an Enum's members, a dataclass's fields with a property)
    does no more through a foreign object than code may do to it directly, and a dataclass's generated
    `__init__` is refused through a class by its own rule. Anything the rules cannot see through counts
    as acting: a base other than a library's class (a name, or public attributes of a name, that only
    imports or builtins bind: `enum.Enum`; `class Q(p.__class__)` inherits P's methods), a decorator but
    @dataclass, a metaclass, a name bound otherwise too."""
    # names bound by anything but an import or a class statement (`Base = p.__class__`)
    other = {n.id for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)} \
        | {name for tree in trees for n in ast.walk(tree) if not isinstance(n, (ast.ClassDef, ast.alias))
           for name in _bound_names(n)}
    dataclass_ok = _dataclass_names_are_dataclasses(trees)
    methods = {f.name for tree in trees for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
               for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    defined, acting = {}, set()
    for tree in trees:
        selves = _method_selves(tree)
        parents = {id(child): parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
        for c in ast.walk(tree):
            if not isinstance(c, ast.ClassDef):
                continue
            defined.setdefault(c.name, []).append(c)
            if c.name in other or c.keywords or not all(dataclass_ok and _is_dataclass(d) for d in c.decorator_list) \
                    or any(isinstance(n, ast.Name) and n.id in ("self", "ctx") and id(n) in selves
                           and _acts_on_its_object(n, parents, methods) for n in ast.walk(c)):
                acting.add(c.name)

    def library_class(base) -> bool:
        while isinstance(base, ast.Attribute) and not base.attr.startswith("_"):
            base = base.value
        return isinstance(base, ast.Name) and base.id not in other and base.id not in defined

    changed = True
    while changed:      # and those that inherit from one, or from what the rules cannot see through
        changed = False
        for name, statements in defined.items():
            if name not in acting and any(not (library_class(b) or isinstance(b, ast.Name) and b.id in defined
                                               and b.id not in other and b.id not in acting)
                                          for c in statements for b in c.bases):
                acting.add(name)
                changed = True
    return acting


def notebook_classes(sources) -> frozenset:
    """The classes the notebook defines, and as "Class.method" their methods whose first parameter is
    `self` or `ctx` (whose attributes such a method may set): what a cell may not call through a class."""
    trees = list(_trees(sources))
    # and as "Plan()" the plain ones (own_objects), whose instances a function may make and set like self
    found = {f"{name}()" for name in _plain_classes(trees)}
    # and as "Plan!" those whose methods act on the object they are called with (_acting_classes)
    found.update(f"{name}!" for name in _acting_classes(trees))
    for tree in trees:
        for c in ast.walk(tree):
            if isinstance(c, ast.ClassDef):
                found.add(c.name)
                found.update(f"{c.name}.{f.name}" for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                             and _first_parameter(f) in ("self", "ctx") and _own_first_parameter(f, c))
                # an autograd.Function's ctx method, with how many arguments a call must pass it
                found.update(f"{c.name}.{f.name}({_required_positional(f)})" for f in c.body
                             if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_ctx_method(f, c))
    return frozenset(found)


def _methods_reached_through_a_class(tree, classes: frozenset) -> list:
    """A method whose first parameter may have its attributes set (`def put(self, v): self.x = v`) called
    through its class with another first argument (`Plan.put(some_module, v)`, `type(p).put`,
    `p.__class__.put`, `getattr(Plan, "put")`, or the class under another name): that sets attributes
    of any object. Through an instance (`p.put(v)`, `self.put(v)`) it is the object's own, and so it is
    when called through a class with a method's own `self` (`Base.__init__(self)`, older code's super())."""
    found = {name for name in classes | notebook_classes([ast.unparse(tree)]) if not name.endswith("()")}
    acting = {name[:-1] for name in found if name.endswith("!")}
    found -= {f"{name}!" for name in acting}
    selves = _method_selves(tree)
    on_own_self = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args
                   and isinstance(n.args[0], ast.Name) and id(n.args[0]) in selves}
    settable = {name.split(".")[1].split("(")[0] for name in found if "." in name}
    ctx_methods = {}   # name -> the fewest positional arguments a call with a ctx of its own passes
    for name in found:
        if name.endswith(")"):
            method, required = name.split(".")[1][:-1].split("(")
            ctx_methods[method] = min(int(required), ctx_methods.get(method, int(required)))
    classes = {name for name in found if "." not in name}

    def a_class(node) -> bool:
        return (isinstance(node, ast.Name) and node.id in classes
                or isinstance(node, ast.Attribute) and node.attr == "__class__"
                or isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type")

    # Where a class may appear: called (`P()`), its attribute read (`P.x`), as a base, in isinstance or
    # issubclass, in an annotation. Anywhere else (`C = P`, `[P][0]`, `f(P)`, `return P`) it would reach
    # its methods under a name the rules cannot follow.
    parents = {id(child): parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    annotations = {id(n) for a in ast.walk(tree) for n in ast.walk(getattr(a, "annotation", None) or ast.Pass())
                   if isinstance(a, (ast.arg, ast.AnnAssign))} | \
                  {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.returns
                   for n in ast.walk(f.returns)}

    def placed_as_a_class(node) -> bool:
        parent = parents.get(id(node))
        return (isinstance(parent, ast.Call) and (parent.func is node or isinstance(parent.func, ast.Name)
                                                  and (parent.func.id in ("isinstance", "issubclass")
                                                       and node in parent.args[1:]
                                                       or parent.func.id == "super" and node in parent.args[:1]))
                or isinstance(parent, ast.Attribute) or isinstance(parent, ast.ClassDef)
                # `@CountCalls` on a def: the class called with the function
                or isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and node in parent.decorator_list
                # `type(p) is P`: `is` calls no method of either side (`==` calls the other's __eq__)
                or isinstance(parent, ast.Compare) and all(isinstance(op, (ast.Is, ast.IsNot)) for op in parent.ops)
                or isinstance(parent, ast.Tuple) and isinstance(parents.get(id(parent)), ast.Call)
                and parents[id(parent)].func is not parent
                and getattr(parents[id(parent)].func, "id", None) in ("isinstance", "issubclass")
                or id(node) in annotations)

    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in settable and a_class(node.value) \
                and id(node) not in on_own_self:
            problems.append(f"calls the method {node.attr} through its class (call it on an instance)")
        elif isinstance(node, ast.Call) and _chain(node.func).split(".")[-1] in NAMED_GETTERS \
                and any(isinstance(a, ast.Constant) and a.value in settable for a in node.args[:1]):
            problems.append(f"reaches the method {node.args[0].value} by name")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ctx_methods \
                and len(node.args) >= ctx_methods[node.func.attr] \
                and not (isinstance(node.func.value, ast.Call) and getattr(node.func.value.func, "id", None) == "super") \
                and id(node.func) not in on_own_self:
            problems.append(f"calls an autograd.Function's {node.func.attr} by hand (call .apply: autograd hands it its ctx)")
        elif isinstance(node, ast.Name) and node.id in acting and isinstance(node.ctx, ast.Load) \
                and not placed_as_a_class(node):
            problems.append(f"uses the class {node.id} as a value (its methods act on the object they are "
                            f"called with: make instances of it, or read its attributes)")
        elif acting and a_class(node) and not isinstance(node, ast.Name) and not placed_as_a_class(node) \
                and not isinstance(parents.get(id(node)), ast.FormattedValue):    # f"{type(p)}": its name
            # `T = type(p)`: any of the notebook's classes, reached through an instance
            problems.append(f"uses {_chain(node)} as a value (read its attributes: {_chain(node)}.__name__)")
    return problems


@functools.lru_cache(maxsize=None)
def _installed(name: str) -> bool:
    """Whether `name` is a module of Python or of an installed package, not a file next to the notebook:
    the search leaves out the working directory, where a notebook could have written one."""
    import importlib.machinery
    import os
    import sys
    if name in sys.builtin_module_names or name in ("grader", "__future__"):
        return True
    here = {"", ".", os.getcwd()}
    path = [p for p in sys.path if p not in here and os.path.abspath(p) != os.getcwd()]
    return importlib.machinery.PathFinder.find_spec(name, path) is not None


def _bound_names(node):
    """The names a statement binds other than by a plain `name = ...` (which ast.Name shows)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
    elif isinstance(node, ast.alias) and node.asname:
        yield node.asname
    elif isinstance(node, ast.arg):
        yield node.arg
    elif isinstance(node, ast.ExceptHandler) and node.name:
        yield node.name
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        yield from node.names
    elif type(node).__name__ in ("MatchAs", "MatchStar") and node.name:
        yield node.name
    elif type(node).__name__ == "MatchMapping" and node.rest:
        yield node.rest


def _super_of_own_class(node, classes) -> bool:
    """`super(Cls, self)` written inside a method of Cls, about its own first argument (older PyTorch
    code's `super(MyModule, self).__init__()`); any other two-argument super skips a class's methods."""
    if len(node.args) != 2 or not all(isinstance(a, ast.Name) for a in node.args):
        return False
    return (node.args[0].id, node.args[1].id) in classes


def _is_triton_switch(node) -> bool:
    """`os.environ["TRITON_..."] = ...`: Triton's documented switches (TRITON_INTERPRET to debug on the
    CPU, TRITON_PRINT_AUTOTUNING, ...), read by Triton alone."""
    key = node.slice
    return (isinstance(node.ctx, ast.Store) and _chain(node.value) == "os.environ"
            and isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.startswith("TRITON_"))


def _is_magic_target(node) -> bool:
    """`get_ipython().system` and the like: a shell line or magic, which is dropped, not refused."""
    value = node.value
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "get_ipython"


def _reaches_submodule(node) -> str | None:
    """The one of FORBIDDEN_SUBMODULES that an import or attribute chain goes through, else None."""
    if isinstance(node, ast.Attribute):
        names = [_chain(node)]
    elif isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        names = [f"{node.module}.{a.name}" for a in node.names] + [node.module or ""]
    return next((m for name in names for m in FORBIDDEN_SUBMODULES if name == m or name.startswith(m + ".")), None)


# Attribute names that attrgetter and methodcaller may not be handed, as an attribute may not be read
# by them: they are getattr under another name.
GETTER_REFUSED = PROTOCOL_NAMES | ESCAPES | FORBIDDEN_CALLS | FORBIDDEN_MODULES | FORBIDDEN_SYS | FORBIDDEN_ATTRIBUTES \
    | {"sys"}
# What a refusal adds where its word would not read as the student's code: the use refused, and the
# allowed way (keys: a name, ".name" for any attribute of that name, or an attribute chain or import
# written out in full).
_PROFILER = (" (the grader's own profiler session records which kernels your function runs, and a profiler "
             "of the notebook's own could disturb that record; time with triton.testing.do_bench or %timeit)")
EXPLAINED = {
    "eval": " (eval runs a string as code; a model's .eval(), with no arguments, is fine)",
    ".eval": " (other than as a model's .eval() with no arguments: an eval given code runs it)",
    "torch.profiler.profile": _PROFILER,
}


def _library_method_on_a_module(node, modules, plain: dict) -> bool:
    """`torch.nn.Module.train(torch.cuda)`: a method called through a class (a CamelCase name, however it
    is reached: `M = torch.nn.Module; M.train(...)` too) with a module as its `self`, which the method then
    changes as if it were an instance (Module.train sets `.training`; others register attributes). The
    CamelCase name may as well be a tensor (`W.to(torch.float32)`): what tells them apart is the argument,
    a module or an object of one (_names_a_module)."""
    parts = _chain(node.func).split(".")
    if not (isinstance(node.func, ast.Attribute) and node.args and len(parts) >= 2 and parts[-2][:1].isupper()):
        return False
    arg = _chain(node.args[0]).split(".")
    root = _root_name(node.args[0])
    return isinstance(node.args[0], (ast.Name, ast.Attribute)) and root is not None and root.id in modules \
        and _names_a_module(arg, plain)


# Libraries whose dotted names the rules may follow (the grader imports them anyway, and importing them
# runs nothing of a notebook's): those a kernel's code takes its dtypes from.
LOOKED_UP = ("torch", "triton", "numpy")


def _names_a_module(chain: list, plain) -> bool:
    """Whether a chain from an imported name (`torch.cuda`, `T.cuda` after `import torch as T`) is a
    module, rather than an object of one (`torch.float32`, a dtype; `tl.float32`). For torch, Triton and
    NumPy, where the notebook binds the root to one module alone (plain_imports), the chain's attributes
    are followed from the imported library (the import system's find_spec cannot tell: torch.backends.cudnn
    has no spec once imported). Any other chain is taken for a module if it is all lowercase."""
    module = plain.get(chain[0])
    if module is None or module.split(".")[0] not in LOOKED_UP:
        return all(part.islower() for part in chain)
    # From the library itself: `from torch import bfloat16` binds the name to "torch.bfloat16", a dtype
    path = module.split(".") + chain[1:]
    try:
        found = importlib.import_module(path[0])
        for name in path[1:]:
            found = getattr(found, name)
    except Exception:  # noqa: BLE001 - a name the library does not have, or not yet: taken for a module
        return True
    return isinstance(found, types.ModuleType)


def _is_triton_load(func, plain) -> bool:
    """`tl.load`, `triton.language.load`, `gl.load`: Triton's load, whose third positional argument is
    `other`, the value of masked-off elements. Only where the chain's root is bound, in the whole
    notebook, by an import of Triton alone (plain_imports): `import numpy as tl` makes `tl.load` NumPy's."""
    attributes = []
    while isinstance(func, ast.Attribute):     # names only: `tl.load`, not `f().load` or `x[0].load`
        attributes.insert(0, func.attr)
        func = func.value
    module = plain.get(func.id) if isinstance(func, ast.Name) else None
    return module is not None and ".".join([module] + attributes[:-1]) in TRITON_LANGUAGES


def _bindings_and_protocols(tree, modules=KNOWN_MODULES, plain=None) -> list:
    plain = plain or {}
    problems = []
    # `@functools.wraps(f)` / `@wraps(f)` written on a def: the only place wraps may appear
    decorating = {id(d.func) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for d in n.decorator_list if isinstance(d, ast.Call)
                  and (isinstance(d.func, ast.Name) and d.func.id == "wraps"
                       or isinstance(d.func, ast.Attribute) and d.func.attr == "wraps")}
    # (class name, first parameter) of every method, for the two-argument super() check
    # operator.attrgetter / methodcaller called directly (their names are checked below); passed
    # around or aliased, they would be getattr under another name
    called_getters = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    methods = {(c.name, f.args.args[0].arg) for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
               for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.args.args}
    # `model.eval()`: nn.Module's switch to inference, called with no arguments. Every eval that runs code
    # needs the code as an argument (builtins', pandas'); held in a name (`f = m.eval`), it is refused.
    module_eval = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                   and n.func.attr == "eval" and not n.args and not n.keywords}
    # `logging.Formatter`: it formats log records, as a Handler (allowed) sees them; string.Formatter, whose
    # subclasses are handed each object a format string reaches, stays refused. Only where the whole
    # notebook binds `logging` to the logging module alone (`import string as logging` anywhere would not).
    log_formatters = {id(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "Formatter"
                      and isinstance(n.value, ast.Name) and plain.get(n.value.id) == "logging"}
    # each imported name written out in full (`from torch.profiler import profile`: torch.profiler.profile)
    imported = {id(a): f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                for a in n.names}
    for node in ast.walk(tree):
        for name in _bound_names(node):
            if name in FORBIDDEN_NAMES or name in FORBIDDEN_MODULES and (name not in EVERYDAY_WORDS or name in modules):
                problems.append(f"rebinds the name {name}")
            elif name in PROTOCOL_NAMES:
                problems.append(f"defines {name}")
            elif name == "__class__":   # read, it names a type; defined, an object answers for another class
                problems.append("defines __class__ (an object that claims another class)")
        if isinstance(node, ast.Name) and node.id in PROTOCOL_NAMES:
            problems.append(f"uses {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in PROTOCOL_NAMES | ESCAPES | FORBIDDEN_CALLS \
                and not _is_magic_target(node) and id(node) not in module_eval | log_formatters:
            problems.append(f"uses {node.attr}" + EXPLAINED.get("." + node.attr, ""))
        elif isinstance(node, ast.Attribute) and node.attr == "path" and _root(node) == "sys":
            problems.append("uses sys.path")
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_MODULES:
            # torch.multiprocessing, numpy.ctypeslib, torch.profiler.profile, ...
            problems.append(f"uses {_chain(node)}" + EXPLAINED.get(_chain(node), ""))
        elif isinstance(node, ast.alias) and \
                set(node.name.split(".")) & (PROTOCOL_NAMES | ESCAPES | FORBIDDEN_CALLS | FORBIDDEN_MODULES):
            problems.append(f"imports {node.name}" + EXPLAINED.get(imported.get(id(node), node.name), ""))
        elif isinstance(node, ast.alias) and node.name in NAMED_GETTERS | {"wraps"} \
                and node.asname not in (None, node.name):
            problems.append(f"imports {node.name} under another name")
        elif isinstance(node, (ast.Import, ast.ImportFrom, ast.Attribute)) and _reaches_submodule(node):
            problems.append(f"uses {_reaches_submodule(node)} ({FORBIDDEN_SUBMODULES[_reaches_submodule(node)]})")
        elif isinstance(node, ast.alias) and node.name == "*":
            problems.append("imports every name of a module (`import *`), which rebinds names unseen: import "
                            "the names you use")
        elif (isinstance(node, ast.Name) and node.id == "wraps" or isinstance(node, ast.Attribute)
              and node.attr == "wraps") and id(node) not in decorating:
            # functools.wraps(f)(obj) copies f's attributes and __dict__ onto obj, any object: only
            # `@functools.wraps(f)` on a function defined there (the wrapper is that function) passes
            problems.append("uses wraps other than as the decorator of a function it defines")
        elif isinstance(node, ast.Name) and node.id.startswith("__") and node.id.endswith("__") \
                and not isinstance(node.ctx, ast.Load) and node.id not in BINDABLE_DUNDERS:
            problems.append(f"rebinds {node.id}")
        elif isinstance(node, ast.ImportFrom) and node.module == "sys" and any(a.name == "path" for a in node.names):
            problems.append("imports sys.path")
        elif isinstance(node, ast.keyword) and node.arg in FORBIDDEN_KEYWORDS:
            problems.append(f"uses {node.arg}=")
        elif isinstance(node, ast.Name) and node.id.startswith("__") and node.id.endswith("__") \
                and node.id not in ALLOWED_DUNDERS | BINDABLE_DUNDERS:
            problems.append(f"uses {node.id}")
        elif isinstance(node, ast.keyword) and node.arg in PROTOCOL_NAMES:
            problems.append(f"uses {node.arg}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in PROTOCOL_NAMES:
            problems.append(f"names {node.value}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value.startswith(("/proc/", "/dev/mem", "/dev/kmem")):
            problems.append(f"names {node.value} (the process's own memory)")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "type" and len(node.args) == 3:
                problems.append("builds a class with type(name, bases, namespace)")
            elif node.func.id == "super" and node.args and not _super_of_own_class(node, methods):
                problems.append("calls super() with arguments other than its own class and self")
        if isinstance(node, ast.Call) and _chain(node.func).split(".")[-1] in NAMED_GETTERS \
                and not all(isinstance(a, ast.Constant) and isinstance(a.value, str)
                            and all(part.isidentifier() and not part.startswith("_")
                                    and part not in GETTER_REFUSED for part in a.value.split("."))
                            for a in node.args[:1 if "methodcaller" in _chain(node.func) else None]):
            problems.append(f"uses {_chain(node.func)} with a name that is not a public one written out")
        elif isinstance(node, (ast.Name, ast.Attribute)) and id(node) not in called_getters \
                and (node.id if isinstance(node, ast.Name) else node.attr) in NAMED_GETTERS:
            problems.append(f"uses {_chain(node)} other than by calling it with a name written out")
        if isinstance(node, ast.Call) and "library" in _chain(node.func).split(".") and node.args \
                and _chain(node.func).split(".")[-1] in LIBRARY_NAMERS \
                and not (isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            problems.append(f"calls {_chain(node.func)} with a namespace or name not written out")
        if isinstance(node, ast.Call) and _chain(node.func).split(".")[-1] == "load" and len(node.args) >= 3 \
                and not _is_triton_load(node.func, plain):  # tl.load(p, m, 0.0)
            problems.append(f"calls {_chain(node.func)} with a third positional argument (allow_pickle, "
                            f"pickle_module: loading code)")
        if isinstance(node, ast.Call) and _library_method_on_a_module(node, modules, plain):
            problems.append(f"calls {_chain(node.func)}, a method of a library class, with the module "
                            f"{_chain(node.args[0])} as its object")
        if isinstance(node, ast.Call) and "library" in _chain(node.func).split("."):
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) \
                        and arg.value.split("::")[0].split("/")[0] in TORCH_NAMESPACES:
                    problems.append(f"changes PyTorch's own operators ({_chain(node.func)}({arg.value!r}))")
    return problems


@dataclass(frozen=True)
class NotebookFacts:
    """What the rules know of the whole notebook a cell belongs to: `modules` its imported names, `own` the
    names of its own objects (own_objects), whose attributes it may set, `classes` its classes
    (notebook_classes), `tensors` the names its top level binds to new tensors (own_tensors), whose
    autograd flags it may set, `plain` the names it binds to one module alone (plain_imports; none
    trusted when not given). The defaults trust nothing of the notebook."""
    modules: frozenset = KNOWN_MODULES
    own: frozenset = frozenset()
    classes: frozenset = frozenset()
    tensors: frozenset | None = frozenset()
    plain: dict | None = None

    @classmethod
    def of(cls, sources) -> "NotebookFacts":
        """The facts of a notebook's code cells, as sanitize computes them before checking each cell."""
        sources = list(sources)
        return cls(frozenset(imported_names(sources)), own_objects(sources), notebook_classes(sources),
                   own_tensors(sources), plain_imports(sources))


def check_cell(source: str, facts: NotebookFacts = NotebookFacts()) -> Verdict:
    """Which rules a student's cell breaks, given what is known of its notebook."""
    verdict = Verdict()
    try:
        tree = _parse(source)
    except SyntaxError:
        # Not Python, but IPython may still run it: `time exec(...)` is the %time magic (automagic).
        verdict.problems.append("does not parse as Python")
        return verdict
    # get_ipython() written by hand runs any code (run_cell) and is no magic to drop: only the magics
    # themselves (`%time ...`), which IPython turns into such calls, are judged as magics
    if any(re.search(r"\bget_ipython\b", line) for line in source.splitlines()
           if not line.lstrip().startswith(("!", "%"))):
        verdict.problems.append("uses get_ipython (write the magic itself: %time, %timeit)")
    _check_tree(tree, facts.modules, verdict, SETTABLE_ROOTS | facts.own, facts.classes, facts.tensors,
                facts.plain or {})
    return verdict


def _reads_metadata(node) -> bool:
    """`from importlib.metadata import version`: an installed package's version, read from its metadata
    (Liger-Kernel gates features on it). Only those names: no name reaches importlib itself, nor its entry
    points, whose `load()` imports any module by a string."""
    return isinstance(node, ast.ImportFrom) and node.module == "importlib.metadata" and not node.level \
        and all(a.name in ("version", "PackageNotFoundError") for a in node.names)


def _root_name(node):
    """The ast.Name at the root of an attribute chain, or None."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node if isinstance(node, ast.Name) else None


def _settable_root(node, selves, settable) -> bool:
    """Whether a store into this chain changes an object of the notebook's own: a method's own `self`
    or `ctx`, or one of the notebook's objects (own_objects)."""
    # Directly on it only: `self.x = v`, `self.cache[k] = v`, not `self.m.x = v`, where `self.m` may
    # have been made any object, a module included.
    target = node.value
    while isinstance(target, ast.Subscript):
        target = target.value
    if isinstance(node, ast.Subscript) and isinstance(target, ast.Attribute):
        target = target.value
    return isinstance(target, ast.Name) and _own_name(target, selves, settable)


def _own_name(name, selves, settable) -> bool:
    """A name bound to an object of the notebook's own: a method's own `self`/`ctx`, or an own object."""
    return id(name) in selves if name.id in SETTABLE_ROOTS else (name.id in settable or id(name) in selves)


def _own_attribute(node, selves, settable) -> bool:
    """`self._cache`, `ctx._saved`, `PLAN._grids`: a private attribute of the notebook's own object,
    named directly on it (a private attribute further down a chain belongs to someone else)."""
    return isinstance(node.value, ast.Name) and _own_name(node.value, selves, settable)


def _check_tree(tree, modules, verdict, settable=SETTABLE_ROOTS, classes=frozenset(), tensors=frozenset(),
                plain=None):
    plain = plain or {}
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
            _check_tree(_parse(code), modules, verdict, settable, classes, tensors, plain)
        elif kind == "system":
            verdict.dropped.append("a shell command")
        else:
            verdict.dropped.append(f"the magic %{name}")

    problems += _bindings_and_protocols(tree, modules, plain)
    problems += _methods_reached_through_a_class(tree, classes)
    selves = _method_selves(tree)
    tensor_uses = _made_uses(tree, tensors)
    # A function's own instance of a plain class of the notebook's (`plan = Plan()` in that function, the
    # name bound to nothing else there) is set like `self`; the top level's are `settable` (own_objects).
    plain_classes = {c[:-2] for c in classes if c.endswith("()")}
    selves |= _made_uses(tree, frozenset(), lambda v: isinstance(v, ast.Call) and isinstance(v.func, ast.Name)
                         and v.func.id in plain_classes)
    # `X.__init__(obj, ...)` sets attributes on obj whatever X is (a dataclass's generated __init__, a
    # library class's): only on a method's own self, through super(), or on one's own object.
    initialised = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__init__":
            on = node.func.value
            first = node.args[0] if node.args else None
            if not (isinstance(on, ast.Call) and isinstance(on.func, ast.Name) and on.func.id == "super"
                    or isinstance(on, ast.Name) and _own_name(on, selves, settable)
                    or isinstance(first, ast.Name) and id(first) in selves):
                problems.append(f"calls {_chain(node.func)} on an object that is not its own")
            initialised.add(id(node.func))
    # ... and only called so: held in a name (`init = C.__init__`), it is called on anything
    problems += [f"uses {_chain(n)} other than by calling it" for n in ast.walk(tree)
                 if isinstance(n, ast.Attribute) and n.attr == "__init__" and id(n) not in initialised]
    # `grader` may be read only as `grader.<public function>` (getattr with the name written out, which
    # _parse wrote as that attribute, included): bound to another name or passed along, it leads to the
    # grader's modules.
    public_uses = {id(node.value) for node in ast.walk(tree)
                   if isinstance(node, ast.Attribute) and node.attr in GRADER_API}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "grader" and isinstance(node.ctx, ast.Load) \
                and id(node) not in public_uses:
            problems.append("uses the name grader other than as grader.<public function>")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES and id(node) not in magic_nodes:
            problems.append(f"uses {node.id}" + EXPLAINED.get(node.id, ""))
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_MODULES \
                and (node.id not in EVERYDAY_WORDS or node.id in modules):
            problems.append(f"uses {node.id}")
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("__") and node.attr not in ALLOWED_DUNDERS:
                problems.append(f"reaches into {node.attr}")
            if node.attr in FORBIDDEN_SYS or node.attr == "sys" or node.attr in FORBIDDEN_ATTRIBUTES:
                problems.append(f"uses {_chain(node)}")
            elif node.attr.startswith("_") and not node.attr.startswith("__") \
                    and node.attr not in TRITON_IDIOMS | NAMEDTUPLE_API and not _own_attribute(node, selves, settable):
                problems.append(f"uses the private {_chain(node)}")
            if isinstance(node.value, ast.Name) and node.value.id == "grader" and node.attr not in GRADER_API:
                problems.append(f"uses {_chain(node)}, which is not part of the grader's public functions")
            if isinstance(node.ctx, (ast.Store, ast.Del)) and not _settable_root(node, selves, settable) \
                    and not (isinstance(node.ctx, ast.Store) and (_chain(node).startswith(SETTABLE_FLAGS)
                                                                  or node.attr in TRITON_IDIOMS
                                                                  or (node.attr in TENSOR_FLAGS
                                                                      and id(node.value) in tensor_uses))):
                problems.append(f"{'assigns' if isinstance(node.ctx, ast.Store) else 'deletes'} "
                                f"{_chain(node)}")
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)) \
                and (isinstance(node.value, ast.Attribute) or _root(node) in modules) \
                and not _settable_root(node, selves, settable) and not _is_triton_switch(node):
            problems.append(f"{'assigns' if isinstance(node.ctx, ast.Store) else 'deletes'} {_chain(node)}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for mod in mods:
                parts = mod.split(".")
                if (set(parts) & FORBIDDEN_MODULES and not _reads_metadata(node)) \
                        or (mod != "__future__" and any(p.startswith("_") for p in parts)):
                    problems.append(f"imports {mod}")
                elif parts[0] and not getattr(node, "level", 0) and not _installed(parts[0]):
                    problems.append(f"imports {parts[0]}, which is not an installed module (a module the "
                                    f"notebook writes itself would run unchecked)")
            if isinstance(node, ast.ImportFrom) and node.module == "sys":
                problems += [f"imports sys.{a.name}" for a in node.names if a.name in FORBIDDEN_SYS]
            if isinstance(node, ast.ImportFrom):   # a private name, as a private attribute (Triton's raw loads)
                problems += [f"imports the private {node.module}.{a.name}" for a in node.names
                             if a.name.startswith("_") and a.name != "__future__"]
            for alias in node.names:
                bound = (alias.asname or alias.name).split(".")[0]
                if bound == "grader" and not (isinstance(node, ast.Import) and alias.name == "grader"):
                    problems.append("binds the name grader to something else")
                elif alias.name.split(".")[0] == "grader" and isinstance(node, ast.Import) and bound != "grader":
                    problems.append(f"imports the grader as {bound}")
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
         "create (attributes, private ones included, may be set only on a method's own `self`, `ctx` or (in a classmethod) `cls`, "
         "the notebook's own objects (`PLAN = Plan()` at the top level, or `plan = Plan()` in a function, of a "
         "plain class or dataclass it defines, if neither name is bound to anything else there), PyTorch's `torch.backends` switches and the `requires_grad` "
         "and `grad` of a tensor the code made (`x = torch.randn(...)`, that name bound to nothing else), and directly "
         "(`self.x`, `self.cache[k]`, not `self.m.x`); a method that sets them is called on an instance, not "
         "through its class, a static method's first parameter is no `self`, an autograd.Function is called "
         "by `.apply`, and a class whose methods set attributes is only called, read, inherited from or used as a decorator; "
         "no `sys.modules`, no other private `_` attributes except Triton's `kernel._init_handles()` and a namedtuple's "
         "`_asdict`, `_replace`, `_fields` and `_make`; a tensor descriptor's `block_shape` may be "
         "set), may use the grader only as `grader.<public function>` (`grader.check`, `grader.setup`, ...), may not run strings as code or reach names by a string "
         "built at run time (`exec`, `eval` (a model's `.eval()` is fine), `__import__`, `setattr`, `globals`; "
         "`getattr(obj, \"name\")` with the name written out is read as `obj.name`) nor define or rebind those names, may not hand tensors to "
         "other libraries (NumPy's array interface, DLPack, `__torch_function__`) or replace PyTorch's own "
         "operators, may import only installed modules, name by name (no `import *`), and not those that run code from strings, files or "
         "bytes (pickle, timeit, code, runpy, pdb, ...; time with `%timeit` or `triton.testing.do_bench`), "
         "may not evaluate strings by other means (string annotations read by `typing.get_type_hints`, "
         "`string.Formatter`, jinja2, sympy, yaml, pickles), "
         "may use `functools.wraps` only as the decorator of a function they define and call `__init__` only "
         "on their own object (`super().__init__()`, `Base.__init__(self)`), may not call `get_ipython()` by hand, "
         "and may not use builtins, importlib (but `from importlib.metadata import version`), inspect, gc, ctypes, "
         "unittest, subprocess, threads, `os.system` or other processes. Shell commands and magics other than %time, "
         "%timeit and %matplotlib (without options) are removed before grading.")


# The paragraph every exercise notebook's introduction ends with (tests/test_code_rules.py checks it).
GRADING_NOTE = ("**How this notebook is graded.** The graded cells do not run in your notebook: the grader's own "
                "process makes new random inputs (hidden shapes and cases included), has your notebook call "
                "your function on them, and checks every result itself. A kernel's function must compute "
                "in your Triton kernels (PyTorch may allocate outputs, take views and do what the exercise "
                "allows, such as a final sum), return new plain tensors, and leave its input tensors "
                "unchanged: write results into tensors you allocate, never over an input (as some "
                "libraries store a gradient over the logits). Cells you hand in must keep these "
                "rules; a cell that breaks one is not run, and your feedback says which rule. " + RULES)


REFUSED = "# This cell was not run at grading: it "


def refusal(source: str) -> str | None:
    """Why a cell was not run at grading (the rule it broke, as neutralize wrote it), or None."""
    if not source.startswith(REFUSED):
        return None
    return source[len(REFUSED):].split("\n", 1)[0].rstrip(".")


def neutralize(source: str, facts: NotebookFacts = NotebookFacts()) -> tuple:
    """(source to grade, list of what was done) for one student cell of a notebook with these facts."""
    verdict = check_cell(source, facts)
    if verdict.problems:
        why = "; ".join(verdict.problems)
        return (f"{REFUSED}{why}.\n# {RULES}\n"
                f"raise RuntimeError({('This cell was not run at grading: it ' + why)!r})\n"), \
            [f"breaks the submission rules ({why}): not run"]
    if verdict.dropped:
        if source.lstrip().startswith("%%"):
            # a cell magic (%%bash, %%writefile, %%timeit with a setup line, ...): its body belongs to it
            return "\n".join(f"# removed before grading: {line}" for line in source.splitlines()), \
                [f"{', '.join(verdict.dropped)} removed"]
        kept, continued = [], False
        for line in source.splitlines():
            stripped = line.lstrip()
            # a line magic or shell line stays only if, alone, it is an allowed magic that passes the rules;
            # the lines a backslash continues it onto belong to it and go with it
            if continued or stripped.startswith(("!", "%")) \
                    and not check_cell(stripped, facts).clean:
                kept.append(f"# removed before grading: {stripped}")
                continued = line.rstrip().endswith("\\")
            else:
                kept.append(line)
        cleaned = "\n".join(kept)
        # What runs must be what was checked: removing a line can change what the others mean (a `%`
        # line inside a string turned the rest of it into code). Checked again, it must pass as it is.
        again = check_cell(cleaned, facts)
        if again.problems or again.dropped:
            why = "; ".join(again.problems) or "its code changes meaning once its magics are removed"
            return (f"{REFUSED}{why}.\n# {RULES}\n"
                    f"raise RuntimeError({('This cell was not run at grading: it ' + why)!r})\n"), \
                [f"breaks the submission rules ({why}): not run"]
        return cleaned, [f"{', '.join(verdict.dropped)} removed"]
    return source, []
