"""Two programs of one launch that touch the same element, one of them storing it, with no atomic operation
to order them: caught in Triton's CPU interpreter.

On a GPU the programs of a launch run at the same time and in no set order. A program that loads what
another stores in the same launch may read the value from before the store or after it, and of two
programs that store different values to one element either may be last. The interpreter runs programs
one after the other in grid order, so there such a kernel always computes what a sequential loop would:
a reduction across programs written as `tl.store(p, tl.load(p) + part)` instead of `tl.atomic_add(p,
part)` adds every part in the interpreter and loses some on a GPU.

So in every interpreted launch the elements each program loads and stores are noted, and when the launch
ends the elements touched by two programs, one of them storing, are judged. Not a race:
- two programs storing the same value (a flag every program sets);
- an access ordered after another program's by atomics: the first program did an atomic operation on
  some element after its access, and the second did one on the same element before its own, later in the
  launch (a ticket counter `tl.atomic_add(count, 1)` whose last program then reads what all stored).
Atomic operations themselves are never races. Accesses that do not go through the interpreter's masked
loads and stores are not noted (in Triton 3.9 plain, block-pointer and descriptor accesses all do), nor
orderings through a third program; a launch that touches more than LIMIT elements is judged on the first LIMIT.
"""
from __future__ import annotations

import numpy as np

from grader.student import bounds

LIMIT = 1 << 24   # elements noted per launch (about 0.4 GB of notes at most)


class ProgramRace(Exception):
    pass


class _Launch:
    def __init__(self, kernel: str):
        self.kernel = kernel
        self.program = -1
        self.grid_index = {}              # program number -> (x, y, z)
        self.seq = 0                      # the launch's order of memory operations
        self.accesses = []                # (addresses, program, seq, stored values or None)
        self.atomics = []                 # (addresses, program, seq)
        self.noted = 0

    def note(self, ptrs, mask, values=None) -> None:
        if self.noted >= LIMIT or self.program < 0:
            return
        addresses = np.asarray(ptrs.data).astype(np.uint64)
        active = np.broadcast_to(np.asarray(mask.data).astype(bool), addresses.shape) if mask is not None else None
        if active is not None:
            addresses = addresses[active]
        else:
            addresses = addresses.reshape(-1)
        if values is not None:
            values = np.broadcast_to(np.asarray(values.data), np.asarray(ptrs.data).shape)
            values = (values[active] if active is not None else values.reshape(-1)).astype(np.float64)
        self.seq += 1
        self.noted += addresses.size
        self.accesses.append((addresses, self.program, self.seq, values))

    def note_atomic(self, ptrs) -> None:
        if self.program < 0:
            return
        self.seq += 1
        self.atomics.append((np.unique(np.asarray(ptrs.data).astype(np.uint64)), self.program, self.seq))

    def judge(self) -> None:
        if not self.accesses or len(self.grid_index) < 2:
            return
        addresses = np.concatenate([a for a, _, _, _ in self.accesses])
        programs = np.concatenate([np.full(a.size, p, np.int64) for a, p, _, _ in self.accesses])
        stores = np.concatenate([np.full(a.size, v is not None) for a, _, _, v in self.accesses])
        order = np.argsort(addresses, kind="stable")
        addresses, programs, stores = addresses[order], programs[order], stores[order]
        starts = np.flatnonzero(np.r_[True, addresses[1:] != addresses[:-1]])
        stored = np.logical_or.reduceat(stores, starts)
        several = np.minimum.reduceat(programs, starts) != np.maximum.reduceat(programs, starts)
        suspects = addresses[starts[stored & several]]
        for address in suspects[:256]:     # (an honest kernel has none; a racing one is named by its first)
            said = self._race_at(int(address))
            if said:
                raise ProgramRace(said)

    def _race_at(self, address: int) -> str | None:
        events = []   # (seq, program, stored value or None), in the launch's order
        for addresses, program, seq, values in self.accesses:
            hits = np.flatnonzero(addresses == address)
            if hits.size:
                events.append((seq, program, None if values is None else float(values[hits[-1]])))
        for i, (seq, program, value) in enumerate(events):
            for later_seq, later, later_value in events[i + 1:]:
                if later == program or (value is None and later_value is None):
                    continue
                if value is not None and later_value is not None and \
                        (value == later_value or (value != value and later_value != later_value)):
                    continue   # the same value stored twice: whichever is last, the element holds it
                if self._ordered(program, seq, later, later_seq):
                    continue
                return self._said(address, program, value is not None, later, later_value is not None)
        return None

    def _ordered(self, first: int, first_seq: int, second: int, second_seq: int) -> bool:
        """Whether `first` did an atomic operation after its access on an element that `second` then did one
        on before its own access."""
        released = [(a, seq) for a, p, seq in self.atomics if p == first and seq > first_seq]
        acquired = [(a, seq) for a, p, seq in self.atomics if p == second and seq < second_seq]
        return any(seq_b > seq_a and np.intersect1d(a, b).size
                   for a, seq_a in released for b, seq_b in acquired)

    def _said(self, address: int, first: int, first_stores: bool, second: int, second_stores: bool) -> str:
        where = f"the byte at 0x{address:x}"
        for name, low, high in (bounds._regions[1] if bounds._regions else ()):
            if low <= address < high:
                where = f"byte {address - low} of `{name}`"
        verb = {True: "stored", False: "loaded"}
        return (f"kernel `{self.kernel}`: program {self.grid_index[first]} {verb[first_stores]} {where}, and "
                f"program {self.grid_index[second]} {verb[second_stores]} it in the same launch, with no atomic "
                f"operation to order the two. On a GPU the programs of a launch run at the same time and in "
                f"no set order, so which one comes first is the GPU's choice: a load may read the value from "
                f"before the store, and of two stores either may be last. The interpreter ran the programs "
                f"one after the other, so here the result came out as a loop's would. To add up across "
                f"programs use `tl.atomic_add` (or write each program's part to a place of its own and add "
                f"the parts in a second kernel); to read what other programs wrote, launch a second kernel.")


