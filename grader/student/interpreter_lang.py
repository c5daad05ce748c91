"""Triton's language turned into its interpreted form once per launch, not at every helper's call.

In the CPU interpreter a launch first replaces the functions of `triton.language` (the modules the
kernel's globals name: `tl`, perhaps `tl.core`) by the interpreter's, and puts the originals back when
the launch ends (Triton 3.4 on; before, they stay replaced). Triton also does the same replacing at
every call of a `@triton.jit` helper inside the kernel: a walk over every member of those modules, each
time. For a kernel whose loop calls a helper, that walk was a quarter of the interpreter's time
(Day 4's attention: 2846 walks for one check), and the walk changes nothing when the launch has already
replaced those very modules. So inside a launch a helper's call walks only modules the launch has not
replaced yet (a helper from a module that names `tl.core` where the kernel named only `tl`).

The interpreter stays Triton's own: the same replacements, made by Triton's function, in the same
order; only repeats are skipped. Without the interpreter's hooks (another Triton) nothing changes.

Things the interpreter does differently from a GPU are changed:
- a float converted to an integer past its range clamps, as the GPU's conversion does (to 8 bits, through
  16: install_saturating_casts);
- a loop's index is an integer block of the compiler's type, not a Python int (compiled_loop, which
  gpu_compile.as_compiled puts around each loop the compiler did not unroll);
- `tl.reduce` with a combine function of the kernel's own (install_tree_reduce). Triton's interpreter folds
  it element by element, left to right, so a float sum's rounding error grows with its length (a softmax's
  sum over 17,000 columns missed a relative tolerance of 1e-5), and calls the combine function once per
  element. A GPU folds in a tree: each thread its few elements, then pairs of threads and warps. Folding
  pairwise on whole blocks rounds as the GPU does, within a small factor, and calls the combine function
  log2(n) times;
- a tensor descriptor's strides are checked in bytes, as TMA checks them, where Triton 3.4 and 3.5 asked
  for 16 elements (install_descriptor_byte_strides).
"""
from __future__ import annotations

import threading

_launch = threading.local()   # .replaced: ids of the language modules the current launch replaced


def install() -> None:
    """Skip a helper's repeat of the replacing its launch did (once per process)."""
    try:
        import triton.language as tl
        import triton.runtime.interpreter as interp
    except ImportError:  # pragma: no cover - triton is a dependency
        return
    executor = getattr(interp, "GridExecutor", None)
    replace = getattr(interp, "_patch_lang", None)
    if executor is None or replace is None or getattr(replace, "once_per_launch", False):
        return
    launch = executor.__call__

    def patch_lang(fn):
        replaced = getattr(_launch, "replaced", None)
        # the modules Triton's function picks from the function's globals (modules compare by identity)
        langs = {id(value) for value in fn.__globals__.values() if value is tl or value is tl.core}
        if replaced is not None and langs and langs <= replaced:
            return None        # a helper's call: Triton discards what its replacing returns
        result = replace(fn)
        if replaced is not None:
            replaced |= langs
        return result

    def run_launch(self, *args, **kwargs):
        outer = getattr(_launch, "replaced", None)
        _launch.replaced = set()
        try:
            return launch(self, *args, **kwargs)
        finally:
            _launch.replaced = outer

    patch_lang.once_per_launch = True
    interp._patch_lang = patch_lang
    executor.__call__ = run_launch


def _tree_reduce(self, input):
    """A reduction with the student's own combine function, folded pairwise as a GPU folds it (each step
    combines neighbours, left with right): a float sum's rounding error that grows with log2(n), as on the
    GPU, instead of with n (Triton's interpreter folds element by element, left to right). A combine
    function made of elementwise operations only (_elementwise_only) is called on whole blocks, about
    log2(n) calls instead of n - 1; any other is called one element at a time, as the compiler hands it
    its arguments (an operation that depends on a block's shape, `tl.broadcast_to(a, [2])`, would see a
    block here and a scalar there). Either way each step is also folded right with left: a GPU's lanes
    combine in an order its compiler picks, so a combine function whose result depends on the order of
    its arguments stops the kernel (CombineOrderMatters)."""
    if not _elementwise_only(self.combine_fn):
        return _fold_pairwise(self, input, whole_blocks=False)
    from triton.language import core
    truth = core.tensor.__dict__.get("__bool__")
    core.tensor.__bool__ = _truth_of_one_element   # the interpreter calls a block true: refused here
    try:
        return _fold_pairwise(self, input, whole_blocks=True)
    except _OneElementAtATime:   # a Python `if` on the arguments: one element at a time, as compiled
        pass
    finally:
        if truth is None:
            del core.tensor.__bool__
        else:
            core.tensor.__bool__ = truth
    return _fold_pairwise(self, input, whole_blocks=False)


