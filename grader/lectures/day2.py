"""Drawings, a widget and small helpers for the Day 2 lecture notebooks (reductions, softmax).

Nothing here is graded. The functions live in a module so that the notebooks stay short and the
logic behind the pictures is unit-tested (tests/test_lecture_day2.py).

Four topics:

* how the programs of a row-wise reduction cover a matrix: `reduction_tiling`,
  `draw_reduction_tiling` (one row per program, several rows per program, a row in chunks);
* the online softmax of Milakov & Gimelshein ("Online normalizer calculation for softmax", 2018):
  `online_softmax_steps` (the running max and running sum after every chunk),
  `draw_online_softmax_step` and `online_softmax_widget` (a slider over the chunks);
* reading a `torch.profiler` run: `op_times` (time per kernel on a GPU, per operator on the CPU);
* reading what the compiler made, without a GPU: `compile_for_gpu` (a kernel compiled for an H100's
  sm_90 in a child Python: the compiler's error, or the PTX, SASS and metadata) and `launch_signature`.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from grader.lectures.drawing import figure_image, show_in



def _program_colors(n: int):
    cmap = plt.get_cmap("tab10")
    return [cmap(i % 10) for i in range(n)]


# --------------------------------------------------------------------------------------------
# How the programs of a row-wise reduction cover a matrix
# --------------------------------------------------------------------------------------------


def reduction_tiling(n_rows: int, n_cols: int, rows_per_program: int = 1,
                     block: int | None = None) -> dict:
    """Which program reads which element in a row-wise reduction, and in which loop iteration.

    Each program owns `rows_per_program` consecutive rows; it walks along them in chunks of
    `block` columns (default: the next power of two >= n_cols, i.e. the whole row in one chunk).
    Returns a dict with
      n_programs:  cdiv(n_rows, rows_per_program), the grid size,
      n_chunks:    cdiv(n_cols, block), the loop iterations of each program,
      block:       the block width used,
      program:     an (n_rows, n_chunks * block) int array: the program that handles each lane,
      chunk:       the same shape: the loop iteration in which the lane is loaded,
      mask:        the same shape: True where the lane is inside the matrix (column < n_cols).
    """
    if n_rows < 1 or n_cols < 1 or rows_per_program < 1:
        raise ValueError("n_rows, n_cols and rows_per_program must be positive")
    if block is None:
        block = 1 << (n_cols - 1).bit_length()          # as triton.next_power_of_2
    if block < 1 or block & (block - 1):
        raise ValueError("block must be a power of two (tl.arange needs one)")
    n_chunks = -(-n_cols // block)
    lanes = n_chunks * block
    rows = np.arange(n_rows)[:, None]
    cols = np.arange(lanes)[None, :]
    program = np.broadcast_to(rows // rows_per_program, (n_rows, lanes)).copy()
    chunk = np.broadcast_to(cols // block, (n_rows, lanes)).copy()
    mask = np.broadcast_to(cols < n_cols, (n_rows, lanes)).copy()
    return {"n_programs": -(-n_rows // rows_per_program), "n_chunks": n_chunks, "block": block,
            "program": program, "chunk": chunk, "mask": mask}


def draw_reduction_tiling(n_rows: int, n_cols: int, rows_per_program: int = 1,
                          block: int | None = None, ax=None):
    """Draw `reduction_tiling`: a colour per program, the chunk index in each cell.

    Lanes past the end of a row (masked off) are grey and hatched. Returns (fig, ax).
    """
    t = reduction_tiling(n_rows, n_cols, rows_per_program, block)
    lanes = t["n_chunks"] * t["block"]
    if ax is None:
        fig, ax = plt.subplots(figsize=(min(14.0, 2.5 + 0.3 * lanes), min(8.0, 1.6 + 0.3 * n_rows)))
    else:
        fig = ax.figure
    colors = _program_colors(t["n_programs"])
    annotate = t["n_chunks"] > 1 and lanes <= 48
    for r in range(n_rows):
        for c in range(lanes):
            live = t["mask"][r, c]
            ax.add_patch(plt.Rectangle((c, r), 1, 1,
                                       facecolor=colors[t["program"][r, c]] if live else "0.85",
                                       edgecolor="white" if live else "0.6",
                                       hatch=None if live else "///", linewidth=0.8))
            if annotate and live:
                ax.text(c + 0.5, r + 0.5, str(t["chunk"][r, c]), ha="center", va="center",
                        fontsize=7)
    for k in range(1, t["n_chunks"]):                    # chunk boundaries
        ax.axvline(k * t["block"], color="black", lw=1.5)
    ax.set_xlim(0, lanes)
    ax.set_ylim(n_rows, 0)
    ax.set_xlabel("column (lane of a chunk)" + ("; number in a cell = loop iteration" if annotate
                                                 else ""))
    ax.set_ylabel("row")
    ax.set_title(f"{n_rows} x {n_cols} matrix, {rows_per_program} row(s) per program, "
                 f"BLOCK = {t['block']}: {t['n_programs']} programs, {t['n_chunks']} chunk(s) "
                 "per row", fontsize=9)
    ax.tick_params(length=0)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    return fig, ax


# --------------------------------------------------------------------------------------------
# The online softmax
# --------------------------------------------------------------------------------------------


def softmax_np(x) -> np.ndarray:
    """Reference softmax of a 1-D array, in float64, with the max subtracted."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


