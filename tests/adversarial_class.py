"""A synthetic class of 48 students across the five days: full, partial, blank, broken and cheating.

`hand_in(folder)` writes them as an LMS download would hold them (names as students and Colab give
them); `EXPECTED` says what each must score, without a GPU and on one, and why. Built from the
release and the reference solutions, so it follows them when they change.
"""
from __future__ import annotations

import copy
import json

import nbformat

import classroom
from classroom import untouched as release
from conftest import REPO
from grader.pipeline import notebooks

NOTEBOOKS = {day: sorted(p.stem for p in (REPO / "solutions" / day).glob("*.ipynb"))
             for day in ("day1", "day2", "day3", "day4", "day5")}

# student -> (day, points without a GPU, points on a GPU, what it stands for). Day 1 is worth 8 of 14
# without a GPU (the speed cells need one), day 2 11 of 17, day 3 8 of 12, day 4 7 of 12, day 5 15 of 26;
# day 5's linear + cross-entropy 4 of 7. Every day's full solutions and untouched release are here: this
# class is where the batch grades each of them (tests/test_nbgrader_pipeline.py grades them through plain
# nbgrader on a GPU, and day 1's without one).
EXPECTED = {
    "d1_full": ("day1", 8, 14, "everything right"),
    "d1_blank": ("day1", 0, 0, "the untouched release"),
    "d1_only_add": ("day1", 3, 5, "only vector_add handed in, right"),
    "d1_torch_add": ("day1", 0, 0, "launches a kernel for show, returns x + y computed by PyTorch"),
    "d1_warning_finalizer": ("day1", 0, 0, "a kernel for show; x + y by PyTorch in a finalizer of a warning's source, "
                              "which the grader freed after the watch before it let go of warnings inside it"),
    "d1_warning_computes": ("day1", 0, 0, "a kernel for show; x + y by PyTorch in a warning's __str__ and in its file "
                            "name's startswith, which the grader's printout of warnings ran after the watch"),
    "d1_cache": ("day1", 3, 3, "right, but keeps results by input address: timed calls launch nothing"),
    "d1_token_cache": ("day1", 3, 3, "a token launch per call, the kept result returned: stale after timing"),
    "d1_mutates": ("day1", 0, 0, "writes the sum into x and returns x"),
    "d1_half_written": ("day1", 0, 0, "a grid for half the elements"),
    "d1_unwritten": ("day1", 0, 0, "returns an output its kernel never writes (freed memory may hold a result)"),
    "d1_patches_check": ("day1", 0, 0, "wrong kernel, grader.check replaced in an earlier cell"),
    "d1_fake_event": ("day1", 3, 3, "right but slow kernel, torch.cuda.Event replaced by a fake clock"),
    "d1_exec_credit": ("day1", 3, 3, "right but slow kernel, full credit patched in through exec"),
    "d1_side_stream": ("day1", 3, 0, "launches on a side stream on a GPU, where the timer does not look"),
    "d1_stderr": ("day1", 3, 5, "right, and prints warnings to stderr on every call"),
    "d1_spins": ("day1", 5, 9, "vector_add's kernel never ends (killed); the other two notebooks right"),
    "d1_crashes": ("day1", 5, 9, "vector_add reads far out of bounds (this used to kill its kernel); the others "
                   "right"),
    "d1_dies": ("day1", 5, 9, "vector_add's notebook kills its own kernel (os.abort() in a cell before the answer); "
                "the other two notebooks right"),
    "d1_cells_moved": ("day1", 8, 14, "right, a test cell deleted and a graded cell duplicated"),
    "d1_truncated": ("day1", 0, 0, "vector_add cut off mid-file"),
    "d1_empty_file": ("day1", 0, 0, "a 0-byte vector_add"),
    "d1_colab": ("day1", 8, 14, "right, all three saved by Colab (its metadata, ids, kernelspec)"),
    "d1_no_metadata": ("day1", 3, 5, "only vector_add, right, saved by an editor that dropped every cell's "
                       "metadata (nbgrader's included)"),
    "d1_huge_output": ("day1", 3, 5, "right, with 30 MB of printed output saved in the notebook"),
    "d1_r_kernel": ("day1", 3, 5, "right, saved with an R kernelspec"),
    "d1_bad_prediction": ("day1", 0, 0, "predictions in bits instead of bytes"),
    "d1_shell": ("day1", 3, 5, "right, with !nvidia-smi and %pip cells of its own"),
    "d1_swaps_run_student": ("day1", 0, 0, "wrong, no Triton; the guard's run_student swapped for PyTorch "
                             "through a parameter named self and a helper handed grader"),
    "d1_reads_memory": ("day1", 0, 0, "a kernel for show; the sum in NumPy of inputs read from /proc/self/mem"),
    "d1_gc_finalizer": ("day1", 0, 0, "a kernel for show, autotuned; x + y by PyTorch in a finalizer on a reference "
                        "cycle, timed to run in a garbage collection inside the autotuner's own work, where the "
                        "guard looks away (red team: 3 of 3 on the CPU before collections were held off)"),
    "d2_full": ("day2", 11, 17, "everything right"),
    "d2_partial": ("day2", 5, 9, "softmax right; RMSNorm backward drops the mean term; no cross-entropy"),
    "d2_torch_softmax": ("day2", 0, 0, "torch.softmax inside, a kernel launched for show"),
    "d2_ce_all_rows": ("day2", 0, 0, "cross-entropy mean over all rows, ignored ones included"),
    "d3_full": ("day3", 8, 12, "everything right"),
    "d3_torch_matmul": ("day3", 2, 4, "matmul by torch.matmul (epilogue right); only matmul handed in"),
    "d3_cublas_unwatched": ("day3", 5, 7, "matmul honest while the guard watches (its allocations are poisoned), "
                            "torch.matmul in the timed calls: the profiled timed-mode call shows cuBLAS"),
    "d3_skip_half": ("day3", 5, 7, "matmul that does the work on every other call and hands back the last "
                     "result in between (a token launch, for show): half the median time if unchecked; the "
                     "timed runs checked at random catch it"),
    "d4_full": ("day4", 7, 12, "everything right"),
    "d4_sdpa": ("day4", 0, 0, "attention by F.scaled_dot_product_attention (the block calls it, so it too)"),
    "d4_no_hopper_stub_left": ("day4", 7, 12, "everything right but the optional Hopper kernel, whose stub is left "
                               "in: it raises last in the attention cell, once the graded functions are defined"),
    "d5_full": ("day5", 15, 26, "everything right"),
    "d2_blank": ("day2", 0, 0, "the untouched release"),
    "d3_blank": ("day3", 0, 0, "the untouched release"),
    "d4_blank": ("day4", 0, 0, "the untouched release"),
    "d5_blank": ("day5", 0, 0, "the untouched release"),
    "d5_lce_only": ("day5", 4, 7, "only linear + cross-entropy handed in, right"),
    "d5_lce_squares": ("day5", 0, 0, "linear + cross-entropy whose exp is PyTorch's: (1 + z/1024) squared ten "
                       "times with the permitted mul, beside the kernel (red team)"),
    "d5_lce_graph": ("day5", 4, 0, "linear + cross-entropy right, each call replaying a CUDA graph captured in a cell "
                     "of its own (where a red team kept all the logits, unseen by the memory figure)"),
}


