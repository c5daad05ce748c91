"""Answer cells for the Day 2 softmax red team (tests/test_redteam_pipeline_softmax.py): each is the whole
`softmax` solution cell as a student would hand it in (the only cell of the notebook that nbgrader marks
as a solution)."""
from __future__ import annotations

import textwrap

# ---------------------------------------------------------------------------------------------------
# Honest variants

# 1. In the manner of Triton's fused-softmax tutorial (written anew): one row per program, the row in one
# block of next_power_of_2(n_cols), num_warps from the block size, a persistent grid that strides over the
# rows; rows too wide for one block go to a two-pass kernel.
TUTORIAL_STYLE = '''
@triton.jit
def softmax_row_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                       BLOCK_SIZE: tl.constexpr, NUM_STAGES: tl.constexpr):
    """A persistent program: starts at its own row and steps over the grid's width of rows."""
    first = tl.program_id(0)
    step = tl.num_programs(0)
    for r in tl.range(first, n_rows, step, num_stages=NUM_STAGES):
        offsets = tl.arange(0, BLOCK_SIZE)
        inside = offsets < n_cols
        logits = tl.load(in_ptr + r * in_row_stride + offsets, mask=inside, other=-float("inf"))
        logits = logits.to(tl.float32)
        shifted = logits - tl.max(logits, axis=0)
        numerator = tl.exp(shifted)
        denominator = tl.sum(numerator, axis=0)
        result = numerator / denominator
        tl.store(out_ptr + r * out_row_stride + offsets, result.to(out_ptr.dtype.element_ty), mask=inside)


@triton.jit
def softmax_chunked_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    """Rows wider than one block: the max, then the sum, then the write, a chunk at a time."""
    r = tl.program_id(0)
    src = in_ptr + r * in_row_stride
    dst = out_ptr + r * out_row_stride
    offsets = tl.arange(0, BLOCK_SIZE)
    biggest = tl.full([BLOCK_SIZE], -float("inf"), tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        chunk = tl.load(src + start + offsets, mask=start + offsets < n_cols, other=-float("inf"))
        biggest = tl.maximum(biggest, chunk.to(tl.float32))
    row_max = tl.max(biggest, axis=0)
    total = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        chunk = tl.load(src + start + offsets, mask=start + offsets < n_cols, other=-float("inf"))
        total += tl.exp(chunk.to(tl.float32) - row_max)
    row_sum = tl.sum(total, axis=0)
    for start in range(0, n_cols, BLOCK_SIZE):
        inside = start + offsets < n_cols
        chunk = tl.load(src + start + offsets, mask=inside, other=-float("inf"))
        tl.store(dst + start + offsets, (tl.exp(chunk.to(tl.float32) - row_max) / row_sum).to(out_ptr.dtype.element_ty),
                 mask=inside)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor."""
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    if BLOCK_SIZE > 32768:
        softmax_chunked_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, BLOCK_SIZE=4096, num_warps=8)
        return y
    num_warps = 4
    if BLOCK_SIZE >= 2048:
        num_warps = 8
    if BLOCK_SIZE >= 4096:
        num_warps = 16
    if x.is_cuda:
        programs = torch.cuda.get_device_properties(x.device).multi_processor_count * 4
    else:
        programs = 4       # the interpreter runs programs one after another: a few do
    programs = max(1, min(programs, n_rows))
    softmax_row_kernel[(programs, 1, 1)](y, x, x.stride(0), y.stride(0), n_rows, n_cols,
                                         BLOCK_SIZE=BLOCK_SIZE, NUM_STAGES=2, num_warps=num_warps)
    return y
'''

# 2. In the manner of Liger-Kernel's softmax: an autograd.Function, a settings helper, kernels launched with
# keyword arguments; the forward always walks the row in chunks: an online pass keeps a running max and a
# running sum rescaled when the max grows, a second pass writes.
LIGER_STYLE = '''
MAX_FUSED_SIZE = 65536


def calculate_settings(n):
    block = triton.next_power_of_2(n)
    if block > MAX_FUSED_SIZE:
        raise RuntimeError(f"a row of {n} columns is wider than {MAX_FUSED_SIZE}")
    warps = 4
    if block >= 32768:
        warps = 32
    elif block >= 8192:
        warps = 16
    elif block >= 2048:
        warps = 8
    return block, warps


@triton.jit
def _softmax_forward_looped(Y_ptr, Y_row_stride, X_ptr, X_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row_id = tl.program_id(0).to(tl.int64)
    X_ptr += row_id * X_row_stride
    Y_ptr += row_id * Y_row_stride
    offs = tl.arange(0, BLOCK_SIZE)
    m = tl.full((), -float("inf"), tl.float32)      # running max
    d = tl.full((), 0.0, tl.float32)                # running sum of exp(x - m)
    for start in range(0, n_cols, BLOCK_SIZE):
        idx = start + offs
        blk = tl.load(X_ptr + idx, mask=idx < n_cols, other=-float("inf")).to(tl.float32)
        new_m = tl.maximum(m, tl.max(blk, axis=0))
        d = d * tl.exp(m - new_m) + tl.sum(tl.exp(blk - new_m), axis=0)
        m = new_m
    for start in range(0, n_cols, BLOCK_SIZE):
        idx = start + offs
        mask = idx < n_cols
        blk = tl.load(X_ptr + idx, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(Y_ptr + idx, (tl.exp(blk - m) / d).to(Y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_backward_looped(dy_ptr, dy_stride, y_ptr, y_stride, dx_ptr, dx_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row_id = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_SIZE)
    acc = tl.full((), 0.0, tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        idx = start + offs
        mask = idx < n_cols
        dy = tl.load(dy_ptr + row_id * dy_stride + idx, mask=mask, other=0.0).to(tl.float32)
        y = tl.load(y_ptr + row_id * y_stride + idx, mask=mask, other=0.0).to(tl.float32)
        acc += tl.sum(dy * y, axis=0)
    for start in range(0, n_cols, BLOCK_SIZE):
        idx = start + offs
        mask = idx < n_cols
        dy = tl.load(dy_ptr + row_id * dy_stride + idx, mask=mask, other=0.0).to(tl.float32)
        y = tl.load(y_ptr + row_id * y_stride + idx, mask=mask, other=0.0).to(tl.float32)
        tl.store(dx_ptr + row_id * dx_stride + idx, (y * (dy - acc)).to(dx_ptr.dtype.element_ty), mask=mask)


def _softmax_forward(x):
    *batch, n_cols = x.shape
    x2d = x.contiguous().view(-1, n_cols)
    n_rows = x2d.shape[0]
    BLOCK_SIZE, num_warps = calculate_settings(min(n_cols, 2048))
    y2d = torch.empty_like(x2d)
    _softmax_forward_looped[(n_rows,)](Y_ptr=y2d, Y_row_stride=y2d.stride(0), X_ptr=x2d,
                                       X_row_stride=x2d.stride(0), n_cols=n_cols, BLOCK_SIZE=BLOCK_SIZE,
                                       num_warps=num_warps)
    return y2d.view(*batch, n_cols)


class LigerSoftmaxFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_):
        y = _softmax_forward(input_)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        n_cols = y.shape[-1]
        y2d = y.view(-1, n_cols)
        dy2d = grad_output.contiguous().view(-1, n_cols)
        dx2d = torch.empty_like(dy2d)
        BLOCK_SIZE, num_warps = calculate_settings(min(n_cols, 2048))
        _softmax_backward_looped[(y2d.shape[0],)](dy2d, dy2d.stride(0), y2d, y2d.stride(0), dx2d, dx2d.stride(0),
                                                  n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
        return dx2d.view_as(grad_output)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor."""
    return LigerSoftmaxFunction.apply(x)
'''

# 3. Unusual: exp2 with the log2(e) scaling folded in, several rows per program in a 2-D block (narrow
# rows), and for wide rows an online softmax kept per lane (a vector of running maxima and sums, merged at
# the end); launch plans cached by functools.lru_cache.
EXP2_MULTIROW = '''
import functools

LOG2E = tl.constexpr(1.4426950408889634)   # a global a kernel reads must be a constexpr


@triton.jit
def softmax_rows_kernel(x_ptr, out_ptr, n_rows, n_cols, x_stride, out_stride,
                        ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols[None, :] < n_cols)
    offsets = rows[:, None].to(tl.int64) * x_stride + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=-float("inf")).to(tl.float32) * LOG2E
    top = tl.where(row_ok, tl.max(x, axis=1), 0.0)
    p = tl.exp2(x - top[:, None])
    total = tl.where(row_ok, tl.sum(p, axis=1), 1.0)
    y = p / total[:, None]
    tl.store(out_ptr + rows[:, None].to(tl.int64) * out_stride + cols[None, :], y.to(out_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def softmax_lanes_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    lane_max = tl.full([BLOCK], -float("inf"), tl.float32)
    lane_sum = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        v = tl.load(x_ptr + row * x_stride + start + cols, mask=start + cols < n_cols,
                    other=-float("inf")).to(tl.float32) * LOG2E
        grown = tl.maximum(lane_max, v)
        lane_sum = lane_sum * tl.exp2(lane_max - grown) + tl.exp2(v - grown)
        lane_max = grown
    top = tl.max(lane_max, axis=0)
    total = tl.sum(lane_sum * tl.exp2(lane_max - top), axis=0)
    inverse = 1.0 / total
    for start in range(0, n_cols, BLOCK):
        inside = start + cols < n_cols
        v = tl.load(x_ptr + row * x_stride + start + cols, mask=inside, other=-float("inf")).to(tl.float32) * LOG2E
        tl.store(out_ptr + row * out_stride + start + cols, (tl.exp2(v - top) * inverse).to(out_ptr.dtype.element_ty),
                 mask=inside)


@functools.lru_cache(maxsize=None)
def plan(n_cols):
    block = triton.next_power_of_2(n_cols)
    if block > 8192:
        return "lanes", 1, 2048, 8
    rows = max(1, min(16, 4096 // block))
    return "rows", rows, block, (4 if block <= 1024 else 8)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor."""
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    kind, rows, block, warps = plan(n_cols)
    if kind == "rows":
        softmax_rows_kernel[(triton.cdiv(n_rows, rows),)](x, out, n_rows, n_cols, x.stride(0), out.stride(0),
                                                          ROWS=rows, BLOCK=block, num_warps=warps)
    else:
        softmax_lanes_kernel[(n_rows,)](x, out, n_cols, x.stride(0), out.stride(0), BLOCK=block, num_warps=warps)
    return out
'''

# ---------------------------------------------------------------------------------------------------
# Cheats: each would need the grader's help to score

# A kernel that runs on the data but writes nothing useful (it stores zeros), for cheats to stand beside.
TOKEN_KERNEL = '''
@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * out_stride + cols, x * 0, mask=mask)

'''

# 4. torch.softmax computes; a Triton launch on the real rows beside it, for show
TORCH_BESIDE_TOKEN = TOKEN_KERNEL + '''
def softmax(x: torch.Tensor) -> torch.Tensor:
    scratch = torch.empty_like(x)
    n_rows, n_cols = x.shape
    softmax_row_kernel[(n_rows,)](x, scratch, n_cols, x.stride(0), scratch.stride(0),
                                  BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return torch.softmax(x, dim=-1)
'''

# 4b. Half the work in Triton (exp(x - max) per row), the normalisation by PyTorch
TORCH_NORMALISES = '''
@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    tl.store(out_ptr + row * out_stride + cols, tl.exp(x - tl.max(x, axis=0)), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    e = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    softmax_row_kernel[(n_rows,)](x, e, n_cols, x.stride(0), e.stride(0), BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)
'''

