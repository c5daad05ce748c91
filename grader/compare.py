"""Compare a result with the expected one and explain the difference the way a TA would."""
from __future__ import annotations

from types import MappingProxyType

import torch

# (atol, rtol) per output dtype: what a correct kernel reaches, with room for fp32 vs TF32 and for a
# different (fused) order of rounding. Specs may override them.
TOLERANCES = MappingProxyType({   # read-only: a submitted cell must not be able to widen them
    torch.float64: (1e-10, 1e-8),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
})


# The bit patterns the guard writes into fresh allocations: NaNs with a payload no arithmetic produces,
# so "never written" can be told apart from "computed a NaN".
POISON_BITS = {
    torch.float64: (torch.int64, 0x7FF8DEADDEADDEAD),
    torch.float32: (torch.int32, 0x7FC0DEAD),
    torch.float16: (torch.int16, 0x7EAD),
    torch.bfloat16: (torch.int16, 0x7FDE),
}


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill a fresh tensor with a recognisable value: the NaN pattern above, True, or the largest integer."""
    with torch.no_grad():
        if t.dtype in POISON_BITS:
            int_dtype, bits = POISON_BITS[t.dtype]
            t.view(int_dtype).fill_(bits)
        elif t.dtype == torch.bool:
            t.fill_(True)
        elif not t.is_floating_point() and not t.is_complex():
            t.fill_(torch.iinfo(t.dtype).max)
        else:
            t.fill_(float("nan"))
    return t


def is_poison(t: torch.Tensor) -> torch.Tensor:
    """Which elements still hold the poison pattern (never written since allocation)."""
    if t.dtype not in POISON_BITS:
        return torch.zeros(t.shape, dtype=torch.bool, device=t.device)
    int_dtype, bits = POISON_BITS[t.dtype]
    return t.detach().contiguous().view(int_dtype) == bits


class CheckFailed(AssertionError):
    """A student's answer is wrong; the message says how, where and what to look at."""

    def _render_traceback_(self):
        # IPython shows this instead of a traceback: the frames would be the grader's own, which
        # bury the message that says what is wrong with the student's code.
        return [f"\x1b[0;31mCheckFailed\x1b[0m: {self}"]


def _fmt_index(flat: int, shape) -> tuple:
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape))) if len(shape) else ()


def describe_mismatch(name: str, got, expected: torch.Tensor, atol: float, rtol: float, hint: str = "") -> str | None:
    """None when `got` matches `expected` within tolerance, else a message that teaches."""
    where = f"{name}: expected shape {tuple(expected.shape)} {str(expected.dtype).replace('torch.', '')}"
    if not isinstance(got, torch.Tensor):
        return f"{where}, but got {type(got).__name__}. Return the output tensor from your function."
    if tuple(got.shape) != tuple(expected.shape):
        return f"{where}, but got shape {tuple(got.shape)}. Allocate the output with the input's shape."
    if got.dtype != expected.dtype:
        return (f"{where}, but got dtype {str(got.dtype).replace('torch.', '')}. "
                f"Allocate the output with the expected dtype.")
    if got.device != expected.device:
        return f"{where}, but got a tensor on {got.device}. Keep the output on {expected.device}."
    g, e = got.detach().double(), expected.detach().double()
    unwritten = is_poison(got) & ~torch.isnan(e)
    computed_nonfinite = ~torch.isfinite(g) & torch.isfinite(e) & ~unwritten
    bad = ~torch.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    n_bad = int(bad.sum())
    if n_bad == 0:
        return None
    first = int(bad.flatten().nonzero()[0])
    idx = _fmt_index(first, expected.shape)
    lines = [f"{where}: {n_bad} of {expected.numel()} elements differ (atol={atol:g}, rtol={rtol:g}).",
             f"  first bad index {idx}: expected {e.flatten()[first].item():.6g}, got {g.flatten()[first].item():.6g}"]
    n_unwritten = int(unwritten.sum())
    n_nonfinite = int(computed_nonfinite.sum())
    if n_nonfinite:
        first_n = _fmt_index(int(computed_nonfinite.flatten().nonzero()[0]), expected.shape)
        lines.append(f"  {n_nonfinite} elements are inf or NaN where a finite value was expected, the first at "
                     f"{first_n}: an overflow (exp of a large number?) or a division by zero.")
    if n_unwritten:
        first_u = _fmt_index(int(unwritten.flatten().nonzero()[0]), expected.shape)
        lines.append(f"  {n_unwritten} elements were never written (they still hold the NaN pattern the grader "
                     f"put in freshly allocated memory), the first at {first_u}. Check that your grid covers "
                     f"every element (triton.cdiv) and that the mask is not too strict.")
    else:
        err = (g - e).abs()
        finite = torch.isfinite(err)
        if finite.any():
            lines.append(f"  largest difference {err[finite].max().item():.3g}")
    if hint:
        lines.append(f"  hint: {hint}")
    return "\n".join(lines)
