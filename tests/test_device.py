"""Device set-up: what is reported and which dtypes and sizes are chosen."""
import torch

import grader
from grader.device import Device
from conftest import on_cpu_only


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
