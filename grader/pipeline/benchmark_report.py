"""The benchmark report: every reference solution's speed grading, repeated, against its target.

`course-grader bench --repeats 10` runs each graded speed check of the reference solutions `repeats`
times (the same `measure_speed` that grades students: correctness at the timed size, then 4 input
placements), and a deliberately slow variant of each a few times, and writes docs/benchmarks.md:
the spread of the ratios, whether any run fell below the target, what the slow variant would score,
bandwidth or TFLOP/s against the measured or datasheet ceiling, the card and the versions.
"""
from __future__ import annotations

import datetime
import statistics
from pathlib import Path

from grader.course import REPO, Course


SLOW_FACTOR = 3


def slowed(fn):
    """The reference doing its work SLOW_FACTOR times per call: right, and about that much slower.

    Whatever an exercise's kernel, this is what a correct but wasteful student kernel looks like to
    the grader (a grid too fine, blocks too small, a redundant pass); it must never reach the target.
    """
    def slow(*args):
        for _ in range(SLOW_FACTOR - 1):
            fn(*args)
        return fn(*args)
    return slow


def measure(repeats: int, slow_repeats: int, log=print, days=(), keys=()) -> tuple:
    """(speed rows, prediction rows, attention backend lines) for every solution notebook (of `days`,
    if any are named; only the exercises whose `keys` are named, if any)."""
    from grader.student import checks
    from grader import exercises
    from grader.pipeline import notebooks

    speed_rows, prediction_rows, backend_lines = [], [], []
    course = Course.of(REPO)
    for day in [d for d in course.days() if not days or d in days]:
        for path in sorted((course.source / day).glob("*.ipynb")):
            calls = [c for c in notebooks.graded_calls(path) if not keys or c[1] in keys]
            if not any(kind in ("check_speed", "check_prediction_on_gpu") for kind, _, _ in calls):
                continue
            log(f"running {path.relative_to(REPO)}")
            namespace = notebooks.run_code_cells(path)
            for kind, key, name in calls:
                fn = namespace[name]
                if kind == "check_speed":
                    results = [checks.measure_speed(key, fn, context=True) for _ in range(repeats)]
                    slow = [checks.measure_speed(key, slowed(fn)) for _ in range(slow_repeats)]
                    for r in results:
                        log(r.report())
                    log(f"  slow variant: {', '.join(f'{r.ratio:.2f}x' for r in slow)}")
                    speed_rows.append((key, results, slow))
                    if key == "day4.attention":
                        backend_lines = attention_backends(fn)
                elif kind == "check_prediction_on_gpu":
                    case, predicted, measured, _ = checks.measure_prediction(key, fn)
                    prediction_rows.append((key, case, predicted, measured, exercises.get(key).gpu_tolerance))
    return speed_rows, prediction_rows, backend_lines