def online_softmax_steps(x, chunk: int) -> list[dict]:
    """Run the online softmax recurrence over `x` in chunks and return the state after each chunk.

    With m the running maximum and s the running sum of exp(x_i - m) over the elements seen so far,
    a new chunk c updates them as
        m_new = max(m_old, max(c))
        s_new = s_old * exp(m_old - m_new) + sum(exp(c - m_new)).
    Each step is a dict with: step, start, stop (the chunk is x[start:stop]), chunk_max, m_old,
    s_old, scale (= exp(m_old - m_new), the factor that re-bases the old sum), m, s, and partial:
    exp(x[:stop] - m) / s, the softmax of the prefix seen so far (it becomes the true softmax of x
    at the last step). Everything is float64. Before the first chunk m = -inf and s = 0.
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError("x must not be empty")
    if chunk < 1:
        raise ValueError("chunk must be positive")
    m, s = -np.inf, 0.0
    steps = []
    for k, start in enumerate(range(0, x.size, chunk)):
        stop = min(start + chunk, x.size)
        c = x[start:stop]
        chunk_max = float(c.max())
        m_new = max(m, chunk_max)
        if m_new == -np.inf:            # everything so far is -inf: nothing to re-base
            scale, chunk_sum = 1.0, 0.0
        else:
            scale = float(np.exp(m - m_new))          # exp(-inf) = 0 at the first chunk
            chunk_sum = float(np.exp(c - m_new).sum())
        s_new = s * scale + chunk_sum
        with np.errstate(invalid="ignore", divide="ignore"):
            partial = np.exp(x[:stop] - m_new) / s_new
        steps.append({"step": k, "start": start, "stop": stop, "chunk_max": chunk_max,
                      "m_old": m, "s_old": s, "scale": scale, "chunk_sum": chunk_sum,
                      "m": m_new, "s": s_new, "partial": partial})
        m, s = m_new, s_new
    return steps


def draw_online_softmax_step(x, chunk: int, step: int, axes=None):
    """Two panels for one step of the online softmax.

    Top: the logits, coloured by seen / current chunk / not yet seen, with the running max m and
    the true max. Bottom: the true softmax of the whole row against the partial result
    exp(x_i - m) / s for the elements seen so far. Returns (fig, axes).
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    steps = online_softmax_steps(x, chunk)
    if not 0 <= step < len(steps):
        raise ValueError(f"step must be in 0..{len(steps) - 1}")
    st = steps[step]
    if axes is None:
        fig, axes = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    else:
        fig = axes[0].figure
    ax1, ax2 = axes
    idx = np.arange(x.size)
    colors = np.where(idx < st["start"], "tab:blue", np.where(idx < st["stop"], "tab:orange", "0.8"))
    ax1.bar(idx, x, color=colors, width=0.8)
    ax1.axhline(st["m"], color="tab:red", lw=1.5, label=f"running max m = {st['m']:.3g}")
    ax1.axhline(x.max(), color="black", ls=":", lw=1, label=f"true max = {x.max():.3g}")
    for k in range(1, len(steps)):
        ax1.axvline(k * chunk - 0.5, color="0.5", lw=0.6)
    ax1.set_ylabel("logit $x_i$")
    ax1.legend(fontsize=8, loc="upper left")
    ax1.set_title(f"step {step} of {len(steps) - 1}: chunk x[{st['start']}:{st['stop']}] "
                  f"(orange); blue = seen before, grey = not seen yet", fontsize=9)
    true = softmax_np(x)
    ax2.bar(idx, true, color="0.75", width=0.8, label="true softmax of the whole row")
    ax2.plot(idx[:st["stop"]], st["partial"], "o", color="tab:red", ms=4,
             label=r"partial: $e^{x_i - m} / s$ over the elements seen")
    ax2.set_xlabel("element index $i$")
    ax2.set_ylabel("probability")
    ax2.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig, axes


