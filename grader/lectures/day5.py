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
