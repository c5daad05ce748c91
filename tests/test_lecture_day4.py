"""Unit tests for grader/lectures/day4.py: the tile schedule, the blockwise forward and its widget."""
import math

import matplotlib

matplotlib.use("Agg")

import ipywidgets  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from grader.lectures import day4 as L  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _qkv(n_q, n_k, d, d_v=None, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(0, 1.5, (n_q, d)), rng.normal(0, 1.5, (n_k, d)),
            rng.normal(0, 1, (n_k, d_v or d)))


def _sdpa(q, k, v, causal):
    t = [torch.tensor(a)[None, None] for a in (q, k, v)]
    return F.scaled_dot_product_attention(*t, is_causal=causal)[0, 0].numpy()


# --- the tile schedule ----------------------------------------------------------------------

@pytest.mark.parametrize("n_q, n_k, bq, bk", [(64, 64, 16, 16), (50, 50, 16, 8), (37, 53, 8, 16),
                                              (100, 30, 32, 4), (1, 1, 1, 1), (4096, 4096, 128, 64)])
def test_causal_schedule_skips_exactly_the_tiles_above_the_diagonal(n_q, n_k, bq, bk):
    s = L.tile_schedule(n_q, n_k, bq, bk, causal=True)
    assert s["n_q_tiles"] == math.ceil(n_q / bq) and s["n_k_tiles"] == math.ceil(n_k / bk)
    # Brute force on the elements: a tile is skipped iff none of its elements is visible (c <= r),
    # and needs no mask iff all of them are.
    rows, cols = np.arange(n_q)[:, None], np.arange(n_k)[None, :]
    visible = cols <= rows
    for i in range(s["n_q_tiles"]):
        for j in range(s["n_k_tiles"]):
            block = visible[i * bq:(i + 1) * bq, j * bk:(j + 1) * bk]
            want = L.SKIP if not block.any() else L.FULL if block.all() else L.DIAGONAL
            assert s["kinds"][i, j] == want, (i, j)
    computed = {(i, j) for i, j, _ in s["steps"]}
    assert len(computed) == s["n_computed"] == s["n_tiles"] - s["n_skipped"]
    assert all(s["kinds"][i, j] != L.SKIP for i, j in computed)
    assert s["n_full"] + s["n_diagonal"] + s["n_skipped"] == s["n_tiles"]
    # program order: Q tiles outer, K/V tiles ascending inside each
    assert s["steps"] == sorted(s["steps"], key=lambda t: (t[0], t[1]))


def test_square_causal_schedule_skips_about_half():
    s = L.tile_schedule(4096, 4096, 128, 128, causal=True)
    t = 4096 // 128
    assert s["n_skipped"] == t * (t - 1) // 2 and s["n_diagonal"] == t
    assert s["n_computed"] == t * (t + 1) // 2
    assert 0.45 < s["skipped_fraction"] < 0.5


def test_non_causal_schedule_computes_everything():
    s = L.tile_schedule(50, 70, 16, 32)
    assert s["n_skipped"] == 0 and s["n_diagonal"] == 0
    assert s["n_computed"] == s["n_tiles"] == 4 * 3


def test_schedule_rejects_bad_arguments():
    with pytest.raises(ValueError):
        L.tile_schedule(0, 10, 4, 4)
    with pytest.raises(ValueError):
        L.tile_schedule(10, 10, 4, 0)
    with pytest.raises(ValueError):
        L.tile_kind(3, 0, 10, 10, 4, 4)            # rows 12.. do not exist


# --- the blockwise forward ------------------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n_q, n_k, d, d_v, bq, bk", [(48, 48, 8, 8, 16, 8), (37, 37, 5, 3, 8, 16),
                                                      (50, 23, 4, 6, 16, 7), (1, 9, 3, 2, 1, 4),
                                                      (33, 65, 16, 16, 32, 32)])
def test_blockwise_equals_full_softmax_attention(causal, n_q, n_k, d, d_v, bq, bk):
    q, k, v = _qkv(n_q, n_k, d, d_v, seed=n_q + n_k)
    out, history = L.blockwise_attention(q, k, v, bk, causal, bq)
    np.testing.assert_allclose(out, L.attention_np(q, k, v, causal), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out, _sdpa(q, k, v, causal), rtol=1e-10, atol=1e-12)
    assert len(history) == L.tile_schedule(n_q, n_k, bq, bk, causal)["n_computed"]


@pytest.mark.parametrize("causal", [False, True])
def test_final_m_and_l_are_the_row_max_and_sum_of_exp(causal):
    q, k, v = _qkv(45, 45, 6, seed=3)
    _, history = L.blockwise_attention(q, k, v, block_k=8, causal=causal, block_q=16)
    s = L.scores_np(q, k, causal)
    m_true = s.max(axis=1)
    l_true = np.exp(s - m_true[:, None]).sum(axis=1)
    m_final, l_final = np.full(45, np.nan), np.full(45, np.nan)
    for h in history:
        r0, r1 = h["rows"]
        m_final[r0:r1], l_final[r0:r1] = h["m"], h["l"]
    np.testing.assert_array_equal(m_final, m_true)
    np.testing.assert_allclose(l_final, l_true, rtol=1e-12)
    lse = torch.logsumexp(torch.tensor(s), dim=1).numpy()
    np.testing.assert_allclose(L.final_logsumexp(history, 45), lse, rtol=1e-12)


