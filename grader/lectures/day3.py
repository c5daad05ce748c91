"""Drawings, a widget and small helpers for the Day 3 lecture notebooks (matrix multiplication).

Nothing here is graded. The functions live in a module so that the notebooks stay short and the
logic behind the pictures is unit-tested (tests/test_lecture_day3.py).

Three topics:

* what one program of a tiled matmul reads: `draw_tile_walk` (A's row panel, B's column panel and
  the BLOCK_K-wide slice of each that one iteration of the K loop loads);
* software pipelining of the K loop (`num_stages`): `pipeline_schedule` (when each step's loads and
  its matrix product run, in a simple timing model) and `draw_pipeline`;
* the order in which the programs of a matmul run, and what that means for the L2 cache:
  `grouped_pid` (the index arithmetic a kernel does), `program_order` (the whole launch order),
  `panels_touched` (the A row-panels and B column-panels one wave of programs in flight needs),
  `panel_loads` (those counts summed over all waves), `draw_program_order` and
  `program_order_widget` (sliders for GROUP_M, programs in flight and the wave shown).

The L2 model behind `panel_loads` is deliberately simple: programs run in waves of `in_flight`
programs, in launch order; within a wave every panel that some program needs is loaded from memory
once and then found in L2; between waves nothing is kept. Real hardware overlaps waves and keeps
some panels for longer, but the comparison between orders comes out the same way.
"""
from __future__ import annotations

import matplotlib.pyplot as plt

from grader.lectures.drawing import figure_image, show_in
from matplotlib.patches import Rectangle

IN_FLIGHT_COLOR = "tab:orange"
DONE_COLOR = "0.82"
PANEL_COLOR = "tab:orange"


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# --------------------------------------------------------------------------------------------
# What one program of a tiled matmul reads
# --------------------------------------------------------------------------------------------

