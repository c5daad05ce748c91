"""Cheats found by red-teaming the grader. Each test builds one and asserts that the grader rejects it.
Every cheat here is refused: a new one that grader.check misses would be marked xfail(strict=True),
with the reason and what stops it elsewhere, so that a fix shows up as an XPASS.

Three ways to run a cheat, from fastest:
- `grader.check` called directly, for cheats that need no notebook trick and leave no state behind;
- `_notebook_scores`: the filled release, edited as a student would, sanitized by the real
  `sanitize_notebook` (so the submission rules apply), then run cell by cell in a fresh IPython shell in
  a process of its own (tests/cell_runner.py) with NBGRADER_EXECUTION=autograde, test cells taken from solutions/ (hidden tests in),
  scored as nbgrader would (a graded cell that raises scores 0). This is the student's own process
  alone, the layer that also serves interactive checks; at grading time the checker decides graded
  cells (tests/test_checker.py grades cheats through it);
- the real pipeline (sanitize_day, batch.autograde_day, nbgrader), for cheats against the batch itself.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import nbformat
import psutil
import pytest
import torch
import triton
import triton.language as tl

import grader
import cell_runner
import classroom
from adversarial_class import cell, filled, insert_before
from conftest import DEVICE, REPO, nbgrader, needs_gpu, require_sandbox
from grader.pipeline import batch, code_rules, sandbox, submissions
from grader.compare import CheckFailed

xfail = pytest.mark.xfail


# ---------------------------------------------------------------------------------------------------
# Student functions checked directly with grader.check

@triton.jit
def _token_kernel(out_ptr, n, BLOCK_SIZE: tl.constexpr):
    pass  # launched for show: writes nothing


def _token_launch():
    _token_kernel[(1,)](torch.empty(16), 1, BLOCK_SIZE=16)


def _add_numpy(x, y):
    _token_launch()
    return torch.from_numpy(x.numpy() + y.numpy())


def _add_python(x, y):
    _token_launch()
    return torch.tensor([a + b for a, b in zip(x.tolist(), y.tolist())], dtype=x.dtype)


def _add_dlpack(x, y):
    import numpy as np
    _token_launch()
    return torch.from_numpy(np.from_dlpack(x) + np.from_dlpack(y))


def _add_in_the_grid_function(x, y):
    out = torch.empty_like(x)

    def grid(meta):               # Triton calls it during the launch, where the guard used to look away
        out.copy_(x + y)
        return (1,)
    _token_kernel[grid](out, 1, BLOCK_SIZE=16)
    return out


def _add_in_a_thread(x, y):
    import concurrent.futures
    _token_launch()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:   # the dispatch mode is thread-local
        return pool.submit(torch.add, x, y).result()


_BOX = {}


def _python_side():
    _BOX["out"].copy_(_BOX["x"] + _BOX["y"])   # runs inside the launch, where the guard looks away
    return 0


@triton.jit
def _callback_kernel(out_ptr, n, BLOCK_SIZE: tl.constexpr):
    _python_side()   # the interpreter runs a kernel's body as Python: any Python function can be called


def _add_from_kernel_callback(x, y):
    out = torch.empty_like(x)
    _BOX.update(x=x, y=y, out=out)
    _callback_kernel[(1,)](out, 1, BLOCK_SIZE=16)
    return out


def _sum_into_box(*args, **kwargs):
    _BOX["out"].copy_(_BOX["x"] + _BOX["y"])   # PyTorch computing, called by Triton during the launch


@triton.jit
def _hooked_kernel(out_ptr, n, BLOCK_SIZE: tl.constexpr):
    pass


# Triton's CPU interpreter has pre-run hooks from 3.4 on; before that the route does not exist there.
if hasattr(_hooked_kernel, "add_pre_run_hook"):
    _hooked_kernel.add_pre_run_hook(lambda *args, **kwargs: _BOX.get("hook", lambda: None)())


def _add_in_a_pre_run_hook(x, y):
    out = torch.empty_like(x)
    _BOX.update(x=x, y=y, out=out, hook=_sum_into_box)
    try:
        _hooked_kernel[(1,)](out, 1, BLOCK_SIZE=16)
    finally:
        _BOX.pop("hook")
    return out


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": 16}, pre_hook=_sum_into_box)], key=["n"])
@triton.jit
def _autotuned_kernel(out_ptr, n, BLOCK_SIZE: tl.constexpr):
    pass


@triton.heuristics({"BLOCK_SIZE": lambda args: (_sum_into_box(), 16)[1]})
@triton.jit
def _heuristic_kernel(out_ptr, n, BLOCK_SIZE: tl.constexpr):
    pass


def _add_launching(kernel):
    """An add whose sum PyTorch makes in a hook of `kernel` that Triton calls during the launch."""
    def add(x, y):
        out = torch.empty_like(x)
        _BOX.update(x=x, y=y, out=out)
        kernel[(1,)](out, 1)
        return out
    return add


def _prune_by_summing(configs, named_args, **kwargs):
    _sum_into_box()             # an autotuner's early_config_prune, run inside Autotuner.run
    return configs[:1]


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": 16}), triton.Config({"BLOCK_SIZE": 32})], key=["n"],
                 prune_configs_by={"early_config_prune": _prune_by_summing})
@triton.jit
def _pruned_kernel(out_ptr, n, BLOCK_SIZE: tl.constexpr):
    pass


def _bench_by_summing(kernel_call, quantiles=None):
    _sum_into_box()             # an autotuner's do_bench, run inside Autotuner.run
    return [1.0, 1.0, 1.0] if quantiles else 1.0


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": 16}), triton.Config({"BLOCK_SIZE": 32})], key=["n"],
                 do_bench=_bench_by_summing)
@triton.jit
def _benched_kernel(out_ptr, n, BLOCK_SIZE: tl.constexpr):
    pass


class _SummingDtype:
    """A launch argument whose `dtype`, read by Triton while it builds the autotuner's key, computes."""
    @property
    def dtype(self):
        _sum_into_box()
        return "float32"


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": 16}), triton.Config({"BLOCK_SIZE": 32})], key=["n"])
@triton.jit
def _keyed_kernel(out_ptr, n, probe, BLOCK_SIZE: tl.constexpr):
    pass