def test_every_step_holds_the_state_of_the_keys_seen():
    q, k, v = _qkv(32, 40, 4, seed=5)
    _, history = L.blockwise_attention(q, k, v, block_k=8, causal=True, block_q=16)
    s = L.scores_np(q, k, causal=True)
    for h in history:
        (r0, r1), (_, c1) = h["rows"], h["cols"]
        seen = s[r0:r1, :c1]
        m = seen.max(axis=1)
        np.testing.assert_array_equal(h["m"], m)
        np.testing.assert_allclose(h["l"], np.exp(seen - m[:, None]).sum(axis=1), rtol=1e-12)
        np.testing.assert_allclose(h["alpha"], np.exp(h["m_old"] - h["m"]))
        p = np.exp(seen - m[:, None])
        np.testing.assert_allclose(h["acc"], p @ v[:c1], rtol=1e-12, atol=1e-14)
    firsts = [h for h in history if h["k_tile"] == 0]
    assert all(np.isneginf(h["m_old"]).all() and (h["l_old"] == 0).all() for h in firsts)


def test_blockwise_accepts_torch_tensors_and_large_scores():
    q, k, v = (torch.tensor(a) for a in _qkv(20, 20, 4, seed=7))
    out, _ = L.blockwise_attention(q * 300, k, v, block_k=3)       # scores in the hundreds
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, L.attention_np(q * 300, k, v), rtol=1e-9, atol=1e-12)


def test_blockwise_rejects_mismatched_shapes():
    q, k, v = _qkv(8, 8, 4)
    with pytest.raises(ValueError):
        L.blockwise_attention(q, k[:, :3], v, 4)
    with pytest.raises(ValueError):
        L.blockwise_attention(q, k, v[:5], 4)
    with pytest.raises(ValueError):
        L.blockwise_attention(q[None], k, v, 4)


# --- the drawing and the widget -------------------------------------------------------------

def test_draw_tile_sweep_marks_the_step():
    q, k, v = L.demo_qkv()
    fig, (ax, ax_s, ax_o) = L.draw_tile_sweep(q, k, v, 16, 8, True, q_tile=1, k_step=2, row=3)
    assert "program 1, K/V step 2" in ax.get_title() and "skipped" not in ax.get_title()
    assert ax.get_xlabel() and ax.get_ylabel() and ax_s.get_ylabel() and ax_o.get_xlabel()
    n_hatched = sum(1 for p in ax.patches if p.get_hatch())
    assert n_hatched == L.tile_schedule(48, 48, 16, 8, True)["n_skipped"]
    (dots,) = [ln for ln in ax_o.get_lines() if ln.get_marker() == "o"]
    assert len(dots.get_xdata()) == 8
    fig, (ax, _, _) = L.draw_tile_sweep(q, k, v, 16, 8, True, q_tile=0, k_step=5)
    assert "skipped" in ax.get_title()
    with pytest.raises(ValueError):
        L.draw_tile_sweep(q, k, v, 16, 8, True, q_tile=3, k_step=0)
    with pytest.raises(ValueError):
        L.draw_tile_sweep(q, k, v, 16, 8, True, q_tile=0, k_step=0, row=16)


def test_tile_sweep_widget_redraws_on_slider_change():
    box = L.tile_sweep_widget()
    assert isinstance(box, ipywidgets.VBox)
    assert box.q_slider.max == 2 and box.k_slider.max == 5 and box.row_slider.max == 15
    assert box.redraws == 1
    first, first_png = box.summary.value, bytes(box.image.value)
    assert first_png.startswith(b"\x89PNG")
    box.k_slider.value = 4
    assert box.redraws == 2 and box.summary.value != first and bytes(box.image.value) != first_png
    assert "K/V rows 32:40" in box.summary.value
    box.q_slider.value = 0                               # tile 4 is above the diagonal for Q tile 0
    assert box.redraws == 3 and "never loaded" in box.summary.value
    box.causal_box.value = False
    assert box.redraws == 4 and "never loaded" not in box.summary.value
    assert "0 skipped" in box.summary.value


def test_widget_keeps_the_row_inside_a_ragged_last_tile():
    q, k, v = _qkv(40, 40, 4)
    box = L.tile_sweep_widget(q, k, v, block_q=16, block_k=8)
    assert box.q_slider.value == 2 and box.row_slider.max == 7        # rows 32..39
    box.q_slider.value = 0
    assert box.row_slider.max == 15
    box.row_slider.value = 12
    box.q_slider.value = 2
    assert box.row_slider.value == 7 and box.redraws == 4
