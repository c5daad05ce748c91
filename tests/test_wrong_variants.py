"""Deliberately broken versions of the reference solutions fail, with a message that points at the mistake.

Each variant is the reference notebook with one snippet of code changed, the way students get it wrong.
The notebook's worked examples are left out (notebooks.run_code_cells, examples=False): only the checks
are under test, and in the interpreter the examples took 40% of this file's time.
"""
import importlib.util

import pytest

import grader
from grader.pipeline import notebooks
from conftest import DEVICE, REPO, on_cpu_only
from test_memory import FLOAT32_SUM

SOL = REPO / "solutions"

# A Triton kernel that only copies x's rows (MODE 0), as 2 x + 1 with a little noise (1), with the
# features reversed (2), or with the signs of some features flipped (3)
COPY_KERNEL = """@triton.jit
def copy_kernel(x_ptr, y_ptr, signs_ptr, n_cols, MODE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    if MODE == 1:
        x = 2.0 * x + 1.0 + 1e-3 * tl.sin((row * n_cols + cols).to(tl.float32))
    if MODE == 2:
        x = tl.load(x_ptr + row * n_cols + (n_cols - 1 - cols), mask=mask, other=0.0)
    if MODE == 3:
        x = x * tl.load(signs_ptr + cols, mask=mask, other=1.0)
    tl.store(y_ptr + row * n_cols + cols, x, mask=mask)"""

# A seventh red team's copies of x that the guard took for new values: a kernel handed a 2-element view
# strided across the whole copy (it writes the whole copy through it), x's bits written into an int32
# view of a float workspace made at import (or its bytes into a uint8 view), and x + r with r (random,
# large) from which PyTorch takes r away again; an eighth's, r taken away by a second launch, or by a
# product with [I; -I].
LAUNDERED_COPIES = """@triton.jit
def plain_copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n, other=0.0), mask=offs < n)


@triton.jit
def bits_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, x.to(tl.int32, bitcast=True), mask=offs < n)


@triton.jit
def noisy_copy_kernel(x_ptr, y_ptr, r_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    r = tl.rand(1234, offs) * 8.0 - 4.0
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n, other=0.0) + r, mask=offs < n)
    tl.store(r_ptr + offs, r, mask=offs < n)


workspace = torch.empty(1 << 20, device=dev.torch_device)
workspace_bits = workspace.view(torch.int32)


def spanning_copy(t):
    copy = torch.empty(t.shape, device=t.device, dtype=t.dtype)
    ends = copy.view(-1).as_strided((2,), (t.numel() - 1,))
    plain_copy_kernel[(triton.cdiv(t.numel(), 256),)](t.contiguous(), ends, t.numel(), BLOCK=256)
    return copy


@triton.jit
def bytes_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.int32, bitcast=True)
    for k in tl.static_range(4):
        tl.store(y_ptr + 4 * offs + k, ((x >> (8 * k)) & 255).to(tl.uint8), mask=offs < n)


workspace_bytes = workspace.view(torch.uint8)


def bits_copy(t):
    n = t.numel()
    bits_kernel[(triton.cdiv(n, 256),)](t.contiguous(), workspace_bits[:n], n, BLOCK=256)
    return workspace[:n].view(t.shape)


def bytes_copy(t):
    n = t.numel()
    bytes_kernel[(triton.cdiv(n, 256),)](t.contiguous(), workspace_bytes[:4 * n], n, BLOCK=256)
    return workspace[:n].view(t.shape)


def noise_taken_away(t):
    y, r = torch.empty_like(t), torch.empty_like(t)
    noisy_copy_kernel[(triton.cdiv(t.numel(), 256),)](t.contiguous(), y, r, t.numel(), BLOCK=256)
    return y + r * -1.0


@triton.jit
def difference_kernel(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, a - tl.load(b_ptr + offs, mask=offs < n, other=0.0), mask=offs < n)


def noise_taken_away_by_a_kernel(t):
    y, r, back = torch.empty_like(t), torch.empty_like(t), torch.empty_like(t)
    noisy_copy_kernel[(triton.cdiv(t.numel(), 256),)](t.contiguous(), y, r, t.numel(), BLOCK=256)
    difference_kernel[(triton.cdiv(t.numel(), 256),)](y, r, back, t.numel(), BLOCK=256)
    return back


@triton.jit
def side_by_side_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    r = tl.rand(99, row * n_cols + cols) * 8.0 - 4.0
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(y_ptr + row * 2 * n_cols + cols, x + r, mask=cols < n_cols)
    tl.store(y_ptr + row * 2 * n_cols + n_cols + cols, r, mask=cols < n_cols)


def noise_taken_away_by_a_product(t):
    n = t.shape[-1]
    y = torch.empty((t.numel() // n, 2 * n), device=t.device, dtype=t.dtype)
    side_by_side_kernel[(t.numel() // n,)](t.contiguous(), y, n, BLOCK=triton.next_power_of_2(n))
    m = torch.zeros(2 * n, n, device=t.device, dtype=t.dtype)     # [x + r | r] @ [I; -I] = x
    m[:n].view(-1)[::n + 1].fill_(1.0)
    m[n:].view(-1)[::n + 1].fill_(-1.0)
    return (y @ m).view(t.shape)"""

# The rest of an RMSNorm forward in PyTorch once ms, the mean of squares per token, is known: 1/sqrt by
# Newton steps (no rsqrt op), then the weight by a diagonal matrix (sums and products only).
NORM_FROM_MEAN_SQUARES = ("        s = ms * 0.5 + 0.5\n"
                          "        for _ in range(30):\n"
                          "            s = (s + ms / s) * 0.5\n"
                          "        rstd.copy_(torch.ones_like(s) / s)\n"
                          "        D = torch.zeros(n, n, device=x.device)\n"
                          "        D.view(-1)[::n + 1].copy_(w)\n"
                          "        y.copy_((x * rstd[:, None]) @ D)\n")


# Dropout's masks applied by a kernel of their own (for the variants that draw or keep a mask elsewhere)
_MASK_KERNEL = {"def launch_dropout(x, p, seed):": """@triton.jit
def masked_kernel(x_ptr, keep_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    keep = tl.load(keep_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, tl.where(keep != 0, x * scale, 0.0).to(out_ptr.dtype.element_ty), mask=offs < n)


def launch_masked(x, keep, scale):
    out = torch.empty_like(x)
    masked_kernel[(triton.cdiv(x.numel(), 1024),)](x, keep, out, x.numel(), scale, BLOCK=1024)
    return out


import random
import numpy as np
_MASKS = {}


def launch_dropout(x, p, seed):"""}


# A mask made on the host: in the interpreter, more values put into tensors than a few constants; on a GPU
# its copy to the device is refused first (the first case has one element)
HOST_MASK = "copy to cuda" if DEVICE.is_gpu else "put into tensors from Python or NumPy"


def _masked_launch(draw: str) -> dict:
    """launch_dropout with its mask drawn by `draw` (as `keep`, on the host) and applied by a kernel."""
    return {**_MASK_KERNEL,
            "    out = torch.empty_like(x)\n    n = x.numel()\n": draw + "    return launch_masked(x, keep.to(x.device), "
            "1.0 / (1.0 - p))\n    out = torch.empty_like(x)\n    n = x.numel()\n"}


def _kept_mask(keep: str, use: str) -> dict:
    """A forward that draws the mask with the kernel (1 / (1 - p) where kept) and keeps it by `keep`, and a
    backward that applies what `use` gives back."""
    return {**_MASK_KERNEL,
            "        ctx.p, ctx.seed = p, seed\n":
            "        ctx.p, ctx.seed = p, seed\n        keep = launch_dropout(torch.ones_like(x), p, seed)\n"
            f"        {keep}\n",
            "        return launch_dropout(dy.contiguous(), ctx.p, ctx.seed), None, None":
            f"        return launch_masked(dy.contiguous(), {use}, 1.0 / (1.0 - ctx.p)), None, None"}


# A mask drawn by Python's random and handed to launches as numbers (a red team's): 31 bits in an int per
# launch (WORDS 1), or a tuple of WORDS ints (the grid's sizes, another way in: tests/test_guard.py)
_BITS_KERNELS = {"def launch_dropout(x, p, seed):": """@triton.jit
def bits_kernel(x_ptr, out_ptr, start, n, words, scale, WORDS: tl.constexpr):
    lane = tl.arange(0, 32)
    for w in tl.static_range(WORDS):
        offs = start + w * 31 + lane
        inside = (offs < n) & (lane < 31)
        x = tl.load(x_ptr + offs, mask=inside)
        if WORDS == 1:
            bits = words
        else:
            bits = words[w]
        keep = ((bits >> lane) & 1) != 0
        tl.store(out_ptr + offs, tl.where(keep, x * scale, 0.0), mask=inside)


import random


def mask_words(rng, p, words):
    drawn = []
    for _ in range(words):
        drawn.append(sum(1 << i for i in range(31) if rng.random() >= p))
    return tuple(drawn)


def launch_bits(x, p, seed, words):
    out = torch.empty_like(x)
    rng = random.Random(seed)
    for start in range(0, x.numel(), 31 * words):
        drawn = mask_words(rng, p, words)
        bits_kernel[(1,)](x, out, start, x.numel(), drawn if words > 1 else drawn[0], 1.0 / (1.0 - p),
                          WORDS=words)
    return out


def launch_dropout(x, p, seed):"""}


def _bits_launch(call: str) -> dict:
    """launch_dropout returning `call` (one of the launches above)."""
    return {**_BITS_KERNELS, "    out = torch.empty_like(x)\n    n = x.numel()\n":
            f"    return {call}\n    out = torch.empty_like(x)\n    n = x.numel()\n"}


# Cross-entropy with a kernel for exp(z) and one for the log of PyTorch's row sums (the sums `e.sum(dim=1)`)
EXP_AND_LOG_KERNELS = """@triton.jit
def exp_kernel(z_ptr, e_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(e_ptr + offs, tl.exp(tl.load(z_ptr + offs, mask=offs < n).to(tl.float32)), mask=offs < n)


@triton.jit
def log_kernel(sums_ptr, z_ptr, targets_ptr, losses_ptr, n_cols, ignore_index):
    row = tl.program_id(0)
    target = tl.load(targets_ptr + row)
    valid = target != ignore_index
    z = tl.load(z_ptr + row * n_cols + target, mask=valid, other=0.0).to(tl.float32)
    tl.store(losses_ptr + row, tl.where(valid, tl.log(tl.load(sums_ptr + row)) - z, 0.0))
    tl.store(losses_ptr + tl.num_programs(0) + row, valid.to(tl.float32))"""

_ROW_SUMS = {
    "def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:": EXP_AND_LOG_KERNELS
    + "\n\ndef cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:",
    "    losses = torch.empty(2, n_rows, dtype=torch.float32, device=logits.device)\n":
    "    e = torch.empty(n_rows, n_cols, dtype=torch.float32, device=logits.device)\n"
    "    exp_kernel[(triton.cdiv(e.numel(), 1024),)](logits, e, e.numel(), BLOCK=1024)\n"
    "    sums = e.sum(dim=1)\n"
    "    losses = torch.empty(2, n_rows, dtype=torch.float32, device=logits.device)\n"
    "    log_kernel[(n_rows,)](sums, logits, targets, losses, n_cols, IGNORE_INDEX)\n",
    "    cross_entropy_kernel[(n_rows,)](logits, targets, losses, n_cols, IGNORE_INDEX,\n": "    (lambda *a, **k: None)(",
}

# A row sum by a tree of additions of halves (a format string: `add` is one step)
_HALVING = ("    width = triton.next_power_of_2(n_cols)\n"
            "    padded = torch.zeros(n_rows, width, dtype=torch.float32, device=logits.device)\n"
            "    padded[:, :n_cols] = e\n"
            "    e = padded\n"
            "    while width > 1:\n"
            "        width //= 2\n"
            "        {add}\n"
            "    sums = e[:, 0].contiguous()\n")

# Cross-entropy from the logits printed by a kernel and read back from the standard output
PRINTED_LOGITS = """import contextlib
import io
import math
import os
import re
import sys
import tempfile


@triton.jit
def printing_kernel(logits_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    cols = tl.arange(0, BLOCK_SIZE)
    tl.device_print("z", tl.load(logits_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32))


def printed(launch):
    # the interpreter prints through Python's stdout, a GPU's printf to file descriptor 1: catch both
    python = io.StringIO()
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as gpu:
        os.dup2(gpu.fileno(), 1)
        try:
            with contextlib.redirect_stdout(python):
                launch()
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        gpu.seek(0)
        return python.getvalue(), gpu.read().decode()


def block_values(launch, n):
    python, gpu = printed(launch)
    if python:   # "(0, 0, 0)  z:  [v v ...]"
        return [float(v) for v in python[python.index("[") + 1:python.index("]")].split()][:n]
    found = {int(i): float(v) for i, v in re.findall(r"idx \\(\\s*(\\d+)\\) z: (\\S+)", gpu)}   # "idx ( 7) z: v", any order
    return [found[i] for i in range(n)]


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = logits.contiguous()
    n_rows, n_cols = logits.shape
    total, count = 0.0, 0
    for r in range(n_rows):
        values = []
        for start in range(0, n_cols, 512):
            n = min(512, n_cols - start)
            values += block_values(lambda: printing_kernel[(1,)](logits[r, start:], n, BLOCK_SIZE=512), n)
        target = int(targets[r])
        if target != IGNORE_INDEX:
            top = max(values)
            total += top + math.log(sum(math.exp(v - top) for v in values)) - values[target]
            count += 1
    return torch.tensor(total / count, dtype=torch.float32, device=logits.device)"""