def _add_in_an_argument_property(x, y):
    out = torch.empty_like(x)
    _BOX.update(x=x, y=y, out=out, calls=_BOX.get("calls", 0) + 1)
    _keyed_kernel[(1,)](out, _BOX["calls"], _SummingDtype())
    return out


def _add_via_storage(x, y):
    import numpy as np
    _token_launch()
    a = np.frombuffer(bytes(x.untyped_storage()), dtype=np.float32)
    b = np.frombuffer(bytes(y.untyped_storage()), dtype=np.float32)
    return torch.from_numpy(a + b)


def _add_via_printed_text(x, y):
    _token_launch()
    torch.set_printoptions(threshold=10**9, precision=10)
    try:
        text = repr(x) + "|" + repr(y)
    finally:
        torch.set_printoptions(profile="default")
    a, b = (eval(part.replace("tensor", "").strip()) for part in text.split("|"))
    return torch.tensor([p + q for p, q in zip(a, b)], dtype=x.dtype)


def _add_by_replacing_an_operator(x, y):
    # aten::zeros_like given a kernel of the notebook's own, which runs below the dispatch mode
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("zeros_like", lambda t, **kwargs: torch.ops.aten.add.Tensor(t, _BOX["y"]), "CPU")
    _BOX["lib"] = lib
    _BOX["y"] = y
    _token_launch()
    return torch.zeros_like(x)


class _SummingStorage:
    """Passes for a tensor where Triton reads one; its storage, asked for inside the launch, computes."""

    def __init__(self, out):
        self.out, self.data, self.dtype, self.shape, self.device = out, out.data, out.dtype, out.shape, out.device

    def data_ptr(self):
        return self.out.data_ptr()

    def new_empty(self, *args, **kwargs):
        return self.out.new_empty(*args, **kwargs)

    def storage_offset(self):
        return self.out.storage_offset()

    def size(self):
        return self.out.size()

    def stride(self, *args):
        return self.out.stride(*args)

    def untyped_storage(self):
        _sum_into_box()
        return self.out.untyped_storage()


def _add_through_a_reinterpreted_object(x, y):
    out = torch.empty_like(x)
    _BOX.update(x=x, y=y, out=out)
    _token_kernel[(1,)](triton.reinterpret(_SummingStorage(out), tl.float32), 1, BLOCK_SIZE=16)
    return out


def _add_with_a_kept_method(x, y):
    _token_launch()
    as_list = _KEPT_TOLIST     # taken from torch.Tensor when the cell ran, before any graded call
    return torch.tensor([a + b for a, b in zip(as_list(x), as_list(y))], dtype=x.dtype)


_KEPT_TOLIST = torch.Tensor.tolist


def _add_element_by_element_in_python(x, y):
    out = torch.empty_like(x)
    _token_launch()
    return out.map2_(x, y, lambda _, a, b: a + b)


def _add_with_keywords_for_the_guard(x, y):
    out = torch.empty_like(x)
    # the guard's wrappers once took their settings as keyword arguments a caller could override
    _token_kernel[(1,)](out, 1, BLOCK_SIZE=16, _tritons=True,
                        _original=lambda self, *args, **kwargs: out.copy_(x + y))
    return out


def _softmax_numpy(x):
    import numpy as np
    _token_launch()
    a = x.numpy().astype(np.float64)
    e = np.exp(a - a.max(-1, keepdims=True))
    return torch.from_numpy(e / e.sum(-1, keepdims=True)).to(x.dtype)


