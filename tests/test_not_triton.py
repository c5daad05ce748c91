"""A kernel's body that reaches past Triton (NumPy, the interpreter's own values of a block) runs in the CPU
interpreter, where a @triton.jit function is plain Python, and nowhere else: a red team's softmax done by
NumPy inside the kernel scored full correctness marks on the CPU. The guard now refuses such a kernel;
honest kernels in the styles of Triton's tutorial and of Liger-Kernel, with plain Python helpers for
their launch plans, still pass. (answers: tests/redteam_softmax_answers.py, graded through the whole
pipeline by that red team.)"""
import importlib.util
import sys

import pytest
import torch
import triton

import grader
import redteam_softmax_answers as answers
from conftest import DEVICE, on_cpu_only, wrap_triton_takes_interpreted_kernels
from grader.compare import CheckFailed

PRELUDE = "import torch\nimport triton\nimport triton.language as tl\n"

INLINE_NUMPY = '''
import numpy as np


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    values = getattr(x, "han" + "dle").data
    values[:] = np.exp(values - values.max()) / np.exp(values - values.max()).sum()
    tl.store(out_ptr + row * out_stride + cols, x.to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    out = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), out.stride(0),
                                      BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return out
'''

# A helper that runs at compile time on constexpr values: plain Python a GPU's compiler accepts too.
HELPER_ON_CONSTEXPRS = '''
def rows_per_program(block):
    return 4 if block <= 256 else 1


@triton.jit
def softmax_rows_kernel(x_ptr, out_ptr, n_rows, n_cols, x_stride, out_stride, BLOCK: tl.constexpr,
                        ROWS: tl.constexpr):
    for i in range(ROWS):
        row = tl.program_id(0) * ROWS + i
        cols = tl.arange(0, BLOCK)
        mask = cols < tl.where(row < n_rows, n_cols, 0)
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + row * out_stride + cols, (e / tl.sum(e, axis=0)).to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    out = torch.empty_like(x)
    block = triton.next_power_of_2(x.shape[1])
    rows = rows_per_program(block)
    softmax_rows_kernel[(triton.cdiv(x.shape[0], rows),)](x, out, x.shape[0], x.shape[1], x.stride(0),
                                                          out.stride(0), BLOCK=block, ROWS=rows)
    return out
'''

# Triton's own @triton.jit functions imported by their names, and a constexpr global of a dtype: Triton's
# compiler takes both (they were refused as "a InterpretedFunction" and "a constexpr").
TRITONS_OWN_BY_NAME = '''
from triton.language import softmax as tl_softmax
from triton.language.standard import max as block_max

ACC = tl.constexpr(tl.float32)


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(ACC)
    y = tl_softmax(x - block_max(x, axis=0))
    tl.store(out_ptr + row * out_stride + cols, y.to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    out = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), out.stride(0),
                                      BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return out
'''

# Honest, with every kind of branch the compiler decides when it compiles (so it reads one side only): a
# constexpr `if` in a helper called with two values (FlashAttention's STAGE), an `if` on the index of a
# static_range, a conditional expression and an `and` on constexprs, a docstring, `pass`; the interpreter
# must run them all, however its rewrite of the kernel turns out.
BRANCHES_THE_COMPILER_DECIDES = '''
@triton.jit
def _pass_over(row_ptr, n_cols, m, s, STAGE: tl.constexpr, BLOCK: tl.constexpr):
    """STAGE 1: the running maximum and sum; STAGE 2: the sum again, against the final maximum."""
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(row_ptr + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
        if STAGE == 1:
            m_new = tl.maximum(m, tl.max(x, axis=0))
            s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
            m = m_new
        else:
            pass
    return m, s


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr,
                       TWO_PASSES: tl.constexpr = False, SPLIT: tl.constexpr = 2):
    row = tl.program_id(0)
    m = tl.full((), -float("inf"), tl.float32)
    s = tl.full((), 0.0, tl.float32)
    m, s = _pass_over(x_ptr + row * x_stride, n_cols, m, s, 1, BLOCK_SIZE)
    if TWO_PASSES and BLOCK_SIZE > 1:
        m, s = _pass_over(x_ptr + row * x_stride, n_cols, m, s, 2, BLOCK_SIZE)
    scale = 1.0 / s if SPLIT > 0 else 0.0
    for part in tl.static_range(SPLIT):
        if part == 0:
            first = 0
        else:
            first = 0
        for start in range(first, n_cols, BLOCK_SIZE):
            offs = start + tl.arange(0, BLOCK_SIZE)
            mine = (offs < n_cols) & (offs % SPLIT == part)
            x = tl.load(x_ptr + row * x_stride + offs, mask=mine, other=-float("inf")).to(tl.float32)
            tl.store(out_ptr + row * out_stride + offs, (tl.exp(x - m) * scale).to(out_ptr.dtype.element_ty), mask=mine)


def softmax(x):
    out = torch.empty_like(x)
    block = min(triton.next_power_of_2(x.shape[1]), 1024)
    softmax_row_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), out.stride(0), BLOCK_SIZE=block,
                                      TWO_PASSES=x.shape[1] > 64)
    return out
'''

