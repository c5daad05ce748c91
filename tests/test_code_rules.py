"""The submission rules that sanitize applies to a student's cells, each both ways."""

import nbformat
import pytest

from grader.checker.cells import GradedCall
from grader.pipeline import code_rules
from grader.pipeline.submissions import sanitize_notebook
from conftest import REPO

CHEATS = {
    # importlib.metadata gives versions; its entry points import any module by a string
    "from importlib.metadata import entry_points": "imports importlib.metadata",
    "import importlib.metadata": "imports importlib.metadata",
    "grader.check = lambda *a, **k: None": "assigns grader.check",
    # a library class's method with a module as its self (Module.train sets .training on it)
    "import torch\ntorch.nn.Module.train(torch.cuda)": "calls torch.nn.Module.train, a method of a library class, "
                                                      "with the module torch.cuda",
    "import torch\nM = torch.nn.Module\nM.register_buffer(torch, 'x', None)": "with the module torch as its object",
    "import grader\ngrader.student.checks.measure_speed = fake": "assigns grader.student.checks.measure_speed",
    "from grader.student import checks\nchecks.credit = lambda r, t: 1.0": "assigns checks.credit",
    "torch.cuda.Event = MyEvent": "assigns torch.cuda.Event",
    "import time\ntime.perf_counter = lambda: 0.0": "assigns time.perf_counter",
    "del torch.allclose": "deletes torch.allclose",
    "class FakeGrader: pass\ngrader = FakeGrader()": "rebinds the name grader",
    "import mymodule as grader": "binds the name grader",
    "def grader(): pass": "rebinds the name grader",
    "setattr(torch, 'equal', lambda a, b: True)": "uses setattr",
    "exec('grader.check = print')": "uses exec",
    "__import__('grader').check = print": "uses __import__",
    "import sys\nsys.modules['grader'].check = print": "uses sys.modules",
    "import builtins": "imports builtins",
    # Triton's interpreter's raw loads and stores, by a private name imported (a fourth red team's)
    "from triton.runtime.interpreter import _interpreter": "imports the private triton.runtime.interpreter._interpreter",
    "from unittest import mock": "imports unittest",
    "torch.Tensor.__eq__.__globals__": "reaches into __globals__",
    "from torch.utils._python_dispatch import TorchDispatchMode": "imports torch.utils._python_dispatch",
    "torch._C._set_grad_enabled(False)": "uses the private torch._C",
    "%time grader.check = print": "assigns grader.check",
    "ip = get_ipython()": "uses get_ipython",
    "for grader in range(3): pass": "rebinds the name grader",
    # Red-team findings (tests/test_redteam.py runs them against the grader):
    "checks = grader.student.checks\nchecks._compare_outputs = fake": "which is not part of the grader's public functions",
    "def patch(m):\n    m.check = fake\npatch(grader)": "assigns m.check",
    "grader.compare.TOLERANCES[torch.float32] = (1.0, 1.0)": "assigns grader.compare.TOLERANCES",
    "from grader import exercises": "imports exercises from grader",
    "import grader.student.guard": "imports a module of the grader",
    "importlib.import_module('builtins')": "uses importlib",
    "getattr(grader.check, '__glo' + 'bals__')": "uses getattr",
    "s = os.sys\ns.modules['x']": "uses os.sys",
    "time exec('grader.check = print')": "does not parse as Python",
    "import concurrent.futures": "imports concurrent.futures",
    "frame = error.__traceback__.tb_frame.f_back": "uses error.__traceback__.tb_frame.f_back",
    # getattr only with a public name written out, and never for the grader's modules
    "getattr(torch, name)": "uses getattr",
    "getattr(x, '_private')": "uses getattr",
    "getattr(grader, 'checks')": "uses getattr",
    "getattr(x, 'a' + 'b')": "uses getattr",
    "torch.cuda.synchronize = lambda: None": "assigns torch.cuda.synchronize",   # not a torch.backends switch
    "torch.backends.cuda.matmul._flag = 1": "uses the private",
    "plans[0] = 1\nimport plans": "assigns plans[0]",
    # Routes around the checker's request code and the guard (red team, through the real pipeline)
    "def __import__(name, *args, **kwargs):\n    return fake": "rebinds the name __import__",
    "def __builtins__(): pass": "rebinds the name __builtins__",
    "def f(exec=print): pass": "rebinds the name exec",
    "y = super(torch.Tensor, x).numpy()": "calls super() with arguments other than its own class and self",
    "base = torch.Tensor.mro()[1]": "uses torch.Tensor.mro",
    "class Capsule:\n    def __dlpack__(self): pass": "defines __dlpack__",
    "class View:\n    __array_interface__ = {}": "__array_interface__",
    "ns = SimpleNamespace(__array_interface__=d)": "uses __array_interface__",
    "from torch.utils.dlpack import to_dlpack": "imports to_dlpack",
    "class Any:\n    def __getattr__(self, name): pass": "defines __getattr__",
    # a property that ran when isinstance read it (a red team's; the grader now asks type())
    "class Note:\n    @property\n    def __class__(self):\n        return object": "defines __class__",
    "class Note:\n    __class__ = property(lambda self: object)": "rebinds __class__",
    "class Kind(type):\n    pass\n\n\nclass Loss(list, metaclass=Kind):\n    pass": "uses metaclass=",
    "Fake = type('Fake', (), d)": "builds a class with type(name, bases, namespace)",
    "lib = torch.library.Library('aten', 'IMPL')": "changes PyTorch's own operators",
    "torch.library.impl('aten::zeros_like', 'CPU')(f)": "changes PyTorch's own operators",
    "import IPython\nIPython.get_ipython().ex('x = 1')": "uses get_ipython",
    "from IPython import get_ipython as g": "imports get_ipython",
    "import operator\noperator.attrgetter('__dict__')(grader)": "with a name that is not a public one written out",
    "import operator\noperator.methodcaller(name)(x)": "with a name that is not a public one written out",
    "import pickle\npickle.loads(payload)": "imports pickle",
    "import timeit\ntimeit.timeit('grader.check = print')": "imports timeit",
    "import code\ncode.InteractiveInterpreter().runsource(src)": "imports code",
    "import runpy\nrunpy.run_path('helper.py')": "imports runpy",
    "import os\nos.system('python helper.py')": "uses system",
    "import webbrowser, sys\nwebbrowser.BackgroundBrowser([sys.executable, '-c', src, '%s']).open('x')":
        "imports webbrowser",
    "from torch.utils.cpp_extension import load_inline": "imports load_inline",
    "import types\nf = types.FunctionType(code, {})": "uses FunctionType",
    "import sys\nsys.path.insert(0, '.')": "uses sys.path",
    "import my_helpers": "not an installed module",
    "state = torch.load(buffer, weights_only=False)": "uses weights_only=",
    "y = __loader__": "uses __loader__",
    "kernel._init_cache = {}": "uses the private kernel._init_cache",
    # a second red-team pass
    "__name__ = 'triton.language.mine'": "rebinds __name__",
    "import operator\nget = operator.attrgetter\nget(name)(torch)": "other than by calling it with a name written out",
    "from operator import attrgetter as get": "imports attrgetter under another name",
    "import torch.multiprocessing as tmp": "imports torch.multiprocessing",
    "p = torch.multiprocessing.get_context('fork')": "uses torch.multiprocessing",
    "from numpy.ctypeslib import ctypes as C": "imports numpy.ctypeslib",
    "a = np.lib.stride_tricks.as_strided(t, shape=(n,))": "uses np.lib.stride_tricks",
    "os.environ['LD_PRELOAD'] = 'x.so'": "assigns os.environ['LD_PRELOAD']",
    "torch.Tensor.block_size = 1\ndel torch.Tensor.block_shape": "deletes torch.Tensor.block_shape",
    # a sixth pass: getattr with the name written out is read as the attribute, by every rule
    "import os\ngetattr(os, 'system')('ls')": "uses system",
    "import functools\ncopy = getattr(functools, 'update_wrapper')": "uses update_wrapper",
    "import builtins as b": "imports builtins",
    "run = getattr(m, 'eval')": "uses eval (other than as a model's .eval()",
    "import torch\nmp = getattr(torch, 'multiprocessing')": "uses torch.multiprocessing",
    "import string\nclass Grab(getattr(string, 'Formatter')):\n    pass": "uses Formatter",
    "import numpy as np\ngetattr(np, 'load')('x.npy', None, True)": "third positional argument",
    "import torch\ngetattr(torch, 'library').Library('aten', 'IMPL')": "changes PyTorch's own operators",
    "import grader\ngetattr(grader, 'check').__globals__": "reaches into __globals__",
    "import operator, os\noperator.attrgetter('system')(os)('ls')": "not a public one written out",
    "import operator, os\noperator.methodcaller('system', 'ls')(os)": "not a public one written out",
    # eval given code, or held in a name, is builtins' or a library's evaluator
    "eval('1 + 1')": "uses eval (eval runs a string as code",
    "df.eval('a + b')": "uses eval",
    "f = model.eval": "uses eval",
    # everyday words as names, but not the modules; PyTorch's profiler, with the reason
    "import signal": "imports signal",
    "import trace\ntrace.Trace()": "imports trace",
    "from torch.profiler import profile": "the grader's own profiler session",
    "import torch\nwith torch.profiler.profile() as p:\n    pass": "the grader's own profiler session",
}