@pytest.mark.parametrize("key, fn", [
    pytest.param("day1.vector_add", _add_numpy, id="numpy"),
    pytest.param("day2.softmax", _softmax_numpy, id="numpy-softmax"),
    pytest.param("day1.vector_add", _add_python, id="python-lists"),
    pytest.param("day1.vector_add", _add_dlpack, id="numpy-from-dlpack"),
    pytest.param("day1.vector_add", _add_in_the_grid_function, id="grid-function"),
    pytest.param("day1.vector_add", _add_in_a_pre_run_hook, id="pre-run-hook",
                 marks=pytest.mark.skipif(not hasattr(_hooked_kernel, "add_pre_run_hook"),
                                          reason="this Triton's interpreter has no pre-run hooks")),
    pytest.param("day1.vector_add", _add_launching(_autotuned_kernel), id="autotune-pre-hook"),
    pytest.param("day1.vector_add", _add_launching(_heuristic_kernel), id="heuristic"),
    pytest.param("day1.vector_add", _add_in_a_thread, id="thread"),
    pytest.param("day1.vector_add", _add_from_kernel_callback, id="kernel-callback"),
    pytest.param("day1.vector_add", _add_launching(_pruned_kernel), id="autotune-prune"),
    pytest.param("day1.vector_add", _add_launching(_benched_kernel), id="autotune-do-bench"),
    pytest.param("day1.vector_add", _add_in_an_argument_property, id="argument-property"),
    pytest.param("day1.vector_add", _add_via_storage, id="storage-bytes"),
    pytest.param("day1.vector_add", _add_through_a_reinterpreted_object, id="reinterpreted-object"),
    pytest.param("day1.vector_add", _add_with_a_kept_method, id="kept-method"),
    pytest.param("day1.vector_add", _add_element_by_element_in_python, id="map2"),
    pytest.param("day1.vector_add", _add_with_keywords_for_the_guard, id="guard-keywords"),
])
def test_the_answer_computed_outside_triton_is_refused(key, fn):
    # refused for that, not a crash (on a GPU some of these CPU-shaped cheats simply fail)
    # (a kernel's Python callback, or an argument of the student's class, is also what Triton's compiler
    # refuses: either rule may say it first)
    with pytest.raises(CheckFailed, match=None if DEVICE.is_gpu else
                       "computed with PyTorch|Python that is not Triton|compiler rejects it"):
        grader.check(key, fn, hidden=True)


def test_a_cell_that_reads_the_process_memory_is_not_run():
    source = 'with open("/proc/self/mem", "rb") as mem:\n    mem.seek(x.data_ptr())'
    assert "names /proc/self/mem (the process's own memory)" in code_rules.check_cell(source).problems


def test_an_answer_parsed_from_printed_tensors_fails():
    # A print during a graded call shows a summary, whatever print options the notebook set.
    with pytest.raises(CheckFailed):
        grader.check("day1.vector_add", _add_via_printed_text, hidden=True)