def _online_summary(x, steps, step: int) -> str:
    st = steps[step]
    true = softmax_np(x)
    err = float(np.abs(st["partial"] - true[:st["stop"]]).max())
    scale = ("exp(-inf) = 0 (first chunk)" if st["m_old"] == -np.inf
             else f"exp({st['m_old']:.4g} - {st['m']:.4g}) = {st['scale']:.4g}")
    return ("<table>"
            f"<tr><td>chunk</td><td>x[{st['start']}:{st['stop']}], its max {st['chunk_max']:.4g}</td></tr>"
            f"<tr><td>running max</td><td>m: {st['m_old']:.4g} &rarr; <b>{st['m']:.4g}</b> "
            f"(true max {x.max():.4g})</td></tr>"
            f"<tr><td>re-base factor</td><td>{scale}</td></tr>"
            f"<tr><td>running sum</td><td>s = {st['s_old']:.4g} &times; {st['scale']:.4g} + "
            f"{st['chunk_sum']:.4g} = <b>{st['s']:.4g}</b> "
            f"(true sum of exp(x - max): {np.exp(x - x.max()).sum():.4g})</td></tr>"
            f"<tr><td>partial vs true softmax</td><td>largest difference over the {st['stop']} "
            f"elements seen: {err:.3g}</td></tr></table>")


def demo_logits(n: int = 40, seed: int = 0) -> np.ndarray:
    """Random logits with one large value at index 29, so the running max jumps in chunk 3 of 8."""
    x = np.random.default_rng(seed).normal(0.0, 1.5, n)
    if n > 29:
        x[29] = 4.5
    return x


def online_softmax_widget(x=None, chunk: int = 8, seed: int = 0):
    """A slider over the chunks of the online softmax, redrawing `draw_online_softmax_step`.

    x: a 1-D array of logits (default: `demo_logits(40, seed)`, with one large value late in the
    row, so that the running max jumps and the old sum has to be re-based). Returns an ipywidgets.VBox with
    extra attributes `step_slider`, `summary` (HTML), `image` (the drawing), `steps` and `redraws`.
    """
    import ipywidgets as widgets

    if x is None:
        x = demo_logits(40, seed)
    x = np.asarray(x, dtype=np.float64).ravel()
    steps = online_softmax_steps(x, chunk)
    step_slider = widgets.IntSlider(value=0, min=0, max=len(steps) - 1, step=1,
                                    description="chunk", continuous_update=False)
    summary = widgets.HTML()
    image = figure_image()
    box = widgets.VBox([step_slider, summary, image])
    box.step_slider, box.summary, box.image, box.steps, box.redraws = \
        step_slider, summary, image, steps, 0

    def redraw(_change=None):
        fig, _ = draw_online_softmax_step(x, chunk, step_slider.value)
        summary.value = _online_summary(x, steps, step_slider.value)
        show_in(image, fig)
        box.redraws += 1

    step_slider.observe(redraw, names="value")
    redraw()
    return box


# --------------------------------------------------------------------------------------------
# Reading torch.profiler
# --------------------------------------------------------------------------------------------


def _device_us(evt) -> float:
    for name in ("self_device_time_total", "self_cuda_time_total"):   # newer torch, older torch
        us = getattr(evt, name, None)
        if us is not None:
            return us
    return 0.0


def op_times(prof, on_gpu: bool, kernels: bool = False) -> list[tuple[str, int, float]]:
    """(name, calls, total ms) from a finished `torch.profiler.profile`, largest time first.

    kernels=False: the `aten::` operators, each with the time of its own work (not of operators it
    calls): on a GPU the device time of the kernels it launched, on the CPU its self CPU time.
    kernels=True (GPU only): the CUDA kernels themselves, under their kernel names.
    Regions labelled with `record_function` and entries with no time are left out.
    """
    if kernels and not on_gpu:
        raise ValueError("kernel times need a GPU run (on_gpu=True)")
    rows = []
    for evt in prof.key_averages():
        if getattr(evt, "is_user_annotation", False):     # record_function labels, not work
            continue
        is_kernel = "cuda" in str(getattr(evt, "device_type", "")).lower()
        if kernels:
            if not is_kernel:
                continue
            us = _device_us(evt)
        else:
            if is_kernel or not evt.key.startswith("aten::"):
                continue
            us = _device_us(evt) if on_gpu else evt.self_cpu_time_total
        if us > 0:
            rows.append((evt.key, int(evt.count), us / 1e3))
    return sorted(rows, key=lambda r: -r[2])