def filled(day, name, edits=None):
    """The release with the reference answers typed in, then `edits` (old -> new) applied to them."""
    nb = classroom.filled(day, name)
    for old, new in (edits or {}).items():
        hits = [c for c in nb.cells if old in c.source and c.metadata.get("nbgrader", {}).get("solution")]
        assert any(notebooks.occurs_as_code(c.source, old) for c in hits), \
            f"{old!r} is not in the answers of {day}/{name} (outside a comment)"
        for c in hits:
            c.source = c.source.replace(old, new)
    return nb


def cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def insert_before(nb, grade_id, source):
    """A cell of the student's own, just before a graded cell."""
    at = nb.cells.index(cell(nb, grade_id))
    nb.cells.insert(at, nbformat.v4.new_code_cell(source))
    return nb


KERNEL = '''@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)

'''
LAUNCH = "add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)"
# On a GPU, 16-element blocks make vector_add several times slower than torch.add: a slow but right
# kernel (on the CPU interpreter, where speed is not graded, the usual block keeps the test fast).
SLOW = '''
def add(x, y):
    out = torch.empty_like(x)
    block = 16 if x.is_cuda else 1024
    add_kernel[(triton.cdiv(x.numel(), block),)](x, y, out, x.numel(), BLOCK_SIZE=block)
    return out
'''
ADD_VARIANTS = {
    "d1_warning_computes": KERNEL + '''import warnings


class TuningNote(UserWarning):
    def __init__(self, x, y, out):
        super().__init__("tuning note")
        self.x, self.y, self.out = x, y, out
        self.seen = 0

    def __str__(self):
        self.seen += 1
        if self.seen == 2:              # the second reading: the grader's printout, after the watch
            self.out.copy_(self.x + self.y)
        return "tuning note"


def add(x, y):
    out = torch.empty_like(x)
    add_kernel[(1,)](x, y, out, 1, BLOCK_SIZE=16)

    class Where(str):
        def startswith(self, *args):
            out.copy_(x + y)
            return str(self).startswith(*args)

    warnings.warn(TuningNote(x, y, out))
    warnings.warn_explicit("a note", UserWarning, Where("/tmp/notes.py"), 1)
    return out
''',
    "d1_warning_finalizer": KERNEL + '''import warnings
import weakref


class Note:
    pass


def add(x, y):
    out = torch.empty_like(x)
    add_kernel[(1,)](x, y, out, 1, BLOCK_SIZE=16)
    source = Note()
    weakref.finalize(source, torch.add, x, y, out=out)
    warnings.warn("a note", UserWarning, source=source)
    return out
''',
    "d1_torch_add": KERNEL + '''def add(x, y):
    add_kernel[(1,)](x, y, torch.empty_like(x), 1, BLOCK_SIZE=16)
    return x + y
''',
    "d1_cache": KERNEL + f'''_kept = {{}}

def add(x, y):
    key = (x.data_ptr(), y.data_ptr(), x.numel())
    if key not in _kept:
        out = torch.empty_like(x)
        {LAUNCH}
        _kept[key] = (x, y, out)   # x and y kept alive, so their addresses are not reused
    return _kept[key][2]
''',
    "d1_token_cache": KERNEL + f'''_kept = {{}}

def add(x, y):
    add_kernel[(1,)](x, y, torch.empty(16, dtype=x.dtype, device=x.device), 1, BLOCK_SIZE=16)
    key = (x.data_ptr(), y.data_ptr(), x.numel())
    if key not in _kept:
        out = torch.empty_like(x)
        {LAUNCH}
        _kept[key] = (x, y, out)
    return _kept[key][2]
''',
    "d1_mutates": KERNEL + '''def add(x, y):
    out = x
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
    return out
''',
    "d1_half_written": KERNEL + '''def add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel() // 2, 1024),)](x, y, out, x.numel() // 2, BLOCK_SIZE=1024)
    return out
''',
    "d1_unwritten": KERNEL + '''def add(x, y):
    out = torch.empty_like(x)
    add_kernel[(1,)](x, y, out, 0, BLOCK_SIZE=16)
    return out
''',
    "d1_fake_event": KERNEL + SLOW,
    "d1_exec_credit": KERNEL + SLOW,
    "d1_side_stream": KERNEL + f'''def add(x, y):
    out = torch.empty_like(x)
    if x.is_cuda:
        with torch.cuda.stream(torch.cuda.Stream()):
            {LAUNCH}
    else:
        {LAUNCH}
    return out
''',
    "d1_stderr": KERNEL + f'''import sys, warnings

def add(x, y):
    print("note: add_kernel is being launched", file=sys.stderr)
    warnings.warn("this is a harmless warning from the student's code")
    out = torch.empty_like(x)
    {LAUNCH}
    return out
''',
    # Waits for x[0] to stop equalling itself (never: inputs are finite). A counting loop would not
    # do: on a GPU its int32 counter wraps negative after about a second and the loop ends.
    "d1_spins": '''@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    spins = 0
    while tl.load(x_ptr, volatile=True) == tl.load(x_ptr, volatile=True):
        spins += 1

''' + f'''def add(x, y):
    out = torch.empty_like(x)
    {LAUNCH}
    return out
''',
    "d1_crashes": '''@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    far = offsets.to(tl.int64) + (1 << 40)   # 4 TB past the start: no such memory
    tl.store(out_ptr + offsets, tl.load(x_ptr + far) + tl.load(y_ptr + far))

''' + f'''def add(x, y):
    out = torch.empty_like(x)
    {LAUNCH}
    return out
''',
    # The red team's routes to the grader's modules (grader/pipeline/code_rules.py refuses them; at grading
    # time the modules are sealed as well: grader/student/integrity.py)
    "d1_swaps_run_student": '''def member(self):
    return self.student

def replace_run_student(self, f):
    self.run_student = f

def by_pytorch(spec, fn, args, label, tune_briefly=None):
    return args[0] + args[1]

replace_run_student(member(grader).checks, by_pytorch)

def add(x, y):
    return x
''',
    # A path built at run time, read only (Landlock confines writes): the process's memory holds the inputs
    "d1_reads_memory": '''import os
import numpy as np

@triton.jit
def token_kernel(out_ptr, n, BLOCK_SIZE: tl.constexpr):
    pass

def add(x, y):
    token_kernel[(1,)](x, 0, BLOCK_SIZE=16)
    with open(os.path.join("/", "pr" + "oc", "self", "mem"), "rb") as mem:
        mem.seek(x.data_ptr())
        a = np.frombuffer(mem.read(x.numel() * 4), dtype=np.float32)
        mem.seek(y.data_ptr())
        b = np.frombuffer(mem.read(y.numel() * 4), dtype=np.float32)
    return torch.from_numpy((a + b).reshape(tuple(x.shape)))
''',
    "d1_gc_finalizer": '''import traceback
import weakref

@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
@triton.jit
def token_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)

class Cycle:
    def __init__(self, job):
        self.me, self.job = self, job

def inside_the_autotuner():   # the innermost frame of the grader's is its launch wrapper, around Triton's autotuner
    frames = [(f.filename.split("/")[-1], f.name) for f in traceback.extract_stack()
              if "/triton/" in f.filename or "/grader/" in f.filename]
    ours = [i for i, (file, name) in enumerate(frames) if file == "guard.py" and not name.endswith("_bench")]
    return bool(ours) and frames[ours[-1]][1] == "run" and ours[-1] + 1 < len(frames) \\
        and frames[ours[-1] + 1][0] == "autotuner.py"

def finalizer(job):
    if job["done"]:
        return
    if inside_the_autotuner():
        torch.add(job["x"], job["y"], out=job["out"])
        job["done"] = True
    else:
        weakref.finalize(Cycle(job), finalizer, job)   # again at the next collection

CALLS = [0]

def add(x, y):
    out = torch.empty_like(x)
    job = {"done": False, "x": x, "y": y, "out": out}
    CALLS[0] += 1
    scratch = torch.empty(64, device=x.device)
    for attempt in range(40):   # a collection has just run; line the next one up with a new tuning key
        seen = []
        weakref.finalize(Cycle(None), seen.append, 1)
        keep = []
        while not seen and len(keep) < 5000:
            keep.append([])
        keep += [[] for _ in range(max(0, 690 - 17 * attempt))]
        weakref.finalize(Cycle(job), finalizer, job)
        token_kernel[lambda meta: (triton.cdiv(64, meta["BLOCK"]),)](scratch, 100 + CALLS[0] * 64 + attempt)
        del keep
        if job["done"]:
            break
    return out
''',
}
PATCHES = {
    "d1_patches_check": "grader.check = lambda *args, **kwargs: None\ngrader.check_speed = lambda *args, **kwargs: 2",
    "d1_fake_event": '''class FastEvent:
    def __init__(self, *args, **kwargs): pass
    def record(self, *args): pass
    def elapsed_time(self, other): return 1e-6
    def synchronize(self): pass

torch.cuda.Event = FastEvent''',
    "d1_exec_credit": 'exec("import grader.student.checks as c; c.credit = lambda ratio, target: 1.0")',
}


