"""Exercises described as data, so that a notebook's test cell is a one-line call."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable

import torch


def passes_over(n_passes: int):
    """bytes_moved for an op that reads or writes n_passes tensors of the input's shape and dtype."""
    def count(shape, dtype):
        n = 1
        for size in shape:
            n *= size
        return n_passes * n * torch.empty((), dtype=dtype).element_size()
    return count


def visible_answers(table: dict) -> Callable:
    """A prediction exercise's model in the student edition (grader/pipeline/edition.py): its answers on
    the visible cases, without the formula, which is what the student writes."""
    def model(*case):
        try:
            return table[tuple(case)]
        except KeyError:
            raise KeyError(f"the student edition knows the answers of the visible cases only, not {case}; "
                           "the hidden ones are checked when your notebook is graded") from None
    return model


@dataclass(frozen=True)
class KernelExercise:
    """A function the student writes with Triton, checked against PyTorch for correctness and speed."""

    key: str                       # "day1.vector_add": the name test cells use
    title: str
    make_inputs: Callable          # (shape, dtype, device, generator) -> tuple of arguments
    reference: Callable            # (*args) -> the exact answer (computed in higher precision, cast back)
    baseline: Callable             # (*args) -> the PyTorch code the speed is compared with
    baseline_name: str             # shown in every speed report, e.g. "torch.add (eager)"
    cpu_shapes: tuple              # visible checks on the interpreter: few programs, small sizes
    gpu_shapes: tuple              # visible checks on a GPU
    hidden_cpu_shapes: tuple       # more shapes at grading time
    hidden_gpu_shapes: tuple
    speed_shape: tuple             # where the speed is graded (GPU only)
    target: float                  # speed ratio baseline_time / student_time for full credit
    gpu_dtypes: Callable           # (device) -> dtypes checked on a GPU
    cpu_dtypes: tuple = (torch.float32,)
    speed_dtype: Callable = None   # (device) -> dtype timed; default: the first of gpu_dtypes
    bytes_moved: Callable = None   # (shape, dtype) -> fewest bytes the op must move (for GB/s)
    flops: Callable = None         # (shape, dtype) -> floating-point operations (for TFLOP/s)
    tolerances: dict = field(default_factory=dict)  # dtype -> (atol, rtol), overriding the defaults
    hint: str = ""                 # shown with every mismatch
    speed_hint: str = ""           # shown when a speed check misses its target: what a fast kernel does
    output_names: tuple = ()       # names of the outputs (or of the gradients), for messages
    also_allowed: tuple = ()       # ATen ops the exercise permits besides allocation and views
    # (the call's tensors) -> a number of elements, where also_allowed permits elementwise ops for
    # bookkeeping: on tensors larger than this PyTorch may apply only linear maps to floats (sums,
    # scalings, additions, float casts, products: guard.LINEAR_OPS), so many times, and only so many other
    # ops to smaller ones. The nonlinear work (a softmax, a loss) must be the student's kernels'.
    linear_above: Callable = None
    # (the call's tensors) -> the most elements one PyTorch sum (sum, mean, ...) may read: a few numbers
    # per row, where the sum over a row is the kernel's work (cross-entropy's over the vocabulary; a red
    # team's kernel wrote exp(z) and PyTorch summed each row)
    sum_limit: Callable = None
    backward: bool = False         # check the gradients of fn's output (an autograd.Function)
    # The output comes from autograd through the student's Functions and the permitted products and
    # additions (a whole block: also_allowed and linear_above say what PyTorch may do), not from one Function.
    composed: bool = False
    # Outputs whose atol scales with the expected values: "max" (their largest magnitude, for sums
    # over many rows), "rms" (their typical size, for dot products of length K), both at least 1, or
    # "relative" (their largest magnitude, however small: gradients of a mean over many rows); or (kind,
    # factor), that scale times the factor.
    atol_scale: dict = field(default_factory=dict)

    # A loss that computes its gradients in the forward pass (linear + cross-entropy in chunks): a timed
    # call is one whole step, the forward and the backward together, for the student and the baseline.
    times_step: bool = False
    # Peak memory as a second graded figure, with the speed (GPU only): the baseline's step needs at least
    # memory_target times the memory of yours, above the inputs (checks.step_memory says what is counted).
    memory_target: float = None
    memory_hint: str = ""          # shown when the memory target is missed: where a lean step's memory goes
    # GPU kernels the exercise permits besides the student's (cuBLAS's products, with also_allowed's "mm";
    # PyTorch's kernels for an allowed elementwise op), by a part of their name: the profiled call counts
    # them as the student's own work.
    library_kernels: tuple = ()

    # What PyTorch does by default for the same call, where the graded baseline pins something else (an
    # SDPA backend, say, where SDPA's own dispatch would pick another): timed beside it in a student's own
    # speed check and in the benchmark, never graded. Today every exercise is graded against PyTorch's
    # default path, so none sets it.
    default_baseline: Callable = None
    default_baseline_name: str = ""

    # A random operation (dropout) has no one right output to compare with: `judge(args, outputs, dy,
    # label)` decides instead, raising CheckFailed with the reason. `outputs` are the function's outputs
    # on every argument tuple `judge_calls(args)` names (the same seed twice, another seed, ...), one
    # tensor each, then, with `judged_backward`, the input gradient of the first call for the output
    # gradient dy (drawn from the case's generator after its inputs, shaped like the first input).
    # A timed call's output is judged alone: `outputs` then holds that one tensor and dy is None.
    judge: Callable = None
    judge_calls: Callable = None
    judged_backward: bool = False
    # The backward pass must recompute what it needs: the forward may keep no tensor for it (dropout's
    # mask, drawn again from the seed), in save_for_backward, on ctx, or anywhere else (checks.
    # _keeps_no_tensor), nor find one in its output's memory (overwritten before the backward runs).
    keeps_no_tensor: bool = False

    def __post_init__(self):
        # Read-only views: a submitted cell that reaches a spec must not be able to widen its tolerances.
        for name in ("tolerances", "atol_scale"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    @property
    def times_backward_only(self) -> bool:
        """A timed call is one backward pass, its forward run before the clock starts (not times_step)."""
        return self.backward and not self.times_step

    def shapes(self, device, hidden: bool) -> tuple:
        if device.is_gpu:
            return self.gpu_shapes + (self.hidden_gpu_shapes if hidden else ())
        return self.cpu_shapes + (self.hidden_cpu_shapes if hidden else ())

    def dtypes(self, device) -> tuple:
        return tuple(self.gpu_dtypes(device)) if device.is_gpu else self.cpu_dtypes

    def timed_dtype(self, device):
        return self.speed_dtype(device) if self.speed_dtype else self.dtypes(device)[0]


@dataclass(frozen=True)
class PredictionExercise:
    """A number the student predicts with the performance model, then checked against a measurement."""

    key: str
    title: str
    model: Callable                # (*case) -> the model's answer, in `unit`
    cases: tuple                   # argument tuples for the formula check (any machine)
    measure: Callable = None       # (bandwidth_gbs, n) -> (case, measured_ms) on the grading GPU, if any
    unit: str = "ms"
    formula_tolerance: float = 0.05  # relative: answers within 5% of the model pass the formula check
    gpu_tolerance: float = 0.35      # relative: prediction vs measurement on the GPU
    hint: str = ""
    sample: Callable = None        # (random.Random) -> a fresh case, for the hidden cases at grading time