# Day 3's reference takes its TMA kernel only on Hopper and later GPUs; these variants take it in the
# interpreter too.
_TMA_ON = {"USE_TMA = TensorDescriptor is not None and dev.is_gpu and dev.capability >= (9, 0)":
           "USE_TMA = TensorDescriptor is not None"}


# ... and the pointer kernels' variants leave it out on a GPU, as a student who skips it does: there the
# reference's TMA path would run instead of the mistake for every 16-bit case.
_TMA_OFF = {next(iter(_TMA_ON)): "USE_TMA = False"}

# Mistakes that the interpreter shows and a GPU may not: a program that loads an element it stored
# earlier in the same launch sees the stored value in the interpreter, while on the GPU another thread's
# store may not be visible yet without a barrier (on an H200 the old logit was read, and the loss came out
# right). The race is real; its result is the GPU's choice.
INTERPRETER_ONLY = {"linear + cross-entropy: the target's logit read after the row became its gradient"}


def _skip_without_host_descriptors(replace):
    if replace.items() >= _TMA_ON.items() and importlib.util.find_spec("triton.tools.tensor_descriptor") is None:
        pytest.skip("this Triton makes no tensor descriptors on the host")

# Lines of the linear + cross-entropy reference that several variants replace: the backward's multiply by
# the incoming gradient, and the chunks' sum of the weight's gradient.
LCE_SCALED = ("        for grad in (grad_h, grad_w):   # times the incoming gradient, read where it is (no .item(), no wait)\n"
              "            scale_kernel[(triton.cdiv(grad.numel(), 8192),)](grad, grad_loss, grad.numel(), BLOCK=8192, num_warps=8)\n")
LCE_DW_SUM = ("            if start == 0:\n"
              "                torch.mm(z.t(), h[start:end], out=grad_w)          # dL/dW = dZ^T h_c: nothing to add to yet\n"
              "            else:\n"
              "                grad_w.addmm_(z.t(), h[start:end])                 # dL/dW += dZ^T h_c\n")


# dQ added up with atomics by the dK/dV programs into a float32 buffer (one sweep, as some libraries do)
DQ_BY_ATOMICS = {
    "def dkdv_step(dk, dv, k, v, q_ptr, do_ptr, lse_ptr, delta_ptr, head, bh, N, start_m, offs_n, qk_scale,":
    "def dkdv_step(dk, dv, k, v, q_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, head, bh, N, start_m, offs_n, "
    "qk_scale, sm_scale,",
    "    dk = tl.dot(ds_t.to(q.dtype), q, dk)\n    return dk, dv":
    "    dk = tl.dot(ds_t.to(q.dtype), q, dk)\n"
    "    dq = tl.dot(tl.trans(ds_t).to(k.dtype), k) * sm_scale\n"
    "    tl.atomic_add(dq_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], dq, mask=rows[:, None])\n"
    "    return dk, dv",
    "def dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr,":
    "def dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr, dq_ptr,",
    "lse_ptr, delta_ptr, head, bh, N, start_m, offs_n,\n                               qk_scale,":
    "lse_ptr, delta_ptr, dq_ptr, head, bh, N, start_m, offs_n,\n                               qk_scale, sm_scale,",
    "lse_ptr, delta_ptr, head, bh, N, start_m, offs_n,\n                           qk_scale,":
    "lse_ptr, delta_ptr, dq_ptr, head, bh, N, start_m, offs_n,\n                           qk_scale, sm_scale,",
    "    dkdv_kernel[(triton.cdiv(n, bn), b * h)](q, k, v, do, lse, delta, dk, dv, n,":
    "    dq32 = torch.zeros(q.shape, device=q.device, dtype=torch.float32)\n"
    "    dkdv_kernel[(triton.cdiv(n, bn), b * h)](q, k, v, do, lse, delta, dk, dv, dq32, n,",
    "    bm, bn, warps, stages = q_tiles\n": "    dq = dq32.to(q.dtype)\n    return dq, dk, dv\n",
}
# ... and the same with a load and a store in place of the atomic: programs of one launch race
DQ_BY_LOAD_AND_STORE = {**DQ_BY_ATOMICS, "    dk = tl.dot(ds_t.to(q.dtype), q, dk)\n    return dk, dv":
                        DQ_BY_ATOMICS["    dk = tl.dot(ds_t.to(q.dtype), q, dk)\n    return dk, dv"].replace(
                            "    tl.atomic_add(dq_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], dq, mask=rows[:, None])\n",
                            "    at = dq_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :]\n"
                            "    tl.store(at, tl.load(at, mask=rows[:, None]) + dq, mask=rows[:, None])\n")}