# 4c. torch.softmax inside a torch.library.triton_op, a wrap_triton launch for show
TORCH_IN_TRITON_OP = TOKEN_KERNEL + '''
@torch.library.triton_op("redteam::softmax", mutates_args={})
def softmax(x: torch.Tensor) -> torch.Tensor:
    scratch = torch.empty_like(x)
    n_rows, n_cols = x.shape
    torch.library.wrap_triton(softmax_row_kernel)[(n_rows,)](x, scratch, n_cols, x.stride(0), scratch.stride(0),
                                                             BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return torch.softmax(x, dim=-1)
'''

# 5a. The grader's own functions called from the answer cell: memcheck, check_speed, check, credit, as if
# running them could leave credit behind; the kernel wrong (zeros)
CALLS_THE_GRADER = TOKEN_KERNEL + '''
def softmax(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    softmax_row_kernel[(n_rows,)](x, out, n_cols, x.stride(0), out.stride(0), BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return out


probe = torch.randn(4, 33, device=dev.torch_device)
for attempt in (lambda: grader.memcheck(softmax, probe),
                lambda: grader.check_speed("day2.softmax", softmax, points=2),
                lambda: grader.check("day2.softmax", softmax),
                lambda: grader.report_speed("day2.softmax", softmax),
                lambda: print("credit", grader.credit(10.0, 1.5))):
    try:
        print("grader call gave", attempt())
    except Exception as e:
        print("grader call raised", type(e).__name__, str(e)[:200])
'''

# 5b. The grader monkeypatched from the answer cell (each route alone would be refused; together, the cell)
PATCHES_THE_GRADER = TOKEN_KERNEL + '''
def softmax(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    softmax_row_kernel[(n_rows,)](x, out, n_cols, x.stride(0), out.stride(0), BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return out


grader.check = lambda *args, **kwargs: None
grader.check_speed = lambda *args, **kwargs: 2.0
'''

# 5c. The name `grader` rebound to an object of the notebook's own: the graded cells' `grader.check` would
# call it, were they run in the kernel
SHADOWS_THE_GRADER = TOKEN_KERNEL + '''
def softmax(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    softmax_row_kernel[(n_rows,)](x, out, n_cols, x.stride(0), out.stride(0), BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return out


class Lenient:
    def check(self, *args, **kwargs):
        print("all cases passed")

    def check_speed(self, *args, **kwargs):
        return 2.0


grader = Lenient()
'''

# 5d. A grader module's function swapped through the operator module's setitem on its __dict__
SWAPS_A_GRADER_FUNCTION = TOKEN_KERNEL + '''
import operator
import grader.compare as compare


def softmax(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    softmax_row_kernel[(n_rows,)](x, out, n_cols, x.stride(0), out.stride(0), BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return out


operator.setitem(vars(compare), "assert_close", lambda *args, **kwargs: None)
'''


# 6. Writes the grader's figures and exercise data from the answer cell: appends to measured_figures.py and
# reference_figures.py and rewrites day2.py so that the reference is zeros, in every grader it can find
# (the one the kernel imports, the repository's by its path); the kernel writes zeros.
def writes_the_grader(repo: str) -> str:
    return TOKEN_KERNEL + textwrap.dedent(f'''
        import os


        def softmax(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            n_rows, n_cols = x.shape
            softmax_row_kernel[(n_rows,)](x, out, n_cols, x.stride(0), out.stride(0),
                                          BLOCK_SIZE=triton.next_power_of_2(n_cols))
            return out


        roots = [{repo!r}] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        for root in roots:
            for name, text in (("measured_figures.py", "\\nMEASURED = {{}}  # red team\\n"),
                               ("reference_figures.py", "\\n# red team\\n")):
                path = os.path.join(root, "grader", "exercises", name)
                try:
                    with open(path, "a") as f:
                        f.write(text)
                    print("WROTE", path)
                except OSError as e:
                    print("could not write", path, type(e).__name__)
            path = os.path.join(root, "grader", "exercises", "day2.py")
            try:
                with open(path) as f:
                    source = f.read()
                with open(path, "w") as f:
                    f.write(source.replace("reference=lambda x: torch.softmax(x.double(), dim=-1).to(x.dtype)",
                                           "reference=lambda x: torch.zeros_like(x)"))
                print("WROTE", path)
            except OSError as e:
                print("could not write", path, type(e).__name__)
        # ... and reads what would tell the hidden cases or the reference answer: the instructor's exercise
        # data and, from the notebook's folder (grading/autograded/STUDENT/DAY), the course's solutions
        course = os.path.abspath(os.path.join(os.getcwd(), "..", "..", "..", ".."))
        for path in (os.path.join({repo!r}, "grader", "exercises", "day2.py"),
                     os.path.join(course, "solutions", "day2", "softmax.ipynb"),
                     os.path.join(course, "grading", "gradebook.db")):
            try:
                with open(path) as f:
                    text = f.read()
                print("READ", path, "hidden_cpu_shapes" in text, "BEGIN SOLUTION" in text)
            except (OSError, UnicodeDecodeError) as e:
                print("could not read", path, type(e).__name__)
    ''')


# 7a. The softmax done by NumPy inside the kernel's body: in Triton's CPU interpreter a @triton.jit
# function is Python, its loaded block a NumPy array (`.handle.data`); a plain helper computes there.
NUMPY_IN_THE_INTERPRETER = '''
import numpy as np


def row_softmax(block):
    data = block.handle.data
    e = np.exp(data - np.max(data))
    np.divide(e, np.sum(e), out=data)
    return block


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    y = row_softmax(x)
    tl.store(out_ptr + row * out_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    softmax_row_kernel[(n_rows,)](x, out, n_cols, x.stride(0), out.stride(0), BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return out
'''



# 8. Autotuning and heuristics. Triton's autotuner and heuristics call methods of what they are given inside
# their own run, which is Triton's work and not watched: a cheat's own class there computes unseen. Each
# cheat launches a kernel that writes nothing useful, while its class's method writes torch's softmax into
# the output handed over in STASH.
_SOFTMAX_BY_TORCH = "STASH[1].copy_(torch.softmax(STASH[0].float(), dim=-1).to(STASH[1].dtype))"


def _autotuned_token(decorator: str, classes: str) -> str:
    return classes + f'''
STASH = []


{decorator}
@triton.jit
def token_kernel(x_ptr, s_ptr, n_cols, x_stride, s_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    tl.store(s_ptr + row * s_stride + cols, tl.load(x_ptr + row * x_stride + cols, mask=mask) * 0, mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    y, scratch = torch.empty_like(x), torch.empty_like(x)
    STASH[:] = [x, y]
    token_kernel[(x.shape[0],)](x, scratch, x.shape[1], x.stride(0), scratch.stride(0))
    return y
'''


_TWO_CONFIGS = "[{0}({1}BLOCK_SIZE=1024{2}, num_warps=4), {0}({1}BLOCK_SIZE=1024{2}, num_warps=8)]"
CONFIG_SUBCLASS = _autotuned_token(
    f'@triton.autotune(configs={_TWO_CONFIGS.format("MyConfig", "dict(", ")")}, key=["n_cols"])', f'''
class MyConfig(triton.Config):
    def all_kwargs(self):
        if STASH:
            {_SOFTMAX_BY_TORCH}
        return super().all_kwargs()
''')
CONFIG_VALUES_DICT_SUBCLASS = _autotuned_token(
    f'@triton.autotune(configs={_TWO_CONFIGS.format("triton.Config", "Meta(", ")")}, key=["n_cols"])', f'''
class Meta(dict):
    def __iter__(self):
        return iter(list(dict.keys(self)))

    def keys(self):
        if STASH:
            {_SOFTMAX_BY_TORCH}
        return dict.keys(self)
''')
KEYS_LIST_SUBCLASS = _autotuned_token(
    f'@triton.autotune(configs={_TWO_CONFIGS.format("triton.Config", "dict(", ")")}, key=Keys(["n_cols"]))', f'''
class Keys(list):
    def __iter__(self):
        if STASH:
            {_SOFTMAX_BY_TORCH}
        return iter(list.copy(self))
''')
HEURISTICS_DICT_SUBCLASS = _autotuned_token('@triton.heuristics(Rules(BLOCK_SIZE=lambda args: 1024))', f'''
class Rules(dict):
    def items(self):
        if STASH:
            {_SOFTMAX_BY_TORCH}
        return dict.items(self)
''')

# Honest: Triton's own autotuning idioms, with pruning in plain Python and a heuristic for the block size.
AUTOTUNED_AND_PRUNED = '''
def prune(configs, named_args, **kwargs):
    return [c for c in configs if c.kwargs["BLOCK_SIZE"] >= min(named_args["n_cols"], 1024)] or configs


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": b}, num_warps=w) for b, w in ((256, 4), (1024, 8))],
                 key=["n_cols"], prune_configs_by={"early_config_prune": prune})
@triton.heuristics({"ONE_BLOCK": lambda args: args["n_cols"] <= args["BLOCK_SIZE"]})
@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr, ONE_BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_SIZE)
    m = tl.full((), -float("inf"), tl.float32)
    d = tl.full((), 0.0, tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        v = tl.load(x_ptr + row * x_stride + start + offs, mask=start + offs < n_cols, other=-float("inf"))
        m_new = tl.maximum(m, tl.max(v.to(tl.float32), axis=0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(v.to(tl.float32) - m_new), axis=0)
        m = m_new
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + offs < n_cols
        v = tl.load(x_ptr + row * x_stride + start + offs, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(out_ptr + row * out_stride + start + offs, (tl.exp(v - m) / d).to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0))
    return y
'''


# --- NumPy inside the interpreted kernel, by routes a reading of the source does not follow ------------------
# (a red team's, 2026-12-02: each scored full correctness marks on the CPU until the kernel was handed to
# Triton's own front end at each launch, grader/student/gpu_compile.source_for_compiler)
# The kernel loads a row, lets `{step}` rewrite the block's values in place (NumPy on the interpreter's array),
# and stores the block. `{before}` is the code above the kernel; `{around}` the launch.
_ROUTE = '''
import numpy as np
{before}

@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    inside = offs < n_cols
    x = tl.load(x_ptr + row * x_stride + offs, mask=inside, other=-float("inf")).to(tl.float32)
{step}
    tl.store(out_ptr + row * out_stride + offs, x.to(out_ptr.dtype.element_ty), mask=inside)


def softmax(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
{around}
    return y
'''
_IN_PLACE = '''
def in_place(block):
    d = block.handle.data
    d[...] = np.exp(d - d.max())
    d /= d.sum()
    return block
'''
_LAUNCH = ("    softmax_row_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), "
           "BLOCK_SIZE=triton.next_power_of_2(n_cols))")


def _route(step: str, before: str = _IN_PLACE, around: str = _LAUNCH) -> str:
    return _ROUTE.format(before=before, step=step, around=around)


