"""Pick the device a notebook runs on, once, before any Triton kernel is defined.

On a machine with a CUDA GPU, kernels compile for it. Without one, Triton's CPU interpreter runs
them instead: it must be switched on *before* `@triton.jit` wraps a function, which is why
`setup()` is the first call in every notebook.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Device:
    """What a notebook needs to know about where its kernels run."""

    torch_device: str          # "cuda" or "cpu": where tensors live
    name: str                  # e.g. "NVIDIA H100 80GB HBM3" or "CPU (Triton interpreter)"
    capability: tuple | None   # CUDA compute capability, e.g. (9, 0); None on CPU
    torch_version: str
    triton_version: str

    @property
    def is_gpu(self) -> bool:
        return self.torch_device == "cuda"

    @property
    def interpreter(self) -> bool:
        return not self.is_gpu

    @property
    def supports_bf16(self) -> bool:
        # bf16 tensor-core math needs Ampere (sm_80) or newer; the CPU interpreter stores bf16 as
        # uint16 and computes garbage with it, so it is off there.
        return self.is_gpu and self.capability >= (8, 0)

    @property
    def half_dtype(self) -> torch.dtype:
        """The 16-bit dtype to use here: bf16 where supported, else fp16 (T4), fp32 on the interpreter."""
        if self.supports_bf16:
            return torch.bfloat16
        if self.is_gpu:
            return torch.float16
        return torch.float32

    def pick(self, cpu, gpu):
        """Choose a size (or anything else) by device: small for the interpreter, full for a GPU."""
        return gpu if self.is_gpu else cpu

    def describe(self) -> str:
        where = f"{self.name} (compute capability {self.capability[0]}.{self.capability[1]})" \
            if self.is_gpu else "CPU: no CUDA GPU found, Triton kernels run in its interpreter (slow; small sizes, no bf16)"
        return f"Running on {where}; torch {self.torch_version}, triton {self.triton_version}"


_current: Device | None = None


def _triton_version() -> str:
    try:
        import triton
        return triton.__version__
    except ImportError:  # pragma: no cover - triton is a dependency, but say so clearly
        return "not installed"


def _switch_on_interpreter() -> None:
    os.environ["TRITON_INTERPRET"] = "1"
    try:  # triton >= 3.4 reads its settings through `knobs`; older ones read the variable itself
        import triton
        triton.knobs.runtime.interpret = True
    except (ImportError, AttributeError):
        pass


def detect(force_cpu: bool = False) -> Device:
    """Find the device without printing. `force_cpu` (or GRADER_FORCE_CPU=1) ignores any GPU."""
    global _current
    force_cpu = force_cpu or os.environ.get("GRADER_FORCE_CPU") == "1"
    if torch.cuda.is_available() and not force_cpu:
        props = torch.cuda.get_device_properties(0)
        _current = Device("cuda", props.name, (props.major, props.minor), torch.__version__, _triton_version())
    else:
        _switch_on_interpreter()
        _current = Device("cpu", "CPU (Triton interpreter)", None, torch.__version__, _triton_version())
    return _current


def setup(force_cpu: bool = False, quiet: bool = False) -> Device:
    """Call first in every notebook: picks the device, switches on the interpreter if needed, reports."""
    dev = detect(force_cpu)
    if not quiet:
        print(dev.describe())
    return dev


def current() -> Device:
    """The device chosen by setup(); detects it if setup() was not called."""
    return _current if _current is not None else detect()