VARIANTS = [
    # (id, notebook, exercise key, {old: new}, words the message must contain)
    ("softmax: no max subtraction", "day2/softmax", "day2.softmax",
     {"    x = x - tl.max(x, axis=0)\n": ""}, ["inf or NaN", "overflow", "subtract the row max"]),
    ("softmax: masked lanes load 0, not -inf", "day2/softmax", "day2.softmax",
     {'x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))':
      "x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)"}, ["elements differ", "-inf"]),
    ("softmax: wide rows cut at one block", "day2/softmax", "day2.softmax",
     {"if n_cols <= 16384:": "if True:", "block = triton.next_power_of_2(n_cols)":
      "block = min(1024, triton.next_power_of_2(n_cols))"}, ["never written"]),
    # runs in the CPU interpreter (0 * x + a float is a float there) but does not compile for the GPU
    ("softmax: the running sum starts as an int", "day2/softmax", "day2.softmax",
     {"    s = 0.0             # running sum": "    s = 0               # running sum"},
     # (on a GPU the compiler's own message says it, without the interpreter's preface)
     ["Loop-carried variable s"] + ([] if DEVICE.is_gpu else ["compiler rejects it for the grading H100 (sm_90)"])),
    ("softmax: online rescale of the sum dropped", "day2/softmax", "day2.softmax",
     {"s = s * tl.exp(m - m_new) + ": "s = s + ", "if n_cols <= 16384:": "if False:"},
     ["elements differ"]),
    ("rmsnorm: backward drops the mean term", "day2/rmsnorm", "day2.rmsnorm_backward",
     {"dx = r * (g - x * (r * r) * (tl.sum(g * x, axis=0) / n_cols))": "dx = r * g"},
     ["(dx)", "elements differ", "mean(g * x)"]),
    ("rmsnorm: dweight of one program only", "day2/rmsnorm", "day2.rmsnorm_backward",
     {"dw_partial.sum(0)": "dw_partial[0]"}, ["(dweight)", "sum dweight over all rows"]),
    ("rmsnorm: forward in PyTorch", "day2/rmsnorm", "day2.rmsnorm_forward",
     {"        ctx.save_for_backward(x, weight, r)\n        return y":
      "        ctx.save_for_backward(x, weight, r)\n        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight"},
     ["computed with PyTorch", "aten.rsqrt"]),
    ("rmsnorm: no autograd.Function", "day2/rmsnorm", "day2.rmsnorm_backward",
     {"return RMSNormFunction.apply(x, weight)":
      "return RMSNormFunction.forward(type('Ctx', (), {'save_for_backward': lambda *a: None})(), x, weight)",
      "rmsnorm(x, w).pow(2).sum().backward()\nprint(x.grad.shape, w.grad.shape)": "pass"},
     ["does not come from a torch.autograd.Function"]),
    ("cross-entropy: ignored rows counted in the mean", "day2/cross_entropy", "day2.cross_entropy",
     {"    return total / count": "    return total / n_rows"}, ["(loss)", "elements differ", "-100"]),
    # exp built from `div` alone on the logits (a red team's, with no real kernel): nonlinear PyTorch work
    # on a tensor larger than a row count
    ("cross-entropy: exp of the logits from divisions in PyTorch", "day2/cross_entropy", "day2.cross_entropy",
     {"    total, count = losses.sum(dim=1)\n":
      "    e = torch.stack([torch.ones_like(logits, dtype=torch.float64), logits.double() / 2.0 ** 30]).sum(dim=0)\n"
      "    for _ in range(30):\n"
      "        e = e / (torch.ones_like(e) / e)\n"
      "    total, count = losses.sum(dim=1)\n"},
     ["aten.div of two tensors"]),
    # a kernel that writes only exp(z), PyTorch summing each row over the vocabulary, another kernel taking
    # the log (a red team's): the sum over a row is the exercise's work
    ("cross-entropy: the row sums in PyTorch", "day2/cross_entropy", "day2.cross_entropy", _ROW_SUMS,
     ["aten.sum of", "at once"]),
    # ... the exponentials written by a kernel into a fresh buffer of a few columns at a time, each summed
    # by PyTorch within the bound, the partial sums added up (every allocation small, all from the logits)
    ("cross-entropy: the row sums in PyTorch, of kernel-written strips", "day2/cross_entropy", "day2.cross_entropy",
     {**_ROW_SUMS,
      "def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:": EXP_AND_LOG_KERNELS
      + "\n\n\n@triton.jit\ndef strip_kernel(z_ptr, e_ptr, n_cols, start, width, BLOCK: tl.constexpr):\n"
      "    row = tl.program_id(0)\n    c = tl.arange(0, BLOCK)\n"
      "    z = tl.load(z_ptr + row * n_cols + start + c, mask=c < width).to(tl.float32)\n"
      "    tl.store(e_ptr + row * width + c, tl.exp(z), mask=c < width)"
      "\n\n\ndef cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:",
      "    sums = e.sum(dim=1)\n":
      "    sums, width = None, min(128, max(4 * n_rows, 1024) // n_rows)   # as wide as a sum may be\n"
      "    for j in range(0, n_cols, width):\n"
      "        strip = torch.empty(n_rows, min(width, n_cols - j), dtype=torch.float32, device=logits.device)\n"
      "        strip_kernel[(n_rows,)](logits, strip, n_cols, j, strip.shape[1], BLOCK=128)\n"
      "        part = strip.sum(dim=1)\n"
      "        sums = part if sums is None else sums.sub(part, alpha=-1)\n"},
     ["aten.sum:", "computed from one tensor", "at most"]),
    # ... the same, each row summed a few columns at a time, the partial sums joined and summed again
    ("cross-entropy: the row sums in PyTorch, slice by slice", "day2/cross_entropy", "day2.cross_entropy",
     {**_ROW_SUMS, "    sums = e.sum(dim=1)\n":
      "    k = max(n_rows, 2)\n"
      "    row_sums = []\n"
      "    for r in range(n_rows):\n"
      "        parts = [e[r, j:j + k].sum() for j in range(0, n_cols, k)]\n"
      "        while len(parts) > 1:\n"
      "            parts = [torch.stack(parts[i:i + 15]).sum() for i in range(0, len(parts), 15)]\n"
      "        row_sums.append(parts[0].reshape(1))\n"
      "    sums = torch.cat(row_sums)\n"}, ["aten.sum:", "computed from one tensor summed in this call", "at most"]),
    # ... and each row's slices of at most 1024 copied out first, so that no sum reads a slice of the logits:
    # an op for each slice, more than the bound on ops permits where there are few rows
    ("cross-entropy: the row sums in PyTorch, slices copied out", "day2/cross_entropy", "day2.cross_entropy",
     {**_ROW_SUMS, "    sums = e.sum(dim=1)\n":
      "    sums = torch.stack([torch.stack([e[r, j:j + 1024].clone().sum() for j in range(0, n_cols, 1024)]).sum()\n"
      "                        for r in range(n_rows)])\n"}, ["aten.sum:", "computed from one tensor summed"]),
    # ... and by a tree of additions, each a linear map (a red team's): the row padded with zeros to a power of
    # two, its halves added, the halves of that added, and so on; or halves copied out before they are added
    ("cross-entropy: the row sums by a tree of additions", "day2/cross_entropy", "day2.cross_entropy",
     {**_ROW_SUMS, "    sums = e.sum(dim=1)\n": _HALVING.format(add="e = e[:, :width].sub(e[:, width:], alpha=-1)")},
     ["aten.sub of two parts of", "a sum, by additions", "at once"]),
    ("cross-entropy: the row sums by a tree of additions of copies", "day2/cross_entropy", "day2.cross_entropy",
     {**_ROW_SUMS, "    sums = e.sum(dim=1)\n":
      _HALVING.format(add="e = e[:, :width].clone().sub(e[:, width:].clone(), alpha=-1)")},
     ["aten.sub of two parts of", "at once"]),
    # the logits read out by tl.device_print (every bit, hex=True) with the standard output redirected, the
    # loss computed in Python (a red team's, in the interpreter; on a GPU printf reaches stdout too)
    ("cross-entropy: the logits read out by device_print", "day2/cross_entropy", "day2.cross_entropy",
     {"def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:": PRINTED_LOGITS
      + "\n\ndef _reference_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:"},
     ["kernel `printing_kernel` calls `tl.device_print`", "remove the prints"]),
    # a debugging print left in the kernel: refused with the same message, in a student's own check too
    ("cross-entropy: a debugging print left in the kernel", "day2/cross_entropy", "day2.cross_entropy",
     {"    target = tl.load(targets_ptr + row)\n": "    print(\"s\", s_row)\n    target = tl.load(targets_ptr + row)\n"},
     ["kernel `cross_entropy_kernel` calls `print`", "remove the prints"]),
    # PyTorch's own loss inside Tensor.apply_'s callback, behind a launch that computes nothing
    ("cross-entropy: F.cross_entropy inside apply_", "day2/cross_entropy", "day2.cross_entropy",
     {"    total, count = losses.sum(dim=1)\n    return total / count":
      "    box = []\n"
      "    torch.zeros(1).apply_(lambda v: box.append(torch.nn.functional.cross_entropy(logits.float(), targets, "
      "ignore_index=IGNORE_INDEX)) or v)\n"
      "    return box[0]"}, ["Tensor.apply_"]),
    ("cross-entropy: only the first block of a row", "day2/cross_entropy", "day2.cross_entropy",
     {"for start in range(0, n_cols, BLOCK_SIZE):": "for start in range(0, BLOCK_SIZE, BLOCK_SIZE):",
      "BLOCK_SIZE=min(2048, max(64, triton.next_power_of_2(n_cols)))":
      "BLOCK_SIZE=min(512, max(64, triton.next_power_of_2(n_cols)))"},
     ["elements differ"]),
    ("matmul: accumulating in fp16", "day3/matmul", "day3.matmul",
     {"acc = tl.dot(a, b, acc)": "acc = (acc.to(tl.float16) + tl.dot(a, b).to(tl.float16)).to(tl.float32)"},
     ["elements differ", "accumulate in float32"]),
    ("matmul: b assumed contiguous", "day3/matmul", "day3.matmul",
     {"b.stride(0), b.stride(1)": "b.shape[1], 1"}, ["b transposed", "elements differ", "strides"]),
    ("matmul: a assumed contiguous", "day3/matmul", "day3.matmul",
     {"a.stride(0), a.stride(1),": "a.shape[1], 1,"}, ["a transposed", "elements differ", "strides"]),
    # A missing K mask reads whatever lies past the end of each row (inside the tensor, or past its end,
    # which bounds.py stops and explains: tests below); this variant stands in for the wrong values it
    # reads with ones instead of zeros in the K tail.
    ("matmul: K tail not zeroed", "day3/matmul", "day3.matmul",
     {"a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)":
      "a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=1.0)",
      "b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)":
      "b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=1.0)"}, ["elements differ", "K tail"]),
    # the Hopper path (TMA descriptors), run in the interpreter: a transposed operand loaded as it is stored
    ("matmul, TMA path: a transposed b not transposed back", "day3/matmul", "day3.matmul",
     {**_TMA_ON, "b = b_desc.load([pid_n * BLOCK_N, k]).T": "b = tl.reshape(b_desc.load([pid_n * BLOCK_N, k]), "
                                                              "(BLOCK_K, BLOCK_N))"},
     ["b transposed", "elements differ"]),
    # a descriptor that describes more than its tensor: TMA would read the memory after it (refused unlaunched)
    ("matmul, TMA path: a descriptor past its tensor", "day3/matmul", "day3.matmul",
     {**_TMA_ON, "return TensorDescriptor(t, list(t.shape), list(t.stride()), [1, 1])":
      "return TensorDescriptor(t, [2 * t.shape[0], t.shape[1]], list(t.stride()), [1, 1])"},
     ["tensor descriptor of shape", "not launched", "must describe its own tensor"]),
    # ... and the same with the refusal caught, the pointer kernel run instead: refused all the same
    ("matmul, TMA path: a descriptor past its tensor, the error caught", "day3/matmul", "day3.matmul",
     {**_TMA_ON, "return TensorDescriptor(t, list(t.shape), list(t.stride()), [1, 1])":
      "return TensorDescriptor(t, [2 * t.shape[0], t.shape[1]], list(t.stride()), [1, 1])",
      "        c = matmul_tma(a, b, bias)\n": "        try:\n            c = matmul_tma(a, b, bias)\n"
                                          "        except ValueError:\n            c = None\n"},
     ["tensor descriptor of shape", "must describe its own tensor"]),
    ("matmul, TMA path: the bias added after the GELU", "day3/matmul", "day3.matmul_bias_gelu",
     {**_TMA_ON, "acc = gelu(acc + tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :])":
      "acc = gelu(acc) + tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]"},
     ["elements differ", "only then"]),
    ("epilogue: GELU before the bias", "day3/matmul", "day3.matmul_bias_gelu",
     {"u = acc + bias[None, :]\n        acc = 0.5 * u * (1.0 + tl.math.erf(u * 0.7071067811865476))":
      "acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476)) + bias[None, :]"},
     ["elements differ", "only then"]),
    ("attention: accumulator not rescaled", "day4/flash_attention", "day4.attention",
     {**_TMA_OFF, "acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])": "acc = tl.dot(p.to(v.dtype), v, acc)"},
     ["(o)", "elements differ", "rescale both the running sum and the accumulator"]),
    ("attention: causal mask off by one", "day4/flash_attention", "day4.attention",
     {**_TMA_OFF, "keep = keep & (offs_m[:, None] >= cols[None, :])": "keep = keep & (offs_m[:, None] > cols[None, :])"},
     ["causal", "(i included)"]),
    ("attention: scaled by 1/d, not 1/sqrt(d)", "day4/flash_attention", "day4.attention",
     {"qk_scale = 1.4426950408889634 / math.sqrt(head_dim)": "qk_scale = 1.4426950408889634 / head_dim"},
     ["elements differ", "1/sqrt(head_dim)"]),
    # the TMA path (two blocks of queries a program): the second block masked as if it were the first
    ("attention, TMA path: the second block's causal mask taken from the first's", "day4/flash_attention",
     "day4.attention", {**_TMA_ON, "keep1 = keep1 & (offs_m0[:, None] + HALF >= cols[None, :])":
                        "keep1 = keep1 & (offs_m0[:, None] >= cols[None, :])"},
     ["causal", "(i included)"]),
    ("attention, TMA path: accumulator not rescaled", "day4/flash_attention", "day4.attention",
     {**_TMA_ON, "return p, m_new, l_i * alpha + tl.sum(p, axis=1), acc * alpha[:, None]":
      "return p, m_new, l_i * alpha + tl.sum(p, axis=1), acc"},
     ["(o)", "elements differ", "rescale both the running sum and the accumulator"]),
    # rows found as if q were contiguous: right on a fresh (batch, heads, N, d) tensor, wrong on the views
    # of one projection the block hands over
    ("attention: the rows' stride taken as head_dim", "day4/flash_attention", "day4.attention",
     {**_TMA_OFF, "q = tl.load(q_ptr + offs_m[:, None] * stride_qn + offs_d[None, :]":
      "q = tl.load(q_ptr + offs_m[:, None] * HEAD_DIM + offs_d[None, :]"},
     ["(o)", "elements differ", "'strided'"]),
    ("transformer block: residual dropped", "day4/flash_attention", "day4.transformer_block",
     {"x2 = matmul(a.view(batch * seq, d), wo, residual=x2)": "x2 = matmul(a.view(batch * seq, d), wo)"}, ["(out)", "elements differ", "residual"]),
    ("attention backward: dQ not scaled by 1/sqrt(d)", "day5/flash_attention_backward", "day5.attention_backward",
     {"(dq * sm_scale).to(dq_ptr.dtype.element_ty)": "dq.to(dq_ptr.dtype.element_ty)"},
     ["(dq)", "elements differ", "missing scale"]),
    ("attention backward: dQ added up by a load and a store, not an atomic", "day5/flash_attention_backward",
     "day5.attention_backward", DQ_BY_LOAD_AND_STORE, ["no atomic operation", "tl.atomic_add"]),
    ("attention backward: no D pre-pass (D taken as 0)", "day5/flash_attention_backward", "day5.attention_backward",
     {"tl.sum(o * do, axis=1), mask=rows)": "tl.sum(o * 0.0, axis=1), mask=rows)"},
     ["elements differ", "D = rowsum(dO * O)"]),
    ("attention backward: causal mask leaves out the diagonal", "day5/flash_attention_backward",
     "day5.attention_backward",
     {"p_t = tl.where(offs_n[:, None] <= offs_m[None, :], p_t, 0.0)":
      "p_t = tl.where(offs_n[:, None] < offs_m[None, :], p_t, 0.0)"},
     ["(dk)", "causal", "wrong side of the diagonal"]),
    ("dropout: the seed is not used", "day5/dropout", "day5.dropout",
     {"tl.randint4x(seed, tl.program_id(0)": "tl.randint4x(0, tl.program_id(0)"}, ["gave the same mask", "seed"]),
    ("dropout: the backward pass draws another mask", "day5/dropout", "day5.dropout",
     {"launch_dropout(dy.contiguous(), ctx.p, ctx.seed)": "launch_dropout(dy.contiguous(), ctx.p, ctx.seed + 1)"},
     ["backward pass dropped other elements"]),
    ("dropout: two neighbours share one number", "day5/dropout", "day5.dropout",
     {"tl.join(w & 0xFFFF, w >> 16)": "tl.join(w & 0xFFFF, w & 0xFFFF)"},
     ["an element and its right neighbour are both kept"]),
    ("dropout: a call's four numbers are one", "day5/dropout", "day5.dropout",
     {"tl.join(tl.join(r0, r2), tl.join(r1, r3))": "tl.join(tl.join(r0, r0), tl.join(r0, r0))"},
     # (shown 2 apart, and at times first by the neighbours, whose pairs share a number less often)
     [("elements 2 apart in memory are both kept", "an element and its right neighbour are both kept")]),
    ("dropout: the forward keeps its output for the backward", "day5/dropout", "day5.dropout",
     {"        ctx.p, ctx.seed = p, seed\n        return launch_dropout(x.contiguous(), p, seed)":
      "        ctx.p, ctx.seed = p, seed\n        y = launch_dropout(x.contiguous(), p, seed)\n"
      "        ctx.save_for_backward(y)\n        return y"}, ["keeps a tensor", "the seed and p"]),
    # masks from outside Triton (a red team's): drawn by NumPy or Python's random for the seed, so the same
    # seed gives the same mask and the statistics pass, and only applied by a kernel
    ("dropout: a mask drawn by NumPy", "day5/dropout", "day5.dropout",
     _masked_launch("    keep = torch.from_numpy((np.random.default_rng(seed).random(x.numel()) >= p).astype(np.uint8))\n"),
     [HOST_MASK]),
    ("dropout: a mask drawn by Python's random", "day5/dropout", "day5.dropout",
     _masked_launch("    rng = random.Random(seed)\n"
                    "    keep = torch.tensor([rng.random() >= p for _ in range(x.numel())], dtype=torch.uint8)\n"),
     [HOST_MASK]),
    # ... and joined from one-element tensors of ones and zeros (nothing put in from Python but their choice)
    ("dropout: a mask drawn by Python's random, joined from ones and zeros", "day5/dropout", "day5.dropout",
     _masked_launch("    rng = random.Random(seed)\n"
                    "    one, zero = torch.ones(1, device=x.device), torch.zeros(1, device=x.device)\n"
                    "    keep = torch.cat([one if rng.random() >= p else zero for _ in range(x.numel())])\n"),
     ["pieces joined or copied", "in the kernel"]),
    ("dropout: a mask from a buffer of NumPy's", "day5/dropout", "day5.dropout",
     _masked_launch("    drawn = (np.random.default_rng(seed).random(x.numel()) >= p).astype(np.uint8)\n"
                    "    keep = torch.frombuffer(bytearray(drawn.tobytes()), dtype=torch.uint8)\n"),
     [HOST_MASK]),
    ("dropout: a mask read by torch.asarray from a buffer", "day5/dropout", "day5.dropout",
     _masked_launch("    drawn = (np.random.default_rng(seed).random(x.numel()) >= p).astype(np.uint8)\n"
                    "    keep = torch.asarray(bytearray(drawn.tobytes()), dtype=torch.uint8)\n"),
     [HOST_MASK]),
    ("dropout: a mask in a storage made from a list", "day5/dropout", "day5.dropout",
     _masked_launch("    rng = random.Random(seed)\n"
                    "    keep = torch.empty(0, dtype=torch.uint8).set_(torch.UntypedStorage("
                    "[int(rng.random() >= p) for _ in range(x.numel())]))\n"),
     [HOST_MASK]),
    ("dropout: a mask written from the host in runs of fill_", "day5/dropout", "day5.dropout",
     _masked_launch("    rng = random.Random(seed)\n"
                    "    bits = [rng.random() >= p for _ in range(x.numel())] + [False]\n"
                    "    keep = torch.zeros(x.numel(), dtype=torch.uint8, device=x.device)\n"
                    "    start = None\n"
                    "    for i, b in enumerate(bits):\n"
                    "        if b and start is None:\n"
                    "            start = i\n"
                    "        elif not b and start is not None:\n"
                    "            keep[start:i].fill_(1)\n"
                    "            start = None\n"),
     ["fills by aten.fill_", "(values from Python"]),
    # ... or by the other ops that write numbers from Python, a few elements at a time (a red team's)
    *[(f"dropout: a mask written from the host by {how}", "day5/dropout", "day5.dropout",
       _masked_launch("    rng = random.Random(seed)\n"
                      "    keep = torch.ones(x.numel(), dtype=torch.float32, device=x.device)\n"
                      "    for i in range(x.numel()):\n"
                      "        if rng.random() < p:\n"
                      f"            {write}\n"),
       [f"fills by aten.{op}", "(values from Python"])
      for how, op, write in [("zero_ on slices", "zero_", "keep[i:i + 1].zero_()"),
                             ("zeros(out=)", "zeros", "torch.zeros(1, out=keep[i:i + 1])"),
                             ("arange(out=), one number each", "arange",
                              "torch.arange(0.0, 0.5, 1.0, out=keep[i:i + 1])")]],
    # PyTorch's own random mask inside Tensor.apply_'s Python callback, where the guard once looked away
    ("dropout: a torch.rand mask inside apply_", "day5/dropout", "day5.dropout",
     _masked_launch("    box = []\n"
                    "    torch.zeros(1).apply_(lambda v: box.append((torch.rand(x.shape, generator=torch.Generator("
                    "device=x.device).manual_seed(seed), device=x.device) >= p).to(torch.uint8)) or v)\n"
                    "    keep = box[0]\n"),
     ["Tensor.apply_", "aten.rand"]),
    # a mask the kernel drew, kept for the backward where ctx's attributes do not show it (a red team's)
    ("dropout: a mask drawn in Python, 31 bits an int argument", "day5/dropout", "day5.dropout",
     _bits_launch("launch_bits(x, p, seed, 1)"), ["bits of numbers handed to kernel launches", "in the kernel"]),
    ("dropout: a mask drawn in Python, a tuple of ints an argument", "day5/dropout", "day5.dropout",
     _bits_launch("launch_bits(x, p, seed, 16)"), ["bits of numbers handed to kernel launches"]),
    ("dropout: the mask kept in a list on ctx", "day5/dropout", "day5.dropout",
     _kept_mask("ctx.kept = [keep]", "ctx.kept[0]"), ["still alive after it returned", "the seed and p"]),
    ("dropout: the mask kept in a module-level dict", "day5/dropout", "day5.dropout",
     _kept_mask("_MASKS[seed] = keep", "_MASKS[ctx.seed]"), ["still alive after it returned"]),
    # ... or copied out by a finalizer on an object in a cycle with it, when the grader's own collection freed
    # both (a red team's: by __del__, and by weakref.finalize)
    ("dropout: the mask copied out by a __del__ at the grader's collection", "day5/dropout", "day5.dropout",
     _kept_mask("class Carrier:\n"
                "            def __init__(self, keep, key):\n"
                "                self.keep, self.key, self.me = keep, key, self\n\n"
                "            def __del__(self):\n"
                "                _MASKS[self.key] = self.keep.clone()\n\n"
                "        Carrier(keep, seed)", "_MASKS.pop(ctx.seed)"),
     ["made a tensor", "a __del__, or a finalizer"]),
    ("dropout: the mask copied out by weakref.finalize at the grader's collection", "day5/dropout", "day5.dropout",
     _kept_mask("import weakref\n\n"
                "        class Node:\n"
                "            pass\n\n"
                "        node = Node()\n"
                "        node.me = node\n"
                "        weakref.finalize(node, lambda k=keep, s=seed: _MASKS.__setitem__(s, k.clone()))\n"
                "        del node", "_MASKS.pop(ctx.seed)"),
     ["made a tensor", "a __del__, or a finalizer"]),
    ("dropout: the mask kept in a closure on ctx", "day5/dropout", "day5.dropout",
     _kept_mask("ctx.mask_of = lambda: keep", "ctx.mask_of()"), ["still alive after it returned"]),
    # ... in memory an in-place resize_ gave a tensor of no elements, or in a module-level buffer grown in
    # the forward, or one made before the call (a red team's)
    ("dropout: the mask kept in memory that resize_ gave", "day5/dropout", "day5.dropout",
     {**_MASK_KERNEL,
      "        ctx.p, ctx.seed = p, seed\n": "        ctx.p, ctx.seed = p, seed\n"
      "        keep = torch.empty(0, dtype=x.dtype, device=x.device).resize_(x.shape)\n"
      "        dropout_kernel[(triton.cdiv(x.numel(), 4096),)](torch.ones_like(x), keep, x.numel(), p, 1.0, seed, "
      "BLOCK=4096)\n        ctx.kept = [keep]\n",
      "        return launch_dropout(dy.contiguous(), ctx.p, ctx.seed), None, None":
      "        return launch_masked(dy.contiguous(), ctx.kept[0], 1.0 / (1.0 - ctx.p)), None, None"},
     ["still alive after it returned"]),
    ("dropout: the mask kept in a module-level buffer made before the call", "day5/dropout", "day5.dropout",
     {**_MASK_KERNEL, "_MASKS = {}\n": "_KEEP = torch.empty(1 << 20, device=dev.torch_device)\n",
      "        ctx.p, ctx.seed = p, seed\n": "        ctx.p, ctx.seed = p, seed\n        keep = _KEEP[:x.numel()]\n"
      "        dropout_kernel[(triton.cdiv(x.numel(), 4096),)](torch.ones_like(x), keep, x.numel(), p, 1.0, seed, "
      "BLOCK=4096)\n",
      "        return launch_dropout(dy.contiguous(), ctx.p, ctx.seed), None, None":
      "        return launch_masked(dy.contiguous(), _KEEP, 1.0 / (1.0 - ctx.p)), None, None"},
     ["memory from before the call", "kept between calls"]),
    # ... or copied by PyTorch into a buffer made before the call, the kernel's own mask freed (a red team's)
    *[(f"dropout: the mask copied into a module-level buffer by {how}", "day5/dropout", "day5.dropout",
       {**_MASK_KERNEL, "_MASKS = {}\n": "_KEEP = torch.empty(1 << 20, device=dev.torch_device)\n",
        "        ctx.p, ctx.seed = p, seed\n": "        ctx.p, ctx.seed = p, seed\n"
        f"        {copy.format('launch_dropout(torch.ones_like(x), p, seed).reshape(-1)')}\n",
        "        return launch_dropout(dy.contiguous(), ctx.p, ctx.seed), None, None":
        "        return launch_masked(dy.contiguous(), _KEEP, 1.0 / (1.0 - ctx.p)), None, None"},
       ["wrote memory from before the call", "kept between calls"])
      for how, copy in [("copy_", "_KEEP[:x.numel()].copy_({})"), ("an assignment", "_KEEP[:x.numel()] = {}")]],
    # ... or never made by the call: numbers drawn by PyTorch when the cell ran, two pools picked by the seed's
    # parity, cloned by the forward and the backward for a kernel to compare with p (a red team's)
    ("dropout: numbers drawn when the cell ran, cloned out of a module-level pool", "day5/dropout", "day5.dropout",
     {"def launch_dropout(x, p, seed):": """@triton.jit
def pooled_kernel(x_ptr, u_ptr, out_ptr, n, p, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    u = tl.load(u_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, tl.where(u >= p, x * scale, 0.0).to(out_ptr.dtype.element_ty), mask=offs < n)


_POOL = [torch.rand(1 << 20, device=dev.torch_device) for _ in range(2)]


def launch_dropout(x, p, seed):
    out = torch.empty_like(x)
    u = _POOL[seed % 2][:x.numel()].clone()
    pooled_kernel[(triton.cdiv(x.numel(), 1024),)](x, u, out, x.numel(), p, 1.0 / (1.0 - p), BLOCK=1024)
    return out


def unused(x, p, seed):"""},
     ["read or wrote memory from before the call", "kept between calls"]),
    # ... or freed, and found again by the backward in the memory resize_ hands out: on a GPU the caching
    # allocator gives the block back as it was (the mask sits past the guard bytes around the forward's
    # allocation); the grader poisons what a resize adds
    ("dropout: the backward finds the forward's freed mask in memory resize_ hands out", "day5/dropout",
     "day5.dropout",
     {**_kept_mask("del keep", "torch.empty(0, dtype=dy.dtype, device=dy.device).resize_(dy.numel() + 2048)[1024:]")},
     ["dropped other elements"]),
    # ... or spread over many module-level buffers of 64 bytes each, none larger than a seed may be (the
    # graded calls are smaller than the notebook's demonstration, which made them)
    ("dropout: the mask copied into many small module-level buffers", "day5/dropout", "day5.dropout",
     {**_MASK_KERNEL, "_MASKS = {}\n": "_PIECES = []\n",
      "        ctx.p, ctx.seed = p, seed\n": "        ctx.p, ctx.seed = p, seed\n"
      "        keep = launch_dropout(torch.ones_like(x), p, seed).reshape(-1).to(torch.uint8)\n"
      "        while 64 * len(_PIECES) < keep.numel():   # grown by the notebook's own first call\n"
      "            _PIECES.append(torch.empty(64, dtype=torch.uint8, device=x.device))\n"
      "        for i in range(0, keep.numel(), 64):\n"
      "            _PIECES[i // 64][:keep[i:i + 64].numel()].copy_(keep[i:i + 64])\n",
      "        return launch_dropout(dy.contiguous(), ctx.p, ctx.seed), None, None":
      "        dy, dx = dy.contiguous().view(-1), torch.empty(dy.shape, dtype=dy.dtype, device=dy.device)\n"
      "        for i in range(0, dy.numel(), 64):   # each piece applied where it lies: nothing joined\n"
      "            part = dy[i:i + 64]\n"
      "            masked_kernel[(1,)](part, _PIECES[i // 64], dx.view(-1)[i:i + 64], part.numel(), "
      "1.0 / (1.0 - ctx.p), BLOCK=64)\n"
      "        return dx, None, None"},
     ["wrote memory from before the call", "tensor(s)"]),
    # Code of the student's that the grader itself ran outside the guard, before the output was overwritten (a
    # red team's): a finalizer on an object in a reference cycle, run by a collection; a `__class__` property
    # that isinstance reads; a tensor subclass's methods. Each copied the output's zeros into a dict.
    ("dropout: a finalizer copies the mask out of the output at a collection", "day5/dropout", "day5.dropout",
     {**_MASK_KERNEL, "_MASKS = {}\n": "_MASKS = {}\n\n\nclass Spy:\n    def __init__(self, out, key):\n"
      "        self.out, self.key, self.me = out, key, self\n\n    def __del__(self):\n"
      "        _MASKS[self.key] = self.out.clone()\n",
      "        ctx.p, ctx.seed = p, seed\n        return launch_dropout(x.contiguous(), p, seed)":
      "        ctx.p, ctx.seed = p, seed\n        y = launch_dropout(x.contiguous(), p, seed)\n"
      "        Spy(y, seed)\n        return y",
      "        return launch_dropout(dy.contiguous(), ctx.p, ctx.seed), None, None":
      "        return launch_masked(dy.contiguous(), _MASKS.pop(ctx.seed), 1.0 / (1.0 - ctx.p)), None, None"},
     # (its copy of the overwritten output is refused on a case above 64 bytes, and wrong on a smaller one)
     [("backward pass dropped other elements", "made a tensor of shape")]),
    ("dropout: a __class__ property on ctx copies the mask when read", "day5/dropout", "day5.dropout",
     {**_MASK_KERNEL, "_MASKS = {}\n": "_MASKS = {}\n\n\nclass Note:\n    def __init__(self, out, key):\n"
      "        self.out, self.key = out, key\n\n    @property\n    def __class__(self):\n"
      "        _MASKS[self.key] = self.out.clone()\n        return object\n",
      "        ctx.p, ctx.seed = p, seed\n        return launch_dropout(x.contiguous(), p, seed)":
      "        ctx.p, ctx.seed = p, seed\n        y = launch_dropout(x.contiguous(), p, seed)\n"
      "        ctx.note = Note(y, seed)\n        return y",
      "        return launch_dropout(dy.contiguous(), ctx.p, ctx.seed), None, None":
      "        return launch_masked(dy.contiguous(), _MASKS.pop(ctx.seed), 1.0 / (1.0 - ctx.p)), None, None"},
     ["your backward raised", "KeyError"]),
    ("dropout: a tensor subclass on ctx", "day5/dropout", "day5.dropout",
     {**_MASK_KERNEL, "_MASKS = {}\n": "_MASKS = {}\n\n\nclass Seed(torch.Tensor):\n    pass\n",
      "        ctx.p, ctx.seed = p, seed\n": "        ctx.p, ctx.seed = p, seed\n"
      "        ctx.seed_t = torch.zeros(1).as_subclass(Seed)\n"},
     ["ctx.seed_t a Seed, a subclass of torch.Tensor"]),
    # one output buffer kept between calls and returned by each (a helper's): the next call changes the last result
    ("dropout: the same buffer returned by every call", "day5/dropout", "day5.dropout",
     {"def launch_dropout(x, p, seed):": "_OUT = {}\n\n\ndef launch_dropout(x, p, seed):",
      "    out = torch.empty_like(x)\n    n = x.numel()\n":
      "    out = _OUT.setdefault((x.shape, x.dtype), torch.empty_like(x))\n    n = x.numel()\n"},
     ["returned memory it had returned before", "new tensor"]),
    # Objects of the student's that the grader touched outside the guard (a red team's, each with the reference's
    # own result here, to show that the object alone is refused): gradients handed back as a subclass whose
    # detach() the grader called, and a class whose metaclass's __eq__ ran when the grader compared types (a
    # list with a grad_fn property as a backward exercise's output: tests/test_checks.py)
    ("attention backward: gradients handed back as a tensor subclass", "day5/flash_attention_backward",
     "day5.attention_backward",
     {"        return dq, dk, dv, None":
      "        class Grad(torch.Tensor):\n            pass\n"
      "        return dq.as_subclass(Grad), dk.as_subclass(Grad), dv.as_subclass(Grad), None"},
     ["a Grad, a subclass of torch.Tensor"]),
    ("cross-entropy: the loss returned inside a list whose class has a metaclass", "day2/cross_entropy",
     "day2.cross_entropy",
     {"    return total / count":
      "    class Kind(type):\n        pass\n    Loss = Kind('Loss', (list,), {})\n    return Loss([total / count])"},
     ["returned a Loss where a tensor was expected"]),
    # ... or as an attribute of the input, which lives on
    ("dropout: the mask kept as an attribute of the input", "day5/dropout", "day5.dropout",
     _kept_mask("x.kept_mask = keep\n        ctx.x = x", "ctx.x.kept_mask"),
     ["still alive after it returned"]),
    # the output kept (in a list, unseen on ctx) and its zeros taken as the mask: the grader overwrites the
    # output's memory before the backward
    ("dropout: the backward reads the mask from the output", "day5/dropout", "day5.dropout",
     {**_MASK_KERNEL,
      "        ctx.p, ctx.seed = p, seed\n        return launch_dropout(x.contiguous(), p, seed)":
      "        ctx.p, ctx.seed = p, seed\n        y = launch_dropout(x.contiguous(), p, seed)\n"
      "        ctx.box = [y]\n        return y",
      "        return launch_dropout(dy.contiguous(), ctx.p, ctx.seed), None, None":
      "        return launch_masked(dy.contiguous(), ctx.box[0], 1.0 / (1.0 - ctx.p)), None, None"},
     ["backward pass dropped other elements", "overwritten"]),
    ("dropout: the seed added to the program's index", "day5/dropout", "day5.dropout",
     {"tl.randint4x(seed, tl.program_id(0) * (BLOCK // 8) + tl.arange(0, BLOCK // 8))":
      "tl.randint4x(seed + tl.program_id(0), tl.arange(0, BLOCK // 8))"},
     ["moved by 4096 element(s)"]),
    ("dropout: kept values not scaled", "day5/dropout", "day5.dropout",
     {"tl.where(r >= threshold, x * scale, 0.0)": "tl.where(r >= threshold, x, 0.0)"},
     ["elements you kept", "x / (1 - p)"]),
    ("dropout: keeps where the number is below p", "day5/dropout", "day5.dropout",
     {"tl.where(r >= threshold, x * scale, 0.0)": "tl.where(r < threshold, x * scale, 0.0)"}, ["should be kept"]),
    ("dropout: 16-bit numbers compared with p itself", "day5/dropout", "day5.dropout",
     {"tl.math.ceil(p * 65536.0)": "tl.math.ceil(p)"}, ["should be kept"]),
    ("linear + cross-entropy: eager loss and autograd inside apply_", "day5/linear_cross_entropy",
     "day5.linear_cross_entropy",
     {"        h, w, targets = h.contiguous(), w.contiguous(), targets.contiguous()\n":
      "        box = []\n"
      "        def work(v):\n"
      "            with torch.enable_grad():\n"
      "                hh, ww = h.detach().requires_grad_(), w.detach().requires_grad_()\n"
      "                loss = torch.nn.functional.cross_entropy(hh @ ww.t(), targets, ignore_index=-100)\n"
      "                box.append((loss.detach(), *torch.autograd.grad(loss, (hh, ww))))\n"
      "            return v\n"
      "        torch.zeros(1).apply_(work)\n"
      "        ce_grad_kernel[(1,)](torch.zeros(1, 1, device=h.device), torch.zeros(1, dtype=torch.int64, "
      "device=h.device), torch.empty(1, device=h.device), torch.ones(1, device=h.device), 1, 1, BLOCK=16)\n"
      "        ctx.grads = box[0][1:]\n"
      "        return box[0][0]\n"
      "        h, w, targets = h.contiguous(), w.contiguous(), targets.contiguous()\n"},
     ["Tensor.apply_"]),
    ("linear + cross-entropy: the mean over each chunk's rows", "day5/linear_cross_entropy",
     "day5.linear_cross_entropy",
     {"(z, targets[start:end], losses[start:end], scale, n_cols,":
      "(z, targets[start:end], losses[start:end], 1.0 / (targets[start:end] != -100).sum().clamp(min=1)"
      ".to(torch.float32).reshape(1), n_cols,"}, ["(dh)", "elements differ", "in the whole batch"]),
    ("linear + cross-entropy: the backward ignores the incoming gradient", "day5/linear_cross_entropy",
     "day5.linear_cross_entropy",
     {LCE_SCALED: ""},
     ["(dh)", "elements differ", "incoming gradient"]),
    ("linear + cross-entropy: ignored rows keep a gradient", "day5/linear_cross_entropy",
     "day5.linear_cross_entropy",
     {"scale = tl.where(counted, tl.load(scale_ptr), 0.0)": "scale = tl.load(scale_ptr)"},
     ["(dh)", "elements differ", "-100 zeroed"]),
    ("linear + cross-entropy: the target's logit read after the row became its gradient",
     "day5/linear_cross_entropy", "day5.linear_cross_entropy",
     {"    z_t = tl.load(z_row + target, mask=counted, other=0.0).to(tl.float32)   # before the row is overwritten\n"
      "    tl.store(losses_ptr + row, tl.where(counted, lse - z_t, 0.0))\n": "",
      "        tl.store(z_row + cols, grad.to(z_ptr.dtype.element_ty), mask=mask)\n":
      "        tl.store(z_row + cols, grad.to(z_ptr.dtype.element_ty), mask=mask)\n"
      "    z_t = tl.load(z_row + target, mask=counted, other=0.0).to(tl.float32)\n"
      "    tl.store(losses_ptr + row, tl.where(counted, lse - z_t, 0.0))\n"}, ["(loss)", "elements differ"]),
    ("linear + cross-entropy: the softmax by PyTorch", "day5/linear_cross_entropy", "day5.linear_cross_entropy",
     {"            ce_grad_kernel[(end - start,)](":
      "            z = torch.log_softmax(z.float(), dim=1).to(z.dtype)\n            ce_grad_kernel[(end - start,)]("},
     ["computed with PyTorch", "aten._log_softmax"]),
    # exp by repeated squaring of (1 + z/1024), in PyTorch's permitted `mul`, beside the kernel (red team)
    ("linear + cross-entropy: PyTorch squares the logits", "day5/linear_cross_entropy", "day5.linear_cross_entropy",
     {"            ce_grad_kernel[(end - start,)](":
      "            e = 1 + z / 1024\n            for _ in range(10):\n                e = e * e\n"
      "            ce_grad_kernel[(end - start,)]("},
     ["computed with PyTorch", "aten.mul of two tensors of more than", "may also add, sum, multiply by a number"]),
    # ... or in the backward pass, on the logits of the last chunk kept from the forward
    ("linear + cross-entropy: the backward clamps kept logits", "day5/linear_cross_entropy",
     "day5.linear_cross_entropy",
     {"            del z   # else": "            ctx.z = z\n            del z   # else",
      "        ctx.grads = None\n": "        ctx.grads = None\n        ctx.z.clamp_min(0.0)\n"},
     ["your backward computed with PyTorch", "aten.clamp_min on a tensor of more than"]),
    # a placeholder returned by the forward, the loss written into it by the backward (red team)
    ("linear + cross-entropy: the loss filled in by the backward", "day5/linear_cross_entropy",
     "day5.linear_cross_entropy",
     {"        return (losses.sum() * scale[0]).to(h.dtype)":
      "        ctx.value = (losses.sum() * scale[0]).to(h.dtype)\n"
      "        placeholder = torch.zeros((), dtype=h.dtype, device=h.device)\n"
      "        ctx.save_for_backward(placeholder)\n        return placeholder",
      "        ctx.grads = None\n": "        ctx.grads = None\n        ctx.saved_tensors[0].copy_(ctx.value)\n"},
     ["(loss)", "elements differ"]),
    ("training step: RMSNorm's backward drops the mean term", "day5/training_step", "day5.training_step",
     {"dres + rstd * (g - xhat * (tl.sum(g * xhat, axis=0) / n_cols))": "dres + rstd * g"},
     ["(dx)", "elements differ", "mean(g x r)"]),
    ("training step: dw of one program only", "day5/training_step", "day5.training_step",
     {"partial.sum(0)": "partial[0]"}, ["(dnorm1)", "elements differ", "the sum over tokens"]),
    ("training step: SwiGLU's backward without the sigmoid's slope", "day5/training_step", "day5.training_step",
     {"dg * b * s * (1.0 + a * (1.0 - s))": "dg * b * s"}, ["elements differ", "(1 + a (1 - s))"]),
    ("training step: dQ masked off the diagonal", "day5/training_step", "day5.training_step",
     {"p = tl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)": "p = tl.where(offs_m[:, None] > offs_n[None, :], p, 0.0)"},
     ["elements differ"]),
    # the Hopper path's dQ kernel (TMA, taken in the interpreter here) reading the values from the keys' columns
    ("training step: dQ by TMA, V read from K's columns", "day5/training_step", "day5.training_step",
     {**_TMA_ON, "v = kv_desc.load([b, start_n, k_col + d_model])": "v = kv_desc.load([b, start_n, k_col])"},
     ["(dx)", "elements differ"]),
    ("training step: SwiGLU by PyTorch", "day5/training_step", "day5.training_step",
     {"swiglu_forward_kernel[(triton.cdiv(a.numel(), block),)](a, b, g, a.numel(), BLOCK=block)":
      "g.copy_(torch.nn.functional.silu(a) * b)"}, ["computed with PyTorch", "aten.silu"]),
    ("training step: PyTorch's autograd through PyTorch's RMSNorm", "day5/training_step", "day5.training_step",
     {"    x, h = RMSNorm.apply(x, norm2)\n": "    h = torch.nn.functional.rms_norm(x, (d,), norm2, eps=1e-6)\n"},
     ["computed with PyTorch"]),
    # a red team's norm with no Triton math: each token's sum of squares as the diagonal of x x^T, a
    # square root by Newton's method on those per-token values, the weight as a diagonal matrix
    ("training step: RMSNorm from products of x with itself", "day5/training_step", "day5.training_step",
     {"        rmsnorm_forward_kernel[(x.shape[0],)](x, w, y, rstd, x.shape[1], 1e-6, BLOCK=block,\n"
      "                                              num_warps=4 if block <= 1024 else 8)\n":
      "        n = x.shape[1]\n"
      "        ms = (x @ x.t()).reshape(-1)[::x.shape[0] + 1] / n + 1e-6\n"
      + NORM_FROM_MEAN_SQUARES},
     ["computed with PyTorch", "aten.mm of two factors computed from the same tensor"]),
    *[(f"training step: RMSNorm from x times its {how}", "day5/training_step", "day5.training_step",
       {"class RMSNorm(torch.autograd.Function):": LAUNDERED_COPIES + "\n\n\nclass RMSNorm(torch.autograd.Function):",
        "        rmsnorm_forward_kernel[(x.shape[0],)](x, w, y, rstd, x.shape[1], 1e-6, BLOCK=block,\n"
        "                                              num_warps=4 if block <= 1024 else 8)\n":
        "        n = x.shape[1]\n"
        "        xf = x.float()   # (a no-op in float32; bfloat16 on a GPU)\n"
        f"        ms = torch.bmm(xf.view(-1, 1, n), {how.replace(' ', '_')}(xf).view(-1, n, 1)).view(-1) / n + 1e-6\n"
        + NORM_FROM_MEAN_SQUARES},
       ["computed with PyTorch", "aten.bmm of two factors computed from the same tensor"])
      for how in ("spanning copy", "bits copy", "bytes copy", "noise taken away", "noise taken away by a kernel",
                  "noise taken away by a product")],
    # the same norm with each token's sum of squares from x times a copy that a Triton kernel made of it,
    # scaled, shifted, rearranged or with its signs flipped, and a little noise (the copy keeps x's sources)
    *[(f"training step: RMSNorm from x times a kernel's {what}", "day5/training_step", "day5.training_step",
       {"class RMSNorm(torch.autograd.Function):": COPY_KERNEL + "\n\nclass RMSNorm(torch.autograd.Function):",
        "        rmsnorm_forward_kernel[(x.shape[0],)](x, w, y, rstd, x.shape[1], 1e-6, BLOCK=block,\n"
        "                                              num_warps=4 if block <= 1024 else 8)\n":
        "        n = x.shape[1]\n"
        "        copy = torch.empty_like(x)\n"
        "        signs = torch.ones(n, device=x.device)\n"
        "        signs[1::3] = -1.0\n"
        f"        copy_kernel[(x.shape[0],)](x, copy, signs, n, MODE={mode}, BLOCK=block)\n"
        f"        {undo}\n"
        "        xf, copy = x.float(), copy.float()   # (no-ops in float32; bfloat16 on a GPU)\n"
        f"        ms = {squares} / n + 1e-6\n"
        + NORM_FROM_MEAN_SQUARES},
       ["computed with PyTorch", f"aten.{product} of two factors computed from the same tensor"])
      for what, mode, undo, squares, product in [
          ("copy, by bmm", 0, "pass", "torch.bmm(xf.view(-1, 1, n), copy.view(-1, n, 1)).view(-1)", "bmm"),
          ("copy, x c^T's diagonal", 0, "pass", "(xf @ copy.t()).as_strided((x.shape[0],), (x.shape[0] + 1,))", "mm"),
          ("2 x + 1 with noise", 1, "copy = (copy + -1.0) * 0.5",
           "torch.bmm(xf.view(-1, 1, n), copy.view(-1, n, 1)).view(-1)", "bmm"),
          ("features reversed", 2, "P = torch.zeros(n, n, device=x.device, dtype=x.dtype)\n"
           "        P.view(-1)[n - 1:n * n - 1:n - 1].fill_(1.0)\n        copy = copy @ P",
           "torch.bmm(xf.view(-1, 1, n), copy.view(-1, n, 1)).view(-1)", "bmm"),
          ("signs flipped", 3, "copy = copy.mul(signs)",
           "torch.bmm(xf.view(-1, 1, n), copy.view(-1, n, 1)).view(-1)", "bmm")]],
    ("bias + GELU: bias of the row instead of the column", "day1/bias_gelu", "day1.bias_gelu",
     {"b_ptr + offsets % n_cols": "b_ptr + (offsets // n_cols) % n_cols"}, ["elements differ", "offset % n_cols"]),
    # max(u, 0) - u * Phi(-|u|): right for u >= 0, the sign of the tail's term wrong below 0
    ("bias + GELU: |u| dropped from the tail's term", "day1/bias_gelu", "day1.bias_gelu",
     {"tl.minimum(tl.abs(u), 3.4028234663852886e38) * tail": "u * tail"}, ["elements differ"]),
    ("vector add: grid rounded down", "day1/vector_add", "day1.vector_add",
     {"triton.cdiv(n_elements, BLOCK_SIZE)": "max(1, n_elements // BLOCK_SIZE)"}, ["never written", "triton.cdiv"]),
]


