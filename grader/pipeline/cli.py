"""The course's command line, for instructors (run from the repository root).

    course-grader release [day1 ...]          regenerate exercises/ from solutions/ with nbgrader
    course-grader collect SOURCE --day DAY [--id-map CSV]
                                              copy submissions (a folder or an LMS/Colab zip) into grading/
    course-grader sanitize DAY                repair collected notebooks (restored tests, duplicates, bad files)
    course-grader autograde DAY [--timeout S] [--workers N] [--shard K/N]
                                              grade each notebook in its own process, killed past S
                                              seconds, N at a time (default: one per GPU), or only
                                              share K of N of the class (one Slurm/Kubernetes task)
    course-grader report DAY                  grades CSV, per-student HTML feedback, the class's speed table
    course-grader doctor                      check this grading machine and say what to fix
    course-grader bench [--repeats N] [--days ...] [--exercises KEY ...]
                                              grade every reference solution's speed N times on this GPU, and a
                                              slow variant of each -> docs/benchmarks.md
    course-grader course-run [--days ...]     run every lecture notebook and autograde every day's solutions
                                              (full marks) and untouched exercises (zero), each timed
    course-grader colab [--repo URL --ref TAG]
                                              point every notebook's Colab install cell and the README's
                                              Colab links at the students' repository, regenerate exercises/
    course-grader student-edition OUT         build the repository students clone: no solutions, no hidden tests
"""
from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from grader.course import REPO, Course


@functools.cache
def course() -> Course:
    """The course this command line works on: the repository it is installed from."""
    return Course.of(REPO)


def days() -> list:
    return course().days()


def unknown_day(day: str, command: str, known: list | None = None) -> bool:
    """True (having said so) when the course has no such day: a typo must not look like an empty class."""
    known = days() if known is None else known
    if day in known:
        return False
    print(f"course-grader {command}: the course has no day {day!r} (its days: {', '.join(known)})", file=sys.stderr)
    return True


def missing_step(day: str, command: str) -> bool:
    """True (having said so) when the step before this one has not been run for the day: sanitize and
    autograde need collected submissions, report needs autograded notebooks."""
    if command in ("sanitize", "autograde") and not course().students(day):
        print(f"course-grader {command}: no submissions collected for {day} in grading/submitted: run "
              f"course-grader collect SOURCE --day {day} first", file=sys.stderr)
        return True
    if command == "report" and not any(course().autograded.glob(f"*/{day}/*.ipynb")):
        print(f"course-grader report: nothing autograded for {day} yet: run course-grader autograde {day} first",
              file=sys.stderr)
        return True
    return False


def release(selected: list) -> int:
    # A new day is in the solutions before its first release: release knows the days of the source.
    source_days = course().source_days()
    if any(unknown_day(day, "release", source_days) for day in selected):
        return 2
    from grader.pipeline.notebooks import state_grading_note
    for day in selected or source_days:
        print(f"releasing {day}")
        for path in sorted((course().source / day).glob("*.ipynb")):
            if state_grading_note(path):
                print(f"  {path.name}: the grading note restated from grader/pipeline/code_rules.py")
        proc = course().nbgrader("generate_assignment", day, "--force", capture=False)
        if proc.returncode:
            return proc.returncode
    return 0


def bench(repeats: int, slow_repeats: int, out: Path, days=(), figures: Path | None = None, keys=()) -> int:
    from grader import exercises
    from grader.pipeline import benchmark_report
    if any(unknown_day(day, "bench") for day in days):
        return 2
    known = {ex.key for ex in exercises.all_exercises()}
    unknown = [key for key in keys if key not in known or (days and key.split(".")[0] not in days)]
    if unknown:   # a typo must not make an empty report that says every run was at its target
        print(f"course-grader bench: no exercise {', '.join(map(repr, unknown))}"
              f"{' in ' + ', '.join(days) if days else ''} (the exercises: {', '.join(sorted(known))})",
              file=sys.stderr)
        return 2
    return benchmark_report.write_report(repeats, slow_repeats, out, days=days, figures=figures, keys=keys)


def course_run(days: list, lectures: bool, autograde_: bool, out: Path | None, cell_timeout: float) -> int:
    from grader.pipeline import course_run as run
    if not (lectures or autograde_):
        lectures = autograde_ = True
    return run.main(days, lectures, autograde_, out or course().grading / "course-run.md", cell_timeout_s=cell_timeout)


def collect(source: Path, day: str, id_map: Path | None = None) -> int:
    import zipfile
    from grader.pipeline import submissions
    if unknown_day(day, "collect"):
        return 2
    if not source.exists():
        print(f"course-grader collect: {source} does not exist", file=sys.stderr)
        return 2
    if not source.is_dir() and not zipfile.is_zipfile(source):
        print(f"course-grader collect: {source} is neither a folder nor a zip file (an LMS download is one "
              f"of the two)", file=sys.stderr)
        return 2
    ids = None
    if id_map is not None:
        try:
            ids = submissions.read_id_map(id_map)
        except (OSError, ValueError) as e:
            print(f"course-grader collect: the id map: {e}", file=sys.stderr)
            return 2
    report = submissions.collect(source, day, course().notebooks(day), course().submitted, ids)
    print(report.summary())
    return 0