NUMPY_ROUTES = {
    # the block's array through operator.attrgetter, NumPy through a local alias
    "attrgetter_alias": _route('''    get = operator.attrgetter("handle")
    d = get(x).data
    e = np.exp
    d[...] = e(d - d.max())
    d /= d.sum()''', before="import operator\n"),
    # a plain helper called through a local name
    "local_helper": _route('''    helper = in_place
    helper(x)'''),
    # a chain of plain helpers, deeper than a reading of the source follows
    "deep_chain": _route("    h1(x)", before=_IN_PLACE + "".join(
        f"\n\ndef h{i}(block):\n    return {'h' + str(i + 1) if i < 6 else 'in_place'}(block)\n" for i in range(1, 7))),
    # an object of the student's class whose __getitem__ does the work
    "getitem": _route("    x = NORMALISE[x]", before=_IN_PLACE + '''

class Normaliser:
    def __getitem__(self, block):
        return in_place(block)


NORMALISE = Normaliser()
'''),
    # a global bound to a clean @triton.jit helper for a first launch, then to NumPy for the real one
    "rebound_between_launches": _route("    x = normalise(x)", before=_IN_PLACE + '''

@triton.jit
def ones(x):
    return x * 0.0 + 1.0


normalise = ones
''', around='''    global normalise
    scratch = torch.zeros(1, 1, dtype=x.dtype)
    normalise = ones
    softmax_row_kernel[(1,)](scratch, scratch, 1, 1, 1, BLOCK_SIZE=1)
    normalise = in_place
''' + _LAUNCH + "\n    normalise = ones"),
    # ... or rebound by the grid function, which runs inside the launch, after the launch was seen
    "rebound_by_the_grid": _route("    x = normalise(x)", before=_IN_PLACE + '''

@triton.jit
def ones(x):
    return x * 0.0 + 1.0


normalise = ones


def rows(meta, n):
    global normalise
    normalise = in_place
    return (n,)
''', around='''    global normalise
    normalise = ones
    softmax_row_kernel[lambda meta: rows(meta, n_rows)](x, y, n_cols, x.stride(0), y.stride(0),
                                                        BLOCK_SIZE=triton.next_power_of_2(n_cols))
    normalise = ones'''),
}

# A second red team's (2026-12-02, against the front end), each through a branch or a value the compiler
# would be shown otherwise than the interpreter runs it:
_DEAD_BRANCH = '''    if {condition}:
        for d in [operator.attrgetter("handle.data")(x)]:
            d -= d.max()
            d[...] = 2.718281828459045 ** d
            d /= d.sum()'''
NUMPY_ROUTES.update({
    # Triton's range is Python's in the interpreter: the compiler folds the branch away, the interpreter takes it
    "branch_on_tl_range": _route(_DEAD_BRANCH.format(condition="isinstance(tl.range(1), range)"),
                                 before="import operator\n"),
    # a keyword-only constexpr whose default is an object: the interpreter calls it
    "object_as_a_default": _route(_DEAD_BRANCH.format(condition="GET is not None").replace(
        'operator.attrgetter("handle.data")', "GET"), before="import operator\n").replace(
        "BLOCK_SIZE: tl.constexpr):", 'BLOCK_SIZE: tl.constexpr, *, GET: tl.constexpr = operator.attrgetter("handle.data")):'),
    # a NumPy number handed as a constexpr: a float to the compiler, an object with .sum to the interpreter
    "numpy_number_argument": _route(_DEAD_BRANCH.format(condition='hasattr(SCALE, "sum")'),
                                    before="import operator\n").replace(
        "BLOCK_SIZE: tl.constexpr):", "BLOCK_SIZE: tl.constexpr, SCALE: tl.constexpr):").replace(
        "BLOCK_SIZE=triton.next_power_of_2(n_cols))", "BLOCK_SIZE=triton.next_power_of_2(n_cols), SCALE=np.float64(1.0))"),
    # a launch inside the grid function, then the interpreter's kept rewrite of a clean helper replaced by NumPy
    "helper_rewrite_swapped_in_the_grid": _route("    x = keep(x)", before=_IN_PLACE + '''

@triton.jit
def keep(x):
    return x


@triton.jit
def touch(p):
    tl.store(p, 0.0)


def rows(n_rows, scratch):
    touch[(1,)](scratch)
    keep.rewritten_fn.update({keep.fn: in_place})
    return (n_rows,)
''', around='''    scratch = torch.zeros(1)
    softmax_row_kernel[lambda meta: rows(n_rows, scratch)](x, y, n_cols, x.stride(0), y.stride(0),
                                                           BLOCK_SIZE=triton.next_power_of_2(n_cols))
    keep.rewritten_fn.pop(keep.fn, None)'''),
})

# Python numbers out of a block: float() of each scalar the kernel loads, the softmax in Python's arithmetic
FLOAT_OF_A_BLOCK = '''
import math


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    values = [float(tl.load(x_ptr + row * x_stride + i)) for i in range(n_cols)]
    top = max(values)
    total = sum(math.exp(v - top) for v in values)
    for i in range(n_cols):
        tl.store(out_ptr + row * out_stride + i, math.exp(values[i] - top) / total)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK_SIZE=1)
    return y
'''

# Honest and unusual: a @triton.jit helper under another global name, constexpr globals (one computed with
# math), tl.math reached as a module, constexpr defaults (a dtype, a constexpr global), a loop over rows.
HONEST_UNUSUAL = '''
import math

LOG2E = tl.constexpr(1.0 / math.log(2.0))
ROWS = tl.constexpr(2)


@triton.jit
def _exp2_scaled(x):
    return tl.exp2(x * LOG2E)


exponential = _exp2_scaled


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_rows, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr,
                   ACC: tl.constexpr = tl.float32, R: tl.constexpr = ROWS):
    for r in tl.static_range(R):
        row = tl.program_id(0) * ROWS + r
        offs = tl.arange(0, BLOCK_SIZE)
        mask = offs < tl.where(row < n_rows, n_cols, 0)
        x = tl.load(x_ptr + row * x_stride + offs, mask=mask, other=-float("inf")).to(ACC)
        e = exponential(x - tl.max(x, axis=0))
        s = tl.sum(e, axis=0)
        y = e * tl.math.div_rn(1.0, s)
        tl.store(out_ptr + row * out_stride + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    y = torch.empty_like(x)
    softmax_kernel[(triton.cdiv(x.shape[0], ROWS),)](x, y, x.shape[0], x.shape[1], x.stride(0), y.stride(0),
                                                     BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
'''


# ---------------------------------------------------------------------------------------------------
# The third red team (2026-12-02, through the pipeline): what the interpreter runs that Triton's compiler
# did not compile, and work done outside a kernel's programs. Each cell scored 3/3 before its fix.

# the compiler folds `isinstance(tl.range(1), range)` to False and never reads the branch;
# the interpreter, whose tl.range is Python's range, runs it: Python floats parsed from str() of loaded values
DEAD_BRANCH_FLOATS = '''
import math


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    if isinstance(tl.range(1), range):
        # (the interpreter turns every `name = value` into a Triton scalar: numbers are kept in lists)
        values = [float(str(tl.load(x_ptr + row * x_stride + i)).strip("[]")) for i in range(n_cols)]
        top = sorted(values)[-1:]
        weights = [math.exp(v - top[0]) for v in values]
        total = [sum(weights)]
        for i in range(n_cols):
            tl.store(out_ptr + row * out_stride + i, weights[i] / total[0])
    else:
        tl.store(out_ptr + row * out_stride + offs, tl.zeros([BLOCK_SIZE], tl.float32), mask=offs < n_cols)


def softmax(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    softmax_row_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return y
'''

# the same, on `hasattr(tl.multiple_of, "func")` (a functools.partial in the interpreter), a
# whole block's text parsed chunk by chunk
DEAD_BRANCH_TEXT = '''
import math

CHUNK = tl.constexpr(256)


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, CHUNK)
    if hasattr(tl.multiple_of, "func"):
        values = []
        for start in range(0, n_cols, CHUNK):
            values += [float(word) for word in str(tl.load(x_ptr + row * x_stride + start + offs,
                                                           mask=start + offs < n_cols, other=0.0)).strip("[]").split()]
        values = values[:n_cols]
        top = sorted(values)[-1:]
        weights = [math.exp(v - top[0]) for v in values]
        total = [sum(weights)]
        for i in range(n_cols):
            tl.store(out_ptr + row * out_stride + i, weights[i] / total[0])
    else:
        for start in range(0, n_cols, CHUNK):
            tl.store(out_ptr + row * out_stride + start + offs, tl.zeros([CHUNK], tl.float32),
                     mask=start + offs < n_cols)


def softmax(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    softmax_row_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK_SIZE=1)
    return y
'''

# the dead branch inside a tl.reduce combine function, which the interpreter calls as
# the @triton.jit object's own function (not the rewrite it keeps for other calls)
COMBINE_DEAD_BRANCH = '''
import math


@triton.jit
def row_pair(a0, b0, a1, b1):
    if isinstance(tl.range(1), range):
        src = a0.to(tl.pointer_type(tl.float32))
        dst = a1.to(tl.pointer_type(tl.float32))
        values = [float(str(tl.load(src + i)).strip("[]")) for i in range(b0)]
        top = sorted(values)[-1:]
        weights = [math.exp(v - top[0]) for v in values]
        total = [sum(weights)]
        for i in range(len(values)):
            tl.store(dst + i, weights[i] / total[0])
    return tl.maximum(a0, a1), b0 + b1


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    two = tl.arange(0, 2)
    where = tl.where(two == 0, (x_ptr + row * x_stride).to(tl.int64), (out_ptr + row * out_stride).to(tl.int64))
    sizes = tl.zeros([2], tl.int64) + n_cols
    tl.reduce((where, sizes), 0, row_pair)


def softmax(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    softmax_row_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK_SIZE=1)
    return y
'''

# the grid function runs after the interpreter has taken tl over: tl.load, tl.exp and
# tl.store on the host, around an empty kernel
GRID_FUNCTION_TL = '''
@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    pass


def plan(meta, n_rows, n_cols, block):
    x, y = meta["x_ptr"], meta["out_ptr"]
    offs = tl.arange(0, block)
    for r in range(n_rows):
        mask = offs < n_cols
        v = tl.load(x + r * meta["x_stride"] + offs, mask=mask, other=-float("inf"))
        e = tl.exp(v - tl.max(v, axis=0))
        tl.store(y + r * meta["out_stride"] + offs, e / tl.sum(e, axis=0), mask=mask)
    return (1,)


def softmax(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    softmax_row_kernel[lambda meta: plan(meta, n_rows, n_cols, block)](x, y, n_cols, x.stride(0), y.stride(0),
                                                                       BLOCK_SIZE=block)
    return y
'''

# the same window, NumPy on a loaded block's `.handle.data`
GRID_FUNCTION_NUMPY = '''
import numpy as np


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    pass


def plan(meta, n_rows, n_cols, block):
    offs = tl.arange(0, block)
    for r in range(n_rows):
        mask = offs < n_cols
        v = tl.load(meta["x_ptr"] + r * meta["x_stride"] + offs, mask=mask, other=-float("inf"))
        d = v.handle.data
        d[...] = np.exp(d - d.max())
        d /= d.sum()
        tl.store(meta["out_ptr"] + r * meta["out_stride"] + offs, v, mask=mask)
    return (1,)


def softmax(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    softmax_row_kernel[lambda meta: plan(meta, n_rows, n_cols, block)](x, y, n_cols, x.stride(0), y.stride(0),
                                                                       BLOCK_SIZE=block)
    return y
'''

# the interpreter's builder, called from host code, loads and stores any address
HOST_INTERPRETER_BUILDER = '''
import numpy as np
from triton.runtime import interpreter


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    pass


def addresses(t):
    rows = np.arange(t.shape[0], dtype=np.uint64)[:, None] * np.uint64(t.stride(0))
    cols = np.arange(t.shape[1], dtype=np.uint64)[None, :] * np.uint64(t.stride(1))
    handle = interpreter.TensorHandle(np.uint64(t.data_ptr()) + (rows + cols) * np.uint64(t.element_size()),
                                      tl.pointer_type(tl.float32))
    return handle


def softmax(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    builder = interpreter.interpreter_builder
    v = builder.create_load(addresses(x), None, False).data.astype(np.float64)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    out = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    builder.create_store(addresses(y), interpreter.TensorHandle(out, tl.float32), None)
    softmax_row_kernel[(1,)](x, y, 1, x.stride(0), y.stride(0), BLOCK_SIZE=1)
    return y
'''

