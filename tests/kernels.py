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


def add_skipping_the_last_block(x, y):
    """Launches one block fewer than it needs (at least one): wrong at every size above one block,
    including the timed one (a multiple of the block, where rounding the grid down loses nothing)."""
    out = torch.empty_like(x)
    add_kernel[(max(1, triton.cdiv(x.numel(), 1024) - 1),)](x, y, out, x.numel(), BLOCK=1024)
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


_by_address = {}


def add_cached_by_address(x, y):
    """Computes once per pair of input addresses, then hands back what it kept: fast when timed."""
    key = (x.data_ptr(), y.data_ptr())
    if key not in _by_address:
        _by_address[key] = add(x, y)
    return _by_address[key]


_by_version = {}


def add_cached_by_version(x, y):
    """Like add_cached_by_address, but recomputes when an input was written in place."""
    key = (x.data_ptr(), y.data_ptr(), x._version, y._version)
    if key not in _by_version:
        _by_version[key] = add(x, y)
    return _by_version[key]


def add_with_tiny_launch_and_cache(x, y):
    """Launches a token kernel every call, so launches are counted, but returns the kept result."""
    add_kernel[(1,)](x, y, torch.empty(16, dtype=x.dtype, device=x.device), 1, BLOCK=16)
    return add_cached_by_address(x, y)


_by_fingerprint = {}


def add_cached_by_fingerprint(x, y):
    """Keeps results by a fingerprint of a few input values and returns them when the values repeat."""
    key = tuple(x[:8].tolist() + y[:8].tolist())
    if key not in _by_fingerprint:
        _by_fingerprint.clear()  # one result kept, as a real cache of large outputs must
        _by_fingerprint[key] = add(x, y)
    add_kernel[(1,)](x, y, torch.empty(16, dtype=x.dtype, device=x.device), 1, BLOCK=16)
    return _by_fingerprint[key]


_calls = [0]


def add_every_other_call(x, y):
    """Does the work on every other call only (a token launch otherwise): half the time, if unchecked."""
    _calls[0] += 1
    if _calls[0] % 2:
        return add(x, y)
    out = torch.empty_like(x)
    add_kernel[(1,)](x, y, out, 1, BLOCK=16)
    return out


def add_then_zero_inputs(x, y):
    """Right result, then wipes its inputs: a check that recomputed the reference afterwards would see
    zeros in and (for a kernel that also returned zeros) zeros out."""
    out = add(x, y)
    x.zero_(), y.zero_()
    return out


# For the guard's tests of kernels that compute, and of kernels that only copy (guard.COPY_NOISE)
@triton.jit
def square_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * x, mask=mask)


@triton.jit
def gather_kernel(x_ptr, index_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + tl.load(index_ptr + offs, mask=mask, other=0), mask=mask), mask=mask)


@triton.jit
def scale_in_place_kernel(x_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale, mask=mask)


def square(x):
    """x * x, elementwise: a kernel's own (nonlinear) value."""
    out = torch.empty_like(x)
    square_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out


def gather(x, index):
    """out.view(-1)[i] = x.view(-1)[index[i]]: with a permutation as index, x's elements rearranged."""
    out = torch.empty_like(x)
    gather_kernel[(triton.cdiv(x.numel(), 1024),)](x, index, out, x.numel(), BLOCK=1024)
    return out


def scale_in_place(x, scale):
    scale_in_place_kernel[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), scale, BLOCK=1024)
    return x


@triton.jit
def mul_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * tl.load(y_ptr + offs, mask=mask), mask=mask)


def mul(x, y):
    out = torch.empty_like(x)
    mul_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out


@triton.jit
def below_kernel(x_ptr, threshold):
    """Fails where x[0] >= threshold (in the interpreter, which runs the assert as Python): whether a launch
    raised is a bit of x, a way out where it is caught."""
    assert tl.load(x_ptr) < threshold, "x[0] is not below the threshold"


def first_value_by_bisection(x, steps=20):
    """x[0] (in [0, 1)) read out of launches that raise or do not: the bits of a caught error."""
    low, high = 0.0, 1.0
    for _ in range(steps):
        middle = (low + high) / 2
        try:
            below_kernel[(1,)](x, middle)
            high = middle
        except Exception:
            low = middle
    return low


@triton.jit
def tuple_kernel(x_ptr, bits):
    """Stores the first of a tuple of numbers (a kernel handed many numbers in one argument)."""
    tl.store(x_ptr, bits[0])


@triton.jit
def copy_rows_kernel(x_desc, out_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    m = tl.program_id(0) * BLOCK_M
    out_desc.store([m, 0], x_desc.load([m, 0]))


def copy_by_descriptors(x, rows=None):
    """A copy of a 2-D x (rows of whole 16 bytes) moved by tensor descriptors made on the host; `rows`
    describes x as having that many rows."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    out = torch.empty_like(x)
    m, n = x.shape
    x_desc = TensorDescriptor(x, [rows or m, n], list(x.stride()), [16, n])
    out_desc = TensorDescriptor(out, [m, n], list(out.stride()), [16, n])
    copy_rows_kernel[(triton.cdiv(m, 16),)](x_desc, out_desc, BLOCK_M=16, BLOCK_N=n)
    return out