@pytest.mark.parametrize("notebook, key, replace, words", [v[1:] for v in VARIANTS], ids=[v[0] for v in VARIANTS])
def test_wrong_variant_fails_with_a_message_that_points_at_the_mistake(notebook, key, replace, words, request):
    if DEVICE.is_gpu and request.node.callspec.id in INTERPRETER_ONLY:
        pytest.skip("a race whose result the GPU chooses (INTERPRETER_ONLY)")
    _skip_without_host_descriptors(replace)
    path = SOL / f"{notebook}.ipynb"
    name = next(fn for kind, k, fn in notebooks.graded_calls(path) if k == key)
    namespace = notebooks.run_code_cells(path, replace=replace, examples=False)
    with pytest.raises(grader.CheckFailed) as info:
        grader.check(key, namespace[name], hidden=True)
    for word in words:   # a word, or a tuple of words one of which is in the message
        assert any(w in str(info.value) for w in (word if isinstance(word, tuple) else (word,))), str(info.value)


# x + r and RMSNorm(x + r) from one kernel (as some libraries fuse them), its backward the norm's plus the
# sum's gradient
FUSED_ADD_NORM = """@triton.jit
def add_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, s_ptr, y_ptr, rstd_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    at = row * n_cols + cols
    x = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32) + tl.load(r_ptr + at, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(s_ptr + at, x.to(s_ptr.dtype.element_ty), mask=mask)
    tl.store(y_ptr + at, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(rstd_ptr + row, rstd)


class AddRMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, r, w):
        x, r = x.contiguous(), r.contiguous()
        s, y = torch.empty_like(x), torch.empty_like(x)
        rstd = torch.empty(x.shape[0], device=x.device, dtype=torch.float32)
        add_rmsnorm_kernel[(x.shape[0],)](x, r, w, s, y, rstd, x.shape[1], 1e-6, BLOCK=triton.next_power_of_2(x.shape[1]))
        ctx.save_for_backward(s, w, rstd)
        return s, y

    @staticmethod
    def backward(ctx, ds, dy):
        dx, dw = RMSNorm.backward(ctx, ds, dy)  # saved in the same order: (the norm's input, w, rstd)
        return dx, dx, dw"""


