"""The instructor's command line refuses what it cannot do, with a message and exit status 2."""
import csv

import pytest

from grader.pipeline import cli


@pytest.mark.parametrize("argv", [["release", "day9"], ["collect", ".", "--day", "day9"], ["sanitize", "day9"],
                                  ["autograde", "day9"], ["report", "Day1"]])
def test_a_day_the_course_does_not_have_is_refused(argv, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "the course has no day" in err and "day1" in err


def test_collect_refuses_a_missing_path_and_a_file_that_is_not_a_zip(tmp_path, capsys):
    assert cli.main(["collect", str(tmp_path / "missing.zip"), "--day", "day1"]) == 2
    assert "does not exist" in capsys.readouterr().err
    text = tmp_path / "grades.txt"
    text.write_text("not a zip")
    assert cli.main(["collect", str(text), "--day", "day1"]) == 2
    assert "neither a folder nor a zip file" in capsys.readouterr().err


def test_a_day_s_grades_file_keeps_that_day_s_rows(tmp_path):
    grades = tmp_path / "grades-day2.csv"
    with open(grades, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["assignment", "student_id", "score"])
        writer.writerows([["day1", "ada", "8"], ["day2", "ada", "11"], ["day2", "bob", "5"], ["day3", "bob", "2"]])
    cli.keep_rows_of(grades, "day2")
    rows = list(csv.DictReader(open(grades)))
    assert [(r["assignment"], r["student_id"]) for r in rows] == [("day2", "ada"), ("day2", "bob")]


def _machine(monkeypatch, smi_rows, torch_says):
    """nvidia-smi's rows, and what torch in a fresh process says of CUDA, as a machine would give them."""
    import subprocess
    from grader.pipeline import gpus
    monkeypatch.setattr(gpus, "_nvidia_smi", lambda *query: smi_rows)
    monkeypatch.setattr(gpus.subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=torch_says, stderr=""))
    return gpus


def test_a_gpu_that_torch_cannot_use_stops_autograde_with_the_reason(monkeypatch, capsys):
    # An older driver than the torch wheel's CUDA needs: nvidia-smi sees the GPU, torch does not.
    from grader.pipeline import batch
    _machine(monkeypatch, [["NVIDIA A100-SXM4-80GB", "535.104.05"]], "False 2.13.0+cu130 13.0\n")
    monkeypatch.setattr(batch, "autograde_day", lambda *a, **k: pytest.fail("graded on a GPU it cannot use"))
    assert cli.main(["autograde", "day1"]) == 2
    err = capsys.readouterr().err
    assert "NVIDIA A100-SXM4-80GB (driver 535.104.05)" in err and "CUDA 13.0" in err and "driver" in err
    from grader.pipeline import doctor
    finding = next(f for f in doctor.check(cli.REPO) if "nvidia-smi sees" in f.what)
    assert not finding.ok


def test_a_usable_gpu_or_none_at_all_is_not_in_the_way(monkeypatch):
    assert _machine(monkeypatch, [], "False 2.13.0+cpu None\n").unusable_gpu() is None   # a CPU machine
    assert _machine(monkeypatch, [["NVIDIA H100 80GB HBM3", "580.159.04"]],
                    "True 2.13.0+cu130 13.0\n").unusable_gpu() is None


def test_collect_refuses_an_id_map_it_cannot_read(tmp_path, capsys):
    ids = tmp_path / "ids.csv"
    ids.write_text("alice\n")
    assert cli.main(["collect", str(tmp_path), "--day", "day1", "--id-map", str(ids)]) == 2
    assert "the id map" in capsys.readouterr().err
    assert cli.main(["collect", str(tmp_path), "--day", "day1", "--id-map", str(tmp_path / "missing.csv")]) == 2


@pytest.mark.parametrize("argv, says", [
    (["sanitize", "day1"], "run course-grader collect SOURCE --day day1 first"),
    (["autograde", "day1"], "run course-grader collect SOURCE --day day1 first"),
    (["report", "day1"], "run course-grader autograde day1 first")])
def test_a_step_before_its_time_says_which_step_comes_first(tmp_path, monkeypatch, capsys, argv, says):
    from grader.course import Course
    from grader.pipeline import batch, gpus
    empty = Course.of(cli.REPO).scratch_copy(tmp_path / "course")  # a course where nothing was collected yet
    monkeypatch.setattr(cli, "course", lambda: empty)
    monkeypatch.setattr(gpus, "unusable_gpu", lambda: None)
    monkeypatch.setattr(batch, "autograde_day", lambda *a, **k: pytest.fail("graded nothing"))
    assert cli.main(argv) == 2
    assert says in capsys.readouterr().err


def test_every_subcommand_s_help_describes_every_argument():
    import argparse
    (subcommands,) = [a for a in cli.make_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert {"collect", "sanitize", "autograde", "report", "student-edition", "colab"} <= set(subcommands.choices)
    assert all(choice.help for choice in subcommands._choices_actions)        # the list under course-grader -h
    for name, parser in subcommands.choices.items():
        for action in parser._actions:
            if not isinstance(action, argparse._HelpAction):
                assert action.help, f"course-grader {name} --help says nothing of {action.dest}"


def test_bench_limited_to_some_exercises_runs_only_their_notebooks(monkeypatch):
    # The benchmark runs a solution notebook only when one of its speed checks was asked for: here the
    # dropout's alone, so the day's three other notebooks are never run.
    from grader.pipeline import benchmark_report, notebooks
    from grader.student import checks
    ran, timed = [], []
    monkeypatch.setattr(notebooks, "run_code_cells", lambda path: ran.append(path.stem) or {"dropout": None})
    class Timed:
        ratio = 1.0

        def report(self):
            return ""

    monkeypatch.setattr(checks, "measure_speed", lambda key, fn, context=False: timed.append(key) or Timed())
    speed_rows, _, _ = benchmark_report.measure(1, 1, log=lambda *a: None, days=("day5",), keys=("day5.dropout",))
    assert ran == ["dropout"]
    assert [key for key, _, _ in speed_rows] == ["day5.dropout"] and set(timed) == {"day5.dropout"}


@pytest.mark.parametrize("argv, says", [(["bench", "--exercises", "day5.drop_out"], "'day5.drop_out'"),
                                        (["bench", "--days", "day4", "--exercises", "day5.dropout"], "in day4"),
                                        (["bench", "--days", "day9"], "no day 'day9'")])
def test_bench_refuses_an_exercise_or_day_it_does_not_have(argv, says, capsys):
    # before any GPU is looked for: a typo must not produce an empty report that says all is well
    assert cli.main(argv) == 2
    assert says in capsys.readouterr().err
