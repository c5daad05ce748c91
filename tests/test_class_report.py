"""The class speed table: what the grading checker recorded in each speed cell, never its printed text."""
import csv

import nbformat

from grader.student.checks import SpeedResult
from grader.pipeline.class_report import speed_figure, speed_table, write_report


def _result(ratio):
    return SpeedResult("vector add", (64,), "float16", "NVIDIA H100 80GB HBM3", "torch.add", yours_ms=1.0,
                       baseline_ms=ratio, target=0.9, gbs=3000.0, ceiling_gbs=3200.0,
                       placements={"yours": [1.0, 1.0], "baseline": [ratio, ratio]})


def _speed_cell(ratio):
    """A graded speed cell as the checker leaves it: the student's report printed, the record kept."""
    r = _result(ratio)
    cell = nbformat.v4.new_code_cell("grader.check_speed(...)")
    cell.metadata["grading_results"] = [dict(r.record(2 * r.credit, 2), credited=True)]
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=r.report())]
    return cell


def test_writes_a_csv_row_per_student_and_a_plot(tmp_path):
    for student, ratio in (("alice", 1.0), ("bob", 0.6)):
        cell = _speed_cell(ratio)
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
    # and a printed report alone (a cell without a record) is no row
    bare = tmp_path / "autograded" / "bob" / "day1" / "vector_add.ipynb"
    bare.parent.mkdir(parents=True)
    printed = nbformat.v4.new_code_cell("grader.check_speed(...)")
    printed.outputs = [nbformat.v4.new_output("stream", name="stdout", text=_result(0.5).report())]
    nbformat.write(nbformat.v4.new_notebook(cells=[printed]), bare)
    r = SpeedResult("vector add", (64,), "float32", "NVIDIA H100 80GB HBM3", "torch.add", yours_ms=1.0,
                    baseline_ms=0.93, target=0.9, gbs=2900.0, ceiling_gbs=3000.0)
    record = dict(r.record(2.0, 2), credited=True)
    assert record["ratio"] == 0.93 and record["score"] == "2.00/2" and round(record["pct_of_ceiling"]) == 97
    cell = nbformat.v4.new_code_cell("grader.check_speed(...)")
    cell.metadata["grading_results"] = [record]
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=_result(0.5).report())]  # not read
    path = tmp_path / "autograded" / "ann" / "day1" / "vector_add.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    (row,) = speed_table(tmp_path / "autograded", "day1")
    assert row["ratio"] == 0.93 and row["gbs"] == 2900.0 and row["score"] == "2.00/2" and row["student"] == "ann"
    csv_path, _ = write_report(tmp_path / "autograded", "day1", tmp_path / "out")
    (written,) = list(csv.DictReader(open(csv_path)))
    assert float(written["ratio"]) == 0.93 and written["shape"] == "(64,)"