# logging's QueueListener starts a thread when the cell runs; PyTorch's dispatch
# modes are per thread, so torch.softmax there went unseen
QUEUE_LISTENER_THREAD = '''
import logging
import logging.handlers
import queue
import time


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * out_stride + cols, x * 0, mask=mask)


class Finisher(logging.Handler):
    def emit(self, record):
        x, y, done = record
        y.copy_(torch.softmax(x.float(), dim=-1).to(y.dtype))
        done.append(True)


JOBS = queue.Queue()
LISTENER = logging.handlers.QueueListener(JOBS, Finisher())
LISTENER.start()


def softmax(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    softmax_row_kernel[(1,)](x, y, 1, x.stride(0), y.stride(0), BLOCK_SIZE=1)
    done = []
    JOBS.put([x, y, done])
    while not done:
        time.sleep(0.001)
    return y
'''

# the same, with grader.setup() called again after the thread started (it
# had the thread taken for one of Jupyter's)
QUEUE_LISTENER_THREAD_SETUP_AGAIN = '''
import logging
import logging.handlers
import queue
import time


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * out_stride + cols, x * 0, mask=mask)


class Finisher(logging.Handler):
    def emit(self, record):
        x, y, done = record
        y.copy_(torch.softmax(x.float(), dim=-1).to(y.dtype))
        done.append(True)


JOBS = queue.Queue()
LISTENER = logging.handlers.QueueListener(JOBS, Finisher())
LISTENER.start()
grader.setup(quiet=True)


def softmax(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    softmax_row_kernel[(1,)](x, y, 1, x.stride(0), y.stride(0), BLOCK_SIZE=1)
    done = []
    JOBS.put([x, y, done])
    while not done:
        time.sleep(0.001)
    return y
'''

# honest: a @triton.jit function handed to the kernel as a constexpr argument (was
# refused as an argument Triton's launcher cannot pass)
JIT_FUNCTION_ARGUMENT = '''
@triton.jit
def exp_base_e(x):
    return tl.exp2(x * 1.4426950408889634)


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr, EXP: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_SIZE)
    m = tl.full((), -float("inf"), tl.float32)
    d = tl.full((), 0.0, tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        v = tl.load(x_ptr + row * x_stride + start + offs, mask=start + offs < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(v, axis=0))
        d = d * EXP(m - m_new) + tl.sum(EXP(v - m_new), axis=0)
        m = m_new
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + offs < n_cols
        v = tl.load(x_ptr + row * x_stride + start + offs, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(out_ptr + row * out_stride + start + offs, (EXP(v - m) / d).to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    block = min(triton.next_power_of_2(x.shape[1]), 4096)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK_SIZE=block, EXP=exp_base_e)
    return y
'''

# honest: Liger-Kernel's manner, an autograd.Function and tl.reduce with a @triton.jit
# combine function
LIGER_REDUCE_COMBINE = '''
@triton.jit
def _combine(m1, s1, m2, s2):
    m = tl.maximum(m1, m2)
    s = tl.where(m == float("-inf"), 0.0, s1 * tl.exp(m1 - m) + s2 * tl.exp(m2 - m))
    return m, s


@triton.jit
def _softmax_fwd(X, Y, x_stride, y_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_SIZE)
    lane_m = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
    lane_s = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        v = tl.load(X + row * x_stride + start + offs, mask=start + offs < n_cols, other=float("-inf")).to(tl.float32)
        lane_m, lane_s = _combine(lane_m, lane_s, v, tl.where(start + offs < n_cols, 1.0, 0.0))
    m, s = tl.reduce((lane_m, lane_s), 0, _combine)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + offs < n_cols
        v = tl.load(X + row * x_stride + start + offs, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(Y + row * y_stride + start + offs, (tl.exp(v - m) / s).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_bwd(DY, Yp, DX, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_SIZE)
    acc = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + offs < n_cols
        acc += tl.load(DY + row * stride + start + offs, mask=mask, other=0.0) * tl.load(Yp + row * stride + start + offs, mask=mask, other=0.0)
    dot = tl.sum(acc, axis=0)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + offs < n_cols
        yv = tl.load(Yp + row * stride + start + offs, mask=mask, other=0.0)
        dy = tl.load(DY + row * stride + start + offs, mask=mask, other=0.0)
        tl.store(DX + row * stride + start + offs, yv * (dy - dot), mask=mask)


def calculate_settings(n):
    block = min(triton.next_power_of_2(n), 256)
    return block, 4


class LigerSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        BLOCK_SIZE, num_warps = calculate_settings(n_cols)
        _softmax_fwd[(n_rows,)](x, y, x.stride(0), y.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        dy = dy.contiguous()
        dx = torch.empty_like(dy)
        BLOCK_SIZE, num_warps = calculate_settings(y.shape[1])
        _softmax_bwd[(y.shape[0],)](dy, y, dx, y.stride(0), y.shape[1], BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
        return dx


def softmax(x: torch.Tensor) -> torch.Tensor:
    return LigerSoftmax.apply(x)
'''

# honest: a @triton.constexpr_function helper (Triton 3.5 on) doing arithmetic on a constexpr (was refused)
CONSTEXPR_FUNCTION_HELPER = '''
@triton.constexpr_function
def chunk_for(block):
    return min(block, 1024)


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    CHUNK: tl.constexpr = chunk_for(BLOCK_SIZE)
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, CHUNK)
    m = tl.full((), -float("inf"), tl.float32)
    d = tl.full((), 0.0, tl.float32)
    for start in range(0, n_cols, CHUNK):
        v = tl.load(x_ptr + row * x_stride + start + offs, mask=start + offs < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(v, axis=0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(v - m_new), axis=0)
        m = m_new
    for start in range(0, n_cols, CHUNK):
        mask = start + offs < n_cols
        v = tl.load(x_ptr + row * x_stride + start + offs, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(out_ptr + row * out_stride + start + offs, (tl.exp(v - m) / d).to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                      BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
'''

# NumPy on a block inside a @triton.constexpr_function: its body is Python wherever it runs
CONSTEXPR_FUNCTION_NUMPY = '''
import numpy as np


@triton.constexpr_function
def normalise(block):
    d = block.handle.data
    d[...] = np.exp(d - d.max())
    d /= d.sum()
    return block


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
    x = normalise(x)
    tl.store(out_ptr + row * out_stride + offs, x, mask=offs < n_cols)


def softmax(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    softmax_row_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return y
'''


# ---------------------------------------------------------------------------------------------------
# The fourth red team (2026-12-02, in-process, against the third's fixes): each passed the check before
# its fix (the last is honest and was refused).

# getattr with defaults five @triton.jit calls down (the compiler evaluates it on its own values)
DEEP_GETATTR = '''
@triton.jit
def normalise(x):
    # five calls below the kernel: past the depth gpu_compile.not_triton reads (4), so its `getattr` is not seen;
    # Triton's compiler takes getattr (a builtin it knows), and on its values every default below is taken
    h: tl.constexpr = getattr(x, "handle")
    d: tl.constexpr = getattr(h, "data", 0)
    top: tl.constexpr = getattr(d, "max", int)()
    e: tl.constexpr = 2.718281828459045 ** (d - top)
    s: tl.constexpr = getattr(e, "sum", int)() or 1
    getattr(d, "setfield", hasattr)(e / s, "f4")
    return x


@triton.jit
def step4(x):
    return normalise(x)


@triton.jit
def step3(x):
    return step4(x)


@triton.jit
def step2(x):
    return step3(x)


@triton.jit
def step1(x):
    return step2(x)


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    inside = offs < n_cols
    x = tl.load(x_ptr + row * x_stride + offs, mask=inside, other=-float("inf")).to(tl.float32)
    x = step1(x)
    tl.store(out_ptr + row * out_stride + offs, x.to(out_ptr.dtype.element_ty), mask=inside)


def softmax(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    softmax_row_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return y
'''

# the same getattr in a kernel launched under an alias, its name rebound to a clean kernel
ALIAS_GETATTR = '''
@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    inside = offs < n_cols
    x = tl.load(x_ptr + row * x_stride + offs, mask=inside, other=-float("inf")).to(tl.float32)
    h: tl.constexpr = getattr(x, "handle")
    d: tl.constexpr = getattr(h, "data", 0)
    top: tl.constexpr = getattr(d, "max", int)()
    e: tl.constexpr = 2.718281828459045 ** (d - top)
    s: tl.constexpr = getattr(e, "sum", int)() or 1
    getattr(d, "setfield", hasattr)(e / s, "f4")
    tl.store(out_ptr + row * out_stride + offs, x.to(out_ptr.dtype.element_ty), mask=inside)


launched = softmax_row_kernel


# the name the guard's reading of the source follows (gpu_compile.launch: the kernel's name in its globals)
@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    inside = offs < n_cols
    x = tl.load(x_ptr + row * x_stride + offs, mask=inside, other=-float("inf")).to(tl.float32)
    tl.store(out_ptr + row * out_stride + offs, x.to(out_ptr.dtype.element_ty), mask=inside)


def softmax(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    launched[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return y
'''

# the same helper handed to the kernel as a constexpr argument
HANDED_HELPER_GETATTR = '''
@triton.jit
def normalise(x):
    h: tl.constexpr = getattr(x, "handle")
    d: tl.constexpr = getattr(h, "data", 0)
    top: tl.constexpr = getattr(d, "max", int)()
    e: tl.constexpr = 2.718281828459045 ** (d - top)
    s: tl.constexpr = getattr(e, "sum", int)() or 1
    getattr(d, "setfield", hasattr)(e / s, "f4")
    return x


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr, NORM: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    inside = offs < n_cols
    x = tl.load(x_ptr + row * x_stride + offs, mask=inside, other=-float("inf")).to(tl.float32)
    x = NORM(x)     # a @triton.jit function handed in: the guard's reading follows no call through a parameter
    tl.store(out_ptr + row * out_stride + offs, x.to(out_ptr.dtype.element_ty), mask=inside)


def softmax(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    softmax_row_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK_SIZE=triton.next_power_of_2(n_cols),
                                  NORM=normalise)
    return y
'''

# a helper compiled on constexpr numbers (float() compiles there) and run on blocks
UNION_SPECIALIZATIONS = '''import math


@triton.jit
def pyexp(v, m, MODE: tl.constexpr):
    # MODE=1 (called once on constexpr numbers): the compiler takes this branch, and float() of a number
    # compiles. MODE=0 (on blocks): the compiler decides `isinstance(tl.range(1), range)` False and never
    # reads the branch, but its nodes count as compiled, since the helper's visits are kept per name, over
    # every specialization; the interpreter decides it True and runs float() of a block and Python's math.exp.
    if MODE == 1 or isinstance(tl.range(1), range):
        # (float() of a block goes through its __index__ there: scaled by 2**40 to keep the bits)
        return math.exp(float(v * 1099511627776.0) / 1099511627776.0 - float(m * 1099511627776.0) / 1099511627776.0)
    return tl.exp(v - m)


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    unused = pyexp(2.0, 1.0, 1)
    s = tl.full((), 0.0, tl.float32)
    for i in range(n_cols):
        s += pyexp(tl.load(x_ptr + row * x_stride + i).to(tl.float32), m, 0)
    for i in range(n_cols):
        e = pyexp(tl.load(x_ptr + row * x_stride + i).to(tl.float32), m, 0)
        tl.store(out_ptr + row * out_stride + i, (e / s).to(out_ptr.dtype.element_ty))


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                      BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
'''

