"""A load of what another element's lane of the same program stored, with no barrier between: caught in
Triton's CPU interpreter.

On a GPU a program's block is spread over the threads of its warps, and one thread's store to global
memory is not ordered before another thread's later load unless a barrier (`tl.debug_barrier()`) stands
between them: the load may read the old value. The interpreter computes a whole block at once, one
operation after the other, so there the load always finds the store. A kernel that stores a block and
then loads it back shifted or permuted (each lane reading its neighbour's element) is right in the
interpreter and wrong, now and then, on a GPU. So in every interpreted launch each program's stores are
noted (address and lane), until a barrier, and a load with the same shape whose lane reads an address
another lane stored stops the kernel with an error that says so. Loads of another shape (a scalar stored,
then read by a block, say) are not judged: which lanes share a thread there depends on the layout the
compiler picks. Atomics are not noted.
"""
from __future__ import annotations

import numpy as np

_stored: dict = {}   # shape of a store: (sorted addresses, the lane that stored each last), this program's


class LaneRace(Exception):
    pass


def _note_store(ptrs, mask) -> None:
    addresses = np.asarray(ptrs.data).astype(np.uint64)
    shape = addresses.shape
    active = np.broadcast_to(np.asarray(mask.data).astype(bool), shape)
    lanes = np.arange(addresses.size).reshape(shape)[active]
    addresses = addresses[active]
    if addresses.size == 0:
        return
    for other, (kept, writers) in list(_stored.items()):   # a store of another shape overwrites theirs
        if other != shape:
            left = ~np.isin(kept, addresses)
            _stored[other] = (kept[left], writers[left])
    if shape in _stored:
        addresses = np.concatenate([addresses, _stored[shape][0]])   # the new store first: it wins
        lanes = np.concatenate([lanes, _stored[shape][1]])
    addresses, first = np.unique(addresses, return_index=True)
    _stored[shape] = (addresses, lanes[first])


def _check_load(ptrs, mask, kernel: str) -> None:
    addresses = np.asarray(ptrs.data).astype(np.uint64)
    shape = addresses.shape
    if shape not in _stored or _stored[shape][0].size == 0:
        return
    stored, writers = _stored[shape]
    active = np.broadcast_to(np.asarray(mask.data).astype(bool), shape)
    lanes = np.arange(addresses.size).reshape(shape)[active]
    addresses = addresses[active]
    at = np.minimum(np.searchsorted(stored, addresses), stored.size - 1)
    raced = (stored[at] == addresses) & (writers[at] != lanes)
    if raced.any():
        reader, writer = int(lanes[raced][0]), int(writers[at][raced][0])

        def position(flat):
            return tuple(int(i) for i in np.unravel_index(flat, shape))
        raise LaneRace(
            f"kernel `{kernel}`: a tl.load reads, at element {position(reader)} of its block, what element "
            f"{position(writer)} of the same program stored earlier, with no barrier between. On a GPU the "
            f"elements of a block are held by different threads, and one thread's store is not seen by another "
            f"until a barrier: put `tl.debug_barrier()` between the store and the load, or keep the values in "
            f"registers (a block) instead of going through memory.")


def _wrap_load(original):
    def create_masked_load(self, ptrs, mask, *args, **kwargs):
        _check_load(ptrs, mask, _kernel_name())
        return original(self, ptrs, mask, *args, **kwargs)
    return create_masked_load


def _wrap_store(original):
    def create_masked_store(self, ptrs, value, mask, *args, **kwargs):
        result = original(self, ptrs, value, mask, *args, **kwargs)
        _note_store(ptrs, mask)
        return result
    return create_masked_store


def _wrap_forget(original):
    """A new program (set_grid_idx), or a barrier: nothing stored before it races with what follows."""
    def forget(self, *args, **kwargs):
        _stored.clear()
        return original(self, *args, **kwargs)
    return forget


_kernel = ["your kernel"]


def _kernel_name() -> str:
    return _kernel[0]


def _wrap_init(original):
    def _init_args_hst(self, *args, **kwargs):
        _stored.clear()
        _kernel[0] = getattr(getattr(self, "fn", None), "__name__", "your kernel")
        return original(self, *args, **kwargs)
    return _init_args_hst


def install() -> None:
    """Wrap the interpreter's masked loads and stores, its start of a program and its barrier (once)."""
    try:
        import triton.runtime.interpreter as interp
    except ImportError:  # pragma: no cover
        return
    builder, executor = interp.InterpreterBuilder, interp.GridExecutor
    if not all(hasattr(builder, name) for name in ("create_masked_load", "create_masked_store", "set_grid_idx",
                                                   "create_barrier")) or not hasattr(executor, "_init_args_hst"):
        return
    builder.create_masked_load = _wrap_load(builder.create_masked_load)
    builder.create_masked_store = _wrap_store(builder.create_masked_store)
    builder.set_grid_idx = _wrap_forget(builder.set_grid_idx)
    builder.create_barrier = _wrap_forget(builder.create_barrier)
    executor._init_args_hst = _wrap_init(executor._init_args_hst)