# The dropout reference's 16-bit numbers, taken out (an honest variant then draws its own r and compares it with p)
_DRAW = "    r0, r1, r2, r3 = tl.randint4x(seed, tl.program_id(0) * (BLOCK // 8) + tl.arange(0, BLOCK // 8))\n"
_NO_HALVES = {
    _DRAW: "",
    "    w = tl.reshape(tl.join(tl.join(r0, r2), tl.join(r1, r3)), [BLOCK // 2]).to(tl.uint32, bitcast=True)\n": "",
    "    r = tl.reshape(tl.join(w & 0xFFFF, w >> 16), [BLOCK])\n": "",
    "    threshold = tl.math.ceil(p * 65536.0).to(tl.uint32)\n": "",
    "r >= threshold": "r >= p",
}


HONEST_VARIANTS = [
    # Day 3's Hopper path (persistent, TMA descriptors) in the interpreter, where the reference takes the
    # pointer kernel: every operand TMA can read (either orientation) goes through it, the rest do not
    ("matmul: the TMA path", "day3/matmul", "day3.matmul", _TMA_ON),
    ("matmul + bias + GELU: the TMA path", "day3/matmul", "day3.matmul_bias_gelu", _TMA_ON),
    ("attention: the TMA path, two blocks of queries a program", "day4/flash_attention", "day4.attention",
     _TMA_ON),
    ("transformer block: the TMA products", "day4/flash_attention", "day4.transformer_block", _TMA_ON),
    ("training step: dQ by TMA", "day5/training_step", "day5.training_step", _TMA_ON),
    # one Philox call per element (lecture 02's first kernel): slower on a GPU, but a right dropout
    ("dropout: one number per element", "day5/dropout", "day5.dropout",
     {**_NO_HALVES, "    mask = offs < n\n": "    mask = offs < n\n    r = tl.rand(seed, offs)\n"}),
    # the four numbers of a call given to four quarters of the block (lecture 02's kernel): as right
    ("dropout: four numbers to four quarters of the block", "day5/dropout", "day5.dropout",
     {**_NO_HALVES,
      _DRAW: "    r0, r1, r2, r3 = tl.rand4x(seed, tl.program_id(0) * (BLOCK // 4) + tl.arange(0, BLOCK // 4))\n",
      "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)\n": "",
      "    mask = offs < n\n": "",
      "    x = tl.load(x_ptr + offs, mask=mask)\n"
      "    tl.store(out_ptr + offs, tl.where(r >= p, x * scale, 0.0).to(out_ptr.dtype.element_ty), mask=mask)\n":
      "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK // 4)\n"
      + "".join(f"    x = tl.load(x_ptr + offs + {k} * (BLOCK // 4), mask=offs + {k} * (BLOCK // 4) < n)\n"
                f"    tl.store(out_ptr + offs + {k} * (BLOCK // 4), tl.where(r{k} >= p, x * scale, 0.0)"
                f".to(out_ptr.dtype.element_ty), mask=offs + {k} * (BLOCK // 4) < n)\n" for k in range(4))}),
    # a call's four numbers to four neighbours, as floats (the earlier reference)
    ("dropout: four float numbers to four neighbours", "day5/dropout", "day5.dropout",
     {**_NO_HALVES,
      _DRAW: "    r0, r1, r2, r3 = tl.rand4x(seed, tl.program_id(0) * (BLOCK // 4) + tl.arange(0, BLOCK // 4))\n"
             "    r = tl.reshape(tl.join(tl.join(r0, r2), tl.join(r1, r3)), [BLOCK])\n"}),
    # the mean written with the mask of counted rows, as many honest answers do
    ("cross-entropy: the mean of the counted rows' losses", "day2/cross_entropy", "day2.cross_entropy",
     {"    total, count = losses.sum(dim=1)\n    return total / count":
      "    return losses[0][targets != IGNORE_INDEX].mean()"}),
    ("cross-entropy: the losses times a mask, over the mask's sum", "day2/cross_entropy", "day2.cross_entropy",
     {"    total, count = losses.sum(dim=1)\n    return total / count":
      "    valid = (targets != IGNORE_INDEX).float()\n    return (losses[0] * valid).sum() / valid.sum()"}),
    # one running max and sum per program, reduced across the program in every chunk, and PyTorch's
    # four-kernel mean (the lecture's kernel, the earlier reference): slower, as right
    ("cross-entropy: one running max per program", "day2/cross_entropy", "day2.cross_entropy", {
        "    m = tl.full([BLOCK_SIZE // 8], -float(\"inf\"), tl.float32)\n"
        "    s = tl.zeros([BLOCK_SIZE // 8], tl.float32)\n": "    m = -float(\"inf\")\n    s = 0.0\n",
        "start + tl.arange(0, BLOCK_SIZE // 8)[:, None] * 8 + tl.arange(0, 8)[None, :]": "start + tl.arange(0, BLOCK_SIZE)",
        "        m_new = tl.maximum(m, tl.max(z, axis=1))\n": "        m_new = tl.maximum(m, tl.max(z, axis=0))\n",
        "        s = s * tl.exp2(m - m_shift) + tl.sum(tl.exp2(z - m_shift[:, None]), axis=1)\n":
        "        s = s * tl.exp2(m - m_shift) + tl.sum(tl.exp2(z - m_shift), axis=0)\n",
        "    m_row = tl.max(m, axis=0)\n    s_row = tl.sum(s * tl.exp2(m - m_row), axis=0)\n":
        "    m_row = m\n    s_row = s\n",
        "    tl.store(losses_ptr + n_rows + row, valid.to(tl.float32))\n": "",
        "    losses = torch.empty(2, n_rows,": "    losses = torch.empty(n_rows,",
        "    total, count = losses.sum(dim=1)\n    return total / count": "    return losses.sum() / (targets != IGNORE_INDEX).sum()"}),
    # dQ by atomics: results that vary in their last bits from run to run, but right
    ("attention backward: dQ by atomics", "day5/flash_attention_backward", "day5.attention_backward",
     DQ_BY_ATOMICS),
    # the backward's multiply by PyTorch (the reference's Triton kernel is optional), the lecture's chunks of
    # 1024 rows and its zeroed accumulator
    ("linear + cross-entropy: PyTorch's mul_ in the backward, zeros and addmm_", "day5/linear_cross_entropy",
     "day5.linear_cross_entropy",
     {LCE_SCALED + "        return grad_h, grad_w, None\n": "        return grad_h.mul_(grad_loss), grad_w.mul_(grad_loss), None\n",
      "        chunk = 2048 if h.is_cuda else 16\n": "        chunk = 1024 if h.is_cuda else 16\n",
      "        grad_w = torch.empty_like(w)": "        grad_w = torch.zeros_like(w)",
      LCE_DW_SUM:
      "            grad_w.addmm_(z.t(), h[start:end])\n"}),
    # the weight's gradient summed in float32 and converted at the end (lecture 04's default): right,
    # but it misses the memory target on a GPU (tests/test_memory.py)
    ("linear + cross-entropy: a float32 sum", "day5/linear_cross_entropy", "day5.linear_cross_entropy",
     dict(FLOAT32_SUM)),
    # one row at a time, and the log-sum-exp in base 2
    ("linear + cross-entropy: chunks of one row, base 2", "day5/linear_cross_entropy", "day5.linear_cross_entropy",
     {"chunk = 2048 if h.is_cuda else 16": "chunk = 1",
      "s = s * tl.exp(m - m_new) + tl.sum(tl.exp(z - m_new), axis=0)":
      "s = s * tl.math.exp2((m - m_new) * 1.4426950408889634) + tl.sum(tl.math.exp2((z - m_new) * 1.4426950408889634), axis=0)"}),
    # int32 targets for the kernel, the count taken from them after the loop (red team: refused by an
    # earlier rule that took whatever a launch with the logits got as made from them)
    ("linear + cross-entropy: int32 targets counted after the kernel", "day5/linear_cross_entropy",
     "day5.linear_cross_entropy",
     {"        scale = 1.0 / (targets != -100).sum().clamp(min=1).to(torch.float32).reshape(1)   # stays on the GPU\n":
      "        t32 = targets.to(torch.int32)\n        one = torch.ones(1, dtype=torch.float32, device=h.device)\n",
      "targets[start:end], losses[start:end], scale, n_cols,": "t32[start:end], losses[start:end], one, n_cols,",
      "        ctx.grads = (grad_h, grad_w)\n":
      "        scale = 1.0 / (t32 != -100).sum().clamp(min=1).to(torch.float32).reshape(1)\n"
      "        ctx.grads = (grad_h.mul_(scale), grad_w.mul_(scale))\n"}),
    # the 1/count scale, given to the kernel for the loss, folded into h's chunk for the dW product
    ("linear + cross-entropy: the scale folded into h's chunk", "day5/linear_cross_entropy",
     "day5.linear_cross_entropy",
     {"    scale = tl.where(counted, tl.load(scale_ptr), 0.0)\n": "    scale = tl.where(counted, 1.0, 0.0)\n",
      "    tl.store(losses_ptr + row, tl.where(counted, lse - z_t, 0.0))\n":
      "    tl.store(losses_ptr + row, tl.where(counted, lse - z_t, 0.0) * tl.load(scale_ptr))\n",
      "            torch.mm(z, w, out=grad_h[start:end])                  # dL/dh of the chunk\n":
      "            torch.mm(z, w, out=grad_h[start:end])\n            grad_h[start:end].mul_(scale)\n",
      "                torch.mm(z.t(), h[start:end], out=grad_w)          # dL/dW = dZ^T h_c: nothing to add to yet\n":
      "                torch.mm(z.t(), (h[start:end] * scale).to(h.dtype), out=grad_w)\n",
      "                grad_w.addmm_(z.t(), h[start:end])                 # dL/dW += dZ^T h_c\n":
      "                grad_w.addmm_(z.t(), (h[start:end] * scale).to(h.dtype))\n",
      "        return (losses.sum() * scale[0]).to(h.dtype)": "        return losses.sum().to(h.dtype)"}),
    # the residual additions by PyTorch after the products, a projection through F.linear
    ("training step: residuals added apart, F.linear", "day5/training_step", "day5.training_step",
     {"    x = torch.addmm(x, CausalAttention.apply((h @ wqkv).view(b, n, 3 * d)).view(b * n, d), wo)":
      "    x = x + CausalAttention.apply(torch.nn.functional.linear(h, wqkv.t()).view(b, n, 3 * d)).view(b * n, d) @ wo",
      "    return torch.addmm(x, SwiGLU.apply(h, w1, w3), w2).view(b, n, d)":
      "    return (x + SwiGLU.apply(h, w1, w3) @ w2).view(b, n, d)"}),
    # q, k and v split into contiguous copies (exercise 1's layout) and joined again, the output's heads
    # merged by a copy: slower than reading them in place, but honest (autograd's backward joins the
    # gradients with aten.stack)
    ("training step: heads copied apart and joined", "day5/training_step", "day5.training_step",
     {"    x = torch.addmm(x, CausalAttention.apply((h @ wqkv).view(b, n, 3 * d)).view(b * n, d), wo)  # x + a @ wo":
      "    heads = d // 64\n"
      "    q, k, v = (h @ wqkv).view(b, n, 3, heads, 64).permute(2, 0, 3, 1, 4).unbind(0)\n"
      "    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()\n"
      "    packed = torch.stack((q, k, v)).permute(1, 3, 0, 2, 4).reshape(b, n, 3 * d)\n"
      "    o = CausalAttention.apply(packed).view(b, n, heads, 64).transpose(1, 2).contiguous()\n"
      "    x = x + o.transpose(1, 2).reshape(b * n, d) @ wo"}),
    # the norm's Function handing back its input itself (not a view of it) beside the norm
    ("training step: the residual stream returned as the input itself", "day5/training_step", "day5.training_step",
     {"        return x.view_as(x), y\n": "        return x, y\n"}),
    # the products by torch.einsum (which runs bmm)
    ("training step: products by einsum", "day5/training_step", "day5.training_step",
     {"    x = torch.addmm(x, CausalAttention.apply((h @ wqkv).view(b, n, 3 * d)).view(b * n, d), wo)  # x + a @ wo":
      '    x = x + torch.einsum("td,de->te", CausalAttention.apply(torch.einsum("td,de->te", h, wqkv)'
      '.view(b, n, 3 * d)).view(b * n, d), wo)'}),
    # Triton kernels that copy or rearrange honestly (their copies keep the sources of what they copied):
    # q, k and v split apart by a kernel and packed again by PyTorch before the attention ...
    ("training step: q, k, v split apart by a kernel", "day5/training_step", "day5.training_step",
     {"class CausalAttention(torch.autograd.Function):":
      "@triton.jit\n"
      "def split_kernel(qkv_ptr, parts_ptr, d, tokens, BLOCK: tl.constexpr):\n"
      "    t = tl.program_id(0).to(tl.int64)\n"
      "    cols = tl.arange(0, BLOCK)\n"
      "    mask = cols < d\n"
      "    for j in tl.static_range(3):\n"
      "        tl.store(parts_ptr + j * tokens * d + t * d + cols, tl.load(qkv_ptr + t * 3 * d + j * d + cols, mask=mask),\n"
      "                 mask=mask)\n\n\n"
      "class CausalAttention(torch.autograd.Function):",
      "        qkv = qkv.contiguous()\n":
      "        b, n, three_d = qkv.shape\n"
      "        parts = torch.empty((3, b, n, three_d // 3), device=qkv.device, dtype=qkv.dtype)\n"
      "        split_kernel[(b * n,)](qkv.contiguous(), parts, three_d // 3, b * n,\n"
      "                               BLOCK=triton.next_power_of_2(three_d // 3))\n"
      "        qkv = torch.stack((parts[0], parts[1], parts[2]), dim=2).view(b, n, three_d)\n"}),
    # ... the norm's output transposed by a kernel, the product reading it through a transposed view ...
    ("training step: the norm's output transposed by a kernel", "day5/training_step", "day5.training_step",
     {"class RMSNorm(torch.autograd.Function):":
      "@triton.jit\n"
      "def transpose_kernel(y_ptr, yt_ptr, n_rows, n_cols, BLOCK: tl.constexpr):\n"
      "    row = tl.program_id(0).to(tl.int64)\n"
      "    cols = tl.arange(0, BLOCK)\n"
      "    mask = cols < n_cols\n"
      "    tl.store(yt_ptr + cols * n_rows + row, tl.load(y_ptr + row * n_cols + cols, mask=mask), mask=mask)\n\n\n"
      "class RMSNorm(torch.autograd.Function):",
      "        ctx.save_for_backward(x, w, rstd)\n        return x.view_as(x), y\n":
      "        ctx.save_for_backward(x, w, rstd)\n"
      "        yt = torch.empty((x.shape[1], x.shape[0]), device=x.device, dtype=x.dtype)\n"
      "        transpose_kernel[(x.shape[0],)](y, yt, x.shape[0], x.shape[1], BLOCK=block)\n"
      "        return x.view_as(x), yt.t()\n"}),
    # ... and the second residual addition fused with the second norm: one kernel writes both
    ("training step: residual add and RMSNorm fused", "day5/training_step", "day5.training_step",
     {"# ---- the block ---": FUSED_ADD_NORM + "\n\n# ---- the block ---",
      "    x = torch.addmm(x, CausalAttention.apply((h @ wqkv).view(b, n, 3 * d)).view(b * n, d), wo)  # x + a @ wo\n"
      "    x, h = RMSNorm.apply(x, norm2)\n":
      "    x, h = AddRMSNorm.apply(x, CausalAttention.apply((h @ wqkv).view(b, n, 3 * d)).view(b * n, d) @ wo, norm2)\n"}),
    # the seed kept on ctx as a one-element tensor, not a number: nothing of the mask is kept
    ("dropout: the seed kept as a tensor", "day5/dropout", "day5.dropout",
     {"        ctx.p, ctx.seed = p, seed\n": "        ctx.p, ctx.seed_t = p, torch.tensor([seed])\n",
      "launch_dropout(dy.contiguous(), ctx.p, ctx.seed)": "launch_dropout(dy.contiguous(), ctx.p, int(ctx.seed_t))"}),
    # GELU's tail with a division and a select (the earlier reference): as right
    ("bias + GELU: 1 / d and a select", "day1/bias_gelu", "day1.bias_gelu",
     {"    d = 1.0 + tl.abs(u) * 0.35355339059327373\n    t = tl.math.rsqrt(d * d)\n":
      "    t = 1.0 / (1.0 + tl.abs(u) * 0.35355339059327373)\n",
      "    y = tl.maximum(u, 0.0) - tl.minimum(tl.abs(u), 3.4028234663852886e38) * tail\n":
      "    y = u * tl.where(u >= 0, 1.0 - tail, tail)\n"}),
    # a wrapper that flattens x for the Function and gives the shape back with a view
    # a launch per row, each handed its row's offset (and a view of the row): numbers a row, not a mask
    ("dropout: one launch a row", "day5/dropout", "day5.dropout",
     {"    dropout_kernel[(triton.cdiv(n, block),)](x, out, n, p, 1.0 / (1.0 - p), seed, BLOCK=block)\n":
      "    rows = x.view(-1, x.shape[-1]) if x.dim() > 1 else x.view(1, -1)\n"
      "    for row in range(rows.shape[0]):\n"
      "        start = row * rows.shape[1]\n"
      "        row_kernel[(triton.cdiv(rows.shape[1], 1024),)](rows[row], out.view_as(rows)[row], start,\n"
      "                                                       rows.shape[1], p, 1.0 / (1.0 - p), seed, BLOCK=1024)\n",
      "def launch_dropout(x, p, seed):":
      "@triton.jit\ndef row_kernel(x_ptr, out_ptr, start, n_cols, p, scale, seed, BLOCK: tl.constexpr):\n"
      "    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
      "    keep = tl.rand(seed, start + cols) >= p\n"
      "    x = tl.load(x_ptr + cols, mask=cols < n_cols)\n"
      "    tl.store(out_ptr + cols, tl.where(keep, x * scale, 0.0).to(out_ptr.dtype.element_ty), mask=cols < n_cols)\n"
      "\n\ndef launch_dropout(x, p, seed):"}),
    # the Function applied twice, the first result dropped (a warm-up call; the benchmark's slow variant): refused
    # once, the guard's own hold on what a call allocated counted as the forward keeping a tensor
    ("dropout: a first call whose result is dropped", "day5/dropout", "day5.dropout",
     {"    return DropoutFunction.apply(x, p, seed)": "    DropoutFunction.apply(x, p, seed)\n    return DropoutFunction.apply(x, p, seed)"}),
    ("dropout: the Function on a flat view", "day5/dropout", "day5.dropout",
     {"    return DropoutFunction.apply(x, p, seed)": "    return DropoutFunction.apply(x.reshape(-1), p, seed).view_as(x)"}),
    # the forward saves its input (no mask in it; needless, but nothing of the mask is kept)
    ("dropout: the forward saves its input", "day5/dropout", "day5.dropout",
     {"        ctx.p, ctx.seed = p, seed\n": "        ctx.p, ctx.seed = p, seed\n        ctx.save_for_backward(x)\n"}),
    # a table of each layer's last seed kept between calls (16 numbers, 128 bytes), one entry set per forward:
    # refused once, the whole table counted where the op wrote 8 bytes of it (a helper's sweep of honest code)
    ("dropout: one entry of a module-level table of seeds set by fill_", "day5/dropout", "day5.dropout",
     {"def launch_dropout(x, p, seed):": "_LAST_SEEDS = torch.zeros(16, dtype=torch.int64, device=dev.torch_device)\n\n\n"
      "def launch_dropout(x, p, seed):",
      "        ctx.p, ctx.seed = p, seed\n": "        ctx.p, ctx.seed = p, seed\n        _LAST_SEEDS[3].fill_(seed)\n"}),
    # the seed as a one-element tensor made by empty and fill_
    ("dropout: the seed kept as a filled tensor", "day5/dropout", "day5.dropout",
     {"        ctx.p, ctx.seed = p, seed\n":
      "        ctx.p, ctx.seed = p, seed\n"
      "        ctx.seed_t = torch.empty(1, dtype=torch.int64, device=x.device).fill_(seed)\n",
      "launch_dropout(dy.contiguous(), ctx.p, ctx.seed)": "launch_dropout(dy.contiguous(), ctx.p, int(ctx.seed_t))"}),
    # the rows that count, counted as Unsloth's cross-entropy does, or by the ignored ones
    ("cross-entropy: the count by count_nonzero", "day2/cross_entropy", "day2.cross_entropy",
     {"    total, count = losses.sum(dim=1)\n    return total / count":
      "    return losses[0].sum() / torch.count_nonzero(targets != IGNORE_INDEX)"}),
    ("cross-entropy: the count as rows less the ignored", "day2/cross_entropy", "day2.cross_entropy",
     {"    total, count = losses.sum(dim=1)\n    return total / count":
      "    n_valid = n_rows - (targets == IGNORE_INDEX).sum()\n    return losses[0].sum() / n_valid"}),
    # Day 5's mean written as Day 2's may be
    ("linear + cross-entropy: the mean of the counted rows' losses", "day5/linear_cross_entropy",
     "day5.linear_cross_entropy",
     {"        return (losses.sum() * scale[0]).to(h.dtype)": "        return losses[targets != -100].mean().to(h.dtype)"}),
    ("linear + cross-entropy: the mean through torch.where", "day5/linear_cross_entropy", "day5.linear_cross_entropy",
     {"        return (losses.sum() * scale[0]).to(h.dtype)":
      "        return (torch.where(targets != -100, losses, 0.0).sum() * scale[0]).to(h.dtype)"}),
    # chunks of 4 rows, each chunk's gradient scaled by PyTorch with a Python float (the kernel gets 1):
    # once refused for the guard's own reading of its figures, counted as the student's
    ("linear + cross-entropy: the scale applied by PyTorch to small chunks", "day5/linear_cross_entropy",
     "day5.linear_cross_entropy",
     {"        chunk = 2048 if h.is_cuda else 16\n": "        chunk = 2048 if h.is_cuda else 4\n",
      "        scale = 1.0 / (targets != -100).sum().clamp(min=1).to(torch.float32).reshape(1)   # stays on the GPU\n":
      "        inv = 1.0 / max(int((targets != -100).sum()), 1)\n"
      "        scale = torch.ones(1, dtype=torch.float32, device=h.device)\n",
      "            torch.mm(z, w, out=grad_h[start:end])": "            z.mul_(inv)\n            torch.mm(z, w, out=grad_h[start:end])",
      "        return (losses.sum() * scale[0]).to(h.dtype)": "        return (losses.sum() * inv).to(h.dtype)"}),
    # Refused by the guard's first rules of 2026-11-29 (night) and found by a helper's sweep of honest code:
    # a fixed grid of programs, each over every 32nd row, writing its loss sum and count (as persistent kernels do)
    ('cross-entropy: a persistent grid of 32 programs, their partial sums added by PyTorch', 'day2/cross_entropy', 'day2.cross_entropy',
     {'def cross_entropy(logits: torch.Tensor': '@triton.jit\ndef ce_persistent_kernel(logits_ptr, targets_ptr, partial_ptr, n_rows, n_cols, ignore_index,\n                         NUM_PROGRAMS: tl.constexpr, BLOCK_SIZE: tl.constexpr):\n    """A fixed number of programs, each looping over rows pid, pid + P, ...: its loss sum and count."""\n    pid = tl.program_id(0)\n    total = 0.0\n    count = 0.0\n    for row in range(pid, n_rows, NUM_PROGRAMS):\n        row_ptr = logits_ptr + row * n_cols\n        m = -float("inf")\n        s = 0.0\n        for start in range(0, n_cols, BLOCK_SIZE):\n            cols = start + tl.arange(0, BLOCK_SIZE)\n            z = tl.load(row_ptr + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)\n            m_new = tl.maximum(m, tl.max(z, axis=0))\n            s = s * tl.exp(m - m_new) + tl.sum(tl.exp(z - m_new), axis=0)\n            m = m_new\n        target = tl.load(targets_ptr + row)\n        valid = target != ignore_index\n        z_t = tl.load(row_ptr + target, mask=valid, other=0.0).to(tl.float32)\n        total += tl.where(valid, m + tl.log(s) - z_t, 0.0)\n        count += tl.where(valid, 1.0, 0.0)\n    tl.store(partial_ptr + pid, total)\n    tl.store(partial_ptr + NUM_PROGRAMS + pid, count)\n\n\ndef cross_entropy(logits: torch.Tensor', '    losses = torch.empty(2, n_rows, dtype=torch.float32, device=logits.device)\n    cross_entropy_kernel[(n_rows,)](logits, targets, losses, n_cols, IGNORE_INDEX,\n                                    BLOCK_SIZE=min(2048, max(64, triton.next_power_of_2(n_cols))), num_warps=4)\n': '    P = 32\n    losses = torch.empty(2, P, dtype=torch.float32, device=logits.device)\n    ce_persistent_kernel[(P,)](logits, targets, losses, n_rows, n_cols, IGNORE_INDEX, NUM_PROGRAMS=P,\n                               BLOCK_SIZE=min(2048, max(64, triton.next_power_of_2(n_cols))))\n'}),
    # the per-row buffer rounded up to 64 rows and zeroed, as FlashAttention rounds its log-sum-exp buffer
    ('cross-entropy: the losses in a buffer padded to 64 rows', 'day2/cross_entropy', 'day2.cross_entropy',
     {'losses_ptr, n_cols, ignore_index,\n': 'losses_ptr, n_cols, ignore_index, n_pad,\n', '    n_rows = tl.num_programs(0)\n': '    n_rows = n_pad\n', '    losses = torch.empty(2, n_rows, dtype=torch.float32, device=logits.device)\n    cross_entropy_kernel[(n_rows,)](logits, targets, losses, n_cols, IGNORE_INDEX,\n                                    BLOCK_SIZE=min(2048, max(64, triton.next_power_of_2(n_cols))), num_warps=4)\n': '    n_pad = triton.cdiv(n_rows, 64) * 64\n    losses = torch.zeros(2, n_pad, dtype=torch.float32, device=logits.device)\n    cross_entropy_kernel[(n_rows,)](logits, targets, losses, n_cols, IGNORE_INDEX, n_pad,\n                                    BLOCK_SIZE=min(2048, max(64, triton.next_power_of_2(n_cols))), num_warps=4)\n'}),
    # a workspace cached in a module-level dict, grown when a call needs more, then sliced
    ('cross-entropy: a workspace kept between calls, grown when needed', 'day2/cross_entropy', 'day2.cross_entropy',
     {'def cross_entropy(logits: torch.Tensor': '_workspace = {}\n\n\ndef cross_entropy(logits: torch.Tensor', '    losses = torch.empty(2, n_rows, dtype=torch.float32, device=logits.device)\n': '    buf = _workspace.get(logits.device)\n    if buf is None or buf.numel() < 2 * n_rows:\n        buf = _workspace[logits.device] = torch.empty(2 * n_rows, dtype=torch.float32, device=logits.device)\n    losses = buf[:2 * n_rows].view(2, n_rows)\n'}),
    # ... as the graded shapes leave it on a GPU (4096 rows), then read for a call of a few rows
    ('cross-entropy: a workspace grown by a larger call, a few of its numbers summed', 'day2/cross_entropy', 'day2.cross_entropy',
     {'def cross_entropy(logits: torch.Tensor': '_workspace = {torch.device(d): torch.empty(2 * 4096, device=d) for d in ("cpu", "cuda:0")\n'
      '              if d == "cpu" or torch.cuda.is_available()}\n\n\ndef cross_entropy(logits: torch.Tensor', '    losses = torch.empty(2, n_rows, dtype=torch.float32, device=logits.device)\n': '    buf = _workspace.get(logits.device)\n    if buf is None or buf.numel() < 2 * n_rows:\n        buf = _workspace[logits.device] = torch.empty(2 * n_rows, dtype=torch.float32, device=logits.device)\n    losses = buf[:2 * n_rows].view(2, n_rows)\n'}),
    # the losses' buffer from torch.full, the count kept at least 1 by torch.maximum
    ('cross-entropy: the count kept at least 1 by torch.maximum', 'day2/cross_entropy', 'day2.cross_entropy',
     {'    losses = torch.empty(2, n_rows, dtype=torch.float32, device=logits.device)\n': '    losses = torch.full((2, n_rows), 0.0, dtype=torch.float32, device=logits.device)\n', '    total, count = losses.sum(dim=1)\n    return total / count': '    total, count = losses.sum(dim=1)\n    return total / torch.maximum(count, torch.tensor(1.0, device=count.device))'}),
    # chunks of 2 rows with three fills of numbers each (a zeroed logits buffer, zeroed losses, a scale)
    ('linear + cross-entropy: chunks of 2 rows, three fills each', 'day5/linear_cross_entropy', 'day5.linear_cross_entropy',
     {'chunk = 2048 if h.is_cuda else 16': 'chunk = 2048 if h.is_cuda else 2', '            z = torch.mm(h[start:end], w.t())                      # (C, V): the only logits that exist\n': '            z = torch.empty((end - start, n_cols), device=h.device, dtype=h.dtype).fill_(0.0)\n            torch.mm(h[start:end], w.t(), out=z)\n            losses[start:end].fill_(0.0)\n            chunk_scale = torch.full((1,), 1.0, device=h.device) * scale\n', 'targets[start:end], losses[start:end], scale, n_cols,': 'targets[start:end], losses[start:end], chunk_scale, n_cols,'}),
    # RMSNorm's pattern: one float32 partial dW per chunk, summed by PyTorch at the end
    ('linear + cross-entropy: a float32 partial dW per chunk, summed by PyTorch', 'day5/linear_cross_entropy', 'day5.linear_cross_entropy',
     {"        grad_w = torch.empty_like(w)       # summed in w's dtype by addmm_: no float32 copy of W's size\n": '        grad_w_parts = torch.empty((triton.cdiv(n, chunk), n_cols, h.shape[1]), dtype=torch.float32, device=h.device)\n', LCE_DW_SUM: '            torch.mm(z.t().float(), h[start:end].float(), out=grad_w_parts[start // chunk])\n', '        ctx.grads = (grad_h, grad_w)\n': '        grad_w = grad_w_parts.sum(0).to(w.dtype)\n        ctx.grads = (grad_h, grad_w)\n'}),
    # whole 32-bit integers, four per call, compared with p * 2^32
    ("dropout: 32-bit integers against a threshold", "day5/dropout", "day5.dropout",
     {"(BLOCK // 8) + tl.arange(0, BLOCK // 8))": "(BLOCK // 4) + tl.arange(0, BLOCK // 4))",
      "[BLOCK // 2]).to(tl.uint32, bitcast=True)": "[BLOCK]).to(tl.uint32, bitcast=True)",
      "    r = tl.reshape(tl.join(w & 0xFFFF, w >> 16), [BLOCK])\n": "    r = w\n",
      "tl.math.ceil(p * 65536.0).to(tl.uint32)": "tl.math.ceil(p * 4294967296.0).to(tl.uint32)"}),
]


