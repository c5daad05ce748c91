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


# -- Attention with TMA (experiments for Day 4's kernel on Hopper; timed with `attention_variants`, the
# figures in docs/benchmarks.md) ----------------------------------------------------------------------------
#
# Day 4's kernel loads K and V with pointers and masks every block. Here every block moves by TMA from
# descriptors over the (batch * heads, N, d) view, whose first dimension keeps each head apart: rows past
# N load as zeros and stores past N are dropped by the hardware. The key blocks split into those that need
# no mask (inside N, and wholly below the diagonal when causal), looped over first and with nothing but
# products and the online softmax, and the few that do (the diagonal, a ragged last block).

ATTENTION_GPU = {64: (128, 128, 8, 3), 128: (128, 64, 8, 3)}   # head dim -> (BLOCK_M, BLOCK_N, warps, stages)
ATTENTION_CPU = (16, 16, 4, 1)       # also the two-halves kernel's (HALF, BLOCK_N, warps, stages)
LOG2E = 1.4426950408889634          # exp(x) = exp2(x log2 e): the kernels' scores are in log2 units


@triton.jit
def _rows_of_heads(ptr, BH, N, HEAD_DIM: tl.constexpr, ROWS: tl.constexpr):
    """A descriptor over the (batch * heads, N, d) view of a contiguous (batch, heads, N, d) tensor, moving
    ROWS rows of one head at a time. (A list in a variable does not compile: the strides are written out.)"""
    return tl.make_tensor_descriptor(ptr, shape=[BH, N, HEAD_DIM], strides=[N * HEAD_DIM, HEAD_DIM, 1],
                                     block_shape=[1, ROWS, HEAD_DIM])


@triton.jit
def _softmax_step(qk, m_i, l_i, acc, qk_scale):
    """Unscaled scores qk of one key block into the running (m, l) and the rescaled acc, in log2 units
    (exp2), the scale folded into the subtraction: one multiply-add per score. Returns P too. Masked
    scores are -inf, and stay so once scaled."""
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    return p, m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None]


