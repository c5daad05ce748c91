"""Day 5 lecture helpers: sums across programs (column sums of a matrix, the shape of a weight's gradient)
by atomics, in two stages, or in one pass, and the order of float additions.

The kernels here are the lecture's subject, kept in one tested place so that the notebook's cells call
them; `tests/test_lecture_day5.py` checks each against PyTorch in float64.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

METHODS = ("atomics", "two stages", "one pass")


@triton.jit
def column_sums_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_row, rows_per_program,
                       BLOCK_N: tl.constexpr, ATOMIC: tl.constexpr):
    """Program (i, j) adds up rows [i * rows_per_program, (i + 1) * rows_per_program) of columns block j
    in float32, then adds its partial sums into `out` (ATOMIC) or stores them as row i of `out`."""
    pid_m = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    first = pid_m * rows_per_program
    for row in range(first, tl.minimum(first + rows_per_program, n_rows)):
        acc += tl.load(x_ptr + row * stride_row + cols, mask=mask, other=0.0).to(tl.float32)
    if ATOMIC:
        tl.atomic_add(out_ptr + cols, acc, mask=mask)
    else:
        tl.store(out_ptr + pid_m * n_cols + cols, acc, mask=mask)


def column_sums(x: torch.Tensor, method: str = "two stages", row_programs: int = 64,
                block_n: int = 256) -> torch.Tensor:
    """x.sum(dim=0) in float32, computed by `method` (one of METHODS) with `row_programs` programs along
    the rows (each adds up a band of rows: "one pass" uses a single one)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}")
    if x.dim() != 2 or x.stride(1) != 1:
        raise ValueError("x must be a matrix whose rows are contiguous")
    n_rows, n_cols = x.shape
    programs = 1 if method == "one pass" else max(1, min(row_programs, n_rows))
    rows_per_program = triton.cdiv(n_rows, programs)
    programs = triton.cdiv(n_rows, rows_per_program)
    col_blocks = triton.cdiv(n_cols, block_n)
    if method == "atomics":
        out = torch.zeros(n_cols, dtype=torch.float32, device=x.device)   # every program adds into it
        column_sums_kernel[(programs, col_blocks)](x, out, n_rows, n_cols, x.stride(0), rows_per_program,
                                                   BLOCK_N=block_n, ATOMIC=True)
        return out
    partial = torch.empty(programs, n_cols, dtype=torch.float32, device=x.device)
    column_sums_kernel[(programs, col_blocks)](x, partial, n_rows, n_cols, x.stride(0), rows_per_program,
                                               BLOCK_N=block_n, ATOMIC=False)
    if programs == 1:
        return partial[0]
    out = torch.empty(1, n_cols, dtype=torch.float32, device=x.device)
    # The second stage: one program per block of columns adds up the few partial rows, in a fixed order.
    column_sums_kernel[(1, col_blocks)](partial, out, programs, n_cols, n_cols, programs,
                                        BLOCK_N=block_n, ATOMIC=False)
    return out[0]


def distinct_results(fn, runs: int = 10) -> int:
    """How many different bit patterns `fn()` returns over `runs` calls: 1 for a deterministic sum."""
    return len({fn().cpu().numpy().tobytes() for _ in range(runs)})


def sums_in_random_orders(values: np.ndarray, orders: int, seed: int = 0) -> np.ndarray:
    """The float32 sum of `values` added up one by one in `orders` random orders (numpy's cumsum adds in
    sequence, in the dtype it is given): the same numbers, different roundings."""
    rng = np.random.default_rng(seed)
    values = np.asarray(values, dtype=np.float32)
    return np.array([np.cumsum(rng.permutation(values), dtype=np.float32)[-1] for _ in range(orders)])


# -- dropout with a seed (lecture 02) -------------------------------------------------------------------

