"""Helpers, a drawing and a widget for the Day 4 lecture notebooks (attention).

Nothing here is graded. The functions live in a module so that the notebooks stay short and the
logic behind the pictures is unit-tested (tests/test_lecture_day4.py).

Two topics:

* which tiles of the score matrix S = Q K^T a FlashAttention-style forward pass visits:
  `tile_kind` and `tile_schedule` (with a causal mask, tiles entirely above the diagonal are skipped
  and tiles crossing it need an element mask);
* the blockwise forward itself, in NumPy and float64, recording its running state:
  `blockwise_attention` (output plus, for every tile it computes, the running max m and running
  sum l of each query row before and after the tile), checked against `attention_np`;
  `draw_tile_sweep` and `tile_sweep_widget` (sliders over the Q tile, the K/V step and a query row).

Conventions. Inputs are 2-D: q (n_q, d), k (n_k, d), v (n_k, d_v): one head of one batch element.
Scores are s_ij = scale * q_i . k_j with scale = 1/sqrt(d) unless given. The causal mask is aligned
at the top left, as `torch.nn.functional.scaled_dot_product_attention(..., is_causal=True)`: query
i sees the keys j <= i. Tiles are numbered (i, j): rows i*block_q ... of S, columns j*block_k ....
"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch, Rectangle

from grader.lectures.drawing import figure_image, show_in

FULL, DIAGONAL, SKIP = "full", "diagonal", "skip"


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _as_2d_float64(x, name: str) -> np.ndarray:
    if hasattr(x, "detach"):                       # a torch tensor, possibly on a GPU
        x = x.detach().cpu().double().numpy()
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D (rows, features), got shape {x.shape}")
    return x


# --------------------------------------------------------------------------------------------
# Which tiles a causal forward pass visits
# --------------------------------------------------------------------------------------------

def tile_kind(i: int, j: int, n_q: int, n_k: int, block_q: int, block_k: int,
              causal: bool = False) -> str:
    """'full', 'diagonal' or 'skip' for tile (i, j) of the n_q x n_k score matrix.

    Without a causal mask every tile is 'full'. With it (query r sees keys c <= r):
      'skip':     every key of the tile lies after every query of it: the smallest column is larger
                  than the largest row, so the whole tile would be masked and is never loaded;
      'full':     every key lies at or before every query (largest column <= smallest row): no
                  element is masked;
      'diagonal': the rest, tiles the diagonal passes through: they are computed with an element
                  mask (column > row -> score -inf).
    Only rows < n_q and columns < n_k count (the last tiles may be ragged).
    """
    row_lo, row_hi = i * block_q, min((i + 1) * block_q, n_q) - 1
    col_lo, col_hi = j * block_k, min((j + 1) * block_k, n_k) - 1
    if row_lo > row_hi or col_lo > col_hi:
        raise ValueError(f"tile ({i}, {j}) lies outside the {n_q} x {n_k} matrix")
    if not causal:
        return FULL
    if col_lo > row_hi:
        return SKIP
    if col_hi <= row_lo:
        return FULL
    return DIAGONAL


def tile_schedule(n_q: int, n_k: int, block_q: int, block_k: int, causal: bool = False) -> dict:
    """The tiles one forward pass visits, in the order its programs walk them.

    One program per Q tile i (the outer loop, in parallel on a GPU); each walks the K/V tiles
    j = 0, 1, ... in order and stops before the first tile that is entirely above the diagonal.
    Returns a dict with
      n_q_tiles, n_k_tiles: cdiv(n_q, block_q), cdiv(n_k, block_k);
      kinds:      an (n_q_tiles, n_k_tiles) array of 'full' / 'diagonal' / 'skip';
      steps:      [(i, j, kind), ...] for every tile computed, program by program;
      n_tiles:    n_q_tiles * n_k_tiles;
      n_computed, n_skipped, n_diagonal, n_full: counts;
      skipped_fraction: n_skipped / n_tiles.
    """
    for name, value in (("n_q", n_q), ("n_k", n_k), ("block_q", block_q), ("block_k", block_k)):
        if value < 1:
            raise ValueError(f"{name} must be positive")
    nqt, nkt = _cdiv(n_q, block_q), _cdiv(n_k, block_k)
    kinds = np.empty((nqt, nkt), dtype=object)
    steps = []
    for i in range(nqt):
        for j in range(nkt):
            kinds[i, j] = tile_kind(i, j, n_q, n_k, block_q, block_k, causal)
            if kinds[i, j] != SKIP:
                steps.append((i, j, kinds[i, j]))
    n_skipped = int((kinds == SKIP).sum())
    return {"n_q_tiles": nqt, "n_k_tiles": nkt, "kinds": kinds, "steps": steps,
            "n_tiles": nqt * nkt, "n_computed": len(steps), "n_skipped": n_skipped,
            "n_diagonal": int((kinds == DIAGONAL).sum()), "n_full": int((kinds == FULL).sum()),
            "skipped_fraction": n_skipped / (nqt * nkt)}


# --------------------------------------------------------------------------------------------
# Attention: the reference and the blockwise (FlashAttention-style) forward
# --------------------------------------------------------------------------------------------

def scores_np(q, k, causal: bool = False, scale: float | None = None) -> np.ndarray:
    """The score matrix scale * q k^T in float64, with -inf where the causal mask hides a key."""
    q, k = _as_2d_float64(q, "q"), _as_2d_float64(k, "k")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[1])
    s = scale * (q @ k.T)
    if causal:
        rows, cols = np.arange(q.shape[0])[:, None], np.arange(k.shape[0])[None, :]
        s = np.where(cols > rows, -np.inf, s)
    return s


def attention_np(q, k, v, causal: bool = False, scale: float | None = None) -> np.ndarray:
    """Reference attention softmax(scale * q k^T [masked]) v, the whole score matrix at once."""
    s = scores_np(q, k, causal, scale)
    v = _as_2d_float64(v, "v")
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


def blockwise_attention(q, k, v, block_k: int, causal: bool = False, block_q: int | None = None,
                        scale: float | None = None):
    """The FlashAttention forward in NumPy (float64): Q in tiles, K and V streamed in tiles.

    For each Q tile (rows r0:r1) the state is, per query row, the running max m, the running sum
    l = sum over the keys seen of exp(s - m), and the unnormalised output acc = sum of
    exp(s - m) * v. For each K/V tile (columns c0:c1) that the schedule computes:
        m_new = max(m, rowmax(S_tile));  alpha = exp(m - m_new);  P = exp(S_tile - m_new)
        l = alpha * l + rowsum(P);  acc = alpha * acc + P @ V_tile;  m = m_new.
    At the end of the Q tile, out = acc / l. Tiles entirely above the causal diagonal are skipped.

    Returns (out, history): out is (n_q, d_v); history has one dict per computed tile, in schedule
    order, with keys q_tile, k_tile, kind, rows (r0, r1), cols (c0, c1), and arrays over the rows
    of the Q tile: m_old, l_old, m, l, alpha, and acc (rows x d_v) after the update. Before a Q
    tile's first K/V tile m = -inf and l = 0. The log-sum-exp of row r is m + log(l) at the end.
    """
    q, k, v = _as_2d_float64(q, "q"), _as_2d_float64(k, "k"), _as_2d_float64(v, "v")
    n_q, d = q.shape
    n_k = k.shape[0]
    if k.shape[1] != d or v.shape[0] != n_k:
        raise ValueError(f"shapes do not fit: q {q.shape}, k {k.shape}, v {v.shape}")
    if block_q is None:
        block_q = n_q
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    sched = tile_schedule(n_q, n_k, block_q, block_k, causal)
    out = np.zeros((n_q, v.shape[1]))
    history = []
    state = {}
    for i, j, kind in sched["steps"]:
        r0, r1 = i * block_q, min((i + 1) * block_q, n_q)
        c0, c1 = j * block_k, min((j + 1) * block_k, n_k)
        if i not in state:                                   # a new program starts
            state = {i: (np.full(r1 - r0, -np.inf), np.zeros(r1 - r0),
                         np.zeros((r1 - r0, v.shape[1])))}
        m, l, acc = state[i]
        s = scale * (q[r0:r1] @ k[c0:c1].T)
        if kind == DIAGONAL:
            rows, cols = np.arange(r0, r1)[:, None], np.arange(c0, c1)[None, :]
            s = np.where(cols > rows, -np.inf, s)
        m_new = np.maximum(m, s.max(axis=1))
        # A row whose every score so far is -inf has m_new = -inf; subtract 0 there instead, so
        # that exp(-inf - (-inf)) = NaN never appears: its P and alpha come out 0, l and acc stay 0.
        m_safe = np.where(np.isneginf(m_new), 0.0, m_new)
        alpha = np.exp(m - m_safe)
        p = np.exp(s - m_safe[:, None])
        l_new = alpha * l + p.sum(axis=1)
        acc_new = alpha[:, None] * acc + p @ v[c0:c1]
        history.append({"q_tile": i, "k_tile": j, "kind": kind, "rows": (r0, r1), "cols": (c0, c1),
                        "m_old": m, "l_old": l, "m": m_new, "l": l_new, "alpha": alpha,
                        "acc": acc_new})
        state[i] = (m_new, l_new, acc_new)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[r0:r1] = acc_new / l_new[:, None]           # final once the last tile is done
    return out, history


def final_logsumexp(history, n_q: int) -> np.ndarray:
    """log(sum_j exp(s_ij)) for every row, from the last (m, l) of each Q tile: m + log(l)."""
    lse = np.full(n_q, np.nan)
    for h in history:                                       # later steps overwrite earlier ones
        r0, r1 = h["rows"]
        with np.errstate(divide="ignore"):
            lse[r0:r1] = h["m"] + np.log(h["l"])
    return lse


# --------------------------------------------------------------------------------------------
# Drawing one step of the sweep
# --------------------------------------------------------------------------------------------

# Element states of the score-matrix picture, and their colours.
_OTHER, _DONE, _CURRENT, _TODO, _MASKED, _SKIPPED, _OUTSIDE = range(7)
_STATE_COLORS = ["#f4f4f4", "#9ecae1", "#fd8d3c", "#ffffff", "#bdbdbd", "#d9d9d9", "#ffffff"]
_STATE_LABELS = ["other programs' tiles", "tiles done", "tile loaded now", "tiles still to come",
                 "masked element (key after query)", "tile skipped (above the diagonal)"]


def demo_qkv(n_q: int = 48, n_k: int = 48, d: int = 8, seed: int = 0):
    """Random q, k, v (float64) with one 'attractive' key at 2/3 of the sequence.

    Key j* = 2 n_k / 3 points along the mean query direction, so for most rows its score is the
    largest and the running max jumps when its tile arrives (for causal rows that can see it).
    """
    rng = np.random.default_rng(seed)
    q = rng.normal(0.0, 1.0, (n_q, d)) + 0.6
    k = rng.normal(0.0, 1.0, (n_k, d))
    v = rng.normal(0.0, 1.0, (n_k, d))
    j_star = (2 * n_k) // 3
    direction = q.mean(axis=0)
    k[j_star] = 3.0 * direction / np.linalg.norm(direction) * math.sqrt(d)
    return q, k, v


def sweep_state(history, q_tile: int, k_step: int):
    """The history entry holding program `q_tile`'s state after K/V tile `k_step` (or the last
    computed tile before it, if `k_step` is skipped), and whether `k_step` itself was computed."""
    mine = [h for h in history if h["q_tile"] == q_tile]
    done = [h for h in mine if h["k_tile"] <= k_step]
    computed = any(h["k_tile"] == k_step for h in mine)
    return (done[-1] if done else None), computed


def draw_tile_sweep(q, k, v, block_q: int, block_k: int, causal: bool, q_tile: int, k_step: int,
                    row: int = 0, axes=None):
    """Three panels for one step of the blockwise forward.

    Left: the score matrix in tiles. Program `q_tile` owns one row of tiles; tiles it has done are
    blue, the K/V tile it loads at step `k_step` orange, tiles still to come white; other programs'
    tiles are pale grey, tiles skipped by the causal mask grey and hatched, masked elements of
    diagonal tiles mid-grey. The strips outside the matrix mark the Q tile (left) and the K/V tile
    (top) being loaded. A red line marks query row `row` (counted within the Q tile).
    Top right: that row's scores, coloured seen / current / not yet, with its running max m.
    Bottom right: that row's partial output acc / l against the true attention output.
    Returns (fig, axes).
    """
    q, k, v = _as_2d_float64(q, "q"), _as_2d_float64(k, "k"), _as_2d_float64(v, "v")
    n_q, n_k = q.shape[0], k.shape[0]
    sched = tile_schedule(n_q, n_k, block_q, block_k, causal)
    nqt, nkt = sched["n_q_tiles"], sched["n_k_tiles"]
    if not 0 <= q_tile < nqt:
        raise ValueError(f"q_tile must be in 0..{nqt - 1}")
    if not 0 <= k_step < nkt:
        raise ValueError(f"k_step must be in 0..{nkt - 1}")
    r0, r1 = q_tile * block_q, min((q_tile + 1) * block_q, n_q)
    if not 0 <= row < r1 - r0:
        raise ValueError(f"row must be in 0..{r1 - r0 - 1} for Q tile {q_tile}")
    _, history = blockwise_attention(q, k, v, block_k, causal, block_q)
    entry, computed = sweep_state(history, q_tile, k_step)
    c0, c1 = k_step * block_k, min((k_step + 1) * block_k, n_k)

    # --- the score matrix, one state per element
    state = np.full((n_q, n_k), _OTHER)
    rows_idx, cols_idx = np.arange(n_q)[:, None], np.arange(n_k)[None, :]
    tile_i, tile_j = rows_idx // block_q, cols_idx // block_k
    kinds = sched["kinds"]
    mine = np.broadcast_to(tile_i == q_tile, (n_q, n_k))
    state[mine & (tile_j < k_step)] = _DONE
    state[mine & (tile_j == k_step)] = _CURRENT
    state[mine & (tile_j > k_step)] = _TODO
    skipped = kinds[np.broadcast_to(tile_i, (n_q, n_k)), np.broadcast_to(tile_j, (n_q, n_k))] == SKIP
    state[skipped] = _SKIPPED
    if causal:
        state[(cols_idx > rows_idx) & ~skipped] = _MASKED

    if axes is None:
        fig = plt.figure(figsize=(13, 5.6))
        grid = fig.add_gridspec(2, 2, width_ratios=[1.05, 1.25])
        axes = [fig.add_subplot(grid[:, 0]), fig.add_subplot(grid[0, 1]),
                fig.add_subplot(grid[1, 1])]
    else:
        fig = axes[0].figure
    ax, ax_s, ax_o = axes
    ax.imshow(state, cmap=ListedColormap(_STATE_COLORS), vmin=0, vmax=len(_STATE_COLORS) - 1,
              interpolation="nearest", extent=(0, n_k, n_q, 0))
    for a in range(nqt):                                        # hatch over skipped tiles
        for b in range(nkt):
            if kinds[a, b] == SKIP:
                ax.add_patch(Rectangle((b * block_k, a * block_q),
                                       min(block_k, n_k - b * block_k),
                                       min(block_q, n_q - a * block_q), fill=False,
                                       hatch="//", edgecolor="0.55", lw=0))
    for a in range(nqt + 1):
        ax.axhline(min(a * block_q, n_q), color="0.35", lw=0.8)
    for b in range(nkt + 1):
        ax.axvline(min(b * block_k, n_k), color="0.35", lw=0.8)
    pad = max(1.5, 0.04 * max(n_q, n_k))
    strip = dict(facecolor=_STATE_COLORS[_CURRENT] if computed else _STATE_COLORS[_SKIPPED],
                 edgecolor="black", lw=1)
    ax.add_patch(Rectangle((-pad, r0), 0.7 * pad, r1 - r0, clip_on=False,
                           facecolor="tab:purple", edgecolor="black", lw=1))
    ax.add_patch(Rectangle((c0, -pad), c1 - c0, 0.7 * pad, clip_on=False, **strip))
    ax.text(-0.65 * pad, r0 - 0.2, "Q", ha="center", va="bottom", fontsize=8)
    ax.text(c1 + 0.3, -0.65 * pad, "K, V", ha="left", va="center", fontsize=8)
    ax.add_patch(Rectangle((c0, r0), c1 - c0, r1 - r0, fill=False, edgecolor="black", lw=2.2))
    qrow = r0 + row
    ax.plot([0, n_k], [qrow + 0.5, qrow + 0.5], color="tab:red", lw=1.4)
    ax.set_xlim(-pad, n_k)
    ax.set_ylim(n_q, -pad)
    ax.set_xlabel("key index j (a column of S; a row of K and V)")
    ax.set_ylabel("query index i (a row of S, Q and O)")
    ax.set_title(f"S = Q K$^T$: {n_q} x {n_k}, tiles of {block_q} x {block_k}"
                 f"{', causal' if causal else ''}\nprogram {q_tile}, K/V step {k_step}"
                 f"{'' if computed else ' (skipped: above the diagonal)'}", fontsize=9)
    used = [_OTHER, _DONE, _CURRENT, _TODO] + ([_MASKED, _SKIPPED] if causal else [])
    ax.legend(handles=[Patch(facecolor=_STATE_COLORS[s], edgecolor="0.5",
                             hatch="//" if s == _SKIPPED else None, label=_STATE_LABELS[s])
                       for s in used], fontsize=7, loc="upper center",
              bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)

    # --- one query row: its scores and running max
    s_row = scores_np(q, k, causal)[qrow]
    visible = np.isfinite(s_row)
    seen_to = c1 if computed else (entry["cols"][1] if entry is not None else 0)
    idx = np.arange(n_k)
    colors = np.where(idx < (c0 if computed else seen_to), "tab:blue",
                      np.where(idx < seen_to, "tab:orange", "0.8"))
    ax_s.bar(idx[visible], s_row[visible], color=colors[visible], width=0.8)
    if (~visible).any():
        ax_s.plot(idx[~visible], np.zeros((~visible).sum()), "x", color="0.5", ms=4,
                  label="masked (key after this query)")
    m_row = entry["m"][row] if entry is not None else -np.inf
    if np.isfinite(m_row):
        ax_s.axhline(m_row, color="tab:red", lw=1.5, label=f"running max m = {m_row:.3g}")
    ax_s.axhline(s_row[visible].max(), color="black", ls=":", lw=1,
                 label=f"true row max = {s_row[visible].max():.3g}")
    for b in range(1, nkt):
        ax_s.axvline(b * block_k - 0.5, color="0.6", lw=0.6)
    ax_s.set_xlim(-0.5, n_k - 0.5)
    ax_s.set_xlabel("key index j")
    ax_s.set_ylabel(r"score $s_{ij}$")
    ax_s.legend(fontsize=7, loc="lower left")
    ax_s.set_title(f"query row i = {qrow}: blue = seen, orange = this tile, grey = not yet",
                   fontsize=9)

    # --- that row's output so far against the true output
    true = attention_np(q, k, v, causal)[qrow]
    dims = np.arange(v.shape[1])
    ax_o.bar(dims, true, color="0.75", width=0.8, label="true output row O$_i$")
    if entry is not None:
        partial = entry["acc"][row] / entry["l"][row]
        ax_o.plot(dims, partial, "o", color="tab:red", ms=5,
                  label="acc / l after the tiles seen so far")
    ax_o.axhline(0, color="0.3", lw=0.6)
    ax_o.set_xlabel("output feature (column of V)")
    ax_o.set_ylabel("value")
    ax_o.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig, list(axes)


def _sweep_summary(q, k, v, block_q, block_k, causal, q_tile, k_step, row) -> str:
    n_q, n_k = len(q), len(k)
    _, history = blockwise_attention(q, k, v, block_k, causal, block_q)
    entry, computed = sweep_state(history, q_tile, k_step)
    sched = tile_schedule(n_q, n_k, block_q, block_k, causal)
    qrow = q_tile * block_q + row
    s_row = scores_np(q, k, causal)[qrow]
    fin = s_row[np.isfinite(s_row)]
    true_m, true_l = fin.max(), np.exp(fin - fin.max()).sum()
    head = (f"<b>{sched['n_computed']}</b> of {sched['n_tiles']} tiles computed, "
            f"{sched['n_skipped']} skipped, {sched['n_diagonal']} need an element mask. ")
    if not computed:
        last = entry["k_tile"] if entry is not None else None
        return head + (f"<br>K/V tile {k_step} lies entirely above the diagonal for Q tile "
                       f"{q_tile}: never loaded. The program's loop ended after K/V tile {last}; "
                       f"row {qrow} finished with m = {entry['m'][row]:.4g}, "
                       f"l = {entry['l'][row]:.4g} (true max {true_m:.4g}, true sum {true_l:.4g}).")
    h = entry
    m_old, m_new, alpha = h["m_old"][row], h["m"][row], h["alpha"][row]
    rebase = ("exp(-inf) = 0 (first tile)" if np.isneginf(m_old)
              else f"exp({m_old:.4g} - {m_new:.4g}) = {alpha:.4g}")
    return head + (
        "<table>"
        f"<tr><td>loaded</td><td>Q rows {h['rows'][0]}:{h['rows'][1]}, K/V rows "
        f"{h['cols'][0]}:{h['cols'][1]} ({h['kind']} tile)</td></tr>"
        f"<tr><td>running max of row {qrow}</td><td>m: {m_old:.4g} &rarr; <b>{m_new:.4g}</b> "
        f"(true max {true_m:.4g})</td></tr>"
        f"<tr><td>re-base factor</td><td>alpha = {rebase}</td></tr>"
        f"<tr><td>running sum</td><td>l = {h['l_old'][row]:.4g} &times; {alpha:.4g} + "
        f"{h['l'][row] - alpha * h['l_old'][row]:.4g} = <b>{h['l'][row]:.4g}</b> "
        f"(true sum of exp(s - max) {true_l:.4g})</td></tr>"
        f"<tr><td>accumulator</td><td>acc = alpha &times; acc + P V<sub>tile</sub>; "
        f"output so far acc / l</td></tr></table>")


def tile_sweep_widget(q=None, k=None, v=None, block_q: int = 16, block_k: int = 8,
                      causal: bool = True, seed: int = 0):
    """Sliders for the Q tile (program), the K/V step and a query row; a causal checkbox.

    Default data: `demo_qkv(48, 48, 8, seed)`. Redraws `draw_tile_sweep` on every change. Returns
    an ipywidgets.VBox with extra attributes `q_slider`, `k_slider`, `row_slider`, `causal_box`,
    `summary` (HTML), `image` (the drawing, PNG bytes in an ipywidgets.Image) and `redraws`.
    """
    import ipywidgets as widgets

    if q is None or k is None or v is None:
        q, k, v = demo_qkv(seed=seed)
    q, k, v = _as_2d_float64(q, "q"), _as_2d_float64(k, "k"), _as_2d_float64(v, "v")
    n_q, n_k = len(q), len(k)
    nqt, nkt = _cdiv(n_q, block_q), _cdiv(n_k, block_k)
    style = {"description_width": "90px"}
    q_slider = widgets.IntSlider(value=nqt - 1, min=0, max=nqt - 1, description="Q tile",
                                 style=style, continuous_update=False)
    k_slider = widgets.IntSlider(value=0, min=0, max=nkt - 1, description="K/V step",
                                 style=style, continuous_update=False)
    rows_in = min(block_q, n_q - q_slider.value * block_q)
    row_slider = widgets.IntSlider(value=rows_in - 1, min=0, max=rows_in - 1,
                                   description="row in tile", style=style,
                                   continuous_update=False)
    causal_box = widgets.Checkbox(value=causal, description="causal")
    summary = widgets.HTML()
    image = figure_image()
    box = widgets.VBox([widgets.HBox([q_slider, k_slider]),
                        widgets.HBox([row_slider, causal_box]), summary, image])
    box.q_slider, box.k_slider, box.row_slider, box.causal_box = \
        q_slider, k_slider, row_slider, causal_box
    box.summary, box.image, box.redraws = summary, image, 0
    busy = [False]

    def redraw(_change=None):
        if busy[0]:
            return
        busy[0] = True
        try:                                            # keep the row slider inside the Q tile
            rows = min(block_q, n_q - q_slider.value * block_q)
            row_slider.max = rows - 1
            row_slider.value = min(row_slider.value, rows - 1)
        finally:
            busy[0] = False
        args = (q, k, v, block_q, block_k, causal_box.value, q_slider.value, k_slider.value,
                row_slider.value)
        fig, _ = draw_tile_sweep(*args)
        summary.value = _sweep_summary(*args)
        show_in(image, fig)
        box.redraws += 1

    for w in (q_slider, k_slider, row_slider, causal_box):
        w.observe(redraw, names="value")
    redraw()
    return box
