"""The instructor's whole-course tools: `course-grader course-run` and `course-grader bench`.

Their real runs are on a GPU (docs/course-run.md, docs/benchmarks.md); here, without one, each verdict
they reach is checked both ways on small inputs: a lecture that runs, one whose cell raises, one whose
kernel dies; a course whose solutions score what they must, and one whose untouched exercises score
points; a benchmark table with a run below target and a slow variant that earns credit.
"""
import nbformat
import pytest

from conftest import DEVICE
from grader.pipeline import benchmark_report, course_run
from grader.student import checks

DAY2_FULL = 17.0


def _deserved(day):
    """What the reference solutions must score here: everything on a GPU, the points that need none without."""
    return DAY2_FULL if DEVICE.is_gpu else course_run.points_without_gpu(day)


def _notebook(path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def test_a_lecture_that_runs_is_ok_and_timed(tmp_path):
    r = course_run.run_lecture(_notebook(tmp_path / "fine.ipynb", "x = 2", "assert x * 21 == 42"))
    assert r.ok and r.part == "lecture" and r.seconds > 0 and r.detail == ""


def test_a_lecture_whose_cell_raises_fails_at_once_with_the_error(tmp_path):
    r = course_run.run_lecture(_notebook(tmp_path / "broken.ipynb", "raise ValueError('the lesson is wrong')"))
    assert not r.ok
    assert "ValueError" in r.detail and "attempt" not in r.detail  # the lesson's own error: no second try


def test_a_lecture_whose_kernel_dies_gets_a_second_try_and_says_so(tmp_path):
    r = course_run.run_lecture(_notebook(tmp_path / "dies.ipynb", "import os; os._exit(1)"))
    assert not r.ok
    assert "DeadKernelError" in r.detail and "(attempt 2 of 2)" in r.detail


def _fake_autograde(scores):
    def autograde_days(days, log=print):
        runs = [course_run.Result("autograde reference", f"{d}/nb", 1.0, True, "") for d in days]
        return runs, {(d, who): (score(d), DAY2_FULL) for d in days for who, score in scores.items()}
    return autograde_days


def test_course_run_passes_when_solutions_earn_their_points_and_untouched_exercises_none(tmp_path, monkeypatch):
    monkeypatch.setattr(course_run, "autograde_days", _fake_autograde(
        {"reference": _deserved, "untouched": lambda d: 0.0}))
    out = tmp_path / "report.md"
    assert course_run.main(["day2"], lectures=False, autograde=True, out=out, log=lambda *a: None) == 0
    text = out.read_text()
    want = f"{_deserved('day2'):g}"
    assert "Result: **passed**" in text and f"| day2 | {want} | {want} | 17 | 0 | ok |" in text


@pytest.mark.parametrize("scores, why", [
    ({"reference": _deserved, "untouched": lambda d: 3.0}, "untouched exercises scored"),
    ({"reference": lambda d: _deserved(d) - 1, "untouched": lambda d: 0.0}, "a solution lost a point"),
])
def test_course_run_fails_when_a_score_is_not_what_it_must_be(tmp_path, monkeypatch, scores, why):
    monkeypatch.setattr(course_run, "autograde_days", _fake_autograde(scores))
    out = tmp_path / "report.md"
    assert course_run.main(["day2"], lectures=False, autograde=True, out=out, log=lambda *a: None) == 1, why
    assert "Result: **FAILED**" in out.read_text()


def test_points_without_gpu_leave_out_every_speed_and_gpu_prediction_cell():
    # Day 1: vector_add 3 of 5, bias_gelu 3 of 5, predict_runtime 2 of 4 without a GPU (see EXPECTED
    # in tests/adversarial_class.py, which the GPU run confirmed).
    assert course_run.points_without_gpu("day1") == 8.0
    assert course_run.points_without_gpu("day2") == 11.0


def test_the_slow_variant_does_the_work_several_times_and_returns_the_last_result():
    calls = []
    slow = benchmark_report.slowed(lambda x: calls.append(x) or len(calls))
    assert slow("a") == benchmark_report.SLOW_FACTOR
    assert calls == ["a"] * benchmark_report.SLOW_FACTOR


def _result(ratio, target=1.5):
    return checks.SpeedResult(title="softmax", shape=(8192, 4096), dtype="bfloat16", device="GPU",
                              baseline_name="torch.softmax", yours_ms=1.0, baseline_ms=ratio, target=target,
                              gbs=3000.0, ceiling_gbs=4000.0)


def test_the_benchmark_table_counts_runs_below_target_and_the_slow_variants_credit():
    rows = [("day2.softmax", [_result(2.0), _result(1.4), _result(2.2)], [_result(0.9), _result(1.05)])]
    line = benchmark_report.speed_table(rows, 3, 2)[-1]
    assert "| 2.00x (1.40 to 2.20) |" in line
    assert "| 1 of 3 |" in line                   # the 1.4x run is below the 1.5x target
    assert "| 1.05x, 0.40 |" in line              # the best slow run, and its partial credit
    assert "3000 GB/s | 75% of copy" in line
    fine = benchmark_report.speed_table([("day2.softmax", [_result(2.0)] * 3, [_result(0.5)])], 3, 1)[-1]
    assert "| 0 of 3 |" in fine and "| 0.50x, 0.00 |" in fine


def test_a_copy_of_the_same_bytes_timed_beside_is_a_ceiling_of_its_own_not_pytorch_s_default():
    # a copy of a graded size is slower than the 1 GiB copy that gives the copy bandwidth
    run = _result(2.0)
    run.context = {checks.COMPILED: 1.5, checks.COPY_SAME: 0.9}
    assert run.of_same_copy == 0.9
    line = benchmark_report.speed_table([("day2.softmax", [run] * 3, [])], 3, 0)[-1]
    assert "| same | 1.50x (1.5000 ms) |" in line               # not taken for PyTorch's default path
    assert "3000 GB/s | 75% of copy (90% of a copy of the same bytes) |" in line
    assert "beside it, not graded: a copy of the same bytes 0.9000 ms -> yours 0.90x" in run.report()
    assert run.record(1, 1)["pct_of_same_copy"] == 90.0
    assert _result(2.0).of_same_copy is None and _result(2.0).record(1, 1)["pct_of_same_copy"] is None


def test_where_memory_is_graded_a_run_that_misses_its_memory_target_counts_below_target():
    lean, wasteful = _result(2.0), _result(2.0)
    for r, gib in ((lean, 1.0), (wasteful, 4.0)):
        r.yours_bytes, r.baseline_bytes, r.memory_target = int(gib * 2**30), 6 * 2**30, 3.0
    line = benchmark_report.speed_table([("day5.linear_cross_entropy", [lean, lean, wasteful], [])], 3, 0)[-1]
    assert "| 1 of 3 |" in line and "| 1.000 GiB, 6.000 GiB: 6.00x less (3.00x) |" in line


@pytest.mark.skipif(DEVICE.is_gpu, reason="on a GPU bench measures (docs/benchmarks.md)")
def test_bench_without_a_gpu_says_so_and_measures_nothing(tmp_path, capsys):
    out = tmp_path / "benchmarks.md"
    assert benchmark_report.write_report(1, 1, out) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().out
    assert not out.exists()



def test_a_gpu_run_prints_each_failure_as_it_happens(monkeypatch, capsys):
    # A GPU machine's call stops at a time limit, before pytest's summary: with FAILURES_AT_ONCE (.ci/gpu-env)
    # the failure's message is printed when the test fails; without it only in the summary, as usual.
    from types import SimpleNamespace
    import conftest
    failed = SimpleNamespace(nodeid="tests/test_x.py::test_y", when="call", failed=True, longreprtext="E the reason")
    passed = SimpleNamespace(nodeid="tests/test_x.py::test_z", when="call", failed=False, longreprtext="")
    for at_once in (True, False):
        monkeypatch.delenv("FAILURES_AT_ONCE", raising=False)
        if at_once:
            monkeypatch.setenv("FAILURES_AT_ONCE", "1")
        conftest.pytest_runtest_logreport(failed)
        conftest.pytest_runtest_logreport(passed)
        out = capsys.readouterr().out
        assert ("test_x.py::test_y (call) failed" in out and "the reason" in out) == at_once, out
        assert "test_z" not in out
