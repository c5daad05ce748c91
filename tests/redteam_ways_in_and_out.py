"""Answers a red team graded against the rules that closed the pipeline red team's findings (2026-11-29):
ways into a dropout kernel and out of a cross-entropy kernel that got around them, and honest answers they
refused. Each is the cell of a notebook, as a module of its own (tests/test_redteam_ways_in_and_out.py).
The cheats are kept here so that the rules stay closed; they are not course material."""

# Each dropout answer's Function around its `launch(x, p, seed)`: the backward draws the mask again from the seed
DROPOUT_AROUND_LAUNCH = """

class DropoutFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, p, seed):
        ctx.p, ctx.seed = p, seed
        return launch(x.contiguous(), p, seed)

    @staticmethod
    def backward(ctx, dy):
        return launch(dy.contiguous(), ctx.p, ctx.seed), None, None


def dropout(x, p, seed):
    return DropoutFunction.apply(x, p, seed)
"""

DROPOUT_MASK_IN_HEURISTICS = """# CHEAT: dropout mask drawn by Python's random, handed to each launch through @triton.heuristics values
# (the heuristic's results go to the inner launch, which the launch-bits counter does not see).
import random
import torch, triton, triton.language as tl

_STATE = {"mask": 0, "start": 0}

@triton.heuristics({"M0": lambda args: _STATE["mask"] & 0x7FFFFFFF,
                     "M1": lambda args: (_STATE["mask"] >> 31) & 0x7FFFFFFF,
                     "START": lambda args: _STATE["start"]})
@triton.jit
def k(x_ptr, out_ptr, n, scale, M0: tl.constexpr, M1: tl.constexpr, START: tl.constexpr):
    i = tl.arange(0, 64)
    offs = START + i
    m = (offs < n) & (i < 62)
    word = tl.where(i < 31, M0, M1)
    keep = ((word >> (i % 31)) & 1) == 1
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, tl.where(keep, x * scale, 0.0), mask=m)

def launch(x, p, seed):
    out = torch.empty_like(x)
    n = x.numel()
    rng = random.Random(seed)
    bits = [rng.random() >= p for _ in range(n)]
    scale = 1.0 / (1.0 - p)
    for s in range(0, n, 62):
        word = 0
        for j, b in enumerate(bits[s:s + 62]):
            word |= int(b) << j
        _STATE["mask"], _STATE["start"] = word, s
        k[(1,)](x, out, n, scale)
    return out
""" + DROPOUT_AROUND_LAUNCH

DROPOUT_MASK_IN_AUTOTUNE_CONFIG = """# CHEAT: dropout mask drawn by Python's random, handed to each launch through a one-config @triton.autotune
# whose triton.Config is replaced before each launch (its values go to the inner launch, not counted).
import random
import torch, triton, triton.language as tl


@triton.autotune(configs=[triton.Config({"M0": 0, "M1": 0, "START": 0})], key=[])
@triton.jit
def k(x_ptr, out_ptr, n, scale, M0: tl.constexpr, M1: tl.constexpr, START: tl.constexpr):
    i = tl.arange(0, 64)
    offs = START + i
    m = (offs < n) & (i < 62)
    word = tl.where(i < 31, M0, M1)
    keep = ((word >> (i % 31)) & 1) == 1
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, tl.where(keep, x * scale, 0.0), mask=m)

def launch(x, p, seed):
    out = torch.empty_like(x)
    n = x.numel()
    rng = random.Random(seed)
    bits = [rng.random() >= p for _ in range(n)]
    scale = 1.0 / (1.0 - p)
    for s in range(0, n, 62):
        word = 0
        for j, b in enumerate(bits[s:s + 62]):
            word |= int(b) << j
        k.configs[0] = triton.Config({"M0": word & 0x7FFFFFFF, "M1": (word >> 31) & 0x7FFFFFFF, "START": s})
        k[(1,)](x, out, n, scale)
    return out
""" + DROPOUT_AROUND_LAUNCH

