"""Day 5 lecture helpers, one section per lecture: sums across programs (column sums of a matrix, the
shape of a weight's gradient) by atomics, in two stages, by the last program to finish or in one pass,
and the order of float additions (01); dropout from a seed (02); the FlashAttention backward (03);
linear + cross-entropy in chunks and peak memory (04); rotary position embeddings (05); what autograd
keeps for the backward pass, and recomputing it instead (06).

The kernels here are the lecture's subject, kept in one tested place so that the notebook's cells call
them; `tests/test_lecture_day5.py` checks each against PyTorch in float64.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

METHODS = ("atomics", "two stages", "last program", "one pass")


@triton.jit
def column_sums_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_row, rows_per_program, sums_ptr, arrived_ptr,
                       BLOCK_N: tl.constexpr, ATOMIC: tl.constexpr, LAST_ADDS: tl.constexpr):
    """Program (i, j) adds up rows [i * rows_per_program, (i + 1) * rows_per_program) of columns block j
    in float32, then adds its partial sums into `out` (ATOMIC) or stores them as row i of `out`. With
    LAST_ADDS, the last program of column block j to finish adds up all the partial rows of that block
    into `sums`, in a fixed order: the two stages in one launch."""
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
    if LAST_ADDS:
        # Every thread of the program has stored its part of the row (the barrier: Triton also puts one
        # before a scalar atomic, this one says so in the code); then one atomic counts the program in. Its
        # release makes those stores visible before the count goes up, its acquire lets the program that
        # brings the count to the last value see every other program's rows.
        tl.debug_barrier()
        arrived = tl.atomic_add(arrived_ptr + tl.program_id(1), 1, sem="acq_rel")
        if arrived == tl.num_programs(0) - 1:
            total = tl.zeros([BLOCK_N], dtype=tl.float32)
            for i in range(0, tl.num_programs(0)):       # rows 0, 1, 2, ...: the same order every time
                # .cg: read from L2, where the other SMs' stores are, not from this SM's own cache
                total += tl.load(out_ptr + i * n_cols + cols, mask=mask, other=0.0, cache_modifier=".cg")
            tl.store(sums_ptr + cols, total, mask=mask)


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
        column_sums_kernel[(programs, col_blocks)](x, out, n_rows, n_cols, x.stride(0), rows_per_program, out, out,
                                                   BLOCK_N=block_n, ATOMIC=True, LAST_ADDS=False)
        return out
    partial = torch.empty(programs, n_cols, dtype=torch.float32, device=x.device)
    if method == "last program":
        sums = torch.empty(n_cols, dtype=torch.float32, device=x.device)
        arrived = torch.zeros(col_blocks, dtype=torch.int32, device=x.device)   # a counter per column block
        column_sums_kernel[(programs, col_blocks)](x, partial, n_rows, n_cols, x.stride(0), rows_per_program,
                                                   sums, arrived, BLOCK_N=block_n, ATOMIC=False, LAST_ADDS=True)
        return sums
    column_sums_kernel[(programs, col_blocks)](x, partial, n_rows, n_cols, x.stride(0), rows_per_program,
                                               partial, partial, BLOCK_N=block_n, ATOMIC=False, LAST_ADDS=False)
    if programs == 1:
        return partial[0]
    out = torch.empty(1, n_cols, dtype=torch.float32, device=x.device)
    # The second stage: one program per block of columns adds up the few partial rows, in a fixed order.
    column_sums_kernel[(1, col_blocks)](partial, out, programs, n_cols, n_cols, programs, out, out,
                                        BLOCK_N=block_n, ATOMIC=False, LAST_ADDS=False)
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


# -- linear + cross-entropy in chunks (lecture 04) -------------------------------------------------------
#
# The output layer's loss, logits = h @ W^T (N x V) followed by the mean cross-entropy, computed C rows
# at a time: per chunk one matmul for the logits, one Triton kernel that turns them into the loss and,
# in place, the gradient of the loss with respect to them, and two matmuls that pass that gradient on
# to h and W. No N x V tensor ever exists; the largest temporary is the C x V chunk.

IGNORE_INDEX = -100
LN2 = 0.6931471805599453
# What a kernel reads of a module's globals must be a tl.constexpr: the interpreter reads a plain float,
# Triton's compiler refuses it (tests/test_lecture_kernels_compile.py compiles these kernels for sm_90).
LOG2E_K, LN2_K = tl.constexpr(LOG2E), tl.constexpr(LN2)


@triton.jit
def cross_entropy_grad_kernel(logits_ptr, targets_ptr, losses_ptr, scale_ptr, n_cols, stride_row,
                              ignore_index, BLOCK: tl.constexpr):
    """One program per row of a chunk of logits z: stores the row's loss, logsumexp(z) - z[target], and
    overwrites the row with the gradient of the mean loss, (softmax(z) - onehot(target)) * scale, where
    `scale` (read from memory) is 1 / (number of counted rows of the whole batch). A row whose target
    is ignore_index gets loss 0 and a gradient of zeros. Float32 math whatever the logits' dtype;
    any n_cols (the last block of the row is masked)."""
    row = tl.program_id(0)
    row_ptr = logits_ptr + row.to(tl.int64) * stride_row
    target = tl.load(targets_ptr + row)
    valid = target != ignore_index
    # Pass 1: the online log-sum-exp of Day 2 (base 2: z * log2(e), then exp2), one block at a time.
    m = -float("inf")
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        z = tl.load(row_ptr + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32) * LOG2E_K
        m_new = tl.maximum(m, tl.max(z, axis=0))
        s = s * tl.math.exp2(m - m_new) + tl.sum(tl.math.exp2(z - m_new), axis=0)
        m = m_new
    lse2 = m + tl.math.log2(s)                               # log2 of sum_j exp(z_j)
    # The target's logit is read before pass 2 writes over the row (never at column -100).
    z_target = tl.load(row_ptr + target, mask=valid, other=0.0).to(tl.float32)
    tl.store(losses_ptr + row, tl.where(valid, lse2 * LN2_K - z_target, 0.0))
    # Pass 2: read the row again and write the gradient over it; softmax_j = exp2(z_j * log2(e) - lse2).
    scale = tl.where(valid, tl.load(scale_ptr), 0.0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        z = tl.load(row_ptr + cols, mask=mask, other=0.0).to(tl.float32) * LOG2E_K
        grad = (tl.math.exp2(z - lse2) - tl.where(cols == target, 1.0, 0.0)) * scale
        tl.store(row_ptr + cols, grad.to(logits_ptr.dtype.element_ty), mask=mask)


def cross_entropy_and_grad_(logits: torch.Tensor, targets: torch.Tensor, scale: torch.Tensor,
                            block: int | None = None) -> torch.Tensor:
    """The per-row losses (float32) of a chunk of logits, whose rows it overwrites with the gradient
    (softmax - onehot) * scale (zeros for ignored rows). `scale` is a one-element float32 tensor on the
    logits' device, 1 / (counted rows of the whole batch): a tensor, so that no host sync is needed."""
    if logits.dim() != 2 or logits.stride(1) != 1:
        raise ValueError("logits must be a matrix whose rows are contiguous")
    n_rows, n_cols = logits.shape
    losses = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
    if n_rows == 0:
        return losses
    if block is None:
        block = min(4096 if logits.is_cuda else 512, triton.next_power_of_2(n_cols))
    cross_entropy_grad_kernel[(n_rows,)](logits, targets, losses, scale, n_cols, logits.stride(0), IGNORE_INDEX,
                                         BLOCK=block, num_warps=8 if block >= 2048 else 4)
    return losses


