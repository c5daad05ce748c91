"""Device set-up: what is reported and which dtypes and sizes are chosen."""
import os
import torch

import grader
from grader.device import Device
from conftest import REPO, on_cpu_only


def _gpu(capability):
    return Device("cuda", "test GPU", capability, "2.x", "3.x")


def test_dtype_choice_follows_the_hardware():
    assert _gpu((9, 0)).half_dtype == torch.bfloat16      # H100
    assert _gpu((8, 0)).half_dtype == torch.bfloat16      # A100
    assert _gpu((7, 5)).half_dtype == torch.float16       # T4: no bf16
    cpu = Device("cpu", "CPU", None, "2.x", "3.x")
    assert cpu.half_dtype == torch.float32 and not cpu.supports_bf16


def test_pick_chooses_by_device():
    assert _gpu((9, 0)).pick(cpu=10, gpu=10_000) == 10_000
    assert Device("cpu", "CPU", None, "", "").pick(cpu=10, gpu=10_000) == 10


def test_describe_names_gpu_capability_and_versions():
    text = _gpu((9, 0)).describe()
    assert "test GPU" in text and "9.0" in text and "torch 2.x" in text and "triton 3.x" in text


@on_cpu_only
def test_setup_without_gpu_switches_on_the_interpreter(capsys):
    import os
    import triton
    dev = grader.setup()
    assert dev.interpreter and dev.torch_device == "cpu"
    assert os.environ["TRITON_INTERPRET"] == "1"
    assert "interpreter" in capsys.readouterr().out

    @triton.jit
    def k(x):
        pass
    assert type(k).__name__ == "InterpretedFunction"


# --- Choices per GPU, from the properties torch reports (no GPU needed) ------------------------------
from types import SimpleNamespace  # noqa: E402

from grader.device import (attention_smem_bytes, device_from_properties, fit_matmul_tile,  # noqa: E402
                           matmul_smem_bytes)

# What torch.cuda.get_device_properties(0) says on Colab's free GPU and on the course's H100.
T4 = SimpleNamespace(name="Tesla T4", major=7, minor=5, shared_memory_per_block_optin=65536,
                     multi_processor_count=40, total_memory=16 * 2**30)
H100 = SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0, shared_memory_per_block_optin=227 * 1024,
                       multi_processor_count=132, total_memory=80 * 2**30)