# Honest: @triton.jit helpers with defaults, a constexpr one and a plain one, that the kernel leaves out
# (the compiler was handed the helpers without their defaults, and refused the calls).
HELPER_DEFAULTS = '''
@triton.jit
def _load_row(ptr, offs, mask, other=-float("inf"), ACC: tl.constexpr = tl.float32):
    return tl.load(ptr + offs, mask=mask, other=other).to(ACC)


@triton.jit
def _normalise(x, EXP2: tl.constexpr = False):
    if EXP2:
        e = tl.exp2((x - tl.max(x, axis=0)) * 1.4426950408889634)
    else:
        e = tl.exp(x - tl.max(x, axis=0))
    return e / tl.sum(e, axis=0)


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    y = _normalise(_load_row(x_ptr + row * x_stride, offs, offs < n_cols))
    tl.store(out_ptr + row * out_stride + offs, y.to(out_ptr.dtype.element_ty), mask=offs < n_cols)


def softmax(x):
    out = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), out.stride(0),
                                      BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return out
'''

# Not honest for a GPU: a helper made with noinline=True is compiled as a function of its own, which takes
# scalars only; handed a block, the GPU's compiler refuses the kernel. The interpreter runs it, and the
# check said OK (the decorator's arguments were not handed on).
NOINLINE_HELPER_OF_A_BLOCK = HELPER_DEFAULTS.replace("@triton.jit\ndef _normalise", "@triton.jit(noinline=True)\ndef _normalise")


def _module_of(cell: str, tmp_path, name: str):
    """The cell as a module of its own (Triton needs a kernel's source in a file)."""
    path = tmp_path / f"{name}.py"
    path.write_text(PRELUDE + cell)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _softmax_of(cell: str, tmp_path, name: str):
    return _module_of(cell, tmp_path, name).softmax


OURS = ("HELPER_ON_CONSTEXPRS", "TRITONS_OWN_BY_NAME", "BRANCHES_THE_COMPILER_DECIDES", "HELPER_DEFAULTS")


@pytest.mark.parametrize("name", ["TUTORIAL_STYLE", "LIGER_STYLE", "EXP2_MULTIROW", "AUTOTUNED_AND_PRUNED",
                                  "HONEST_UNUSUAL", "JIT_FUNCTION_ARGUMENT", "LIGER_REDUCE_COMBINE", *OURS])
def test_honest_kernels_with_python_around_them_pass(name, tmp_path):
    cell = globals()[name] if name in OURS else getattr(answers, name)
    grader.check("day2.softmax", _softmax_of(cell, tmp_path, f"honest_{name.lower()}"))


@on_cpu_only   # on a GPU such a kernel does not compile at all
@pytest.mark.parametrize("name", ["NUMPY_IN_THE_INTERPRETER", "INLINE_NUMPY"])
def test_numpy_inside_a_kernel_is_refused(name, tmp_path):
    cell = INLINE_NUMPY if name == "INLINE_NUMPY" else getattr(answers, name)
    with pytest.raises(CheckFailed, match="not Triton") as failed:
        grader.check("day2.softmax", _softmax_of(cell, tmp_path, f"cheat_{name.lower()}"))
    assert "softmax_row_kernel" in str(failed.value)


@on_cpu_only
@pytest.mark.parametrize("route", [*answers.NUMPY_ROUTES, "float_of_a_block"])
def test_python_computing_inside_a_kernel_by_any_route_is_refused_by_tritons_compiler(route, tmp_path):
    # Each route is Python that Triton's compiler would not take: the kernel, as its globals are when its
    # programs start, goes to Triton's own front end, which refuses it as it would on the GPU.
    cell = answers.FLOAT_OF_A_BLOCK if route == "float_of_a_block" else answers.NUMPY_ROUTES[route]
    with pytest.raises(CheckFailed, match="not Triton|compiler rejects it") as failed:
        grader.check("day2.softmax", _softmax_of(cell, tmp_path, f"cheat_{route}"))
    said = str(failed.value)
    assert "softmax_row_kernel" in said and ("compiler rejects it for the grading" in said or "a kernel may read" in said
                                             or "bound to another object" in said or "not its source" in said
                                             or "reads Python's `" in said), said


def test_the_compiler_is_handed_the_kernel_as_its_globals_are_at_each_launch(tmp_path):
    from grader.student import gpu_compile
    module = _module_of(answers.NUMPY_ROUTES["rebound_between_launches"], tmp_path, "rebound")
    text, refused, reads, _ = gpu_compile.source_for_compiler(module.softmax_row_kernel)
    assert refused == [] and "normalise = ones" in text and "@triton.jit\ndef ones(x)" in text
    module.normalise = module.in_place
    assert gpu_compile.reads_changed(reads) == ["normalise"]
    _, refused, _, _ = gpu_compile.source_for_compiler(module.softmax_row_kernel)
    assert refused and "`normalise` (a function" in refused[0]


