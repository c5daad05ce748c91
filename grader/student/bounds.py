"""Loads and stores outside a kernel's tensors, caught in Triton's CPU interpreter before they happen.

On a GPU an unmasked access past the end of a tensor reads garbage or writes over a neighbour; in the
interpreter it reads or writes the host's memory directly, which can kill the notebook's process
("double free or corruption") with no message at all. So in every interpreted launch (a check's or
a notebook cell's), every masked load and store is compared with the memory of the kernel's tensors
(as the interpreter copied them to the host: the span of each view's elements), and an access outside
all of them stops the kernel with an error that names the kernel, the operation, the tensor nearest to
the address and the element index.
"""
from __future__ import annotations

import numpy as np
import torch

_regions = None   # (kernel name, [(argument name, first byte, end byte), ...]) of the launch being run


class OutOfBounds(Exception):
    pass


def reach(shape, strides) -> tuple[int, int]:
    """The elements that a view of this shape and these strides reaches, counted from its first element:
    from `low` (below 0 only for negative strides) to `high`, not included; (0, 0) for no elements."""
    shape, strides = [int(n) for n in shape], [int(s) for s in strides]
    if 0 in shape:
        return 0, 0
    low = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    return low, 1 + sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)


def span_elements(t: torch.Tensor) -> int:
    """The elements a tensor (a view, perhaps) can reach in its storage, from its first to its last; 0 for
    an empty one."""
    low, high = reach(t.shape, t.stride())
    return high - low


def _note_arguments(executor, args_hst, kwargs_hst) -> None:
    """The memory of every tensor the launch was given: positional or by keyword, inside a tuple, or
    under a tensor descriptor."""
    regions = []

    def note(name, arg):
        if isinstance(arg, torch.Tensor):
            # the span of the elements the tensor (a view, perhaps) can reach, not all of its storage
            span = span_elements(arg)
            regions.append((name, arg.data_ptr(), arg.data_ptr() + span * arg.element_size()))
        elif isinstance(arg, (tuple, list)):
            for i, item in enumerate(arg):
                note(f"{name}[{i}]", item)
        elif isinstance(getattr(arg, "base", None), torch.Tensor):   # a tensor descriptor
            note(name, arg.base)

    for name, arg in zip(getattr(executor, "arg_names", ()), args_hst):
        note(name, arg)
    for name, arg in (kwargs_hst or {}).items():
        note(name, arg)
    global _regions
    _regions = (getattr(getattr(executor, "fn", None), "__name__", "your kernel"), regions)


def _check(ptrs, mask, operation: str) -> None:
    if _regions is None:
        return
    kernel, regions = _regions
    addresses = np.asarray(ptrs.data).astype(np.uint64)
    active = np.broadcast_to(np.asarray(mask.data).astype(bool), addresses.shape)
    addresses = addresses[active]
    if addresses.size == 0:
        return
    size = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
    inside = np.zeros(addresses.shape, dtype=bool)
    for _, start, end in regions:
        inside |= (addresses >= start) & (addresses + size <= end)
    if inside.all():
        return
    bad = int(addresses[~inside][0])
    below = [(start, end, name) for name, start, end in regions if start <= bad]
    if below:
        start, end, name = max(below)
        where = (f"element {(bad - start) // size} of `{name}`, which holds {(end - start) // size} "
                 f"elements of {size} bytes")
    elif regions:
        start, end, name = min((start, end, name) for name, start, end in regions)
        where = f"{(start - bad) // size} elements before the start of `{name}`"
    else:
        where = "memory that belongs to none of its tensors"
    raise OutOfBounds(f"kernel `{kernel}`: a {operation} reaches {where}. Check the offsets of that {operation} "
                      f"and mask it (`mask=offsets < n`), so that no program reads or writes past a tensor's "
                      f"end; on a GPU this would touch another tensor's memory.")


def _wrap_load(original):
    def create_masked_load(self, ptrs, mask, *args, **kwargs):
        _check(ptrs, mask, "tl.load")
        return original(self, ptrs, mask, *args, **kwargs)
    return create_masked_load


def _wrap_store(original):
    def create_masked_store(self, ptrs, value, mask, *args, **kwargs):
        _check(ptrs, mask, "tl.store")
        return original(self, ptrs, value, mask, *args, **kwargs)
    return create_masked_store


def _wrap_init(original):
    def _init_args_hst(self, args_dev, kwargs):
        result = original(self, args_dev, kwargs)
        args_hst, kwargs_hst = result if isinstance(result, tuple) and len(result) == 2 else (result, {})
        _note_arguments(self, args_hst, kwargs_hst)
        return result
    return _init_args_hst


def _wrap_restore(original):
    def _restore_args_dev(self, *args, **kwargs):
        global _regions
        _regions = None
        return original(self, *args, **kwargs)
    return _restore_args_dev


def install() -> None:
    """Wrap the interpreter's masked loads and stores and its copying of a launch's arguments (once)."""
    try:
        import triton.runtime.interpreter as interp
    except ImportError:  # pragma: no cover
        return
    builder, executor = interp.InterpreterBuilder, interp.GridExecutor
    if not (hasattr(executor, "_init_args_hst") and hasattr(executor, "_restore_args_dev")):
        return
    builder.create_masked_load = _wrap_load(builder.create_masked_load)
    builder.create_masked_store = _wrap_store(builder.create_masked_store)
    executor._init_args_hst = _wrap_init(executor._init_args_hst)
    executor._restore_args_dev = _wrap_restore(executor._restore_args_dev)