class ChunkedLinearCrossEntropy(torch.autograd.Function):
    """mean cross-entropy(h @ weight^T, targets), C rows at a time. The forward pass computes the
    gradients of h and weight as it goes (the logits' gradient exists for one chunk at a time); the
    backward pass only multiplies them by the incoming gradient, a scalar. One backward pass per
    forward pass (the saved gradients are scaled in place and then released).

    The mean is over the rows whose target is not -100; if there are none, the loss is 0 and both
    gradients are 0 (F.cross_entropy returns NaN there). grad_weight is accumulated over the chunks in
    `grad_weight_dtype` (None: float32, or float64 for float64 weights)."""

    @staticmethod
    def forward(ctx, h, weight, targets, chunk_rows: int, grad_weight_dtype=None):
        if h.dim() != 2 or weight.dim() != 2 or h.shape[1] != weight.shape[1] or targets.shape != h.shape[:1]:
            raise ValueError("expected h (N, d), weight (V, d) and targets (N,)")
        if chunk_rows < 1:
            raise ValueError("chunk_rows must be at least 1")
        h, weight, targets = h.contiguous(), weight.contiguous(), targets.contiguous()
        n = h.shape[0]
        want_h, want_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        acc_dtype = grad_weight_dtype or torch.promote_types(weight.dtype, torch.float32)
        grad_h = torch.empty_like(h) if want_h else None
        grad_w = torch.zeros(weight.shape, dtype=acc_dtype, device=weight.device) if want_w else None
        count = (targets != IGNORE_INDEX).sum()                                # on the device: no sync
        scale = (1.0 / count.clamp(min=1).to(torch.float32)).reshape(1)
        losses = torch.empty(n, dtype=torch.float32, device=h.device)
        for start in range(0, n, chunk_rows):
            end = min(start + chunk_rows, n)
            h_c = h[start:end]
            logits = h_c @ weight.T                                            # (C, V), h's dtype
            losses[start:end] = cross_entropy_and_grad_(logits, targets[start:end], scale)
            # `logits` now holds d loss / d logits of this chunk.
            if want_h:
                torch.mm(logits, weight, out=grad_h[start:end])
            if want_w:
                if grad_w.dtype == logits.dtype:
                    grad_w.addmm_(logits.T, h_c)              # the matmul adds into grad_w (beta = 1)
                else:
                    grad_w.add_(logits.T @ h_c)               # a (V, d) product, then added in acc_dtype
            del logits
        ctx.grads = (grad_h, grad_w, weight.dtype)
        return (losses.sum() * scale[0]).to(h.dtype)

    @staticmethod
    def backward(ctx, grad_loss):
        if ctx.grads is None:
            raise RuntimeError("ChunkedLinearCrossEntropy supports one backward pass per forward pass")
        grad_h, grad_w, w_dtype = ctx.grads
        ctx.grads = None
        if grad_h is not None:
            grad_h.mul_(grad_loss)
        if grad_w is not None:
            grad_w = grad_w.mul_(grad_loss).to(w_dtype)
        return grad_h, grad_w, None, None, None