@pytest.mark.skipif(DEVICE.is_gpu, reason="replaces the CPU kernel of aten::zeros_like")
def test_an_answer_from_a_replaced_pytorch_operator_is_refused():
    # Registering the kernel changes PyTorch for the rest of this process: run it in one of its own.
    code = textwrap.dedent(f"""
        import os, sys
        os.environ["TRITON_INTERPRET"] = "1"
        sys.path[:0] = [{str(REPO / 'tests')!r}, {str(REPO)!r}]
        import grader
        grader.setup(quiet=True)
        import test_redteam
        from grader.compare import CheckFailed
        try:
            grader.check("day1.vector_add", test_redteam._add_by_replacing_an_operator, hidden=True)
        except CheckFailed as e:
            print("REFUSED", e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "REFUSED" in out.stdout and "aten::zeros_like" in out.stdout, out.stdout + out.stderr


# ---------------------------------------------------------------------------------------------------
# Notebooks: sanitized as at grading, then run in IPython as nbgrader's kernel would

def _notebook_scores(tmp_path, name="vector_add", day="day1", edits=None, answer=None, before=(), after=()):
    """{grade_id: points earned} for the filled notebook with the student's changes, graded on CPU."""
    nb = filled(day, name, edits)
    if answer is not None:
        cell(nb, answer[0]).source = answer[1]
    first_answer = next(c.metadata["nbgrader"]["grade_id"] for c in nb.cells
                        if c.metadata.get("nbgrader", {}).get("solution"))
    for source in before:
        insert_before(nb, first_answer, source)
    for source in after:
        nb.cells.append(nbformat.v4.new_code_cell(source))
    release = classroom.untouched(day, name)
    clean, _ = submissions.sanitize_notebook(nbformat.writes(nb), release)
    solution = nbformat.read(REPO / "solutions" / day / f"{name}.ipynb", as_version=4)
    hidden = {c.metadata["nbgrader"]["grade_id"]: c.source for c in solution.cells
              if c.metadata.get("nbgrader", {}).get("grade")}
    code = [c for c in clean.cells if c.cell_type == "code"]
    sources = [hidden.get(c.metadata.get("nbgrader", {}).get("grade_id"), c.source) for c in code]
    # The course first, then whatever the environment already puts on the path (a GPU machine without
    # network may keep the Jupyter stack there).
    env = dict(os.environ, NBGRADER_EXECUTION="autograde",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    ok = cell_runner.run_cells(sources, tmp_path, env)
    return {c.metadata["nbgrader"]["grade_id"]: (c.metadata["nbgrader"]["points"] if passed else 0)
            for c, passed in zip(code, ok) if c.metadata.get("nbgrader", {}).get("grade")}


WRONG_ADD = {"tl.store(out_ptr + offsets, x + y, mask=mask)": "tl.store(out_ptr + offsets, x - y, mask=mask)"}
TORCH_ADD_TAIL = '''

def add(x, y):
    add_kernel[(1,)](x, y, torch.empty(16, dtype=x.dtype, device=x.device), 1, BLOCK_SIZE=16)
    return x + y
'''


def test_the_harness_scores_honest_and_wrong_work_as_nbgrader_does(tmp_path):
    (tmp_path / "right").mkdir()
    (tmp_path / "wrong").mkdir()
    right = _notebook_scores(tmp_path / "right")
    assert right["test_add_correct"] == 3
    if not grader.current().is_gpu:
        assert right["test_add_speed"] == 0   # no GPU, during autograde: the speed cell scores 0
    assert _notebook_scores(tmp_path / "wrong", edits=WRONG_ADD)["test_add_correct"] == 0


# A wrong kernel plus one cell of the student's own, placed before the answer. Each cell keeps to the
# submission rules as code_rules sees them, yet changes the grader.
WRONG_KERNEL_CHEATS = [
    pytest.param('%timeit -n1 -r1 exec("grader.check = lambda *a, **k: None")', id="timeit-options"),
    pytest.param('%%timeit -n1 -r1 exec("grader.check = lambda *a, **k: None")\npass', id="cell-timeit-setup"),
    pytest.param('time exec("grader.check = lambda *a, **k: None")', id="automagic"),
    pytest.param('checks = grader.student.checks\nchecks._compare_outputs = lambda *a, **k: None', id="alias-store"),
    pytest.param('def patch(m):\n    m._compare_outputs = lambda *a, **k: None\npatch(grader.student.checks)', id="param-store"),
    pytest.param('grader.compare.TOLERANCES[torch.float32] = (float("inf"), 0.0)', id="subscript-store"),
    pytest.param('grader.exercises.get("day1.vector_add").tolerances.update({torch.float32: (float("inf"), 0.0)})',
                 id="spec-dict-update"),
    pytest.param('importlib.import_module("builtins").exec("grader.check = lambda *a, **k: None")',
                 id="colab-cell-importlib"),
    pytest.param('getattr(grader.student.checks.check, "__glo" + "bals__")["_compare_outputs"] = lambda *a, **k: None',
                 id="getattr-dunder"),
    pytest.param('s = os.sys\ns.modules["grader.student.checks"]._compare_outputs = lambda *a, **k: None', id="os-sys-modules"),
]


@pytest.mark.parametrize("cheat", WRONG_KERNEL_CHEATS)
def test_a_wrong_kernel_scores_0_whatever_cell_comes_before_it(tmp_path, cheat):
    assert _notebook_scores(tmp_path, edits=WRONG_ADD, before=[cheat])["test_add_correct"] == 0


# PyTorch computing the sum (a token launch for show), with a way around the guard in the answer cell.
TORCH_CHEATS = [
    pytest.param(textwrap.dedent('''
        _C = getattr(torch, "_C")

        def add(x, y):
            add_kernel[(1,)](x, y, torch.empty(16, dtype=x.dtype, device=x.device), 1, BLOCK_SIZE=16)
            with _C._DisableTorchDispatch():
                return x + y
        '''), id="disable-torch-dispatch"),
    pytest.param(textwrap.dedent('''
        record_class = grader.student.guard.CallRecord
        record_class.forbidden = lambda self: []
        ''') + TORCH_ADD_TAIL, id="callrecord-forbidden"),
    pytest.param(textwrap.dedent('''
        guard = grader.student.guard
        guard.ALLOWED_OPS = guard.ALLOWED_OPS | {"add"}
        ''') + TORCH_ADD_TAIL, id="allowed-ops"),
    pytest.param(textwrap.dedent('''
        class Sneaky(torch.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                if func is torch.isclose:
                    return torch.ones(args[0].shape, dtype=torch.bool)
                return getattr(super(), "__torch_" + "function__")(func, types, args, kwargs or {})

        def add(x, y):
            out = torch.zeros_like(x)
            add_kernel[(1,)](x, y, torch.empty(16, dtype=x.dtype, device=x.device), 1, BLOCK_SIZE=16)
            return out.as_subclass(Sneaky)
        '''), id="tensor-subclass"),
    pytest.param(textwrap.dedent('''
        frames = grader.student.integrity.inspect

        def add(x, y):
            add_kernel[(1,)](x, y, torch.empty(16, dtype=x.dtype, device=x.device), 1, BLOCK_SIZE=16)
            f = frames.currentframe()
            while "expected" not in f.f_locals:
                f = f.f_back
            return f.f_locals["expected"][0].clone()
        '''), id="read-expected-from-frame"),
]


@pytest.mark.parametrize("answer", TORCH_CHEATS)
def test_an_answer_that_does_not_compute_with_triton_scores_0(tmp_path, answer):
    source = cell(filled("day1", "vector_add"), "add").source + "\n\n" + answer
    assert _notebook_scores(tmp_path, answer=("add", source))["test_add_correct"] == 0


def test_speed_cells_score_0_without_a_gpu_even_if_the_student_unsets_nbgrader_execution(tmp_path):
    if grader.current().is_gpu:
        pytest.skip("about grading without a GPU")
    scores = _notebook_scores(tmp_path, before=['os.environ.pop("NBGRADER_EXECUTION", None)'])
    assert scores["test_add_speed"] == 0


# ---------------------------------------------------------------------------------------------------
# Against the batch: the real pipeline

def _grade(root, students: dict, timeout_s=120, sanitize=True):
    # sanitize=False: what the operating system stops is tested by code the submission rules would refuse
    # (os.fork), standing for a route to a process that the rules do not know.
    nbgrader(root, "generate_assignment", "day1", "--force")
    for student, nb in students.items():
        classroom.submit(root, student, "day1", "vector_add", nb)
    if sanitize:
        submissions.sanitize_day(root / "grading" / "submitted", root / "exercises" / "day1", "day1")
    runs = batch.autograde_day(root, "day1", timeout_s=timeout_s, students=list(students), log=lambda *a: None)
    return {r.student: r for r in runs if r.notebook == "vector_add"}, classroom.exported(root)


# Paths from a kernel's working folder, grading/autograded/<student>/day1: what a snooping student tries.
SNOOPED = {"classmates' submissions": "../../../submitted", "the gradebook": "../../../gradebook.db",
           "the feedback": "../../../feedback", "the solutions": "../../../../solutions/day1/vector_add.ipynb",
           "a classmate's autograded notebook": "../../aaa_victim/day1/vector_add.ipynb",
           "the solutions of the grader's own checkout": str(REPO / "solutions" / "day1" / "vector_add.ipynb"),
           # the kernel imports a copy of the grader without them (sandbox.kernel_grader)
           "the hidden cases and prediction formulas": str(REPO / "grader" / "exercises" / "day1.py"),
           # the kernel's home is in the batch's scratch folder (~/..), beside what only the grader may use:
           "the gates that start notebooks": "~/../gates",
           "the fork server that starts nbgrader as root": "~/../server/nbgrader.sock",
           "the server that forks kernels as root": "~/../server/kernels.sock"}


def _vandal():
    vandal = filled("day1", "vector_add")
    insert_before(vandal, "add", textwrap.dedent('''
        import pathlib
        release = pathlib.Path("../../../../exercises/day1/vector_add.ipynb").read_text()
        for p in pathlib.Path("../../../submitted").glob("*/day1/vector_add.ipynb"):
            if "aaa_vandal" not in str(p):
                p.write_text(release)
        '''))
    return vandal


def _linker():
    linker = filled("day1", "vector_add")
    insert_before(linker, "add", textwrap.dedent('''
        import os
        os.unlink("vector_add.ipynb")
        os.symlink("../../../submitted/zzz_friend/day1/vector_add.ipynb", "vector_add.ipynb")
        print("LINKED")
        '''))
    return linker


def _snoop():
    snoop = filled("day1", "vector_add")
    # The process's own memory, by a path built at run time (the rules see only written-out paths):
    # closed by Landlock where the machine allows it (grader/pipeline/landlock.py).
    insert_before(snoop, "add", "try:\n    open('/'.join(['', 'proc', 'self', 'mem']), 'r+b').close()\n"
                  "    print('WROTE its own memory')\nexcept OSError as e:\n    print('REFUSED its own memory', type(e).__name__)\n")
    insert_before(snoop, "add", "import pathlib\n" + "".join(
        f"try:\n    p = pathlib.Path({path!r}).expanduser()\n    list(p.iterdir()) if p.is_dir() else p.read_bytes()\n"
        f"    print('READ', {what!r})\nexcept OSError as e:\n    print('REFUSED', {what!r}, type(e).__name__)\n"
        for what, path in SNOOPED.items()))
    return snoop


def _own_graded_cell():
    # A red team's extra cell with nbgrader metadata of a graded test (50 points) but no grade_id: nbgrader
    # raised KeyError and the whole notebook scored 0. sanitize keeps it as a plain cell.
    student = filled("day1", "vector_add")
    student.cells.insert(student.cells.index(cell(student, "test_add_correct")), nbformat.v4.new_code_cell(
        'print("hi")', metadata={"nbgrader": {"grade": True, "solution": False, "points": 50, "locked": False}}))
    return student


@pytest.fixture(scope="module")
def attacked_class(tmp_path_factory):
    """One sanitized batch of day 1 (one nbgrader and kernel server start, not four): each aaa_/zzz_ pair is
    a notebook that attacks a classmate graded after it and the classmate; rt_meta keeps a graded cell of
    its own. Where kernels cannot be sandboxed (the tests of those attacks skip), rt_meta alone."""
    root = classroom.copy_course(tmp_path_factory.mktemp("attacked") / "course")
    (root / "grading" / "feedback").mkdir(parents=True)
    students = {"rt_meta": _own_graded_cell()}
    if sandbox.unavailable() is None:
        students.update(aaa_vandal=_vandal(), zzz_victim=filled("day1", "vector_add"),
                        aaa_linker=_linker(), zzz_friend=classroom.untouched("day1", "vector_add"),
                        aaa_victim=filled("day1", "vector_add"), zzz_snoop=_snoop())
    runs, scores = _grade(root, dict(sorted(students.items())))
    return root, runs, scores


@pytest.mark.batch
def test_a_notebook_cannot_change_another_students_submission(attacked_class):
    # Each kernel runs as a user of its own where the grader is root (the container; CI): grader/pipeline/sandbox.py.
    require_sandbox()
    _, _, scores = attacked_class
    # Both hand in right answers: the victim keeps full marks (3 without a GPU, speed points with one).
    assert scores["zzz_victim"] == scores["aaa_vandal"] > 0
    assert DEVICE.is_gpu or scores["zzz_victim"] == 3.0


@pytest.mark.batch
def test_a_notebook_cannot_make_the_grader_write_through_a_link_in_its_folder(attacked_class):
    # The kernel has its notebook's folder, where nbgrader (root) later writes the graded notebook. A red
    # team's notebook replaced itself there with a link to a classmate's blank submission, which nbgrader
    # then overwrote with the cheat's graded answers: the classmate scored full marks. The folder is taken
    # back, links removed, before nbgrader writes (grader/pipeline/sandbox.py, take_back).
    require_sandbox()
    root, _, scores = attacked_class
    assert "LINKED" in _printed(root, "aaa_linker")       # the link was made, and did nothing
    assert scores["zzz_friend"] == 0 and scores["aaa_linker"] > 0
    graded = root / "grading" / "autograded" / "aaa_linker" / "day1" / "vector_add.ipynb"
    assert graded.is_file() and not graded.is_symlink()


@pytest.mark.batch
def test_a_notebook_cannot_read_classmates_work_the_gradebook_or_the_solutions(attacked_class):
    require_sandbox()
    root, _, scores = attacked_class
    assert scores["zzz_snoop"] == scores["aaa_victim"] > 0         # the snooping does not stop its own run
    assert DEVICE.is_gpu or scores["aaa_victim"] == 3.0
    printed = _printed(root, "zzz_snoop")
    for what in SNOOPED:
        assert f"REFUSED {what} PermissionError" in printed, printed
    # Where Landlock cannot be used (writes_confined says why), file modes alone apply: a started kernel
    # wrote its own memory there; a kernel forked from the batch's kernel server was refused it on an H200
    # machine (its /proc files stayed root's, though it is marked dumpable as a started kernel is).
    if sandbox.writes_confined() is None:
        assert "REFUSED its own memory PermissionError" in printed, printed
    else:
        assert "WROTE its own memory" in printed or "REFUSED its own memory PermissionError" in printed, printed
    # Afterwards the workspace is open again to the instructor's own account, as before grading.
    grading = root / "grading"
    for path in (grading, grading / "submitted", grading / "gradebook.db", grading / "autograded" / "zzz_snoop" / "day1"):
        assert path.stat().st_mode & 0o004, path


def test_a_detached_child_process_cannot_hold_the_batch_past_the_time_limit(course_copy):
    nb = filled("day1", "vector_add")
    # Sleeps 60 s then kills itself (a real one would sleep forever and stall the whole batch); the notebook
    # itself ends well before (a GPU's speed checks included).
    insert_before(nb, "add", textwrap.dedent('''
        import os, time
        if os.fork() == 0:
            os.setsid()
            time.sleep(60)
            os.kill(os.getpid(), 9)
        print("FORKED")
        '''))
    runs, _ = _grade(course_copy, {"rt_stall": nb}, timeout_s=45, sanitize=False)
    assert runs["rt_stall"].status == "graded" and runs["rt_stall"].seconds < 50, runs["rt_stall"]
    assert "FORKED" in _printed(course_copy, "rt_stall")


def _printed(root, student) -> str:
    graded = nbformat.read(root / "grading" / "autograded" / student / "day1" / "vector_add.ipynb", 4)
    return "".join(o.get("text", "") or f"{o.get('ename')}: {o.get('evalue')}\n" * (o.get("output_type") == "error")
                   for c in graded.cells if c.cell_type == "code" for o in c.outputs)


def test_a_notebook_forks_and_allocates_only_so_far_and_all_it_leaves_running_is_killed(course_copy, monkeypatch):
    # A kernel's user may have at most GRADER_PROCESS_LIMIT processes and threads at once and
    # GRADER_MEMORY_LIMIT_GIB of memory for a process's data (a MemoryError in the cell beyond it), and
    # every process of that user is killed when its notebook ends, its files in /tmp and /dev/shm removed.
    # A process that keeps forking and exiting (a new pid every moment, in a session of its own) slips
    # through a walk of the process tree; one that kills every other process of its user once its kernel
    # has ended killed a killer that was still starting (a red team's). Neither escapes now.
    require_sandbox()
    # (A kernel on a GPU machine has more threads of its own: torch's pools, CUDA's, Triton's compilers.)
    limit = 600 if DEVICE.is_gpu else 150
    monkeypatch.setenv("GRADER_PROCESS_LIMIT", str(limit))
    monkeypatch.setenv("GRADER_MEMORY_LIMIT_GIB", "3")
    nb = filled("day1", "vector_add")
    insert_before(nb, "add", textwrap.dedent('''
        import os, sys, time
        print("KERNEL USER", os.getuid(), flush=True)
        try:
            hoard = bytearray(4 * 2**30)
            print("MEMORY GRANTED")
        except MemoryError:
            print("MEMORY REFUSED")
        for folder in ("/tmp", "/dev/shm"):   # files in the shared temporary folders (disk, memory)
            with open(f"{folder}/left-by-{os.getuid()}", "wb") as f:
                f.write(bytes(2**20))
        kernel = os.getpid()

        def kernel_ended():
            try:
                with open(f"/proc/{kernel}/stat") as f:
                    return f.read().rsplit(")", 1)[1].split()[0] in "ZX"
            except OSError:
                return True

        if os.fork() == 0:   # (a fork is a copy of the kernel: it must never return into it)
            try:
                os.setsid()
                while True:
                    try:
                        if os.fork() > 0:
                            os._exit(0)
                    except OSError:
                        pass
                    if kernel_ended():   # then kill every other process of this user: the batch's killer too
                        try:
                            os.kill(-1, 9)
                        except OSError:
                            pass
                    time.sleep(0.001)
            finally:
                os._exit(0)
        sleepers = []
        try:
            while len(sleepers) < LIMIT + 100:
                pid = os.fork()
                if pid == 0:
                    try:
                        time.sleep(600)
                    finally:
                        os._exit(0)
                sleepers.append(pid)
        except OSError as e:
            print("FORKS REFUSED AFTER", len(sleepers), type(e).__name__)
        for pid in sleepers:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        ''').replace("LIMIT", str(limit)))
    runs, scores = _grade(course_copy, {"rt_hopper": nb, "zz_classmate": filled("day1", "vector_add")},
                          timeout_s=90, sanitize=False)
    printed = _printed(course_copy, "rt_hopper")
    assert "FORKS REFUSED AFTER" in printed, printed
    uid = int(printed.split("KERNEL USER")[1].split()[0])
    refused = int(printed.split("FORKS REFUSED AFTER")[1].split()[0])
    assert uid >= sandbox.UID_BASE and refused < limit and "MEMORY REFUSED" in printed, printed
    left = [p.info for p in psutil.process_iter(["pid", "uids", "status"])
            if p.info["uids"] and uid in p.info["uids"] and p.info["status"] != psutil.STATUS_ZOMBIE]
    assert not left, left
    for folder in ("/tmp", "/dev/shm"):
        assert not os.path.exists(f"{folder}/left-by-{uid}")
    # The classmate graded beside it keeps full marks. (The hopper's own score is its business: each hop
    # leaves an exited process that the batch collects only after the notebook, and those count against
    # its limit, so on a GPU its own kernel could no longer start Triton's compiler and scored 0.)
    assert scores["zz_classmate"] > 0 and (DEVICE.is_gpu or scores["zz_classmate"] == 3.0), runs


# ---------------------------------------------------------------------------------------------------
# Speed on a GPU: what the kernel's side reports for the timed calls

def _timed_result(fn, tmp_path):
    """What the grader's clock says of fn's timed calls: {"ok": True} or {"ok": False, "message": why}."""
    from clock import time_with_the_clock
    measured, handed = time_with_the_clock(fn, tmp_path)
    if not handed["ok"]:
        return handed
    return {"ok": "error" not in measured, "message": measured.get("error", "")}


def _add_with_pytorch_when_unwatched(x, y):
    import math
    import kernels
    if math.isnan(torch.empty(1, device=x.device).item()):   # poisoned allocation: the guard is watching
        return kernels.add(x, y)
    kernels.add(x[:16], y[:16])                               # a launch, for show
    return torch.add(x, y)


@needs_gpu("the profiler sees GPU kernels")
def test_a_function_that_computes_with_pytorch_only_when_unwatched_gets_no_time(tmp_path):
    import kernels
    honest = _timed_result(kernels.add, tmp_path)
    assert honest["ok"], honest
    cheat = _timed_result(_add_with_pytorch_when_unwatched, tmp_path)
    print(cheat.get("message"))
    # the guard watches each timed call, and one more runs under the profiler: either says so
    assert not cheat["ok"] and ("not its Triton kernels" in cheat["message"]
                                or "computed with PyTorch" in cheat["message"]), cheat


@needs_gpu("timing runs on a GPU")
def test_a_function_that_skips_the_work_in_half_of_its_timed_runs_gets_no_time(tmp_path):
    # Skipping every other call would halve the median if nobody looked; the grader's clock checks every
    # timed call's output.
    import kernels
    cheat = _timed_result(kernels.add_every_other_call, tmp_path)
    print(cheat.get("message"))
    assert not cheat["ok"] and "checked by the grader's clock" in cheat["message"], cheat
    fingerprint = _timed_result(kernels.add_cached_by_fingerprint, tmp_path)  # never hits: honest work
    assert fingerprint["ok"], fingerprint


# ---------------------------------------------------------------------------------------------------
# What a notebook leaves to the grader: its output, its files, its cells' metadata

def _autograded(root, student):
    return root / "grading" / "autograded" / student / "day1"


def test_a_notebook_that_prints_hundreds_of_mb_keeps_only_so_much_and_the_batch_goes_on(course_copy, monkeypatch):
    # nbgrader's process (the grader's, root in the container) holds every output the kernel sends until it
    # writes the graded notebook: a red team's cell printed 400 MB, the process grew to 1.45 GB and wrote a
    # 400 MB notebook. The outputs are capped as they arrive (grader/pipeline/nbgrader_process.py,
    # GRADER_OUTPUT_LIMIT_MB, 10 MB unless set; 1 here): the rest is dropped, the notebook keeps its points.
    monkeypatch.setenv("GRADER_OUTPUT_LIMIT_MB", "1")
    flood = filled("day1", "vector_add")
    insert_before(flood, "test_add_correct", 'line = "x" * 1_000_000\nfor i in range(50):\n    print(line)\n')
    runs, scores = _grade(course_copy, {"rt_flood": flood, "zz_classmate": filled("day1", "vector_add")})
    assert (_autograded(course_copy, "rt_flood") / "vector_add.ipynb").stat().st_size < 2_000_000
    assert "output passed 1" in _printed(course_copy, "rt_flood")
    assert runs["rt_flood"].status == "graded" and "output capped" in runs["rt_flood"].reason, runs["rt_flood"]
    assert scores["rt_flood"] == scores["zz_classmate"] > 0 and (DEVICE.is_gpu or scores["zz_classmate"] == 3.0)


def test_output_past_the_graders_memory_fails_that_notebook_alone_and_says_why(course_copy, monkeypatch):
    # What the cap cannot see (it is off here; a message of hundreds of MB is read whole before it is cut):
    # each notebook's nbgrader may take GRADER_NBGRADER_MEMORY_GIB for its data (set by the batch from the
    # machine's memory; small here). Past it, that notebook scores 0 with the reason, at once (nbclient would
    # wait for the cell to end: this one prints for ever, and held its worker until the time limit), and the
    # next is graded. (Each print is flushed, so the text reaches nbgrader as fast as it can take it instead
    # of piling up in the kernel, which its own limit, GRADER_MEMORY_LIMIT_GIB, bounds.)
    from dataclasses import asdict
    from grader.pipeline import failure_feedback
    monkeypatch.setenv("GRADER_OUTPUT_LIMIT_MB", "0")
    # (1 GiB on the 2-core CPU machine; on an H200 machine, its system's Python 3.12, nbgrader's process could
    # not map sqlite3's library under 1 GiB)
    monkeypatch.setenv("GRADER_NBGRADER_MEMORY_GIB", "3" if DEVICE.is_gpu else "1")
    monkeypatch.setenv("GRADER_MEMORY_LIMIT_GIB", "4")
    flood = filled("day1", "vector_add")
    insert_before(flood, "test_add_correct",
                  'line = "x" * 10_000_000\nwhile True:\n    print(line, flush=True)\n')
    runs, scores = _grade(course_copy, {"rt_flood": flood, "zz_classmate": filled("day1", "vector_add")},
                          timeout_s=240)
    assert runs["rt_flood"].status == "failed" and runs["rt_flood"].seconds < 120, runs["rt_flood"]
    # Where nbgrader could still say so, the reason is memory. With the oldest torch, nbgrader once ended
    # with status 127 and no word of its own (its resident peak below 3/4 of the limit, which counts
    # reserved memory too): the notebook still fails alone, with nbgrader's exit as the reason.
    reason = runs["rt_flood"].reason
    assert "ran out of memory" in reason or reason.startswith("nbgrader exited with status"), reason
    if "ran out of memory" in reason:
        assert "ran out of memory" in failure_feedback.student_reason(asdict(runs["rt_flood"]))   # its feedback page
    # (a classmate that fails says why: seen once, under load, with the oldest torch; not reproduced)
    assert scores["rt_flood"] == 0 and runs["zz_classmate"].status == "graded", (runs["zz_classmate"], scores)
    assert scores["zz_classmate"] > 0 and (DEVICE.is_gpu or scores["zz_classmate"] == 3.0), runs


def test_a_notebook_writes_files_only_so_large_and_leaves_none_behind(course_copy, monkeypatch):
    # A red team's notebook left a 64 MB file in its folder, the grader's after grading: at any size, for
    # every student, the disk fills across a batch. A kernel may write files of GRADER_FILE_SIZE_LIMIT_GIB at
    # most (2 GiB unless set; 8 MiB here), and what it made in its notebook's folder is removed when the
    # notebook ends (grader/pipeline/sandbox.py, reclaim). Written by code the submission rules may refuse.
    # The limit here is 8 MiB, 256 MiB on a GPU: the kernel hands the checker its outputs as files, and
    # those of vector add's hidden GPU cases (2**24 + 3 floats) passed 8 MiB (on an H200 the classmate's
    # honest notebook then scored 0: "File too large").
    require_sandbox()
    limit_mib = 256 if DEVICE.is_gpu else 8
    monkeypatch.setenv("GRADER_FILE_SIZE_LIMIT_GIB", str(limit_mib / 1024))
    nb = filled("day1", "vector_add")
    insert_before(nb, "test_add_correct", textwrap.dedent(f'''
        import os
        os.makedirs("mine/deeper", exist_ok=True)
        for name in ("leftover.bin", "mine/deeper/small.bin"):
            with open(name, "wb") as f:
                f.write(bytes(2**20))
        try:
            with open("big.bin", "wb") as f:
                f.write(bytes({2 * limit_mib} * 2**20))
            print("WROTE twice the limit")
        except OSError as e:
            print("REFUSED twice the limit", e.errno)
        '''))
    runs, scores = _grade(course_copy, {"rt_disk": nb, "zz_classmate": filled("day1", "vector_add")}, sanitize=False)
    assert "REFUSED twice the limit 27" in _printed(course_copy, "rt_disk")      # EFBIG, and the kernel goes on
    assert scores["rt_disk"] == scores["zz_classmate"] > 0 and (DEVICE.is_gpu or scores["zz_classmate"] == 3.0), runs
    # What is left is what nbgrader put there, as for the classmate: the graded notebook and the day's files.
    left = sorted(p.name for p in _autograded(course_copy, "rt_disk").iterdir())
    assert left == sorted(p.name for p in _autograded(course_copy, "zz_classmate").iterdir()), left
    assert "vector_add.ipynb" in left


@pytest.mark.batch
def test_a_cell_of_the_students_own_marked_graded_does_not_cost_the_notebook_its_points(attacked_class):
    _, runs, scores = attacked_class
    assert runs["rt_meta"].status == "graded" and scores["rt_meta"] > 0, runs["rt_meta"]
    assert DEVICE.is_gpu or scores["rt_meta"] == 3.0