class CombineOrderMatters(Exception):
    """A reduction's combine function gave another result with its arguments swapped."""


class _OneElementAtATime(Exception):
    """A combine function asked a block for its truth: the compiler hands it one element at a time."""


def _truth_of_one_element(block) -> bool:
    if block.handle.data.size != 1:
        raise _OneElementAtATime()
    return bool(block.handle.data)


# Triton's functions that compute each element from the same elements of their arguments alone: on a block
# of the interpreter's as on the compiler's scalars
_ELEMENTWISE = {"where", "maximum", "minimum", "exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "abs",
                "fma", "cdiv", "clamp", "sigmoid", "cast", "erf", "floor", "ceil", "sin", "cos", "div_rn",
                "fdiv", "umulhi"}
_PLAIN_NODES = ("Return", "Assign", "AugAssign", "Expr", "Pass", "If", "Name",
                "Load", "Store", "Constant", "Tuple", "BinOp", "UnaryOp", "BoolOp", "Compare", "IfExp", "keyword")
_elementwise_of: dict = {}   # id(function) -> (function, whether it is elementwise only)


def _elementwise_only(jit_function) -> bool:
    """Whether a @triton.jit combine function's source uses only arithmetic, comparisons, its own names and
    Triton's elementwise functions (`tl.maximum`, `x.to(...)`): then a block of the interpreter's gives,
    element by element, what the compiler's scalars give. A helper called, a shape, a reduction: no."""
    import ast
    import inspect
    import textwrap
    kept = _elementwise_of.get(id(jit_function))
    if kept is not None and kept[0] is jit_function:
        return kept[1]
    try:
        # (under a check the function the interpreter calls is the grader's stand-in, which keeps the source)
        source = getattr(jit_function.fn, "compiler_def", None) or getattr(jit_function, "src", None) \
            or inspect.getsource(jit_function.fn)
        tree = ast.parse(textwrap.dedent(source))
    except (OSError, TypeError, SyntaxError, AttributeError):
        tree = None
    glob = getattr(getattr(jit_function, "fn", None), "__globals__", {})
    body = tree.body[0].body if tree is not None and tree.body and isinstance(tree.body[0], ast.FunctionDef) else None
    verdict = body is not None and all(_plain(node, glob) for statement in body for node in ast.walk(statement))
    _elementwise_of[id(jit_function)] = (jit_function, verdict)
    return verdict


def _plain(node, glob: dict) -> bool:
    import ast
    kind = type(node).__name__
    if kind in _PLAIN_NODES or isinstance(node, (ast.operator, ast.unaryop, ast.boolop, ast.cmpop)):
        return True
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "to":
            return True                                    # x.to(dtype)
        if isinstance(func, ast.Name) and func.id == "float" and "float" not in glob \
                and all(isinstance(a, ast.Constant) for a in node.args):
            return True                                    # float("-inf"): a constant
        return isinstance(func, ast.Attribute) and func.attr in _ELEMENTWISE and _of_language(func.value, glob)
    if isinstance(node, ast.Attribute):   # Triton's functions and dtypes (tl.float32), a method `.to`, a dtype
        return _of_language(node.value, glob) or node.attr in ("to", "dtype")
    return False


def _of_language(node, glob: dict) -> bool:
    """Whether an expression names triton.language or its math module (`tl`, `tl.math`) in these globals."""
    import ast
    import triton.language as tl
    if isinstance(node, ast.Name):
        return glob.get(node.id) in (tl, tl.math)
    return isinstance(node, ast.Attribute) and node.attr == "math" and _of_language(node.value, glob)