def linear_cross_entropy(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk_rows: int = 1024,
                         grad_weight_dtype: torch.dtype | None = None) -> torch.Tensor:
    """F.cross_entropy(h @ weight.T, targets, ignore_index=-100) in chunks of `chunk_rows` rows: never an
    N x V tensor. Differentiable with respect to h and weight."""
    return ChunkedLinearCrossEntropy.apply(h, weight, targets, chunk_rows, grad_weight_dtype)


def linear_cross_entropy_eager(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The reference: all N x V logits at once, in the input dtype, then PyTorch's cross-entropy."""
    return torch.nn.functional.cross_entropy(h @ weight.T, targets, ignore_index=IGNORE_INDEX)


def peak_memory(fn):
    """(fn(), peak bytes allocated while it ran, above what was allocated before it). The bytes are those
    of live tensors as the CUDA caching allocator counts them (allocated, not reserved), and include what
    fn returns. Without a GPU the bytes are None: the CPU has no such counter."""
    if not torch.cuda.is_available():
        return fn(), None
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    result = fn()
    torch.cuda.synchronize()
    return result, torch.cuda.max_memory_allocated() - before


# -- rotary position embeddings (lecture 05) --------------------------------------------------------------
#
# RoPE (Su et al., RoFormer, 2021) rotates each pair of a head's features by an angle that grows with the
# token's position: pair i of a d-dim head is (x[i], x[i + d/2]) (the "rotate half" layout of GPT-NeoX and
# Llama), its angle pos * theta_i with theta_i = base^(-2i/d). The backward pass rotates the gradient back:
# the same kernel with the angle's sign flipped.

def rope_frequencies(d: int, base: float = 10000.0, device="cpu") -> torch.Tensor:
    """theta_i = base^(-2i/d) for i < d/2, in float32, as PyTorch code commonly computes them."""
    return 1.0 / (base ** (torch.arange(0, d, 2, device=device, dtype=torch.float32) / d))


def rope_angles(n: int, d: int, base: float = 10000.0, device="cpu") -> torch.Tensor:
    """(n, d/2) float32 angles pos * theta_i."""
    return torch.outer(torch.arange(n, device=device, dtype=torch.float32), rope_frequencies(d, base, device))


def rope_eager(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """RoPE on x of shape (..., n, d) as PyTorch code usually writes it: cos and sin tables of shape
    (n, d), rotate_half with a concatenation, two products and a sum (five kernels and two temporaries)."""
    n, d = x.shape[-2:]
    angles = rope_angles(n, d, base, x.device)
    emb = torch.cat((angles, angles), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


@triton.jit
def rope_kernel(x_ptr, freq_ptr, out_ptr, n_rows, n_pos, SIGN: tl.constexpr, HALF: tl.constexpr,
                BLOCK_ROWS: tl.constexpr):
    """BLOCK_ROWS rows of a contiguous (rows, 2 * HALF) tensor whose row r holds position r % n_pos: each
    pair (x[i], x[i + HALF]) rotated by SIGN * pos * theta_i. The angles, their cosines and sines are
    computed here in float32, from the HALF frequencies: no table of n_pos x HALF values is read."""
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, HALF)
    mask = (rows < n_rows)[:, None]
    offs = rows.to(tl.int64)[:, None] * (2 * HALF) + cols[None, :]
    x1 = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + offs + HALF, mask=mask, other=0.0).to(tl.float32)
    angle = (rows % n_pos).to(tl.float32)[:, None] * tl.load(freq_ptr + cols)[None, :]
    cos, sin = tl.cos(angle), SIGN * tl.sin(angle)
    tl.store(out_ptr + offs, (x1 * cos - x2 * sin).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_ptr + offs + HALF, (x2 * cos + x1 * sin).to(out_ptr.dtype.element_ty), mask=mask)


def rope(x: torch.Tensor, base: float = 10000.0, inverse: bool = False, block_rows: int = 16) -> torch.Tensor:
    """RoPE of a contiguous x of shape (..., n, d), d a power of two; `inverse` rotates back (the backward)."""
    n, d = x.shape[-2:]
    if d & (d - 1) or d < 2:
        raise ValueError(f"head dim {d}: this kernel takes a power of two")
    if not x.is_contiguous():
        raise ValueError("x must be contiguous (row r of the flattened tensor is position r % n)")
    out = torch.empty_like(x)
    rows = x.numel() // d
    rope_kernel[(triton.cdiv(rows, block_rows),)](x, rope_frequencies(d, base, x.device), out, rows, n,
                                                  SIGN=-1.0 if inverse else 1.0, HALF=d // 2, BLOCK_ROWS=block_rows)
    return out


class RoPE(torch.autograd.Function):
    """RoPE whose backward pass is the inverse rotation of the output's gradient: it saves nothing."""

    @staticmethod
    def forward(ctx, x, base: float = 10000.0):
        ctx.base = base
        return rope(x.contiguous(), base)

    @staticmethod
    def backward(ctx, dy):
        return rope(dy.contiguous(), ctx.base, inverse=True), None


# -- activation memory and recomputation (lecture 06) ------------------------------------------------------
#
# Autograd keeps, for each op of the forward pass, the tensors its backward needs ("saved tensors").
# saved_tensors lists them through autograd's pack hook; stacks of Day 4 blocks are recomputed with
# torch.utils.checkpoint: in whole blocks, or only the SwiGLU's elementwise part and down projection.

RECOMPUTE = ("none", "swiglu", "block")


def saved_tensors(fn, exclude=()):
    """(fn(), [(shape, dtype, bytes)] of the tensors autograd keeps for fn's backward pass): each storage
    once (the bytes are the whole storage's; the shape, of the first tensor saved from it), apart from
    the storages of the tensors in `exclude` (the inputs and weights, which exist anyway)."""
    inputs = {a.untyped_storage().data_ptr() for a in exclude}
    saved = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in inputs:
            saved.setdefault(storage.data_ptr(), (tuple(t.shape), t.dtype, storage.nbytes()))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, list(saved.values())


def _checkpointed(fn):
    from torch.utils.checkpoint import checkpoint
    return lambda *args: checkpoint(fn, *args, use_reentrant=False)


def block_stack(x, layers, recompute: str = "none", attend=None):
    """x through Day 4's pre-norm blocks, one per tuple of weights in `layers` (norm1, wqkv, wo, norm2, w1,
    w3, w2), in x's dtype (SDPA for attention unless `attend` says otherwise). `recompute` (RECOMPUTE):
    "none" keeps every activation; "swiglu" recomputes silu(h W1) * (h W3) and the down projection's
    input in the backward pass; "block" keeps only each block's input and reruns the whole block."""
    from grader.exercises.day4 import attention_sublayer, mlp_sublayer, swiglu_down
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {RECOMPUTE}")
    attend = attend or (lambda q, k, v, causal: torch.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=causal))
    down = _checkpointed(swiglu_down) if recompute == "swiglu" else None

    def block(x, norm1, wqkv, wo, norm2, w1, w3, w2):
        return mlp_sublayer(attention_sublayer(x, norm1, wqkv, wo, attend), norm2, w1, w3, w2, down)

    run = _checkpointed(block) if recompute == "block" else block
    for weights in layers:
        x = run(x, *weights)
    return x


def block_layers(n_layers: int, d: int, f: int, dtype, device, gen):
    """Weights for n_layers Day 4 blocks of width d and MLP width f, scaled so activations stay near 1."""
    def w(*size, fan_in):
        return (torch.randn(*size, generator=gen, device=device) / fan_in ** 0.5).to(dtype)
    return [(torch.ones(d, device=device, dtype=dtype), w(d, 3 * d, fan_in=d), w(d, d, fan_in=d),
             torch.ones(d, device=device, dtype=dtype), w(d, f, fan_in=d), w(d, f, fan_in=d), w(f, d, fan_in=f))
            for _ in range(n_layers)]
