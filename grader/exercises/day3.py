"""Day 3 exercises: a tiled fp16 matmul, matmul with a fused bias + GELU epilogue, and GEMM arithmetic."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from grader.exercises.spec import KernelExercise, PredictionExercise

# Tags a shape may carry: the matmul promises any strides, so the checks pass operands in every layout.
TRANSPOSED = "b transposed"    # b is the transpose of an (N, K) tensor: its column stride is not 1
A_TRANSPOSED = "a transposed"  # a is the transpose of a (K, M) tensor
PADDED = "rows padded"         # a and b are slices of wider tensors: row strides larger than their widths
_PAD = 8


def _operand(rows, cols, transposed, padded, dtype, device, gen):
    """A (rows, cols) matrix laid out as the tags say: transposed and/or with padded rows."""
    inner, outer = (rows, cols) if transposed else (cols, rows)
    full = torch.randn(outer, inner + (_PAD if padded else 0), generator=gen, device=device).to(dtype)
    view = full[:, :inner]
    return view.t() if transposed else view


def _operands(shape, dtype, device, gen):
    """a (M, K) and b (K, N), in the layouts the shape's tags ask for (contiguous when it has none)."""
    m, n, k = shape[:3]
    a = _operand(m, k, A_TRANSPOSED in shape, PADDED in shape, dtype, device, gen)
    b = _operand(k, n, TRANSPOSED in shape, PADDED in shape, dtype, device, gen)
    return a, b


def _flops(shape, dtype):
    m, n, k = shape[:3]
    return 2 * m * n * k


matmul = KernelExercise(
    key="day3.matmul",
    title="tiled matmul",
    make_inputs=_operands,
    reference=lambda a, b: (a.double() @ b.double()).to(a.dtype),
    baseline=torch.matmul,
    baseline_name="torch.matmul (cuBLAS)",
    cpu_shapes=((1, 1, 1), (32, 32, 32), (65, 33, 100), (40, 70, 129, TRANSPOSED),
                (33, 40, 65, A_TRANSPOSED, PADDED)),
    # The last visible GPU shape and the last hidden shape of each device are layouts with strides of whole
    # 16 bytes, what a Hopper kernel's TMA descriptors can read: such a kernel takes another path for them
    # than for the ragged ones (the visible one lets a student see that path fail on transposed operands).
    gpu_shapes=((1, 1, 1), (127, 255, 513), (1024, 1024, 1024), (999, 1537, 2049, TRANSPOSED),
                (1000, 777, 1500, A_TRANSPOSED, PADDED), (256, 384, 512, A_TRANSPOSED, TRANSPOSED)),
    hidden_cpu_shapes=((100, 64, 257), (17, 130, 64, TRANSPOSED), (32, 48, 1024),
                       (20, 36, 70, A_TRANSPOSED, TRANSPOSED, PADDED), (48, 64, 96, A_TRANSPOSED, TRANSPOSED, PADDED)),
    hidden_gpu_shapes=((8192, 8192, 8192), (4096, 333, 4095, TRANSPOSED), (3, 5000, 7000),
                       (2000, 3000, 1027, A_TRANSPOSED, TRANSPOSED, PADDED),
                       (1024, 768, 2048, A_TRANSPOSED, TRANSPOSED, PADDED)),
    speed_shape=(8192, 8192, 8192),
    target=0.85,
    cpu_dtypes=(torch.float16,),
    gpu_dtypes=lambda dev: (torch.float16,),
    flops=_flops,
    output_names=("c",),
    # c[i, j] is a sum of K products: rounding grows with its typical size, sqrt(K) for these inputs.
    atol_scale={"c": "rms"},
    # A correct kernel is off by the final rounding to fp16 (half an ulp, under 5e-4 relative);
    # accumulating in fp16 along K adds an error that grows with K.
    tolerances={torch.float16: (5e-4, 1e-3)},
    speed_hint="at this size the tensor cores are the limit: tiles of 128 x 128 or 128 x 256 with BLOCK_K 64, "
               "num_stages 3 or 4 (the next tiles load while tl.dot works on these), num_warps 8, grouped "
               "program order so that neighbouring programs share tiles in L2, and 16-bit inputs straight into "
               "tl.dot with a float32 accumulator. Autotune a few such configs.",
    hint="accumulate in float32 (tl.zeros(..., dtype=tl.float32)) and convert once at the store; mask "
         "the K tail of both tiles (other=0.0); step the pointers with the strides you are given "
         "(a.stride(0), a.stride(1), b.stride(0), b.stride(1)), which also covers a transposed a or b "
         "and rows padded in memory. A TMA path (Hopper) must read those layouts too: a descriptor over a.t() "
         "holds K x M tiles (over b.t(), N x K), loaded at [k, m] ([n, k]) and turned back with .T.",
)


def _operands_and_bias(shape, dtype, device, gen):
    a, b = _operands(shape, dtype, device, gen)
    bias = torch.randn(shape[1], generator=gen, device=device).to(dtype)
    return a, b, bias


def _epilogue_reference(a, b, bias):
    return F.gelu(a.double() @ b.double() + bias.double()).to(a.dtype)