def draw_tile_walk(M: int, N: int, K: int, block_m: int, block_n: int, block_k: int,
                   pid_m: int = 0, pid_n: int = 0, k_iter: int = 0, ax=None):
    """Draw C = A @ B with the tile of program (pid_m, pid_n) and what iteration `k_iter` loads.

    The layout is the usual one for a matrix product: B (K x N) on top, A (M x K) on the left, C
    (M x N) below B and right of A, so that a row of A and a column of B meet at an element of C.
    Light orange: the whole row panel of A and column panel of B the program walks along; dark
    orange: the BLOCK_M x BLOCK_K and BLOCK_K x BLOCK_N blocks loaded in iteration `k_iter`; the
    C tile the program owns is outlined. Parts of a block that fall outside a matrix (the mask is
    False there) are drawn hatched. Returns (fig, ax).
    """
    for name, v in (("M", M), ("N", N), ("K", K), ("block_m", block_m), ("block_n", block_n),
                    ("block_k", block_k)):
        if v < 1:
            raise ValueError(f"{name} must be positive")
    n_m, n_n, n_k = _cdiv(M, block_m), _cdiv(N, block_n), _cdiv(K, block_k)
    if not (0 <= pid_m < n_m and 0 <= pid_n < n_n and 0 <= k_iter < n_k):
        raise ValueError(f"pid_m < {n_m}, pid_n < {n_n} and k_iter < {n_k} are required")
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.5, 6.5 * (K + M) / (K + N) if K + N else 6.5))
    else:
        fig = ax.figure
    # Leave room between the matrices for blocks that hang over an edge (drawn hatched).
    overhang = max(n_m * block_m - M, n_n * block_n - N, n_k * block_k - K)
    gap = max(0.04 * max(M, N, K), overhang + 0.02 * max(M, N, K))
    # Coordinates: x to the right, y downwards (the axis is inverted at the end).
    ax_a = (0.0, K + gap)                 # top-left corner of A: x, y
    ax_b = (K + gap, 0.0)                 # top-left corner of B
    ax_c = (K + gap, K + gap)             # top-left corner of C

    def grid(origin, rows, cols, brow, bcol, label):
        x0, y0 = origin
        ax.add_patch(Rectangle((x0, y0), cols, rows, fill=False, edgecolor="black", lw=1.2))
        for r in range(brow, rows, brow):
            ax.plot([x0, x0 + cols], [y0 + r, y0 + r], color="0.75", lw=0.5)
        for c in range(bcol, cols, bcol):
            ax.plot([x0 + c, x0 + c], [y0, y0 + rows], color="0.75", lw=0.5)
        ax.text(x0 + cols / 2, y0 + rows / 2, label, ha="center", va="center", fontsize=13,
                color="0.35", zorder=5)

    def block(origin, row0, col0, rows, cols, max_rows, max_cols, color, alpha, hatch_out=True):
        """A block of a matrix; the part past its edge drawn hatched, outside the matrix."""
        x0, y0 = origin
        in_rows = max(0, min(rows, max_rows - row0))
        in_cols = max(0, min(cols, max_cols - col0))
        if in_rows and in_cols:
            ax.add_patch(Rectangle((x0 + col0, y0 + row0), in_cols, in_rows, facecolor=color,
                                   alpha=alpha, edgecolor="none"))
        if hatch_out and (in_rows < rows or in_cols < cols):
            # The parts past the right edge and past the bottom edge, hatched; the whole block
            # outlined.
            outside = [(col0 + in_cols, row0, cols - in_cols, rows),
                       (col0, row0 + in_rows, in_cols, rows - in_rows)]
            for x, y, w, h in outside:
                if w > 0 and h > 0:
                    ax.add_patch(Rectangle((x0 + x, y0 + y), w, h, fill=False,
                                           edgecolor="tab:red", hatch="///", lw=0.0))
            ax.add_patch(Rectangle((x0 + col0, y0 + row0), cols, rows, fill=False,
                                   edgecolor="tab:red", lw=0.8, ls="--"))

    grid(ax_a, M, K, block_m, block_k, "A")
    grid(ax_b, K, N, block_k, block_n, "B")
    grid(ax_c, M, N, block_m, block_n, "C")
    r0, c0, k0 = pid_m * block_m, pid_n * block_n, k_iter * block_k
    # The whole panels this program walks along (light), then this iteration's blocks (dark).
    block(ax_a, r0, 0, block_m, n_k * block_k, M, K, PANEL_COLOR, 0.25, hatch_out=False)
    block(ax_b, 0, c0, n_k * block_k, block_n, K, N, PANEL_COLOR, 0.25, hatch_out=False)
    block(ax_a, r0, k0, block_m, block_k, M, K, PANEL_COLOR, 0.85)
    block(ax_b, k0, c0, block_k, block_n, K, N, PANEL_COLOR, 0.85)
    block(ax_c, r0, c0, block_m, block_n, M, N, "tab:blue", 0.45 + 0.5 * (k_iter + 1) / n_k)
    x, y = ax_c
    ax.add_patch(Rectangle((x + c0, y + r0), block_n, block_m, fill=False, edgecolor="tab:blue",
                           lw=2))
    ax.set_xlim(-0.02 * max(M, N, K), K + gap + N + gap)
    ax.set_ylim(K + gap + M + gap, -0.02 * max(M, N, K))
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_title(f"program (pid_m={pid_m}, pid_n={pid_n}), K-loop iteration {k_iter} of {n_k}\n"
                 f"M={M}, N={N}, K={K}; blocks {block_m} x {block_n} x {block_k}; "
                 f"hatched: masked off", fontsize=9)
    return fig, ax


# --------------------------------------------------------------------------------------------
# Program order and the L2 cache
# --------------------------------------------------------------------------------------------

