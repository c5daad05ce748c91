"""Pick the device a notebook runs on, once, before any Triton kernel is defined.

On a machine with a CUDA GPU, kernels compile for it. Without one, Triton's CPU interpreter runs
them instead: it must be switched on *before* `@triton.jit` wraps a function, which is why
`setup()` is the first call in every notebook.

What a notebook may use depends on the GPU, and every such choice is made here from the GPU's
properties (`device_from_properties`, pure, so that tests can hand it a T4's or an H100's):
- the 16-bit dtype: bf16 from sm_80 (Ampere) on, fp16 on a T4 (sm_75: no bf16 `tl.dot`);
- tile sizes that fit the shared memory one program may use (`matmul_tile`, `matmul_configs`,
  `attention_configs`): 227 KB on an H100 or H200, where the course's tiles fit as written; 64 KB on
  a T4 (Colab's free GPU), where they are shrunk.
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
    shared_memory: int | None = None   # bytes of shared memory one program may use (opt-in maximum)
    memory: int | None = None          # bytes of GPU memory; both None on CPU
    multiprocessors: int | None = None  # streaming multiprocessors (SMs): a persistent kernel's grid

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

    def matmul_tile(self, cpu: tuple, gpu: tuple, bytes_per_element: int = 2) -> tuple:
        """pick(cpu, gpu) for a matmul tile (BLOCK_M, BLOCK_N, BLOCK_K[, num_warps, num_stages]), the
        GPU's shrunk where this GPU's shared memory cannot hold it (fit_matmul_tile)."""
        if not self.is_gpu:
            return cpu
        return fit_matmul_tile(gpu, self.shared_memory, bytes_per_element) if self.shared_memory else gpu

    def matmul_configs(self, tiles, bytes_per_element: int = 2) -> list:
        """Autotuning candidates (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages), each made to fit
        this GPU's shared memory; candidates that become the same are kept once."""
        if not self.shared_memory:
            return list(tiles)
        return list(dict.fromkeys(fit_matmul_tile(t, self.shared_memory, bytes_per_element) for t in tiles))

    def attention_configs(self, tiles, head_dim: int = 128, bytes_per_element: int = 2) -> list:
        """FlashAttention candidates (BLOCK_M, BLOCK_N, num_warps, num_stages) made to fit this GPU's
        shared memory at the largest head dim they serve; duplicates kept once."""
        if not self.shared_memory:
            return list(tiles)
        return list(dict.fromkeys(fit_attention_tile(t, self.shared_memory, head_dim, bytes_per_element)
                                  for t in tiles))

    def describe(self) -> str:
        where = f"{self.name} (compute capability {self.capability[0]}.{self.capability[1]})" \
            if self.is_gpu else "CPU: no CUDA GPU found, Triton kernels run in its interpreter (slow; small sizes, no bf16)"
        return f"Running on {where}; torch {self.torch_version}, triton {self.triton_version}"


# Triton's num_stages when a launch does not set it (its NVIDIA backend's default).
TRITON_DEFAULT_STAGES = 3


def device_from_properties(props, torch_version: str, triton_version: str) -> Device:
    """The Device of a GPU described like torch.cuda.get_device_properties(i) (name, major, minor,
    shared_memory_per_block_optin, total_memory); the dtype and tile choices follow from it."""
    # An older torch does not report the opt-in maximum: then tiles stay as written (None), rather than
    # being shrunk to the 48 KB every GPU grants without opting in.
    return Device("cuda", props.name, (props.major, props.minor), torch_version, triton_version,
                  shared_memory=getattr(props, "shared_memory_per_block_optin", None),
                  memory=getattr(props, "total_memory", None),
                  multiprocessors=getattr(props, "multi_processor_count", None))


def matmul_smem_bytes(block_m, block_n, block_k, num_stages, bytes_per_element=2) -> int:
    """Shared memory of a matmul's K loop: num_stages copies of a BLOCK_M x BLOCK_K block of A and a
    BLOCK_K x BLOCK_N block of B. An estimate: Triton's own count differs a little (epilogue scratch),
    and on sm_75 it does not pipeline at all (its pipeliner runs from sm_80 on), so one copy is used."""
    return (block_m * block_k + block_k * block_n) * bytes_per_element * num_stages


def attention_smem_bytes(block_m, block_n, head_dim, num_stages, bytes_per_element=2) -> int:
    """The same for FlashAttention's loop: a BLOCK_M x d block of Q, BLOCK_N x d blocks of K and V."""
    return (block_m + 2 * block_n) * head_dim * bytes_per_element * num_stages


