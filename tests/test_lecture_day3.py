"""Unit tests for grader/lectures/day3.py: the tile walk, program order, panel counts, the widget."""
import matplotlib

matplotlib.use("Agg")

import ipywidgets  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from grader.lectures import day3 as L  # noqa: E402

GRIDS = [(1, 1), (1, 7), (7, 1), (4, 4), (5, 3), (12, 12), (13, 9), (64, 64)]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# --- program order --------------------------------------------------------------------------

@pytest.mark.parametrize("m, n", GRIDS)
@pytest.mark.parametrize("group_m", [1, 2, 3, 4, 8, 100])
def test_order_is_a_permutation_of_all_tiles(m, n, group_m):
    order = L.program_order(m, n, group_m)
    assert len(order) == m * n
    assert sorted(order) == [(i, j) for i in range(m) for j in range(n)]


@pytest.mark.parametrize("m, n", GRIDS)
def test_group_m_1_is_row_major(m, n):
    assert L.program_order(m, n, 1) == [(pid // n, pid % n) for pid in range(m * n)]


def test_grouped_order_by_hand():
    # 4 x 3 tiles, GROUP_M = 2: down the first two rows column by column, then the next two.
    assert L.program_order(4, 3, 2) == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2),
                                        (2, 0), (3, 0), (2, 1), (3, 1), (2, 2), (3, 2)]
    # 5 rows, GROUP_M = 2: the last group has one row, so it runs along that row.
    assert L.program_order(5, 3, 2)[-3:] == [(4, 0), (4, 1), (4, 2)]
    # GROUP_M >= the number of rows: column-major over the whole grid.
    assert L.program_order(3, 4, 8) == [(pid % 3, pid // 3) for pid in range(12)]


def test_grouped_pid_rejects_out_of_range():
    with pytest.raises(ValueError):
        L.grouped_pid(12, 3, 4, 2)
    with pytest.raises(ValueError):
        L.program_order(0, 4, 1)
    with pytest.raises(ValueError):
        L.program_order(3, 4, 0)


# --- panels in L2 ---------------------------------------------------------------------------

def test_panels_touched_one_wave():
    order = L.program_order(12, 12, 1)
    t = L.panels_touched(order, in_flight=12, step=2)
    assert t["tiles"] == [(2, j) for j in range(12)]
    assert t["a_panels"] == [2] and t["b_panels"] == list(range(12)) and t["n_panels"] == 13
    g = L.panels_touched(L.program_order(12, 12, 4), in_flight=12, step=0)
    assert g["a_panels"] == [0, 1, 2, 3] and g["b_panels"] == [0, 1, 2] and g["n_panels"] == 7
    last = L.panels_touched(order, in_flight=10, step=14)        # 144 = 14 * 10 + 4
    assert len(last["tiles"]) == 4
    with pytest.raises(ValueError):
        L.panels_touched(order, in_flight=10, step=15)


@pytest.mark.parametrize("m, n, in_flight, group_m", [
    (12, 12, 12, 4), (12, 12, 24, 4), (16, 16, 16, 4), (64, 64, 132, 8), (32, 48, 64, 8)])
def test_grouped_touches_fewer_panels_than_row_major(m, n, in_flight, group_m):
    row = L.program_order(m, n, 1)
    grouped = L.program_order(m, n, group_m)
    first_row = L.panels_touched(row, in_flight, 0)["n_panels"]
    first_grouped = L.panels_touched(grouped, in_flight, 0)["n_panels"]
    assert first_grouped < first_row
    assert L.panel_loads(grouped, in_flight)["total"] < L.panel_loads(row, in_flight)["total"]


def test_panel_loads_sums_waves():
    loads = L.panel_loads(L.program_order(12, 12, 1), 12)
    assert loads["waves"] == 12 and loads["per_wave"] == [(1, 12)] * 12
    assert (loads["a_loads"], loads["b_loads"], loads["total"]) == (12, 144, 156)
    grouped = L.panel_loads(L.program_order(12, 12, 4), 12)
    assert grouped["total"] == 12 * 7
    # One wave holding every program loads every panel exactly once.
    everything = L.panel_loads(L.program_order(5, 7, 2), 35)
    assert everything["waves"] == 1 and everything["total"] == 5 + 7
    # The H100-sized example of the notebook: 64 x 64 tiles of 128 x 128, 132 programs in flight.
    assert L.panel_loads(L.program_order(64, 64, 1), 132)["per_wave"][0] == (3, 64)
    assert L.panel_loads(L.program_order(64, 64, 8), 132)["per_wave"][0] == (8, 17)


# --- drawings -------------------------------------------------------------------------------

def _rects(ax):
    return [p for p in ax.patches if isinstance(p, matplotlib.patches.Rectangle)]


def test_draw_program_order_colours_the_wave():
    fig, ax = L.draw_program_order(12, 12, group_m=4, in_flight=12, step=2)
    orange = matplotlib.colors.to_rgba(L.IN_FLIGHT_COLOR)
    grey = matplotlib.colors.to_rgba(L.DONE_COLOR)
    cells = _rects(ax)
    assert len(cells) == 12 * 12 + 12 + 12               # C tiles, A panels, B panels
    assert sum(1 for p in cells if p.get_facecolor() == orange) == 12 + 4 + 3
    assert sum(1 for p in cells if p.get_facecolor() == grey) == 24   # two finished waves
    assert "GROUP_M = 4" in ax.get_title() and "= 7" in ax.get_title()
    texts = [t.get_text() for t in ax.texts]
    assert "143" in texts and "0" in texts


def test_draw_tile_walk():
    fig, ax = L.draw_tile_walk(100, 90, 80, 32, 32, 32, pid_m=1, pid_n=2, k_iter=2)
    hatched = [p for p in _rects(ax) if p.get_hatch()]
    # Iteration 2 reads k = 64..95 of 80 and the tile has columns 64..95 of 90: A's block hangs over
    # on the right (past K), B's on the right (past N) and at the bottom (past K), C's tile on the
    # right (past N).
    assert len(hatched) == 4
    assert "iteration 2 of 3" in ax.get_title()
    fig, ax = L.draw_tile_walk(128, 128, 128, 32, 32, 32, pid_m=0, pid_n=0, k_iter=0)
    assert not [p for p in _rects(ax) if p.get_hatch()]
    with pytest.raises(ValueError):
        L.draw_tile_walk(100, 90, 80, 32, 32, 32, pid_m=4)


# --- software pipelining ----------------------------------------------------------------------

def test_pipeline_one_stage_is_serial():
    sched = L.pipeline_schedule(8, 1, t_load=3.0, t_compute=1.0)
    assert sched["total"] == 8 * (3.0 + 1.0)
    for (ls, le), (cs, ce) in zip(sched["loads"], sched["computes"]):
        assert cs == le                                 # each product waits for its own load
    for (cs, ce), (ls, le) in zip(sched["computes"], sched["loads"][1:]):
        assert ls >= ce                                 # no load while a product runs


@pytest.mark.parametrize("stages", [1, 2, 3, 4, 5, 8])
def test_pipeline_steady_state(stages):
    t_load, t_compute, n = 3.0, 1.0, 40
    sched = L.pipeline_schedule(n, stages, t_load, t_compute)
    # Each product needs its own load, and the tensor cores do one product at a time.
    for (ls, le), (cs, ce) in zip(sched["loads"], sched["computes"]):
        assert cs >= le and ce - cs == t_compute
    starts = [c[0] for c in sched["computes"]]
    assert all(b >= a + t_compute for a, b in zip(starts, starts[1:]))
    # At most `stages` loads' buffers are in use: load i starts after product i - stages ends.
    for i in range(stages, n):
        assert sched["loads"][i][0] >= sched["computes"][i - stages][1]
    # Steady state: one step per max(t_compute, (t_load + t_compute) / stages).
    period = max(t_compute, (t_load + t_compute) / stages)
    assert sched["total"] == pytest.approx(t_load + t_compute + (n - 1) * period, abs=t_load + t_compute)
    assert 0 < sched["busy"] <= 1


def test_pipeline_enough_stages_keep_tensor_cores_busy():
    sched = L.pipeline_schedule(16, 4, t_load=3.0, t_compute=1.0)
    assert sched["total"] == 3.0 + 16 * 1.0          # only the first load is exposed
    assert L.pipeline_schedule(16, 1, 3.0, 1.0)["busy"] == pytest.approx(0.25)
    with pytest.raises(ValueError):
        L.pipeline_schedule(0, 2, 1.0, 1.0)


def test_draw_pipeline():
    fig, axes = L.draw_pipeline(n_steps=6, stages=(1, 3), t_load=3.0, t_compute=1.0)
    assert len(axes) == 2
    for ax in axes:
        assert len(_rects(ax)) == 2 * 6                # a load and a product per step
    assert "num_stages = 1: 24 time units" in axes[0].get_title(loc="left")
    assert "busy 25%" in axes[0].get_title(loc="left")
    assert axes[-1].get_xlabel()


# --- widget ---------------------------------------------------------------------------------

def test_program_order_widget_redraws_on_change():
    box = L.program_order_widget(num_pid_m=12, num_pid_n=12, group_m=4, in_flight=12)
    assert isinstance(box, ipywidgets.VBox)
    assert box.redraws == 1
    assert "156" in box.summary.value and "84" in box.summary.value
    box.group_slider.value = 8
    assert box.redraws == 2 and "108" in box.summary.value
    box.step_slider.value = 5
    assert box.redraws == 3
    assert box.step_slider.max == 11
    box.in_flight_slider.value = 48                      # 3 waves: the step slider follows
    assert box.step_slider.max == 2 and box.step_slider.value == 2
    assert box.redraws == 4                              # one redraw, not two
