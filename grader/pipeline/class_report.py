"""The class's speed, read back from the autograded notebooks: a CSV and a plot per exercise.

The grading checker keeps what it measured in each speed cell's metadata (`grading_results`, from
grader.student.checks.SpeedResult.record), next to the report it prints for the student from the same
numbers; the printed report is for the student and is never parsed back.
"""
from __future__ import annotations

import csv
from pathlib import Path

import nbformat


# The columns of grading/speed-DAY.csv.
FIELDS = ["student", "notebook", "title", "shape", "dtype", "gpu", "ratio", "gbs", "pct_of_ceiling", "tflops",
          "score"]


def speed_table(autograded: Path, day: str) -> list:
    """One row per student and speed report of the day."""
    rows = []
    for path in sorted(Path(autograded).glob(f"*/{day}/*.ipynb")):
        student = path.parts[-3]
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            recorded = [r for r in cell.metadata.get("grading_results", []) if r.get("kind") == "speed"]
            rows += [dict(student=student, notebook=path.stem, **{f: r.get(f) for f in FIELDS[2:]})
                     for r in recorded]
    return rows


def no_speed_data(day: str) -> str:
    return (f"No speed was measured for {day}: it was graded without a GPU (speed cells score 0 there), "
            "or no speed cell ran.")


def _targets() -> dict:
    """Exercise title -> the speed ratio its full points need (grader/exercises)."""
    from grader import exercises
    return {spec.title: spec.target for spec in exercises.all_exercises() if getattr(spec, "target", None)}


def write_report(autograded: Path, day: str, out_dir: Path) -> tuple:
    """grading/speed-<day>.csv and speed-<day>.png (ratio per exercise across the class)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = speed_table(autograded, day)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, png_path = out_dir / f"speed-{day}.csv", out_dir / f"speed-{day}.png"
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    fig = speed_figure(rows, day)
    fig.savefig(png_path, dpi=100)
    plt.close(fig)
    return csv_path, png_path


def speed_figure(rows: list, day: str):
    """A histogram of the class's speed ratios per exercise, with PyTorch's 1x and the exercise's target."""
    import matplotlib.pyplot as plt
    titles = sorted({r["title"] for r in rows})
    targets = _targets()
    fig, axes = plt.subplots(1, max(1, len(titles)), figsize=(4 * max(1, len(titles)), 3), squeeze=False)
    for ax, title in zip(axes[0], titles):
        ratios = [r["ratio"] for r in rows if r["title"] == title and r["ratio"] is not None]
        ax.hist(ratios, bins=min(20, max(5, len(ratios))))
        ax.axvline(1.0, color="gray", linestyle=":", label="PyTorch baseline (1x)")
        if title in targets:
            ax.axvline(targets[title], color="tab:red", linestyle="--", label=f"target ({targets[title]:g}x)")
        ax.set_title(title)
        ax.set_xlabel("speed vs PyTorch (x)")
        ax.set_ylabel("students")
        ax.legend(fontsize="small")
    if not titles:
        axes[0][0].axis("off")
        axes[0][0].text(0.5, 0.5, no_speed_data(day), ha="center", va="center", wrap=True)
    fig.tight_layout()
    return fig
