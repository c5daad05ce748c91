"""grader.memcheck: a student's function run once under compute-sanitizer in a process of its own."""
import os
import runpy
import subprocess
import sys
import textwrap

import pytest
import torch

from conftest import DEVICE, REPO, needs_gpu
from grader.student import memcheck as S

# A notebook's cells, as one file run as __main__ (as IPython runs cells): a kernel with a jitted helper
# and an autotune config list, a host helper, a constant and the notebook's `dev`.
NOTEBOOK = '''
import torch
import triton
import triton.language as tl
import grader
dev = grader.setup(quiet=True)
SCALE = 2.0
CONFIGS = [triton.Config({"BLOCK": 64}, num_warps=4)]


@triton.jit
def _scaled(x, s):
    return x * s


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def scale_kernel(x_ptr, y_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, _scaled(tl.load(x_ptr + offs, mask=m), s), mask=m)


def grid_of(n):
    return (triton.cdiv(n, 64),)


def scale(x):
    y = torch.empty_like(x, device=dev.torch_device)
    scale_kernel[grid_of(x.numel())](x, y, x.numel(), SCALE)
    print("max", float((y - SCALE * x).abs().max()))
    return y


TABLE = {"rows": torch.zeros(3)}


def uses_a_table(x):
    return x + TABLE["rows"][0]
'''


@pytest.fixture
def notebook(tmp_path):
    path = tmp_path / "notebook.py"
    path.write_text(NOTEBOOK)
    return runpy.run_path(str(path), run_name="__main__")


def test_the_script_carries_the_function_and_what_it_uses_and_runs_on_its_own(notebook, tmp_path):
    x = torch.arange(100, dtype=torch.float32, device=DEVICE.torch_device)
    script = S.write_script(notebook["scale"], (x,), tmp_path)
    text = script.read_text()
    for piece in ("SCALE = 2.0", "triton.Config({'BLOCK': 64}, num_warps=4, num_stages=", "def _scaled(",
                  "@triton.autotune(configs=CONFIGS", "def grid_of(", "dev = grader.setup(quiet=True)",
                  "import triton.language as tl"):
        assert piece in text, piece
    assert "TABLE" not in text and "uses_a_table" not in text       # only what the function reaches
    env = dict(os.environ, PYTHONPATH=str(REPO))
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "max 0.0" in run.stdout and "memcheck: the call returned" in run.stdout


def test_names_from_an_enclosing_function_are_carried_too(tmp_path):
    import math as maths
    factor = 3

    def triple(x):
        return x * factor * maths.floor(1.5)

    text = S.write_script(triple, (torch.ones(2),), tmp_path).read_text()
    assert "factor = 3" in text and "import math as maths" in text, text


def test_a_value_that_cannot_be_written_into_a_script_is_named(notebook, tmp_path):
    with pytest.raises(S.CannotCarry, match="`TABLE` .*is a dict"):
        S.write_script(notebook["uses_a_table"], (torch.zeros(2),), tmp_path)


# memcheck's report of an unmasked vector add, as compute-sanitizer (CUDA 13) printed it on an H200
REPORT = textwrap.dedent("""\
    ========= COMPUTE-SANITIZER
    ========= Invalid __global__ read of size 8 bytes
    =========     at add_no_mask_kernel+0xc0 in run.py:5
    =========     by thread (116,0,0) in block (3,0,0)
    =========     Access to 0x7f7746800fa0 is out of bounds
    =========     and is 1 bytes after the nearest allocation at 0x7f7746800000 of size 4,000 bytes
    =========     Saved host backtrace up to driver entry point at kernel launch time
    =========         Host Frame: launch [0x1da1] in __triton_launcher.cpython-312-x86_64-linux-gnu.so
    =========         Host Frame: <module> in run.py:8
    ========= 
    ========= Invalid __global__ read of size 8 bytes
    =========     at add_no_mask_kernel+0xc0 in run.py:5
    =========     by thread (117,0,0) in block (3,0,0)
    =========     Access to 0x7f7746800fa8 is out of bounds
    =========     and is 9 bytes after the nearest allocation at 0x7f7746800000 of size 4,000 bytes
    ========= Target application returned an error
    ========= ERROR SUMMARY: 14 errors
    ========= ERROR SUMMARY: 8 errors were not printed. Use --print-limit option to adjust the number of printed errors
    """)
SCRIPT = "import torch\n\n@triton.jit\ndef add_no_mask_kernel(a_ptr, b_ptr, c_ptr, BLOCK_SIZE: tl.constexpr):\n" \
         "    tl.store(c_ptr + offsets, tl.load(a_ptr + offsets) + tl.load(b_ptr + offsets))\n"


