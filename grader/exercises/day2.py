"""Day 2 exercises: fused softmax, RMSNorm forward and backward, cross-entropy forward."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from grader.exercises.spec import KernelExercise, passes_over

EPS = 1e-6          # RMSNorm's epsilon in every check
IGNORE_INDEX = -100  # PyTorch's default for F.cross_entropy


def _logits(shape, dtype, device, gen):
    """Random rows with offsets up to +-100: exp() of them overflows unless the row max is subtracted."""
    x = torch.randn(shape, generator=gen, device=device) * 4
    offsets = (torch.rand(shape[:-1] + (1,), generator=gen, device=device) * 200 - 100)
    offsets[0] = 95  # every input has a row that overflows exp() in float32 without the max subtraction
    # A gentle upward ramp puts each row's max near its end, so a chunked kernel that forgets to rescale
    # its running sum when the max grows is caught every time.
    ramp = torch.linspace(0, 8, shape[-1], device=device)
    return ((x + offsets + ramp).to(dtype),)


softmax = KernelExercise(
    key="day2.softmax",
    title="fused softmax",
    make_inputs=_logits,
    reference=lambda x: torch.softmax(x.double(), dim=-1).to(x.dtype),
    baseline=lambda x: torch.softmax(x, dim=-1),
    baseline_name="torch.softmax (eager)",
    # every size class the hidden cases reach, visible too: one-block rows and rows wider than a block
    cpu_shapes=((1, 1), (5, 300), (9, 1000), (2, 17_000)),
    gpu_shapes=((1, 1), (37, 1000), (128, 4097), (4, 70_000)),
    hidden_cpu_shapes=((3, 5000), (2, 20_011)),
    hidden_gpu_shapes=((8192, 4096), (3, 262_147)),
    speed_shape=(8192, 4096),
    target=1.5,
    gpu_dtypes=lambda dev: (dev.half_dtype, torch.float32),
    bytes_moved=passes_over(2),
    # Probabilities are tiny in wide rows, so the absolute tolerance must be tiny too: with the usual
    # 16-bit atol a kernel that wrote zeros would pass.
    tolerances={torch.float32: (1e-8, 1e-5), torch.float16: (1e-7, 2e-3), torch.bfloat16: (1e-7, 1.6e-2)},
    speed_hint="a row of the timed shape fits in one block: load it once (BLOCK_SIZE = "
               "triton.next_power_of_2(n_cols), num_warps 8 or more for thousands of columns), take the max, "
               "exponentiate, sum and divide in registers, and store once. Reading each row a second time "
               "costs about half as much time again.",
    hint="subtract the row max before tl.exp (large logits overflow otherwise), load masked lanes as "
         "-inf (other=-float('inf')) so they add nothing to the max or the sum, and for rows wider than "
         "one block loop over the row in chunks.",
)


def _rms_inputs(shape, dtype, device, gen):
    x = torch.randn(shape, generator=gen, device=device)
    w = 1 + 0.5 * torch.randn(shape[-1:], generator=gen, device=device)
    return x.to(dtype), w.to(dtype)


def _rms_reference(x, w):
    return F.rms_norm(x.double(), x.shape[-1:], w.double(), eps=EPS).to(x.dtype)


_RMS_COMMON = dict(
    make_inputs=_rms_inputs,
    reference=_rms_reference,
    baseline=lambda x, w: F.rms_norm(x, x.shape[-1:], w, eps=EPS),
    baseline_name="F.rms_norm",
    cpu_shapes=((1, 1), (7, 300), (16, 1000), (3, 5000)),
    gpu_shapes=((1, 1), (37, 1000), (256, 4096), (64, 8191), (2, 65_536)),
    hidden_cpu_shapes=((2, 6007),),
    hidden_gpu_shapes=((16_384, 4096), (5, 65_536)),
    speed_shape=(16_384, 4096),
    gpu_dtypes=lambda dev: (dev.half_dtype, torch.float32),
)

rmsnorm_forward = KernelExercise(
    key="day2.rmsnorm_forward",
    title="RMSNorm forward",
    target=1.1,
    bytes_moved=passes_over(2),
    speed_hint="one program per row: load the row once into one block, sum its squares in float32, load "
               "the weight, and store once; num_warps 8 or 16 for rows of thousands of values. Any second "
               "pass over the row costs about half as much time again.",
    hint="y = x / sqrt(mean(x^2) + eps) * weight, with the mean over the last dimension, in float32.",
    **_RMS_COMMON,
)

rmsnorm_backward = KernelExercise(
    key="day2.rmsnorm_backward",
    title="RMSNorm backward",
    target=1.0,  # printed, not graded
    bytes_moved=passes_over(3),  # read x and dy, write dx
    output_names=("dx", "dweight"),
    also_allowed=("sum",),  # adding up per-program partial sums of dweight with torch is fine
    backward=True,
    atol_scale={"dweight": "max"},
    # A row of one element makes dx a difference of two nearly equal terms, r g and x^2 r^3 g (x^2 r^2 is
    # x^2 / (x^2 + eps)): a correct float32 kernel missed 1e-5 there once in about 1,000 draws (found by
    # CI), and never 1e-4 in 2 million (tests/test_checks.py checks 400,000).
    tolerances={torch.float32: (1e-4, 1e-5)},
    hint="with r = 1 / sqrt(mean(x^2) + eps) and g = dy * weight: dx = r * (g - x * r^2 * mean(g * x)) "
         "and dweight = sum over rows of dy * x * r. Forgetting the mean(g * x) term, or r^2 in it, "
         "gives a wrong dx; forgetting to sum dweight over all rows gives a wrong dweight.",
    **_RMS_COMMON,
)


def _ce_inputs(shape, dtype, device, gen):
    rows, vocab = shape
    logits = (torch.randn(shape, generator=gen, device=device) * 3).to(dtype)
    targets = torch.randint(0, vocab, (rows,), generator=gen, device=device)
    ignored = torch.rand(rows, generator=gen, device=device) < 0.1
    ignored[0] = False  # at least one row counts, so the mean is defined
    if rows > 1:
        ignored[-1] = True  # and at least one is ignored, so a mean over all rows is caught every time
    return logits, torch.where(ignored, torch.full_like(targets, IGNORE_INDEX), targets)


cross_entropy = KernelExercise(
    key="day2.cross_entropy",
    title="cross-entropy forward",
    make_inputs=_ce_inputs,
    reference=lambda logits, t: F.cross_entropy(logits.double(), t, ignore_index=IGNORE_INDEX).float(),
    baseline=lambda logits, t: F.cross_entropy(logits, t, ignore_index=IGNORE_INDEX),
    baseline_name="F.cross_entropy",
    cpu_shapes=((1, 10), (7, 1000), (20, 5003)),
    gpu_shapes=((1, 10), (64, 32_000), (100, 50_257)),
    hidden_cpu_shapes=((4, 20_000),),
    hidden_gpu_shapes=((4096, 32_768), (7, 128_256)),
    speed_shape=(4096, 32_768),
    target=1.6,
    gpu_dtypes=lambda dev: (dev.half_dtype, torch.float32),
    bytes_moved=passes_over(1),  # the logits, read once
    # The loss is returned in float32 whatever the logits' dtype, computed from the same inputs.
    tolerances={d: (1e-5, 1e-4) for d in (torch.float32, torch.float16, torch.bfloat16)},
    # The final mean over rows, however it is written (a mask's mean, a product with the mask); on tensors
    # of more elements than there are rows only linear maps, so that the loss itself is the kernels' work
    # (a red team built exp from `div` alone on the logits, with no real kernel), and sums of a few numbers
    # per row only, so that the sum over the vocabulary is too (another's kernel wrote only exp(z)): or of a
    # few per program, up to 1024 (a persistent grid's partial sums and counts, a buffer padded to 64 rows).
    # A slice of the logits copied out to be summed costs an op each, which the bound on ops refuses.
    also_allowed=("sum", "div", "mean", "ne", "eq", "rsub", "sub", "count_nonzero", "clamp", "clamp_min", "maximum",
                  "minimum", "index", "mul", "where", "scalar_tensor", "masked_select", "nonzero"),
    linear_above=lambda logits, *rest: logits.shape[0],
    sum_limit=lambda logits, *rest: max(4 * logits.shape[0], 1024),
    output_names=("loss",),
    speed_hint="read each row of logits once: loop over it in chunks of a few thousand values, carrying the "
               "running max and sum (the online log-sum-exp), and load the target's logit once. Eager "
               "F.cross_entropy writes a log-softmax as large as the logits and reads it back.",
    hint="loss of a row = logsumexp(row) - row[target], with logsumexp = max + log(sum(exp(row - max))); "
         f"rows whose target is {IGNORE_INDEX} count neither in the sum nor in the number of rows the "
         "mean divides by; return a float32 scalar.",
)

EXERCISES = (softmax, rmsnorm_forward, rmsnorm_backward, cross_entropy)