matmul_bias_gelu = KernelExercise(
    key="day3.matmul_bias_gelu",
    title="matmul + bias + GELU epilogue",
    make_inputs=_operands_and_bias,
    reference=_epilogue_reference,
    baseline=lambda a, b, bias: F.gelu(a @ b + bias),
    baseline_name="F.gelu(a @ b + bias) (eager: cuBLAS, then two elementwise kernels)",
    # strided operands (b transposed; a transposed inside a padded buffer) are checked visibly too
    cpu_shapes=((1, 1, 1), (32, 32, 32), (65, 33, 100), (40, 70, 129, TRANSPOSED), (33, 40, 65, A_TRANSPOSED, PADDED)),
    gpu_shapes=((1, 1, 1), (127, 255, 513), (2048, 2048, 512), (999, 1537, 2049, TRANSPOSED),
                (1000, 777, 1500, A_TRANSPOSED, PADDED)),
    hidden_cpu_shapes=((17, 130, 64, TRANSPOSED), (50, 33, 70, A_TRANSPOSED, PADDED),
                       (48, 64, 96, A_TRANSPOSED, TRANSPOSED, PADDED)),
    hidden_gpu_shapes=((8192, 8192, 512), (300, 5000, 100), (777, 1000, 1200, A_TRANSPOSED, PADDED),
                       (1024, 768, 2048, A_TRANSPOSED, TRANSPOSED, PADDED)),
    speed_shape=(8192, 8192, 512),
    target=1.0,
    cpu_dtypes=(torch.float16,),
    gpu_dtypes=lambda dev: (torch.float16,),
    flops=_flops,
    output_names=("out",),
    atol_scale={"out": "rms"},
    tolerances={torch.float16: (5e-4, 1e-3)},
    speed_hint="with K = 512 the matmul is short, so the M x N result's trips through memory count: add the "
               "bias and apply GELU to the float32 accumulator before the one store. Eager PyTorch writes the "
               "result after the matmul, again after the addition and again after the GELU.",
    hint="add the bias of each column to the float32 accumulator, apply "
         "GELU(u) = 0.5 * u * (1 + erf(u / sqrt(2))) to it, and only then convert and store.",
)


def _intensity(m, n, k, bytes_per_element):
    return 2 * m * n * k / ((m * k + k * n + m * n) * bytes_per_element)


def _naive_bytes(m, n, k, bytes_per_element):
    # Each of the m*n outputs reads a row of A and a column of B (2k elements) and writes itself.
    return (2 * k + 1) * m * n * bytes_per_element


def _tiled_bytes(m, n, k, block_m, block_n, bytes_per_element):
    # Each (block_m x block_n) tile of C reads a block_m x k panel of A and a k x block_n panel of B.
    tiles = -(-m // block_m) * -(-n // block_n)
    return (tiles * (block_m + block_n) * k + m * n) * bytes_per_element


_GEMM_CASES = ((8192, 8192, 8192, 2), (16, 8192, 8192, 2), (4096, 4096, 512, 4), (1, 1, 1, 4))


def _sample_gemm(rng):
    return (rng.randrange(1, 20_000), rng.randrange(1, 20_000), rng.randrange(1, 20_000), rng.choice((1, 2, 4)))


def _sample_tiled_gemm(rng):
    return _sample_gemm(rng)[:3] + (rng.choice((16, 32, 64, 128, 256)), rng.choice((16, 32, 64, 128, 256)),
                                     rng.choice((1, 2, 4)))

gemm_intensity = PredictionExercise(
    key="day3.gemm_intensity",
    title="arithmetic intensity of a GEMM",
    model=_intensity,
    cases=_GEMM_CASES,
    sample=_sample_gemm,
    unit="FLOP/byte",
    formula_tolerance=0.01,
    hint="FLOPs = 2*M*N*K (a multiply and an add per term); the fewest bytes read A and B once and "
         "write C once.",
)

naive_bytes = PredictionExercise(
    key="day3.naive_bytes",
    title="bytes moved by a naive matmul kernel",
    model=_naive_bytes,
    cases=_GEMM_CASES,
    sample=_sample_gemm,
    unit="bytes",
    formula_tolerance=0.01,
    hint="a naive kernel computes each output on its own, reading a whole row of A and a whole column "
         "of B from memory for it, and writes it once.",
)

tiled_bytes = PredictionExercise(
    key="day3.tiled_bytes",
    title="bytes moved by a tiled matmul kernel",
    model=_tiled_bytes,
    cases=((8192, 8192, 8192, 128, 128, 2), (8192, 8192, 8192, 128, 256, 2), (1000, 1000, 64, 64, 64, 4),
           (100, 300, 50, 64, 128, 2)),
    unit="bytes",
    formula_tolerance=0.01,
    sample=_sample_tiled_gemm,
    hint="count the tiles of C (round up at ragged edges); each reads a BLOCK_M x K panel of A and a "
         "K x BLOCK_N panel of B; C is written once.",
)

EXERCISES = (matmul, matmul_bias_gelu, gemm_intensity, naive_bytes, tiled_bytes)