def _fold_pairwise(self, input, whole_blocks: bool):
    import numpy as np
    original_axis = self.axis
    input, axis = self.unravel(input, self.axis)
    dtypes = [arg.dtype for arg in input]
    data = [arg.handle.data for arg in input]
    shape = data[0].shape
    while data[0].shape[axis] > 1:
        n = data[0].shape[axis]
        pairs = n // 2
        left = [np.take(d, np.arange(0, 2 * pairs, 2), axis=axis) for d in data]
        right = [np.take(d, np.arange(1, 2 * pairs, 2), axis=axis) for d in data]
        if whole_blocks:
            folded = self._combine_blocks(left, right, dtypes)
            _same_either_way(self, folded, self._combine_blocks(right, left, dtypes), left, right)
        else:
            folded = [np.empty_like(side) for side in left]
            for index in np.ndindex(left[0].shape):
                a, b = [d[index] for d in left], [d[index] for d in right]
                pair = self._combine_blocks(a, b, dtypes)
                _same_either_way(self, pair, self._combine_blocks(b, a, dtypes), a, b)
                for out, value in zip(folded, pair):
                    out[index] = value.reshape(())
        if n % 2:   # the last element, unpaired, folds at the next step
            folded = [np.concatenate([f, np.take(d, [n - 1], axis=axis)], axis=axis) for f, d in zip(folded, data)]
        data = folded
    reduced = []
    for d, dtype in zip(data, dtypes):
        d = d.reshape(shape[:axis] + shape[axis + 1:])
        if self.keep_dims:
            d = np.expand_dims(d, axis) if original_axis is not None else d.reshape((1,) * len(shape))
        elif original_axis is None:
            d = d.item()
        reduced.append(self.to_tensor(d, dtype))
    return reduced[0] if len(reduced) == 1 else tuple(reduced)   # as Triton 3.3's; later ones take either


def _same_either_way(self, ab: list, ba: list, a: list, b: list) -> None:
    """Raise CombineOrderMatters where combine(a, b) and combine(b, a) differ (NaN equals NaN)."""
    import numpy as np
    for x, y in zip(ab, ba):
        differ = (x != y) & ~((x != x) & (y != y))
        if np.any(differ):
            at = tuple(int(i) for i in np.argwhere(np.atleast_1d(differ))[0])
            def pick(arrays):
                values = [np.atleast_1d(v)[at].item() for v in arrays]
                return values[0] if len(values) == 1 else tuple(values)

            name = getattr(getattr(self.combine_fn, "fn", None), "__name__", "the combine function")
            raise CombineOrderMatters(
                f"tl.reduce with `{name}`: {name}({pick(a)}, {pick(b)}) gives {pick(ab)}, and with its "
                f"arguments swapped {pick(ba)}. On a GPU the lanes of a reduction combine in an order the "
                f"compiler picks (each lane with its partner in a butterfly of shuffles, then across warps), "
                f"so a combine function must give the same result whichever argument comes first: break a "
                f"tie by the smaller index, as tl.argmax does, instead of keeping the first argument.")


def _combine_blocks(self, left: list, right: list, dtypes: list) -> list:
    """The combine function on two lists of arrays (one per reduced value), as arrays of the inputs' types."""
    import numpy as np
    result = self.combine_fn.fn(*(self.to_tensor(d, t) for d, t in zip(left, dtypes)),
                                *(self.to_tensor(d, t) for d, t in zip(right, dtypes)))
    result = result if isinstance(result, tuple) else (result,)
    shape = np.shape(left[0])
    arrays = (getattr(r, "handle", None).data if hasattr(r, "handle") else getattr(r, "value", r) for r in result)
    return [np.broadcast_to(np.asarray(r), shape or (1,))
            .reshape(shape).astype(d.dtype) for r, d in zip(arrays, left)]


def install_tree_reduce() -> None:
    """Fold reductions by a combine function pairwise in the interpreter (once per process)."""
    try:
        import triton.runtime.interpreter as interp
    except ImportError:  # pragma: no cover - triton is a dependency
        return
    reduce_ops = getattr(interp, "ReduceOps", None)
    if reduce_ops is None or not hasattr(reduce_ops, "generic_reduce") or \
            getattr(reduce_ops.generic_reduce, "pairwise", False):
        return
    _tree_reduce.pairwise = True
    _tree_reduce.tritons = reduce_ops.generic_reduce     # kept for the tests that compare the two folds
    reduce_ops.generic_reduce = _tree_reduce
    reduce_ops._combine_blocks = _combine_blocks