def grouped_pid(pid: int, num_pid_m: int, num_pid_n: int, group_m: int) -> tuple[int, int]:
    """The C tile (pid_m, pid_n) that program `pid` of a 1-D launch computes, in grouped order.

    The same integer arithmetic as in the kernel: programs go down a group of `group_m` tile rows
    column by column, then on to the next group. The last group may have fewer rows.
    `group_m = 1` gives row-major order: pid_m = pid // num_pid_n, pid_n = pid % num_pid_n.
    """
    if not 0 <= pid < num_pid_m * num_pid_n:
        raise ValueError(f"pid must be in [0, {num_pid_m * num_pid_n})")
    per_group = group_m * num_pid_n                 # programs in one group of group_m tile rows
    top_row = (pid // per_group) * group_m          # the group's first tile row
    rows_here = min(num_pid_m - top_row, group_m)   # the last group may have fewer rows
    place = pid % per_group                         # this program's place within its group:
    pid_m = top_row + place % rows_here             # down the group's rows first,
    pid_n = place // rows_here                      # then on to the next column
    return pid_m, pid_n


def program_order(num_pid_m: int, num_pid_n: int, group_m: int = 1) -> list[tuple[int, int]]:
    """The (pid_m, pid_n) tile of every program, in launch order (pid = 0, 1, 2, ...).

    group_m = 1 is row-major order; larger values give the grouped ("super-grouping") order.
    """
    if num_pid_m < 1 or num_pid_n < 1 or group_m < 1:
        raise ValueError("num_pid_m, num_pid_n and group_m must be positive")
    return [grouped_pid(pid, num_pid_m, num_pid_n, group_m)
            for pid in range(num_pid_m * num_pid_n)]


def panels_touched(order, in_flight: int, step: int = 0) -> dict:
    """What wave `step` of programs needs: programs step*in_flight ... (step+1)*in_flight - 1.

    Returns a dict with
      tiles:     the (pid_m, pid_n) tiles of that wave, in launch order,
      a_panels:  the sorted distinct pid_m: the row panels of A those programs read,
      b_panels:  the sorted distinct pid_n: the column panels of B they read,
      n_panels:  len(a_panels) + len(b_panels), the panels that must be in L2 at once.
    """
    order = list(order)
    if in_flight < 1:
        raise ValueError("in_flight must be positive")
    waves = _cdiv(len(order), in_flight)
    if not 0 <= step < waves:
        raise ValueError(f"step must be in [0, {waves})")
    tiles = order[step * in_flight:(step + 1) * in_flight]
    a_panels = sorted({m for m, _ in tiles})
    b_panels = sorted({n for _, n in tiles})
    return {"tiles": tiles, "a_panels": a_panels, "b_panels": b_panels,
            "n_panels": len(a_panels) + len(b_panels)}


def panel_loads(order, in_flight: int) -> dict:
    """Panels loaded from memory over the whole launch, in the wave model of this module.

    Returns a dict with
      waves:     how many waves of `in_flight` programs the launch takes,
      per_wave:  a list of (A panels, B panels) per wave,
      a_loads, b_loads, total:  the sums over all waves.
    """
    order = list(order)
    waves = _cdiv(len(order), in_flight) if in_flight >= 1 else 0
    per_wave = []
    for step in range(waves):
        t = panels_touched(order, in_flight, step)
        per_wave.append((len(t["a_panels"]), len(t["b_panels"])))
    a = sum(p[0] for p in per_wave)
    b = sum(p[1] for p in per_wave)
    return {"waves": waves, "per_wave": per_wave, "a_loads": a, "b_loads": b, "total": a + b}


def draw_program_order(num_pid_m: int, num_pid_n: int, group_m: int = 1, in_flight: int = 8,
                       step: int = 0, ax=None, annotate: bool | None = None):
    """Draw the launch order of a matmul's programs and what one wave of them needs from L2.

    C's tiles carry their launch index `pid`; tiles of waves already finished are grey, the tiles
    of wave `step` (the programs in flight) orange. On the left, A's row panels, on top, B's column
    panels: those that the wave reads are orange. Returns (fig, ax).
    """
    order = program_order(num_pid_m, num_pid_n, group_m)
    t = panels_touched(order, in_flight, step)
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.5, 5.5 * (num_pid_m + 2.5) / (num_pid_n + 2.5)))
    else:
        fig = ax.figure
    if annotate is None:
        annotate = num_pid_m <= 16 and num_pid_n <= 16
    depth, gap = 1.6, 0.4                          # how deep (along K) the panels are drawn
    pid_of = {tile: pid for pid, tile in enumerate(order)}
    first, last = step * in_flight, min(len(order), (step + 1) * in_flight)
    a_set, b_set = set(t["a_panels"]), set(t["b_panels"])
    for m in range(num_pid_m):
        for n in range(num_pid_n):
            pid = pid_of[(m, n)]
            color = IN_FLIGHT_COLOR if first <= pid < last else DONE_COLOR if pid < first \
                else "white"
            ax.add_patch(Rectangle((n, m), 1, 1, facecolor=color, edgecolor="0.55", lw=0.6))
            if annotate:
                ax.text(n + 0.5, m + 0.5, str(pid), ha="center", va="center",
                        fontsize=8 if max(num_pid_m, num_pid_n) <= 12 else 6,
                        color="black" if pid >= first else "0.45")
    for m in range(num_pid_m):                     # A's row panels, left of C
        ax.add_patch(Rectangle((-gap - depth, m), depth, 1,
                               facecolor=PANEL_COLOR if m in a_set else "white",
                               edgecolor="0.55", lw=0.6))
    for n in range(num_pid_n):                     # B's column panels, above C
        ax.add_patch(Rectangle((n, -gap - depth), 1, depth,
                               facecolor=PANEL_COLOR if n in b_set else "white",
                               edgecolor="0.55", lw=0.6))
    ax.text(-gap - depth / 2, -gap - depth / 2, "A rows\n\u2193\nB cols \u2192", ha="center",
            va="center", fontsize=7, color="0.35")
    ax.set_xlim(-gap - depth - 0.1, num_pid_n + 0.1)
    ax.set_ylim(num_pid_m + 0.1, -gap - depth - 0.1)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    name = "row-major" if group_m == 1 else f"grouped, GROUP_M = {group_m}"
    ax.set_title(f"{name}: wave {step} (programs {first}\u2013{last - 1})\n"
                 f"needs {len(a_set)} A panels + {len(b_set)} B panels = {t['n_panels']}",
                 fontsize=9)
    return fig, ax