# The tiles the course uses on a GPU (lectures of day 3 and the reference solutions of days 3 and 4).
MATMUL_TILES = [(128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 4, 4), (128, 128, 64, 8, 3),
                (128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (128, 256, 64, 8, 4), (64, 128, 64, 4, 4)]
ATTENTION_TILES = [(128, 64, 8, 2), (128, 64, 8, 3), (128, 128, 8, 2), (64, 64, 4, 3), (128, 32, 4, 3), (64, 32, 4, 2)]


def _smem(tile, bytes_per_element=2):
    bm, bn, bk, *launch = tile
    return matmul_smem_bytes(bm, bn, bk, launch[1] if launch else 3, bytes_per_element)


def test_a_t4_gets_fp16_and_an_h100_bf16():
    t4, h100 = (device_from_properties(p, "2.x", "3.x") for p in (T4, H100))
    assert t4.capability == (7, 5) and t4.shared_memory == 65536 and t4.memory == 16 * 2**30
    assert (t4.multiprocessors, h100.multiprocessors) == (40, 132)   # a persistent kernel's grid
    assert t4.half_dtype == torch.float16 and not t4.supports_bf16
    assert h100.half_dtype == torch.bfloat16 and h100.supports_bf16


def test_tiles_shrink_to_fit_a_t4_and_stay_as_written_on_an_h100():
    t4, h100 = (device_from_properties(p, "2.x", "3.x") for p in (T4, H100))
    assert h100.matmul_configs(MATMUL_TILES) == list(dict.fromkeys(MATMUL_TILES))
    fitted = t4.matmul_configs(MATMUL_TILES)
    assert fitted and all(_smem(t) <= 65536 for t in fitted)
    assert any(_smem(t) > 65536 for t in MATMUL_TILES)   # as written, some did not fit
    assert all(t[3] in (4, 8) and 1 <= t[4] <= 4 and min(t[:3]) >= 32 for t in fitted)
    # A fixed tile without num_stages is launched with Triton's default 3 stages: BLOCK_K gives way.
    assert t4.matmul_tile(cpu=(32, 32, 32), gpu=(128, 128, 64)) == (128, 128, 32)
    assert h100.matmul_tile(cpu=(32, 32, 32), gpu=(128, 128, 64)) == (128, 128, 64)
    assert t4.matmul_tile(cpu=(32, 32, 32, 4, 2), gpu=(128, 256, 64, 8, 3)) == (128, 256, 32, 8, 2)
    # fp32 operands take twice the room.
    assert _smem(t4.matmul_tile(cpu=(32, 32, 32), gpu=(128, 128, 32), bytes_per_element=4), 4) <= 65536

    assert h100.attention_configs(ATTENTION_TILES) == ATTENTION_TILES
    fitted = t4.attention_configs(ATTENTION_TILES)
    assert fitted and all(attention_smem_bytes(bm, bn, 128, s) <= 65536 for bm, bn, _, s in fitted)
    assert (64, 32, 4, 2) in fitted   # fitted already: unchanged


def test_the_cpu_keeps_its_own_choices():
    cpu = Device("cpu", "CPU", None, "", "")
    assert cpu.matmul_tile(cpu=(32, 32, 32), gpu=(128, 128, 64)) == (32, 32, 32)
    assert cpu.matmul_configs(MATMUL_TILES) == MATMUL_TILES


def test_fitting_gives_up_reuse_last():
    # A tile too big for any limit still comes back with positive sizes, and fitting is idempotent.
    tile = fit_matmul_tile((256, 256, 128, 8, 4), 16 * 1024)
    assert _smem(tile) <= 16 * 1024 and fit_matmul_tile(tile, 16 * 1024) == tile
    assert fit_matmul_tile((128, 128, 64, 8, 3), 65536) == (128, 128, 64, 8, 2)   # one stage less is enough


def test_attention_is_graded_against_what_sdpa_picks_by_itself():
    # What a user of PyTorch gets from F.scaled_dot_product_attention(q, k, v): no backend pinned, so on
    # an H100 or H200 cuDNN's kernel, the fastest there (docs/benchmarks.md's table of backends).
    import inspect
    from grader.exercises import day4
    spec = day4.attention
    assert spec.baseline is day4.sdpa_default and spec.default_baseline is None
    assert "sdpa_kernel" not in inspect.getsource(day4.sdpa_default)
    q = torch.randn(1, 2, 9, 16)
    torch.testing.assert_close(spec.baseline(q, q, q, True), day4.attention_reference(q, q, q, True))


def test_setup_switches_the_interpreter_on_before_triton_is_imported(tmp_path):
    # Triton's own helpers (tl.max, tl.sum) are @triton.jit functions defined when triton.language is
    # imported: they are interpreted only if the interpreter was on by then.
    import subprocess
    import sys
    script = tmp_path / "reduce.py"
    script.write_text(
        "import grader\n"
        "grader.setup(force_cpu=True, quiet=True)\n"
        "import torch, triton, triton.language as tl\n"
        "@triton.jit\n"
        "def row_max(x_ptr, out_ptr, BLOCK: tl.constexpr):\n"
        "    tl.store(out_ptr, tl.max(tl.load(x_ptr + tl.arange(0, BLOCK)), axis=0))\n"
        "x = torch.arange(16.0)\n"
        "out = torch.empty(1)\n"
        "row_max[(1,)](x, out, BLOCK=16)\n"
        "print(out.item())\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "15.0", proc.stderr[-2000:]