def _colab(nb):
    """What Colab does to a notebook it saves: new ids, its own metadata, no `deletable`."""
    nb = copy.deepcopy(nb)
    for i, c in enumerate(nb.cells):
        c["id"] = f"X{i:02d}colab"
        c.metadata.pop("deletable", None)
        c.metadata.pop("editable", None)
        c.metadata["id"] = f"X{i:02d}colab"
        if c.cell_type == "code":
            c.metadata["colab"] = {"base_uri": "https://localhost:8080/"}
            c.metadata["outputId"] = f"{i:08x}-0000"
            c.outputs = [nbformat.v4.new_output("stream", name="stdout", text="Running on Tesla T4\n")]
    nb.metadata = {"colab": {"provenance": [], "gpuType": "T4"}, "accelerator": "GPU",
                   "kernelspec": {"name": "python3", "display_name": "Python 3"},
                   "language_info": {"name": "python"}}
    return nb


# A cell of the student's own after the answer: a CUDA graph captured where no check watches (on a GPU only),
# replayed in each call of the otherwise right answer.
GRAPHED = '''_honest_lce, _graph = linear_cross_entropy, None
if torch.cuda.is_available():
    _h, _w = torch.randn(64, 32, device="cuda"), torch.randn(128, 32, device="cuda")
    _side = torch.cuda.Stream()
    _side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_side):
        _z = _h @ _w.t()
    torch.cuda.current_stream().wait_stream(_side)
    _graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(_graph):
        _z = _h @ _w.t()


def linear_cross_entropy(h, w, targets):
    if _graph is not None:
        _graph.replay()
    return _honest_lce(h, w, targets)
'''


