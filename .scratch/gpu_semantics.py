"""What a GPU computes for the interpreter's known differences: a loop's index, narrow float->int casts, FMA."""
import sys
import numpy as np
import torch
import triton
import triton.language as tl
sys.path.insert(0, "tests")


@triton.jit
def loop_indices(out_ptr, n):
    halves = 0
    for i in range(-3, 0):
        halves += i // 2
    tl.store(out_ptr, halves)
    wide = 0
    for i in range(1, 2):
        wide = i * 65536 * 65536
    tl.store(out_ptr + 1, wide)
    unrolled = 0
    for i in tl.static_range(-3, 0):
        unrolled += i // 2
    tl.store(out_ptr + 2, unrolled)
    last = n * 0
    for i in tl.range(n - 2, n, num_stages=1):
        last = i * 4
    tl.store(out_ptr + 3, last)
    down = 0
    for i in range(3, -1, -1):
        for j in range(i):
            down += j
    tl.store(out_ptr + 4, down)


out = torch.zeros(5, dtype=torch.int64, device="cuda")
loop_indices[(1,)](out, 2**31)
print("loop indices", out.tolist(), "expected [-2, 0, -4, 8589934588, 4]")


@triton.jit
def narrow(x_ptr, i8, u8, i16, u16, B: tl.constexpr):
    o = tl.arange(0, B)
    x = tl.load(x_ptr + o)
    tl.store(i8 + o, x.to(tl.int8))
    tl.store(u8 + o, x.to(tl.uint8))
    tl.store(i16 + o, x.to(tl.int16))
    tl.store(u16 + o, x.to(tl.uint16))


vals = [300.0, -300.0, 70000.0, -70000.0, float("nan"), 2.7, -2.7, 1e30, -1e30, 128.0, 255.5, 65535.9, float("inf"), -float("inf"), -1.0, 3e9]
x = torch.tensor(vals, device="cuda")
outs = [torch.zeros(16, dtype=d, device="cuda") for d in (torch.int8, torch.uint8, torch.int16, torch.uint16)]
narrow[(1,)](x, *outs, B=16)
for name, o in zip(("int8", "uint8", "int16", "uint16"), outs):
    print("f32->", name, o.tolist())
for bits in (torch.float16, torch.bfloat16):
    xs = x.to(bits)
    outs = [torch.zeros(16, dtype=d, device="cuda") for d in (torch.int8, torch.uint8, torch.int16, torch.uint16)]
    narrow[(1,)](xs, *outs, B=16)
    for name, o in zip(("int8", "uint8", "int16", "uint16"), outs):
        print(bits, "->", name, o.tolist())
print("inputs", vals)


@triton.jit
def fused(a_ptr, b_ptr, c_ptr, out_ptr, B: tl.constexpr):
    o = tl.arange(0, B)
    a, b, c = tl.load(a_ptr + o), tl.load(b_ptr + o), tl.load(c_ptr + o)
    tl.store(out_ptr + o, a * b - c)


a = torch.tensor([1 + 2**-12] * 4, device="cuda")
b = torch.tensor([1 - 2**-12] * 4, device="cuda")
c = torch.tensor([1.0] * 4, device="cuda")
o = torch.empty(4, device="cuda")
fused[(1,)](a, b, c, o, B=4)
print("a*b-c on GPU", o.tolist(), "rounded twice:", float(np.float32(np.float32(a[0].item()) * np.float32(b[0].item())) - np.float32(1.0)), "once:", (1 + 2**-12) * (1 - 2**-12) - 1)
print(torch.cuda.get_device_name(), torch.__version__, triton.__version__)
