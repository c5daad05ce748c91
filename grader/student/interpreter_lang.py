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

One thing the interpreter does differently from a GPU is changed (install_tree_reduce): `tl.reduce` with
a combine function of the kernel's own. Triton's interpreter folds it element by element, left to right, so
a float sum's rounding error grows with its length (a softmax's sum over 17,000 columns missed a relative
tolerance of 1e-5), and calls the combine function once per element. A GPU folds in a tree: each thread
its few elements, then pairs of threads and warps. Folding pairwise on whole blocks rounds as the GPU does,
within a small factor, and calls the combine function log2(n) times.
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
    combines neighbours, left with right), on whole blocks: about log2(n) calls of the combine function
    instead of n - 1, and a float sum's rounding error that grows with log2(n), as on the GPU, instead of
    with n (Triton's interpreter folds element by element, left to right). Combine functions that only
    take one element at a time (a Python `if` on their arguments) are folded in the same order, element by
    element."""
    from triton.language import core
    truth = core.tensor.__dict__.get("__bool__")
    core.tensor.__bool__ = _truth_of_one_element   # the interpreter calls a block true: refused here
    try:
        return _fold_pairwise(self, input, whole_blocks=True)
    except Exception:  # noqa: BLE001 - the same fold element by element raises again if the error is real
        pass
    finally:
        if truth is None:
            del core.tensor.__bool__
        else:
            core.tensor.__bool__ = truth
    return _fold_pairwise(self, input, whole_blocks=False)


class _OneElementAtATime(Exception):
    """A combine function asked a block for its truth: the compiler hands it one element at a time."""


def _truth_of_one_element(block) -> bool:
    if block.handle.data.size != 1:
        raise _OneElementAtATime()
    return bool(block.handle.data)


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
        else:
            folded = [np.empty_like(side) for side in left]
            for index in np.ndindex(left[0].shape):
                pair = self._combine_blocks([d[index] for d in left], [d[index] for d in right], dtypes)
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