_launch = [None]


def _wrap_start(original):
    def _init_args_hst(self, *args, **kwargs):
        _launch[0] = _Launch(getattr(getattr(self, "fn", None), "__name__", "your kernel"))
        return original(self, *args, **kwargs)
    return _init_args_hst


def _wrap_end(original):
    def _restore_args_dev(self, *args, **kwargs):
        launch, _launch[0] = _launch[0], None
        if launch is not None:
            launch.judge()
        return original(self, *args, **kwargs)
    return _restore_args_dev


def _wrap_program(original):
    def set_grid_idx(self, *index):
        launch = _launch[0]
        if launch is not None:
            launch.program += 1
            launch.grid_index[launch.program] = tuple(int(i) for i in index)
        return original(self, *index)
    return set_grid_idx


def _wrap_load(original):
    def create_masked_load(self, ptrs, mask, *args, **kwargs):
        if _launch[0] is not None:
            _launch[0].note(ptrs, mask)
        return original(self, ptrs, mask, *args, **kwargs)
    return create_masked_load


def _wrap_store(original):
    def create_masked_store(self, ptrs, value, mask, *args, **kwargs):
        if _launch[0] is not None:
            _launch[0].note(ptrs, mask, value)
        return original(self, ptrs, value, mask, *args, **kwargs)
    return create_masked_store


def _wrap_atomic(original, pointer_at: int):
    def atomic(self, *args, **kwargs):
        if _launch[0] is not None and len(args) > pointer_at:
            _launch[0].note_atomic(args[pointer_at])
        return original(self, *args, **kwargs)
    return atomic


def install() -> None:
    """Wrap the interpreter's start and end of a launch, its start of a program, its masked loads and stores
    and its atomics (once)."""
    try:
        import triton.runtime.interpreter as interp
    except ImportError:  # pragma: no cover
        return
    builder, executor = interp.InterpreterBuilder, interp.GridExecutor
    if not all(hasattr(builder, name) for name in ("create_masked_load", "create_masked_store", "set_grid_idx")) \
            or not all(hasattr(executor, name) for name in ("_init_args_hst", "_restore_args_dev")):
        return
    executor._init_args_hst = _wrap_start(executor._init_args_hst)
    executor._restore_args_dev = _wrap_end(executor._restore_args_dev)
    builder.set_grid_idx = _wrap_program(builder.set_grid_idx)
    builder.create_masked_load = _wrap_load(builder.create_masked_load)
    builder.create_masked_store = _wrap_store(builder.create_masked_store)
    # the pointer is the first argument of each, but the operation's kind (add, max, ...) comes first in rmw
    for name, pointer_at in (("create_atomic_rmw", 1), ("create_atomic_cas", 0), ("create_atomic_load", 0),
                             ("create_atomic_store", 0), ("create_atomic_poll", 0)):
        if hasattr(builder, name):
            setattr(builder, name, _wrap_atomic(getattr(builder, name), pointer_at))