def _saturating(original, name: str):
    """A float-to-integer conversion as the GPU makes it: to 16, 32 or 64 bits it clamps to the integer's
    range (PTX's `cvt` from a float saturates) and takes NaN to 0, where NumPy on x86 gives the smallest
    value (3e9 to int32: 2147483647 on the GPU, -2147483648 in NumPy). To 8 bits the GPU converts to 16
    bits, so clamped, and keeps the low byte (measured on an H200, Triton 3.6: 300.0 to int8 is 44,
    70000.0 is -1, -70000.0 is 0), where NumPy keeps the low byte of the int32 (70000.0: 112)."""
    def convert(self, src, dst_type):
        import numpy as np
        import triton.runtime.interpreter as interp
        target = np.dtype(interp._get_np_dtype(dst_type))
        data = np.asarray(src.data)
        if target.kind not in "iu" or data.dtype.kind != "f":
            return original(self, src, dst_type)
        register = target if target.itemsize > 1 else np.dtype(target.kind + "2")   # (8 bits go through 16)
        limits = np.iinfo(register)
        wide = np.trunc(np.nan_to_num(data.astype(np.float64), nan=0.0))
        with np.errstate(invalid="ignore"):   # (the values past the range are replaced below)
            result = np.clip(wide, limits.min, limits.max).astype(register) if register.itemsize < 8 else \
                np.where(wide >= float(limits.max), limits.max,
                         np.where(wide <= float(limits.min), limits.min, wide.astype(register))).astype(register)
        return interp.TensorHandle(result.astype(target), dst_type.scalar)   # (the low byte, for 8 bits)
    convert.__name__ = name
    convert.as_the_gpu = True
    return convert


def install_saturating_casts() -> None:
    """Convert floats to integers in the interpreter as the GPU does (once per process)."""
    _replace_builder_methods(("create_fp_to_si", "create_fp_to_ui"), _saturating)


def install_descriptor_byte_strides() -> None:
    """A tensor descriptor's strides checked in bytes, as the GPU's TMA checks them (once per process).

    Before Triton 3.6 (3.4 and 3.5 have tensor descriptors) the interpreter asserted each stride but the
    last to be a multiple of 16 *elements*, where TMA asks for 16 bytes: a float16 matrix of 8 or 24
    columns, which a GPU reads by TMA, failed with "stride must be 16-byte aligned" on the CPU. Where the
    interpreter's own check says so, the strides are checked again in bytes; every other check is its own."""
    try:
        import triton.runtime.interpreter as interp
    except ImportError:  # pragma: no cover - triton is a dependency
        return
    handle = getattr(interp, "TensorDescHandle", None)
    original = getattr(handle, "validate", None)
    if original is None or getattr(original, "as_the_gpu", False):
        return

    def validate(self):
        try:
            return original(self)
        except AssertionError as error:
            if str(error) != "stride must be 16-byte aligned":
                raise
            itemsize = self.base.dtype.element_ty.primitive_bitwidth // 8
            if any(stride.data.item() * itemsize % 16 for stride in self.strides[:-1]):
                raise
            assert self.strides[-1].data.item() == 1, "last dim must be contiguous"
    validate.as_the_gpu = True
    handle.validate = validate


def _replace_builder_methods(names, as_the_gpu) -> None:
    """Put `as_the_gpu(original, name)` in place of each of the interpreter's builder methods `names`, once
    (what it returns is marked `as_the_gpu`)."""
    try:
        import triton.runtime.interpreter as interp
    except ImportError:  # pragma: no cover - triton is a dependency
        return
    builder = interp.InterpreterBuilder
    for name in names:
        original = getattr(builder, name, None)
        if original is not None and not getattr(original, "as_the_gpu", False):
            setattr(builder, name, as_the_gpu(original, name))