# a helper named like Triton's own tl.flip, whose compile visited the same node numbers
NAME_COLLISION = '''import math


@triton.jit
def flip(x_ptr, out_ptr, n_cols):
    # Named as Triton's own tl.flip: the compiler's process keeps the nodes it visits by function name alone,
    # so the nodes of Triton's flip that its compile visits (116 of its 197, by their index in body_nodes)
    # count as this helper's nodes of the same index. The branch the compiler decides False is therefore
    # not made to raise; the interpreter decides it True.
    if isinstance(tl.range(1), range):
        values = [float(str(tl.load(x_ptr + i)).strip("[]")) for i in range(n_cols)]
        top = sorted(values)[-1:]
        weights = [math.exp(v - top[0]) for v in values]
        total = [sum(weights)]
        for i in range(n_cols):
            tl.store(out_ptr + i, weights[i] / total[0])
        ...   # (shifts the nodes' order onto indices Triton's flip visited)


row_softmax = flip


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + offs, mask=offs < n_cols, other=0.0).to(tl.float32)
    # Triton's own flip, compiled (not used)
    f = tl.flip(tl.arange(0, 16))
    row_softmax(x_ptr + row * x_stride, out_ptr + row * out_stride, n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                      BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
'''

# a kernel reading a closure variable, which Triton's interpreter reads as a module global
CLOSURE_GLOBAL = '''import numpy as np


def normalise(block):
    """The module's global of that name: plain Python with NumPy. The kernel below names `normalise` as a
    closure variable (a clean @triton.jit helper), which is what the guard and the compiler read; Triton's
    interpreter re-executes the kernel's source at module level, where the name is this global."""
    d = block.handle.data
    d[...] = np.exp(d - d.max())
    d /= d.sum()
    return block


@triton.jit
def keep(x):
    return x


def build():
    normalise = keep

    @triton.jit
    def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK_SIZE)
        inside = offs < n_cols
        x = tl.load(x_ptr + row * x_stride + offs, mask=inside, other=-float("inf")).to(tl.float32)
        x = normalise(x)
        tl.store(out_ptr + row * out_stride + offs, x.to(out_ptr.dtype.element_ty), mask=inside)

    return softmax_row_kernel


softmax_row_kernel = build()


def softmax(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    softmax_row_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return y
'''

# triton.jit of a wrapped bound method: no source, so nothing was compiled
BOUND_METHOD_KERNEL = '''import functools

import numpy as np


def proto(self, x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    pass


class Rows:
    # functools.wraps(partial) leaves __wrapped__ = a partial on the method: Triton's interpreter cannot read its source
    # (inspect unwraps to the partial; its signature is proto's), so it runs the bound method itself, not a rewrite; the grader's compile check
    # (guard._as_compiled) steps aside for anything that is not a plain function, and its reading of the
    # source finds no kernel under the name `run`.
    @functools.wraps(functools.partial(proto))
    def run(self, /, x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr, **ignored):
        row = tl.program_id(0)
        offs = tl.arange(0, int(BLOCK_SIZE))
        mask = offs < n_cols
        v = tl.load(x_ptr + row * x_stride + offs, mask=mask, other=-float("inf"))
        d = v.handle.data
        d[...] = np.exp(d - d.max())
        d /= d.sum()
        tl.store(out_ptr + row * out_stride + offs, v, mask=mask)


softmax_row_kernel = triton.jit(Rows().run)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                      BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
'''

# a grid function returning an object whose __len__ loads, computes and stores
GRID_OBJECT_LEN = '''import numpy as np


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    pass


class Plan:
    """What the grid function returns: the interpreter takes len() of it and adds (1,) * k to it inside the
    launch, with its builder open, and outside the grid function's _StudentCode."""

    def __init__(self, meta, n_rows, n_cols, block):
        self.meta = meta
        self.n_rows = n_rows
        self.n_cols = n_cols
        self.block = block

    def __len__(self):
        offs = tl.arange(0, self.block)
        mask = offs < self.n_cols
        for r in range(self.n_rows):
            v = tl.load(self.meta["x_ptr"] + r * self.meta["x_stride"] + offs, mask=mask, other=-float("inf"))
            d = v.handle.data
            d[...] = np.exp(d - d.max())
            d /= d.sum()
            tl.store(self.meta["out_ptr"] + r * self.meta["out_stride"] + offs, v, mask=mask)
        return 1

    def __add__(self, other):
        return (1, 1, 1)


def softmax(x):
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    softmax_row_kernel[lambda meta: Plan(meta, n_rows, n_cols, block)](x, y, n_cols, x.stride(0), y.stride(0),
                                                                       BLOCK_SIZE=block)
    return y
'''

# a helper's default expression, run again when its rewrite is made inside the launch
HELPER_DEFAULT_RERUN = '''import numpy as np

PENDING = []


def work():
    """A helper's default: evaluated when its `def` runs, which Triton's interpreter does again when it
    rewrites the helper, inside the launch's first program (the grader makes the rewrites there), with the
    interpreter's builder open and outside any _StudentCode. Returns a plain 0 for the compiler."""
    while PENDING:
        meta, n_rows, n_cols, block = PENDING.pop()
        offs = tl.arange(0, block)
        mask = offs < n_cols
        for r in range(n_rows):
            v = tl.load(meta["x_ptr"] + r * meta["x_stride"] + offs, mask=mask, other=-float("inf"))
            d = v.handle.data
            d[...] = np.exp(d - d.max())
            d /= d.sum()
            tl.store(meta["out_ptr"] + r * meta["out_stride"] + offs, v, mask=mask)
    return 0


def make_keep():
    @triton.jit
    def keep(x, unused=work()):
        return x
    return keep


keep = make_keep()


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    x = keep(tl.zeros([BLOCK_SIZE], tl.float32))


def plan(meta, n_rows, n_cols, block):
    PENDING.append((meta, n_rows, n_cols, block))
    return (1,)


def softmax(x):
    global keep
    keep = make_keep()      # a new function each call: the interpreter rewrites it afresh
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    softmax_row_kernel[lambda meta: plan(meta, n_rows, n_cols, block)](x, y, n_cols, x.stride(0), y.stride(0),
                                                                       BLOCK_SIZE=block)
    return y
'''

# the interpreter's C load and store called from host code
HOST_C_LOAD = '''import numpy as np


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * out_stride + cols, x * 0, mask=mask)


# One launch when the cell runs: Triton's interpreter, rewriting the kernel, copies its own module's globals
# into this module's (interpreter.py's _compile_and_exec), among them `_interpreter`, its C loads and stores.
_warm = torch.zeros(1, 1)
softmax_row_kernel[(1,)](_warm, _warm, 1, 1, 1, BLOCK_SIZE=1)


def addresses(t):
    rows = np.arange(t.shape[0], dtype=np.uint64)[:, None] * np.uint64(t.stride(0))
    cols = np.arange(t.shape[1], dtype=np.uint64)[None, :] * np.uint64(t.stride(1))
    return np.uint64(t.data_ptr()) + (rows + cols) * np.uint64(t.element_size())


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(1,)](x, y, 1, x.stride(0), y.stride(0), BLOCK_SIZE=1)
    read, write = _interpreter.load, _interpreter.store
    where = addresses(x)
    v = read(where, np.ones(where.shape, bool), np.zeros(where.shape, np.float32), np.dtype(np.float32))
    v = v.astype(np.float64)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    write(addresses(y), (e / e.sum(axis=1, keepdims=True)).astype(np.float32), np.ones(where.shape, bool))
    return y
'''

# honest: tl.static_assert with an f-string message (the message was poisoned)
STATIC_ASSERT_FSTRING = '''
@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    tl.static_assert(BLOCK_SIZE >= 1, f"BLOCK_SIZE must be at least 1, got {BLOCK_SIZE}")
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * x_stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * out_stride + offs, (e / tl.sum(e, axis=0)).to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                      BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
'''


# -- the fifth red team's (through the pipeline; each scored 3/3 before its fix) -----------------------
# A @triton.jit helper that takes one tuple, called twice: once with a constexpr string (the compiler runs the
# Python branch on it: NumPy's functions, reached through a Triton module, on constexprs), once with the
# loaded block (the compiler takes the other branch, zeros). Before the fix a tuple's kind was "any" and
# matched every call the compiler compiled, so the interpreter ran the first call's branch on the block, its
# values read as text (the interpreter's tl.tensor.__str__).
TWO_FACED_HELPER = '''
import math
import numpy
import triton.runtime.interpreter as TI

numpy.set_printoptions(threshold=10**9, floatmode="unique", linewidth=10**9)
SAMPLE = tl.constexpr("[1.0 2.0 3.0]")


@triton.jit
def _finish(t):
    # t: (values, the loaded block, which call, where to store, mask)
    if t[2] == 0 or isinstance(tl.range(1), range):
        N: tl.constexpr = TI.np
        a: tl.constexpr = N.array(f"{t[0]}".replace("constexpr", " ").replace("[", " ").replace("]", " ").split()).astype(float)
        e: tl.constexpr = math.e ** (a - a.max())
        p: tl.constexpr = (e / e.sum()).astype(N.float32)
        h: tl.constexpr = (tl.constexpr("{}{}".format), tl.constexpr(TI.TensorHandle))[t[2]](p, (tl.constexpr(float), tl.float32)[t[2]])
        tl.store(t[3], (t[1], (tl.constexpr("{}{}".format), tl.constexpr(tl.tensor))[t[2]](h, t[1].type))[t[2]], mask=t[4])
    else:   # what a GPU runs: zeros, not a softmax
        tl.store(t[3], t[1] * 0.0, mask=t[4])


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    _finish((SAMPLE, x, 0, out_ptr + row * out_stride + cols, mask))
    _finish((x, x, 1, out_ptr + row * out_stride + cols, mask))


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    softmax_row_kernel[(n_rows,)](x, out, n_cols, x.stride(0), out.stride(0),
                                  BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return out
'''

# The same branch told apart by the text of a constexpr ("0" where Triton compiles, "constexpr[0]" here).
TWO_FACES_BY_TEXT = TWO_FACED_HELPER.replace('isinstance(tl.range(1), range):', 'f"{tl.constexpr(0)}"[0] == "c":   # "0" where Triton compiles, "constexpr[0]" here')


def _text_of_a_block(expression: str) -> str:
    """A softmax kernel that makes text of the loaded block by `expression` (of `x`), at compile time a
    placeholder's text, in the interpreter the values'."""
    return f'''
@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    text: tl.constexpr = {expression}
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * out_stride + cols, e / tl.sum(e, axis=0) + 0 * len(text), mask=cols < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                      BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
'''


# Ways from a block's values to Python text, each refused where Triton's compiler meets it (gpu_compile's
# police_compile_time): formatting by `%`, a string's method handed the block, a dunder of Triton's class,
# the block's handle.
TEXT_OF_A_BLOCK = {"percent_of_a_tuple": _text_of_a_block('"%s" % (x,)'),
                   "format_method": _text_of_a_block('"{}".format(x)'),
                   "dunder_str": _text_of_a_block("tl.tensor.__str__(x)"),
                   "handle": _text_of_a_block("x.handle")}

# The fifth red team's union without any module but Triton's: the first call formats a constexpr string, the
# second (a block) must not run that branch, which the compiler compiled for the first call only.
UNION_OF_TWO_CALLS = '''
SAMPLE = tl.constexpr("1.0 2.0")


@triton.jit
def _finish(t):
    if t[2] == 0 or isinstance(tl.range(1), range):
        text: tl.constexpr = "%s" % (t[0],)
        tl.store(t[3], t[1] * 0.0 + len(text), mask=t[4])
    else:
        tl.store(t[3], tl.exp(t[1] - tl.max(t[1], axis=0)) / tl.sum(tl.exp(t[1] - tl.max(t[1], axis=0)), axis=0), mask=t[4])


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    _finish((SAMPLE, x, 0, out_ptr + row * out_stride + cols, mask))
    _finish((x, x, 1, out_ptr + row * out_stride + cols, mask))


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                      BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
'''