@triton.jit
def seeded_dropout_kernel(x_ptr, out_ptr, n, p, scale, seed, BLOCK: tl.constexpr):
    """out = x * scale (scale = 1 / (1 - p)) where a uniform number drawn from (seed, element index) is at
    least p, else 0. One Philox call per element."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    keep = tl.rand(seed, offs) >= p           # Philox: the same (seed, offs) give the same number
    tl.store(out_ptr + offs, tl.where(keep, x * scale, 0.0).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _drop_quarter(x_ptr, out_ptr, offs, n, r, p, scale):
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.where(r >= p, x * scale, 0.0).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def seeded_dropout4_kernel(x_ptr, out_ptr, n, p, scale, seed, BLOCK: tl.constexpr):
    """The same dropout with a quarter of the Philox work: one call gives four uniform numbers, so a
    program's block is cut in four quarters and element j of quarter k takes number k of counter
    (program * BLOCK / 4 + j). The mask is still a function of (seed, index), for this BLOCK."""
    quarter = tl.arange(0, BLOCK // 4)
    r0, r1, r2, r3 = tl.rand4x(seed, tl.program_id(0) * (BLOCK // 4) + quarter)
    offs = tl.program_id(0) * BLOCK + quarter
    _drop_quarter(x_ptr, out_ptr, offs, n, r0, p, scale)
    _drop_quarter(x_ptr, out_ptr, offs + BLOCK // 4, n, r1, p, scale)
    _drop_quarter(x_ptr, out_ptr, offs + 2 * (BLOCK // 4), n, r2, p, scale)
    _drop_quarter(x_ptr, out_ptr, offs + 3 * (BLOCK // 4), n, r3, p, scale)


DROPOUT_KERNELS = {1: seeded_dropout_kernel, 4: seeded_dropout4_kernel}


def seeded_dropout(x: torch.Tensor, p: float, seed: int, numbers_per_call: int = 4,
                   block: int = 4096) -> torch.Tensor:
    """Dropout of a contiguous tensor with drop probability p, its mask a function of (seed, index);
    `numbers_per_call` picks the kernel (1: one Philox call per element, 4: one per four elements)."""
    if not 0.0 <= p < 1.0:
        raise ValueError("p must be at least 0 and below 1")
    if not x.is_contiguous():
        raise ValueError("x must be contiguous (the mask is indexed by the element's position)")
    if numbers_per_call not in DROPOUT_KERNELS:
        raise ValueError(f"numbers_per_call must be one of {sorted(DROPOUT_KERNELS)}")
    out = torch.empty_like(x)
    n = x.numel()
    DROPOUT_KERNELS[numbers_per_call][(triton.cdiv(n, block),)](x, out, n, p, 1.0 / (1.0 - p), seed, BLOCK=block)
    return out


class SeededDropout(torch.autograd.Function):
    """Dropout whose backward draws the same mask again from the seed: it saves two numbers, no mask.
    Forward and backward are the same operation: dx = dy / (1 - p) where kept, 0 elsewhere."""

    @staticmethod
    def forward(ctx, x, p: float, seed: int):
        ctx.p, ctx.seed = p, seed
        return seeded_dropout(x, p, seed)

    @staticmethod
    def backward(ctx, dy):
        return seeded_dropout(dy.contiguous(), ctx.p, ctx.seed), None, None


# -- FlashAttention backward (lecture 03) ----------------------------------------------------------------
#
# q, k, v, o, do of shape (batch, heads, N, d), contiguous; one program per (block, batch * heads).
# Scores are kept in log2 units: s2 = q.k * scale * log2(e), so that exp2 (one instruction) replaces exp,
# and the forward pass stores each query row's lse2 = log2(sum_j exp2(s2_ij)). The backward pass then
# recomputes every probability as p_ij = exp2(s2_ij - lse2_i), with no running maximum and no rescaling.

LOG2E = 1.4426950408889634


@triton.jit
def attention_forward_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, N, qk_scale,
                             CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Day 4's forward pass, which also stores lse2 of each query row (float32, (batch * heads, N))."""
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    head = bh * N * HEAD_DIM
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=(offs_m < N)[:, None], other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    end = tl.minimum(start_m + BLOCK_M, N) if CAUSAL else N
    for start_n in range(0, end, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_ptr + head + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=(cols < N)[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        keep = cols[None, :] < N
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= cols[None, :])
        s = tl.where(keep, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + head + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=(cols < N)[:, None], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    rows = offs_m < N
    tl.store(o_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
             (acc / l_i[:, None]).to(o_ptr.dtype.element_ty), mask=rows[:, None])
    tl.store(lse_ptr + bh * N + offs_m, m_i + tl.math.log2(l_i), mask=rows)


@triton.jit
def attention_backward_delta_kernel(o_ptr, do_ptr, delta_ptr, N, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """The pre-pass: delta_i = sum_d dO_id * O_id (= sum_j P_ij dP_ij), one float32 per query row."""
    bh = tl.program_id(1).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs = bh * N * HEAD_DIM + offs_m[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    rows = offs_m < N
    o = tl.load(o_ptr + offs, mask=rows[:, None], other=0.0).to(tl.float32)
    do = tl.load(do_ptr + offs, mask=rows[:, None], other=0.0).to(tl.float32)
    tl.store(delta_ptr + bh * N + offs_m, tl.sum(o * do, axis=1), mask=rows)


@triton.jit
def _dkdv_step(dk, dv, k, v, q_ptr, do_ptr, lse_ptr, delta_ptr, head, bh, N, start_m, offs_n, qk_scale,
               MASK: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """Add one block of queries' share to dK and dV of a block of keys. Works on transposed tiles
    (keys along the rows) so that P^T and dS^T come out of tl.dot with no transpose of a result."""
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = offs_m < N            # rows past N load as 0: their dO and delta are 0, so they add nothing
    q = tl.load(q_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=rows[:, None], other=0.0)
    do = tl.load(do_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=rows[:, None], other=0.0)
    lse = tl.load(lse_ptr + bh * N + offs_m, mask=rows, other=0.0)
    delta = tl.load(delta_ptr + bh * N + offs_m, mask=rows, other=0.0)
    p_t = tl.math.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])       # (BLOCK_N, BLOCK_M)
    if MASK:                                                                    # causal: key <= query
        p_t = tl.where(offs_n[:, None] <= offs_m[None, :], p_t, 0.0)
    dv = tl.dot(p_t.to(do.dtype), do, dv)
    dp_t = tl.dot(v, tl.trans(do))
    ds_t = p_t * (dp_t - delta[None, :])
    dk = tl.dot(ds_t.to(q.dtype), q, dk)
    return dk, dv


@triton.jit
def attention_backward_dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr,
                                   N, qk_scale, sm_scale, CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr,
                                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program owns BLOCK_N keys: it keeps their K, V and the float32 dK, dV in registers and
    sweeps over the query blocks that see them (causal: from the diagonal down)."""
    start_n = tl.program_id(0) * BLOCK_N
    bh = tl.program_id(1).to(tl.int64)
    head = bh * N * HEAD_DIM
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    cols = offs_n < N
    k = tl.load(k_ptr + head + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=cols[:, None], other=0.0)
    v = tl.load(v_ptr + head + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=cols[:, None], other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    start = 0
    if CAUSAL:
        # Query blocks above this key block see none of its keys; those that cross the diagonal need
        # the mask; from the first block wholly below it on, none does.
        start = (start_n // BLOCK_M) * BLOCK_M
        unmasked = tl.cdiv(start_n + BLOCK_N, BLOCK_M) * BLOCK_M
        for start_m in range(start, tl.minimum(unmasked, N), BLOCK_M):
            dk, dv = _dkdv_step(dk, dv, k, v, q_ptr, do_ptr, lse_ptr, delta_ptr, head, bh, N, start_m, offs_n,
                                qk_scale, MASK=True, HEAD_DIM=HEAD_DIM, BLOCK_M=BLOCK_M)
        start = unmasked
    for start_m in range(start, N, BLOCK_M):
        dk, dv = _dkdv_step(dk, dv, k, v, q_ptr, do_ptr, lse_ptr, delta_ptr, head, bh, N, start_m, offs_n,
                            qk_scale, MASK=False, HEAD_DIM=HEAD_DIM, BLOCK_M=BLOCK_M)
    out = head + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(dv_ptr + out, dv.to(dv_ptr.dtype.element_ty), mask=cols[:, None])
    # dS was taken with respect to the scaled scores: the chain rule through q.k * sm_scale gives sm_scale.
    tl.store(dk_ptr + out, (dk * sm_scale).to(dk_ptr.dtype.element_ty), mask=cols[:, None])


@triton.jit
def _dq_step(dq, q, do, lse, delta, k_ptr, v_ptr, head, N, start_n, offs_m, qk_scale,
             MASK: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    """Add one block of keys' share to dQ of a block of queries."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    cols = offs_n < N            # keys past N load as 0: their dS multiplies a zero row of K
    k = tl.load(k_ptr + head + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=cols[:, None], other=0.0)
    v = tl.load(v_ptr + head + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=cols[:, None], other=0.0)
    p = tl.math.exp2(tl.dot(q, tl.trans(k)) * qk_scale - lse[:, None])
    if MASK:
        p = tl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
    ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])
    return tl.dot(ds.to(k.dtype), k, dq)


@triton.jit
def attention_backward_dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr,
                                 N, qk_scale, sm_scale, CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr,
                                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program owns BLOCK_M queries and sweeps over the key blocks they see: the second loop,
    ordered the other way round, so that dQ too is written by one program and needs no atomics."""
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    head = bh * N * HEAD_DIM
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = offs_m < N
    q = tl.load(q_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=rows[:, None], other=0.0)
    do = tl.load(do_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=rows[:, None], other=0.0)
    lse = tl.load(lse_ptr + bh * N + offs_m, mask=rows, other=0.0)
    delta = tl.load(delta_ptr + bh * N + offs_m, mask=rows, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    end = N
    if CAUSAL:
        full = (start_m // BLOCK_N) * BLOCK_N     # key blocks wholly left of the diagonal: no mask
        for start_n in range(0, full, BLOCK_N):
            dq = _dq_step(dq, q, do, lse, delta, k_ptr, v_ptr, head, N, start_n, offs_m, qk_scale,
                          MASK=False, HEAD_DIM=HEAD_DIM, BLOCK_N=BLOCK_N)
        for start_n in range(full, tl.minimum(start_m + BLOCK_M, N), BLOCK_N):
            dq = _dq_step(dq, q, do, lse, delta, k_ptr, v_ptr, head, N, start_n, offs_m, qk_scale,
                          MASK=True, HEAD_DIM=HEAD_DIM, BLOCK_N=BLOCK_N)
        end = 0
    for start_n in range(0, end, BLOCK_N):
        dq = _dq_step(dq, q, do, lse, delta, k_ptr, v_ptr, head, N, start_n, offs_m, qk_scale,
                      MASK=False, HEAD_DIM=HEAD_DIM, BLOCK_N=BLOCK_N)
    tl.store(dq_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
             (dq * sm_scale).to(dq_ptr.dtype.element_ty), mask=rows[:, None])


# Tiles (BLOCK_M, BLOCK_N, num_warps, num_stages) per kernel: small on the interpreter, where each
# program is simulated element by element; on a GPU the fastest of a sweep on an H100 (lecture 03), by
# head dim (a 64-dim head leaves room for smaller, more numerous dK/dV programs).
ATTENTION_TILES_CPU = {"forward": (16, 16, 4, 1), "dkdv": (16, 16, 4, 1), "dq": (16, 16, 4, 1)}
ATTENTION_TILES_GPU = {
    64: {"forward": (128, 64, 8, 3), "dkdv": (64, 64, 4, 3), "dq": (128, 64, 8, 3)},
    128: {"forward": (128, 64, 8, 3), "dkdv": (64, 128, 8, 3), "dq": (128, 64, 8, 3)},
}


def _tiles(x: torch.Tensor, kernel: str, tiles: dict | None) -> tuple:
    if tiles:
        return tiles[kernel]
    if not x.is_cuda:
        return ATTENTION_TILES_CPU[kernel]
    return ATTENTION_TILES_GPU[64 if x.shape[-1] <= 64 else 128][kernel]


def attention_forward(q, k, v, causal: bool, tiles: dict | None = None):
    """(o, lse2): attention of contiguous (batch, heads, N, d) tensors, and each query row's lse2."""
    b, h, n, d = q.shape
    if d not in (16, 32, 64, 128):
        raise ValueError(f"head dim {d}: these kernels take 16, 32, 64 or 128 (a power of two for tl.arange)")
    o = torch.empty_like(q)
    lse = torch.empty((b * h, n), device=q.device, dtype=torch.float32)
    bm, bn, warps, stages = _tiles(q, "forward", tiles)
    attention_forward_kernel[(triton.cdiv(n, bm), b * h)](q, k, v, o, lse, n, LOG2E / d ** 0.5, CAUSAL=causal,
                                                          HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn,
                                                          num_warps=warps, num_stages=stages)
    return o, lse


def attention_backward(q, k, v, o, lse, do, causal: bool, tiles: dict | None = None):
    """(dq, dk, dv) from the forward pass's o and lse2: the pre-pass, then the dK/dV and dQ sweeps."""
    b, h, n, d = q.shape
    delta = torch.empty_like(lse)
    attention_backward_delta_kernel[(triton.cdiv(n, 64), b * h)](o, do, delta, n, HEAD_DIM=d, BLOCK_M=64)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    sm_scale = 1 / d ** 0.5
    bm, bn, warps, stages = _tiles(q, "dkdv", tiles)
    attention_backward_dkdv_kernel[(triton.cdiv(n, bn), b * h)](
        q, k, v, do, lse, delta, dk, dv, n, sm_scale * LOG2E, sm_scale, CAUSAL=causal, HEAD_DIM=d,
        BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, num_stages=stages)
    bm, bn, warps, stages = _tiles(q, "dq", tiles)
    attention_backward_dq_kernel[(triton.cdiv(n, bm), b * h)](
        q, k, v, do, lse, delta, dq, n, sm_scale * LOG2E, sm_scale, CAUSAL=causal, HEAD_DIM=d,
        BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, num_stages=stages)
    return dq, dk, dv


class FlashAttention(torch.autograd.Function):
    """Attention whose backward pass recomputes the probabilities from q, k and each row's lse2: it saves
    q, k, v, o and N float32 numbers per head, never an N x N matrix."""

    @staticmethod
    def forward(ctx, q, k, v, causal: bool = False):
        q, k, v = (t.contiguous() for t in (q, k, v))
        o, lse = attention_forward(q, k, v, causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal = causal
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        return *attention_backward(q, k, v, o, lse, do.contiguous(), ctx.causal), None


def flash_attention(q, k, v, causal: bool = False):
    return FlashAttention.apply(q, k, v, causal)
