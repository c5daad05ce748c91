"""In the CPU interpreter, triton.language is replaced once per launch, not at every helper's call
(grader/student/interpreter_lang.py), and kernels compute what they computed before."""
import importlib
import sys

import pytest
import torch
import triton
import triton.language as tl

from conftest import on_cpu_only

pytestmark = on_cpu_only   # on a GPU no kernel is interpreted

interp = pytest.importorskip("triton.runtime.interpreter")


@triton.jit
def _add_one(x):
    return x + 1.0


@triton.jit
def _count_up(x_ptr, out_ptr, TIMES: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    for _ in range(TIMES):
        x = _add_one(x)           # a helper called in a loop: each call used to replace tl again
    tl.store(out_ptr + offs, x)


def _walks_of_the_language(monkeypatch) -> list:
    """A list that grows by one each time Triton walks a module's members to replace them."""
    walks = []
    walk = interp._patch_builtin
    monkeypatch.setattr(interp, "_patch_builtin", lambda *args, **kw: (walks.append(args[0]), walk(*args, **kw))[1])
    return walks


def test_a_helper_called_in_a_loop_does_not_walk_the_language_again(monkeypatch):
    assert getattr(interp._patch_lang, "once_per_launch", False), "grader.setup did not install interpreter_lang"
    walks = _walks_of_the_language(monkeypatch)
    x = torch.arange(16, dtype=torch.float32)
    counts = {}
    for times in (1, 25):
        out = torch.empty_like(x)
        walks.clear()
        _count_up[(1,)](x, out, TIMES=times, BLOCK=16)
        assert torch.equal(out, x + times)
        counts[times] = len(walks)
    assert counts[1] > 0, "the launch itself no longer replaces the language"
    assert counts[25] == counts[1], counts


def test_a_helper_that_names_another_language_module_still_gets_it_replaced(tmp_path, monkeypatch):
    # The helper's module names triton.language.core, which the kernel's module does not: its first call
    # in a launch must replace that module too, or `core.load` would be the compiler's and fail here.
    (tmp_path / "helper_of_core.py").write_text(
        "import triton\nfrom triton.language import core\n\n\n"
        "@triton.jit\ndef load_twice(p, offs):\n    return core.load(p + offs) * 2.0\n")
    (tmp_path / "kernel_of_tl.py").write_text(
        "import triton\nimport triton.language as tl\nfrom helper_of_core import load_twice\n\n\n"
        "@triton.jit\ndef kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n"
        "    tl.store(out_ptr + offs, load_twice(x_ptr, offs) + tl.load(x_ptr + offs))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("helper_of_core", "kernel_of_tl"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    kernel = importlib.import_module("kernel_of_tl").kernel
    x = torch.randn(32)
    out = torch.empty_like(x)
    kernel[(1,)](x, out, BLOCK=32)
    torch.testing.assert_close(out, 3 * x)


def test_a_launch_that_fails_leaves_the_next_one_working():
    @triton.jit
    def fails(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.static_assert(BLOCK == 8, "BLOCK must be 8")
        tl.store(x_ptr + offs, _add_one(tl.load(x_ptr + offs)))

    x = torch.zeros(16)
    with pytest.raises(Exception, match="BLOCK must be 8"):
        fails[(1,)](x, BLOCK=16)
    out = torch.empty_like(x)
    _count_up[(1,)](x, out, TIMES=3, BLOCK=16)
    assert torch.equal(out, x + 3)