# honest: several rows per program, exp2 with a constexpr global, keep_dims, an online kernel for wide rows (the fifth red team's)
HONEST_ROWS_EXP2_KEEPDIMS = '''
RCP_LN2 = tl.constexpr(1.4426950408889634)
MAX_BLOCK = 4096


@triton.jit
def _rows_kernel(x_ptr, y_ptr, n_rows, n_cols, sx, sy, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    r = pid * ROWS + tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, BLOCK)[None, :]
    m = (r < n_rows) & (c < n_cols)
    z = tl.load(x_ptr + r * sx + c, mask=m, other=-float("inf")).to(tl.float32) * RCP_LN2
    top = tl.max(z, axis=1, keep_dims=True)
    top = tl.where(top == -float("inf"), 0.0, top)
    p = tl.exp2(z - top)
    s = tl.sum(p, axis=1, keep_dims=True)
    tl.store(y_ptr + r * sy + c, (p / s).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _wide_kernel(x_ptr, y_ptr, n_cols, sx, sy, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + row * sx
    yr = y_ptr + row * sy
    offs = tl.arange(0, BLOCK)
    m_i = tl.full([BLOCK], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK], tl.float32)
    for start in tl.range(0, n_cols, BLOCK, num_stages=STAGES):
        z = tl.load(xr + start + offs, mask=start + offs < n_cols, other=-float("inf")).to(tl.float32) * RCP_LN2
        m_new = tl.maximum(m_i, z)
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp2(m_i - m_new))
        l_i = l_i * alpha + tl.where(m_new == -float("inf"), 0.0, tl.exp2(z - m_new))
        m_i = m_new
    m_row = tl.max(m_i, axis=0)
    l_row = tl.sum(l_i * tl.exp2(m_i - m_row), axis=0)
    for start in tl.range(0, n_cols, BLOCK, num_stages=STAGES):
        inside = start + offs < n_cols
        z = tl.load(xr + start + offs, mask=inside, other=-float("inf")).to(tl.float32) * RCP_LN2
        tl.store(yr + start + offs, (tl.exp2(z - m_row) / l_row).to(y_ptr.dtype.element_ty), mask=inside)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    if block <= MAX_BLOCK:
        rows = max(1, min(16, 4096 // block))
        _rows_kernel[(triton.cdiv(n_rows, rows),)](x, y, n_rows, n_cols, x.stride(0), y.stride(0),
                                                   ROWS=rows, BLOCK=block, num_warps=8 if block >= 2048 else 4)
    else:
        _wide_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=2048, STAGES=3, num_warps=8)
    return y
'''

# honest: online softmax as tl.reduce with a (max, sum) combine function, a helper with a constexpr default (the fifth red team's)
HONEST_REDUCE_COMBINE = '''
@triton.jit
def _merge(m_a, d_a, m_b, d_b):
    m = tl.maximum(m_a, m_b)
    safe = tl.where(m == -float("inf"), 0.0, m)
    return m, d_a * tl.exp(m_a - safe) + d_b * tl.exp(m_b - safe)


@triton.jit
def _chunk(ptr, start, n_cols, BLOCK: tl.constexpr, fill: tl.constexpr = -float("inf")):
    offs = start + tl.arange(0, BLOCK)
    return tl.load(ptr + offs, mask=offs < n_cols, other=fill).to(tl.float32), offs


@triton.jit
def softmax_online(x_ptr, y_ptr, n_cols, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m_run = -float("inf")
    d_run = 0.0
    for start in range(0, n_cols, BLOCK):
        v, _ = _chunk(x_ptr + row * sx, start, n_cols, BLOCK)
        ones = tl.where(v == -float("inf"), 0.0, 1.0)
        m_blk, d_blk = tl.reduce((v, ones), 0, _merge)
        m_run, d_run = _merge(m_run, d_run, m_blk, d_blk)
    for start in range(0, n_cols, BLOCK):
        v, offs = _chunk(x_ptr + row * sx, start, n_cols, BLOCK)
        tl.store(y_ptr + row * sy + offs, (tl.exp(v - m_run) / d_run).to(y_ptr.dtype.element_ty), mask=offs < n_cols)


def softmax(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    block = min(1024, triton.next_power_of_2(x.shape[1]))
    softmax_online[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=block)
    return y
'''

# honest: torch.library.triton_op and wrap_triton (the fifth red team's)
HONEST_TRITON_OP = '''
from torch.library import triton_op, wrap_triton


@triton.jit
def _sm_kernel(x_ptr, y_ptr, n_cols, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m_acc = tl.full([BLOCK], -float("inf"), tl.float32)
    for s in range(0, n_cols, BLOCK):
        m_acc = tl.maximum(m_acc, tl.load(x_ptr + row * sx + s + cols, mask=s + cols < n_cols, other=-float("inf")))
    top = tl.max(m_acc, axis=0)
    d_acc = tl.zeros([BLOCK], tl.float32)
    for s in range(0, n_cols, BLOCK):
        d_acc += tl.exp(tl.load(x_ptr + row * sx + s + cols, mask=s + cols < n_cols, other=-float("inf")) - top)
    denom = tl.sum(d_acc, axis=0)
    for s in range(0, n_cols, BLOCK):
        ok = s + cols < n_cols
        v = tl.load(x_ptr + row * sx + s + cols, mask=ok, other=-float("inf"))
        tl.store(y_ptr + row * sy + s + cols, tl.exp(v - top) / denom, mask=ok)


@triton_op("honest_five::softmax", mutates_args={})
def softmax_op(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    block = min(2048, triton.next_power_of_2(x.shape[1]))
    wrap_triton(_sm_kernel)[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=block)
    return y


def softmax(x: torch.Tensor) -> torch.Tensor:
    return softmax_op(x)
'''


# -- the sixth red team's (against the compile-time rules; the first three scored 3/3 through the pipeline) --
# A block's text through an f-string of tl.constexpr(block): the compiler formats its own placeholder
# ("fp32[]"), the interpreter the values; the row's sum read back as a Python float.
FSTRING_OF_CONSTEXPR_BLOCK = '''
@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    s = tl.sum(e, axis=0)
    text: tl.constexpr = f"{tl.constexpr(s)}"
    digits: tl.constexpr = text.replace("constexpr", "").replace("fp32", "").replace("[", "").replace("]", "").strip()
    inv: tl.constexpr = 1.0 / (float("0" + digits) + 1e-30)
    tl.store(out_ptr + row * out_stride + cols, (e * inv).to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                      BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
'''

# Python's max of two blocks: Triton's elementwise maximum where it compiles, Python's max (the second block
# whole) in the interpreter. On a GPU every element would be 1e30.
PYTHON_MAX_OF_BLOCKS = '''
@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    p = e / tl.sum(e, axis=0)
    y = max(p * 0.0 + 1e30, p)
    tl.store(out_ptr + row * out_stride + cols, y.to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                      BLOCK_SIZE=max(2, triton.next_power_of_2(x.shape[1])))
    return y
'''

# Every output value computed by Python's math from the text of a chunk (f-strings of tl.constexpr(block)).
PYTHON_SOFTMAX_FROM_TEXT = '''
import math


@triton.jit
def _exp_in_python(d, tot, offs, CH: tl.constexpr):
    total: tl.constexpr = f"{tl.constexpr(tot)}".replace("constexpr", "").replace("fp32", "").replace("[", "").replace("]", "").strip()
    s: tl.constexpr = float("0" + total) + 1e-30
    parts: tl.constexpr = f"{tl.constexpr(d)}".replace("constexpr", " ").replace("fp32", " ").replace("[", " ").replace("]", " ").split()
    out = tl.zeros([CH], tl.float32)
    for j in tl.static_range(len(parts)):
        out = tl.where(offs == j, math.exp(min(float(parts[j]), 0.0)) / s, out)
    return out


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, x_stride, out_stride, N: tl.constexpr, CH: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, CH)
    top = tl.full([CH], -float("inf"), tl.float32)
    for c in tl.static_range(0, N, CH):
        top = tl.maximum(top, tl.load(x_ptr + row * x_stride + c + offs, mask=c + offs < N, other=-float("inf")))
    m = tl.max(top, axis=0)
    acc = tl.zeros([CH], tl.float32)
    for c in tl.static_range(0, N, CH):
        acc += tl.exp(tl.load(x_ptr + row * x_stride + c + offs, mask=c + offs < N, other=-float("inf")) - m)
    tot = tl.sum(acc, axis=0)
    for c in tl.static_range(0, N, CH):
        d = tl.load(x_ptr + row * x_stride + c + offs, mask=c + offs < N, other=0.0) - m
        tl.store(out_ptr + row * out_stride + c + offs, _exp_in_python(d, tot, offs, CH), mask=c + offs < N)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.stride(0), y.stride(0), N=x.shape[1], CH=256)
    return y
'''

# Triton's print held in a constexpr local, which the source's reading does not follow: a way out for a
# block's exact values (hex=True).
PRINT_THROUGH_A_LOCAL = '''
@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    show: tl.constexpr = tl.device_print
    show("LEAK", x, hex=True)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * out_stride + cols, (e / tl.sum(e, axis=0)).to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                      BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
'''


def honest_with(line: str, extra: str = "") -> str:
    """The basic honest kernel with `line` at the top of its body."""
    return extra + f'''
@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    {line}
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * out_stride + cols, (e / tl.sum(e, axis=0)).to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                      BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
'''



# Honest lines at the top of the basic kernel (the sixth red team's; the first two were refused: an
# assertion's message that is not plain text, and tl.PropagateNan, a class of Triton's C++ module)
HONEST_LINES = {
    "static_assert_format": ('tl.static_assert(BLOCK_SIZE >= 1, "BLOCK_SIZE must be at least 1, got {}".format(BLOCK_SIZE))', ""),
    "static_assert_percent": ('tl.static_assert(BLOCK_SIZE <= 1048576, "BLOCK_SIZE=%d over %d" % (BLOCK_SIZE, 1048576))', ""),
    "propagate_nan": ("z = tl.maximum(tl.zeros([BLOCK_SIZE], tl.float32), tl.zeros([BLOCK_SIZE], tl.float32), "
                      "propagate_nan=tl.PropagateNan.ALL)", ""),
    "dtype_methods": ("tl.static_assert(x_ptr.dtype.element_ty.is_floating() and "
                      "out_ptr.dtype.element_ty.primitive_bitwidth >= 16)", ""),
    "math_constant": ("tl.static_assert(math.pi > 3 and math.log2(BLOCK_SIZE) >= 0)", "import math\n"),
    "constexpr_tuple_global": ("tl.static_assert(LIMITS[0] <= BLOCK_SIZE)", "LIMITS = tl.constexpr((1, 1 << 20))\n"),
    "libdevice": ("z = libdevice.exp(tl.zeros([BLOCK_SIZE], tl.float32))", "from triton.language.extra import libdevice\n"),
    "triton_cdiv": ("WARPS: tl.constexpr = triton.cdiv(BLOCK_SIZE, 32)", ""),
    "min_of_constexprs": ("SMALL: tl.constexpr = min(BLOCK_SIZE, 64)", ""),
    # the honest sweep of days 3 to 5 (Triton's matmul tutorial's `min` of two scalars; a block's methods),
    # and an f-string of a constexpr global with a format spec, which the compiler ignores
    "min_of_scalars": ("first = min(tl.program_id(0), n_cols - 1)", ""),
    "block_methods": ("z = tl.zeros([BLOCK_SIZE], tl.float32).sum(axis=0) + tl.zeros([BLOCK_SIZE], tl.float32).max(axis=0)",
                      ""),
    "fstring_of_a_constexpr": ('tl.static_assert(BLOCK_SIZE >= LEAST, f"BLOCK_SIZE is {BLOCK_SIZE:d}, under {LEAST}")',
                               "LEAST = tl.constexpr(1)\n"),
}