@triton.jit
def _attend_tma(acc, l_i, m_i, q, k_desc, v_desc, bh, start_n, offs_m, N, qk_scale,
                MASK: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    """Fold the key block at start_n into the running (acc, l, m)."""
    k = k_desc.load([bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
    qk = tl.dot(q, k.T)
    if MASK:
        cols = start_n + tl.arange(0, BLOCK_N)
        keep = cols[None, :] < N
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= cols[None, :])
        qk = tl.where(keep, qk, -float("inf"))
    p, m_i, l_i, acc = _softmax_step(qk, m_i, l_i, acc, qk_scale)
    v = v_desc.load([bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
    acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, l_i, m_i


@triton.jit
def attention_tma_kernel(q_ptr, k_ptr, v_ptr, o_ptr, BH, N, qk_scale, CAUSAL: tl.constexpr,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         WARP_SPECIALIZE: tl.constexpr):
    """Attention of contiguous (batch, heads, N, d) tensors: one program per (query block, batch * head)."""
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    q_desc = _rows_of_heads(q_ptr, BH, N, HEAD_DIM, BLOCK_M)
    k_desc = _rows_of_heads(k_ptr, BH, N, HEAD_DIM, BLOCK_N)
    v_desc = _rows_of_heads(v_ptr, BH, N, HEAD_DIM, BLOCK_N)
    o_desc = _rows_of_heads(o_ptr, BH, N, HEAD_DIM, BLOCK_M)
    q = q_desc.load([bh, start_m, 0]).reshape(BLOCK_M, HEAD_DIM)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    # Blocks [0, unmasked) need no mask: inside N and, when causal, ending at or before this block's
    # first query. The rest, up to `end`, are masked.
    unmasked = (N // BLOCK_N) * BLOCK_N
    end = N
    if CAUSAL:
        unmasked = tl.minimum(unmasked, (start_m // BLOCK_N) * BLOCK_N)
        end = tl.minimum(start_m + BLOCK_M, N)
    for start_n in tl.range(0, unmasked, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        acc, l_i, m_i = _attend_tma(acc, l_i, m_i, q, k_desc, v_desc, bh, start_n, offs_m, N, qk_scale,
                                    MASK=False, CAUSAL=CAUSAL, BLOCK_N=BLOCK_N, HEAD_DIM=HEAD_DIM)
    for start_n in range(unmasked, end, BLOCK_N):
        acc, l_i, m_i = _attend_tma(acc, l_i, m_i, q, k_desc, v_desc, bh, start_n, offs_m, N, qk_scale,
                                    MASK=True, CAUSAL=CAUSAL, BLOCK_N=BLOCK_N, HEAD_DIM=HEAD_DIM)
    o = (acc / l_i[:, None]).to(o_ptr.dtype.element_ty)
    o_desc.store([bh, start_m, 0], o.reshape(1, BLOCK_M, HEAD_DIM))


def attention_tma(q, k, v, causal: bool = False, config: tuple | None = None,
                  warp_specialize: bool = False) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v for contiguous (batch, heads, N, d) q, k, v; d a power of two from 16
    to 128. TMA needs the rows' strides in multiples of 16 bytes: d of 8 or more in 16-bit floats."""
    b, h, n, d = q.shape
    if d not in (16, 32, 64, 128):
        raise ValueError(f"head dim {d}: 16, 32, 64 or 128")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    bm, bn, warps, stages = config or (ATTENTION_GPU[max(64, d)] if q.is_cuda else ATTENTION_CPU)
    attention_tma_kernel[(triton.cdiv(n, bm), b * h)](q, k, v, o, b * h, n, LOG2E / d ** 0.5,
                                                      CAUSAL=causal, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn,
                                                      WARP_SPECIALIZE=warp_specialize,
                                                      num_warps=warps, num_stages=stages)
    return o


# Two halves per program. In the kernel above a warp group computes its block's scores, then waits for
# them, runs the softmax, then asks for P @ V: the tensor cores idle during every softmax. Here a program
# holds two blocks of queries (halves) and asks for both halves' scores before either softmax, so that the
# first half's softmax runs while the second half's product is computed, and the second's while the
# first half's P @ V is (the overlap FlashAttention-3 builds with two warp groups taking turns). It takes
# Day 4's whole interface: (batch, heads, N, d) views with any strides but a contiguous head dim (the
# parts of one QKV projection, say), causal or not, any N. Its descriptors are 4-D, over the views
# themselves: rows past N load as zeros and stores past N are dropped, and the one or two key blocks that
# need a mask (the diagonal, a ragged end) come after the unmasked loop. Measured on an H200
# (docs/benchmarks.md): 523 TFLOP/s at Day 4's graded shape (head dim 128, not causal) against 480 for
# Day 4's one-block reference and cuDNN's 679; 1.07x the reference when causal at head dim 128, and slower
# than it for the transformer block's causal head dim 64.

ATTENTION_HALVES_GPU = {64: (64, 128, 4, 2), 128: (64, 64, 4, 2)}   # head dim -> (HALF, BLOCK_N, warps, stages)


@triton.jit
def _heads(ptr, B, H, N, stride_b, stride_h, stride_n, HEAD_DIM: tl.constexpr, ROWS: tl.constexpr):
    """A descriptor over a (batch, heads, N, d) view with these strides (the head dim contiguous), moving
    ROWS rows of one head at a time."""
    return tl.make_tensor_descriptor(ptr, shape=[B, H, N, HEAD_DIM], strides=[stride_b, stride_h, stride_n, 1],
                                     block_shape=[1, 1, ROWS, HEAD_DIM])


@triton.jit
def _attend_halves(a0, l0, m0, a1, l1, m1, q0, q1, k_desc, v_desc, b, h, start_n, offs_m0, N, qk_scale,
                   MASK: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                   HALF: tl.constexpr):
    """Fold the key block at start_n into both halves' running (acc, l, m): both halves' scores first."""
    k = k_desc.load([b, h, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
    qk0 = tl.dot(q0, k.T)
    qk1 = tl.dot(q1, k.T)
    v = v_desc.load([b, h, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
    if MASK:
        cols = start_n + tl.arange(0, BLOCK_N)
        keep0 = cols[None, :] < N
        keep1 = keep0
        if CAUSAL:
            keep0 = keep0 & (offs_m0[:, None] >= cols[None, :])
            keep1 = keep1 & (offs_m0[:, None] + HALF >= cols[None, :])
        qk0 = tl.where(keep0, qk0, -float("inf"))
        qk1 = tl.where(keep1, qk1, -float("inf"))
    p0, m0, l0, a0 = _softmax_step(qk0, m0, l0, a0, qk_scale)    # while qk1 is still computed
    a0 = tl.dot(p0.to(v.dtype), v, a0)
    p1, m1, l1, a1 = _softmax_step(qk1, m1, l1, a1, qk_scale)    # while P0 @ V is
    a1 = tl.dot(p1.to(v.dtype), v, a1)
    return a0, l0, m0, a1, l1, m1


@triton.jit
def attention_halves_kernel(q_ptr, k_ptr, v_ptr, o_ptr, B, H, N, qk_scale,
                            stride_qb, stride_qh, stride_qn, stride_kb, stride_kh, stride_kn,
                            stride_vb, stride_vh, stride_vn, stride_ob, stride_oh, stride_on,
                            CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, HALF: tl.constexpr,
                            BLOCK_N: tl.constexpr):
    """One program per (two blocks of HALF queries, batch * head); the last query blocks (the most keys,
    when causal) first."""
    start_m = (tl.num_programs(0) - 1 - tl.program_id(0)) * 2 * HALF
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    q_desc = _heads(q_ptr, B, H, N, stride_qb, stride_qh, stride_qn, HEAD_DIM, HALF)
    k_desc = _heads(k_ptr, B, H, N, stride_kb, stride_kh, stride_kn, HEAD_DIM, BLOCK_N)
    v_desc = _heads(v_ptr, B, H, N, stride_vb, stride_vh, stride_vn, HEAD_DIM, BLOCK_N)
    o_desc = _heads(o_ptr, B, H, N, stride_ob, stride_oh, stride_on, HEAD_DIM, HALF)
    q0 = q_desc.load([b, h, start_m, 0]).reshape(HALF, HEAD_DIM)
    q1 = q_desc.load([b, h, start_m + HALF, 0]).reshape(HALF, HEAD_DIM)
    offs_m0 = start_m + tl.arange(0, HALF)
    m0 = tl.full([HALF], -float("inf"), tl.float32)
    l0 = tl.zeros([HALF], tl.float32)
    a0 = tl.zeros([HALF, HEAD_DIM], tl.float32)
    m1, l1, a1 = m0, l0, a0
    # Blocks [0, unmasked) need no mask: inside N and, when causal, ending at or before the first half's
    # first query. The rest, up to `end`, are masked.
    unmasked = (N // BLOCK_N) * BLOCK_N
    end = N
    if CAUSAL:
        unmasked = tl.minimum(unmasked, (start_m // BLOCK_N) * BLOCK_N)
        end = tl.minimum(start_m + 2 * HALF, N)
    for start_n in range(0, unmasked, BLOCK_N):
        a0, l0, m0, a1, l1, m1 = _attend_halves(a0, l0, m0, a1, l1, m1, q0, q1, k_desc, v_desc, b, h, start_n,
                                                offs_m0, N, qk_scale, False, CAUSAL, BLOCK_N, HEAD_DIM, HALF)
    for start_n in range(unmasked, end, BLOCK_N):
        a0, l0, m0, a1, l1, m1 = _attend_halves(a0, l0, m0, a1, l1, m1, q0, q1, k_desc, v_desc, b, h, start_n,
                                                offs_m0, N, qk_scale, True, CAUSAL, BLOCK_N, HEAD_DIM, HALF)
    o0 = (a0 / l0[:, None]).to(o_ptr.dtype.element_ty).reshape(1, 1, HALF, HEAD_DIM)
    o1 = (a1 / l1[:, None]).to(o_ptr.dtype.element_ty).reshape(1, 1, HALF, HEAD_DIM)
    o_desc.store([b, h, start_m, 0], o0)
    o_desc.store([b, h, start_m + HALF, 0], o1)


def attention_halves(q, k, v, causal: bool = False, config: tuple | None = None, out=None) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v for (batch, heads, N, d) q, k, v (views with a contiguous head dim), causal
    or not, any N, d a power of two from 16 to 128; written into `out` (a view like q's) if given. TMA needs
    each tensor's start and strides in multiples of 16 bytes."""
    b, h, n, d = q.shape
    if d not in (16, 32, 64, 128):
        raise ValueError(f"head dim {d}: 16, 32, 64 or 128")
    o = torch.empty_like(q, memory_format=torch.contiguous_format) if out is None else out
    for name, t in (("q", q), ("k", k), ("v", v), ("out", o)):
        if t.shape != q.shape or t.stride(-1) != 1 or t.data_ptr() % 16 or \
                any(s * t.element_size() % 16 for s in t.stride()[:3]):
            raise ValueError(f"{name}: a {tuple(q.shape)} tensor with a contiguous head dim, its start and strides "
                             f"multiples of 16 bytes (TMA), not {tuple(t.shape)} with strides {t.stride()}")
    half, bn, warps, stages = config or (ATTENTION_HALVES_GPU[max(64, d)] if q.is_cuda else ATTENTION_CPU)
    attention_halves_kernel[(triton.cdiv(n, 2 * half), b * h)](
        q, k, v, o, b, h, n, LOG2E / d ** 0.5, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
        *o.stride()[:3], CAUSAL=causal, HEAD_DIM=d, HALF=half, BLOCK_N=bn, num_warps=warps, num_stages=stages)
    return o


def attention_variants(q, k, v, causal: bool = False) -> dict:
    """Attention of q, k, v by name, each a function of no arguments: SDPA's default dispatch, its
    FlashAttention-2 backend, the TMA kernel above in a few tile choices and the two-halves kernel (for
    time_side_by_side)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def flash():
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    found = {"SDPA (PyTorch's default dispatch)": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
             "SDPA, FLASH_ATTENTION backend": flash}
    for config in [(128, 64, 8, 3), (128, 128, 8, 2), (128, 128, 8, 3), (128, 64, 4, 3), (64, 64, 4, 4)]:
        for ws in (False, True):
            found[f"TMA {config}{' + warp spec.' if ws else ''}"] = \
                (lambda config=config, ws=ws: attention_tma(q, k, v, causal, config, ws))
    for config in [(64, 64, 4, 2), (64, 128, 4, 2), (64, 128, 4, 3)]:
        found[f"TMA, two halves {config}"] = lambda config=config: attention_halves(q, k, v, causal, config)
    return found