def test_the_report_is_summarised_by_kernel_thread_program_line_and_allocation():
    said = S.summarise(REPORT, {4000: "the size of argument 0, (1000,) float32"}, SCRIPT)
    assert said[0] == ("  Invalid __global__ read of size 8 bytes in kernel `add_no_mask_kernel`, thread (116,0,0) of "
                       "program (3,0,0), at `tl.store(c_ptr + offsets, tl.load(a_ptr + offsets) + tl.load(b_ptr + "
                       "offsets))`: 1 bytes after the end of an allocation of 4000 bytes (the size of argument 0, "
                       "(1000,) float32)")
    assert said[-1] == "  (14 errors in all; the first is usually the one to fix)" and len(said) == 2  # one per kind
    assert S.summarise("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n") == []


def test_memcheck_says_why_it_cannot_run_here(notebook, capsys, monkeypatch):
    if not DEVICE.is_gpu:
        assert S.memcheck(notebook["scale"], torch.zeros(4)) is None
        assert "needs a CUDA GPU" in capsys.readouterr().out
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(S, "find_sanitizer", lambda: None)
    monkeypatch.setattr("grader.device.current", lambda: type("GPU", (), {"is_gpu": True})())
    assert S.memcheck(notebook["scale"], torch.zeros(4)) is None
    assert "not installed here" in capsys.readouterr().out


@needs_gpu("compute-sanitizer watches GPU kernels")
def test_an_unmasked_store_is_found_and_a_masked_one_is_not(capsys):
    if S.find_sanitizer() is None:
        pytest.skip("no compute-sanitizer on this GPU machine")
    import kernels
    import triton

    def add_unmasked(x, y):
        out = torch.empty_like(x)
        kernels.add_kernel[(triton.cdiv(x.numel(), 256),)](x, y, out, 1 << 30, BLOCK=256)
        return out

    def add(x, y):
        out = torch.empty_like(x)
        kernels.add_kernel[(triton.cdiv(x.numel(), 256),)](x, y, out, x.numel(), BLOCK=256)
        return out

    x, y = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    found = S.memcheck(add_unmasked, x, y)
    said = capsys.readouterr().out
    assert found is False, said
    assert "in kernel `add_kernel`" in said and "after the end of an allocation of 4000 bytes" in said, said
    assert S.memcheck(add, x, y) is True, capsys.readouterr().out


def test_arguments_are_kept_on_the_host_only_where_the_sanitizer_could_run_the_call_again(monkeypatch):
    x = torch.ones(3, device=DEVICE.torch_device)
    if not DEVICE.is_gpu:
        assert S.host_copies((x, 2)) is None                     # no GPU: nothing to sanitize
    monkeypatch.setattr("grader.device.current", lambda: type("GPU", (), {"is_gpu": True})())
    monkeypatch.setattr(S, "find_sanitizer", lambda: "/usr/local/cuda/bin/compute-sanitizer")
    kept = S.host_copies((x, 2))
    assert kept[1] == 2 and kept[0].device.type == "cpu" and torch.equal(kept[0], x.cpu())
    monkeypatch.setattr("grader.student.checks.grading", lambda: True)
    assert S.host_copies((x, 2)) is None                         # never while grading
    monkeypatch.setattr(S, "find_sanitizer", lambda: None)


# A check whose kernel reads 4 TB past its input: the CUDA context breaks, and the check's message then
# carries what the sanitizer found in a process of its own. Run as a script: the broken context would
# fail every later test of this process.
ILLEGAL = '''
import torch, triton, triton.language as tl
import grader
dev = grader.setup(quiet=True)


@triton.jit
def far_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    far = offs.to(tl.int64) + (1 << 40)   # 4 TB past the start: no such memory (4 GB could be mapped)
    tl.store(y_ptr + offs, tl.load(x_ptr + far), mask=offs < n)


def add(x, y):
    out = torch.empty_like(x)
    far_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    return out


try:
    grader.check("day1.vector_add", add)
except grader.CheckFailed as e:
    print(e)
'''


@needs_gpu("an illegal access needs a GPU")
def test_a_check_broken_by_an_illegal_access_says_what_the_sanitizer_found(tmp_path):
    if S.find_sanitizer() is None:
        pytest.skip("no compute-sanitizer on this GPU machine")
    (tmp_path / "nb.py").write_text(ILLEGAL)
    run = subprocess.run([sys.executable, "nb.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    said = run.stdout
    assert "illegal memory access" in said and "Run once more under compute-sanitizer" in said, said + run.stderr[-3000:]
    assert "Invalid __global__ read" in said and "in kernel `far_kernel`" in said, said