def _order_summary(num_pid_m, num_pid_n, group_m, in_flight) -> str:
    rows = []
    for g in dict.fromkeys((1, group_m)):
        loads = panel_loads(program_order(num_pid_m, num_pid_n, g), in_flight)
        name = "row-major" if g == 1 else f"GROUP_M = {g}"
        rows.append(f"<b>{name}</b>: {loads['a_loads']} A + {loads['b_loads']} B = "
                    f"<b>{loads['total']}</b> panel loads")
    lower = num_pid_m + num_pid_n
    return (f"Whole launch ({num_pid_m} x {num_pid_n} tiles, {in_flight} programs in flight, "
            f"{_cdiv(num_pid_m * num_pid_n, in_flight)} waves): " + "; ".join(rows) +
            f". The minimum, every panel loaded once, is {lower}.")


def program_order_widget(num_pid_m: int = 12, num_pid_n: int = 12, group_m: int = 4,
                         in_flight: int = 12):
    """Row-major order next to grouped order, with sliders for GROUP_M, programs in flight and
    the wave shown.

    Returns an ipywidgets.VBox with extra attributes `group_slider`, `in_flight_slider`,
    `step_slider`, `summary` (HTML), `image` (the drawing) and `redraws` (how many drawings so far).
    """
    import ipywidgets as widgets

    total = num_pid_m * num_pid_n
    style = {"description_width": "150px"}
    layout = widgets.Layout(width="430px")
    group = widgets.IntSlider(value=group_m, min=1, max=num_pid_m, description="GROUP_M",
                              style=style, layout=layout, continuous_update=False)
    flight = widgets.IntSlider(value=in_flight, min=1, max=total,
                               description="programs in flight", style=style, layout=layout,
                               continuous_update=False)
    step = widgets.IntSlider(value=0, min=0, max=_cdiv(total, in_flight) - 1,
                             description="wave (step)", style=style, layout=layout,
                             continuous_update=False)
    summary = widgets.HTML()
    image = figure_image()
    box = widgets.VBox([group, flight, step, summary, image])
    box.group_slider, box.in_flight_slider, box.step_slider = group, flight, step
    box.summary, box.image, box.redraws = summary, image, 0
    box._busy = False

    def redraw(_change=None):
        if box._busy:
            return
        fig, axes = plt.subplots(1, 2, figsize=(11, 5.6 * (num_pid_m + 2.5) / (num_pid_n + 2.5)))
        draw_program_order(num_pid_m, num_pid_n, 1, flight.value, step.value, ax=axes[0])
        draw_program_order(num_pid_m, num_pid_n, group.value, flight.value, step.value,
                           ax=axes[1])
        fig.tight_layout()
        summary.value = _order_summary(num_pid_m, num_pid_n, group.value, flight.value)
        show_in(image, fig)
        box.redraws += 1

    def in_flight_changed(_change=None):
        # The number of waves changes with the programs in flight: adjust the step slider first,
        # without drawing twice.
        box._busy = True
        step.max = _cdiv(total, flight.value) - 1
        step.value = min(step.value, step.max)
        box._busy = False
        redraw()

    group.observe(redraw, names="value")
    step.observe(redraw, names="value")
    flight.observe(in_flight_changed, names="value")
    redraw()
    return box


