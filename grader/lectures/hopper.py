"""Day 3, lecture 07 (matrix products on Hopper): a persistent matmul, the same with TMA tensor
descriptors (and warp specialization, and a split epilogue), and an FP8 matmul.

The kernels are shown in the notebook with inspect.getsource; tests/test_lecture_hopper.py checks them
in the interpreter and compiles them for sm_90. Tensor descriptors built inside a kernel
(`tl.make_tensor_descriptor`) need Triton 3.4 or later; `has_descriptors()` says whether this one has them.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages). On the GPU, the fastest of the candidates the
# lecture tried at 8192^3 on an H200 (Triton 3.6); in the interpreter, small blocks.
GPU_FP16 = (128, 256, 64, 8, 3)
GPU_FP8 = (128, 256, 128, 8, 3)     # FP8 elements are half the bytes: BLOCK_K doubles for the same tile bytes
CPU = (32, 32, 32, 4, 1)
GROUP_M = 8


def has_descriptors() -> bool:
    return hasattr(tl, "make_tensor_descriptor")


def programs(device) -> int:
    """One program per SM (a persistent kernel's grid); 4 in the interpreter."""
    device = torch.device(device)
    if device.type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count


def use_scratch_memory() -> None:
    """A descriptor made inside a kernel is written to global memory before TMA can use it: Triton asks
    for that scratch space through the allocator set here (bytes from PyTorch's caching allocator)."""
    triton.set_allocator(lambda size, alignment, stream: torch.empty(
        size, dtype=torch.int8, device="cuda" if torch.cuda.is_available() else "cpu"))


@triton.jit
def tile_of(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """The (row, column) of C's tile number `tile`, in the grouped order of lecture 04."""
    per_group = GROUP_M * num_pid_n
    first_m = (tile // per_group) * GROUP_M
    rows = tl.minimum(num_pid_m - first_m, GROUP_M)
    return first_m + (tile % per_group) % rows, (tile % per_group) // rows


@triton.jit
def matmul_persistent_kernel(a_ptr, b_ptr, c_ptr, M, N, K, NUM_PROGRAMS: tl.constexpr,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                             GROUP_M: tl.constexpr):
    """C = A @ B (row-major A: M x K, B: K x N) with one program per SM, each looping over C's tiles."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    # Program p takes tiles p, p + NUM_PROGRAMS, ...; flatten=True lets Triton pipeline the next tile's
    # loads under this tile's last products and its store.
    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_PROGRAMS, flatten=True):
        pid_m, pid_n = tile_of(tile, num_pid_m, num_pid_n, GROUP_M)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + (offs_m[:, None] % M) * K + offs_k[None, :]
        b_ptrs = b_ptr + offs_k[:, None] * N + (offs_n[None, :] % N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K * N
        c_ptrs = c_ptr + offs_m[:, None] * N + offs_n[None, :]
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def matmul_tma_kernel(a_ptr, b_ptr, c_ptr, scale_ptr, M, N, K, NUM_PROGRAMS: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, B_TRANSPOSED: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
                      EPILOGUE_SPLIT: tl.constexpr, SCALED: tl.constexpr):
    """C = A @ B, persistent, every tile moved by TMA; with SCALED, times the float32 at scale_ptr (FP8's
    scales, read on the GPU: no wait for the host). B is K x N, or with B_TRANSPOSED given as its N x K
    transpose (nn.Linear's weight layout, the one FP8 products need)."""
    # A descriptor: where a 2-D tensor lives (pointer, shape, strides) and the block one copy moves.
    # Its loads return zeros past the edges and its stores drop what falls outside: no masks.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    if B_TRANSPOSED:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_M, BLOCK_N // EPILOGUE_SPLIT])
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    # With warp_specialize, Triton gives the TMA loads to a warp of their own and the products to the
    # others (producer and consumers), instead of one instruction stream doing both in turn.
    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_PROGRAMS,
                         flatten=not WARP_SPECIALIZE, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = tile_of(tile, num_pid_m, num_pid_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(tl.cdiv(K, BLOCK_K)):
            a = a_desc.load([pid_m * BLOCK_M, kk * BLOCK_K])
            if B_TRANSPOSED:
                acc = tl.dot(a, b_desc.load([pid_n * BLOCK_N, kk * BLOCK_K]).T, acc)
            else:
                acc = tl.dot(a, b_desc.load([kk * BLOCK_K, pid_n * BLOCK_N]), acc)
        if SCALED:
            acc = acc * tl.load(scale_ptr)
        if EPILOGUE_SPLIT == 2:
            # The tile stored as two halves: the copy to shared memory that a TMA store starts from
            # needs half the space, and the second half's conversion overlaps the first half's store.
            left, right = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], left.to(c_ptr.dtype.element_ty))
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N + BLOCK_N // 2], right.to(c_ptr.dtype.element_ty))
        else:
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_ptr.dtype.element_ty))


def _config(a: torch.Tensor, fp8: bool = False) -> tuple:
    return (GPU_FP8 if fp8 else GPU_FP16) if a.is_cuda else CPU


def _launch(kernel, M: int, N: int, config: tuple, device, *args, **constexprs) -> None:
    bm, bn, bk, warps, stages = config
    n_programs = min(programs(device), triton.cdiv(M, bm) * triton.cdiv(N, bn))
    kernel[(n_programs,)](*args, NUM_PROGRAMS=n_programs, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=GROUP_M,
                          num_warps=warps, num_stages=stages, **constexprs)


def matmul_persistent(a: torch.Tensor, b: torch.Tensor, config: tuple | None = None) -> torch.Tensor:
    (M, K), N = a.shape, b.shape[1]
    a, b = a.contiguous(), b.contiguous()
    c = torch.empty(M, N, device=a.device, dtype=a.dtype)
    _launch(matmul_persistent_kernel, M, N, config or _config(a), a.device, a, b, c, M, N, K)
    return c


def matmul_tma(a: torch.Tensor, b: torch.Tensor, config: tuple | None = None, warp_specialize: bool = False,
               epilogue_split: int = 1, b_transposed: bool = False) -> torch.Tensor:
    """A @ B by TMA; with b_transposed, `b` is B's N x K transpose. TMA needs every stride but the last
    to be a multiple of 16 bytes (K and N multiples of 8 in 16-bit floats)."""
    M, K = a.shape
    N = b.shape[0] if b_transposed else b.shape[1]
    a, b = a.contiguous(), b.contiguous()
    c = torch.empty(M, N, device=a.device, dtype=a.dtype)
    _launch(matmul_tma_kernel, M, N, config or _config(a), a.device, a, b, c, c, M, N, K,
            B_TRANSPOSED=b_transposed, WARP_SPECIALIZE=warp_specialize, EPILOGUE_SPLIT=epilogue_split,
            SCALED=False)
    return c


def to_fp8(x: torch.Tensor) -> tuple:
    """(x scaled into float8_e4m3fn's range and rounded, the scale that undoes it): one scale per tensor,
    its largest magnitude mapped to e4m3's largest finite value, 448."""
    scale = x.abs().max().float().clamp(min=1e-12) / torch.finfo(torch.float8_e4m3fn).max
    return (x.float() / scale).to(torch.float8_e4m3fn), scale


def matmul_fp8(a8: torch.Tensor, b8_t: torch.Tensor, scale_a, scale_b, config: tuple | None = None,
               epilogue_split: int = 2) -> torch.Tensor:
    """(scale_a * A8) @ (scale_b * B8), B given as its N x K transpose, the result in bfloat16. The
    scales are float32 tensors of one element (to_fp8's), multiplied on the GPU."""
    M, K = a8.shape
    N = b8_t.shape[0]
    c = torch.empty(M, N, device=a8.device, dtype=torch.bfloat16)
    scale = (scale_a.float() * scale_b.float()).reshape(1)
    _launch(matmul_tma_kernel, M, N, config or _config(a8, fp8=True), a8.device,
            a8.contiguous(), b8_t.contiguous(), c, scale, M, N, K,
            B_TRANSPOSED=True, WARP_SPECIALIZE=False, EPILOGUE_SPLIT=epilogue_split, SCALED=True)
    return c


def variants(a: torch.Tensor, b: torch.Tensor) -> dict:
    """The lecture's fp16 matmuls of a and b, by name, each a function of no arguments."""
    b_t = b.t().contiguous()
    return {
        "cuBLAS (torch.matmul)": lambda: a @ b,
        "persistent, pointer loads": lambda: matmul_persistent(a, b),
        "persistent + TMA": lambda: matmul_tma(a, b),
        "persistent + TMA, B given N x K": lambda: matmul_tma(a, b_t, b_transposed=True),
        "persistent + TMA + split epilogue": lambda: matmul_tma(a, b, epilogue_split=2),
        "persistent + TMA + warp specialization": lambda: matmul_tma(a, b, warp_specialize=True),
        "persistent + TMA + warp spec. + split": lambda: matmul_tma(a, b, warp_specialize=True, epilogue_split=2),
    }


def time_side_by_side(fns: dict, budget_ms: float = 2000.0) -> dict:
    """{name: median ms, or why it did not run}: each checked to run first, then all timed in the same
    interleaved runs (grader.timing.compare), so that one clock and one GPU state serve them all."""
    from grader import timing
    ran, failed = {}, {}
    for name, fn in fns.items():
        try:
            fn()
            ran[name] = fn
        except Exception as e:  # noqa: BLE001 - a variant this Triton or GPU cannot compile: said, not fatal
            failed[name] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:120] if str(e).strip() else ''}"
    return {**timing.compare(ran, budget_ms=budget_ms), **failed} if ran else failed