def median_run(results):
    """The grading whose ratio is the median of the repeats."""
    return sorted(results, key=lambda r: r.ratio)[len(results) // 2]


def _ratio_cell(name, result) -> str:
    """A context baseline's time over the reference's in the runs they shared, or why it was not timed."""
    ms = (result.context or {}).get(name)
    if isinstance(ms, float):
        return f"{result.beside(name):.2f}x ({ms:.4f} ms)"
    return f"not timed: {ms}" if ms else "not timed"


def speed_table(speed_rows, repeats: int, slow_repeats: int) -> list:
    from grader.student import checks
    lines = [
        "| exercise | shape | dtype | baseline | baseline ms | reference ms | ratio: median (min to max) | "
        f"target | runs below target | vs PyTorch's default | vs torch.compile of the baseline | achieved | "
        f"of ceiling | peak memory: reference, baseline (target) | "
        f"slow variant ({SLOW_FACTOR}x the work): best ratio, credit |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, results, slow in speed_rows:
        ratios = [r.ratio for r in results]
        mid = median_run(results)
        below = sum(r.credit < 1 for r in results)    # time, or where it is graded too, memory
        if mid.gbs:
            achieved, ceiling = f"{mid.gbs:.0f} GB/s", f"{100 * mid.gbs / mid.ceiling_gbs:.0f}% of copy"
            if mid.of_same_copy is not None:
                ceiling += f" ({100 * mid.of_same_copy:.0f}% of a copy of the same bytes)"
        elif mid.tflops:
            achieved = f"{mid.tflops:.0f} TFLOP/s"
            ceiling = f"{100 * mid.tflops / mid.peak_tflops:.0f}% of peak" if mid.peak_tflops else ""
        else:
            achieved = ceiling = ""
        memory = (f"{mid.yours_bytes / 2**30:.3f} GiB, {mid.baseline_bytes / 2**30:.3f} GiB: {mid.memory_ratio:.2f}x "
                  f"less ({mid.memory_target:.2f}x)") if mid.memory_target else ""
        best_slow = max(slow, key=lambda r: r.ratio) if slow else None
        slow_cell = f"{best_slow.ratio:.2f}x, {best_slow.credit:.2f}" if best_slow else "not run"
        beside = mid.context or {}
        default = next((_ratio_cell(name, mid) for name in beside
                        if name not in (checks.COMPILED, checks.COPY_SAME)), "same")
        compiled = _ratio_cell(checks.COMPILED, mid)
        lines.append(f"| {key} | {mid.shape} | {mid.dtype} | {mid.baseline_name} | {mid.baseline_ms:.4f} | "
                     f"{mid.yours_ms:.4f} | {statistics.median(ratios):.2f}x ({min(ratios):.2f} to "
                     f"{max(ratios):.2f}) | {mid.target:.2f}x | {below} of {len(results)} | {default} | {compiled} | "
                     f"{achieved} | {ceiling} | {memory} | {slow_cell} |")
    return lines


def write_report(repeats: int, slow_repeats: int, out: Path, log=print, days=(), figures: Path | None = None,
                 keys=()) -> int:
    """Measure and write the report to `out`; with `figures`, also the references' figures on this card
    (grader/exercises/measured_figures.py, which speed feedback shows beside a student's)."""
    import torch

    import grader
    from grader import timing

    dev = grader.setup()
    if not dev.is_gpu:
        log("bench needs a CUDA GPU: the speed of the reference solutions is measured there.")
        return 2
    speed_rows, prediction_rows, backend_lines = measure(repeats, slow_repeats, log, days, keys)
    if figures is not None and speed_rows:
        from grader.exercises import measured_figures, reference_figures
        when = f"{datetime.date.today().isoformat()}, torch {dev.torch_version}, triton {dev.triton_version}"
        measured = {key: reference_figures.of_result(median_run(results)) for key, results, _ in speed_rows}
        known = measured_figures.MEASURED
        if figures.exists():          # a file an earlier run (of other days, say) wrote: added to
            namespace = {}
            exec(figures.read_text(), namespace)
            known = namespace.get("MEASURED", known)
        figures.write_text(reference_figures.module_text(reference_figures.with_card(known, dev.name, when, measured)))
        log(f"figures of the reference solutions on {dev.name} written to {figures}")
    lines = [
        "# Reference solutions vs PyTorch",
        "",
        f"Regenerated by `make bench` on {datetime.date.today().isoformat()}: **{dev.name}** "
        f"(compute capability {dev.capability[0]}.{dev.capability[1]}), torch {dev.torch_version}, "
        f"triton {dev.triton_version}, CUDA {torch.version.cuda} runtime. Measured copy bandwidth: "
        f"{timing.copy_bandwidth_gbs():.0f} GB/s (1 GiB device-to-device copy, read + write).",
        "",
        f"Each row is the speed grading of a reference solution (`grader.student.checks.measure_speed`, as a "
        f"student's is graded: correctness at the timed size, then medians of interleaved runs with a "
        f"cold L2 over 4 placements of the inputs), repeated {repeats} times. Ratio = baseline time / "
        f"reference time; full credit from the target, none below half of it. The slow variant is the "
        f"reference doing its work {SLOW_FACTOR} times per call, graded {slow_repeats} times: its best "
        f"ratio and the credit it would get. Memory-bound exercises are compared with the measured copy "
        f"bandwidth (a 1 GiB copy) and, in brackets, with a copy of as many bytes as they move, timed in the "
        f"same runs (a copy of a graded size is slower than one of 1 GiB); matrix products with the card's "
        f"dense 16-bit datasheet peak. Where peak memory is "
        f"graded too, a run counts as below target when either figure is; the score is the lower credit."
        + (f" Days: {', '.join(days)}." if days else "") + (f" Exercises: {', '.join(keys)}." if keys else ""),
        "",
    ] + speed_table(speed_rows, repeats, slow_repeats)
    all_pass = all(r.credit >= 1 for _, results, _ in speed_rows for r in results)
    slow_never = all(r.credit < 1 for _, _, slow in speed_rows for r in slow)
    lines += ["", f"Every reference run at or above its target: **{'yes' if all_pass else 'NO'}**. "
                  f"Slow variant below its target in every run: **{'yes' if slow_never else 'NO'}**."]
    if prediction_rows:
        lines += ["", "Predictions of the reference solutions, given the measured bandwidth:", "",
                  "| exercise | arguments | predicted ms | measured ms | off | allowed |", "|---|---|---|---|---|---|"]
        for key, case, predicted, measured, tol in prediction_rows:
            lines.append(f"| {key} | {case[:-1]} | {predicted:.4f} | {measured:.4f} | "
                         f"{100 * abs(predicted - measured) / measured:.0f}% | {100 * tol:.0f}% |")
    lines += backend_lines
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    log("\n".join(lines))
    return 0 if all_pass and slow_never else 1


def attention_backends(fn) -> list:
    """Markdown: the reference attention's TFLOP/s next to every SDPA backend that runs here."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from grader import timing

    backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                SDPBackend.MATH]
    lines = ["", "Reference FlashAttention forward against each SDPA backend (bfloat16, batch 4, 16 heads, "
             "N = 4096; TFLOP/s = 4·B·H·N²·d / time, halved when causal; medians as above):", "",
             "| head dim | causal | reference | " + " | ".join(b.name for b in backends) + " |",
             "|---|---|---|" + "---|" * len(backends)]
    for d, causal in ((64, False), (128, False), (64, True), (128, True)):
        q, k, v = (torch.randn(4, 16, 4096, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flops = 4 * 4 * 16 * 4096 * 4096 * d / (2 if causal else 1)
        calls = {"reference": lambda: fn(q, k, v, causal)}
        for backend in backends:
            try:
                with sdpa_kernel([backend]):
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            except RuntimeError:
                continue  # not available for this shape or GPU

            def run(backend=backend):
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            calls[backend.name] = run
        ms = timing.compare(calls)
        cells = [f"{flops / (ms[name] * 1e-3) / 1e12:.0f}" if name in ms else "n/a"
                 for name in ["reference"] + [b.name for b in backends]]
        lines.append(f"| {d} | {'yes' if causal else 'no'} | " + " | ".join(cells) + " |")
    return lines