HONEST = [
    # methods through a library class on the notebook's own objects, and a dtype as an argument
    "import torch\nx = torch.ones(3)\ny = torch.Tensor.add(x, x).to(torch.float16)\nz = torch.Tensor.to(x, torch.float16)",
    "import torch\nlayer = torch.nn.Linear(2, 2)\ntorch.nn.Module.train(layer, False)",
    "import grader\ngrader.check('day1.vector_add', add)",       # a visible test, copied by the student
    "from __future__ import annotations\nimport math\nx = math.sqrt(2)",
    "class Norm(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = 1",
    "class Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
    "        ctx.save_for_backward(x)\n        ctx.eps = 1e-6\n        ctx._shape = x.shape\n        return x",
    # a helper class's private cache, reached in a closure of its method; module and class dunders
    "class Grids:\n    def __init__(self):\n        self._grids = {}\n    def get(self, n):\n"
    "        def make():\n            self._grids[n] = (n,)\n        make()\n        return self._grids[n]",
    "__all__ = ['add']\n__version__ = '1.0'\nclass P:\n    __slots__ = ('a',)",
    "import dataclasses\n@dataclasses.dataclass\nclass C(Base):\n    n: int = 0\n"
    "    def __post_init__(self):\n        super().__post_init__()\n        self.m = self.n * 2",
    "class P:\n    def __init__(self):\n        self.n = 0\n    @property\n    def n2(self):\n        return self._n2\n"
    "    @n2.setter\n    def n2(self, v):\n        self._n2 = v\n\ndef check(p: P) -> P:\n    assert isinstance(p, (P, int))\n    return p",
    # Liger-Kernel's style: a decorated static forward, a backward that calls the parent's
    "class Fn(torch.autograd.Function):\n    @staticmethod\n    @ensure_contiguous\n    def forward(ctx, x, eps):\n"
    "        ctx.eps = eps\n        return x\n\nclass Fn2(Fn):\n    @staticmethod\n    def backward(ctx, dy):\n"
    "        return Fn.backward(ctx, dy)",
    # a kernel cache on the class, kept by a classmethod
    "class Kernels:\n    _compiled = {}\n    @classmethod\n    def get(cls, key):\n        cls._compiled[key] = key\n"
    "        cls.last = key\n        return cls._compiled[key]\n\nk = Kernels.get(3)",
    # a tensor's own backward beside an autograd.Function's
    "class Fn(torch.autograd.Function):\n    @staticmethod\n    def backward(ctx, dy):\n        return dy\n\n"
    "y.backward(dy)\nloss.backward()",
    # a base class's method called through the class on the method's own self (older code's super())
    "class Base:\n    def __init__(self):\n        self.n = 0\nclass Child(Base):\n    def __init__(self):\n"
    "        Base.__init__(self)\n        self.m = 1",
    "out = torch.empty_like(x)\nout.fill_(0)",
    "%timeit add(x, y)",
    "print(type(x).__name__, file=sys.stderr)",
    # Data out of PyTorch outside a graded call (the guard refuses it inside one: tests/test_redteam.py)
    "print('first values:', add(x, y)[:4].tolist())",
    "import numpy as np\nprint(np.abs(add(x, y).numpy() - (x + y).numpy()).max())",
    # Honest idioms from other projects (Liger-Kernel's helpers, Triton's tutorials, a plan cache)
    "exp = getattr(tl, 'exp2', None) or getattr(tl.math, 'exp2')",
    "class Plans:\n    def add(self, n, plan):\n        self.plans[n] = plan",
    "torch.backends.cuda.matmul.allow_tf32 = True\ntorch.backends.cudnn.allow_tf32 = True",
    "if getattr(grader, 'grading')(): pass",
    # ... and everyday code near the new rules
    "class M(nn.Module):\n    def __init__(self):\n        super(M, self).__init__()",
    "import operator\nshape_of = operator.attrgetter('shape')",
    "import os\nfrom os import path\np = os.path.join('a', 'b')",
    "import re\nrule = re.compile('[a-z]+')",
    "from IPython.display import display, Markdown",
    "import types\nns = types.SimpleNamespace(block=128)",
    "if __name__ == '__main__':\n    print(__name__)",
    "lib = torch.library.Library('mylib', 'DEF')",
    # Triton's tutorials: 06 sets a tensor descriptor's block shape in a config's pre_hook, 02 loads a
    # compiled kernel before reading its register count
    "def pre_hook(nargs):\n    nargs['desc_q'].block_shape = [nargs['BLOCK_M'], nargs['HEAD_DIM']]",
    "kernel = softmax_kernel.warmup(y, x, n, grid=(1,))\nkernel._init_handles()\nn_regs = kernel.n_regs",
    "import os\nos.environ['TRITON_INTERPRET'] = '1'",        # Triton's documented debugging switch
    "if int(triton.__version__.split('.')[1]) >= 4: pass",   # a version gate, as Liger-Kernel has
    "from importlib.metadata import version\nnew_torch = version('torch') >= '2.5'",   # and another
    "import functools, itertools, dataclasses, typing, numpy as np, matplotlib.pyplot as plt",
    # a sixth pass: honest code refused before (docs/threat-model.md)
    "import torch\nmodel = torch.nn.Linear(2, 2).eval()\nmodel.eval()",
    "def profile(fn, *args):\n    return fn(*args)\nsignal = torch.randn(8)\ncode = 'x'\nfor trace in []:\n    site = 1",
    "import collections\nT = collections.namedtuple('T', 'a b')\nt = T(1, 2)\n"
    "print(t._asdict(), t._replace(a=3), T._fields, T._make([1, 2]))",
    "exp = getattr(tl, 'exp2', None)\nok = hasattr(torch, 'float8_e5m2')",
    "from __future__ import annotations\nfrom triton.runtime.interpreter import InterpretedFunction",
]


