"""Unit tests for grader/lectures/day2.py: reduction tiling, the online softmax and its widget."""
import math

import matplotlib

matplotlib.use("Agg")

import ipywidgets  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from grader.lectures import day2 as L  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# --- reduction tiling -----------------------------------------------------------------------

@pytest.mark.parametrize("rows, cols, rpp, block", [(4, 10, 1, None), (6, 10, 2, None),
                                                    (5, 10, 2, 4), (3, 16, 1, 16), (1, 1, 1, 1)])
def test_reduction_tiling(rows, cols, rpp, block):
    t = L.reduction_tiling(rows, cols, rpp, block)
    b = block or 1 << (cols - 1).bit_length()
    assert t["block"] == b and t["n_chunks"] == math.ceil(cols / b)
    assert t["n_programs"] == math.ceil(rows / rpp)
    assert t["program"].shape == (rows, t["n_chunks"] * b)
    assert t["mask"].sum() == rows * cols                       # every element exactly once
    assert (t["program"][:, 0] == np.arange(rows) // rpp).all()
    assert (t["chunk"][0] == np.arange(t["n_chunks"] * b) // b).all()
    assert (t["program"] == t["program"][:, :1]).all()          # a row belongs to one program


def test_reduction_tiling_rejects_bad_arguments():
    with pytest.raises(ValueError):
        L.reduction_tiling(0, 4)
    with pytest.raises(ValueError):
        L.reduction_tiling(4, 10, block=6)


def test_draw_reduction_tiling():
    fig, ax = L.draw_reduction_tiling(5, 10, rows_per_program=2, block=4)
    cells = [p for p in ax.patches if isinstance(p, matplotlib.patches.Rectangle)]
    assert len(cells) == 5 * 12
    assert sum(1 for p in cells if p.get_hatch()) == 5 * 2      # 2 masked lanes per row
    assert "3 programs" in ax.get_title() and "3 chunk(s)" in ax.get_title()
    assert ax.get_xlabel() and ax.get_ylabel()


# --- online softmax -------------------------------------------------------------------------

@pytest.mark.parametrize("n, chunk", [(1, 1), (10, 3), (40, 8), (37, 64), (100, 7)])
def test_online_final_state_matches_numpy(n, chunk):
    x = np.random.default_rng(n).normal(0, 3, n)
    steps = L.online_softmax_steps(x, chunk)
    assert len(steps) == math.ceil(n / chunk)
    final = steps[-1]
    assert final["m"] == x.max()
    np.testing.assert_allclose(final["s"], np.exp(x - x.max()).sum(), rtol=1e-12)
    np.testing.assert_allclose(final["partial"], L.softmax_np(x), rtol=1e-12, atol=0)
    e = torch.softmax(torch.tensor(x), dim=0).numpy()
    np.testing.assert_allclose(final["partial"], e, rtol=1e-12)


def test_online_each_step_is_the_prefix_state():
    x = np.random.default_rng(1).normal(0, 2, 50)
    x[31] = 9.0                                                  # the max jumps late
    for st in L.online_softmax_steps(x, 6):
        prefix = x[:st["stop"]]
        assert st["m"] == prefix.max()                           # running max of the prefix
        np.testing.assert_allclose(st["s"], np.exp(prefix - prefix.max()).sum(), rtol=1e-12)
        np.testing.assert_allclose(st["partial"].sum(), 1.0, rtol=1e-12)
        np.testing.assert_allclose(st["scale"], np.exp(st["m_old"] - st["m"]))
        np.testing.assert_allclose(st["s"], st["s_old"] * st["scale"] + st["chunk_sum"])
        assert st["chunk_max"] == x[st["start"]:st["stop"]].max()


def test_online_first_step_and_rebase():
    x = np.array([0.0, 1.0, 5.0, 2.0])
    s0, s1 = L.online_softmax_steps(x, 2)
    assert s0["m_old"] == -np.inf and s0["s_old"] == 0.0 and s0["scale"] == 0.0
    assert s1["scale"] == pytest.approx(math.exp(1.0 - 5.0))
    assert s1["s"] == pytest.approx(np.exp(x - 5.0).sum())


def test_online_large_logits_do_not_overflow():
    x = np.array([1000.0, 999.0, 1001.0, -1000.0])
    final = L.online_softmax_steps(x, 1)[-1]
    assert np.isfinite(final["s"])
    np.testing.assert_allclose(final["partial"], L.softmax_np(x))


def test_online_handles_minus_infinity():
    x = np.array([-np.inf, -np.inf, 0.0, np.log(3.0)])
    steps = L.online_softmax_steps(x, 2)
    assert steps[0]["s"] == 0.0 and steps[0]["m"] == -np.inf
    np.testing.assert_allclose(steps[-1]["partial"], [0.0, 0.0, 0.25, 0.75])


def test_online_rejects_bad_arguments():
    with pytest.raises(ValueError):
        L.online_softmax_steps([], 4)
    with pytest.raises(ValueError):
        L.online_softmax_steps([1.0], 0)


def test_draw_online_softmax_step():
    x = np.arange(10.0)
    fig, (ax1, ax2) = L.draw_online_softmax_step(x, 4, 1)
    assert "x[4:8]" in ax1.get_title()
    assert ax1.get_ylabel() and ax2.get_xlabel() and ax2.get_ylabel()
    (line,) = [ln for ln in ax2.get_lines() if ln.get_marker() == "o"]
    assert len(line.get_xdata()) == 8                          # partial result over 8 seen
    with pytest.raises(ValueError):
        L.draw_online_softmax_step(x, 4, 3)                     # only steps 0..2


def test_online_softmax_widget_redraws_on_change():
    box = L.online_softmax_widget(chunk=8)
    assert isinstance(box, ipywidgets.VBox)
    assert isinstance(box.step_slider, ipywidgets.IntSlider)
    assert box.step_slider.max == 4 and len(box.steps) == 5    # 40 logits in chunks of 8
    assert box.redraws == 1 and "x[0:8]" in box.summary.value
    first = box.summary.value
    box.step_slider.value = 3
    assert box.redraws == 2
    assert box.summary.value != first and "x[24:32]" in box.summary.value
    box.step_slider.value = 4
    assert box.redraws == 3 and "x[32:40]" in box.summary.value


# --- profiler -------------------------------------------------------------------------------

def test_op_times_on_cpu():
    x = torch.randn(64, 64)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with torch.profiler.record_function("my label"):
            for _ in range(3):
                torch.exp(x)
            x.sum()
    rows = L.op_times(prof, on_gpu=False)
    names = {name: calls for name, calls, _ in rows}
    assert names.get("aten::exp") == 3 and names.get("aten::sum") == 1
    assert "my label" not in names
    assert all(name.startswith("aten::") and ms > 0 for name, _, ms in rows)
    assert [r[2] for r in rows] == sorted((r[2] for r in rows), reverse=True)
    with pytest.raises(ValueError):
        L.op_times(prof, on_gpu=False, kernels=True)


def test_demo_logits_make_the_max_jump_in_chunk_3():
    x = L.demo_logits()
    assert x.shape == (40,) and x.argmax() == 29
    steps = L.online_softmax_steps(x, 8)
    assert steps[3]["m"] > steps[2]["m"] and steps[3]["scale"] < 0.1
    assert steps[4]["scale"] == 1.0                              # no new max in the last chunk


# --- compiling for a GPU without one (07_debugging) -----------------------------------------

import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def _add_kernel(a_ptr, b_ptr, c_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(c_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def _int_start_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    s = 0                                   # an int32 that becomes a float in the loop
    for start in range(0, n, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        s += tl.sum(tl.load(x_ptr + offsets, mask=offsets < n, other=0.0), axis=0)
    tl.store(out_ptr, s)


@triton.jit
def _half(x):
    return x * 0.5, x * 2.0


@triton.jit
def _tuple_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    lo, hi = _half(tl.load(x_ptr + offsets))
    tl.store(y_ptr + offsets, lo + hi)


def test_launch_signature_types_constexprs_and_alignment():
    a = torch.zeros(64)
    sig, consts, aligned = L.launch_signature(_add_kernel, a, a, a.half(), 5000, BLOCK_SIZE=1024)
    assert sig == {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp16", "n_elements": "i32",
                   "BLOCK_SIZE": "constexpr"}
    assert consts == {"BLOCK_SIZE": 1024}
    assert aligned == ["a_ptr", "b_ptr", "c_ptr"]                 # 5000 is no multiple of 16
    sig, _, aligned = L.launch_signature(_add_kernel, a, a[1:], a, 2**31, BLOCK_SIZE=1024)
    assert sig["n_elements"] == "i64" and aligned == ["a_ptr", "c_ptr", "n_elements"]   # a[1:] starts 4 B in
    with pytest.raises(TypeError, match="no value for BLOCK_SIZE"):
        L.launch_signature(_add_kernel, a, a, a, 16)
    with pytest.raises(TypeError, match="no argument BLOCK"):
        L.launch_signature(_add_kernel, a, a, a, 16, BLOCK=8)


def test_compile_for_gpu_vector_loads_need_divisible_sizes():
    a = torch.zeros(64)
    aligned = L.compile_for_gpu(_add_kernel, a, a, a, 5120, BLOCK_SIZE=1024)
    assert aligned["ok"] and aligned["error"] is None and aligned["target"] == "sm_90"
    assert ".target sm_90" in aligned["ptx"] and ".reqntid 128" in aligned["ptx"]
    assert aligned["metadata"]["num_warps"] == 4 and aligned["metadata"]["shared"] == 0
    assert aligned["metadata"]["registers"] > 0 and aligned["metadata"]["local_bytes"] == 0   # ptxas's, by cuobjdump
    lines = aligned["ptx"].splitlines()
    # 1024 elements / 128 threads = 8 per thread: 2 loads of 4 per input, 2 stores of 4, all predicated
    assert sum("@%p" in x and "ld.global.v4.b32" in x for x in lines) == 4
    assert sum("@%p" in x and "st.global.v4.b32" in x for x in lines) == 2
    scalar = L.compile_for_gpu(_add_kernel, a, a, a, 5000, BLOCK_SIZE=1024)["ptx"]
    assert "ld.global.v4" not in scalar and sum("ld.global.b32" in x for x in scalar.splitlines()) == 16


def test_compile_for_gpu_reports_the_compilers_error():
    x, out = torch.zeros(100), torch.zeros(1)
    result = L.compile_for_gpu(_int_start_kernel, x, out, 100, BLOCK=32)
    assert not result["ok"] and result["ptx"] == "" and result["metadata"] == {}
    assert "Loop-carried variable s" in result["error"] and "int32" in result["error"]


def test_compile_for_gpu_follows_called_helpers_and_other_targets():
    x = torch.zeros(32)
    result = L.compile_for_gpu(_tuple_kernel, x, x, BLOCK=32, target="sm_80", num_warps=1)
    assert result["ok"], result["error"]
    assert ".target sm_80" in result["ptx"] and result["metadata"]["num_warps"] == 1
    with pytest.raises(ValueError, match="sm_90"):
        L.compile_for_gpu(_tuple_kernel, x, x, BLOCK=32, target="sm_100")
