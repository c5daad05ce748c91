"""The class speed table is parsed from the reports students see in their feedback."""
import csv

import nbformat

from grader.student.checks import SpeedResult
from grader.pipeline.class_report import parse_speed_reports, speed_figure, speed_table, write_report


def _report(ratio_ms, tflops=False):
    r = SpeedResult("tiled matmul" if tflops else "vector add", (64,), "float16", "NVIDIA H100 80GB HBM3",
                    "torch.add", yours_ms=1.0, baseline_ms=ratio_ms, target=0.9,
                    placements={"yours": [1.0, 1.0], "baseline": [ratio_ms, ratio_ms]})
    if tflops:
        r.tflops, r.peak_tflops = 600.0, 989.4
    else:
        r.gbs, r.ceiling_gbs = 3000.0, 3200.0
    return r.report() + f"\n  speed score: {r.credit * 2:.2f} of 2\n"


def test_parses_ratio_bandwidth_tflops_and_score():
    (add,) = parse_speed_reports(_report(0.95))
    assert add["title"] == "vector add" and add["ratio"] == 0.95 and add["gbs"] == 3000 and add["pct_of_ceiling"] == 94
    assert add["gpu"] == "NVIDIA H100 80GB HBM3" and add["score"] == "2.00/2"
    (mm,) = parse_speed_reports(_report(0.5, tflops=True))
    assert mm["tflops"] == 600 and mm["ratio"] == 0.5 and mm["score"] == "0.22/2"
    assert parse_speed_reports("The speed check of vector add needs a CUDA GPU") == []


def test_writes_a_csv_row_per_student_and_a_plot(tmp_path):
    for student, ratio in (("alice", 1.0), ("bob", 0.6)):
        cell = nbformat.v4.new_code_cell("grader.check_speed(...)")
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=_report(ratio))]
        path = tmp_path / "autograded" / student / "day1" / "vector_add.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    csv_path, png_path = write_report(tmp_path / "autograded", "day1", tmp_path / "out")
    rows = list(csv.DictReader(open(csv_path)))
    assert [(r["student"], float(r["ratio"])) for r in rows] == [("alice", 1.0), ("bob", 0.6)]
    assert png_path.stat().st_size > 1000
    fig = speed_figure(speed_table(tmp_path / "autograded", "day1"), "day1")
    (ax,) = fig.axes
    lines = {line.get_label(): line.get_xdata()[0] for line in ax.get_lines()}
    assert lines == {"PyTorch baseline (1x)": 1.0, "target (0.9x)": 0.9}   # vector add's target


def test_without_speed_data_the_plot_says_why_in_words(tmp_path):
    (tmp_path / "autograded").mkdir()
    csv_path, png_path = write_report(tmp_path / "autograded", "day1", tmp_path / "out")
    assert png_path.stat().st_size > 1000 and list(csv.DictReader(open(csv_path))) == []
    (ax,) = speed_figure([], "day1").axes
    assert "No speed was measured for day1" in ax.texts[0].get_text()


def test_the_checker_s_records_are_read_rather_than_the_printed_text(tmp_path):
    r = SpeedResult("vector add", (64,), "float32", "NVIDIA H100 80GB HBM3", "torch.add", yours_ms=1.0,
                    baseline_ms=0.93, target=0.9, gbs=2900.0, ceiling_gbs=3000.0)
    record = dict(r.record(2.0, 2), credited=True)
    assert record["ratio"] == 0.93 and record["score"] == "2.00/2" and round(record["pct_of_ceiling"]) == 97
    cell = nbformat.v4.new_code_cell("grader.check_speed(...)")
    cell.metadata["grading_results"] = [record]
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=_report(0.5))]  # not what is read
    path = tmp_path / "autograded" / "ann" / "day1" / "vector_add.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    (row,) = speed_table(tmp_path / "autograded", "day1")
    assert row["ratio"] == 0.93 and row["gbs"] == 2900.0 and row["score"] == "2.00/2" and row["student"] == "ann"
    csv_path, _ = write_report(tmp_path / "autograded", "day1", tmp_path / "out")
    (written,) = list(csv.DictReader(open(csv_path)))
    assert float(written["ratio"]) == 0.93 and written["shape"] == "(64,)"