def compiled_loop(iterate, *args, **kwargs):
    """A loop's values as the compiler makes its index: for a `range` or `tl.range` loop (not
    `tl.static_range`, which it unrolls with Python ints) the index is a scalar block of the integer type its
    start, end and step promote to, int32 for the numbers that fit. The interpreter's index is a Python int,
    which floor-divides negative numbers (-1 // 2 is -1; the GPU truncates to 0) and never overflows (the
    GPU's int32 wraps): a kernel could compute one thing here and another on a GPU. `iterate` is the loop's
    own iterator function, called as the kernel calls it."""
    import numpy as np
    import triton.language as tl
    import triton.runtime.interpreter as interp
    bounds = [*args[:3], *([kwargs["step"]] if kwargs.get("step") is not None else [])]
    kind = tl.int32   # (a range's missing start and step are the compiler's int32 constants)
    for bound in bounds:
        kind = _promoted(kind, _integer_type(bound))
    numbers = np.dtype(interp._get_np_dtype(kind))
    for value in iterate(*args, **kwargs):
        yield tl.tensor(interp.TensorHandle(np.array([int(value)]).astype(numbers), kind), kind)


def _integer_type(bound):
    """The compiler's type of a loop bound: a block's own, or a Python number's as Triton makes it a constant."""
    import triton.language as tl
    bound = getattr(bound, "value", bound) if isinstance(bound, tl.constexpr) else bound
    if isinstance(bound, tl.tensor):
        return bound.dtype if bound.dtype.is_int() else tl.int32   # (a float bound the compiler refuses)
    number = int(bound)
    if -2**31 <= number < 2**31:
        return tl.int32
    if 0 <= number < 2**32:
        return tl.uint32
    return tl.int64 if number < 2**63 else tl.uint64


def _promoted(a, b):
    """Two integer types' common type, by the compiler's rule (Triton's integer_promote_impl): the wider,
    and of equal widths the unsigned one."""
    if a.int_signedness == b.int_signedness:
        return a if a.int_bitwidth > b.int_bitwidth else b
    unsigned, signed = (a, b) if a.is_int_unsigned() else (b, a)
    return unsigned if unsigned.int_bitwidth >= signed.int_bitwidth else signed


# float32 math as Triton compiles it for an NVIDIA GPU (read from its PTX for sm_90): `tl.exp2`, `tl.sqrt` and
# `tl.rsqrt` are the approximate instructions ex2.approx.ftz, sqrt.approx.ftz and rsqrt.approx.ftz, which
# flush a subnormal input or result (below 2**-126) to zero; `tl.exp(x)` is ex2.approx of x times log2(e),
# the product rounded to float32 first (50 ulps off the exact exp(45.0)). NumPy computes each exactly, so a
# kernel could branch on the difference (a twelfth red team's four cells: correct here, wrong on an H200).
_FLUSHING = {"create_exp2": "exp2", "create_sqrt": "sqrt", "create_rsqrt": "rsqrt"}
_LOG2_E = 1.4426950408889634   # rounded to float32 as the compiler's constant (0x3FB8AA3B)


def _as_the_gpu_computes(original, name: str):
    def compute(self, arg):
        import numpy as np
        import triton.runtime.interpreter as interp
        data = np.asarray(arg.data)
        if data.dtype not in (np.float32, np.float16):   # (float64 is IEEE or libdevice's on the GPU too)
            return original(self, arg)
        x = data.astype(np.float32)
        with np.errstate(all="ignore"):
            if name == "create_exp":
                result = np.exp2((x * np.float32(_LOG2_E)).astype(np.float64)).astype(np.float32)
            else:
                x = _flushed(x)
                exact = {"exp2": np.exp2, "sqrt": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v)}[_FLUSHING[name]]
                result = _flushed(exact(x.astype(np.float64)).astype(np.float32))
        return interp.TensorHandle(result.astype(data.dtype), arg.dtype.scalar)
    compute.__name__ = name
    compute.as_the_gpu = True
    return compute


def _flushed(x):
    """float32 values with the subnormal ones made zeros of their sign, as an .ftz instruction reads and writes them."""
    import numpy as np
    return np.where(np.abs(x) < np.finfo(np.float32).tiny, np.copysign(np.float32(0), x), x).astype(np.float32)


def install_gpu_math() -> None:
    """Compute tl.exp, tl.exp2, tl.sqrt and tl.rsqrt on float32 in the interpreter as the GPU's instructions
    do (once per process)."""
    _replace_builder_methods(("create_exp", *_FLUSHING), _as_the_gpu_computes)