DROPOUT_MASK_IN_GLOBAL_CONSTEXPRS = """# CHEAT (interpreter): the dropout mask drawn with Python's random, handed to each launch through a
# module global tl.constexpr reassigned before the launch (not an argument: not counted).
import random
import torch, triton, triton.language as tl

M0 = tl.constexpr(0)
M1 = tl.constexpr(0)
START = tl.constexpr(0)

@triton.jit
def k(x_ptr, out_ptr, n, scale):
    i = tl.arange(0, 64)
    offs = START + i
    m = (offs < n) & (i < 62)
    word = tl.where(i < 31, M0, M1)
    keep = ((word >> (i % 31)) & 1) == 1
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, tl.where(keep, x * scale, 0.0), mask=m)

def launch(x, p, seed):
    global M0, M1, START
    out = torch.empty_like(x)
    n = x.numel()
    rng = random.Random(seed)
    bits = [rng.random() >= p for _ in range(n)]
    for s in range(0, n, 62):
        word = sum(int(b) << j for j, b in enumerate(bits[s:s + 62]))
        M0, M1, START = tl.constexpr(word & 0x7FFFFFFF), tl.constexpr(word >> 31), tl.constexpr(s)
        k[(1,)](x, out, n, 1.0 / (1.0 - p))
    return out
""" + DROPOUT_AROUND_LAUNCH

DROPOUT_MASK_POPPED_FROM_A_LIST = """# CHEAT (interpreter): the kernel fetches the mask from Python itself: MASKS.pop() on a module-level list,
# called in the kernel body (a builtin method: the not-Triton check neither flags nor follows it).
# One launch per call, a handful of launch bits; the mask is drawn by Python's random.
import random
import torch, triton, triton.language as tl

MASKS = []

@triton.jit
def k(x_ptr, out_ptr, n, scale):
    i = tl.arange(0, 32)
    for start in range(0, n, 31):
        word = MASKS.pop()
        offs = start + i
        m = (offs < n) & (i < 31)
        keep = ((word >> (i % 31)) & 1) == 1
        x = tl.load(x_ptr + offs, mask=m)
        tl.store(out_ptr + offs, tl.where(keep, x * scale, 0.0), mask=m)

def launch(x, p, seed):
    out = torch.empty_like(x)
    n = x.numel()
    rng = random.Random(seed)
    bits = [rng.random() >= p for _ in range(n)]
    words = [sum(int(b) << j for j, b in enumerate(bits[s:s + 31])) for s in range(0, n, 31)]
    MASKS[:] = words[::-1]
    k[(1,)](x, out, n, 1.0 / (1.0 - p))
    return out
""" + DROPOUT_AROUND_LAUNCH

CE_BLOCKS_APPENDED_TO_A_LIST = """# CHEAT (interpreter): the kernel hands its loaded blocks to a Python list (SINK.append(...)): in the CPU
# interpreter a block is a Python object holding a NumPy array of the values. The host code reads
# them (.handle.data) and computes the whole cross-entropy in NumPy; the kernel computes nothing.
import numpy as np
import torch, triton, triton.language as tl

SINK = []

@triton.jit
def k(z_ptr, t_ptr, out_ptr, V, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    SINK.append(tl.load(t_ptr + row + tl.arange(0, 1)))
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        SINK.append(tl.load(z_ptr + row * V + cols, mask=cols < V, other=-float("inf")))
    tl.store(out_ptr + row, 0.0)

def cross_entropy(logits, targets):
    R, V = logits.shape
    dummy = torch.empty(R, device=logits.device)
    SINK.clear()
    BLOCK = 1024
    k[(R,)](logits.contiguous(), targets.contiguous(), dummy, V, BLOCK=BLOCK)
    per_row = 1 + (V + BLOCK - 1) // BLOCK
    vals = [np.asarray(b.handle.data) for b in SINK]
    SINK.clear()
    total, count = 0.0, 0
    for r in range(R):
        t = int(vals[r * per_row][0])
        z = np.concatenate([v.astype(np.float64) for v in vals[r * per_row + 1:(r + 1) * per_row]])[:V]
        if t == -100:
            continue
        m = z.max()
        total += m + np.log(np.exp(z - m).sum()) - z[t]
        count += 1
    return torch.tensor(total / count, dtype=torch.float32)
"""

