"""Day 1 exercises: vector add, fused bias + GELU, and predicting a runtime from bytes and bandwidth."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from grader.exercises.spec import KernelExercise, PredictionExercise, passes_over


def _randn(shape, dtype, device, gen):
    # Drawn in float32 then cast, so that every dtype sees the same kind of values.
    return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)


def _two_vectors(shape, dtype, device, gen):
    return _randn(shape, dtype, device, gen), _randn(shape, dtype, device, gen)


def _matrix_and_bias(shape, dtype, device, gen):
    return _randn(shape, dtype, device, gen), _randn(shape[-1:], dtype, device, gen)


vector_add = KernelExercise(
    key="day1.vector_add",
    title="vector add",
    make_inputs=_two_vectors,
    reference=lambda x, y: (x.double() + y.double()).to(x.dtype),
    baseline=torch.add,
    baseline_name="torch.add (eager)",
    cpu_shapes=((1,), (1000,), (4099,)),
    gpu_shapes=((1,), (1000,), (98_431,), (2**20 + 7,)),
    hidden_cpu_shapes=((1024,), (20_011,)),
    hidden_gpu_shapes=((2**24 + 3,), (3 * 2**20,)),
    speed_shape=(2**26,),
    target=0.9,
    gpu_dtypes=lambda dev: (torch.float32,),
    bytes_moved=passes_over(3),  # read x, read y, write out
    hint="each program handles BLOCK_SIZE elements starting at pid * BLOCK_SIZE; mask the tail.",
    speed_hint="a vector add reads two vectors and writes one, as torch.add does: neither can go faster than "
               "the memory, so what you control is keeping enough loads in flight. Blocks of 1024 elements or "
               "more (num_warps 4 to 8) reach torch.add's speed.",
)


def _bias_gelu_reference(x, b):
    return F.gelu(x.float() + b.float()).to(x.dtype)


bias_gelu = KernelExercise(
    key="day1.bias_gelu",
    title="fused bias + GELU",
    make_inputs=_matrix_and_bias,
    reference=_bias_gelu_reference,
    baseline=lambda x, b: F.gelu(x + b),
    baseline_name="F.gelu(x + b) (eager, two kernels)",
    cpu_shapes=((1, 1), (7, 300), (33, 1000)),
    gpu_shapes=((1, 1), (7, 300), (1000, 1000), (4096, 4097)),
    hidden_cpu_shapes=((64, 257), (3, 5000)),
    hidden_gpu_shapes=((8192, 8192), (333, 12_289)),
    speed_shape=(8192, 8192),
    target=1.8,
    gpu_dtypes=lambda dev: (dev.half_dtype, torch.float32),
    bytes_moved=passes_over(2),  # read x, write out (the bias is tiny and stays in cache)
    speed_hint="eager PyTorch writes x + b to memory and reads it back for the GELU: four passes over the "
               "matrix. One kernel that reads x and the bias, computes in float32 registers and writes once "
               "makes two. Give each program a large tile (1024 elements or more) so that loads stay in flight.",
    hint="GELU(u) = 0.5 * u * (1 + erf(u / sqrt(2))); compute it in float32 (x.to(tl.float32)) and "
         "add the bias of the element's column (offset % n_cols).",
)


def _add_model(n, bandwidth_gbs):
    return 3 * n * 4 / (bandwidth_gbs * 1e9) * 1e3


def _mul_add_eager_model(n, bandwidth_gbs):
    # Two kernels: x * y writes a temporary t, then t + z reads it back. 6 accesses of 4 bytes each.
    return 6 * n * 4 / (bandwidth_gbs * 1e9) * 1e3


def _measure(case_of):
    def measure(bandwidth_gbs, n):
        from grader import timing
        case, fn = case_of(bandwidth_gbs, n)
        return case, timing.compare({"op": fn})["op"]
    return measure


def _measure_add(bandwidth_gbs, n):
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    return (n, bandwidth_gbs), lambda: torch.add(x, y)


def _measure_mul_add(bandwidth_gbs, n):
    x, y, z = (torch.randn(n, device="cuda") for _ in range(3))
    return (n, bandwidth_gbs), lambda: x * y + z


def _sample_vector_case(rng):
    # Any length from a few thousand elements to a billion, any bandwidth from a laptop's to an HBM3e GPU's.
    return (rng.randrange(1_000, 10**9), float(rng.randrange(100, 8_000)))


predict_add = PredictionExercise(
    key="day1.predict_add",
    title="predicted time of torch.add on two float32 vectors",
    model=_add_model,
    cases=((2**20, 1000.0), (10**8, 3350.0), (12_345, 900.0)),
    measure=_measure(_measure_add),
    sample=_sample_vector_case,
    hint="count every byte read and written: two inputs and one output of 4 bytes each; "
         "GB/s means 1e9 bytes per second; the answer is in milliseconds.",
)

predict_mul_add = PredictionExercise(
    key="day1.predict_mul_add_eager",
    title="predicted time of eager x * y + z on float32 vectors",
    model=_mul_add_eager_model,
    cases=((2**20, 1000.0), (10**8, 3350.0), (12_345, 900.0)),
    measure=_measure(_measure_mul_add),
    sample=_sample_vector_case,
    hint="eager PyTorch runs two kernels: x * y writes a temporary that the addition reads back "
         "together with z; each element is 4 bytes.",
)

EXERCISES = (vector_add, bias_gelu, predict_add, predict_mul_add)
