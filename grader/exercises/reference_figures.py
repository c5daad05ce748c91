"""What the reference solutions reach in the course's benchmark, said beside a student's own figures.

After a speed check a student sees their ratio, rate and what their kernels ask of an SM; the same
figures of the kernel the lectures build, measured on the same card, say how far there is to go and
where (more registers, fewer warps, another share of the bandwidth). `course-grader bench` measures
them (the median of its gradings of each reference) and writes `measured_figures.py`; nothing here is
typed by hand.
"""
from __future__ import annotations

import pprint

from grader.exercises import measured_figures


def said(key: str, device_name: str, figures: dict | None = None) -> list:
    """Lines on the reference solution of exercise `key`: on this card where the benchmark measured it
    there, otherwise on a card it did measure, named as such; none where it measured nothing."""
    figures = measured_figures.MEASURED if figures is None else figures
    cards = [card for card in figures if key in figures[card]["exercises"]]
    if not cards:
        return []
    card = device_name if device_name in cards else sorted(cards)[0]
    where = "on this GPU" if card == device_name else f"on an {card}, not this GPU"
    ref = figures[card]["exercises"][key]
    rate = f", {ref['rate']}" if ref.get("rate") else ""
    beside = "".join(f", {ratio:.2f}x {name}" for name, ratio in ref.get("beside", {}).items())
    lines = [f"  the course's reference solution, in its benchmark {where} ({figures[card]['when']}): "
             f"{ref['ratio']:.2f}x {ref['baseline']}{beside}{rate}" + (":" if ref.get("usage") else ".")]
    from grader.student.gpu_compile import describe_usage
    usage = [dict(u, target=card) for u in ref.get("usage", [])]
    lines += ["  " + line.replace(f" on {card}:", ":", 1) for line in describe_usage(usage)]
    return lines


def ratio_on(key: str, device_name: str, figures: dict | None = None, baseline: str | None = None) -> float | None:
    """The reference solution's ratio to the baseline on this card, where the benchmark measured it; with
    `baseline` (its name), to that one: the graded one it was measured against, or one timed beside it
    (an exercise whose graded baseline changed since), else None."""
    figures = measured_figures.MEASURED if figures is None else figures
    ref = figures.get(device_name, {}).get("exercises", {}).get(key, {})
    if baseline is None or ref.get("baseline") == baseline:
        return ref.get("ratio")
    return ref.get("beside", {}).get(baseline)


def of_result(result) -> dict:
    """One reference's figures from its median speed grading (a checks.SpeedResult)."""
    rate = None
    if result.gbs is not None:
        rate = f"{result.gbs:.0f} GB/s = {100 * result.gbs / result.ceiling_gbs:.0f}% of the copy bandwidth"
        if result.of_same_copy is not None:
            rate += f" ({100 * result.of_same_copy:.0f}% of a copy of the same bytes)"
    elif result.tflops is not None:
        rate = f"{result.tflops:.0f} TFLOP/s" + (f" = {100 * result.tflops / result.peak_tflops:.0f}% of the "
                                                 f"dense 16-bit peak" if result.peak_tflops else "")
    usage = [{k: u[k] for k in ("kernel", "registers", "local_bytes", "num_warps", "shared")}
             for u in (result.usage or [])]
    beside = {name: round(result.beside(name), 3) for name, ms in (result.context or {}).items()
              if isinstance(ms, float)}
    return {"ratio": round(result.ratio, 3), "baseline": result.baseline_name, "rate": rate, "usage": usage,
            "beside": beside}


def module_text(figures: dict) -> str:
    """measured_figures.py holding `figures`."""
    return ('"""Figures of the reference solutions, by card, written by `course-grader bench` '
            '(grader.exercises.reference_figures)."""\n\nMEASURED = ' + pprint.pformat(figures, width=110) + "\n")


def with_card(figures: dict, card: str, when: str, exercises: dict) -> dict:
    """`figures` with this card's entries replaced by (or, for a run of some days, updated with) these."""
    merged = {c: dict(v, exercises=dict(v["exercises"])) for c, v in figures.items()}
    entry = merged.setdefault(card, {"when": when, "exercises": {}})
    entry["when"] = when
    entry["exercises"].update(exercises)
    return dict(sorted(merged.items()))