CLEAN_BODY = "    x = tl.exp(x - tl.max(x, axis=0))\n    x = x / tl.sum(x, axis=0)"


@on_cpu_only
def test_a_kernel_runs_only_as_its_source_reads_when_it_is_checked(tmp_path):
    # The interpreter runs a rewrite of a kernel's source made at its first launch and kept. A kernel file
    # rewritten after that launch (NumPy's lines replaced by Triton's, on as many lines) reads clean, while
    # the kept rewrite still runs NumPy: refused. Run as it reads, the clean kernel passes.
    numpy_body = "    d = x.handle.data\n    d -= d.max()\n    d[...] = 2.718281828459045 ** d\n    d /= d.sum()"
    cheat = answers._route(numpy_body, before="")
    module = _module_of(cheat, tmp_path, "rewritten_later")
    module.softmax(torch.randn(2, 8))                        # a first launch outside a check
    path = tmp_path / "rewritten_later.py"
    path.write_text(path.read_text().replace(numpy_body, CLEAN_BODY))
    with pytest.raises(CheckFailed, match="not its source as it reads now"):
        grader.check("day2.softmax", module.softmax)
    fresh = _module_of(answers._route(CLEAN_BODY, before=""), tmp_path, "clean_from_the_start")
    grader.check("day2.softmax", fresh.softmax)


@on_cpu_only
def test_the_kernel_checked_is_the_one_launched_not_the_one_its_name_is_bound_to(tmp_path):
    # A NumPy kernel launched under an alias while its name is bound again to a clean kernel
    cheat = answers._route("    x = in_place(x)").replace("def softmax(x):", "numpy_kernel = softmax_row_kernel\n\n\n"
                                                           "def softmax(x):")
    clean = "\n\n@triton.jit\n" + answers._ROUTE.split("@triton.jit\n", 1)[1].split("\n\n\ndef softmax")[0] \
        .replace("{step}", CLEAN_BODY)
    module = _module_of(cheat.replace("    softmax_row_kernel[(n_rows,)]", "    numpy_kernel[(n_rows,)]") + clean,
                        tmp_path, "aliased")
    assert module.numpy_kernel is not module.softmax_row_kernel
    with pytest.raises(CheckFailed, match="not Triton|compiler rejects it"):
        grader.check("day2.softmax", module.softmax)


# Prints from a helper a kernel calls, and a raise (whose message the interpreter would hand to Python)
PRINTS_AND_RAISE = '''
@triton.jit
def show(x):
    tl.static_print(x)


@triton.jit
def printing_kernel(x_ptr):
    x = tl.load(x_ptr)
    show(x)
    if x > 0:
        raise ValueError(x)
'''