@pytest.mark.parametrize("notebook, key, replace", [v[1:] for v in HONEST_VARIANTS], ids=[v[0] for v in HONEST_VARIANTS])
def test_an_honest_variant_passes(notebook, key, replace):
    _skip_without_host_descriptors(replace)
    path = SOL / f"{notebook}.ipynb"
    name = next(fn for kind, k, fn in notebooks.graded_calls(path) if k == key)
    namespace = notebooks.run_code_cells(path, replace=replace, examples=False)
    grader.check(key, namespace[name], hidden=True)


def test_a_replacement_that_matches_nothing_is_an_error():
    with pytest.raises(ValueError, match="no cell contains"):
        notebooks.run_code_cells(SOL / "day1" / "vector_add.ipynb", replace={"no such code": ""})


def test_without_examples_the_answers_run_and_the_worked_examples_do_not():
    whole = notebooks.run_code_cells(SOL / "day1" / "vector_add.ipynb")
    assert "add" in whole and "y" in whole                 # the worked example made x and y
    bare = notebooks.run_code_cells(SOL / "day1" / "vector_add.ipynb", examples=False)
    assert "add" in bare and "dev" in bare and "y" not in bare
    # code given before the first answer (the backward's notebook: Day 4's forward pass) still runs
    given = notebooks.run_code_cells(SOL / "day5" / "flash_attention_backward.ipynb", examples=False)
    assert "attention_forward" in given and "attention" in given and "grads" not in given