def submissions() -> dict:
    """{"dayN/file name in that day's download": notebook or raw text} for the whole class."""
    files = {}

    def give(student, day, name, nb, style=0):
        # The ways files arrive: LMS prefix, a folder per student, Colab's "Copy of", a re-upload.
        names = [f"{student}_{day}_{name}.ipynb", f"{student}/{name}.ipynb",
                 f"{student}/Copy of {day}_{name}.ipynb", f"{student}_{day}_{name} (1).ipynb"]
        files[f"{day}/{names[style % len(names)]}"] = nb

    for i, (student, (day, *_)) in enumerate(EXPECTED.items()):
        names = NOTEBOOKS[day]
        if student.endswith("_full"):
            for name in names:
                give(student, day, name, filled(day, name), i)
        elif student.endswith("_blank"):
            for name in names:
                give(student, day, name, release(day, name), i)
        elif student in ("d1_only_add", "d1_stderr", "d1_huge_output", "d1_r_kernel", "d1_shell"):
            nb = filled(day, "vector_add")
            if student in ADD_VARIANTS:
                cell(nb, "add").source = ADD_VARIANTS[student]
            if student == "d1_huge_output":
                big = nbformat.v4.new_code_cell("print('x' * 30_000_000)")
                big.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * 30_000_000)]
                nb.cells.append(big)
            if student == "d1_r_kernel":
                nb.metadata["kernelspec"] = {"name": "ir", "display_name": "R", "language": "R"}
            if student == "d1_shell":
                insert_before(nb, "add", "!nvidia-smi")
                insert_before(nb, "add", "%pip install einops")
            give(student, day, "vector_add", nb, i)
        elif student == "d1_dies":
            nb = filled(day, "vector_add")
            insert_before(nb, "add", "import os\nos.abort()   # the process ends at once, as a segfault would end it")
            give(student, day, "vector_add", nb, i)
            for name in ("bias_gelu", "predict_runtime"):
                give(student, day, name, filled(day, name), i)
        elif student in ADD_VARIANTS:
            nb = filled(day, "vector_add")
            cell(nb, "add").source = ADD_VARIANTS[student]
            if student in PATCHES:
                insert_before(nb, "add", PATCHES[student])
            give(student, day, "vector_add", nb, i)
            if student in ("d1_spins", "d1_crashes", "d1_dies"):
                for name in ("bias_gelu", "predict_runtime"):
                    give(student, day, name, filled(day, name), i)
        elif student == "d1_patches_check":
            nb = filled(day, "vector_add", {"tl.store(out_ptr + offsets, x + y, mask=mask)":
                                            "tl.store(out_ptr + offsets, x - y, mask=mask)"})
            insert_before(nb, "add", PATCHES[student])
            give(student, day, "vector_add", nb, i)
        elif student == "d1_cells_moved":
            for name in names:
                nb = filled(day, name)
                if name == "vector_add":
                    nb.cells.remove(cell(nb, "test_add_speed"))
                    nb.cells.append(copy.deepcopy(cell(nb, "add")))
                give(student, day, name, nb, i)
        elif student == "d1_truncated":
            text = nbformat.writes(filled(day, "vector_add"))
            files[f"{day}/{student}_{day}_vector_add.ipynb"] = text[: len(text) // 2]
        elif student == "d1_empty_file":
            files[f"{day}/{student}_{day}_vector_add.ipynb"] = ""
        elif student == "d1_colab":
            for name in names:
                files[f"{day}/{student}/Copy of {day}_{name}.ipynb"] = _colab(filled(day, name))
        elif student == "d1_no_metadata":
            nb = filled(day, "vector_add")
            for c in nb.cells:
                c.metadata = {}
            give(student, day, "vector_add", nb, i)
        elif student == "d1_bad_prediction":
            nb = filled(day, "predict_runtime", {"3 * n * 4": "3 * n * 32", "6 * n * 4": "6 * n * 32"})
            give(student, day, "predict_runtime", nb, i)
        elif student == "d2_partial":
            give(student, day, "softmax", filled(day, "softmax"), i)
            give(student, day, "rmsnorm", filled(day, "rmsnorm", {
                "dx = r * (g - x * (r * r) * (tl.sum(g * x, axis=0) / n_cols))": "dx = r * g"}), i)
        elif student == "d2_torch_softmax":
            nb = filled(day, "softmax")
            cell(nb, "softmax").source += '''

def softmax(x):
    softmax_row_kernel[(1,)](x, torch.empty_like(x), 1, x.stride(0), x.stride(0), BLOCK_SIZE=16)
    return torch.softmax(x, dim=-1)
'''
            give(student, day, "softmax", nb, i)
        elif student == "d2_ce_all_rows":
            give(student, day, "cross_entropy", filled(day, "cross_entropy", {
                "    return total / count": "    return total / n_rows"}), i)
        elif student == "d3_torch_matmul":
            nb = filled(day, "matmul")
            cell(nb, "matmul").source += '''

_triton_matmul = matmul

def matmul(a, b):
    _triton_matmul(a[:16, :16].contiguous(), b[:16, :16].contiguous())   # a launch, for show
    return torch.matmul(a, b)
'''
            give(student, day, "matmul", nb, i)
        elif student == "d3_cublas_unwatched":
            nb = filled(day, "matmul")
            cell(nb, "matmul").source += '''

import math

_triton_matmul = matmul

def matmul(a, b):
    if math.isnan(torch.empty(1, device=a.device).item()):   # poisoned: the grader is watching
        return _triton_matmul(a, b)
    _triton_matmul(a[:16, :16].contiguous(), b[:16, :16].contiguous())   # a launch, for show
    return torch.matmul(a, b)
'''
            give(student, day, "matmul", nb, i)
        elif student == "d3_skip_half":
            nb = filled(day, "matmul")
            cell(nb, "matmul").source += '''

_kept = []
_calls = [0]
_triton_matmul = matmul

def matmul(a, b):
    _calls[0] += 1
    if a.shape[0] >= 4096 and _kept and _kept[0].shape == (a.shape[0], b.shape[1]) and _calls[0] % 2 == 0:
        _triton_matmul(a[:16, :16].contiguous(), b[:16, :16].contiguous())   # a launch, for show
        return _kept[0]
    _kept[:] = [_triton_matmul(a, b)]
    return _kept[0]
'''
            give(student, day, "matmul", nb, i)
        elif student == "d4_sdpa":
            nb = filled(day, "flash_attention")
            cell(nb, "attention").source += '''

_triton_attention = attention

def attention(q, k, v, causal=False):
    _triton_attention(q[:, :, :16], k[:, :, :16], v[:, :, :16], causal)   # a launch, for show
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
'''
            give(student, day, "flash_attention", nb, i)
        elif student == "d4_no_hopper_stub_left":   # no TMA anywhere, the optional part's stub as released
            give(student, day, "flash_attention", filled(day, "flash_attention", {
                "try:   # tensor descriptors made on the host (Triton 3.4 and later)":
                "raise NotImplementedError()\ntry:   # tensor descriptors made on the host (Triton 3.4 and later)",
                "    if USE_TMA and attention_tma(q, k, v, o, causal, qk_scale):   # Hopper and later (below)\n"
                "        return o\n": "",
                "if not USE_TMA or not all(": "if True or not all("}), i)
        elif student == "d5_lce_only":
            give(student, day, "linear_cross_entropy", filled(day, "linear_cross_entropy"), i)
        elif student == "d5_lce_squares":
            give(student, day, "linear_cross_entropy", filled(day, "linear_cross_entropy", {
                "            ce_grad_kernel[(end - start,)](":
                "            e = 1 + z / 1024\n            for _ in range(10):\n                e = e * e\n"
                "            ce_grad_kernel[(end - start,)]("}), i)
        elif student == "d5_lce_graph":
            give(student, day, "linear_cross_entropy", insert_before(filled(day, "linear_cross_entropy"),
                                                                     "test_linear_cross_entropy_correct", GRAPHED), i)
        else:  # pragma: no cover - every student above has a branch
            raise AssertionError(student)
    return files


def hand_in(folder, only=()) -> None:
    """One download per day, as an LMS gives one per assignment: folder/day1/..., folder/day2/...

    `only`: hand in just these students' files."""
    for name, nb in submissions().items():
        if only and not any(name.split("/", 1)[1].startswith(s) for s in only):
            continue
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(nb if isinstance(nb, str) else json.dumps(nb, indent=1))
