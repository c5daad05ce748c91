"""Unit tests for grader/lectures/day1.py: the tiling drawing, the roofline model and their widgets."""
import math

import matplotlib

matplotlib.use("Agg")

import ipywidgets  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from grader.lectures import day1  # noqa: E402

CASES = [(1, 4), (100, 16), (128, 32), (129, 32), (256, 4), (37, 64), (1000, 128)]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# --- tiling ---------------------------------------------------------------------------------

@pytest.mark.parametrize("n, block", CASES)
def test_tiling_counts(n, block):
    t = day1.tiling(n, block)
    assert t["n_programs"] == math.ceil(n / block)
    assert t["total_lanes"] == t["n_programs"] * block
    assert t["masked_lanes"] == t["n_programs"] * block - n
    assert t["active_lanes"] == n
    assert 0 <= t["masked_lanes"] < block          # only the last program has masked lanes
    assert t["mask"][:-1].all()


@pytest.mark.parametrize("n, block", CASES)
def test_tiling_covers_every_element_once(n, block):
    t = day1.tiling(n, block)
    assert t["offsets"].shape == (t["n_programs"], block)
    assert (t["offsets"][:, 0] == np.arange(t["n_programs"]) * block).all()   # pid * BLOCK_SIZE
    live = np.sort(t["offsets"][t["mask"]])
    np.testing.assert_array_equal(live, np.arange(n))
    assert (t["offsets"][~t["mask"]] >= n).all()


def test_tiling_rejects_empty_sizes():
    with pytest.raises(ValueError):
        day1.tiling(0, 16)
    with pytest.raises(ValueError):
        day1.tiling(10, 0)


@pytest.mark.parametrize("n, block", [(100, 16), (37, 64), (256, 4)])
def test_draw_program_tiling(n, block):
    fig, ax = day1.draw_program_tiling(n, block)
    t = day1.tiling(n, block)
    cells = [p for p in ax.patches if isinstance(p, matplotlib.patches.Rectangle)]
    assert len(cells) == t["total_lanes"]
    assert sum(1 for p in cells if p.get_hatch()) == t["masked_lanes"]
    assert f"{t['n_programs']} programs" in ax.get_title()
    assert ax.get_xlabel() and ax.get_ylabel()
    assert fig is ax.figure


def test_draw_program_tiling_into_given_axes():
    fig, ax = plt.subplots()
    fig2, ax2 = day1.draw_program_tiling(10, 4, ax=ax)
    assert ax2 is ax and fig2 is fig
    assert ax.get_xlim() == (0, 4) and ax.get_ylim() == (3, 0)   # 3 programs, program 0 on top


def test_tiling_widget_redraws_on_change():
    box = day1.tiling_widget(n_elements=100, block_size=16)
    assert isinstance(box, ipywidgets.VBox)
    assert isinstance(box.n_slider, ipywidgets.IntSlider)
    assert box.redraws == 1
    box.n_slider.value = 37
    box.block_slider.value = 64
    assert box.redraws == 3
    assert "(1,)" in box.summary.value and "masked off: 27" in box.summary.value
    assert plt.get_fignums() == []                        # figures are freed after display


# --- roofline -------------------------------------------------------------------------------

def test_roofline_time_memory_bound():
    # 1 GB at 1 TB/s = 1 ms; 1 GFLOP at 1000 TFLOP/s = 1 us: memory wins.
    t = day1.roofline_time(flops=1e9, nbytes=1e9, peak_flops=1e15, bandwidth=1e12)
    assert t == pytest.approx(1e-3)


def test_roofline_time_compute_bound():
    n = 8192  # square bf16 matmul: 2 n^3 FLOPs, 3 n^2 two-byte elements
    flops, nbytes = 2 * n**3, 3 * n * n * 2
    t = day1.roofline_time(flops, nbytes, peak_flops=989e12, bandwidth=3.35e12)
    assert t == pytest.approx(flops / 989e12)
    assert t > nbytes / 3.35e12


@pytest.mark.parametrize("flops, nbytes", [(0, 1e6), (1e6, 0), (3e9, 2e7), (5e12, 4e9)])
def test_roofline_time_is_max_of_bounds(flops, nbytes):
    peak, bw = 989e12, 3.35e12
    assert day1.roofline_time(flops, nbytes, peak, bw) == max(flops / peak, nbytes / bw)