def fit_matmul_tile(tile: tuple, limit: int, bytes_per_element: int = 2) -> tuple:
    """A matmul tile made small enough for `limit` bytes of shared memory; one that fits is returned
    unchanged (so nothing changes on an H100 or H200).

    tile = (BLOCK_M, BLOCK_N, BLOCK_K), launched with Triton's default num_stages, or
    (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages). What is given up, in order: stages beyond two
    (pipelining still works with two), BLOCK_K down to 32 (more loop steps, the same reuse), the last
    extra stage, then the larger side of the C tile (less reuse: the last resort).
    """
    bm, bn, bk, *launch = tile
    warps, stages = launch if launch else (None, TRITON_DEFAULT_STAGES)

    def too_big():
        return matmul_smem_bytes(bm, bn, bk, stages, bytes_per_element) > limit

    while launch and stages > 2 and too_big():
        stages -= 1
    while bk > 32 and too_big():
        bk //= 2
    while launch and stages > 1 and too_big():
        stages -= 1
    while max(bm, bn) > 32 and too_big():
        if bn >= bm:
            bn //= 2
        else:
            bm //= 2
    return (bm, bn, bk, warps, stages) if launch else (bm, bn, bk)


def fit_attention_tile(tile: tuple, limit: int, head_dim: int = 128, bytes_per_element: int = 2) -> tuple:
    """A FlashAttention tile (BLOCK_M, BLOCK_N, num_warps, num_stages) made small enough for `limit`
    bytes of shared memory at this head dim, like fit_matmul_tile: stages beyond two, then BLOCK_N
    down to 32, then the last extra stage, then BLOCK_M down to 32."""
    bm, bn, warps, stages = tile

    def too_big():
        return attention_smem_bytes(bm, bn, head_dim, stages, bytes_per_element) > limit

    while stages > 2 and too_big():
        stages -= 1
    while bn > 32 and too_big():
        bn //= 2
    while stages > 1 and too_big():
        stages -= 1
    while bm > 32 and too_big():
        bm //= 2
    return (bm, bn, warps, stages)


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
    from grader.student import interpreter_driver, interpreter_lang
    interpreter_driver.install()    # Triton's driver queries (tutorials, autotune, do_bench) answered on the CPU
    interpreter_lang.install()      # triton.language replaced once a launch, not again at each helper's call
    interpreter_lang.install_tree_reduce()   # tl.reduce by a combine function folds pairwise, as a GPU does
    interpreter_lang.install_saturating_casts()   # a float past an integer's range converts as on a GPU
    interpreter_lang.install_gpu_math()   # tl.exp, exp2, sqrt, rsqrt round and flush as the GPU's instructions do
    interpreter_lang.install_descriptor_byte_strides()   # a descriptor's strides checked in bytes, as TMA does


def _uses_gpu(force_cpu: bool) -> bool:
    return torch.cuda.is_available() and not (force_cpu or os.environ.get("GRADER_FORCE_CPU") == "1")


def probe(force_cpu: bool = False) -> Device:
    """The device this process would use, switching nothing on (the grading checker asks this)."""
    if _uses_gpu(force_cpu):
        return device_from_properties(torch.cuda.get_device_properties(0), torch.__version__, _triton_version())
    return Device("cpu", "CPU (Triton interpreter)", None, torch.__version__, _triton_version())


def detect(force_cpu: bool = False) -> Device:
    """Find the device without printing. `force_cpu` (or GRADER_FORCE_CPU=1) ignores any GPU."""
    global _current
    if not _uses_gpu(force_cpu):
        # Before triton is imported: its own @triton.jit helpers (tl.max, tl.sum, ...) are interpreted
        # only if they were defined with the interpreter on.
        _switch_on_interpreter()
    _current = probe(force_cpu)
    # PyTorch's operators as they are before any student cell runs (the set-up cell comes first): a
    # notebook that later replaces one (torch.library on the aten namespace) is caught by the guard.
    from grader.student.guard import remember_operators
    remember_operators()
    return _current


def setup(force_cpu: bool = False, quiet: bool = False) -> Device:
    """Call first in every notebook: picks the device, switches on the interpreter if needed, reports."""
    dev = detect(force_cpu)
    from grader import _GRADING_AT_IMPORT
    if _GRADING_AT_IMPORT:   # graded: the first cell, before any of the student's runs
        from grader.student import integrity
        integrity.seal()
    if not quiet:
        from grader.versions import upgrades
        for line in [dev.describe()] + upgrades(interpreter=not dev.is_gpu):
            print(line)
    return dev


def current() -> Device:
    """The device chosen by setup(); detects it if setup() was not called."""
    return _current if _current is not None else detect()