def sanitize(day: str) -> int:
    from grader.pipeline import submissions
    if unknown_day(day, "sanitize") or missing_step(day, "sanitize"):
        return 2
    results = submissions.sanitize_day(course().submitted, course().release / day, day)
    for (student, notebook), fixes in sorted(results.items()):
        for fix in fixes:
            print(f"{student}/{day}/{notebook}: {fix}")
    print(f"sanitized {len(results)} notebooks")
    return 0


def autograde(day: str, timeout: float, workers, shard) -> int:
    from grader.pipeline import batch
    if unknown_day(day, "autograde"):
        return 2
    try:
        shard = batch.parse_shard(shard) if shard else None
    except ValueError as e:
        print(f"course-grader autograde: {e}", file=sys.stderr)
        return 2
    from grader.pipeline import gpus
    why_not = gpus.unusable_gpu()
    if why_not:
        print(f"course-grader autograde: {why_not}", file=sys.stderr)
        return 2
    if missing_step(day, "autograde"):
        return 2
    try:
        batch.autograde_day(REPO, day, timeout_s=timeout, workers=workers, shard=shard)
    except ValueError as e:  # too many workers for the GPUs, a day not released
        print(f"course-grader autograde: {e}", file=sys.stderr)
        return 2
    return 0


def report(day: str) -> int:
    if unknown_day(day, "report") or missing_step(day, "report"):
        return 2
    grades = course().grading / f"grades-{day}.csv"
    for args in (["generate_feedback", day, "--force"], ["export", "--to", str(grades)]):
        proc = course().nbgrader(*args, capture=False)
        if proc.returncode:
            return proc.returncode
    keep_rows_of(grades, day)
    from grader.pipeline import class_report, failure_feedback
    unfinished = failure_feedback.write(course(), day)   # nbgrader has no feedback for a notebook that died
    if unfinished:
        print(f"{len(unfinished)} notebooks did not finish grading: their feedback says what happened")
    csv_path, png_path = class_report.write_report(course().autograded, day, course().grading)
    if not class_report.speed_table(course().autograded, day):
        print(class_report.no_speed_data(day))
    print(f"grades: {grades.relative_to(REPO)}; feedback: {course().feedback.relative_to(REPO)}/<student>/{day}/; "
          f"speed across the class: {csv_path.relative_to(REPO)} and {png_path.relative_to(REPO)}")
    return 0


def keep_rows_of(grades: Path, day: str) -> None:
    """nbgrader exports every assignment: the day's file keeps the day's rows."""
    import csv
    with open(grades, newline="") as f:
        rows = list(csv.DictReader(f))
        fields = rows[0].keys() if rows else None
    if fields is None:
        return
    with open(grades, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields))
        writer.writeheader()
        writer.writerows(r for r in rows if r["assignment"] == day)


def doctor() -> int:
    from grader.pipeline import doctor as d
    findings = d.check(REPO)
    for f in findings:
        print(f.line())
    return 0 if all(f.ok for f in findings) else 1


def colab(repo: str | None = None, ref: str | None = None) -> int:
    from grader import colab as c
    if (repo is None) != (ref is None):
        print("course-grader colab: give both --repo and --ref, or neither (to rewrite from the settings)",
              file=sys.stderr)
        return 2
    if repo is not None:
        try:
            c.configure(repo, ref)
        except ValueError as e:
            print(f"course-grader colab: {e}", file=sys.stderr)
            return 2
    for path in c.rewrite(REPO):
        print(f"updated {path.relative_to(REPO)}")
    return release([])  # exercises/ are nbgrader's copies of solutions/


