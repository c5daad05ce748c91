"""GPU probe for Day 2: RMSNorm forward variants against F.rms_norm (bf16, 16384 x 4096)."""
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from grader import timing


@triton.jit
def rms_fwd(x_ptr, w_ptr, y_ptr, r_ptr, n_rows, n_cols, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    for i in range(ROWS):
        row = tl.program_id(0) * ROWS + i
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        tl.store(y_ptr + row * n_cols + cols, (x * r * w).to(y_ptr.dtype.element_ty), mask=mask)
        tl.store(r_ptr + row, r)


R, C = 16384, 4096
x = torch.randn(R, C, device="cuda").bfloat16()
w = (1 + 0.5 * torch.randn(C, device="cuda")).bfloat16()
ref = F.rms_norm(x.float(), (C,), w.float(), eps=1e-6)
fns = {"F.rms_norm": lambda: F.rms_norm(x, (C,), w, eps=1e-6)}
for rows in (1, 2, 4):
    for warps in (4, 8, 16):
        def f(rows=rows, warps=warps):
            y = torch.empty_like(x)
            r = torch.empty(R, device="cuda")
            rms_fwd[(R // rows,)](x, w, y, r, R, C, 1e-6, ROWS=rows, BLOCK=4096, num_warps=warps)
            return y
        fns[f"rows {rows} warps {warps}"] = f
for name, f in fns.items():
    assert (f().float() - ref).abs().max() < 0.1, name
for trial in range(2):
    ms = timing.compare(fns)
    for name, t in ms.items():
        print(f"trial {trial} {name:>18}: {t:.4f} ms  {2 * x.numel() * 2 / t / 1e6:.0f} GB/s  "
              f"{ms['F.rms_norm'] / t:.2f}x")
