"""GPU probe for Day 1 design choices (run on a GPU machine without network; not part of the suite).

1. bias + GELU kernel variants: 1-D with a modulo for the bias column vs 2-D tiles, block sizes, warps.
2. Which eager ops run at the bytes/bandwidth model (candidates for the prediction exercise).
"""
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from grader import timing

bw = timing.copy_bandwidth_gbs()
print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw:.0f} GB/s")


@triton.jit
def gelu_1d(x_ptr, b_ptr, out_ptr, n, n_cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    b = tl.load(b_ptr + offs % n_cols, mask=m).to(tl.float32)
    u = x + b
    tl.store(out_ptr + offs, (0.5 * u * (1.0 + tl.math.erf(u * 0.7071067811865476))).to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def gelu_2d(x_ptr, b_ptr, out_ptr, n_rows, n_cols, BR: tl.constexpr, BC: tl.constexpr):
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    cols = tl.program_id(1) * BC + tl.arange(0, BC)
    m = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offs = rows[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=cols < n_cols).to(tl.float32)
    u = x + b[None, :]
    tl.store(out_ptr + offs, (0.5 * u * (1.0 + tl.math.erf(u * 0.7071067811865476))).to(out_ptr.dtype.element_ty), mask=m)


R = C = 8192
x = torch.randn(R, C, device="cuda").bfloat16()
b = torch.randn(C, device="cuda").bfloat16()
ref = F.gelu(x.float() + b.float())
fns = {"eager": lambda: F.gelu(x + b)}
for block in (1024, 2048, 4096):
    for warps in (4, 8):
        def f(block=block, warps=warps):
            out = torch.empty_like(x)
            gelu_1d[(triton.cdiv(x.numel(), block),)](x, b, out, x.numel(), C, BLOCK=block, num_warps=warps)
            return out
        fns[f"1d B{block} w{warps}"] = f
for br, bc, warps in ((1, 2048, 4), (2, 1024, 4), (4, 1024, 8), (8, 512, 8), (16, 256, 8), (4, 2048, 8)):
    def f(br=br, bc=bc, warps=warps):
        out = torch.empty_like(x)
        gelu_2d[(triton.cdiv(R, br), triton.cdiv(C, bc))](x, b, out, R, C, BR=br, BC=bc, num_warps=warps)
        return out
    fns[f"2d {br}x{bc} w{warps}"] = f
for name, f in fns.items():
    assert (f().float() - ref).abs().max() < 0.05, name
ms = timing.compare(fns)
for name, t in ms.items():
    print(f"bias_gelu {name:>16}: {t:.4f} ms  {2 * x.numel() * 2 / t / 1e6:.0f} GB/s  {ms['eager'] / t:.2f}x eager")

print("\neager ops vs the bytes / bandwidth model")
n = 2**26
a32, b32, c32 = (torch.randn(n, device="cuda") for _ in range(3))
m32 = torch.randn(R, C, device="cuda")
bias32 = torch.randn(C, device="cuda")
xh = torch.randn(R, C, device="cuda").half()
bh = torch.randn(C, device="cuda").half()
cases = {
    "add fp32 2^26 (12 B/elem)": (lambda: a32 + b32, 12 * n),
    "mul+add fp32 2^26, two kernels (24 B/elem)": (lambda: a32 * b32 + c32, 24 * n),
    "gelu(x+b) fp32 8192^2, two kernels (16 B/elem)": (lambda: F.gelu(m32 + bias32), 16 * R * C),
    "gelu(x+b) bf16 8192^2, two kernels (8 B/elem)": (lambda: F.gelu(x + b), 8 * R * C),
    "gelu(x+b) fp16 8192^2, two kernels (8 B/elem)": (lambda: F.gelu(xh + bh), 8 * R * C),
    "x+b bf16 8192^2 (4 B/elem)": (lambda: x + b, 4 * R * C),
    "gelu bf16 8192^2 (4 B/elem)": (lambda: F.gelu(x), 4 * R * C),
    "relu(x+b) bf16, two kernels (8 B/elem)": (lambda: F.relu(x + b), 8 * R * C),
    "x.float() bf16->fp32 8192^2 (6 B/elem)": (lambda: x.float(), 6 * R * C),
}
ms = timing.compare({k: v[0] for k, v in cases.items()})
for k, (fn, nbytes) in cases.items():
    model = nbytes / (bw * 1e9) * 1e3
    print(f"{k:>48}: measured {ms[k]:.4f} ms, model {model:.4f} ms, measured/model {ms[k] / model:.2f}")