@pytest.mark.parametrize("source, problem", CHEATS.items())
def test_tampering_is_not_run(source, problem):
    verdict = code_rules.check_cell(source, code_rules.NotebookFacts(modules=code_rules.imported_names([source])))
    assert any(problem in p for p in verdict.problems), verdict
    new, done = code_rules.neutralize(source, code_rules.NotebookFacts(modules=code_rules.imported_names([source])))
    assert new.rstrip().splitlines()[-1].startswith("raise RuntimeError") and "not run" in done[0]
    compile(new, "<cell>", "exec")


@pytest.mark.parametrize("source", HONEST)
def test_ordinary_code_is_left_alone(source):
    assert code_rules.neutralize(source, code_rules.NotebookFacts(modules=code_rules.imported_names([source]))) == (source, [])


@pytest.mark.parametrize("source", ["!nvidia-smi\nx = 1", "%%bash\nls\n", "%pip install foo",
                                    # a timing magic with options or a setup line: code the rules cannot see
                                    "%timeit -n1 -r1 grader.check = print\nx = 1",
                                    "%%timeit -n1 grader.check = print\nadd(x, y)"])
def test_shell_commands_and_magics_are_dropped_not_failed(source):
    new, done = code_rules.neutralize(source, code_rules.NotebookFacts(modules=frozenset()))
    assert "removed" in done[0] and "raise" not in new
    assert "nvidia-smi" not in new.replace("# removed before grading: !nvidia-smi", "")
    compile(new, "<cell>", "exec")
    if "x = 1" in source:
        assert "x = 1" in new
    assert all(line.startswith("# removed before grading") for line in new.splitlines() if "grader.check" in line)