def test_prints_and_raise_are_found_through_the_functions_a_kernel_calls(tmp_path):
    from grader.student import gpu_compile
    path = tmp_path / "printing.py"
    path.write_text(PRELUDE + PRINTS_AND_RAISE)
    spec = importlib.util.spec_from_file_location("printing", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["printing"] = module
    spec.loader.exec_module(module)
    assert gpu_compile.prints(module.printing_kernel) == ["`tl.static_print` in `show`"]
    assert gpu_compile.not_triton(module.printing_kernel) == ["`raise`"]
    assert gpu_compile.prints(module.show) == ["`tl.static_print`"] and gpu_compile.not_triton(module.show) == []


@on_cpu_only
@pytest.mark.parametrize("route", ["DEAD_BRANCH_FLOATS", "DEAD_BRANCH_TEXT", "COMBINE_DEAD_BRANCH"])
def test_a_branch_the_compiler_never_compiled_cannot_run(route, tmp_path):
    # The compiler decides `isinstance(tl.range(1), range)` when it compiles and never reads the branch; the
    # interpreter's objects decide it the other way. What the compiler did not visit raises if run.
    # (Triton 3.3's compiler knows no `hasattr` at all: it refuses that kernel outright)
    # (or, since the compiler's values are checked, the condition itself stops it, at the line it is on)
    with pytest.raises(CheckFailed, match="ran Python that Triton's compiler did not compile|compiler rejects it|"
                                          "reads Python's `hasattr`|another value than Triton's compiler"):
        grader.check("day2.softmax", _softmax_of(getattr(answers, route), tmp_path, f"cheat_{route.lower()}"),
                     hidden=True)


@on_cpu_only
@pytest.mark.parametrize("route", ["GRID_FUNCTION_TL", "GRID_FUNCTION_NUMPY", "HOST_INTERPRETER_BUILDER"])
def test_the_interpreter_works_only_in_a_kernels_programs(route, tmp_path):
    # tl.* in a grid function (it runs inside the launch, after the interpreter took tl over) and the
    # interpreter's builder called from host code read and write memory by address, outside any kernel.
    with pytest.raises(CheckFailed, match="interpreter was used outside a kernel's programs"):
        grader.check("day2.softmax", _softmax_of(getattr(answers, route), tmp_path, f"cheat_{route.lower()}"))


@pytest.mark.parametrize("route", ["QUEUE_LISTENER_THREAD", "QUEUE_LISTENER_THREAD_SETUP_AGAIN"])
def test_a_thread_the_notebook_left_running_fails_the_check(route, tmp_path, monkeypatch):
    # PyTorch's dispatch modes are per thread: torch.softmax in a logging QueueListener's thread, started
    # when the cell ran, went unseen. Setting the grader up again does not make the thread Jupyter's. (As
    # at grading, where integrity.seal takes the threads running before any student cell.)
    from grader.student import guard
    monkeypatch.setattr(guard, "_threads_before", (None, frozenset()))
    monkeypatch.setattr(guard, "_threads_watched", False)
    guard.watch_threads()
    module = _module_of("import grader\n" + getattr(answers, route), tmp_path, f"cheat_{route.lower()}")
    try:
        with pytest.raises(CheckFailed, match=r"thread\(s\) the notebook started"):
            grader.check("day2.softmax", module.softmax)
    finally:
        module.LISTENER.stop()
    grader.check("day2.softmax", _softmax_of(answers.TUTORIAL_STYLE, tmp_path, "honest_after_the_thread"))


@on_cpu_only
def test_a_noinline_helper_is_compiled_as_one(tmp_path):
    # The compiler is handed the decorator's noinline; Triton 3.6 on (the grading GPU's) then refuses the
    # block argument, as on the GPU (Triton 3.3's compiler took it).
    from grader.student import gpu_compile
    module = _module_of(NOINLINE_HELPER_OF_A_BLOCK, tmp_path, "noinline_block")
    text, refused, _, _ = gpu_compile.source_for_compiler(module.softmax_row_kernel)
    assert not refused and "@triton.jit(noinline=True)\ndef _normalise" in text and "@triton.jit\ndef _load_row" in text
    if tuple(int(p) for p in triton.__version__.split(".")[:2]) >= (3, 6):
        with pytest.raises(CheckFailed, match="compiler rejects it") as failed:
            grader.check("day2.softmax", module.softmax)
        assert "noinline" in str(failed.value), str(failed.value)


@pytest.mark.skipif(not hasattr(triton, "constexpr_function"), reason="@triton.constexpr_function is Triton 3.5+")
def test_a_constexpr_function_that_does_arithmetic_passes_and_one_that_reaches_further_does_not(tmp_path):
    grader.check("day2.softmax", _softmax_of(answers.CONSTEXPR_FUNCTION_HELPER, tmp_path, "honest_constexpr_function"))
    if not DEVICE.is_gpu:   # (on a GPU the compiler itself refuses NumPy there)
        with pytest.raises(CheckFailed, match="constexpr_function that does more than arithmetic|not Triton"):
            grader.check("day2.softmax", _softmax_of(answers.CONSTEXPR_FUNCTION_NUMPY, tmp_path, "cheat_constexpr_numpy"))


FOURTH_TEAM = ["DEEP_GETATTR", "ALIAS_GETATTR", "HANDED_HELPER_GETATTR", "UNION_SPECIALIZATIONS", "NAME_COLLISION",
               "CLOSURE_GLOBAL", "BOUND_METHOD_KERNEL", "GRID_OBJECT_LEN", "HELPER_DEFAULT_RERUN", "HOST_C_LOAD"]


@on_cpu_only
@pytest.mark.parametrize("route", FOURTH_TEAM)
def test_the_fourth_red_teams_routes_are_refused(route, tmp_path):
    with pytest.raises(CheckFailed) as failed:
        grader.check("day2.softmax", _softmax_of(getattr(answers, route), tmp_path, f"cheat_{route.lower()}"),
                     hidden=True)
    said = str(failed.value)
    assert any(why in said for why in ("did not compile", "another value than Triton's compiler", "Python's `getattr`",
                                       "variables of the function",
                                       "not a plain function", "outside a kernel's programs", "is not iterable",
                                       "compiler rejects it")), said   # (Triton 3.3's compiler refuses some outright)


def test_a_static_assert_with_a_message_made_of_text_passes(tmp_path):
    grader.check("day2.softmax", _softmax_of(answers.STATIC_ASSERT_FSTRING, tmp_path, "honest_static_assert"))


FIFTH_TEAM_HONEST = ["HONEST_ROWS_EXP2_KEEPDIMS", "HONEST_REDUCE_COMBINE", "HONEST_TRITON_OP"]


@pytest.mark.parametrize("name", FIFTH_TEAM_HONEST)
def test_the_fifth_red_teams_honest_kernels_pass(name, tmp_path):
    if name == "HONEST_TRITON_OP" and not wrap_triton_takes_interpreted_kernels():
        pytest.skip("this torch's wrap_triton does not take an interpreted kernel (2.7's and 2.9's)")
    grader.check("day2.softmax", _softmax_of(getattr(answers, name), tmp_path, f"honest_{name.lower()}"), hidden=True)


@on_cpu_only
@pytest.mark.parametrize("route", ["TWO_FACED_HELPER", "TWO_FACES_BY_TEXT"])
def test_python_the_compiler_runs_on_constants_may_not_reach_past_triton(route, tmp_path):
    # The helper's Python branch, compiled for a constexpr string, reached NumPy through
    # triton.runtime.interpreter: the compiler's process refuses the module where the kernel names it.
    with pytest.raises(CheckFailed, match="compiler rejects it") as failed:
        grader.check("day2.softmax", _softmax_of(getattr(answers, route), tmp_path, f"cheat_{route.lower()}"),
                     hidden=True)
    # (Triton 3.3's compiler gets no further than the condition, which it makes NotImplemented)
    assert "the module triton.runtime.interpreter" in str(failed.value) or \
        "builtins.NotImplementedType" in str(failed.value), str(failed.value)


@on_cpu_only
def test_a_call_runs_only_what_was_compiled_for_a_call_like_it(tmp_path):
    # No module but Triton's: the branch compiled for the call with a string may not run for the call with a
    # block (a tuple's kind is its elements' kinds; "any" no longer matches every call).
    with pytest.raises(CheckFailed) as failed:
        grader.check("day2.softmax", _softmax_of(answers.UNION_OF_TWO_CALLS, tmp_path, "cheat_union_of_two_calls"),
                     hidden=True)
    said = str(failed.value)
    assert any(why in said for why in ("ran Python that Triton's compiler did not compile", "another value than Triton",
                                       "'str' object has no attribute 'type'")), said   # (Triton 3.5's own refusal)


@on_cpu_only
@pytest.mark.parametrize("route", list(answers.TEXT_OF_A_BLOCK))
def test_a_blocks_values_never_become_python_text(route, tmp_path):
    # (the source's reading already refuses a dunder method called on a block)
    with pytest.raises(CheckFailed, match="compiler rejects it|not Triton") as failed:
        grader.check("day2.softmax", _softmax_of(answers.TEXT_OF_A_BLOCK[route], tmp_path, f"cheat_text_{route}"))
    said = str(failed.value)
    assert any(why in said for why in ("formats a block as text", "is handed a block", "reads an internal name",
                                       "libtriton", "calls `.__str__`", "calls `.handle`",
                                       "has no attribute 'format'")), said   # (Triton 3.3's own refusal)


def test_call_kinds_describe_a_tuple_element_by_element():
    from grader.student import gpu_compile
    import triton.language as tl

    def helper(t, n):
        return t, n

    kinds = gpu_compile.call_kinds(helper, (("text", 0, tl.float16), 3), {})
    assert kinds == [["t", ["'text'", "0", "triton.language.dtype('fp16')"]], ["n", "3"]]
    compiled = {"launch": frozenset({9}), '[["t", ["block", "0"]], ["n", "block"]]': frozenset({1}),
                '[["t", ["\'text\'", "0"]], ["n", "3"]]': frozenset({2}), '[["t", "any"], ["n", "3"]]': frozenset({3})}
    # a number where the compiler had a block (a loop's index) matches, unless the parameter is a constexpr
    assert gpu_compile.compiled_for([["t", ["block", "0"]], ["n", "3"]], compiled, set()) == {1}
    assert gpu_compile.compiled_for([["t", ["block", "0"]], ["n", "3"]], compiled, {"n"}) == frozenset()
    assert gpu_compile.compiled_for([["t", ["'text'", "0"]], ["n", "3"]], compiled, set()) == {2}
    assert gpu_compile.compiled_for([["t", "any"], ["n", "3"]], compiled, set()) == {3}   # "any" is only "any"
    assert gpu_compile.compiled_for([["t", ["block", "'x'"]], ["n", "3"]], compiled, set()) == frozenset()


@on_cpu_only
@pytest.mark.parametrize("route", ["FSTRING_OF_CONSTEXPR_BLOCK", "PYTHON_MAX_OF_BLOCKS", "PYTHON_SOFTMAX_FROM_TEXT"])
def test_the_sixth_red_teams_routes_are_refused_by_the_compilers_rules(route, tmp_path):
    with pytest.raises(CheckFailed, match="compiler rejects it") as failed:
        grader.check("day2.softmax", _softmax_of(getattr(answers, route), tmp_path, f"cheat_{route.lower()}"),
                     hidden=True)
    said = str(failed.value)
    assert any(why in said for why in ("a tl.constexpr made of a block", "Python's `max` is handed a block",
                                       "not supported", "Cannot")), said   # (or Triton 3.3's own refusal)


def test_tritons_minimum_and_maximum_pass(tmp_path):
    grader.check("day2.softmax", _softmax_of(answers.TL_MINIMUM_MAXIMUM, tmp_path, "honest_minimum"), hidden=True)


def test_a_print_under_another_name_fails_the_check(tmp_path):
    with pytest.raises(CheckFailed, match="print") as failed:
        grader.check("day2.softmax", _softmax_of(answers.PRINT_THROUGH_A_LOCAL, tmp_path, "cheat_print_local"))
    assert "LEAK" not in str(failed.value)


@pytest.mark.parametrize("line", list(answers.HONEST_LINES))
def test_the_sixth_red_teams_honest_lines_pass(line, tmp_path):
    if line in ("dtype_methods", "math_constant", "constexpr_tuple_global", "block_methods") \
            and tuple(int(p) for p in triton.__version__.split(".")[:2]) < (3, 4):
        pytest.skip("Triton 3.3's own compiler refuses `and` of plain values, a constexpr tuple's items and a "
                    "block's methods such as .sum()")
    code, before = answers.HONEST_LINES[line]
    grader.check("day2.softmax", _softmax_of(answers.honest_with(code, before), tmp_path, f"honest_line_{line}"),
                 hidden=True)


def test_a_print_that_runs_in_an_interpreted_launch_is_recorded_however_it_was_reached(monkeypatch):
    # The compile-time rules refuse a print under another name; whatever reaches the interpreter's print
    # anyway is recorded where it runs, which fails the check (checks: "remove the prints").
    import types
    from grader.student import guard
    record = types.SimpleNamespace(prints=[], not_triton=[])
    monkeypatch.setattr(guard, "_active", types.SimpleNamespace(record=record))
    monkeypatch.setattr(guard, "_interpreter_open", True)
    printing = guard._builder_wrapper("create_print", lambda self, *args: "printed")
    assert printing(None, "x", True, [], False) == "printed"
    assert record.prints and "prints" in record.prints[0]
    monkeypatch.setattr(guard, "_active", None)      # outside a check: a student's debugging print, as it was
    record.prints.clear()
    assert printing(None, "x", True, [], False) == "printed" and record.prints == []


@on_cpu_only
def test_a_launch_whose_programs_depend_on_their_order_fails(tmp_path):
    # A checked launch runs its programs in an order drawn anew each time (a GPU keeps none): the readers
    # of the second half of the grid may now run before the writers of the first, as on a GPU
    with pytest.raises(CheckFailed):
        grader.check("day2.softmax", _softmax_of(answers.PROGRAM_ORDER_RACE, tmp_path, "cheat_program_order"),
                     hidden=True)


def test_a_checked_launch_runs_every_program_once_in_another_order(tmp_path):
    # Each program of a 2-D grid writes its own cell once, and records when it ran: all are written, once,
    # and not in the interpreter's order (a 1 in 20! chance of failing by luck)
    module = _module_of(ORDER_PROBE, tmp_path, "order_probe")
    grader.check("day2.softmax", module.softmax)
    assert sorted(module.SEEN[-1]) == list(range(20)) and module.SEEN[-1] != list(range(20)), module.SEEN[-1]


# An honest softmax that also notes the order its programs ran in (a 4 x 5 grid: a counter per launch)
ORDER_PROBE = '''
SEEN = []


@triton.jit
def order_kernel(ticket_ptr, order_ptr):
    i = tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
    n = tl.atomic_add(ticket_ptr, 1)
    tl.store(order_ptr + n, i)


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * out_stride + offs, (e / tl.sum(e, axis=0)).to(out_ptr.dtype.element_ty), mask=offs < n_cols)


def softmax(x):
    ticket = torch.zeros(1, dtype=torch.int32, device=x.device)
    order = torch.zeros(20, dtype=torch.int32, device=x.device)
    order_kernel[(4, 5)](ticket, order)
    SEEN.append(order.tolist())
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                      BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
'''


@on_cpu_only
@pytest.mark.parametrize("route", list(answers.VALUE_DIFFERENCES))
def test_an_expression_that_gives_the_interpreter_another_value_than_the_compiler_stops_the_launch(route, tmp_path):
    # The seventh red team's: no branch, a value selected by a condition the two decide differently. (An
    # f-string's text is now the compiler's in the interpreter too: that condition no longer differs, and
    # the kernel computes what a GPU would, which is not the softmax.)
    with pytest.raises(CheckFailed, match="another value than Triton's compiler|compiler rejects it|elements differ"):
        grader.check("day2.softmax", _softmax_of(answers.VALUE_DIFFERENCES[route], tmp_path, f"cheat_{route}"),
                     hidden=True)


def test_a_value_agrees_with_what_the_compiler_had_only_where_it_could_be_the_same():
    import math
    import numpy as np
    import triton.language as tl
    from grader.student import gpu_compile

    def kinds(*values, builtin=False):
        return [__import__("json").loads(gpu_compile.value_kind(v, builtin)) for v in values]

    block = tl.tensor(None, tl.float32)   # (a block's kind is its class: no values needed)
    assert kinds(tl.constexpr(4), None, "text", (1, tl.constexpr(2.5)), math.exp, tl.exp) == \
        [["c", 4], ["n"], ["s", "text"], ["t", [["c", 1], ["c", 2.5]]], ["P"], ["T", "exp"]]
    agrees = gpu_compile.agrees
    # the same constant, also as the interpreter's float32 scalar and NumPy's numbers; NaN is NaN
    assert agrees(kinds(0.1), np.float32(0.1)) and agrees(kinds(4), np.int64(4)) and agrees(kinds(True), 1)
    assert agrees(kinds(float("nan")), float("nan")) and agrees(kinds(tl.constexpr(8)), tl.constexpr(8))
    assert not agrees(kinds(0.0), 1.0) and not agrees(kinds(False), True) and not agrees(kinds(0.0), block)
    # a block: the interpreter's block, or a number (a loop's index), or None (a libdevice function's)
    assert agrees(kinds(block), block) and agrees(kinds(block), 3) and agrees(kinds(block), None)
    assert not agrees(kinds(block), math.exp) and not agrees(kinds(block), "text")
    # a tuple, element by element, a subclass read as a tuple
    assert agrees(kinds((block, 2)), (3, 2)) and agrees(kinds((4, 5)), torch.Size([4, 5]))
    assert not agrees(kinds((block, 2)), (block, 3)) and not agrees(kinds((4, 5)), (4,))
    # Triton's objects for Triton's, Python's for Python's; a builtin's name either
    assert agrees(kinds(tl.exp), tl.math.exp) and not agrees(kinds(tl.exp), math.exp)
    assert agrees(kinds(tl.sum), tl.sum) and not agrees(kinds(tl.sum), tl.max)   # (a ninth red team's pair)
    assert agrees(kinds(math.exp), math.log) and not agrees(kinds(math.exp), tl.exp)
    assert agrees(kinds(tl.minimum, builtin=True), min) and not agrees(kinds(tl.minimum, builtin=True), math.exp)
    assert agrees(kinds(0.0) + kinds(block), block)   # any of the values the compiler had


@on_cpu_only
@pytest.mark.parametrize("route", list(answers.EIGHTH_TEAM))
def test_the_eighth_red_teams_routes_fail(route, tmp_path):
    # Text is compared by value (the interpreter's f-strings made as the compiler makes them), a dtype by
    # its name, each iteration of an unrolled loop on its own; a constexpr function keeps no state and a
    # constexpr holds no block's method. The first now computes in the interpreter what a GPU computes.
    if route == "python_sum_from_bound_method_text" and not hasattr(triton, "constexpr_function"):
        pytest.skip("@triton.constexpr_function is Triton 3.5+")
    with pytest.raises(CheckFailed, match="another value than Triton's compiler|elements differ|does more than "
                                          "arithmetic|compiler rejects it"):
        grader.check("day2.softmax", _softmax_of(answers.EIGHTH_TEAM[route], tmp_path, f"cheat_{route}"),
                     hidden=True)


def test_text_and_dtypes_agree_by_value_and_an_unrolled_loops_iterations_each_on_its_own():
    import json
    import triton.language as tl
    from grader.student import gpu_compile
    text, fp32 = json.loads(gpu_compile.value_kind("0")), json.loads(gpu_compile.value_kind(tl.float32))
    assert gpu_compile.agrees([text], "0") and not gpu_compile.agrees([text], "constexpr[0]")
    assert gpu_compile.agrees([fp32], tl.float32) and not gpu_compile.agrees([fp32], tl.int1)
    values = {5: {"[0]": frozenset({gpu_compile.value_kind(False)}), "[1]": frozenset({gpu_compile.value_kind(True)})}}
    agree = gpu_compile._agreement("kernel", values, {5: (3, "C")})
    assert agree(5, False, (0,)) is False and agree(5, True, (1,)) is True
    with pytest.raises(KeyError, match="unrolled iteration 0"):
        agree(5, True, (0,))


def test_an_unrolled_loop_that_rebinds_its_index_passes(tmp_path):
    grader.check("day2.softmax", _softmax_of(answers.HONEST_STATIC_LOOP_REBOUND, tmp_path, "honest_loop_rebound"),
                 hidden=True)


@on_cpu_only
@pytest.mark.parametrize("route", list(answers.NINTH_TEAM))
def test_a_kernel_keeps_no_python_state_that_changes(route, tmp_path):
    with pytest.raises(CheckFailed, match="compiler rejects it") as failed:
        grader.check("day2.softmax", _softmax_of(answers.NINTH_TEAM[route], tmp_path, f"cheat_{route}"), hidden=True)
    assert "change in place" in str(failed.value) or "changes" in str(failed.value) \
        or "not supported" in str(failed.value), str(failed.value)   # (or Triton 3.3's own refusal)


def _reading_every_function_of_triton_language() -> str:
    """An honest kernel that also reads every function triton.language and its math module export (not the
    prints and assertions, whose own rules apply): each must agree by name, the compiler's and the
    interpreter's (its stand-ins included), in this Triton."""
    import triton.language as tl
    names = [n for n in dir(tl) if not n.startswith("_") and callable(getattr(tl, n))
             and not isinstance(getattr(tl, n), (type, tl.dtype))
             and n not in ("device_print", "static_print", "static_assert", "device_assert")]
    names += [f"math.{n}" for n in dir(tl.math) if not n.startswith("_") and callable(getattr(tl.math, n))
              and not isinstance(getattr(tl.math, n), type)
              and (getattr(getattr(tl.math, n), "__module__", "") or "").startswith("triton")]
    return answers.honest_with("\n    ".join(f"tl.static_assert(tl.{n} is not None)" for n in sorted(names)))


def test_every_function_of_triton_language_agrees_by_name(tmp_path):
    grader.check("day2.softmax", _softmax_of(_reading_every_function_of_triton_language(), tmp_path,
                                             "honest_every_function"), hidden=True)


@pytest.mark.parametrize("route", list(answers.TENTH_TEAM))
def test_a_function_that_states_tritons_module_and_name_is_not_tritons(route, tmp_path):
    # The notebook's process only: Triton's functions are told by identity, the objects Triton's modules
    # bound before any notebook code ran (gpu_compile.remember_tritons_own), not by a module and name.
    import triton.language as tl
    tritons_max = tl.max
    try:
        with pytest.raises(CheckFailed, match="another value than Triton's compiler"):
            grader.check("day2.softmax", _softmax_of(answers.TENTH_TEAM[route], tmp_path, f"cheat_{route}"),
                         hidden=True)
    finally:
        tl.max = tritons_max


def test_tritons_own_functions_are_told_by_identity():
    import functools

    import triton.language as tl
    from grader.student import gpu_compile

    def forged(x):
        return x
    functools.update_wrapper(forged, tl.max)
    assert gpu_compile._of_triton(tl.max) and gpu_compile._triton_name(tl.max) == "max"
    assert gpu_compile._of_triton(tl.core.tensor) and gpu_compile._of_triton(tl.float32)
    assert not gpu_compile._of_triton(forged) and gpu_compile._triton_name(forged) == "@max"
    forged.__name__ = "wrapper"     # a stand-in's name
    assert gpu_compile._triton_name(forged) == "@wrapper"
    claims = type("tensor", (), {"__module__": "triton.language.core"})
    assert not gpu_compile._tritons_class(claims)
    kind = [["T", "max"]]
    assert gpu_compile.agrees(kind, tl.max) and not gpu_compile.agrees(kind, forged)


def test_a_stand_in_agrees_only_as_the_function_the_interpreter_binds_it_for():
    import triton.language as tl
    import triton.runtime.interpreter as interp
    from grader.student import gpu_compile

    def wrapper(x):        # a stand-in's name, bound where the interpreter binds its stand-ins
        return x
    tritons_max = tl.max
    tl.max = wrapper
    try:
        assert not gpu_compile.agrees([["T", "max"]], wrapper)
    finally:
        tl.max = tritons_max
    # Triton's own functions named as the interpreter's stand-ins are (a block method's wrapper): each agrees
    # only with what it is bound for, no longer with any of Triton's functions
    named_wrapper = [v for v in vars(tl.core.tensor).values() if getattr(v, "__name__", "") == "wrapper"]
    assert all(gpu_compile._of_triton(v) and not gpu_compile.agrees([["T", "max"]], v) for v in named_wrapper)
    block = tl.core.tensor(interp.TensorHandle(torch.zeros(4).numpy(), tl.float32), tl.block_type(tl.float32, [4]))
    assert gpu_compile._triton_name(block.sum) == "sum" and gpu_compile._triton_name(block.max) == "max"
    bound = getattr(importlib.import_module("triton.compiler.code_generator"), "BoundJITMethod", None)
    if bound is not None:   # the compiler's `x.sum` (Triton 3.4 on) is named by its function, not its class
        assert gpu_compile._triton_name(bound(block, tl.sum)) == "sum"


@pytest.mark.parametrize("route", list(answers.ELEVENTH_TEAM))
def test_the_eleventh_red_teams_routes_fail(route, tmp_path):
    # combine functions that are not elementwise get one element at a time, and must not care which
    # argument comes first; floats convert to integers as on a GPU; the back end's MLIR passes judge too;
    # a loop's index is an int32 block, which truncates when it divides and wraps past 2**31
    with pytest.raises(CheckFailed, match="elements differ|arguments swapped|compiler rejects it"):
        grader.check("day2.softmax", _softmax_of(answers.ELEVENTH_TEAM[route], tmp_path, f"cheat_{route}"), hidden=True)


@pytest.mark.parametrize("route", list(answers.TWELFTH_TEAM))
def test_the_twelfth_red_teams_routes_fail(route, tmp_path):
    # tl.exp, exp2, sqrt and rsqrt on float32 round and flush subnormals as the GPU's instructions do
    with pytest.raises(CheckFailed, match="elements differ"):
        grader.check("day2.softmax", _softmax_of(answers.TWELFTH_TEAM[route], tmp_path, f"cheat_{route}"), hidden=True)