def test_a_replacement_that_matches_only_a_comment_is_an_error():
    # the cross-entropy answer names PyTorch's four-kernel mean in a comment: an edit of it changes nothing
    with pytest.raises(ValueError, match="outside a comment"):
        notebooks.run_code_cells(SOL / "day2" / "cross_entropy.ipynb",
                                 replace={"(targets != IGNORE_INDEX).sum()": "n_rows"})
    assert notebooks.occurs_as_code("x = 1  # y = 2\ny = 2\n", "y = 2")
    assert not notebooks.occurs_as_code("x = 1  # y = 2\n", "y = 2")
    assert notebooks.occurs_as_code("# ---- the block ---\n", "# ---- the block ---")   # an anchor that is a comment


@pytest.mark.parametrize("replace, words", [
    ({"    x = tl.load(x_ptr + offsets, mask=mask)\n    y = tl.load(y_ptr + offsets, mask=mask)\n"
      "    tl.store(out_ptr + offsets, x + y, mask=mask)":
      "    x = tl.load(x_ptr + offsets)\n    y = tl.load(y_ptr + offsets)\n    tl.store(out_ptr + offsets, x + y)"},
     ["kernel `add_kernel`: a tl.load reaches element", "of `x_ptr`", "mask it"]),
    ({"    tl.store(out_ptr + offsets, x + y, mask=mask)": "    tl.store(out_ptr + offsets, x + y)"},
     ["kernel `add_kernel`: a tl.store reaches element", "of `out_ptr`"]),
], ids=["no mask", "stores without a mask"])
@on_cpu_only
def test_an_access_past_a_tensor_s_end_is_explained_instead_of_killing_the_process(replace, words):
    # In the interpreter such an access used to read or write the host's memory, and could kill the
    # notebook's process ("double free or corruption"): now the notebook's own cell stops with the reason...
    namespace = {}
    with pytest.raises(Exception) as in_the_notebook:
        notebooks.run_code_cells(SOL / "day1" / "vector_add.ipynb", namespace=namespace, replace=replace)
    assert all(word in str(in_the_notebook.value) for word in words), in_the_notebook.value
    # ... and so does the check, in the student's words
    with pytest.raises(grader.CheckFailed) as info:
        grader.check("day1.vector_add", namespace["add"])
    assert all(word in str(info.value) for word in words) and "InterpreterError" not in str(info.value), info.value


KEYWORD_LAUNCH = {"add_kernel[grid](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)":
                  "add_kernel[grid](x, y_ptr=y, out_ptr=out, n_elements=n_elements, BLOCK_SIZE=BLOCK_SIZE)"}


@on_cpu_only
def test_tensors_passed_by_keyword_are_a_kernel_s_tensors_too():
    # Liger-Kernel and others launch with keyword arguments: their memory is the kernel's to read and
    # write, and an access past their end is still caught (and named).
    namespace = notebooks.run_code_cells(SOL / "day1" / "vector_add.ipynb", replace=KEYWORD_LAUNCH)
    grader.check("day1.vector_add", namespace["add"], hidden=True)
    unmasked = {**KEYWORD_LAUNCH, "    tl.store(out_ptr + offsets, x + y, mask=mask)": "    tl.store(out_ptr + offsets, x + y)"}
    with pytest.raises(Exception, match="a tl.store reaches element .* of `out_ptr`"):
        notebooks.run_code_cells(SOL / "day1" / "vector_add.ipynb", replace=unmasked)