def test_every_reference_solution_keeps_the_rules():
    for path in sorted((REPO / "solutions").glob("day*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        code = [c.source for c in nb.cells if c.cell_type == "code"]
        modules = code_rules.imported_names(code)
        # what a student hands in: the answer cells and the notebook's own "Try it" cells, which are not
        # locked (the release's locked cells are restored, not checked)
        answers = [c.source for c in nb.cells if c.cell_type == "code"
                   and not c.metadata.get("nbgrader", {}).get("locked")]
        assert answers, path
        for source in answers:
            verdict = code_rules.check_cell(source, code_rules.NotebookFacts(modules=modules))
            assert verdict.clean, (path.name, verdict, source[:200])


def test_sanitize_replaces_a_patching_cell_and_says_so():
    release = nbformat.read(REPO / "exercises" / "day1" / "vector_add.ipynb", as_version=4)
    student = nbformat.from_dict(release)
    student.cells.insert(4, nbformat.v4.new_code_cell("grader.check = lambda *a, **k: None"))
    clean, fixes = sanitize_notebook(nbformat.writes(student), release)
    assert any("breaks the submission rules (assigns grader.check)" in f for f in fixes), fixes
    assert not any(c.source.startswith("grader.check =") for c in clean.cells)


def test_sanitize_keeps_a_cell_that_sets_its_own_tensors_autograd_flags():
    release = nbformat.read(REPO / "exercises" / "day1" / "vector_add.ipynb", as_version=4)
    student = nbformat.from_dict(release)
    student.cells.insert(4, nbformat.v4.new_code_cell("t = torch.randn(8)\nt.requires_grad = True\nt.grad = None"))
    student.cells.insert(5, nbformat.v4.new_code_cell("u = torch.randn(8)\nu = torch.autograd\nu.grad = None"))
    clean, fixes = sanitize_notebook(nbformat.writes(student), release)
    assert any(c.source.startswith("t = torch.randn(8)") for c in clean.cells), fixes
    assert [f for f in fixes if "breaks the submission rules" in f] == \
        ["cell 'of your own': breaks the submission rules (assigns u.grad): not run"], fixes


def test_every_exercise_states_the_rules_in_its_introduction():
    for path in sorted((REPO / "exercises").glob("day*/*.ipynb")):
        intro = nbformat.read(path, as_version=4).cells[0].source
        assert " ".join(code_rules.GRADING_NOTE.split()) in " ".join(intro.split()), path


def test_the_release_restates_an_outdated_grading_note(tmp_path):
    from grader.pipeline.notebooks import state_grading_note
    path = tmp_path / "vector_add.ipynb"
    nb = nbformat.read(REPO / "solutions" / "day1" / "vector_add.ipynb", as_version=4)
    intro = nb.cells[0].source
    nb.cells[0].source = intro.replace(intro[intro.index("**How this notebook is graded.**"):],
                                       "**How this notebook is graded.** Old rules.")
    nbformat.write(nb, path)
    assert state_grading_note(path)
    assert nbformat.read(path, as_version=4).cells[0].source == intro
    assert not state_grading_note(path)     # already up to date: the file is left alone


# A notebook's own object: a plan cache or a counter on an instance of a class it defines.
PLAN_CLASS = "class Plan:\n    def __init__(self):\n        self.calls = 0\n        self.cache = {}\n"
PLAN_MADE = "PLAN = Plan()"
PLAN_USED = "def softmax(x):\n    PLAN.calls += 1\n    PLAN.cache[x.shape] = 1\n    PLAN.last = x.shape\n    return x"


def _own_verdict(*cells):
    facts = code_rules.NotebookFacts(modules=code_rules.imported_names(cells), own=code_rules.own_objects(cells))
    return code_rules.check_cell(cells[-1], facts)


def test_a_notebooks_own_object_may_have_its_attributes_set():
    assert _own_verdict(PLAN_CLASS, PLAN_MADE, PLAN_USED).clean
    # twice made, in two cells, still its own
    assert _own_verdict(PLAN_CLASS, PLAN_MADE, PLAN_MADE, PLAN_USED).clean


@pytest.mark.parametrize("elsewhere", [
    "import torch\nPLAN = torch",                        # bound to a module as well
    "import torch as PLAN",
    "def f(PLAN):\n    PLAN.x = 1",                       # a parameter: whatever the caller passes
    "import torch\nfor PLAN in [torch.cuda]:\n    pass",
    "import torch\nif (PLAN := torch):\n    pass",
    "def f():\n    global PLAN\n    PLAN = 1",
    "import torch\nPLAN = Plan() if torch else torch",
    "import torch\nPLAN, other = Plan(), torch",
    "import torch\ntry:\n    pass\nexcept Exception as PLAN:\n    pass",
])
def test_a_name_bound_to_anything_else_is_not_the_notebooks_own(elsewhere):
    verdict = _own_verdict(PLAN_CLASS, PLAN_MADE, elsewhere, PLAN_USED)
    assert any("assigns PLAN." in p for p in verdict.problems), verdict
    # an object made by a library is no object of its own either
    assert "PLAN" not in code_rules.own_objects(["import torch\nPLAN = torch.cuda.Stream()", PLAN_USED])


# The red team's ways to set attributes of any object, the grader's modules included
# (docs/redteam-h100.md; each was graded 3/3 with a wrong answer before these rules)
@pytest.mark.parametrize("cells, problem", [
    # a function whose parameter is named self, called with a module
    (["def put(self, v):\n    self.run_student = v", "put(torch, 1)"], "assigns self.run_student"),
    # a variable named ctx
    (["import torch\nctx = torch.cuda\nctx.synchronize = print"], "assigns ctx.synchronize"),
    # a method called through its class, with a module as self, by every route
    (["class P:\n    def put(self, v):\n        self.x = v", "P.put(torch, 1)"], "through its class"),
    (["class P:\n    def put(self, v):\n        self.x = v", "p = P()\ntype(p).put(torch, 1)"], "through its class"),
    (["class P:\n    def put(self, v):\n        self.x = v", "p = P()\np.__class__.put(torch, 1)"],
     "through its class"),
    (["class P:\n    def put(self, v):\n        self.x = v", "getattr(P, 'put')(torch, 1)"], "through its class"),
    (["class P:\n    def put(self, v):\n        self.x = v", "Q = P\nQ.put(torch, 1)"], "uses the class P as a value"),
    # a second red team's routes: a static method takes any first argument, on an instance too
    (["class P:\n    @staticmethod\n    def put(self, v):\n        self.synchronize = v", "P().put(torch.cuda, print)"],
     "assigns self.synchronize"),
    # an autograd.Function's forward called by hand with a module for its ctx
    (["class Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        ctx.synchronize = x",
      "Fn().forward(torch.cuda, print)"], "calls an autograd.Function's forward by hand"),
    # the class reached by routes other than its name: no class is a value
    (["class P:\n    def put(self, v):\n        self.x = v", "def k():\n    return P", "k().put(torch, 1)"],
     "uses the class P as a value"),
    (["class P:\n    def put(self, v):\n        self.x = v", "[P][0].put(torch, 1)"], "uses the class P as a value"),
    (["class P:\n    def put(self, v):\n        self.x = v", "for C in [P]:\n    C.put(torch, 1)"],
     "uses the class P as a value"),
    (["class P:\n    def put(self, v):\n        self.x = v", "import operator\noperator.methodcaller('put', torch, 1)(p)"],
     "reaches the method put by name"),
    # the class reached through an instance, held in a name
    (["class P:\n    def put(self, v):\n        self.x = v", "p = P()\nT = type(p)\nT.put(torch.cuda, print)"],
     "uses type(p) as a value"),
    (["class P:\n    def put(self, v):\n        self.x = v", "p = P()\nT = p.__class__\nT.put(torch.cuda, print)"],
     "uses p.__class__ as a value"),
    # a class that sets no attributes itself, but inherits or hands its self to a method that does
    (["class P:\n    def put(self, v):\n        self.x = v", "class Q(P):\n    pass", "C = Q\nC.put(torch, 1)"],
     "uses the class Q as a value"),
    (["class P:\n    def put(self, v):\n        self.x = v", "class Q:\n    def m(self, v):\n        P.put(self, v)",
      "C = Q\nC.m(torch, 1)"], "uses the class Q as a value"),
    (["class P:\n    def put(self, v):\n        self.x = v", "p = P()\nclass Q(p.__class__):\n    pass",
      "C = Q\nC.put(torch, 1)"], "uses the class Q as a value"),
    (["class Q:\n    def m(self):\n        return self._cache", "C = Q\nC.m(torch)"], "uses the class Q as a value"),
    # getattr with the name written out is the attribute
    (["class P:\n    def put(self, v):\n        self.x = v", "getattr(getattr(P, 'put'), 'x', P)"], "through its class"),
    # stores through an attribute of one's own object, which may hold any object
    (["class P:\n    def __init__(self):\n        self.m = torch.cuda\n        self.m.synchronize = print"],
     "assigns self.m.synchronize"),
    # frames, modules and builtins by getattr, attrgetter, or a library's frame helper
    (["import operator, sys\noperator.attrgetter('modules')(sys)"], "not a public one written out"),
    (["import operator\nf = operator.attrgetter('f_builtins')"], "not a public one written out"),
    (["import logging\nframe = logging.currentframe()"], "uses logging.currentframe"),
    (["import traceback\nframes = traceback.walk_stack(None)"], "uses traceback.walk_stack"),
    # a function's parameter named cls, or a static method's, is whatever it is called with
    (["def put(cls, v):\n    cls.synchronize = v", "put(torch.cuda, print)"], "assigns cls.synchronize"),
    (["class P:\n    @staticmethod\n    def put(cls, v):\n        cls.synchronize = v"], "assigns cls.synchronize"),
    # `self` rebound inside the method
    (["class P:\n    def put(self, v):\n        self = v\n        self.x = 1"], "assigns self.x"),
    # the grader under another name, in a list, passed to a function
    (["G = grader\nG.student.checks"], "other than as grader.<public function>"),
    (["[grader][0].student"], "other than as grader.<public function>"),
    (["def member(m):\n    return m.student", "member(grader)"], "other than as grader.<public function>"),
    (["import grader as G"], "imports the grader as G"),
    (["import grader.student.checks as checks"], "imports a module of the grader"),
])
def test_attributes_of_objects_not_the_notebooks_own_cannot_be_set_by_any_route(cells, problem):
    facts = code_rules.NotebookFacts(modules=code_rules.imported_names(cells), own=code_rules.own_objects(cells),
                                     classes=code_rules.notebook_classes(cells))
    problems = [p for c in cells for p in code_rules.check_cell(c, facts).problems]
    assert any(problem in p for p in problems), problems


def test_a_class_name_bound_to_anything_else_makes_no_objects_of_its_own():
    # the red team's F1: `Plan` redefined as a function returning a module, after the class statement
    assert "PLAN" not in code_rules.own_objects([PLAN_CLASS, "import torch\ndef Plan():\n    return torch",
                                                 PLAN_MADE, PLAN_USED])
    # a dataclass is a plain class: its counters and private caches are the notebook's own
    dataclass = "import dataclasses\n@dataclasses.dataclass\nclass Stats:\n    calls: int = 0\n    _seen: int = 0"
    cells = [dataclass, "STATS = Stats()", "def f(x):\n    STATS.calls += 1\n    STATS._seen = 1\n    return x"]
    assert "STATS" in code_rules.own_objects(cells) and _own_verdict(*cells).clean


@pytest.mark.parametrize("plan_class", [
    "import torch\nclass Plan:\n    def __new__(cls):\n        return torch",          # Plan() returns a module
    "import torch\nclass Meta(type):\n    pass\nclass Plan(metaclass=Meta):\n    pass",
    "import torch\ndef make(c):\n    return lambda: torch\n@make\nclass Plan:\n    pass",
    "import torch\nclass Plan(torch.nn.Module):\n    pass",                           # a library's class
    "import torch\nclass Base:\n    def __new__(cls):\n        return torch\nclass Plan(Base):\n    pass",
])
def test_only_a_plain_class_of_the_notebooks_own_makes_objects_of_its_own(plan_class):
    assert "PLAN" not in code_rules.own_objects([plan_class, PLAN_MADE, PLAN_USED])
    assert "PLAN" in code_rules.own_objects([PLAN_CLASS, "class Child(Plan):\n    pass", "PLAN = Child()"])


def test_a_refused_cell_says_why_in_the_source_it_leaves():
    new, _ = code_rules.neutralize("grader.check = print", code_rules.NotebookFacts(modules=frozenset()))
    assert code_rules.refusal(new) == "assigns grader.check"
    assert code_rules.refusal("x = 1") is None


def test_a_function_whose_cell_was_refused_is_explained_where_its_check_fails():
    import asyncio
    from grader.checker import verdicts
    from grader.compare import CheckFailed

    class Exchange:   # the kernel handed nothing over: the function's name is not defined
        folder = "/nowhere"

        def new_request(self):
            return "r1"

        def result(self, request):
            return None

    async def run_in_kernel(code):
        return "NameError: name 'softmax' is not defined"

    call = GradedCall("check", "day2.softmax", "softmax")
    checker = verdicts.Checker(run_in_kernel, Exchange(), refused=["assigns torch.softmax"])
    with pytest.raises(CheckFailed) as failed:
        asyncio.run(checker._ask("fused softmax", call, "kernel_case"))
    message = str(failed.value)
    assert "NameError" in message and "not run at grading: it assigns torch.softmax" in message, message
    assert "If that cell defines `softmax`" in message
    # without a refused cell, no such guess
    checker = verdicts.Checker(run_in_kernel, Exchange())
    with pytest.raises(CheckFailed) as failed:
        asyncio.run(checker._ask("fused softmax", call, "kernel_case"))
    assert "not run at grading" not in str(failed.value)


# A student's own test code sets autograd flags on tensors it made (`x.requires_grad = True`, `x.grad = None`).
def _tensor_verdict(*cells):
    return code_rules.check_cell(cells[-1], code_rules.NotebookFacts(
        modules=code_rules.imported_names(cells), classes=code_rules.notebook_classes(cells),
        tensors=code_rules.own_tensors(cells)))


@pytest.mark.parametrize("cells", [
    ["import torch\nx = torch.randn(4, 8, device='cuda')\nx.requires_grad = True"],
    ["import torch\nx = torch.randn(4, 8).cuda().half()", "x.requires_grad = True\ny = x * 2\nx.grad = None"],
    ["import torch\ndef test_backward():\n    x = torch.randn(4, 8)\n    x.requires_grad = True\n"
     "    for _ in range(3):\n        x.grad = None\n    return x"],
    # a module-level tensor used in a function that binds nothing of that name
    ["import torch\nw = torch.ones(8)", "def step():\n    w.grad = None"],
    # arithmetic on new tensors and numbers, in-place initialisers (Triton's layer-norm and attention tests)
    ["import torch\nx = -2.3 + 0.5 * torch.randn(4, 4)\nx.requires_grad_(True)\nx.grad = None"],
    ["import torch\ndef test():\n    q = torch.empty(2, 2).normal_(mean=0.0, std=0.5).requires_grad_()\n"
     "    dq, q.grad = q.grad.clone(), None\n    w = (torch.rand(3) * 2 - 1).cuda()\n    w.grad = None"],
])
def test_a_new_tensors_autograd_flags_may_be_set(cells):
    assert _tensor_verdict(*cells).clean, _tensor_verdict(*cells)


@pytest.mark.parametrize("cells", [
    # the name is also bound to something else: a module, a parameter, a loop variable, an alias
    ["import torch\nx = torch.randn(4)", "x = torch.autograd\nx.grad = print"],
    ["import torch\ndef f(x):\n    x.grad = print\n"],
    ["import torch\nx = torch.randn(4)\nfor x in [torch.autograd]:\n    pass\nx.grad = print"],
    ["import torch\nx = torch.randn(4)\n[(x := torch.autograd) for _ in [0]]\nx.grad = print"],
    ["import torch\nx = torch.randn(4)\ndef f():\n    global x\n    x = torch.autograd", "x.grad = print"],
    # torch itself is not the module
    ["import torch\nimport numpy as torch", "x = torch.zeros(4)\nx.grad = print"],
    ["import torch", "def f(torch):\n    return torch", "x = torch.zeros(4)\nx.grad = print"],
    # not a new tensor, or another attribute
    ["import torch\nx = torch.autograd.grad(1, 2)\nx.grad = print"],
    # arithmetic with an operand that is no new tensor or number: it may answer with any object
    ["import torch\nx = torch.autograd + 1\nx.grad = print"],
    ["import torch\nclass F:\n    def __mul__(self, o):\n        return torch.autograd", "x = F() * torch.randn(3)\n"
     "x.grad = print"],
    ["import torch\ny = torch.autograd\nx = y * torch.randn(3)\nx.grad = print"],
    ["import torch\nx = not torch.randn(3)\nx.grad = print"],
    ["import torch\nx = torch.randn(4)\nx.backward = print"],
    ["import torch\nx = torch.randn(4)\ndel x.grad"],
    ["import torch\ntorch.autograd.grad = print"],
    # local to a function that binds it otherwise, though the top level has a tensor of that name
    ["import torch\nx = torch.randn(4)", "def f():\n    x = torch.autograd\n    x.grad = print"],
])
def test_autograd_flags_are_set_on_new_tensors_only(cells):
    assert any(p.startswith(("assigns x.", "deletes x.", "assigns torch.")) for p in _tensor_verdict(*cells).problems), \
        _tensor_verdict(*cells)


# An instance of the notebook's own plain class made inside a function, as helper code does.
LOCAL_PLAN = "def launch(x):\n    plan = Plan()\n    plan.block = 1024\n    plan._grid = (x.numel() // plan.block,)\n" \
             "    return plan"


@pytest.mark.parametrize("cells", [
    [PLAN_CLASS, LOCAL_PLAN],
    [PLAN_CLASS, "def outer():\n    plan = Plan()\n    def inner():\n        plan.calls += 1\n    inner()"],
])
def test_a_functions_own_instance_may_have_its_attributes_set(cells):
    assert _tensor_verdict(*cells).clean, _tensor_verdict(*cells)


@pytest.mark.parametrize("cells", [
    # the name is also bound to something else in that function, or is a parameter
    [PLAN_CLASS, "import torch\ndef f():\n    plan = Plan()\n    plan = torch.cuda\n    plan.synchronize = print"],
    [PLAN_CLASS, "def f(plan):\n    plan.x = 1"],
    [PLAN_CLASS, "import torch\ndef f():\n    for plan in [torch.cuda]:\n        plan.synchronize = print"],
    # the class is not a plain one of the notebook's: its name is bound to something else too
    [PLAN_CLASS, "import torch\ndef Plan():\n    return torch.cuda", "def f():\n    plan = Plan()\n    plan.synchronize = print"],
    # through an attribute of one's own object, not directly on it
    [PLAN_CLASS, "import torch\ndef f():\n    plan = Plan()\n    plan.m = torch.cuda\n    plan.m.synchronize = print"],
])
def test_a_functions_name_is_its_own_instance_only_when_bound_to_nothing_else(cells):
    assert any(p.startswith(("assigns plan.", "assigns Plan")) for p in _tensor_verdict(*cells).problems), \
        _tensor_verdict(*cells)


@pytest.mark.parametrize("cells", [
    # rebound out of the scope's sight: by an inner function's nonlocal, or a walrus in an annotation
    [PLAN_CLASS, "import torch\ndef f():\n    plan = Plan()\n    def g():\n        nonlocal plan\n"
                 "        plan = torch.cuda\n    g()\n    plan.synchronize = print"],
    ["import torch\ndef f():\n    x = torch.randn(3)\n    def g():\n        nonlocal x\n        x = torch.autograd\n"
     "    g()\n    x.grad = print"],
    ["import torch\nx = torch.randn(3)\ndef f(a: (x := torch.autograd) = None):\n    pass\nx.grad = print"],
])
def test_a_name_rebound_out_of_its_scopes_sight_is_not_a_made_object(cells):
    assert any(p.startswith(("assigns plan.", "assigns x.")) for p in _tensor_verdict(*cells).problems), \
        _tensor_verdict(*cells)


def _notebook_refused(cells) -> list:
    """Each cell's problems, with the notebook's facts computed as submissions.sanitize does."""
    facts = code_rules.NotebookFacts.of(cells)
    return [code_rules.check_cell(c, facts).problems for c in cells]


# A third red team's routes past the made-object allowances and to setattr by another name: each notebook
# ran to the end and changed torch.autograd.grad, torch.cuda or torch.Tensor before these rules.
@pytest.mark.parametrize("cells", [
    # a magic's code binds names in the notebook as a plain line does
    ["import torch", "x = torch.randn(3)", "%time x = torch.autograd", "x.grad = print"],
    ["class Plan:\n    pass", "PLAN = Plan()", "import torch\n%time PLAN = torch.cuda", "PLAN.synchronize = print"],
    ["import torch\nx = torch.randn(3)", "%%time\nx = torch.autograd\nx.grad = print"],
    # setattr by another name: functools copies attributes and a __dict__ onto any object
    ["import torch, functools, types\nfunctools.update_wrapper(torch.autograd, types.SimpleNamespace(grad=print), "
     "('grad',), ())"],
    ["import torch, functools, types\nfunctools.wraps(types.SimpleNamespace(synchronize=print))(torch.cuda)"],
    ["import torch, types\nfrom functools import wraps as w\nw(types.SimpleNamespace(synchronize=print))(torch.cuda)"],
    ["import argparse, torch\nargparse.ArgumentParser().parse_args([], namespace=torch.cuda)"],
    # a star import rebinds names no rule sees
    ["import torch", "Tensor = torch.zeros(1)", "from torch.nn.functional import *",
     "Tensor.grad = property(lambda self: 42)"],
    # a class that is not plain after all: a decorator of the notebook's own, a second class statement
    # out of the top level, a name an import rebinds, a rebound `object`
    ["import torch\ndef dataclass(c):\n    return lambda: torch.cuda", "@dataclass\nclass Plan:\n    pass",
     "def f():\n    plan = Plan()\n    plan.synchronize = print\nf()"],
    ["import torch\nclass Plan:\n    pass", "if True:\n    class Plan:\n        def __new__(cls):\n"
     "            return torch.cuda", "def f():\n    plan = Plan()\n    plan.synchronize = print\nf()"],
    ["class cast:\n    pass", "import torch\nfrom typing import cast",
     "def f():\n    p = cast(None, torch.autograd)\n    p.grad = print\nf()"],
    ["import torch\nclass Base:\n    def __new__(cls):\n        return torch.cuda", "object = Base",
     "class Plan(object):\n    pass", "def f():\n    p = Plan()\n    p.synchronize = print\nf()"],
])
def test_routes_past_the_made_object_allowances_are_refused(cells):
    assert any(_notebook_refused(cells)), cells


@pytest.mark.parametrize("cells", [
    ["import functools\ndef traced(f):\n    @functools.wraps(f)\n    def wrapper(*args):\n        return f(*args)\n"
     "    return wrapper"],
    ["from dataclasses import dataclass\n@dataclass\nclass Stats:\n    calls: int = 0",
     "def f():\n    s = Stats()\n    s.calls += 1\n    return s"],
    # `import torch.nn` binds torch to torch: a new tensor stays one
    ["import torch\nimport torch.nn", "x = torch.randn(3)\nx.requires_grad = True"],
    # an own class as a decorator (it is called with the function)
    ["import functools\nclass CountCalls:\n    def __init__(self, fn):\n        self.fn = fn\n        self.calls = 0\n"
     "    def __call__(self, *args):\n        self.calls += 1\n        return self.fn(*args)",
     "@CountCalls\ndef add(x, y):\n    return x + y"],
    # classes whose methods set nothing, as values: an Enum's members, a dataclass's fields
    ["import enum\nclass CastingMode(enum.Enum):\n    NONE = 0\n    LLAMA = 1\n    def describe(self):\n"
     "        return self.name.lower()", "modes = [m for m in CastingMode]\nprint(list(CastingMode))"],
    ["import dataclasses\n@dataclasses.dataclass(frozen=True)\nclass KernelConfig:\n    BLOCK: int = 64\n"
     "    def meta(self):\n        return [f.name for f in dataclasses.fields(self)]",
     "print([f.name for f in dataclasses.fields(KernelConfig)])"],
    ["class P:\n    def put(self, v):\n        self.x = v", "p = P()\nprint(type(p).__name__, type(p) is P, f'{type(p)}')"],
])
def test_honest_decorators_dataclasses_and_submodule_imports_still_pass(cells):
    assert not any(_notebook_refused(cells)), _notebook_refused(cells)


# A fourth red team's routes: attributes read by a string, hand-written get_ipython(), a magic's
# continuation lines, __init__ called on a foreign object, optparse and logging.config.
@pytest.mark.parametrize("cells", [
    ["import torch, string, grader\ng = string.Formatter().get_field('0.__globals__', [grader.check], {})[0]\n"
     "g['check'] = print"],
    ["import torch\nget_ipython().run_cell('torch.autograd.grad = print')"],
    ["import torch\nget_ipython().run_line_magic('time', 'torch.autograd' + '.grad = print')"],
    ["import torch\nfrom dataclasses import dataclass\n@dataclass\nclass P:\n    grad: object\nP.__init__(torch.autograd, print)"],
    ["import torch, optparse\noptparse.Values.__init__(torch.autograd, {'grad': print})"],
    ["import torch, types\ntypes.SimpleNamespace.__init__(torch.cuda, synchronize=print)"],
    ["import torch\ndef f(self):\n    self.__init__('x')\nf(torch.cuda)"],
    ["import logging.config\nlogging.config.BaseConfigurator({}).resolve('grader.student.checks')"],
    ["from logging.config import BaseConfigurator\nBaseConfigurator({}).resolve('grader.student.checks')"],
])
def test_a_fourth_red_teams_routes_are_refused(cells):
    assert any(_notebook_refused(cells)), cells


@pytest.mark.parametrize("source", [
    "!echo hi \\\ntorch.autograd.grad = print",
    "!ls\nx = 1 \\\n%\"\"\"\ntorch.autograd.grad = print\n#\"\"\"",
])
def test_removing_a_shell_line_never_lets_other_code_run_unchecked(source):
    new, done = code_rules.neutralize(source, code_rules.NotebookFacts(modules=code_rules.imported_names([source])))
    assert "torch.autograd.grad = print" not in [line.strip() for line in new.splitlines()], new
    compile(new, "<cell>", "exec")


@pytest.mark.parametrize("cells", [
    ["class Base:\n    def __init__(self):\n        self.n = 0\n\n\nclass Plan(Base):\n    def __init__(self):\n"
     "        super().__init__()\n        Base.__init__(self)\n        self.m = 1"],
    ["import torch\nclass Block(torch.nn.Module):\n    def __init__(self):\n        super(Block, self).__init__()"],
])
def test_honest_initialisers_still_pass(cells):
    assert not any(_notebook_refused(cells)), _notebook_refused(cells)


# A fifth pass: strings evaluated or walked as attribute paths by libraries, the aten namespace built at
# run time, a pickle loaded through a positional argument, __init__ held in a name.
@pytest.mark.parametrize("cells", [
    ["import string\nclass Grab(string.Formatter):\n    def format_field(self, value, format_spec):\n"
     "        self.got = value\n        return ''"],
    ["import typing\ndef f(b: \"__import__('builtins').exec\"):\n    pass\nh = typing.get_type_hints(f)"],
    ["import functools\n@functools.singledispatch\ndef f(x):\n    pass"],
    ["import jinja2\njinja2.Environment().compile_expression('t.__dict__')"],
    ["import sympy\nsympy.sympify(\"__import__('sys').modules\")"],
    ["import yaml\nyaml.load('!!python/name:grader.student.serve.kernel_case', yaml.FullLoader)"],
    ["import numpy as np\nnp.load('x.npy', None, True)"],
    ["import torch\nns = 'at' + 'en'\nlib = torch.library.Library(ns, 'IMPL')"],
    ["import torch, triton\ninit = triton.Config.__init__\ninit(torch.cuda, {'a': 1}, num_warps=8)"],
])
def test_a_fifth_red_teams_routes_are_refused(cells):
    assert any(_notebook_refused(cells)), cells


# The CPU interpreter's arithmetic is Python in the student's process (red team of 2026-12-02: its builder's
# subtraction made an addition passed a wrong vector add in a notebook's own check): every route to change
# it, the builder, its instance, NumPy's functions it calls or Triton's tensor operators, is an assignment
# to an object that is not the notebook's own, or a reach into a dunder, and refused before grading.
@pytest.mark.parametrize("cells", [
    ["from triton.runtime.interpreter import InterpreterBuilder\n"
     "InterpreterBuilder.create_fsub = InterpreterBuilder.create_fadd"],
    ["import triton.runtime.interpreter as I\nb = I.interpreter_builder\nb.create_fsub = b.create_fadd"],
    ["import triton.runtime.interpreter as I\nfor I.InterpreterBuilder.create_fsub in [I.InterpreterBuilder.create_fadd]:\n"
     "    pass"],
    ["import triton.runtime.interpreter as I\ntype.__setattr__(I.InterpreterBuilder, 'create_fsub', print)"],
    ["import triton.runtime.interpreter as I\n"
     "class B(I.InterpreterBuilder):\n    def create_fsub(self, a, b):\n        return self.create_fadd(a, b)\n"
     "I.interpreter_builder = B()"],
    ["import numpy as np\nnp.subtract = np.add"],
    ["import numpy\nnumpy.core.umath.subtract = numpy.add"],
    ["import triton.language as tl\nT = tl.tensor\nT.__sub__ = T.__add__"],
])
def test_the_interpreters_arithmetic_cannot_be_changed(cells):
    assert any(_notebook_refused(cells)), cells


def test_wrap_triton_and_a_written_out_namespace_still_pass():
    cells = ["import torch, triton\nfrom torch.library import triton_op\n@torch.library.triton_op('mylib::add', "
             "mutates_args={})\ndef add(x: torch.Tensor) -> torch.Tensor:\n    out = torch.empty_like(x)\n"
             "    torch.library.wrap_triton(k)[(1,)](x, out)\n    return out"]
    assert not any(_notebook_refused(cells)), _notebook_refused(cells)


@pytest.mark.parametrize("cells", [
    ["import triton\nimport triton.language as tl\n@triton.jit\ndef k(x_ptr, n, BLOCK: tl.constexpr):\n"
     "    offs = tl.arange(0, BLOCK)\n    x = tl.load(x_ptr + offs, offs < n, 0.0)\n"
     "    y = triton.language.load(x_ptr + offs, offs < n, 0.0)"],
    ["from triton import language as tl", "def k(p, m):\n    return tl.load(p, m, 0.0)"],
    ["from triton.experimental.gluon import language as gl", "def k(p, m):\n    return gl.load(p, m, 0.0)"],
])
def test_a_triton_load_with_positional_mask_and_other_passes(cells):
    assert not any(_notebook_refused(cells)), _notebook_refused(cells)


# The `.load` exemption trusts what the whole notebook binds the name to, not its spelling.
@pytest.mark.parametrize("cells", [
    ["import numpy as tl\ntl.load('x.npy', None, True)"],
    ["import triton.language as tl", "import numpy as tl", "tl.load('x.npy', None, True)"],
    ["import triton.language as tl", "def f(tl):\n    return tl.load('x.npy', None, True)"],
    ["import numpy as language\nlanguage.load('x.npy', None, True)"],
    ["import numpy as triton\ntriton.language.load('x.npy', None, True)"],
])
def test_a_load_named_like_tritons_is_refused(cells):
    assert any("third positional argument" in p for ps in _notebook_refused(cells) for p in ps), \
        _notebook_refused(cells)


def test_logging_formatter_passes_only_where_logging_is_the_logging_module():
    honest = ["import logging\nh = logging.StreamHandler()\nh.setFormatter(logging.Formatter('%(message)s'))"]
    assert not any(_notebook_refused(honest)), _notebook_refused(honest)
    for elsewhere in ["import string as logging", "logging = __import__('string')", "def f(logging):\n    pass"]:
        cells = [elsewhere, "import logging\nclass Grab(logging.Formatter):\n    def format_field(self, v, s):\n"
                 "        self.got = v\n        return ''"]
        assert any("uses Formatter" in p for p in _notebook_refused(cells)[1]), (elsewhere, _notebook_refused(cells))
    assert any("uses Formatter" in p for p in _notebook_refused(["import string\nstring.Formatter()"])[0])


# Everyday words name the notebook's own objects, unless some cell of the notebook imports them.
def test_an_everyday_word_is_refused_as_a_name_where_the_notebook_imports_it():
    assert not any(_notebook_refused(["def profile(fn):\n    return fn()", "profile(print)"]))
    refused = _notebook_refused(["import cProfile as profile", "profile.run('print(1)')"])
    assert any("uses profile" in p for p in refused[1]), refused


@pytest.mark.parametrize("source", [
    # capitalised tensors (Q, K, V, W are common in attention code) given a dtype: the red team's honest
    # answer `W = w.contiguous(); kernel[grid](x, W.to(torch.float32), ...)` was refused as a library
    # class's method called with a module
    "import torch\nW = torch.ones(3)\nW32 = W.to(torch.float32)",
    "import torch\nQ = torch.ones(4)\nbits = Q.view(torch.int32)",
    "import triton.language as tl\nimport torch\nX = torch.ones(2)\ny = X.to(torch.bfloat16)",
    "import numpy as np\nimport torch\nA = torch.ones(2)\nB = A.numpy().astype(np.float32)",
    "import torch\nfrom torch import bfloat16\nW = torch.ones(3)\nW16 = W.to(bfloat16)",
    "import torch\nfrom numpy import float32\nA = torch.ones(2)\nB = A.numpy().astype(float32)",
])
def test_a_capitalised_tensor_given_a_dtype_is_left_alone(source):
    facts = code_rules.NotebookFacts.of([source])
    assert code_rules.check_cell(source, facts).problems == []


@pytest.mark.parametrize("source", [
    "import torch\ntorch.nn.Module.train(torch.cuda)",
    "import torch\nM = torch.nn.Module\nM.register_buffer(torch, 'x', None)",
    "import torch\nW = torch.nn.Module\nW.train(torch.backends.cudnn)",
    "import torch as T\nW = T.nn.Module\nW.train(T.cuda)",
    "import os\nimport torch\nW = torch.nn.Module\nW.train(os.path)",          # a root the rules do not look up
    "import torch\nfrom torch import cuda\nW = torch.nn.Module\nW.train(cuda)",
    "import torch\nimport torch.nn as nn\nnn.Module.train(nn.functional)",
])
def test_a_library_class_s_method_on_a_module_is_still_refused_with_the_notebooks_facts(source):
    facts = code_rules.NotebookFacts.of([source])
    assert any("a method of a library class" in p for p in code_rules.check_cell(source, facts).problems)


# Jupyter's machinery runs code past the rules: the shell runs strings (`ex`, `run_cell`), and its threads run
# what they are handed (ipykernel's IOPub thread's `schedule`), where the grader's watch of the kernel's
# thread does not look (open items of the fourth red team, docs/threat-model.md).
@pytest.mark.parametrize("cells", [
    ["from IPython import InteractiveShell\nInteractiveShell.instance().ex('import torch')"],
    ["import IPython\nIPython.core.interactiveshell.InteractiveShell.instance().ex('x = 1')"],
    ["from IPython.core.interactiveshell import InteractiveShell as S\nS.instance().run_cell('x = 1')"],
    ["from IPython import Application\nApplication.instance().shell.ex('x = 1')"],
    ["from traitlets.config import Application\nApplication.instance().shell.ex('x = 1')"],
    ["import ipykernel.iostream\nipykernel.iostream.IOPubThread"],
    ["import sys, torch\nk = sys.modules['ipykernel.kernelapp']"],
])
def test_jupyters_shell_and_threads_cannot_be_reached(cells):
    assert any(_notebook_refused(cells)), cells


def test_ipython_display_is_still_allowed():
    cells = ["from IPython.display import display, Markdown\ndisplay(Markdown('**done**'))",
             "import IPython.display\nIPython.display.clear_output(wait=True)"]
    assert not any(_notebook_refused(cells)), _notebook_refused(cells)


def test_a_variable_named_like_a_refused_everyday_module_is_allowed():
    assert not any(_notebook_refused(["comm = 4\nsite = comm * 2"])), _notebook_refused(["comm = 4\nsite = comm * 2"])
    assert any(_notebook_refused(["import comm\ncomm.create_comm('x')"]))