def student_edition(out: Path) -> int:
    from grader.pipeline import edition
    try:
        edition.build(out)
    except ValueError as e:
        print(f"course-grader student-edition: {e}", file=sys.stderr)
        return 2
    print(f"student edition in {out}: commit it to the students' repository (README, 'Two repositories')")
    return 0


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course-grader", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("release", help="regenerate exercises/ from solutions/",
                       description="Generate the students' exercises/DAY from solutions/DAY with nbgrader (the "
                       "grading rules restated in each notebook) and register the day in the gradebook.")
    p.add_argument("days", nargs="*", help="the days to release (default: every day)")
    p = sub.add_parser("collect", help="copy submissions into grading/submitted",
                       description="Copy one day's notebooks from an LMS download (Canvas, Moodle, Blackboard) "
                       "or a folder into grading/submitted/STUDENT/DAY/, keeping each student's newest attempt; "
                       "every file it could not match is listed.")
    p.add_argument("source", type=Path, help="the LMS's zip, or a folder of notebooks")
    p.add_argument("--day", required=True, help="the day the notebooks belong to (day1, day2, ...)")
    p.add_argument("--id-map", type=Path, default=None,
                   help="a CSV of two columns, LMS id and student id: students are named by it, and files of "
                   "anyone it does not list are reported instead of collected")
    p = sub.add_parser("sanitize", help="repair collected notebooks before grading",
                       description="Rebuild each collected notebook of DAY on the release: test cells restored, "
                       "duplicated graded cells dropped, outputs cleared, unreadable files graded as blank, "
                       "and the submission rules enforced. Run after collect, before autograde.")
    p.add_argument("day", help="the day to sanitize (day1, day2, ...)")
    p = sub.add_parser("autograde", help="autograde every notebook of every student, each under a time limit",
                       description="Autograde a day: each (student, notebook) in its own process tree, killed "
                       "past --timeout (that notebook scores 0, the others are still graded); writes "
                       "grading/runs-DAY.csv. See docs/grading-at-scale.md.")
    p.add_argument("day", help="the day to grade (day1, day2, ...)")
    p.add_argument("--timeout", type=float, default=900,
                   help="seconds per notebook before its process tree is killed (default 900)")
    p.add_argument("--workers", type=int, default=None,
                   help="notebooks graded at once; default one per visible GPU (each worker gets its own GPU "
                   "through CUDA_VISIBLE_DEVICES, never more workers than GPUs), 1 without a GPU. Several "
                   "workers share a SQLite gradebook safely on one machine; set NBGRADER_DB_URL to a "
                   "PostgreSQL URL when several machines grade")
    p.add_argument("--shard", metavar="K/N", default=None,
                   help="grade only the K-th of N shares of the class (K from 0; student K, K+N, ... in "
                   "sorted order), for Slurm array tasks or a Kubernetes indexed Job; writes "
                   "grading/runs-DAY-shardKofN.csv")
    p = sub.add_parser("report", help="grades CSV, feedback and the class's speed table",
                       description="After autograde: each student's HTML feedback (grading/feedback), the day's "
                       "grades (grading/grades-DAY.csv) and the class's speed table and plot.")
    p.add_argument("day", help="the day to report (day1, day2, ...)")
    sub.add_parser("doctor", help="check this grading machine")
    p = sub.add_parser("bench", help="time the reference solutions on this GPU")
    p.add_argument("--repeats", type=int, default=10, help="speed gradings of each reference (default 10)")
    p.add_argument("--slow-repeats", type=int, default=3, help="gradings of each slow variant (default 3)")
    p.add_argument("--days", nargs="*", default=[], help="only these days (default: every day)")
    p.add_argument("--exercises", nargs="*", default=[],
                   help="only these exercises, by key (day5.dropout; default: every one of the days)")
    p.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md",
                   help="where to write the report (default docs/benchmarks.md)")
    p.add_argument("--figures", type=Path, default=REPO / "grader" / "exercises" / "measured_figures.py",
                   help="where to write the reference solutions' figures on this card, which speed feedback "
                   "shows beside a student's (default grader/exercises/measured_figures.py)")
    p = sub.add_parser("course-run", help="run every lecture and autograde every day's solutions and exercises")
    p.add_argument("--days", nargs="*", default=[], help="only these days (default: every day)")
    p.add_argument("--lectures", action="store_true", help="only the lectures (with --autograde: both)")
    p.add_argument("--autograde", action="store_true", help="only the autograde (with --lectures: both)")
    p.add_argument("--out", type=Path, default=None,
                   help="where to write the report (default grading/course-run.md)")
    p.add_argument("--cell-timeout", type=float, default=900, help="seconds a lecture cell may take (default 900)")
    p = sub.add_parser("colab", help="point the Colab install cells and README links at the students' repository",
                       description="Write the students' published repository and tag into grader/colab.py (with "
                       "--repo and --ref), then rewrite every notebook's Colab install cell and the README's "
                       "Colab links from it and regenerate exercises/.")
    p.add_argument("--repo", help="the students' public GitHub repository, https://github.com/OWNER/NAME")
    p.add_argument("--ref", help="a tag (or commit) there whose grader matches these notebooks")
    p = sub.add_parser("student-edition", help="build the repository students clone: no solutions, no hidden tests",
                       description="Write the student edition (lectures, released exercises, the grader without "
                       "hidden cases or prediction formulas, a student README) into OUT, a new folder.")
    p.add_argument("out", type=Path, help="a new (or empty) folder for the edition")
    return parser


def main(argv=None) -> int:
    args = make_parser().parse_args(argv)
    if args.command == "release":
        return release(args.days)
    if args.command == "collect":
        return collect(args.source, args.day, args.id_map)
    if args.command == "sanitize":
        return sanitize(args.day)
    if args.command == "autograde":
        return autograde(args.day, args.timeout, args.workers, args.shard)
    if args.command == "report":
        return report(args.day)
    if args.command == "doctor":
        return doctor()
    if args.command == "colab":
        return colab(args.repo, args.ref)
    if args.command == "student-edition":
        return student_edition(args.out)
    if args.command == "course-run":
        return course_run(args.days, args.lectures, args.autograde, args.out, args.cell_timeout)
    return bench(args.repeats, args.slow_repeats, args.out, args.days, args.figures, args.exercises)


if __name__ == "__main__":
    sys.exit(main())