def test_roofline_time_rejects_nonpositive_machine():
    with pytest.raises(ValueError):
        day1.roofline_time(1, 1, 0, 1)


def test_ridge_point():
    assert day1.ridge_point(989e12, 3.35e12) == pytest.approx(989 / 3.35)
    assert day1.ridge_point(989, 3.35) == pytest.approx(295.2, abs=0.1)
    # At the ridge point the two bounds are equal.
    ridge, nbytes = day1.ridge_point(989e12, 3.35e12), 1e9
    assert ridge * nbytes / 989e12 == pytest.approx(nbytes / 3.35e12)


def test_attainable_and_bound_by():
    ridge = day1.ridge_point(989, 3.35)
    assert day1.attainable_tflops(1 / 12, 989, 3.35) == pytest.approx(3.35 / 12)
    assert day1.attainable_tflops(10 * ridge, 989, 3.35) == pytest.approx(989)
    arr = day1.attainable_tflops(np.array([1.0, ridge, 1e4]), 989, 3.35)
    np.testing.assert_allclose(arr, [3.35, 989, 989])
    assert day1.bound_by(1 / 12, 989, 3.35) == "memory"
    assert day1.bound_by(8192 / 3, 989, 3.35) == "compute"


def test_plot_roofline():
    ops = [("vector add", 1 / 12), ("matmul", 8192 / 3, 730.0)]
    fig, ax = day1.plot_roofline(3.35, 989, ops=ops, extra_roofs={"FP32": 67})
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "FLOP / byte" in ax.get_xlabel() and "TFLOP/s" in ax.get_ylabel()
    roof = ax.get_lines()[0]
    x, y = roof.get_data()
    np.testing.assert_allclose(y, np.minimum(989, 3.35 * x))
    points = {line.get_label().split(":")[0]: line.get_ydata()[0] for line in ax.get_lines()
              if line.get_marker() not in (None, "None", "")}
    assert points["vector add"] == pytest.approx(3.35 / 12)   # on the roof
    assert points["matmul"] == pytest.approx(730.0)           # where it was measured


def test_roofline_widget_redraws_on_change():
    box = day1.roofline_widget()
    assert isinstance(box, ipywidgets.VBox)
    assert box.redraws == 1
    assert "memory-bound" in box.summary.value                # default: vector add's 1/12
    box.intensity_slider.value = 2.0**12
    assert box.redraws == 2
    assert "compute-bound" in box.summary.value
    box.bandwidth_slider.value = 1.0
    box.peak_slider.value = 100.0
    assert box.redraws == 4
    assert "ridge point 100 FLOP/byte" in box.summary.value
    assert plt.get_fignums() == []


# --- GELU's tail (the bias + GELU reference) ----------------------------------------------------

def _exact_tail(u):
    return np.array([math.erfc(abs(v) / math.sqrt(2.0)) / 2.0 for v in u])


def test_gelu_tail_fit_is_as_accurate_as_the_solution_says():
    u = np.linspace(0.0, day1.GELU_TAIL_RANGE, 20001)
    error = np.abs(day1.gelu_tail(u, day1.gelu_tail_fit(7)) / _exact_tail(u) - 1)
    assert error.max() < 8e-7          # the figure the solution's comment gives
    # a lower degree is measurably worse: the bound is the fit's, not the test's
    assert np.abs(day1.gelu_tail(u, day1.gelu_tail_fit(5)) / _exact_tail(u) - 1).max() > 5e-6


def test_the_bias_gelu_solution_uses_the_fitted_coefficients():
    import json
    import re
    from conftest import REPO
    source = "".join("".join(c["source"]) for c in json.load(open(REPO / "solutions/day1/bias_gelu.ipynb"))["cells"])
    first = float(re.search(r"\bq = (-?[0-9.]+)\n", source).group(1))
    rest = [float(sign + value) for sign, value in re.findall(r"q = q \* t ([+-]) ([0-9.]+)", source)]
    written = [first] + rest
    fitted = day1.gelu_tail_fit(7)
    assert len(written) == len(fitted) == 8
    assert np.allclose(written, fitted, rtol=2e-8, atol=2e-9)
