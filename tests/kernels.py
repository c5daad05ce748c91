"""Small Triton kernels for the tests: right ones and deliberately wrong ones.

Imported by test modules after conftest has chosen the device (and so the interpreter on a CPU).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def add_into_x_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def sub_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) - tl.load(y_ptr + offs, mask=mask), mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out


def add_grid_too_small(x, y):
    """Rounds the grid down: the tail past the last full block is never written."""
    out = torch.empty_like(x)
    add_kernel[(max(1, x.numel() // 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out


def add_with_torch(x, y):
    """Launches a kernel for show, then computes the answer with PyTorch."""
    add(x, y)
    return x + y


def add_without_kernel(x, y):
    out = torch.empty_like(x)
    out.copy_(x)
    return out


def add_in_place(x, y):
    add_into_x_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return x


def add_wrong_op(x, y):
    out = torch.empty_like(x)
    sub_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out


def add_wrong_dtype(x, y):
    out = torch.empty(x.shape, dtype=torch.float64, device=x.device)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out


def add_that_raises(x, y):
    raise ValueError("I forgot something")