# --------------------------------------------------------------------------------------------
# Software pipelining of the K loop
# --------------------------------------------------------------------------------------------

def pipeline_schedule(n_steps: int, num_stages: int, t_load: float, t_compute: float) -> dict:
    """When the loads and the products of a K loop run, with `num_stages` buffers per operand.

    The model: a step's load (its blocks of A and B) takes `t_load` from issue to arrival, and
    several loads may be in flight at once; its product takes `t_compute` on the tensor cores, one
    product at a time. The load of step i needs a free buffer: with S buffers, buffer i % S is free
    once the product of step i - S is done. So num_stages = 1 means: load, compute, load, compute,
    with no overlap. The product of step i starts when its data has arrived and the product of step
    i - 1 is done. Loads are issued in order.

    Returns a dict with `loads` and `computes` (lists of (start, end)), `total` (the end of the
    last product) and `busy` (the fraction of `total` the tensor cores work).
    """
    if n_steps < 1 or num_stages < 1 or t_load < 0 or t_compute <= 0:
        raise ValueError("n_steps and num_stages must be positive, t_load >= 0, t_compute > 0")
    loads, computes = [], []
    for i in range(n_steps):
        start = 0.0
        if i >= num_stages:
            start = computes[i - num_stages][1]          # wait for a free buffer
        if i:
            start = max(start, loads[i - 1][0])          # issue in order
        loads.append((start, start + t_load))
        begin = max(loads[i][1], computes[i - 1][1] if i else 0.0)
        computes.append((begin, begin + t_compute))
    total = computes[-1][1]
    return {"loads": loads, "computes": computes, "total": total,
            "busy": n_steps * t_compute / total}


def draw_pipeline(n_steps: int = 8, stages=(1, 2, 3, 4), t_load: float = 3.0,
                  t_compute: float = 1.0, axes=None):
    """One timeline per value of num_stages: loads in flight (top lanes) and the tensor cores'
    products (bottom lane), each box labelled with its step of the K loop. Returns (fig, axes)."""
    stages = list(stages)
    if axes is None:
        fig, axes = plt.subplots(len(stages), 1, figsize=(10, 1.0 + 1.25 * len(stages)),
                                 sharex=True, squeeze=False)
        axes = axes[:, 0]
    else:
        fig = axes[0].figure
    colors = plt.get_cmap("tab10")
    longest = max(pipeline_schedule(n_steps, s, t_load, t_compute)["total"] for s in stages)
    for ax, s in zip(axes, stages):
        sched = pipeline_schedule(n_steps, s, t_load, t_compute)
        # Loads that overlap in time go on separate lanes, so that each box stays visible.
        lane_free, lanes = [], []
        for start, end in sched["loads"]:
            for j, free_at in enumerate(lane_free):
                if free_at <= start + 1e-9:
                    lane_free[j] = end
                    lanes.append(j)
                    break
            else:
                lane_free.append(end)
                lanes.append(len(lane_free) - 1)
        n_lanes = max(lanes) + 1
        height = 0.8 / n_lanes
        for i, ((start, end), lane) in enumerate(zip(sched["loads"], lanes)):
            y = 1.1 + lane * height
            ax.add_patch(Rectangle((start, y), end - start, height * 0.9, facecolor=colors(i % 10),
                                   alpha=0.45, edgecolor="0.3", lw=0.5))
            ax.text((start + end) / 2, y + height * 0.45, f"load {i}", ha="center", va="center",
                    fontsize=7)
        for i, (start, end) in enumerate(sched["computes"]):
            ax.add_patch(Rectangle((start, 0.1), end - start, 0.8, facecolor=colors(i % 10),
                                   edgecolor="0.3", lw=0.5))
            ax.text((start + end) / 2, 0.5, str(i), ha="center", va="center", fontsize=8)
        ax.set_yticks([0.5, 1.5])
        ax.set_yticklabels(["tensor cores", "loads in flight"], fontsize=8)
        ax.set_ylim(0, 2.0)
        ax.set_xlim(0, longest * 1.02)
        ax.set_title(f"num_stages = {s}: {sched['total']:g} time units, tensor cores busy "
                     f"{100 * sched['busy']:.0f}% of the time", fontsize=9, loc="left")
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    axes[-1].set_xlabel(f"time (one product = {t_compute:g} unit, one load = {t_load:g} units "
                        f"from issue to arrival)")
    fig.tight_layout()
    return fig, axes