# --------------------------------------------------------------------------------------------
# Compiling a kernel for a GPU on a machine without one (notebook 07, debugging)
# --------------------------------------------------------------------------------------------

# The targets a lecture may name: (backend, compute capability, warp size).
GPU_TARGETS = {"sm_90": ("cuda", 90, 32), "sm_80": ("cuda", 80, 32), "sm_75": ("cuda", 75, 32)}
_TRITON_TYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int64": "i64",
                 "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "i1"}


def launch_signature(kernel, *args, **kwargs) -> tuple[dict, dict, list]:
    """(signature, constexprs, aligned) that a launch `kernel[grid](*args, **kwargs)` would compile:
    signature maps each argument to its Triton type ("*fp32" for a float32 tensor, "i32" for an int that
    fits 32 bits, "i64" otherwise, "fp32" for a float, "constexpr"); constexprs holds the tl.constexpr
    values; aligned names the arguments the compiler may assume divisible by 16 (a tensor whose address
    is a multiple of 16 bytes, an int that is a multiple of 16), as Triton's launcher assumes them."""
    import torch
    names = _arg_names(kernel)
    values = dict(zip(names, args))
    unknown = sorted(set(kwargs) - set(names))
    if unknown:
        raise TypeError(f"the kernel has no argument {', '.join(unknown)}")
    values.update(kwargs)
    missing = [n for n in names if n not in values]
    if missing:
        raise TypeError(f"no value for {', '.join(missing)}: pass every argument of the kernel")
    signature, constexprs, aligned = {}, {}, []
    for name, is_constexpr in zip(names, _constexpr_flags(kernel)):
        v = values[name]
        if is_constexpr:
            signature[name], constexprs[name] = "constexpr", getattr(v, "value", v)
        elif isinstance(v, torch.Tensor):
            dtype = str(v.dtype).replace("torch.", "")
            if dtype not in _TRITON_TYPES:
                raise TypeError(f"argument {name}: tensors of {v.dtype} are not handled here")
            signature[name] = "*" + _TRITON_TYPES[dtype]
            if v.data_ptr() % 16 == 0:
                aligned.append(name)
        elif isinstance(v, bool):
            signature[name] = "i1"
        elif isinstance(v, int):
            signature[name] = "i32" if -2**31 <= v < 2**31 else "i64"
            if v % 16 == 0:
                aligned.append(name)
        elif isinstance(v, float):
            signature[name] = "fp32"
        else:
            raise TypeError(f"argument {name}: a {type(v).__name__} is not handled here")
    return signature, constexprs, aligned


def _jit_function(kernel):
    """The @triton.jit function (JITFunction, or InterpretedFunction under TRITON_INTERPRET=1)."""
    while kernel is not None and type(kernel).__name__ not in ("JITFunction", "InterpretedFunction"):
        kernel = getattr(kernel, "fn", None)          # an Autotuner or Heuristics around it
    if kernel is None:
        raise TypeError("not a @triton.jit kernel")
    return kernel


def _arg_names(kernel) -> list:
    import inspect
    return list(inspect.signature(_jit_function(kernel).fn).parameters)


def _constexpr_flags(kernel) -> list:
    import inspect
    params = inspect.signature(_jit_function(kernel).fn).parameters.values()
    return [p.annotation is not inspect.Parameter.empty and "constexpr" in str(p.annotation) for p in params]


def _kernel_module(kernel) -> str:
    """The source of a @triton.jit kernel and of the @triton.jit functions, modules and constants it
    uses, as one importable module: as the grader's GPU compile check writes it."""
    from grader.student import gpu_compile
    module, refused, _, _ = gpu_compile.source_for_compiler(_jit_function(kernel))
    if refused:
        raise ValueError(f"this kernel reads {', '.join(refused[:3])}")
    return module