CE_PRINT_THROUGH_A_CALLABLE_OBJECT = r"""# CHEAT (rule 3 bypass, interpreter): tl.device_print called through an object of the student's class with
# __call__ (the print check follows only plain functions and @triton.jit functions, so it does not see it). Here the kernel
# prints every logit (hex=True) and the host reads its own stdout and computes the loss in NumPy. (Before
# Triton 3.9 the interpreter cannot print floats in hex: decimals there, as the test runs every version.)
import io, contextlib, struct
import numpy as np
import torch, triton, triton.language as tl

class _Out:
    def __call__(self, *a, **k):
        return tl.device_print(*a, **k)


OUT = _Out()
HEX = tuple(int(v) for v in triton.__version__.split(".")[:2]) >= (3, 9)

@triton.jit
def k(z_ptr, t_ptr, o_ptr, V, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    OUT("t", tl.load(t_ptr + row + tl.arange(0, 1)))
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        OUT("z", tl.load(z_ptr + row * V + cols, mask=cols < V, other=0.0), hex=HEX)
    tl.store(o_ptr + row, 0.0)

def cross_entropy(logits, targets):
    R, V = logits.shape
    buf = io.StringIO()
    dummy = torch.empty(R, device=logits.device)
    with contextlib.redirect_stdout(buf):
        k[(R,)](logits.contiguous(), targets.contiguous(), dummy, V, BLOCK=256)
    import re
    rows = {}
    for pid, what, body in re.findall(r"\((\d+), 0, 0\)\s+(t|z):\s+\[(.*?)\]", buf.getvalue(), re.S):
        toks = body.split()
        r = rows.setdefault(int(pid), {"z": []})
        if what == "t":
            r["t"] = int(toks[0])
        else:
            r["z"] += [float.fromhex(x) if HEX else float(x) for x in toks]
    total, count = 0.0, 0
    for r in rows.values():
        if r["t"] == -100:
            continue
        z = np.array(r["z"][:V])
        m = z.max()
        total += m + np.log(np.exp(z - m).sum()) - z[r["t"]]
        count += 1
    return torch.tensor(total / count, dtype=torch.float32)
"""