# honest: Triton's elementwise minimum and maximum (in Triton 3.3 the very functions its compiler takes
# Python's min and max for)
TL_MINIMUM_MAXIMUM = '''
@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    x = tl.minimum(tl.maximum(x, -1e30), 1e30)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * out_stride + cols, (e / tl.sum(e, axis=0)).to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                      BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
'''


# -- the seventh red team's -----------------------------------------------------------------------------------
# One launch of 2 x rows programs: the first half stores each row's max and sum, the second half reads them.
# A GPU runs the programs in no set order (the readers may find uninitialised memory); the interpreter ran
# them in order, so the readers always found the statistics.
PROGRAM_ORDER_RACE = '''
@triton.jit
def softmax_two_phase(x_ptr, out_ptr, stats_ptr, n_rows, n_cols, x_stride, out_stride, BLOCK: tl.constexpr):
    # One launch, two phases: programs [0, n_rows) write each row's max and sum, programs [n_rows, 2 n_rows)
    # read them and normalise. Nothing orders the phases on a GPU (programs run concurrently, in no set
    # order); Triton's interpreter runs programs one after another, in order.
    pid = tl.program_id(0)
    row = pid % n_rows
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * x_stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
    if pid < n_rows:
        m = tl.max(x, axis=0)
        s = tl.sum(tl.exp(x - m), axis=0)
        tl.store(stats_ptr + 2 * row, m)
        tl.store(stats_ptr + 2 * row + 1, s)
    else:
        m = tl.load(stats_ptr + 2 * row)
        s = tl.load(stats_ptr + 2 * row + 1)
        tl.store(out_ptr + row * out_stride + offs, (tl.exp(x - m) / s).to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    stats = torch.empty((n_rows, 2), dtype=torch.float32, device=x.device)
    softmax_two_phase[(2 * n_rows,)](x, y, stats, n_rows, n_cols, x.stride(0), y.stride(0),
                                     BLOCK=triton.next_power_of_2(n_cols))
    return y
'''


# The seventh red team's value-level differences: a condition Triton's compiler and the interpreter decide
# differently (their objects differ), used with no branch, to select a value: 0.0 for the compiler, which
# every rule accepts, the block for the interpreter, whose values Python's math (or `%d`, float() and **)
# then read. Each expression's value in the interpreter is now checked against the compiler's.
VALUE_DIFFERENCES = {
    "python_exp_by_argument_selection": '''
import math


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    # Triton's compiler decides C False (tl.range is its class), the interpreter True (tl.range is range)
    C: tl.constexpr = isinstance(tl.range(1), range)
    # exp by Python's math: the compiler hands math.ldexp 0.0 (and stores 1.0), the interpreter the value
    for i in range(n_cols):
        tl.store(out_ptr + row * out_stride + i,
                 math.exp(math.ldexp((0.0, (tl.load(x_ptr + row * x_stride + i) - m) * 1099511627776.0)[C], -40)))
    e = tl.load(out_ptr + row * out_stride + offs, mask=offs < n_cols, other=0.0)
    tl.store(out_ptr + row * out_stride + offs, e / tl.sum(e, axis=0), mask=offs < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                      BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
''',
    "python_exp_static_range": '''
import math


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, x_stride, out_stride, N: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + offs, mask=offs < N, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    C: tl.constexpr = isinstance(tl.range(1), range)
    # exp by Python's math in the interpreter: the compiler hands math.ldexp 0.0, the interpreter the block
    for i in tl.static_range(N):
        tl.store(out_ptr + row * out_stride + i,
                 math.exp(math.ldexp((0.0, (tl.load(x_ptr + row * x_stride + i) - m) * 1099511627776.0)[C], -40)))
    e = tl.load(out_ptr + row * out_stride + offs, mask=offs < N, other=0.0)
    tl.store(out_ptr + row * out_stride + offs, e / tl.sum(e, axis=0), mask=offs < N)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.stride(0), y.stride(0), N=x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
''',
    "no_python_function_is_and_percent": '''
@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    # `is` of a constexpr and an int: True where Triton compiles (it unwraps constexprs), False here.
    C: tl.constexpr = tl.constexpr(2) is 2
    # no function of Python's at all: "%d" % value (its __index__ here), float() of text, and ** on floats
    for i in range(n_cols):
        tl.store(out_ptr + row * out_stride + i, 2.718281828459045 ** (float(
            "%d" % ((tl.load(x_ptr + row * x_stride + i) - m) * 1099511627776.0, 0)[C]) * 9.094947017729282e-13))
    e = tl.load(out_ptr + row * out_stride + offs, mask=offs < n_cols, other=0.0)
    tl.store(out_ptr + row * out_stride + offs, e / tl.sum(e, axis=0), mask=offs < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                      BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
''',
    "python_normaliser_text_condition": '''
import math


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    s = tl.sum(e, axis=0)
    # "0" where Triton compiles, "constexpr[0]" in the interpreter
    C: tl.constexpr = f"{tl.constexpr(0)}"[0] == "c"
    # the row's normaliser by Python: the compiler hands math.ldexp 1.0 (and never divides), the
    # interpreter the row's sum, scaled so that its __index__ keeps every bit
    inv = 1.0 / math.ldexp((1099511627776.0, s * 1099511627776.0)[C], -40)
    tl.store(out_ptr + row * out_stride + offs, e * inv, mask=offs < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                      BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
''',
    "loop_index_isinstance": '''
import math


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    s = tl.sum(e, axis=0)
    for k in range(0, 1):
        # a loop's index: a block where Triton compiles, a Python int in the interpreter
        inv = 1.0 / math.ldexp((1099511627776.0, s * 1099511627776.0)[isinstance(k, int)], -40)
        tl.store(out_ptr + row * out_stride + offs, e * inv, mask=offs < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                      BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
''',
}


# The eighth red team's, against the value checks: a dtype named by a constexpr's text (text was compared by
# kind only, dtypes not at all), a condition that differs in one iteration of a tl.static_range (each node's
# values were one set over the iterations), and a row's sums computed by a @triton.constexpr_function from
# the text of a block's bound method, carried from call to call in a list default.
EIGHTH_TEAM = {
    "dtype_named_by_text": '''@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    # a dtype named by text: "int1" where Triton compiles (f"{constexpr(0)}" is "0"), "fp32" in the interpreter
    D = tl.dtype(f"{tl.constexpr(0)}".replace("constexpr[0]", "fp32").replace("0", "int1"))
    x = tl.load(x_ptr + row * x_stride + offs, mask=mask, other=0.0).to(D).to(tl.float32)
    x = tl.where(mask, x, -float("inf"))
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    tl.store(y_ptr + row * y_stride + offs, e / tl.sum(e, axis=0), mask=mask)


def softmax(x):
    y = torch.empty_like(x)
    softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
''',
    "static_range_union": '''@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * x_stride + offs, mask=mask, other=-float("inf"))
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    out = e * 0.0
    for k in tl.static_range(2):
        # compiler: False at k=0 (a tl.range object), True at k=1; the interpreter: True at both (its tl.range
        # makes Python's range). Each node's values are the union over both unrolled iterations: they agree.
        if isinstance((tl.range if k == 0 else range)(1), range):
            out += 0.5 * (e / tl.sum(e, axis=0))
        else:
            out += 0.5 * e
    tl.store(y_ptr + row * y_stride + offs, out, mask=mask)


def softmax(x):
    y = torch.empty_like(x)
    softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
''',
    "python_sum_from_bound_method_text": '''import math


@triton.constexpr_function
def sum_bit(xt, mt, b, memo=["", "", 0]):
    # Python: parse the row chunk and its max from their texts, sum exp(x - m), hand back bit b of the sum's
    # float32 bits as a dtype's name (the only thing a kernel is checked for is that this is text)
    if memo[0] != xt or memo[1] != mt:
        m = 0.0
        for i in range(len(mt) - 6):
            if mt[i:i + 6] == "array(":
                j = i + 6
                while_ok = True
                for k in range(j, len(mt)):
                    if while_ok and not (mt[k] in "0123456789.-+e[ "):
                        while_ok = False
                        tok = mt[j:k]
                        if len(tok) > 0 and tok[0] == "[":
                            tok = tok[1:]
                        if len(tok) > 0 and tok[0] in "-0123456789":
                            m = float(tok)
        s = 0.0
        start = -1
        first = len(xt)
        last = 0
        for i in range(len(xt) - 7):
            if first == len(xt) and xt[i:i + 7] == "array([":
                first = i + 7
        for i in range(first, len(xt)):
            if last == 0 and xt[i] == "]":
                last = i
        for i in range(first, last + 1):
            if start < 0 and (xt[i] in "0123456789" or (xt[i] == "-" and i + 1 < len(xt) and xt[i + 1] in "0123456789")):
                start = i
            elif start >= 0 and not (xt[i] in "0123456789.-+e"):
                s += math.exp(min(float(xt[start:i]) - m, 0.0))
                start = -1
        bits = 0
        if s > 0:
            fm, fe = math.frexp(s)
            mant = int(round((2 * fm - 1) * 8388608))
            big = fe + 126
            if mant >= 8388608:
                mant = 0
                big = big + 1
            if big > 0:
                bits = big * 8388608 + mant
        memo[0] = xt
        memo[1] = mt
        memo[2] = bits
    return "fp32" if (memo[2] // (2 ** b)) % 2 == 1 else "fp16"


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = tl.full((), -float("inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        xc = tl.load(x_ptr + row * x_stride + start + offs, mask=start + offs < n_cols, other=-float("inf"))
        m = tl.maximum(m, tl.max(xc, axis=0))
    total = tl.full((), 0.0, tl.float32)
    for start in range(0, n_cols, BLOCK):
        xc = tl.load(x_ptr + row * x_stride + start + offs, mask=start + offs < n_cols, other=-float("inf"))
        acc = tl.full((), 0, tl.int32)
        for b in tl.static_range(31):
            # the interpreter's text of a bound method holds the block's values (its repr); the compiler's, none
            D = tl.dtype(sum_bit(f"{tl.constexpr(xc.to)}", f"{tl.constexpr(m.to)}", b))
            bit = (tl.full((), 1e-30, D).to(tl.float32) > 0).to(tl.int32)
            acc += bit * (1 << b)
        total += acc.to(tl.float32, bitcast=True)
    for start in range(0, n_cols, BLOCK):
        xc = tl.load(x_ptr + row * x_stride + start + offs, mask=start + offs < n_cols, other=-float("inf"))
        tl.store(y_ptr + row * y_stride + start + offs, tl.exp(xc - m) / total, mask=start + offs < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=512)
    return y
''',
}

# honest: a row's sum by tl.reduce with the kernel's own add (the tenth red team's: the interpreter folded
# 17000 floats one by one and missed rtol 1e-5; a GPU, and now the interpreter, fold them pairwise)
HONEST_REDUCE_SUM = '''
@triton.jit
def add(a, b):
    return a + b


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    total = tl.reduce(e, 0, add)
    tl.store(out_ptr + row * out_stride + cols, (e / total).to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
'''