def compile_for_gpu(kernel, *args, target: str = "sm_90", num_warps: int = 4, num_stages: int = 3,
                    timeout: float = 120, **kwargs) -> dict:
    """Compile `kernel` for an NVIDIA GPU as the launch `kernel[grid](*args, **kwargs)` would, without a
    GPU: Triton's wheel brings its compiler back end and NVIDIA's assembler, ptxas. The compiling happens
    in a child Python without TRITON_INTERPRET (this process may have the interpreter on).

    target: "sm_90" (H100, H200), "sm_80" (A100) or "sm_75" (T4). Returns a dict with
      ok:        whether the compiler accepted the kernel,
      error:     the compiler's message when it did not (None otherwise),
      ptx:       the PTX text ("" on failure),
      sass:      the GPU's own machine code, disassembled by the cuobjdump that Triton's wheel ships
                 ("" where that tool is missing),
      metadata:  name, num_warps, num_stages, shared (bytes of shared memory per program) and, where
                 cuobjdump is there, registers (per thread) and local_bytes (per thread: spills, stack),
      signature, constexprs, aligned: what was compiled (see launch_signature),
      target:    the target's name.
    """
    import json
    import os
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    if target not in GPU_TARGETS:
        raise ValueError(f"target must be one of {', '.join(GPU_TARGETS)}")
    signature, constexprs, aligned = launch_signature(kernel, *args, **kwargs)
    spec = {"kernel": _jit_function(kernel).fn.__name__, "signature": signature, "constexprs": constexprs,
            "aligned": aligned, "target": GPU_TARGETS[target],
            "options": {"num_warps": num_warps, "num_stages": num_stages}}
    result = {"ok": False, "error": None, "ptx": "", "sass": "", "metadata": {}, "signature": signature,
              "constexprs": constexprs, "aligned": aligned, "target": target}
    with tempfile.TemporaryDirectory(prefix="lecture-gpu-compile-") as folder:
        Path(folder, "lecture_kernels.py").write_text(_kernel_module(kernel))
        Path(folder, "spec.json").write_text(json.dumps(spec))
        env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TRITON_DEBUG")}
        try:
            proc = subprocess.run([sys.executable, "-c", _COMPILE_CHILD, folder,
                                   str(Path(__file__).resolve().parents[2])], env=env, capture_output=True,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            result["error"] = f"the compiler did not finish within {timeout} s"
            return result
        out = Path(folder, "result.json")
        if not out.exists():
            result["error"] = "the compiler's process failed:\n" + proc.stderr.strip()[-2000:]
            return result
        result.update(json.loads(out.read_text()))
    return result


_COMPILE_CHILD = r'''
import json, pathlib, sys, warnings
warnings.simplefilter("ignore")
folder = pathlib.Path(sys.argv[1])
sys.path.insert(0, str(folder))
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler.errors import CompilationError
import lecture_kernels
spec = json.loads((folder / "spec.json").read_text())
fn = getattr(lecture_kernels, spec["kernel"])
target = GPUTarget(*spec["target"])
try:
    from triton.compiler.compiler import make_backend
    divisible = make_backend(target).parse_attr("D")
except Exception:
    divisible = [["tt.divisibility", 16]]
attrs = {(fn.arg_names.index(name),): divisible for name in spec["aligned"]}
out = {"ok": False, "error": None, "ptx": "", "sass": "", "metadata": {}}
try:
    compiled = triton.compile(ASTSource(fn=fn, signature=spec["signature"], constexprs=spec["constexprs"],
                                        attrs=attrs), target=target, options=spec["options"])
except CompilationError as e:
    parts, cause = [str(e).strip()], e.__cause__
    while cause is not None and len(parts) < 4:   # the error inside a called @triton.jit function
        parts.append(str(cause).strip())
        cause = cause.__cause__
    out["error"] = "\n".join(parts)
else:
    out["ok"] = True
    out["ptx"] = compiled.asm.get("ptx", "")
    sys.path.insert(1, sys.argv[2])   # where the grader is
    from grader.student.gpu_compile import resource_usage
    out["metadata"] = resource_usage(compiled)   # with the registers per thread ptxas gave it
    try:   # the machine code (cuobjdump, from the wheel)
        from triton.tools.disasm import get_sass
        out["sass"] = get_sass(compiled.asm["cubin"])
    except Exception:
        pass
(folder / "result.json").write_text(json.dumps(out))
'''