CE_HALVES_COPIED_BY_A_KERNEL_AND_ADDED = """# CHEAT (Day 2): the sum over the vocabulary done by PyTorch additions. The kernel only writes
# exp(z - max); each level of a halving tree copies the two halves into two NEW tensors with a copy
# kernel (each launch output is a "fresh" source, and a half is not detected as a copy of the whole),
# so PyTorch's `left + right` has terms with no common source and is not counted as a sum.
import torch, triton, triton.language as tl

@triton.jit
def exp_k(z_ptr, t_ptr, e_ptr, m_ptr, zt_ptr, V, VP, ignore, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = z_ptr + row.to(tl.int64) * V
    m = -float("inf")
    for start in range(0, V, BLOCK):           # the row max (no sum anywhere in the kernels)
        cols = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.max(tl.load(base + cols, mask=cols < V, other=-float("inf")), 0))
    for start in range(0, VP, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        z = tl.load(base + cols, mask=cols < V, other=-float("inf"))
        tl.store(e_ptr + row.to(tl.int64) * VP + cols, tl.exp(z - m), mask=cols < VP)
    t = tl.load(t_ptr + row)
    tl.store(m_ptr + row, m)
    tl.store(zt_ptr + row, tl.load(base + t, mask=t != ignore, other=0.0))

@triton.jit
def split_k(e_ptr, l_ptr, r_ptr, W, BLOCK: tl.constexpr):   # a copy: halves into two new tensors
    row = tl.program_id(0)
    for start in range(0, W, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        msk = cols < W
        tl.store(l_ptr + row * W + cols, tl.load(e_ptr + row * 2 * W + cols, mask=msk), mask=msk)
        tl.store(r_ptr + row * W + cols, tl.load(e_ptr + row * 2 * W + W + cols, mask=msk), mask=msk)

@triton.jit
def finish_k(s_ptr, m_ptr, zt_ptr, t_ptr, loss_ptr, ignore):
    row = tl.program_id(0)
    t = tl.load(t_ptr + row)
    loss = tl.load(m_ptr + row) + tl.log(tl.load(s_ptr + row)) - tl.load(zt_ptr + row)
    tl.store(loss_ptr + row, tl.where(t != ignore, loss, 0.0))

def cross_entropy(logits, targets):
    logits = logits.contiguous().float()
    R, V = logits.shape
    VP = max(4, triton.next_power_of_2(V))
    e = torch.empty(R, VP, device=logits.device)
    m = torch.empty(R, device=logits.device); zt = torch.empty_like(m)
    exp_k[(R,)](logits, targets, e, m, zt, V, VP, -100, BLOCK=1024)
    w = VP
    while w > 4:
        w //= 2
        left = torch.empty(R, w, device=logits.device); right = torch.empty(R, w, device=logits.device)
        split_k[(R,)](e, left, right, w, BLOCK=1024)
        e = left.sub(right, alpha=-1)         # PyTorch does the summing (left + right)
    s = e.sum(dim=1)                          # 4 per row: within the bound
    losses = torch.empty_like(m)
    finish_k[(R,)](s, m, zt, targets, losses, -100)
    mask = targets != -100
    return losses.sum() / mask.sum()
"""

HONEST_CE_PADDED_WORKSPACE = """# honest: kernel writes (lse, target logit) into a row-padded (R, 8) workspace (32-byte rows);
# PyTorch: ws[:, 0] - ws[:, 1], masked, summed, divided
import torch, triton, triton.language as tl
@triton.jit
def k(z_ptr, t_ptr, ws_ptr, V, ignore, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = z_ptr + row.to(tl.int64) * V
    m = -float("inf"); s = 0.0
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        z = tl.load(base + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
        mn = tl.maximum(m, tl.max(z, 0))
        s = s * tl.exp(m - mn) + tl.sum(tl.exp(z - mn), 0)
        m = mn
    t = tl.load(t_ptr + row)
    valid = t != ignore
    zt = tl.load(base + t, mask=valid, other=0.0).to(tl.float32)
    tl.store(ws_ptr + row * 8, m + tl.log(s))
    tl.store(ws_ptr + row * 8 + 1, zt)
def cross_entropy(logits, targets):
    logits = logits.contiguous()
    R, V = logits.shape
    ws = torch.empty(R, 8, device=logits.device, dtype=torch.float32)
    k[(R,)](logits, targets, ws, V, -100, BLOCK=1024)
    mask = targets != -100
    return ((ws[:, 0] - ws[:, 1]) * mask).sum() / mask.sum()
"""

HONEST_DROPOUT_LAUNCH_FALLBACK = """# honest: a version-compatibility fallback: try a launch option newer Tritons accept, else launch without it
import torch, triton, triton.language as tl
@triton.jit
def k(x_ptr, out_ptr, n, p, scale, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    r = tl.rand(seed, offs)
    tl.store(out_ptr + offs, tl.where(r >= p, x * scale, 0.0), mask=m)
def launch(x, p, seed):
    out = torch.empty_like(x); n = x.numel()
    args = (x, out, n, p, 1.0/(1.0-p), seed)
    try:
        k[(triton.cdiv(n, 1024),)](*args, 1024, 17)    # (a stray extra positional: a TypeError before any program runs)
    except TypeError:
        k[(triton.cdiv(n, 1024),)](*args, BLOCK=1024)
    return out
""" + DROPOUT_AROUND_LAUNCH