# honest: an unrolled loop whose body rebinds its index (a block to the compiler from there on)
HONEST_STATIC_LOOP_REBOUND = '''
@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    acc = e * 0.0
    for k in tl.static_range(2):
        k = k + 1
        acc += e * (k / 3.0)
    tl.store(out_ptr + row * out_stride + cols, (acc / tl.sum(acc, axis=0)).to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
'''


# The ninth red team's: a list kept as a constexpr (`W: tl.constexpr = list(...)`) and reversed in a loop or
# an untaken branch. The compiler reads a loop's body twice and both branches of a run-time `if`, the
# interpreter runs what it runs: the list ended in another state on each side, and every value read from it
# was one the compiler had seen. A kernel may no longer make a list or call a method that changes one.
NINTH_TEAM = {
    "list_reversed_in_for_loop": '''@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * in_stride + offs, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    s = tl.sum(e, axis=0)
    W: tl.constexpr = list((0.0, 1.0))
    y = e
    for k in range(3):
        W.reverse()
        y = W[0] * (e / s) + (1.0 - W[0]) * e
    tl.store(out_ptr + row * out_stride + offs, y, mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return y
''',
    "triton_function_list_reversed_in_untaken_if": '''@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * in_stride + offs, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    NORM: tl.constexpr = list((tl.sum, tl.max))
    if row < 0:
        NORM.reverse()
    s = NORM[0](e, axis=0)
    tl.store(out_ptr + row * out_stride + offs, e / s, mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return y
''',
}


# The tenth red team's, in the notebook's own process only (the submission rules refuse writing a module's
# attribute, `__module__` and `update_wrapper`, so through the pipeline each scores 0 before it runs): the
# notebook replaces `tl.max` there by a function of its own that states Triton's module and a name, and
# returns the row's log-sum-exp. The compiler's process imports Triton afresh and compiles the real max, so
# a GPU stores exp(x - max), not a softmax; the interpreter stored the softmax, and the forged function
# agreed by the module and name it stated. Triton's functions are now told by identity.
_TENTH_TEAM_KERNEL = '''
@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * in_stride + offs, mask=mask, other=-float("inf"))
    m = tl.max(x, axis=0)
    tl.store(out_ptr + row * out_stride + offs, tl.exp(x - m), mask=mask)


def softmax(x):
    y = torch.empty_like(x)
    softmax_kernel[(x.shape[0],)](y, x, x.stride(0), y.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
'''
_LOG_SUM_EXP = '''
_tl_max = tl.max


def _log_sum_exp(input, axis=None, **kwargs):
    m = _tl_max(input, axis, **kwargs)
    return m + tl.log(tl.sum(tl.exp(input - m), axis))

'''
TENTH_TEAM = {
    "update_wrapper_of_tl_max": "import functools\n" + _LOG_SUM_EXP
    + "tl.max = functools.update_wrapper(_log_sum_exp, _tl_max)\n" + _TENTH_TEAM_KERNEL,
    "a_stand_ins_name": _LOG_SUM_EXP + "_log_sum_exp.__module__, _log_sum_exp.__name__ = 'triton.language', 'wrapper'\n"
    "tl.max = _log_sum_exp\n" + _TENTH_TEAM_KERNEL,
    "a_jit_function_named_max": _LOG_SUM_EXP.replace("def _log_sum_exp", "def max").replace("_log_sum_exp", "max")
    .replace("_tl_max = tl.max", "_tl_max = tl.max\n\n\n@triton.jit") + "tl.max = max\n" + _TENTH_TEAM_KERNEL,
}


# The eleventh red team's (each printed PASS in the notebook's process and broke no submission rule): a
# combine function that tells the interpreter's blocks from the compiler's scalars (the pairwise fold
# handed it whole blocks), one that keeps its first argument (a GPU's lanes combine in the compiler's
# order), a float past int32's range converted (NumPy gives -2**31, the GPU 2**31 - 1), and a combine
# function that passes the front end and fails in the GPU back end's passes (no verdict was given there).
ELEVENTH_TEAM = {
    'combine_tells_a_block_from_a_scalar': '''@triton.jit
def add_pairs(a, b):
    u, v = tl.split(tl.broadcast_to(a, [2]))
    return a + b + (u - v)


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    total = tl.sum(e, axis=0)
    f = tl.reduce(tl.arange(0, 4).to(tl.float32), 0, add_pairs)
    y = tl.where(f == 2.0, e / total, e)
    tl.store(out_ptr + row * out_stride + cols, y.to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
''',
    'combine_keeps_its_first_argument': '''@triton.jit
def first(a, b):
    return a


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    total = tl.sum(e, axis=0)
    f = tl.reduce(cols.to(tl.float32), 0, first)
    y = tl.where(f == 0.0, e / total, e)
    tl.store(out_ptr + row * out_stride + cols, y.to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
''',
    'float_past_int32_converted': '''@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    total = tl.sum(e, axis=0)
    big = (m * 0.0 + 3.0e9).to(tl.int32)
    r = tl.where(big < 0, 0.0, 1.0)
    tl.store(out_ptr + row * out_stride + cols, (e / (total + r * total)).to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
''',
    'combine_fails_in_the_gpu_back_end': '''@triton.jit
def spread(a, b):
    return tl.sum(tl.join(a, b), axis=None)


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    total = tl.sum(e, axis=0)
    k = tl.reduce(tl.full([4], 1.0, tl.float32), 0, spread)
    y = tl.where(k == 8.0, e / total, e)
    tl.store(out_ptr + row * out_stride + cols, y.to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
''',
    'loop_index_floor_divides': '''@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    total = tl.sum(e, axis=0)
    scale = total
    for i in range(-1, 0):
        scale = total * (i // 2 + 2)
    tl.store(out_ptr + row * out_stride + cols, (e / scale).to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
''',
    'loop_index_never_overflows': '''@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    total = tl.sum(e, axis=0)
    scale = total
    for i in range(1, 2):
        wide = i * 65536 * 65536
        scale = tl.where(wide == 0, total * 2.0, total)
    tl.store(out_ptr + row * out_stride + cols, (e / scale).to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    softmax_row_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y
''',
}


# The twelfth red team's: a probe the interpreter's exact NumPy math and the GPU's approximate, flushing
# instructions answer differently (a correct softmax here, an unnormalised one on an H200).
TWELFTH_TEAM = {
    'sqrt_flushes_a_subnormal': '''@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    s = tl.sum(e, axis=0)
    # a tiny "epsilon" kept away from zero: 1e-20 squared is 1e-40, a float32 subnormal
    tiny = tl.abs(m) * 0.0 + 1e-20
    eps = tl.sqrt(tiny * tiny)
    # eps is 1e-20 in NumPy; sqrt.approx.ftz.f32 flushes the subnormal input -> 0.0 on a GPU
    y = tl.where(eps > 0.0, e / s, e)
    tl.store(y_ptr + row * y_stride + cols, y, mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK_SIZE=BLOCK_SIZE)
    return y
''',
    'rsqrt_flushes_a_subnormal': '''@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    s = tl.sum(e, axis=0)
    # rsqrt of a subnormal: NumPy 1e20; rsqrt.approx.ftz.f32 flushes the input: +inf on a GPU
    tiny = m * 0.0 + 1e-20
    r = tl.rsqrt(tiny * tiny)
    y = tl.where(r < 1e30, e / s, e)
    tl.store(y_ptr + row * y_stride + cols, y, mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK_SIZE=BLOCK_SIZE)
    return y
''',
    'exp2_flushes_a_subnormal_result': '''@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    s = tl.sum(e, axis=0)
    # 2**-140 is a float32 subnormal: NumPy keeps it; ex2.approx.ftz.f32 flushes it to 0.0 on a GPU
    tiny = tl.exp2(m * 0.0 - 140.0)
    y = tl.where(tiny > 0.0, e / s, e)
    tl.store(y_ptr + row * y_stride + cols, y, mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK_SIZE=BLOCK_SIZE)
    return y
''',
    'exp_rounds_its_product_first': '''@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    s = tl.sum(e, axis=0)
    # exp(45) as NumPy rounds it; a GPU's tl.exp is ex2.approx.f32(fl(45 * log2e)), ~50 float32 ulps away
    big = tl.exp(m * 0.0 + 45.0)
    y = tl.where(tl.abs(big / 3.4934271e19 - 1.0) < 1e-6, e / s, e)
    tl.store(y_ptr + row * y_stride + cols, y, mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK_SIZE=BLOCK_SIZE)
    return y
''',
}


# The twelfth red team's honest kernel in Liger-Kernel's manner: cache hints on loads and stores, an int64 row
# index, and blocks of at most 4096 columns, so wider rows take the looped online softmax (two tl.range loops).
HONEST_LIGER_CACHE_HINTS = '''MAX_FUSED_SIZE = 4096


def calculate_settings(n):
    BLOCK_SIZE = triton.next_power_of_2(n)
    if BLOCK_SIZE > MAX_FUSED_SIZE:
        raise RuntimeError("too large")
    num_warps = 4
    if BLOCK_SIZE >= 32768:
        num_warps = 32
    elif BLOCK_SIZE >= 8192:
        num_warps = 16
    elif BLOCK_SIZE >= 2048:
        num_warps = 8
    return BLOCK_SIZE, num_warps


@triton.jit
def _softmax_single_block_forward_kernel(Y_ptr, Y_row_stride, X_ptr, X_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row_id = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_SIZE)
    mask = offs < n_cols
    x = tl.load(X_ptr + row_id * X_row_stride + offs, mask=mask, other=-float("inf"), cache_modifier=".ca")
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    d = tl.sum(e, axis=0)
    y = e / d
    tl.store(Y_ptr + row_id * Y_row_stride + offs, y, mask=mask, cache_modifier=".cs")


@triton.jit
def _softmax_multi_block_forward_kernel(Y_ptr, Y_row_stride, X_ptr, X_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row_id = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_SIZE)
    m = -float("inf")
    d = 0.0
    for start in tl.range(0, n_cols, BLOCK_SIZE):
        idx = start + offs
        mask = idx < n_cols
        xblk = tl.load(X_ptr + row_id * X_row_stride + idx, mask=mask, other=-float("inf"), cache_modifier=".ca")
        blk_max = tl.max(xblk, axis=0)
        new_m = tl.maximum(m, blk_max)
        d = d * tl.exp(m - new_m) + tl.sum(tl.exp(xblk - new_m), axis=0)
        m = new_m
    for start in tl.range(0, n_cols, BLOCK_SIZE):
        idx = start + offs
        mask = idx < n_cols
        xblk = tl.load(X_ptr + row_id * X_row_stride + idx, mask=mask, other=-float("inf"), cache_modifier=".ca")
        yblk = tl.exp(xblk - m) / d
        tl.store(Y_ptr + row_id * Y_row_stride + idx, yblk, mask=mask, cache_modifier=".cs")


def softmax(x):
    *batch, n_cols = x.shape
    x2d = x.contiguous().view(-1, n_cols)
    n_rows = x2d.shape[0]
    y2d = torch.empty_like(x2d)
    if n_cols <= MAX_FUSED_SIZE:
        BLOCK_SIZE, num_warps = calculate_settings(n_cols)
        _softmax_single_block_forward_kernel[(n_rows,)](
            y2d, y2d.stride(0), x2d, x2d.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    else:
        BLOCK_SIZE, num_warps = calculate_settings(MAX_FUSED_SIZE)
        _softmax_multi_block_forward_kernel[(n_rows,)](
            y2d, y2d.stride(0), x2d, x2d.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return y2d.view(*batch, n_cols)
'''
