"""Drawings and small interactive widgets for the lecture notebooks.

Nothing here is graded. The functions live in a module (rather than in notebook cells) so that the
notebooks stay short and the drawings are unit-tested (tests/test_lecture_helpers.py).

Two topics:

* how a 1-D launch of Triton programs tiles a tensor: `tiling`, `draw_program_tiling`,
  `tiling_widget`;
* the roofline performance model: `roofline_time`, `ridge_point`, `attainable_tflops`,
  `plot_roofline`, `roofline_widget`.

Units: the roofline helpers that return a time take SI units (FLOP, bytes, FLOP/s, bytes/s) and
return seconds. The plotting helpers take what one reads on a datasheet: TB/s and TFLOP/s. Then an
arithmetic intensity in FLOP/byte times a bandwidth in TB/s is directly a rate in TFLOP/s.
"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from grader.hardware import peak_tflops
from grader.lectures.drawing import figure_image, show_in

# NVIDIA H100 SXM5 80GB, from NVIDIA's "H100 Tensor Core GPU" datasheet (dense, i.e. without the
# 2:4 structured-sparsity speed-up the datasheet also quotes).
H100_SXM = {
    "name": "H100 SXM",
    "bandwidth_tbs": 3.35,      # HBM3
    "bf16_tflops": peak_tflops("H100 SXM"),   # tensor cores, dense bf16/fp16 (1,979 with sparsity)
    "fp32_tflops": 67.0,        # plain FP32 on the CUDA cores (no tensor cores)
}

BLOCK_SIZES = (4, 8, 16, 32, 64, 128)   # tl.arange needs a power of two


# --------------------------------------------------------------------------------------------
# How programs tile a tensor
# --------------------------------------------------------------------------------------------

def tiling(n_elements: int, block_size: int) -> dict:
    """What a 1-D launch with grid = (cdiv(n_elements, block_size),) does, in numbers.

    Returns a dict with
      n_programs:   how many program instances the grid launches,
      total_lanes:  n_programs * block_size, the offsets the programs compute,
      active_lanes: the lanes whose offset is < n_elements (they load and store),
      masked_lanes: the lanes the mask switches off (all in the last program),
      offsets:      an (n_programs, block_size) array, offsets[pid, lane] = pid * block_size + lane,
      mask:         the boolean array offsets < n_elements.
    """
    if n_elements < 1 or block_size < 1:
        raise ValueError("n_elements and block_size must be positive")
    n_programs = -(-n_elements // block_size)          # ceiling division, as triton.cdiv
    offsets = np.arange(n_programs)[:, None] * block_size + np.arange(block_size)[None, :]
    mask = offsets < n_elements
    return {
        "n_programs": n_programs,
        "total_lanes": n_programs * block_size,
        "active_lanes": int(mask.sum()),
        "masked_lanes": int((~mask).sum()),
        "offsets": offsets,
        "mask": mask,
    }


def _program_colors(n: int):
    cmap = plt.get_cmap("tab10")
    return [cmap(i % 10) for i in range(n)]


def draw_program_tiling(n_elements: int, block_size: int, ax=None, annotate: bool | None = None):
    """Draw which program covers which element: one row per program, one column per lane.

    Lanes whose offset is past the end of the tensor (the mask is False there) are grey and
    hatched. Returns (fig, ax).
    """
    t = tiling(n_elements, block_size)
    rows = t["n_programs"]
    if ax is None:
        width = min(14.0, max(6.5, 2.5 + 0.32 * block_size))
        height = min(12.0, 1.9 + 0.32 * rows)
        fig, ax = plt.subplots(figsize=(width, height))
    else:
        fig = ax.figure
    if annotate is None:
        annotate = block_size <= 32 and rows <= 40
    colors = _program_colors(rows)
    for pid in range(rows):
        for lane in range(block_size):
            offset = t["offsets"][pid, lane]
            live = t["mask"][pid, lane]
            ax.add_patch(plt.Rectangle(
                (lane, pid), 1, 1,
                facecolor=colors[pid] if live else "0.85",
                edgecolor="white" if live else "0.6",
                hatch=None if live else "///", linewidth=0.8))
            if annotate:
                ax.text(lane + 0.5, pid + 0.5, str(offset), ha="center", va="center",
                        fontsize=10 if block_size <= 8 else 7 if block_size <= 16 else 5.5,
                        color="black" if live else "0.45")
    ax.set_xlim(0, block_size)
    ax.set_ylim(rows, 0)                       # program 0 on top
    ax.set_xlabel("lane: tl.arange(0, BLOCK_SIZE)")
    ax.set_ylabel("program: tl.program_id(0)")
    tick_step = max(1, block_size // 16)
    ax.set_xticks(np.arange(0, block_size, tick_step) + 0.5)
    ax.set_xticklabels([str(i) for i in range(0, block_size, tick_step)])
    ytick_step = max(1, rows // 20)
    ax.set_yticks(np.arange(0, rows, ytick_step) + 0.5)
    ax.set_yticklabels([str(i) for i in range(0, rows, ytick_step)])
    ax.tick_params(length=0)
    ax.set_title(f"n_elements = {n_elements}, BLOCK_SIZE = {block_size}\n"
                 f"grid = cdiv({n_elements}, {block_size}) = {rows} programs, "
                 f"{t['masked_lanes']} lanes masked off (hatched)", fontsize=9)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    return fig, ax


def _tiling_summary(n_elements: int, block_size: int) -> str:
    t = tiling(n_elements, block_size)
    return (f"<code>grid = (triton.cdiv({n_elements}, {block_size}),) = ({t['n_programs']},)</code>"
            f" &nbsp; lanes computed: {t['total_lanes']}, loading/storing: {t['active_lanes']}, "
            f"masked off: {t['masked_lanes']}")


def tiling_widget(n_elements: int = 100, block_size: int = 16):
    """Sliders for n_elements and BLOCK_SIZE, redrawing `draw_program_tiling` on every change.

    Returns an ipywidgets.VBox with extra attributes: `n_slider`, `block_slider`, `image` (the drawing),
    `summary` (an HTML widget) and `redraws` (how many drawings so far).
    """
    import ipywidgets as widgets

    n_slider = widgets.IntSlider(value=n_elements, min=1, max=256, step=1, description="n_elements",
                                 continuous_update=False)
    block_slider = widgets.SelectionSlider(options=list(BLOCK_SIZES), value=block_size,
                                           description="BLOCK_SIZE", continuous_update=False)
    summary = widgets.HTML()
    image = figure_image()
    box = widgets.VBox([widgets.HBox([n_slider, block_slider]), summary, image])
    box.n_slider, box.block_slider, box.summary, box.image, box.redraws = \
        n_slider, block_slider, summary, image, 0

    def redraw(_change=None):
        # Draw outside the Output context, so an error is raised rather than swallowed.
        fig, _ = draw_program_tiling(n_slider.value, block_slider.value)
        summary.value = _tiling_summary(n_slider.value, block_slider.value)
        show_in(image, fig)
        box.redraws += 1

    n_slider.observe(redraw, names="value")
    block_slider.observe(redraw, names="value")
    redraw()
    return box


# --------------------------------------------------------------------------------------------
# The roofline model
# --------------------------------------------------------------------------------------------

def roofline_time(flops: float, nbytes: float, peak_flops: float, bandwidth: float) -> float:
    """The roofline's lower bound on an operation's time, in seconds.

    flops: floating-point operations it performs; nbytes: bytes it must move to and from memory;
    peak_flops: the machine's peak in FLOP/s; bandwidth: its memory bandwidth in bytes/s.
    The op needs at least flops / peak_flops seconds to compute and at least nbytes / bandwidth
    seconds to move its data; at best the two overlap completely, so the bound is the larger one.
    """
    if peak_flops <= 0 or bandwidth <= 0:
        raise ValueError("peak_flops and bandwidth must be positive")
    return max(flops / peak_flops, nbytes / bandwidth)


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """The arithmetic intensity (FLOP/byte) at which compute time equals memory time.

    Any consistent units: FLOP/s and bytes/s, or TFLOP/s and TB/s, give the same ratio.
    """
    return peak_flops / bandwidth


def attainable_tflops(intensity, peak_tflops: float, bandwidth_tbs: float):
    """The roof: min(peak, intensity * bandwidth), in TFLOP/s. Works on numbers and numpy arrays."""
    return np.minimum(peak_tflops, np.asarray(intensity, dtype=float) * bandwidth_tbs)


def bound_by(intensity: float, peak_tflops: float, bandwidth_tbs: float) -> str:
    """'memory' left of the ridge point, 'compute' right of it."""
    return "memory" if intensity < ridge_point(peak_tflops, bandwidth_tbs) else "compute"


def plot_roofline(bandwidth_tbs: float = H100_SXM["bandwidth_tbs"],
                  peak_tflops: float = H100_SXM["bf16_tflops"],
                  ops=(), extra_roofs: dict | None = None, ax=None,
                  intensity_range: tuple = (2.0**-5, 2.0**14),
                  label: str = "bf16 tensor cores", title: str | None = None):
    """Draw a roofline (log-log: FLOP/byte against TFLOP/s) and place operations on it.

    ops: items (name, intensity) or (name, intensity, achieved_tflops). Without an achieved value
    the op is drawn on the roof, i.e. at the best rate the model allows it.
    extra_roofs: {label: tflops} for lower compute ceilings, e.g. {"FP32 (no tensor cores)": 67}.
    Returns (fig, ax).
    """
    if ax is None:
        fig, ax = plt.subplots(figsize=(8, 5))
    else:
        fig = ax.figure
    lo, hi = intensity_range
    x = np.geomspace(lo, hi, 400)
    ax.loglog(x, attainable_tflops(x, peak_tflops, bandwidth_tbs), color="tab:blue", lw=2.5,
              label=f"roof: {label}, {peak_tflops:g} TFLOP/s")
    ridge = ridge_point(peak_tflops, bandwidth_tbs)
    ax.axvline(ridge, color="tab:blue", ls=":", lw=1)
    ax.annotate(f"ridge point\n{ridge:.0f} FLOP/byte", (ridge, peak_tflops),
                textcoords="offset points", xytext=(6, -28), fontsize=8, color="tab:blue")
    for i, (name, tflops) in enumerate((extra_roofs or {}).items()):
        ax.loglog(x, attainable_tflops(x, tflops, bandwidth_tbs), ls="--", lw=1.5,
                  color=("tab:gray", "tab:olive", "tab:brown")[i % 3],
                  label=f"roof: {name}, {tflops:g} TFLOP/s")
    x_text = ridge / 40
    if x_text > lo:
        ax.text(x_text * 1.2, float(attainable_tflops(x_text, peak_tflops, bandwidth_tbs)) / 2.2,
                f"slope: {bandwidth_tbs:g} TB/s\n(memory-bound)", fontsize=8, color="tab:blue")
    if ridge * 3 < hi:
        ax.text(ridge * 1.5, peak_tflops * 1.35, "compute-bound", fontsize=8, color="tab:blue")
    markers = "osD^vP*X"
    for i, op in enumerate(ops):
        name, intensity = op[0], op[1]
        achieved = op[2] if len(op) > 2 and op[2] is not None else None
        y = achieved if achieved is not None else float(attainable_tflops(intensity, peak_tflops,
                                                                          bandwidth_tbs))
        kind = "measured" if achieved is not None else "best possible"
        ax.loglog([intensity], [y], markers[i % len(markers)], ms=9, color=f"C{(i + 1) % 10}",
                  label=f"{name}: {intensity:.3g} FLOP/B, {y:.3g} TFLOP/s ({kind})")
    ax.set_xlabel("arithmetic intensity (FLOP / byte moved to or from memory)")
    ax.set_ylabel("attainable performance (TFLOP/s)")
    ax.set_xlim(lo, hi)
    ax.set_ylim(attainable_tflops(lo, peak_tflops, bandwidth_tbs) / 3, peak_tflops * 3)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right", framealpha=0.9)
    ax.set_title(title or f"Roofline: {bandwidth_tbs:g} TB/s memory, {peak_tflops:g} TFLOP/s peak",
                 fontsize=10)
    fig.tight_layout()
    return fig, ax


def _roofline_summary(bandwidth_tbs: float, peak_tflops: float, intensity: float) -> str:
    rate = float(attainable_tflops(intensity, peak_tflops, bandwidth_tbs))
    ridge = ridge_point(peak_tflops, bandwidth_tbs)
    kind = bound_by(intensity, peak_tflops, bandwidth_tbs)
    # An op that moves 1 GB: its time bound, in ms.
    ms = roofline_time(intensity * 1e9, 1e9, peak_tflops * 1e12, bandwidth_tbs * 1e12) * 1e3
    return (f"intensity {intensity:.3g} FLOP/byte &rarr; at most <b>{rate:.3g} TFLOP/s</b> "
            f"({100 * rate / peak_tflops:.3g}% of peak), <b>{kind}-bound</b> "
            f"(ridge point {ridge:.3g} FLOP/byte). An op moving 1 GB at this intensity needs "
            f"&ge; {ms:.3g} ms.")


def roofline_widget(bandwidth_tbs: float = H100_SXM["bandwidth_tbs"],
                    peak_tflops: float = H100_SXM["bf16_tflops"], intensity: float = 1 / 12):
    """Sliders for bandwidth (TB/s), peak (TFLOP/s) and arithmetic intensity (FLOP/byte).

    Returns an ipywidgets.VBox with extra attributes `bandwidth_slider`, `peak_slider`,
    `intensity_slider`, `summary`, `image` (the drawing) and `redraws`.
    """
    import ipywidgets as widgets

    style = {"description_width": "170px"}
    layout = widgets.Layout(width="520px")
    bw = widgets.FloatSlider(value=bandwidth_tbs, min=0.1, max=8.0, step=0.05,
                             description="bandwidth (TB/s)", style=style, layout=layout,
                             continuous_update=False)
    peak = widgets.FloatLogSlider(value=peak_tflops, base=10, min=0, max=math.log10(3000),
                                  step=0.01, description="peak (TFLOP/s)", style=style,
                                  layout=layout, continuous_update=False)
    ai = widgets.FloatLogSlider(value=intensity, base=2, min=-5, max=14, step=0.1,
                                description="intensity (FLOP/byte)", style=style, layout=layout,
                                continuous_update=False)
    summary = widgets.HTML()
    image = figure_image()
    box = widgets.VBox([bw, peak, ai, summary, image])
    box.bandwidth_slider, box.peak_slider, box.intensity_slider = bw, peak, ai
    box.summary, box.image, box.redraws = summary, image, 0

    def redraw(_change=None):
        fig, _ = plot_roofline(bw.value, peak.value, ops=[("your op", ai.value)],
                               label="peak")
        summary.value = _roofline_summary(bw.value, peak.value, ai.value)
        show_in(image, fig)
        box.redraws += 1

    for slider in (bw, peak, ai):
        slider.observe(redraw, names="value")
    redraw()
    return box


# --------------------------------------------------------------------------------------------
# GELU's tail for the bias + GELU kernel
# --------------------------------------------------------------------------------------------
#
# GELU(u) = u * Phi(u), with Phi the normal distribution function, and Phi(u) = 1 - Phi(-u): a kernel
# needs only the tail Phi(-|u|) = erfc(|u| / sqrt 2) / 2. Numerical Recipes (2nd ed., section 6.2,
# erfcc) writes erfc(z) as t * exp(P(t) - z^2) with t = 1 / (1 + z / 2): the exp carries the Gaussian
# decay, and what is left is a smooth function of t in (0, 1]. The course fits that rest itself, in
# base 2 and with the 1/2 folded in, so that the kernel needs one exp2 and no extra multiplies:
#     Phi(-|u|) = t * 2^(Q(t) - u^2 * log2(e) / 2),   t = 1 / (1 + |u| / (2 sqrt 2)).

GELU_TAIL_RANGE = 13.0   # |u| beyond this: Phi(-|u|) < 1e-38, below float32's normal numbers anyway


def gelu_tail_fit(degree: int = 7, u_max: float = GELU_TAIL_RANGE, points: int = 4000) -> list:
    """Q's coefficients, highest power first: least squares at Chebyshev points of t over |u| <= u_max
    (nearly the best fit in the largest error), of Q(t) = log2(Phi(-|u|) / t) + u^2 log2(e) / 2."""
    t_min = 1.0 / (1.0 + u_max / (2.0 * math.sqrt(2.0)))
    k = np.arange(points)
    t = (t_min + 1.0) / 2.0 + (1.0 - t_min) / 2.0 * np.cos(np.pi * (k + 0.5) / points)
    u = 2.0 * math.sqrt(2.0) * (1.0 / t - 1.0)
    tail = np.array([math.erfc(v / math.sqrt(2.0)) / 2.0 for v in u])
    q = np.log2(tail / t) + u * u / (2.0 * math.log(2.0))
    return [float(c) for c in np.polyfit(t, q, degree)]


def gelu_tail(u, coefficients) -> np.ndarray:
    """Phi(-|u|) from the fit, in float64 (to measure the fit's own error, apart from float32's)."""
    a = np.abs(np.asarray(u, dtype=np.float64))
    t = 1.0 / (1.0 + a / (2.0 * math.sqrt(2.0)))
    return t * np.exp2(np.polyval(coefficients, t) - a * a / (2.0 * math.log(2.0)))
