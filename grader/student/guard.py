"""Watch a student's function while it runs: which PyTorch ops it calls, how many Triton kernels it
launches, and poison every tensor it allocates.

A `TorchDispatchMode` sees every ATen operation that runs, whether it came from `torch.add`, `x + y`,
`F.gelu` or a C++ path. Work inside a Triton launch is not the student's (the CPU interpreter copies
tensors with ATen ops), so launches are counted and everything inside them is ignored.
"""
from __future__ import annotations

import ast
import copy
import functools
import gc
import inspect
import numbers
import os
import random
import sys
import types
from collections import Counter
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from grader import _PACKAGE_DIR
from grader.compare import poison_
from grader.student import bounds, gpu_compile, lane_races, program_races

# ATen ops a wrapper may use: allocation, views, layout and bookkeeping. Everything else computes.
ALLOWED_OPS = frozenset("""
empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros full full_like
new_full fill_ zero_ ones ones_like new_ones arange
view _unsafe_view reshape as_strided expand permute transpose t slice select unsqueeze squeeze
flatten unflatten split split_with_sizes chunk unbind narrow movedim detach alias lift_fresh
clone copy_ _to_copy contiguous is_same_size set_ resize_ view_as_real
view_as_complex _reshape_alias unfold
cat stack select_backward slice_backward select_scatter slice_scatter
promote_types result_type
""".split())   # (joins, and the backward passes of views, move data; the last two compute a dtype, not values)

# What PyTorch may do with large tensors where an exercise permits elementwise ops only for bookkeeping
# (spec.linear_above: Day 5's linear + cross-entropy permits cuBLAS's products, and `mul`, `add_`, `sum`,
# ... for the count, the mean and a float32 sum of dW). Red teams computed a whole softmax from those ops:
# exp by repeated squaring (`mul`), the row maximum by a tree of `clamp`s, the log by bisection with
# `ge`, and again in complex numbers and in fixed point on integers. On a tensor with more elements than
# the exercise's bound (the number of rows), PyTorch may apply only linear maps: these ops and views of
# floating tensors, `mul` or `div` with at most one such tensor (a scaling), with results in a float type
# of 16 bits or more, and only so many per call; no large tensor of another dtype may exist. Smaller
# ones (per-row losses, weights, masks, a count) may be used in any way the exercise permits, also only
# so many times per call: a softmax done a column or a few rows at a time takes thousands of calls.
LINEAR_OPS = frozenset("""
add add_ sub sub_ rsub sum mul mul_ div div_ neg neg_ _to_copy copy_ clone contiguous fill_ zero_ resize_
cat stack select_backward slice_backward select_scatter slice_scatter
mm addmm addmm_ matmul bmm baddbmm baddbmm_ addbmm mv addmv dot
empty_like zeros_like ones_like full_like new_empty new_zeros new_full new_ones
""".split())   # (products are linear in each factor; allocations "like" a tensor take only its shape)
FLOAT_TYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# Per call: 64 + this many per row of ops on large tensors (a step does a handful per chunk, and a chunk
# has a row or more), and of other ops on small ones
LARGE_OPS_PER_ROW, SMALL_OPS_PER_ROW, OPS_FREE = 16, 4, 64

# Values read out of tensors into Python or NumPy (`.item()`, `.tolist()`, `.numpy()`, a print): honest
# code reads a few (a count of non-ignored labels before launching, as Liger-Kernel's cross-entropy does;
# a debugging `print(out[:4].tolist())`); computing the answer on the host needs the whole tensor. More
# than this many elements in one call is computing outside Triton. The same bound holds for values put
# into tensors from Python or NumPy (`torch.tensor(list)`, `torch.from_numpy`, `torch.frombuffer`): a
# scalar or a few constants are fine; a red team's dropout drew its mask with NumPy and only applied it
# in a kernel.
HOST_ELEMENTS = 64

# Allocations whose contents are undefined: the guard fills them with poison (compare.POISON_BITS) so
# that an element a kernel forgets to write shows up as such instead of as leftover data, and puts
# guard bytes before and after them (CallRecord.guarded) so that a store past the end shows too.
POISONED_OPS = frozenset("empty empty_like empty_strided new_empty new_empty_strided".split())
# Ops whose results depend on no tensor's values (for CallRecord.sources), only on shapes and numbers
ALLOCATIONS = POISONED_OPS | frozenset("""zeros zeros_like new_zeros ones ones_like new_ones full full_like
new_full arange""".split())
# Guard bytes on each side (a multiple of 256: the tensor stays aligned as an allocation is). A store
# past the end begins with the elements right after it, so a few suffice; small enough that filling
# them runs on one thread (a notebook at its process limit cannot start more).
GUARD_BYTES = 4096
MAX_GUARDED = 64   # allocations per call that get guards (a function that allocates in a loop: the first)


@dataclass
class CallRecord:
    """What a student's function did while it ran under `watch()`."""
    launches: int = 0
    torch_ops: list = field(default_factory=list)     # names of disallowed ATen ops, in order
    values_read: int = 0                              # values read out of tensors into Python (.item(), ...)
    device_moves: list = field(default_factory=list)  # copies between devices (e.g. .cpu())
    side_streams: int = 0                              # launches on a stream other than the caller's
    graph_replays: int = 0                             # CUDA graphs replayed (_graph_replay_wrapper)
    # In the CPU interpreter: what a launched kernel's body reaches that is not Triton (NumPy, a loaded
    # block's interpreter values), which runs there only (gpu_compile.not_triton)
    not_triton: list = field(default_factory=list)
    # In the CPU interpreter: (kernel, the compiler's message) of each launched kernel that Triton's compiler
    # refuses for the grading GPU as its globals were when it ran (_as_compiled)
    not_compiled: list = field(default_factory=list)
    # Prints a launched kernel makes (gpu_compile.prints): on a GPU and in the interpreter alike
    prints: list = field(default_factory=list)
    # In the CPU interpreter: launches of the student's that raised (the call went on only if it caught them)
    launch_errors: list = field(default_factory=list)
    # Tensor descriptors handed to a launch that describe more memory than their tensor's (_past_its_tensor)
    overreaching_descriptors: list = field(default_factory=list)
    kernels: Counter = field(default_factory=Counter)  # launches by Triton kernel name
    # On a GPU: what each compiled kernel asks of an SM (registers, spills, warps, shared memory), told in
    # the speed feedback; never part of a verdict
    compiled: dict = field(default_factory=dict)
    # In the CPU interpreter: (kernel, its arguments described) of each launch, to compile for a GPU
    interpreted: list = field(default_factory=list)

    # Only when the watch measures memory (watch(memory=True)): the storage of every tensor that the
    # call's PyTorch ops and Triton launches used, {address: bytes}, and the addresses of those its ops
    # made. What it used and did not make existed before the call: a workspace or cache kept between
    # calls, whose memory checks.step_memory counts as the call's.
    touched: dict | None = None
    made: set = field(default_factory=set)
    # watch(linear_above=): the bound, how many ops ran on larger tensors, and how many ops other than
    # linear maps on smaller ones
    linear_above: int | None = None
    large_ops: int = 0
    small_ops: int = 0
    beyond_bookkeeping: bool = False   # whether any of torch_ops broke that rule
    # ... and what each storage's values were computed from by PyTorch ({address: the storages, or
    # launches, they came from}): a product of two factors with a common source is refused (PRODUCTS)
    sources: dict = field(default_factory=dict)
    fresh: int = 0                     # ids of the values that Triton launches wrote
    positions: dict = field(default_factory=dict)   # {(elements, device): where launches' tensors are sampled}
    # The sketches of tensors as they are now ({storage address: {_sketch_key: _Sketch}}): a tensor that
    # many launches read (a weight, chunk after chunk) is summed up once, not twice per launch. A storage's
    # entries go when anything may have written it: a launch (after_launch, launched_with), a PyTorch op
    # the guard sees (_note_sources), an in-place op it does not (the version counter, in the key).
    sketches: dict = field(default_factory=dict)
    follow_copies: bool = True   # watch(follow_copies=)
    # watch(sum_limit=): the most elements one PyTorch sum may read, and (ADDITION_ROOM times as many) all
    # its sums in a call of those computed from one tensor (Day 2's cross-entropy: a few numbers per row,
    # so that the sum over a row of logits is the kernel's)
    sum_limit: int | None = None
    # ... the elements PyTorch's sums read, by the tensor they were computed from ({address or launch: n}),
    # and the storages summed, to tell new memory at an address (_Watcher._summed)
    summed: dict = field(default_factory=dict)
    summed_storages: dict = field(default_factory=dict)
    # watch(allocations=True): what the call's PyTorch ops allocated, [(StorageWeakRef, bytes, shape, dtype, address)],
    # so that a caller can ask which of them outlived it (a dropout forward that keeps its mask); and their addresses
    allocations: list | None = None
    allocated: set = field(default_factory=set)
    # ... and the memory its Triton launches were handed or its PyTorch ops read or wrote ({address: (bytes,
    # shape, dtype)}): memory from before the call among it is a buffer kept between calls. A launch
    # reaches its tensors' whole storage; an op, the bytes it read or wrote (added up): so an honest forward
    # may set one entry of a small table kept between calls (a step counter per layer) without the table
    # counting.
    reached: dict | None = None
    # watch(launch_bits=): the most bits the call may hand its launches in numbers (_Watcher.handed_to_launch)
    launch_bits: int | None = None
    # watch(pieces=): the most pieces the call's PyTorch ops may join or copy into place (_Watcher._joined)
    pieces: int | None = None

    def note_reached(self, values, by_op: bool = False) -> None:
        """The storages of `values` were handed to a launch, or (`by_op`) read or written by a PyTorch op."""
        for t in _tensors_in(values):
            storage = _storage(t)
            if storage.nbytes():
                nbytes, shape, dtype = self.reached.get(storage.data_ptr(), (0, tuple(t.shape), t.dtype))
                more = bounds.span_elements(t) * t.element_size() if by_op else storage.nbytes()
                self.reached[storage.data_ptr()] = (min(nbytes + more, storage.nbytes()), shape, dtype)
    # The sketches and sources of the floating values launches were handed, not launches' own outputs
    # ({_sketch_key: (_Sketch, sources)}): what PyTorch may copy again (values_from_launches)
    known: dict = field(default_factory=dict)
    # Launches inside an autotuner's (or heuristics') run whose guard bytes are looked at when that run
    # returns ({(kernel, tensor addresses): (kernel, named arguments)}): looking after each of them put a
    # synchronizing read between every benchmarked launch and the end of its timing, 0.4 to 0.5 ms on
    # each of Day 4's attention candidates on an H200, and the autotuner picked a slower one.
    unlooked: dict = field(default_factory=dict)

    # ... and what each storage's values may have been computed from through launches too ({address: sources}):
    # a launch's outputs come from everything it was handed. Only additions ask (_adds_itself): a red team's
    # kernel copied a row's halves into two new tensors for PyTorch to add, level after level.
    ancestry: dict = field(default_factory=dict)

    def ancestry_of(self, t: torch.Tensor) -> frozenset:
        """Everything t's values may come from: its sources, and what the launches that wrote them read."""
        return self.sources_of(t) | self.ancestry.get(_storage(t).data_ptr(), frozenset())

    def sources_of(self, t: torch.Tensor) -> frozenset:
        """What PyTorch computed t's values from, as far as this call saw: an input is its own source."""
        address = _storage(t).data_ptr()
        return self.sources.get(address, frozenset((address,)))

    def launched_with(self, values) -> None:
        """A Triton launch may have written any of its tensors: from now on each is a value of its own
        (where the launch is not compared before and after: before_launch)."""
        for t in _tensors_in(values):
            self._fresh_value(t)
            self.forget_sketches(t)

    def forget_sketches(self, t: torch.Tensor) -> None:
        """t's storage may have been written: its sketches are stale."""
        self.sketches.pop(_storage(t).data_ptr(), None)

    def _sketch_of(self, t: torch.Tensor) -> "_Sketch":
        """t's _Sketch, computed again only where its storage may have been written since."""
        kept = self.sketches.setdefault(_storage(t).data_ptr(), {})
        key = _sketch_key(t)
        if key not in kept:
            kept[key] = _sketch(t, self._positions(t))
        return kept[key]

    def _fresh_value(self, t: torch.Tensor) -> frozenset:
        self.fresh += 1
        self.sources[_storage(t).data_ptr()] = frozenset((("launch", self.fresh),))
        return self.sources[_storage(t).data_ptr()]

    def before_launch(self, values) -> list:
        """What the memory each tensor handed to a Triton launch reaches held before it (a _Sketch of each
        of its _extents), and its sources. Those of floating values are kept (`known`), for the copies
        PyTorch may make of them from launches' outputs (values_from_launches)."""
        before = [(e, self._sketch_of(e), self.sources_of(t)) for t in _tensors_in(values)
                  if t.numel() and t.layout == torch.strided and t.device.type != "meta" for e in _extents(t)]
        for e, sketch, sources in before:
            if sketch.moments and not all(_from_a_launch(s) for s in sources):
                self.known[_sketch_key(e)] = (sketch, sources)
        return before

    def values_from_launches(self, out, read: frozenset) -> frozenset:
        """The sources of `out`, made by PyTorch from launches' outputs alone (`read`): those of a value a
        launch was handed, where `out` is a copy of it (_Sketch.copied_into), else `read`. A red team's
        kernel wrote x + r and r, r random and large (a copy too noisy to count as one), and PyTorch
        subtracted r: x again, which the guard took for a new value."""
        # (copies are followed in correctness checks only: not while memory is measured, or for timed calls)
        if not self.follow_copies or self.touched is not None or not self.known or not read \
                or not all(_from_a_launch(s) for s in read):
            return read
        t = next(iter(_tensors_in(out)), None)
        if t is None or not t.is_floating_point() or t.numel() <= max(self.linear_above, COPIES_FROM - 1) \
                or t.layout != torch.strided:
            return read
        now = _sketch(t, self._positions(t))
        copied = [sources for sketch, sources in self.known.values() if sketch.copied_into(now)]
        return read.union(*copied)

    def after_launch(self, before: list) -> None:
        """What the launch wrote is a value of its own, unless it is a copy (COPY_SAMPLE) of a tensor it was
        handed: then it keeps that tensor's sources, and its own if it was written in place. What the
        launch only read keeps its sources."""
        written = {}
        for t, was, _ in before:
            # Its values at the sampled positions first: a launch that wrote none of them (of 4096 random
            # ones, or all of a small tensor) did not write the tensor, and the whole pass is spared.
            if _same_values(_sample(t, self._positions(t)), was.sample):
                continue
            self.forget_sketches(t)
            now = self._sketch_of(t)
            if now == was:
                continue
            # a copy of a tensor handed to this launch (itself too), or to an earlier one: a red team's first
            # launch wrote x + r and r, its second their difference
            copied = [sources for _, other, sources in before if other.copied_into(now)] \
                + [sources for other, sources in self.known.values() if other.copied_into(now)]
            address = _storage(t).data_ptr()
            new = self.sources_of(t).union(*copied) if copied else self._fresh_value(t)
            written[address] = written.get(address, frozenset()) | new
        handed = frozenset().union(*(sources | self.ancestry.get(_storage(t).data_ptr(), frozenset())
                                     for t, _, sources in before))
        for address in written:
            self.ancestry[address] = self.ancestry.get(address, frozenset()) | handed
        self.sources.update(written)

    def _positions(self, t: torch.Tensor) -> torch.Tensor:
        """The elements sampled of a tensor of t's size, drawn once per call and size from the OS's
        randomness (a student's code cannot seed it), so that a copy cannot spare just those."""
        key = (t.numel(), t.device)
        if key not in self.positions:
            if t.numel() <= COPY_SAMPLE:
                chosen = torch.arange(t.numel())
            else:
                generator = torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
                chosen = torch.randint(t.numel(), (COPY_SAMPLE,), generator=generator)
            self.positions[key] = chosen.to(t.device)
        return self.positions[key]

    def note_storages(self, values) -> set:
        """The storages of the tensors among `values` (nested in lists, tuples and dicts), noted as
        touched; returns their addresses."""
        found = set()
        for t in _tensors_in(values):
            storage = torch._C.TensorBase.untyped_storage(t)   # the method itself, not the guard's wrapper
            if storage.device.type != "meta" and storage.nbytes():
                self.touched[storage.data_ptr()] = storage.nbytes()
                found.add(storage.data_ptr())
        return found

    def allocation_elements(self, t: torch.Tensor) -> int:
        """How many elements the allocation t is a view of holds: its storage's, less the guard bytes around
        an empty one (guarded, in this call or an earlier one: a workspace kept between calls). A sum of a
        slice of the logits reads a small view of a large allocation."""
        ref, elements = _GUARDED.get(_storage(t).data_ptr(), (None, 0))
        return elements if ref is not None and not ref.expired() else _storage_elements(t)

    def kept_bytes(self, inputs) -> int:
        """Bytes of the storages the call used but did not make, other than those of `inputs`."""
        skip = {torch._C.TensorBase.untyped_storage(t).data_ptr() for t in _tensors_in(inputs)}
        return sum(n for address, n in self.touched.items() if address not in self.made and address not in skip)

    # Tensors the function allocated, with guard bytes around them: (all the memory, guard bytes, tensor)
    guards: list = field(default_factory=list)
    # The guard bytes' value, new for each call. An unmasked kernel stores past the end values computed
    # from what lies past the end of its inputs, and that may be an earlier call's guard memory: one
    # fixed value could be written back unchanged (seen on an H100 for x + y with y's tail zeroed).
    guard_byte: int = field(default_factory=lambda: random.randrange(1, 255))

    def guarded(self, t: torch.Tensor) -> torch.Tensor:
        """`t` (a fresh allocation) moved to the middle of a larger one, its elements poisoned and the
        bytes before and after it set to guard_byte: a store past the end of the tensor, which on a GPU
        lands in whatever memory follows, shows there (overruns)."""
        if t.numel() == 0 or len(self.guards) >= MAX_GUARDED:
            return poison_(t)
        span = bounds.span_elements(t) * t.element_size()
        pad = GUARD_BYTES
        memory = torch.empty(2 * pad + span, dtype=torch.uint8, device=t.device)
        memory[:pad].fill_(self.guard_byte)
        memory[pad + span:].fill_(self.guard_byte)
        storage = torch._C.TensorBase.untyped_storage(memory)   # the method itself, not the guard's wrapper
        moved = torch.empty(0, dtype=t.dtype, device=t.device).set_(storage, pad // t.element_size(), t.shape,
                                                                    t.stride())
        self.guards.append((memory, pad, moved))
        _note_guarded(storage, moved.numel())
        return poison_(moved)

    # On a GPU, the first launch found to have written into guard bytes, and through which argument:
    # (kernel, argument, the guard's index). The guards of a launch's tensors are looked at right after it,
    # or after the autotuner's run it is part of (unlooked), in correctness checks only (timed calls
    # allocate no guards), so the message can name them.
    overrun_by: tuple | None = None

    def look_at_guards(self, kernel: str, named: dict) -> None:
        """After a GPU launch of `kernel` with arguments `named` ({name: value}): note it if it wrote into
        the guard bytes of one of its tensors."""
        if self.overrun_by is not None or not self.guards:
            return
        mine = {_storage(memory).data_ptr(): i for i, (memory, _, _) in enumerate(self.guards)}
        for name, value in named.items():
            i = mine.get(_storage(value).data_ptr()) if isinstance(value, torch.Tensor) else None
            if i is not None and self._overrun(*self.guards[i]) is not None:
                self.overrun_by = (kernel, name, i)
                return

    def _overrun(self, memory, pad, t):
        """(where, how many elements away the farthest changed guard byte lies) around `t`, or None."""
        span = memory.numel() - 2 * pad
        for where, guard in (("past the end of", memory[pad + span:]), ("before the start of", memory[:pad])):
            changed = (guard != self.guard_byte).nonzero()
            if len(changed):
                past = where.startswith("past")
                farthest = int(changed[-1]) if past else int(changed[0]) - pad
                return where, abs(farthest // t.element_size() + (1 if past else 0))
        return None

    def overruns(self) -> str | None:
        """How a kernel wrote outside a tensor the function allocated (the first such tensor), or None."""
        found = [(i, self._overrun(*guard)) for i, guard in enumerate(self.guards)]
        found = [(i, o) for i, o in found if o is not None]
        if not found:
            return None
        by = self.overrun_by
        i, (where, elements) = next(((i, o) for i, o in found if by and by[2] == i), found[0])
        t = self.guards[i][2]
        who = f"kernel `{by[0]}` (its argument `{by[1]}`) wrote" if by and by[2] == i else "a kernel wrote"
        side = "past its end" if where.startswith("past") else "before it"
        return (f"{who} {where} a tensor your function allocated (shape {tuple(t.shape)}, "
                f"{str(t.dtype).replace('torch.', '')}), as far as {_elements(elements)} {side}: a store without a mask, "
                f"or with one that lets the last block write beyond the tensor. On a GPU that write lands in "
                f"another tensor's memory; `grader.memcheck(your_function, *its_inputs)` shows every such access "
                f"under compute-sanitizer, where it is installed.")

    def forbidden(self) -> list:
        """The PyTorch computations and device copies the function made (names of ATen ops)."""
        return sorted(set(self.torch_ops)) + sorted(set(self.device_moves))


# The memories guarded() made, by address: (a weak reference to the storage, the elements of the tensor in it)
_GUARDED = {}


def _note_guarded(storage, elements: int) -> None:
    from torch.multiprocessing.reductions import StorageWeakRef
    if len(_GUARDED) > 4 * MAX_GUARDED:   # forget those freed
        for address in [a for a, (ref, _) in _GUARDED.items() if ref.expired()]:
            del _GUARDED[address]
    _GUARDED[storage.data_ptr()] = (StorageWeakRef(storage), elements)


def _storage(t: torch.Tensor):
    return torch._C.TensorBase.untyped_storage(t)   # the method itself, not the guard's wrapper


# The allowed ops that write numbers from Python into a tensor (one, or arange's start, end and step): each
# place and values counts as one value put in (_Watcher._filled). Red teams wrote a mask drawn on the host
# as runs of fill_(1), and by zero_ on slices, zeros(out=) and arange(u, u + 0.5, out=) an element at a time.
FILLS = frozenset("fill_ full full_like new_full zero_ zeros zeros_like new_zeros ones ones_like new_ones "
                  "arange".split())
# Ops that put pieces of tensors together or into place (watch(pieces=): _Watcher._joined)
JOINS = frozenset("cat stack copy_ slice_scatter select_scatter".split())

# Reductions that add up a tensor's elements (watch(sum_limit=))
SUMS = frozenset("sum mean nansum nanmean sum_to_size cumsum cumsum_ logsumexp".split())
# ... and additions, which sum too where both terms come from one tensor: a red team added a row's halves,
# the halves of that, and so on (e[:, :w].sub(e[:, w:], alpha=-1), log2(V) times)
ADDITIONS = frozenset("add add_ sub sub_ rsub".split())
ADDITION_ROOM = 4


# Products, with the positions of their two factors. A product is linear in each factor, not in both:
# a red team computed squares, and from them a whole norm, softmax and SwiGLU, from products of a tensor
# with itself or with another made from the same input (x @ x.T, the diagonal of an outer product). With
# linear_above, the factors of a product may not share a source (CallRecord.sources): in an honest step
# one factor is a weight, or a kernel's output, and the other comes from elsewhere.
PRODUCTS = {"mm": (0, 1), "bmm": (0, 1), "matmul": (0, 1), "mv": (0, 1), "dot": (0, 1), "vdot": (0, 1),
            "addmm": (1, 2), "addmm_": (1, 2), "baddbmm": (1, 2), "baddbmm_": (1, 2), "addbmm": (1, 2),
            "addmv": (1, 2)}


# A Triton launch's output is a value of its own (CallRecord.sources): a kernel computes what PyTorch may
# not. But a kernel that only copies a tensor would make its copy a new value too, and the products of
# a tensor with its copy are squares again (a red team's RMSNorm from x times a kernel's copy of x).
# So a tensor a launch wrote keeps the sources of an argument it copied: one whose values (as they
# were before the launch) it holds up to a scale and a shift, with little noise, element by element or
# in magnitude (per-element sign flips), or as a multiset (a permutation, which a view or a product
# with a permutation matrix undoes). The whole tensor is not kept: each is sampled at COPY_SAMPLE random
# positions (the same for tensors of one size), and summed up by a few moments of all its elements.
COPY_SAMPLE = 4096
COPIES_FROM = 16   # fewer elements than this: too few to tell a copy from a coincidence
# A copy may differ from the scaled, shifted argument by at most this fraction of its spread (R^2 of
# 0.99, per element; twice the exercise's bfloat16 tolerance, 5e-2). Honest kernels' outputs stay well
# apart from their arguments (a softmax's gradient with its one-hot, SwiGLU, attention); an RMSNorm's
# is a copy of x by this measure, which is fine: nothing honest multiplies it by x. A noisier copy counts
# as new, and a product averages its noise away: that stays open (docs/threat-model.md).
COPY_NOISE = 0.1
# The moments of a permutation of a tensor equal its own but for rounding in the sums (about 1e-6 in
# float32); those of two different tensors differ by more, from about 1/sqrt(their size) up.
SAME_MOMENTS = 1e-5


@dataclass
class _Sketch:
    """What is compared of a tensor before and after a launch: its values at the call's positions for
    its size (in its own dtype, to tell whether the launch wrote it), and for a floating tensor its
    moments: |skewness|, kurtosis and the 6th standardized moment, then E|v|^k / E|v|^k for k = 2, 3, 4
    (a scale and a shift, or a scale and sign flips, leave one triple unchanged; so does a permutation)."""
    sample: torch.Tensor
    moments: tuple = ()      # () where there is nothing to compare: too few elements, not floats, constant

    def __eq__(self, other) -> bool:
        return self.moments == other.moments and _same_values(self.sample, other.sample)

    def copied_into(self, written: "_Sketch") -> bool:
        """Whether `written` holds these values up to a scale, a shift and little noise (COPY_NOISE),
        up to signs, or in another order (SAME_MOMENTS)."""
        if not self.moments or not written.moments or self.sample.shape != written.sample.shape:
            return False
        x, y = self.sample.double(), written.sample.double()
        finite = x.isfinite() & y.isfinite()
        x, y = x[finite], y[finite]
        if len(x) >= COPIES_FROM and (_affine(x, y) or _affine(x.abs(), y.abs())):
            return True
        return any(all(abs(a - b) <= SAME_MOMENTS * max(1.0, abs(b)) for a, b in zip(mine, theirs))
                   for mine, theirs in ((self.moments[:3], written.moments[:3]), (self.moments[3:], written.moments[3:])))


def _affine(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Whether y = a x + b but for noise of at most COPY_NOISE of y's spread (least squares)."""
    x, y = x - x.mean(), y - y.mean()
    vx, vy, cov = float(x @ x), float(y @ y), float(x @ y)
    return vx > 0 and vy > 0 and cov * cov >= (1 - COPY_NOISE ** 2) * vx * vy


def _sketch_key(t: torch.Tensor) -> tuple:
    """What makes two tensors the same view of one storage's values, as long as nothing wrote it
    (PyTorch's in-place ops count themselves in the version counter that a storage's views share)."""
    return (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype, t._version)


def _extents(t: torch.Tensor) -> list:
    """The memory a launch handed t can reach, as tensors: t's span in its storage, from its first element
    to its last, in t's dtype (a red team handed a kernel a 2-element view strided across a whole tensor,
    and the kernel wrote a full copy of x through it), and for a dtype other than a float the same bytes
    as each 16- and 32-bit float (the same red team's kernel wrote x's bits into an int32 view of a float
    workspace)."""
    flat = torch._C.TensorBase.as_strided(t.detach(), (bounds.span_elements(t),), (1,), t.storage_offset())
    if t.is_floating_point():
        return [flat]
    raw = flat.view(torch.uint8)
    return [flat] + [raw[:len(raw) // dtype.itemsize * dtype.itemsize].view(dtype)
                     for dtype in (torch.float32, torch.float16, torch.bfloat16)
                     if len(raw) >= dtype.itemsize and raw.data_ptr() % dtype.itemsize == 0]


def _from_a_launch(source) -> bool:
    """Whether a source (CallRecord.sources) is a Triton launch's output rather than a tensor's storage."""
    return isinstance(source, tuple) and source[:1] == ("launch",)


def _sample(t: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        t = t.detach()
        return t[torch.unravel_index(positions, t.shape)] if t.dim() else t.reshape(1)


def _same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit for bit (a NaN equals itself)."""
    return a.shape == b.shape and torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


def _sketch(t: torch.Tensor, positions: torch.Tensor) -> _Sketch:
    """t's _Sketch: a few passes over its elements (in float32), no sort, and one wait for the GPU."""
    sample = _sample(t, positions)
    if not t.is_floating_point() or t.numel() < COPIES_FROM:
        return _Sketch(sample)
    with torch.no_grad():
        v = t.detach().to(torch.float32, memory_format=torch.contiguous_format, copy=True).view(-1)
        v.nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)   # a poisoned (never written) element counts as 0
        n = v.numel()
        norms = [torch.linalg.vector_norm(v, k) for k in (1, 2, 3, 4)]
        std, mean = torch.std_mean(v, correction=0)
        z = v.sub_(mean).div_(std)       # not finite where std is 0: such a tensor gets no moments
        z2 = z * z
        # (TensorBase's own tolist: the guard reading its figures is not the student reading values out)
        figures = torch._C.TensorBase.tolist(torch.stack(norms + [std, z2 @ z, z2 @ z2, torch.linalg.vector_norm(z, 6)]))
    (l1, l2, l3, l4), std, (z3, z4, z6) = figures[:4], figures[4], figures[5:]
    mean_abs = l1 / n
    if not std > 0 or not mean_abs > 0:
        return _Sketch(sample)
    magnitudes = [lk ** k / n / mean_abs ** k for lk, k in ((l2, 2), (l3, 3), (l4, 4))]
    return _Sketch(sample, (abs(z3) / n, z4 / n, z6 ** 6 / n, *magnitudes))


def _elements(n: int) -> str:
    return f"{n} element{'' if n == 1 else 's'}"


def _is_view(name: str, args, kwargs, out) -> bool:
    """Whether an op only took a view: its outputs share its inputs' memory, and it wrote nothing."""
    outputs = list(_tensors_in(out))
    used = {_storage(t).data_ptr() for t in _tensors_in((args, kwargs))}
    return bool(outputs) and all(_storage(t).data_ptr() in used for t in outputs) and not name.endswith("_") \
        and "out" not in kwargs


def _beyond_linear(func, name: str, args, kwargs, out, bound: int) -> str | None:
    """What an op did to tensors of more than `bound` elements that is not a linear map, or None."""
    large = [t for t in _tensors_in((args, kwargs)) if t.numel() > bound]
    made = [t for t in _tensors_in(out) if t.numel() > bound]
    what = f"on a tensor of more than {_elements(bound)}"
    odd = [t.dtype for t in large + made if t.dtype not in FLOAT_TYPES]
    if odd:   # no large tensor of integers, booleans, complex numbers or 8-bit floats, even a new one
        if large and _is_view(name, args, kwargs, out) and all(t.dtype == large[0].dtype for t in large + made):
            return None
        return f"aten.{name} making or using a tensor of more than {_elements(bound)} of {str(odd[0]).replace('torch.', '')}"
    if any(isinstance(a, (torch.UntypedStorage, torch.TypedStorage)) for a in args):
        return f"aten.{name} of a storage"
    if not large:   # an allocation, or an op on small tensors (counted by the caller)
        return None
    if _is_view(name, args, kwargs, out):
        if getattr(func, "_overloadname", "") == "dtype" or name.startswith("view_as_"):
            return f"aten.{name} as another dtype {what}"
        return None
    if name not in LINEAR_OPS:
        return f"aten.{name} {what}"
    factors = [a for a in args[:2] if isinstance(a, torch.Tensor) and a.numel() > bound]
    if name.startswith(("mul", "div")) and len(factors) == 2:
        return f"aten.{name} of two tensors of more than {_elements(bound)}"
    if name.startswith("div") and (kwargs.get("rounding_mode") or "Tensor_mode" in str(func) or "Scalar_mode" in str(func)):
        return f"aten.{name} with rounding {what}"
    if name.startswith("div") and len(args) > 1 and isinstance(args[1], torch.Tensor) and args[1].numel() > bound:
        return f"aten.{name} by a tensor of more than {_elements(bound)}"
    return None


class _Watcher(TorchDispatchMode):
    def __init__(self, record: CallRecord, poison: bool, allowed: frozenset):
        super().__init__()
        self.record = record
        self.poison = poison
        self.allowed = allowed
        self.in_triton = 0
        self.host_elements = 0
        self.put_elements = 0
        self.fills = set()   # (storage, offset, elements, values) of each fill from Python (_filled)
        self.joined = 0         # pieces joined or copied into place (_joined)
        self.launch_bits = 0    # bits handed to launches in numbers, and the last number at each place
        self.last_handed = {}   # ({(kernel, place): number}: handed_to_launch)

    def read_out(self, what: str, elements: int) -> None:
        """The student's code took `elements` values out of PyTorch by `what`."""
        self.host_elements += elements
        self.record.values_read += elements
        if self.host_elements - elements <= HOST_ELEMENTS < self.host_elements:   # said once, when crossed
            self.record.torch_ops.append(f"{what} (more than {HOST_ELEMENTS} values read out of tensors "
                                         "into Python; printing a few is fine)")

    def _filled(self, name, args, out) -> None:
        """A fill with a number from Python: one value put in, where it lands somewhere new (an autotuner's
        pre_hook that zeroes the output before every benchmarked run fills the same memory each time).
        Honest code fills a few buffers, or one per chunk of rows: so many are permitted per row, where the
        exercise has rows (linear_above), beyond the values a tensor may be made of."""
        t = out if isinstance(out, torch.Tensor) else args[0]
        values = tuple(a for a in args if isinstance(a, (int, float, bool)))
        self.fills.add((_storage(t).data_ptr(), t.storage_offset(), t.numel(), values))
        limit = HOST_ELEMENTS + 4 * (self.record.linear_above or 0)
        if len(self.fills) == limit + 1:   # said once, when crossed
            self.record.torch_ops.append(f"{limit + 1} fills by aten.{name} and ops like it (values from Python "
                                         f"written into tensors a few at a time: what they hold was computed "
                                         f"outside Triton)")

    def handed_to_launch(self, kernel, values) -> None:
        """The bits a launch of `kernel` is handed in numbers (arguments, tuples of them, the grid's sizes,
        its tensors' addresses and dtypes: _numbers_in), counted against watch(launch_bits=): one for the
        launch, one for each number the same as at that place in the kernel's last launch, and the
        number's own bits where it changed (an address, how far it moved). A random op's mask needs no input read, so Python can draw it and pass it
        in: a red team's dropout handed each launch 31 mask bits as an int, or a tuple of ints. Counting
        distinct values would let a small alphabet through, launch after launch (a position from an
        atomic counter in the kernel); counting the same number again as one bit lets a launch a row
        through, which hands the same sizes, p and seed again and a new offset."""
        limit = self.record.launch_bits
        if limit is None:
            return
        before = self.launch_bits
        self.launch_bits += 1
        for place, value in _numbers_in(values):
            key = (kernel, place)
            last, kind = self.last_handed.get(key, _NOTHING), place[-1:]
            if last == value or (last is _NOTHING and kind == (ADDRESS,)):   # (the first address: 1)
                self.launch_bits += 1
            elif kind == (DTYPE,):   # one of a few dozen
                self.launch_bits += 8
            else:
                self.launch_bits += _bits(value, last if kind == (ADDRESS,) else None)
            self.last_handed[key] = value
        if self.launch_bits > limit:
            said = (f"more than {limit} bits of numbers handed to kernel launches (a mask or values drawn in "
                    f"Python and passed in as arguments: draw them in the kernel)")
            if before <= limit:   # said once, when crossed
                self.record.torch_ops.append(said)
            # and no launch past it runs: such a call launches once for every few bits of its output, which
            # took the interpreter a minute per call (the record refuses the call, whatever it does next)
            raise Refused(f"{said}: not launched")

    def _joined(self, name, args) -> None:
        """Pieces that an op joins (cat, stack: each tensor) or copies into place (copy_, the scatters: one),
        counted against watch(pieces=), for a random op, whose output depends on no input's values: a red
        team's dropout drew its mask with Python's random and joined it from one-element tensors of ones
        and zeros, putting in no values (put_in), only its choice of each piece. An honest one joins nothing
        and copies a few whole tensors (a contiguous copy of its input)."""
        before, limit = self.joined, self.record.pieces
        self.joined += len(list(_tensors_in(args[0]))) if name in ("cat", "stack") else 1
        if before <= limit < self.joined:   # said once, when crossed
            self.record.torch_ops.append(f"pieces joined or copied into place by PyTorch, more than {limit} (a "
                                         f"mask assembled piece by piece outside Triton: draw it in the kernel)")

    def put_in(self, what: str, elements: int) -> None:
        """The student's code made tensors of `elements` values from Python or NumPy by `what`."""
        self.put_elements += elements
        if self.put_elements - elements <= HOST_ELEMENTS < self.put_elements:   # said once, when crossed
            self.record.torch_ops.append(f"{what} (more than {HOST_ELEMENTS} values put into tensors from Python "
                                         f"or NumPy: what they hold was computed outside Triton)")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "namespace", "aten") not in ("aten", "prims") and not self.in_triton:
            return self._custom_op(func, args, kwargs)
        had = self._addresses((args, kwargs)) if self.record.allocations is not None and not self.in_triton else None
        grows = self.poison and not self.in_triton and func.overloadpacket is torch.ops.aten.resize_
        before = _storage(args[0]).nbytes() if grows else None
        out = func(*args, **kwargs)
        if self.in_triton:
            return out
        if grows:
            _poison_grown(_storage(args[0]), before, args[0].dtype)
        if self.record.reached is not None:
            # (a red team's forward copied its mask into a module-level buffer: `_BUF[:n].copy_(mask)`; another
            # cloned numbers drawn before the call out of one: `_POOL[:n].clone()`. A view reads nothing.)
            if _written(func, args, kwargs) or not _is_view(func.overloadpacket.__name__, args, kwargs, out):
                self.record.note_reached((args, kwargs), by_op=True)
        if self.record.touched is not None:
            # What an op returns in storage none of its arguments had, it made: a view of a workspace, or an
            # op writing into one (out=), made nothing.
            used = self.record.note_storages((args, kwargs))
            self.record.made |= self.record.note_storages(out) - used
        name = func.overloadpacket.__name__
        if name == "_local_scalar_dense":
            self.read_out("Tensor.item", 1)
        elif name == "lift_fresh":   # a tensor made from Python data: torch.tensor, from_numpy, as_tensor
            self.put_in("torch.tensor or torch.from_numpy", sum(t.numel() for t in _tensors_in(out)))
        elif name == "set_" and any(isinstance(a, (torch.UntypedStorage, torch.TypedStorage)) for a in args):
            # memory from a storage: made from a list (UntypedStorage([...])), or taken from a tensor (read out)
            self.put_in("Tensor.set_ of a storage", max(a.nbytes() for a in args
                                                        if isinstance(a, (torch.UntypedStorage, torch.TypedStorage))))
        elif name in FILLS and not any(isinstance(a, torch.Tensor) for a in args[1:]):
            self._filled(name, args, out)
        elif name not in self.allowed:
            self.record.torch_ops.append(f"aten.{name}")
        elif name == "_to_copy" and "device" in kwargs and args and \
                torch.device(kwargs["device"]).type != args[0].device.type:
            self.record.device_moves.append(f"copy to {kwargs['device']}")
        elif self.poison and name in POISONED_OPS and isinstance(out, torch.Tensor):
            out = self.record.guarded(out)
        if self.record.pieces is not None and name in JOINS:
            self._joined(name, args)
        # (before an in-place addition's result takes its terms' sources)
        adds_itself = self.record.sum_limit is not None and name in ADDITIONS and self._adds_itself(args)
        if self.record.linear_above is not None:
            self._bookkeeping_only(func, name, args, kwargs, out)
        if self.record.sum_limit is not None and (name in SUMS or adds_itself):
            self._summed(name, args)
        if had is not None:
            self._note_allocations(had, (args, kwargs, out))
        return out

    @staticmethod
    def _addresses(values) -> set:
        return {_storage(t).data_ptr() for t in _tensors_in(values)}

    def _note_allocations(self, had: set, values) -> None:
        """Remember, by weak reference, the memory an op made: storage none of its arguments had before it
        ran (a new tensor, or one an in-place resize_ moved to new memory), not a view of theirs. Its size is
        what the tensor spans (without the guard bytes around an empty one)."""
        from torch.multiprocessing.reductions import StorageWeakRef
        for t in _tensors_in(values):
            storage = _storage(t)
            if storage.data_ptr() not in had and storage.nbytes() and \
                    storage.data_ptr() not in self.record.allocated:
                self.record.allocated.add(storage.data_ptr())
                spanned = bounds.span_elements(t) * t.element_size()
                self.record.allocations.append((StorageWeakRef(storage), spanned, tuple(t.shape), t.dtype,
                                                storage.data_ptr()))

    def _bookkeeping_only(self, func, name, args, kwargs, out) -> None:
        """watch(linear_above=bound): only linear maps of large tensors, and only so many ops on them and
        other ops on smaller ones (LINEAR_OPS)."""
        record, bound = self.record, self.record.linear_above
        problem = _beyond_linear(func, name, args, kwargs, out, bound) or self._self_product(name, args)
        self._note_sources(name, args, kwargs, out)
        if problem:
            record.torch_ops.append(problem)
            record.beyond_bookkeeping = True
            return
        large = any(t.numel() > bound for t in _tensors_in((args, kwargs)))
        # an op on a slice of a large allocation counts as one on a large tensor (a red team summed the logits
        # a few columns at a time, each slice no larger than the bound)
        of_large = large or any(record.allocation_elements(t) > bound for t in _tensors_in((args, kwargs)))
        if of_large and not _is_view(name, args, kwargs, out):
            record.large_ops += 1
            if record.large_ops == OPS_FREE + LARGE_OPS_PER_ROW * bound + 1:   # said once
                record.beyond_bookkeeping = True
                record.torch_ops.append(f"more than {record.large_ops - 1} PyTorch ops on tensors of more than "
                                        f"{_elements(bound)} (or slices of them)")
        elif not large and _beyond_linear(func, name, args, kwargs, out, 0):   # the same, on small tensors
            record.small_ops += 1
            if record.small_ops == OPS_FREE + SMALL_OPS_PER_ROW * bound + 1:
                record.beyond_bookkeeping = True
                record.torch_ops.append(f"more than {record.small_ops - 1} PyTorch ops other than sums and "
                                        f"scalings on tensors of {_elements(bound)} or fewer (a few rows or a "
                                        f"column at a time)")

    def _summed(self, name, args) -> None:
        """A sum (or an addition of two terms from one source) may read sum_limit elements at once (an
        addition, ADDITION_ROOM times as many), and ADDITION_ROOM times sum_limit in the whole call of those
        computed from any one tensor (its allocation, and the CallRecord.ancestry of its values: parts of
        it, copies, what launches wrote from it). So a sum of the logits slice by slice counts as one of all
        of them, and so do sums of strips of exponentials a kernel wrote into fresh buffers (red teams'),
        while a few numbers a row read from a workspace kept between calls count as what they are, not as
        the workspace a larger call grew (an honest answer's), and a few such sums fit."""
        terms = [t for t in (args[:1] if name in SUMS else args[:2]) if isinstance(t, torch.Tensor)]
        # (an addition may fold the columns of a workspace of up to 4 times as many: a few numbers a row,
        # where a red team's sweep had an honest (rows, 8) buffer's columns subtracted)
        at_once = self.record.sum_limit * (1 if name in SUMS else ADDITION_ROOM)
        in_call = self.record.sum_limit * ADDITION_ROOM
        read = sum(t.numel() for t in terms)
        if read > at_once:
            what = f"aten.{name} of {_elements(read)}" if name in SUMS else \
                f"aten.{name} of two parts of {_elements(read)} (a sum, by additions)"
            self.record.torch_ops.append(f"{what} (PyTorch may sum at most {_elements(at_once)} at once here)")
        from torch.multiprocessing.reductions import StorageWeakRef
        crossed = 0
        for t in terms:
            storage = _storage(t)
            address = storage.data_ptr()
            ref = self.record.summed_storages.get(address)
            if ref is None or ref.expired():   # new memory at this address (the caching allocator's reuse)
                self.record.summed_storages[address] = StorageWeakRef(storage)
                self.record.summed.pop(address, None)
            for source in {address} | self.record.ancestry_of(t):
                before = self.record.summed.get(source, 0)
                self.record.summed[source] = before + t.numel()
                if before <= in_call < before + t.numel():
                    crossed = max(crossed, before + t.numel())
        if crossed:   # said once for each tensor, when crossed
            self.record.torch_ops.append(f"aten.{name}: {_elements(crossed)} computed from one tensor summed in "
                                         f"this call (PyTorch may sum at most {_elements(in_call)} of them in a "
                                         f"call here)")

    def _adds_itself(self, args) -> bool:
        """Whether an addition's two terms were computed from a common source (parts of one tensor, copies of
        them, or what launches wrote from them: CallRecord.ancestry): a step of a sum over that tensor."""
        terms = [a for a in args[:2] if isinstance(a, torch.Tensor)]
        return len(terms) == 2 and bool(self.record.ancestry_of(terms[0]) & self.record.ancestry_of(terms[1]))

    def _self_product(self, name, args) -> str | None:
        """A product whose two factors were computed from a common source: not a linear map."""
        if name not in PRODUCTS or len(args) <= max(PRODUCTS[name]):
            return None
        first, second = (args[i] for i in PRODUCTS[name])
        if not (isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor)):
            return None
        if self.record.sources_of(first) & self.record.sources_of(second):
            return f"aten.{name} of two factors computed from the same tensor (a product of a tensor with itself)"
        return None

    def _note_sources(self, name, args, kwargs, out) -> None:
        """What the op's results were computed from: everything it read (an allocation: nothing). An op
        that writes into a tensor (copy_, add_, out=) has it among its arguments, so its result keeps
        what that tensor already held."""
        record = self.record
        read = frozenset().union(*(record.sources_of(t) for t in _tensors_in((args, kwargs)))) \
            if name not in ALLOCATIONS else frozenset()
        if name in LINEAR_OPS:   # products too: [x + r | r] @ [I; -I] is x again (a red team's)
            read = record.values_from_launches(out, read)
        came_from = frozenset().union(*(record.ancestry_of(t) for t in _tensors_in((args, kwargs)))) \
            if name not in ALLOCATIONS else frozenset()
        for t in _tensors_in(out):
            record.sources[_storage(t).data_ptr()] = read
            record.ancestry[_storage(t).data_ptr()] = came_from
            record.forget_sketches(t)

    def _custom_op(self, func, args, kwargs):
        """A custom operator: opaque to a dispatch mode, so its name says nothing of what it computes
        (`mylib::clone` may add). One defined in Python (`torch.library.custom_op`, or `triton_op`, the
        documented way to wrap a Triton kernel) is run as its Python function, watched like the rest;
        any other is PyTorch computing where the grader cannot look."""
        implementation = _python_implementation(func)
        if implementation is None:
            self.record.torch_ops.append(f"{func.namespace}::{func.overloadpacket.__name__} (a custom operator)")
            return func(*args, **kwargs)
        with self:
            return implementation(*args, **kwargs)


def _written(func, args, kwargs) -> list:
    """The tensors an ATen op writes into: the arguments its schema marks as written (`Tensor(a!)`: copy_'s
    self, an in-place op's, out=)."""
    written = []
    for i, argument in enumerate(func._schema.arguments):
        if argument.alias_info is not None and argument.alias_info.is_write:
            written += _tensors_in(kwargs.get(argument.name) if argument.kwarg_only or i >= len(args) else args[i])
    return written


def _python_implementation(func):
    try:
        from torch._library.custom_ops import OPDEFS
    except ImportError:  # pragma: no cover - torch before 2.4
        return None
    opdef = OPDEFS.get(f"{func.namespace}::{func.overloadpacket.__name__}")
    return getattr(opdef, "_init_fn", None)


def _launch_methods():
    """(class, method, counts as a launch, Triton's own work) for the entry points a launch goes through.

    On a GPU every launch goes through JITFunction.run. In the interpreter it ends in a GridExecutor
    call: from Triton 3.6 InterpretedFunction.run makes one, before 3.6 `kernel[grid]` made one
    directly and `run` was a per-instance closure, so the executor is where all versions meet.
    """
    import triton.runtime.jit as jit
    methods = [(jit.JITFunction, "run", True, True)]
    try:
        import triton.runtime.interpreter as interp
        # The interpreter runs the kernel's body as Python: that is the student's code, so it is
        # watched (the interpreter's own work on tensors is views and copies, which are allowed).
        methods.append((interp.GridExecutor, "__call__", True, False))
        # ... but its copying of the arguments to the host and back is Triton's.
        methods += [(interp.GridExecutor, name, False, True) for name in ("_init_args_hst", "_restore_args_dev")
                    if hasattr(interp.GridExecutor, name)]
    except (ImportError, AttributeError):  # pragma: no cover
        pass
    import triton.runtime.autotuner as at
    # Autotuner and Heuristics wrap a JITFunction: their own benchmarking allocates tensors, which
    # is Triton's work, but the launch is counted once, at the JIT level.
    methods += [(at.Autotuner, "run", False, True), (at.Heuristics, "run", False, True)]
    return methods


class _StudentCode:
    """A function of the student's that Triton calls from inside a launch: a grid function, a pre-run
    hook, an autotune config's or autotuner's pre_hook, a heuristic. What it computes is watched like
    the rest of the student's function. It hashes and compares as the function it wraps, since a
    triton.Config hashes its pre_hook."""

    def __init__(self, fn, watcher, noted=None, grid=False):
        self.fn, self.watcher, self.noted = fn, watcher, noted   # noted(result): a grid's sizes counted
        self.grid = grid

    def __call__(self, *args, **kwargs):
        depth, self.watcher.in_triton = self.watcher.in_triton, 0
        try:
            with _interpreter_opened(False):
                result = self.fn(*args, **kwargs)
                if self.grid:   # sizes, made plain here: Triton takes a grid's len() and adds to it inside the launch
                    result = tuple(int(n) for n in result)
        finally:
            self.watcher.in_triton = depth
        if self.noted is not None:
            self.noted(result)
        return result

    def __hash__(self):
        return hash(self.fn)

    def __eq__(self, other):
        return self.fn == (other.fn if isinstance(other, _StudentCode) else other)


def _is_trusted(fn) -> bool:
    """Whether a callable is Triton's or the grader's own code (a default benchmarker, say), not the
    student's: where its code was written, which a submitted cell cannot choose (no compile, exec)."""
    import triton
    code = getattr(fn, "__code__", None)
    return code is not None and code.co_filename.startswith(
        (str(Path(triton.__file__).parent), _PACKAGE_DIR))


# What a kernel launch may be given: tensors, numbers, strings, dtypes and Triton's own objects
# (constexprs, tensor descriptors). Triton reads attributes of every argument while it launches (a
# tensor's dtype, data_ptr and strides, an autotuner's key), in code the guard does not watch as the
# student's: an object of the student's own class there could run anything from a property.
_PLAIN_TYPES = (int, float, bool, str, type(None), torch.dtype, torch.device)
_TENSOR_TYPES = tuple(t for t in (torch.Tensor, torch.nn.Parameter, getattr(torch.nn, "Buffer", None)) if t)


# Functions as data: their hash and equality are Python's own, whatever they hold.
_FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType, functools.partial)


def _odd_part(value, functions: bool = False, depth: int = 0) -> str | None:
    """The class of the first thing in `value` that is not plain data, or None when all of it is. Triton's
    own objects count as plain when everything they hold is: a red team put objects of its own class in
    a constexpr's value, a reinterpreted tensor's dtype and a descriptor's padding, and Triton hashed,
    compared or formatted them inside its own work. A @triton.jit kernel handed to another is plain (its
    body is compiled, or interpreted under the watch). With `functions`, so is a Python function held as
    data, as an autotuner holds its hooks (only calling it runs code, and the calls Triton makes of the
    student's functions are watched: _hooks_watched); a launch has no use for one."""
    kind = type(value)
    if kind in _PLAIN_TYPES or kind in _TENSOR_TYPES or kind is torch.Size or isinstance(value, _StudentCode) \
            or functions and kind in _FUNCTION_TYPES:
        return None
    if depth > 8:
        return kind.__name__
    if kind is type and _library_class(value):   # one of Triton's classes (a constexpr's type before 3.4)
        return None
    if kind is types.MethodType and functions:   # a hook that is a method: hashing it hashes its object
        owner = type(value.__self__)
        if (owner.__hash__ is object.__hash__ and owner.__eq__ is object.__eq__) or owner is type:
            return None   # (Python's own hashing: of an object by its identity, of a classmethod's class)
        return _odd_part(value.__self__, functions, depth + 1)
    if kind in (tuple, list):
        return next(filter(None, (_odd_part(v, functions, depth + 1) for v in value)), None)
    if kind is dict:
        return next(filter(None, (_odd_part(k, functions, depth + 1) or _odd_part(v, functions, depth + 1)
                                  for k, v in dict.items(value))), None)
    if not _library_class(kind):
        return kind.__name__
    if kind.__module__.split(".")[0] == "numpy":   # a NumPy number (no array: Triton takes none)
        numpy = sys.modules["numpy"]
        return None if isinstance(value, numpy.generic) and value.dtype.kind in "biufc" else kind.__name__
    if _is_kernel(value) or _is_triton_dtype(value):
        return None
    state = vars(value) if hasattr(value, "__dict__") else \
        {n: getattr(value, n, None) for n in getattr(kind, "__slots__", ())}
    return next(filter(None, (_odd_part(v, functions, depth + 1) for v in state.values())), None)


def _is_triton_dtype(value) -> bool:
    """One of Triton's types (tl.float16, tl.int32, a pointer type): Triton's to hash and compare."""
    import triton.language as tl
    return isinstance(value, tl.dtype) and _library_class(type(value))


def _is_kernel(value) -> bool:
    """A @triton.jit function, as Triton defines it (compiled on a GPU, interpreted on the CPU)."""
    import triton.runtime.jit as jit
    kinds = [jit.JITFunction]
    interpreter = sys.modules.get("triton.runtime.interpreter")
    if interpreter is not None and hasattr(interpreter, "InterpretedFunction"):
        kinds.append(interpreter.InterpretedFunction)
    return type(value) in kinds


def _library_class(kind) -> bool:
    """A class that Triton or NumPy defines: found under its name in the module it says it comes from
    (a notebook's class that claims a Triton module is not there)."""
    module = sys.modules.get(kind.__module__)
    return kind.__module__.split(".")[0] in ("triton", "numpy") and getattr(module, kind.__name__, None) is kind


def _odd_arguments(args, kwargs) -> list:
    """Type names of launch arguments that are not plain (the grid function is the student's code)."""
    values = list(args) + [v for k, v in kwargs.items() if k != "grid"]
    return sorted({odd for odd in map(_odd_part, values) if odd})


DESCRIPTOR_RULE = ("A descriptor must describe its own tensor (TensorDescriptor.from_tensor(t, block), or a torch "
                   "tensor t with t's shape and strides in lists of ints): its loads and stores reach everything its "
                   "shape and strides span, without a mask.")


def _is_descriptor(value) -> bool:
    """A tensor descriptor made on the host: an object of Triton's over a tensor (`base`) with strides (a
    NumPy number has both names too)."""
    kind = type(value)
    return kind.__module__.split(".")[0] == "triton" and _library_class(kind) and hasattr(value, "base") \
        and hasattr(value, "strides")


def _past_its_tensor(value) -> list:
    """What each tensor descriptor in a launch argument (inside tuples and lists too) describes past the
    memory of its tensor: TMA moves whatever the descriptor's shape and strides span, with no mask, so a
    descriptor larger than its tensor reads or writes memory that is not the tensor's (another tensor, a
    buffer kept hidden), on a GPU and in the interpreter alike. The span of the tensor's elements is its
    own (a descriptor may view it in another shape); the rest of its storage is not, as in the
    interpreter, whose bounds check stops there too (bounds.span_elements). Its tensor must be a torch
    tensor and its shape and strides plain ints (a number of the student's own class could say one
    thing to this check and another to the launch; a list's could compute while Triton reads it)."""
    if type(value) in (tuple, list):
        return [said for v in value for said in _past_its_tensor(v)]
    if not _is_descriptor(value):
        return []
    base = value.base
    if type(base) not in _TENSOR_TYPES:
        return [f"a tensor descriptor over a {type(base).__name__}, not a tensor"]
    for name in ("shape", "strides", "block_shape"):
        part = getattr(value, name, ())
        if type(part) not in (list, tuple, torch.Size) or any(type(n) is not int for n in part):
            kinds = sorted({type(n).__name__ for n in part}) if type(part) in (list, tuple) else []
            return [f"a tensor descriptor whose {name} is a {type(part).__name__}"
                    + (f" of {', '.join(kinds)}" if kinds else "") + ", not plain ints"]
    shape, strides = list(value.shape), list(value.strides)
    own_low, own_high = bounds.reach(base.shape, base.stride())      # what the tensor's own elements span
    low, high = bounds.reach(shape, strides)
    if high == low or (own_low <= low and high <= own_high):
        return []
    return [f"a tensor descriptor of shape {shape} and strides {strides} over "
            f"a tensor of shape {tuple(base.shape)} reaches its element {high - 1 if high > own_high else low:,} "
            f"(counted from the tensor's first), where the tensor's elements span {own_low:,} to {own_high - 1:,}"]


def _frozen_descriptors(value):
    """The launch's tensor descriptors (inside tuples and lists too) as copies whose shape and strides are
    tuples: what was checked is what launches, though the student's grid function or hooks, which run
    after the check, still hold the lists the descriptors were made with."""
    if type(value) in (tuple, list):
        frozen = [_frozen_descriptors(v) for v in value]
        return type(value)(frozen) if any(f is not v for f, v in zip(frozen, value)) else value
    if not _is_descriptor(value):
        return value
    frozen = copy.copy(value)
    frozen.shape, frozen.strides = tuple(value.shape), tuple(value.strides)
    return frozen


@contextmanager
def _hooks_watched(launcher, watcher):
    """While a launch runs, the student's hooks on it are _StudentCode; afterwards, as they were."""
    swapped = []

    def swap(owner, name, value):
        swapped.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    if callable(getattr(launcher, "grid", None)) and not isinstance(launcher.grid, _StudentCode):
        swap(launcher, "grid", _StudentCode(launcher.grid, watcher, grid=True))   # an interpreter's GridExecutor
    hooks = getattr(launcher, "pre_run_hooks", None)
    if isinstance(hooks, list) and hooks:
        swap(launcher, "pre_run_hooks", [_StudentCode(h, watcher) for h in hooks])
    # @triton.jit(launch_metadata=f, repr=g): Triton calls them when a launch or JIT hook is set (of a
    # kernel launched by hand too, through the kernel it was compiled from)
    kernel = launcher if _is_kernel(launcher) else getattr(launcher, "kernel", None)   # (a _HandLaunch's)
    for name in ("launch_metadata", "repr"):
        value = kernel.__dict__.get(name) if _is_kernel(kernel) else None
        if callable(value) and not isinstance(value, _StudentCode) and not _is_trusted(value):
            swap(kernel, name, _StudentCode(value, watcher))
    for name in ("pre_hook", "post_hook"):            # an Autotuner's
        if callable(getattr(launcher, name, None)) and hasattr(launcher, "configs"):
            swap(launcher, name, _StudentCode(getattr(launcher, name), watcher))
    for config in getattr(launcher, "configs", None) or ():
        if callable(getattr(config, "pre_hook", None)):
            swap(config, "pre_hook", _StudentCode(config.pre_hook, watcher))
    # An Autotuner's pruning and benchmarking functions, when the student passed them (Triton's own
    # benchmarker allocates and reduces timings: that is Triton's work).
    for name in ("early_config_prune", "perf_model", "_do_bench", "do_bench"):
        value = launcher.__dict__.get(name) if hasattr(launcher, "__dict__") else None
        if callable(value) and not isinstance(value, _StudentCode) and not _is_trusted(value):
            swap(launcher, name, _StudentCode(value, watcher))
    values = getattr(launcher, "values", None)        # a Heuristics' (dict.items: not a subclass's own)
    if isinstance(values, dict):
        swap(launcher, "values", {k: _StudentCode(v, watcher) if callable(v) else v for k, v in dict.items(values)})
    # The allocator set by triton.set_allocator: Triton calls it inside the launch, for the global memory
    # a kernel with tensor descriptors made in the kernel needs. It is the notebook's code: PyTorch may
    # allocate there, as anywhere, but what it computes is watched. (A module global before Triton 3.4,
    # a context variable since.)
    allocation = sys.modules.get("triton.runtime._allocation")
    current = getattr(allocation, "_allocator", None)
    token = None
    if hasattr(current, "get") and hasattr(current, "set"):
        if not isinstance(current.get(), _StudentCode):
            token = current.set(_StudentCode(current.get(), watcher))
    elif callable(current) and not isinstance(current, _StudentCode):
        swap(allocation, "_allocator", _StudentCode(current, watcher))
    # Code the notebook left in Triton's settings, which Triton calls inside the launch: a launch hook
    # (`triton.knobs.runtime.launch_exit_hook.add(f)`, a method call the submission rules cannot tell from
    # any other), a compile hook, an autotuning listener. Watched as the student's, like a grid function.
    for owner, name, value in _settings_code():
        calls = getattr(value, "calls", None)
        if type(calls) is list:          # a chain of hooks (Triton 3.5 and later)
            if any(not _is_trusted(c) and not isinstance(c, _StudentCode) for c in calls):
                swap(value, "calls", [c if _is_trusted(c) or isinstance(c, _StudentCode) else _StudentCode(c, watcher)
                                      for c in calls])
        elif not _is_trusted(value) and not isinstance(value, _StudentCode):
            swap(owner, name, _StudentCode(value, watcher))
    try:
        yield
    finally:
        if token is not None:
            current.reset(token)
        for owner, name, value in reversed(swapped):
            setattr(owner, name, value)


def _settings_code():
    """(owner, name, value) for each callable, or chain of them, of the notebook's in Triton's settings that
    Triton calls during a launch: since Triton 3.4 the hooks and listeners of `triton.knobs` (launch,
    kernel load, JIT cache and compile hooks, autotuning and compilation listeners, a build function);
    before it, the same hooks as class attributes of CompiledKernel and JITFunction."""
    found = []
    for owner, name in _code_slots():
        value = getattr(owner, name, None)
        if value is None or isinstance(value, _StudentCode):
            continue
        calls = getattr(value, "calls", None)
        if type(calls) is list:
            if any(not _is_trusted(c) for c in calls):
                found.append((owner, name, value))
        elif callable(value) and not _is_trusted(value):
            found.append((owner, name, value))
    return found


_CODE_SLOTS = None


def _code_slots() -> list:
    """Where Triton's settings hold code (found once: a setting's place, not its value, is fixed)."""
    global _CODE_SLOTS
    if _CODE_SLOTS is None:
        import triton
        import triton.runtime.jit as jit
        slots = []
        for owner in _knob_groups():
            for name, value in vars(type(owner)).items():
                if name.startswith("_") or hasattr(value, "__set__") or \
                        isinstance(value, (types.FunctionType, property, staticmethod, classmethod)):
                    continue   # the settings read from the environment, and the class's own methods
                if value is None or callable(value) or type(getattr(value, "calls", None)) is list:
                    slots.append((owner, name))
        compiler = sys.modules.get("triton.compiler.compiler")
        for cls in (jit.JITFunction, getattr(compiler, "CompiledKernel", None)):
            for name, value in vars(cls).items() if cls is not None else ():
                if name.endswith("_hook") and not isinstance(value, types.FunctionType):
                    slots.append((cls, name))   # before Triton 3.4: None, or the hook
        _CODE_SLOTS = slots
    return _CODE_SLOTS


def _knob_groups() -> list:
    """The groups of `triton.knobs` (runtime, compilation, autotuning, ...); none before Triton 3.4."""
    import triton
    knobs = getattr(triton, "knobs", None)
    return [v for v in (vars(knobs).values() if knobs is not None else ())
            if type(v).__module__ == "triton.knobs" and type(v).__name__.endswith("_knobs")]


_CLASS_SLOTS = None   # (group, name) of the knobs that hold a class


def _settings_classes() -> str | None:
    """A class of the notebook's that Triton would make objects of inside its own work (a cache manager,
    set by `triton.knobs.cache.manager_class` or the environment variable that names one), or a driver of
    its own (`triton.runtime.driver.set_active`): what they run is not watched, so they are refused."""
    global _CLASS_SLOTS
    if _CLASS_SLOTS is None:
        _CLASS_SLOTS = [(owner, name) for owner in _knob_groups() for name, descriptor in vars(type(owner)).items()
                        if type(descriptor).__name__ == "env_class"]
    for owner, name in _CLASS_SLOTS:
        try:
            value = getattr(owner, name)
        except Exception as error:  # noqa: BLE001 - a variable naming no class: Triton fails on it too
            return f"Triton's setting {name} ({type(error).__name__})"
        if value is not None and not _library_class(value):
            return f"a class of the notebook's ({getattr(value, '__name__', type(value).__name__)}) as Triton's {name}"
    driver = getattr(sys.modules.get("triton.runtime.driver"), "driver", None)
    state = vars(driver) if hasattr(driver, "__dict__") else {}
    active = state.get("_active", state.get("active"))   # (`active` itself before Triton 3.4)
    if active is not None and not (_library_class(type(active)) or type(active).__module__.startswith("grader.")):
        return f"a driver of the notebook's ({type(active).__name__}) as Triton's active driver"
    return None


# GPU kernels that PyTorch runs for the operations any wrapper may use: filling an allocation, copying
# (contiguous, clone, a cast, a join), arange, memory copies and sets. They cannot compute an answer.
BOOKKEEPING_KERNELS = ("FillFunctor", "copy_kernel", "direct_copy", "elementwise_kernel_with_index",
                       "Memset", "Memcpy", "CatArrayBatchedCopy")
# Of the GPU time of a call, what other kernels may take: 10% of it plus 10 µs. An exercise's permitted
# PyTorch finish (cross-entropy's mean over rows, a sum of per-program partials) is a few small kernels
# of a few µs each at any size, while the Triton work gets faster with the GPU: on an H200 the reference
# cross-entropy's finish (a mean, a count, a division: about 8 µs) was 11% of its call. Work moved to
# cuBLAS or PyTorch at the timed sizes takes tens to hundreds of µs.
FOREIGN_GPU_SHARE = 0.10
FOREIGN_GPU_US = 10.0


def foreign_gpu_work(ran: list, launched: Counter, permitted=()) -> tuple:
    """(names, share of GPU time, share allowed) of the kernels in `ran` ((name, µs) in order, as a
    profiler saw the device run them) that are neither the student's Triton launches (`launched`, by
    kernel name), nor PyTorch's bookkeeping, nor library kernels the exercise permits (`permitted`, parts
    of their names). A Triton kernel named like a cuBLAS one accounts for its own launches only."""
    left = Counter(launched)
    names, foreign, total = set(), 0.0, 0.0
    for name, us in ran:
        total += us
        if left[name] > 0:
            left[name] -= 1
        elif not any(part in name for part in BOOKKEEPING_KERNELS + tuple(permitted)):
            names.add(name)
            foreign += us
    if not total:
        return [], 0.0, 1.0
    return sorted(names), foreign / total, FOREIGN_GPU_SHARE + FOREIGN_GPU_US / total


# Kernels registered for PyTorch's own operators when the notebook was set up (torch.library's record).
_builtin_operators = None
# Only aten: PyTorch's own modules add kernels to prims operators when they load (torch.compile does),
# and eager PyTorch runs aten's.
_TORCH_NAMESPACES = ("aten",)


def _operator_registrations() -> set:
    import torch.library
    return {key for key in getattr(torch.library, "_impls", ()) if key.split("/")[0] in _TORCH_NAMESPACES}


def remember_operators() -> None:
    global _builtin_operators
    if _builtin_operators is None:
        _builtin_operators = _operator_registrations()


def replaced_operators() -> list:
    """PyTorch's own operators that the notebook gave a kernel of its own since it was set up: such a
    kernel runs below the watcher (a `zeros_like` that adds, say), so the watch cannot vouch for it."""
    remember_operators()
    return sorted(_operator_registrations() - _builtin_operators)


def _note_replaced_operators(record) -> None:
    for key in replaced_operators():
        namespace, op = key.split("/")[:2]
        entry = f"{namespace}::{op} (PyTorch's own operator, replaced by the notebook)"
        if entry not in record.torch_ops:
            record.torch_ops.append(entry)


# A tensor printed during a watched call: at most this many values in full, else a summary of its corners.
PRINTED_IN_FULL = 32


def _summary(tensor, original_repr, watcher) -> str:
    """A debugging print during a graded call: a summary (two values at each end of each dimension) that
    costs nothing, or a small tensor in full, counted as values read out. Whatever print options the
    notebook set, the text never holds the whole of a large tensor."""
    options = torch._tensor_str.PRINT_OPTS
    saved = (options.threshold, options.edgeitems)
    if tensor.numel() <= PRINTED_IN_FULL:
        watcher.read_out("Tensor.__repr__", tensor.numel())
    if type(tensor) not in _TENSOR_TYPES:   # a subclass's methods, which the formatting calls, are not run
        tensor = torch.Tensor.as_subclass(tensor, torch.Tensor)
    watcher.in_triton += 1    # PyTorch's formatting (abs, max, ...) is not the student's computation
    try:
        torch.set_printoptions(threshold=PRINTED_IN_FULL, edgeitems=2)
        return original_repr(tensor)
    finally:
        torch.set_printoptions(threshold=saved[0], edgeitems=saved[1])
        watcher.in_triton -= 1


class _Watch:
    """What the watch in force sees: its record, its dispatch mode and the caller's stream."""

    def __init__(self, record, watcher, compile_ahead, ops):
        self.record, self.watcher = record, watcher
        self.compile_ahead = compile_ahead   # not while timing: its calls pay for nothing but the launch
        self.ops = ops                       # PyTorch's ops watched (not while timing)
        # Triton launches on torch's current stream: one that differs from the caller's is a side stream.
        self.caller_stream = torch.cuda.current_stream() if torch.cuda.is_available() else None


_active = None        # the _Watch in force, or None outside watch()


class Refused(ValueError):
    """A launch the guard stopped because the call has already broken a rule that its record holds: the
    verdict is the rule's (checks.refuse), not the error's."""


# Whether Triton's interpreter may work now: inside an interpreted launch (its programs, its own handling of
# the arguments), not in the student's functions it calls there (a grid function, a hook: _StudentCode).
_interpreter_open = False


@contextmanager
def _interpreter_opened(open_: bool):
    global _interpreter_open
    outer, _interpreter_open = _interpreter_open, open_
    try:
        yield
    finally:
        _interpreter_open = outer


def _builder_wrapper(name: str, original):
    """One of the interpreter's operations (InterpreterBuilder.create_*: a load, a store, an exp): the
    work of a kernel's programs. Called elsewhere during a watched call (tl.* or the builder itself in a
    grid function, a hook or the host code) it reads and writes any memory by address and computes with
    NumPy, which only the CPU interpreter makes possible: refused."""
    def operation(self, *args, **kwargs):
        state = _active
        if state is not None and name == "create_print":
            # A print found where it runs, however the kernel reached it (a name the source's reading does
            # not know: gpu_compile.prints): the call fails for it, whatever the notebook does with the text
            if not state.record.prints:
                state.record.prints.append("a kernel prints (tl.device_print, here under another name)")
        if state is not None and not _interpreter_open:
            said = (f"Triton's interpreter was used outside a kernel's programs (InterpreterBuilder.{name}: tl.* "
                    f"in a grid function, a hook or host code)")
            if said not in state.record.not_triton:
                state.record.not_triton.append(said)
            raise Refused(said)
        return original(self, *args, **kwargs)
    return operation


def _python_number(value):
    """A NumPy number as the Python number it holds (tuples of them too); anything else as it is."""
    if type(value) is tuple:
        return tuple(_python_number(v) for v in value)
    if (type(value).__module__ or "") == "numpy" and hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        return value.item()
    return value


@contextmanager
def _as_compiled(executor, args, kwargs, record):
    """An interpreted launch whose programs run only if Triton's compiler takes the kernel as it is when they
    start (gpu_compile.source_for_compiler, gpu_compile.frontend_refusals): checked before the first
    program, once the grid function and the hooks have run, and the globals it read the same objects before
    every other. What is refused goes to record.not_triton, and the launch stops (Refused)."""
    try:
        from triton.runtime import interpreter
        builder = interpreter.interpreter_builder
        # Triton's own, not what a launch around this one put in its place: a launch inside the grid
        # function would otherwise have made the outer one's check before the grid function was done.
        start_program = type(builder).set_grid_idx.__get__(builder)
    except (ImportError, AttributeError):
        yield
        return
    # The function the programs run, and the student's function it is the interpreter's rewrite of (not the
    # kernel its name is bound to now: that may be another)
    executed = getattr(executor, "fn", None)
    if not isinstance(executed, types.FunctionType):   # (a bound method, a wrapped partial: no source to compile)
        said = f"kernel `{getattr(executed, '__name__', '?')}` is not a plain function defined with `def`"
        if said not in record.not_triton:
            record.not_triton.append(said)
        raise Refused(said)
    kept = getattr(interpreter.InterpretedFunction, "rewritten_fn", {})
    kernel = gpu_compile._original_of(executed, kept)
    name = kernel.__name__
    # Every argument the programs get, the defaults the launch did not pass included (the executed
    # function's: a default is evaluated when its `def` runs, and the interpreter's rewrite ran it again)
    try:
        signature = inspect.signature(executed)
        bound = signature.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in signature.parameters})
        bound.apply_defaults()
    except (TypeError, ValueError):
        yield     # arguments that do not bind: the launch fails as it would without this
        return
    options = {k: v for k, v in kwargs.items() if k in ("num_warps", "num_stages")}
    specs = [{"kernel": name, "args": [],
              "kwargs": {k: gpu_compile._describe(v) for k, v in {**bound.arguments, **options}.items()}}]
    checked = []

    def refuse(why: str):
        said = f"kernel `{name}` {why}"
        if said not in record.not_triton:
            record.not_triton.append(said)
        raise Refused(said)

    def not_compiled(kernel_name: str, message: str):
        if (kernel_name, message) not in record.not_compiled:
            record.not_compiled.append((kernel_name, message))
        raise Refused(f"kernel `{kernel_name}` is refused by Triton's compiler")

    swapped = []    # (where, name, what it held) of the as-compiled copies put in place for the launch
    rewriter = getattr(interpreter, "FunctionRewriter", None)

    def swap(where: dict, key, value, reads: list):
        swapped.append((where, key, where.get(key, gpu_compile._MISSING)))
        where[key] = value
        reads.append((where, key, value))   # (and so it must stay until the launch ends)

    def stand_in_for_the_launch(fn, compiler_def, source, calls, values, transformer, jit_objects, reads):
        """A helper: for the launch the interpreter calls a stand-in that runs it, for each call, as the
        compiler compiled it for a call like that one (gpu_compile.dispatching: what it did not compile made
        to raise, each expression checked to give a value it gave the compiler), in place of its kept rewrite
        (Triton 3.4 on) and of its @triton.jit object's function, which the interpreter calls itself for a
        tl.reduce or tl.associative_scan combine function (and, before 3.4, for every helper)."""
        as_run = gpu_compile.dispatching(fn, compiler_def, source, calls, kept.get(fn, fn), transformer, values)
        if rewriter is not None:
            reads[:] = [r for r in reads if not (r[0] is kept and r[1] is fn)]
            swap(kept, fn, as_run, reads)
        as_written = gpu_compile.dispatching(fn, compiler_def, source, calls, fn, None, values) \
            if transformer is not None and jit_objects else as_run
        for jit_object in jit_objects:
            swap(vars(jit_object), "fn", as_written, reads)
        if jit_objects and rewriter is not None:
            swap(kept, as_written, as_run, reads)   # (its calls look up the rewrite of the function it holds)

    def before_each_program(*where):
        if not checked:
            handed = [v for v in bound.arguments.values() if gpu_compile._jit_fn(v) is not None]
            module, refused, reads, reached = gpu_compile.source_for_compiler(kernel, handed)
            # the interpreter's rewrites of the helpers, made now from the source as it reads (not at their
            # first call), and kept as they are for the rest of the launch
            if rewriter is not None and not refused:
                for fn in reached:
                    if fn not in kept:
                        with _interpreter_opened(False):   # (its defaults' expressions run: the student's code)
                            kept[fn] = rewriter(fn).rewrite_ast()
                    if fn is not kernel:   # a helper runs with the defaults the compiler is told of: its def's
                        kept[fn].__defaults__, kept[fn].__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
                reads = reads + [(kept, fn, kept.get(fn, gpu_compile._MISSING)) for fn in reached]
            checked.append(reads)
            if refused:
                refuse("reads " + ", ".join(refused[:3]))
            stale = gpu_compile.runs_as_read(executed, reached)
            if stale:
                refuse(f"runs code that is not its source as it reads now ({', '.join(f'`{n}`' for n in stale[:3])}: "
                       f"a file or a cell changed after the interpreter read it); run its definition again")
            failures = gpu_compile.frontend_refusals(module, specs)
            if failures:
                not_compiled(failures[0][0] or name, failures[0][1])
            # what the compiler did not compile (a branch it decided at compile time) raises if run, and an
            # expression that gives another value than it gave the compiler stops the launch
            visited = gpu_compile.frontend_visited(module, specs)
            values = gpu_compile.frontend_values(module, specs)
            jit_objects = [v for v in [*(value for _, _, value in reads), *handed] if gpu_compile._jit_fn(v) is not None]
            transformer = getattr(rewriter, "ast_transformer", None)
            for fn, source in reached.items():
                compiler_def = gpu_compile.compiler_def(fn, source)
                fdef = ast.parse(compiler_def).body[0]
                calls, gave = visited.get(fn.__name__, {}), values.get(fn.__name__, {})
                if fn is kernel:
                    poison = gpu_compile.uncompiled(fdef, calls.get("launch", frozenset()))
                    checks = gave.get("launch", {})
                    if poison or checks:
                        swap(vars(executor), "fn", gpu_compile.as_compiled(fn, compiler_def, source, poison, executor.fn,
                                                                           transformer, checks), reads)
                elif not calls or gave or any(gpu_compile.uncompiled(fdef, nodes) for nodes in calls.values()):
                    objects = list({id(v): v for v in jit_objects if gpu_compile._jit_fn(v) is fn}.values())
                    stand_in_for_the_launch(fn, compiler_def, source, calls, gave, transformer, objects, reads)
        else:
            changed = gpu_compile.reads_changed(checked[0])
            if changed:
                names = ", ".join(f"`{getattr(n, '__name__', n)}`" for n in changed[:3])
                refuse(f"reads {names}, bound to another object while it ran (the compiler sees a kernel's "
                       f"globals and code once)")
        return start_program(*next_program(*where))

    # A GPU runs a launch's programs at once, in no set order; Triton's interpreter runs them one after the
    # other, in order. So that no answer depends on that order (a red team's second half of the grid read
    # what its first half had stored: uninitialised memory on a GPU), a checked launch runs its programs in
    # an order drawn anew for each launch, that no notebook can know beforehand.
    order: list = []

    def next_program(x, y, z):
        nx, ny, nz = builder.grid_dim
        if not order:
            order.extend(range(nx * ny * nz))
            random.SystemRandom().shuffle(order)
        if len(order) != nx * ny * nz - (x * ny * nz + y * nz + z):
            return x, y, z    # (not the interpreter's own walk through the grid: leave it as it is)
        drawn = order.pop()
        return drawn // (ny * nz), drawn // nz % ny, drawn % nz

    around = vars(builder).get("set_grid_idx")   # a launch's around this one (inside its grid function)
    builder.set_grid_idx = before_each_program
    # No collection while the programs run: an object's __del__ that a collection calls is code that could
    # rebind a global between two calls of one program, where no check stands.
    collecting = gc.isenabled()
    gc.disable()
    try:
        try:
            yield
        except Exception as error:
            stopped = gpu_compile.not_compiled_line(error)
            if stopped is None:
                raise
            why, line = stopped
            if why == gpu_compile.NOT_COMPILED:
                said = (f"kernel `{name}` ran Python that Triton's compiler did not compile ({line}: a branch the "
                        f"compiler decided the other way when it compiled, where the interpreter's objects differ)")
            else:
                said = (f"kernel `{name}` computed, at {line}, another value than Triton's compiler did when it "
                        f"compiled that line (Python that tells the interpreter's objects from the compiler's: "
                        f"what a GPU runs is what the compiler computed)")
            if said not in record.not_triton:
                record.not_triton.append(said)
            raise Refused(said) from error
        if checked and gpu_compile.reads_changed(checked[0]):   # (during the last program)
            refuse("read a global that was bound to another object while it ran")
    finally:
        for where, key, held in reversed(swapped):
            if held is gpu_compile._MISSING:
                where.pop(key, None)
            else:
                where[key] = held
        if collecting:
            gc.enable()
        if around is not None:
            builder.set_grid_idx = around
        else:
            vars(builder).pop("set_grid_idx", None)

# Ways out of PyTorch that no ATen op shows: the data as a NumPy array, a Python list, raw storage bytes
# (also what pickling or torch.save reads), element-wise Python callbacks (map_, apply_), to compute with
# there (np.add(x, y) goes through __array__, np.from_dlpack(x) through __dlpack__).
EXITS = ("numpy", "tolist", "__array__", "__dlpack__", "untyped_storage", "storage", "map_", "map2_", "apply_",
         "__repr__")
CALLBACKS = ("map_", "map2_", "apply_")   # (a red team ran PyTorch's whole loss inside one: none is honest)


def _launch_wrapper(original, counts: bool, tritons: bool, entry: bool):
    """A launch entry point of Triton's, watched while a watch is in force. Its settings live in this
    closure, not in keyword arguments a caller could pass."""
    def run(self, *args, **kwargs):
        if _compiling_only:
            return _compile_launch(self, original, args, kwargs)
        state = _active
        if state is None:
            return original(self, *args, **kwargs)
        record, watcher = state.record, state.watcher
        # Where PyTorch's ops are watched, none may hide in what Triton calls inside its own work. Not while
        # timing (ops=False), where no op is watched and any the GPU runs is timed: walking an autotuner's
        # state took 0.3 to 0.6 ms a launch, which the clock took for the student's (measure_speed).
        foreign = (_students_objects_in(self) or _settings_classes()
                   or (self.odd() if isinstance(self, _HandLaunch) else None)) if entry and state.ops else None
        if foreign:
            record.torch_ops.append(f"{foreign}: Triton calls its methods inside its own work, where the grader "
                                    f"does not watch them (use Triton's and Python's own types)")
        if entry:        # also inside Triton: an autotune config's or a heuristic's values arrive here
            for name in _odd_arguments(args, kwargs):
                record.torch_ops.append(f"a kernel argument of type {name} (pass tensors and numbers)")
            past = _past_its_tensor([*args, *kwargs.values()])
            if past:   # not launched: its copies would read or write another tensor's memory, or fault
                record.overreaching_descriptors += past
                raise ValueError(f"{past[0]}: not launched. {DESCRIPTOR_RULE}")
            args = _frozen_descriptors(args)
            kwargs = {k: _frozen_descriptors(v) for k, v in kwargs.items()}
        if record.touched is not None:
            record.note_storages((args, kwargs))
        if record.reached is not None and not watcher.in_triton:
            record.note_reached((args, kwargs))
        # (at each launch, not at the student's call: an autotuner's config and a heuristic's values arrive
        # here, and a red team handed its mask through them)
        if counts and record.launch_bits is not None and not kwargs.get("warmup", False):
            kernel = _function_of(self)
            watcher.handed_to_launch(kernel, (args, {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")},
                                              dict(gpu_compile.globals_read(kernel))))
            grid = kwargs.get("grid", getattr(self, "grid", None))
            note_grid = lambda sizes: watcher.handed_to_launch((kernel, "grid"), sizes)   # noqa: E731
            if not callable(grid):
                note_grid(grid)
            elif "grid" in kwargs:   # a grid function's sizes, once it runs
                kwargs["grid"] = _StudentCode(grid, watcher, noted=note_grid, grid=True)
            elif not isinstance(grid, _StudentCode):   # the interpreter's executor holds it
                self.grid = _StudentCode(grid, watcher, noted=note_grid, grid=True)
        # With linear_above, what the launch wrote and copied (CallRecord.after_launch): compared once
        # around the outermost entry (an autotuner's benchmarking, its launch in the end), as it was
        # before and after; not while memory is measured, where copies of the tensors would count (that
        # call's correctness is checked on its own). Elsewhere each tensor is a value of its own.
        before = None
        if record.linear_above is not None and not kwargs.get("warmup", False):
            if entry and not watcher.in_triton and record.touched is None and record.follow_copies:
                with _unwatched(watcher):
                    before = record.before_launch((args, kwargs))
            elif counts and (record.touched is not None or not record.follow_copies):
                record.launched_with((args, kwargs))
        if counts and not kwargs.get("warmup", False):
            record.launches += 1
            interpreted = type(self).__name__ == "GridExecutor"
            if interpreted and len(record.interpreted) < 16:
                record.interpreted += gpu_compile.launch(self, args, kwargs)
            kernel = gpu_compile.kernel_of(self) if interpreted else self
            found = (("not_triton", gpu_compile.not_triton(kernel) if interpreted else []),
                     ("prints", gpu_compile.prints(kernel))) if kernel is not None else ()
            for kind, whats in found:
                for what in whats:
                    said = f"kernel `{getattr(kernel, '__name__', '?')}` calls {what}"
                    if said not in getattr(record, kind):
                        getattr(record, kind).append(said)
            record.kernels[getattr(self, "__name__", None) or type(self).__name__] += 1
            if state.caller_stream is not None and (torch.cuda.current_stream() != state.caller_stream or kwargs.get(
                    "stream", state.caller_stream.cuda_stream) != state.caller_stream.cuda_stream):
                record.side_streams += 1   # (a stream handed to a compiled kernel's launch by hand, too)
        if callable(kwargs.get("grid")) and not isinstance(kwargs["grid"], _StudentCode):
            kwargs["grid"] = _StudentCode(kwargs["grid"], watcher, grid=True)
        depth = watcher.in_triton
        watcher.in_triton = depth + 1 if tritons else 0
        try:
            tuning = nullcontext()
            if state.compile_ahead and _is_autotuner(self):
                _compile_candidates(self, args, kwargs)
                tuning = _tuned_quickly(self)
            try:
                compiled_source = nullcontext()
                if type(self).__name__ == "GridExecutor":
                    # A NumPy number is handed over as Python's: the compiler is told of a number, and the
                    # kernel must see one too (a red team branched on `hasattr(SCALE, "sum")`)
                    args = tuple(_python_number(a) for a in args)
                    kwargs = {k: _python_number(v) for k, v in kwargs.items()}
                    compiled_source = _as_compiled(self, args, kwargs, record)
                with _hooks_watched(self, watcher), tuning, compiled_source, _interpreter_opened(
                        type(self).__name__ == "GridExecutor"):
                    launched = original(self, *args, **kwargs)
            except Exception as error:
                # An interpreted kernel's error says what its Python saw (an assert's message, the element a
                # load went past), and whether it raised is a bit: code that catches them reads the kernel's
                # values out a bit at a time. Where the student's code goes on, the call is refused (refuse).
                # (not one before the body ran: arguments that do not bind, a version fallback's TypeError)
                if type(self).__name__ == "GridExecutor" and not depth and type(error).__name__ == "InterpreterError":
                    record.launch_errors.append(f"kernel `{getattr(self.fn, '__name__', '?')}` raised "
                                                f"{type(error).__name__}")
                raise
            if counts and not kwargs.get("warmup", False):
                _note_compiled(record, launched)
                if record.guards and type(self).__name__ != "GridExecutor":   # the interpreter checks each access
                    named = {**dict(zip(getattr(self, "arg_names", ()), args)), **kwargs}
                    kernel = getattr(self, "__name__", "?")
                    if depth:   # inside an autotuner's run: looked at once it returns
                        record.unlooked.setdefault((kernel, tuple(_addresses(named))), (kernel, named))
                    else:
                        record.look_at_guards(kernel, named)
            if not depth and record.unlooked:
                for kernel, named in record.unlooked.values():
                    record.look_at_guards(kernel, named)
                record.unlooked.clear()
            if before is not None:
                with _unwatched(watcher):
                    record.after_launch(before)
            return launched
        finally:
            watcher.in_triton = depth
    return run


def _students_objects_in(launcher) -> str | None:
    """An object of the student's own class that Triton's autotuner or heuristics would call methods of
    inside their run, which counts as Triton's work and is not watched; None when there is none. Red
    teams computed the softmax with torch in a subclass of Autotuner (prune_configs), of Config
    (all_kwargs), of a config's or a heuristic's dict of values (keys, items), of the list of autotune
    keys or argument names (__iter__, copy), in a float of its own as the pruning's top_k (__le__), in a
    constexpr's value hashed as a key, and in an object of its own wrapped as the kernel (run). So an
    autotuner or heuristic must be Triton's own, wrap a @triton.jit kernel, and hold plain data all the
    way down (_odd_part; its hooks may be functions: Triton's calls of them are watched)."""
    import triton.runtime.autotuner as at
    if not isinstance(launcher, (at.Autotuner, at.Heuristics)):
        return None
    if type(launcher) not in (at.Autotuner, at.Heuristics):
        base = "Autotuner" if isinstance(launcher, at.Autotuner) else "Heuristics"
        return f"a subclass of Triton's {base} ({type(launcher).__name__})"
    state = vars(launcher)
    inner = state.get("fn")
    while type(inner) in (at.Autotuner, at.Heuristics):
        inner = vars(inner).get("fn")
    if not _is_kernel(inner):
        return f"a {type(launcher).__name__} around a {type(inner).__name__}, not a @triton.jit kernel"
    for name, value in state.items():
        odd = _odd_part(value, functions=True) if name != "fn" else None
        if odd:
            return f"{type(launcher).__name__} {name} holding a {odd}"
    return None


def _addresses(named: dict) -> list:
    """The storage addresses of a launch's tensor arguments (launches on the same tensors are looked at once)."""
    return [_storage(v).data_ptr() for v in named.values() if isinstance(v, torch.Tensor)]


@contextmanager
def _unwatched(watcher):
    """The guard's own work on the student's tensors: not the student's ops."""
    watcher.in_triton += 1
    try:
        yield
    finally:
        watcher.in_triton -= 1


def _note_compiled(record, kernel) -> None:
    """A launched kernel's resource usage, as the driver loaded it (Triton's CompiledKernel: n_regs, and
    n_spills, which Triton counts in 4-byte words of local memory), for the speed feedback."""
    try:
        name = str(kernel.metadata.name)
        if name not in record.compiled and len(record.compiled) < 8:
            record.compiled[name] = {"registers": int(kernel.n_regs), "local_bytes": 4 * int(kernel.n_spills),
                                     "num_warps": int(kernel.metadata.num_warps),
                                     "shared": int(kernel.metadata.shared)}
    except Exception:   # noqa: BLE001 - the interpreter's launches, another Triton: no figures, nothing else
        pass


def _is_autotuner(launcher) -> bool:
    import triton.runtime.autotuner as at
    return isinstance(launcher, at.Autotuner)


_compile_pool = None   # the threads that compile autotune candidates (the grader's, made on first use)
_compiled_keys = {}    # id(autotuner) -> (autotuner, the tuning keys compiled ahead for it)
_jit_run = None        # JITFunction.run as Triton defines it (the wrapper counts launches; this launches none)


def _compile_candidates(autotuner, args, kwargs) -> None:
    """Compile every autotune candidate of a new key at once, before Triton benchmarks them one by one.

    A correctness check calls the student's function on shapes that each specialize the kernel anew, and
    Triton's autotuner compiles its candidates one after the other: compiling, not running, is most of
    a graded notebook's time (day 3's matmul cases: 51 s from an empty Triton cache, 7 s from a full one,
    on an H200). Triton's own asynchronous compilation (Triton 3.6 and later) compiles them side by
    side; what it compiles, and the benchmark that follows, are exactly what the autotuner would do.
    Only the compiler runs in those threads: the student's code (a pre-run hook, a heuristic) would
    run there unwatched, so a kernel with any is left to the autotuner.
    """
    try:
        import triton.runtime._async_compile as async_compile
        import triton.runtime.jit as jit
    except ImportError:      # before Triton 3.6: candidates compile one by one, as in the notebook
        return
    fn = autotuner.fn
    if (len(autotuner.configs) < 2 or type(fn) is not jit.JITFunction or fn.pre_run_hooks
            or _new_key(autotuner, args, kwargs) is None or async_compile.active_mode.get() is not None):
        return
    try:
        with async_compile.AsyncCompileMode(_compiler_threads(), ignore_errors=True):
            for config in autotuner.configs:   # a candidate that does not compile fails again, as usual, below
                _jit_run(fn, *args, **{**kwargs, **config.all_kwargs(), "grid": (1,), "warmup": True})
    except Exception:  # noqa: BLE001 - the autotuner's own run below reports whatever is wrong
        pass


@contextmanager
def _tuned_quickly(autotuner):
    """An autotuner that would time its candidates with Triton's default benchmark (about 125 ms each)
    times them for a few milliseconds instead, while a correctness check calls the student's function.

    A check's cases are a dozen new tuning keys, each with every candidate benchmarked: once compiling
    is done ahead, that is most of a check's time (day 4's attention: 16 keys x 6 candidates). The
    candidate chosen is still the student's fastest, measured less precisely; every candidate is the
    student's code, so whichever is chosen must be right. Speed checks tune exactly as Triton does, and
    an autotuner given its own benchmark function runs it (but one in CUDA graphs: _benchmarks_in_graphs).
    """
    own = vars(autotuner)
    if own.get("_do_bench", "absent") is not None and not _benchmarks_in_graphs(autotuner):
        yield   # Triton before 3.6, or the student's benchmark
        return
    with _benchmark_replaced(autotuner, _quick_bench):
        yield


def _benchmarks_in_graphs(autotuner) -> bool:
    """Whether an autotuner times its candidates with Triton's CUDA-graph benchmark
    (triton.autotune(use_cuda_graph=True), or do_bench=triton.testing.do_bench_cudagraph): in a correctness
    check it tunes quickly, as one with Triton's default benchmark does. (Under watch() that benchmark
    times plainly on the caller's stream however it is reached: _graph_bench_wrapper.)"""
    import triton.testing
    own = vars(autotuner)
    flag = own.get("use_cuda_graph")
    # (by type and identity: an object of the notebook's would run its __bool__ or __eq__ here, unwatched)
    return type(flag) in (bool, int) and bool(flag) or any(
        own.get(name) is triton.testing.do_bench_cudagraph for name in ("_do_bench", "do_bench"))


@contextmanager
def _benchmark_replaced(autotuner, bench):
    """The autotuner times its candidates with `bench` inside the block. Triton 3.6 keeps the benchmark in
    a cached property (in the instance's dict once read), later versions read `_do_bench` each time, and
    those before 3.6 set `do_bench` in the instance: both are set, and both put back as they were."""
    own = vars(autotuner)
    kept = {name: own.get(name, _NOTHING) for name in ("_do_bench", "do_bench")}
    own["_do_bench"] = own["do_bench"] = bench
    try:
        yield
    finally:
        for name, value in kept.items():
            if value is _NOTHING:
                own.pop(name, None)
            else:
                own[name] = value


_NOTHING = object()


def _quick_bench(kernel_call, quantiles=None):
    import triton.testing
    return triton.testing.do_bench(kernel_call, warmup=1, rep=5, quantiles=quantiles)


def _compiler_threads():
    global _compile_pool
    if _compile_pool is None:
        from concurrent.futures import ThreadPoolExecutor
        _compile_pool = ThreadPoolExecutor(min(32, len(os.sched_getaffinity(0))), thread_name_prefix="grader-compile")
    return _compile_pool


_compiling_only = False   # inside compile_only(): a launch compiles its kernel and runs nothing


@contextmanager
def compile_only():
    """Inside this block a Triton launch hands its kernel to the compiler threads and runs nothing; the
    block ends when every compile has (yields False, and changes nothing, where Triton cannot compile
    asynchronously: before 3.6, or in the CPU interpreter, which compiles nothing).

    A graded check calls the student's function on a dozen or more cases, each a new specialization of
    its kernels, and each compiled in turn when its case runs: on a GPU most of a graded notebook's time
    (day 4's attention: 39 s of the cell's 40 on an H200, from an empty cache). Calling the function on
    every case in here first, with inputs of the cases' shapes and values of no importance, compiles all
    of them side by side; the cases then find their kernels compiled. Nothing computed in here is looked
    at: a function that reads back a value its (never run) kernel would have written reads garbage, and
    the real call decides. An autotuned kernel has every candidate compiled and none benchmarked.
    """
    global _compiling_only
    try:
        import triton.runtime._async_compile as async_compile
    except ImportError:
        async_compile = None
    if (async_compile is None or _active is not None or _compiling_only or not torch.cuda.is_available()
            or os.environ.get("TRITON_INTERPRET") == "1" or async_compile.active_mode.get() is not None):
        yield False
        return
    _compiling_only = True
    try:
        with async_compile.AsyncCompileMode(_compiler_threads(), ignore_errors=True):
            yield True
    finally:
        _compiling_only = False


def _compile_launch(launcher, original, args, kwargs):
    """A launch inside compile_only(): what it would compile goes to the compiler threads."""
    import triton.runtime.autotuner as at
    import triton.runtime.jit as jit
    if isinstance(launcher, jit.JITFunction):
        return original(launcher, *args, **{**kwargs, "warmup": True})
    if isinstance(launcher, at.Autotuner):
        named = dict(zip(launcher.arg_names, args))
        for config in launcher.configs:
            try:
                if config.pre_hook:   # e.g. a tensor descriptor's block shape, part of the specialization
                    config.pre_hook({**named, **kwargs, **config.all_kwargs()})
                launcher.fn.run(*args, **{**kwargs, **config.all_kwargs(), "warmup": True})
            except Exception:  # noqa: BLE001 - a candidate that fails here fails again, reported, when tuned
                pass
        return None
    return original(launcher, *args, **kwargs)   # a heuristic: adds its values and reaches JITFunction.run


def _new_key(autotuner, args, kwargs):
    """The autotuner's cache key for these arguments (as Triton makes it) if nothing is tuned for it yet,
    and the key was not compiled for already; else None."""
    named = {**dict(zip(autotuner.arg_names, args)), **kwargs}
    named = {k: v for k, v in named.items() if k in autotuner.arg_names}
    key = tuple([named[k] for k in autotuner.keys if k in named] +
                [str(v.dtype) for v in named.values() if hasattr(v, "dtype")])
    # Kept by the guard, not on the autotuner: what the student's object holds is checked to be Triton's
    # own (_students_objects_in), and a set of the guard's there would be refused as the student's. The
    # autotuner is held too, so that its id names no other object later.
    compiled = _compiled_keys.setdefault(id(autotuner), (autotuner, set()))[1]
    if key in autotuner.cache or key in compiled:
        return None
    compiled.add(key)
    return key


def _exit_wrapper(name: str, original):
    def leave(self, *args, **kwargs):
        state = _active
        if state is None or state.watcher.in_triton:
            return original(self, *args, **kwargs)   # outside a graded call, or the interpreter's own
        watcher = state.watcher
        if name == "__repr__":
            return _summary(self, original, watcher)
        if name in CALLBACKS:   # a Python function per element; what it does is watched as the student's own
            state.record.torch_ops.append(f"Tensor.{name} (a Python function run on each element: computing "
                                          f"outside Triton)")
            return original(self, *args, **kwargs)
        # What can be reached through the result: for a NumPy array or a DLPack capsule, which share the
        # tensor's memory, all of its storage (a view of one element still shares it, and NumPy's
        # as_strided widens it).
        shared = name in ("numpy", "__array__", "__dlpack__", "untyped_storage", "storage")
        watcher.read_out(f"Tensor.{name}", max(self.numel(), _storage_elements(self) if shared else 0))
        watcher.in_triton += 1      # what PyTorch does to convert a tensor is not the student's computation
        try:
            return original(self, *args, **kwargs)
        finally:
            watcher.in_triton -= 1
    return leave


# Ways into PyTorch that no ATen op shows: a tensor or storage over memory PyTorch did not allocate
# (torch.tensor, torch.from_numpy and torch.as_tensor show as aten.lift_fresh)
ENTRIES = ((torch, "frombuffer"), (torch, "from_dlpack"), (torch.utils.dlpack, "from_dlpack"), (torch, "from_file"),
           (torch.UntypedStorage, "from_buffer"), (torch.UntypedStorage, "from_file"), (torch, "asarray"))


def _entry_wrapper(what: str, original):
    def enter(*args, **kwargs):
        state = _active
        if state is None or state.watcher.in_triton:
            return original(*args, **kwargs)
        source = args[0] if args else next(iter(kwargs.values()), None)
        if not _plain_source(source):
            # PyTorch reads the notebook's object (its __len__, __getitem__, ...) to convert it: watched
            state.record.torch_ops.append(f"{what} of a {type(source).__name__} (convert tensors, NumPy arrays, "
                                          f"bytes or lists of numbers)")
            return original(*args, **kwargs)
        state.watcher.in_triton += 1
        try:
            made = original(*args, **kwargs)
        finally:
            state.watcher.in_triton -= 1
        if args and isinstance(args[0], torch.Tensor):   # asarray of a tensor: a view or a copy, not the host's
            return made
        elements = made.nbytes() if isinstance(made, torch.UntypedStorage) else \
            made.numel() if isinstance(made, torch.Tensor) else HOST_ELEMENTS + 1
        state.watcher.put_in(what, elements)
        return made
    return enter


def _plain_source(source) -> bool:
    """What a way into PyTorch may convert without the conversion counting as the student's code: memory
    of Python's, NumPy's or PyTorch's own types, a file's name, or plain numbers."""
    kind = type(source)
    if kind in (bytes, bytearray, memoryview, str, torch.UntypedStorage) or kind in _TENSOR_TYPES:
        return True
    if kind.__module__ == "numpy" and kind.__name__ == "ndarray":
        return source.dtype.kind != "O"
    return _odd_part(source) is None


def _poison_grown(storage, before: int, dtype=torch.uint8) -> None:
    """Poison (as `dtype`) what a resize added to a storage past its first `before` bytes, as fresh
    allocations are poisoned: that memory holds whatever was there last, and on a GPU the caching
    allocator hands a freed block back as it was (a dropout forward's mask, freed, found by its backward)."""
    size = torch.empty((), dtype=dtype).element_size()
    start = -(-before // size)
    count = storage.nbytes() // size - start
    if count > 0:
        poison_(torch.empty(0, dtype=dtype, device=storage.device).set_(storage, start, (count,)))


def _storage_resize_wrapper(original):
    """UntypedStorage.resize_ (which no ATen op shows), poisoning what it adds while a watch poisons."""
    def resize_(self, *args, **kwargs):
        state = _active
        if state is None or state.watcher.in_triton or not state.watcher.poison:
            return original(self, *args, **kwargs)
        before = self.nbytes()
        resized = original(self, *args, **kwargs)
        with _unwatched(state.watcher):
            _poison_grown(self, before)
        return resized
    return resize_


def _storage_elements(tensor) -> int:
    try:
        return torch._C.TensorBase.untyped_storage(tensor).nbytes() // max(tensor.element_size(), 1)
    except (RuntimeError, NotImplementedError):
        return tensor.numel()


def _handoff_wrapper(what: str, original):
    def handoff(*args, **kwargs):
        state = _active
        if state is not None and not state.watcher.in_triton:
            state.record.torch_ops.append(f"{what} (work in another thread, which the grader does not watch)")
        return original(*args, **kwargs)
    return handoff


def _graph_replay_wrapper(original):
    """A CUDA graph's replay, counted (CallRecord.graph_replays): it runs again the kernels captured
    earlier, which no launch, op or allocation of the call shows. What a graph computes (PyTorch's
    kernels as well as Triton's) and the memory it keeps in its private pool would go unseen."""
    @functools.wraps(original)
    def replay(self, *args, **kwargs):
        state = _active
        if state is not None and not state.watcher.in_triton:
            state.record.graph_replays += 1
        return original(self, *args, **kwargs)
    return replay


def _graph_bench_wrapper(original):
    """triton.testing.do_bench_cudagraph, which times a function by capturing it in a CUDA graph on a stream
    of its own and replaying that. Under watch() the capture fails (the guard's own work is not capturable)
    and the function's launches count as another stream's, yet an autotuner that benchmarks this way is
    honest, however it asks for it: `use_cuda_graph=True`, `do_bench=` the function, a partial or a lambda
    around it, or a benchmark of the notebook's that calls it. So there it times with
    triton.testing.do_bench on the caller's stream (the same repetitions, quantiles and return mode): the
    candidate chosen is still the fastest, by another clock. Outside watch() it is Triton's."""
    import triton.testing
    signature = inspect.signature(original)
    plain = inspect.signature(triton.testing.do_bench).parameters

    @functools.wraps(original)
    def do_bench_cudagraph(*args, **kwargs):
        if _active is None:
            return original(*args, **kwargs)
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return original(*args, **kwargs)   # (its own error for arguments it does not take)
        bound.apply_defaults()
        return triton.testing.do_bench(**{name: value for name, value in bound.arguments.items() if name in plain})
    return do_bench_cudagraph


def _graph_classes() -> list:
    """The classes whose `replay` runs a CUDA graph: torch.cuda.CUDAGraph, and the compiled class beneath
    it (torch._C._CUDAGraph, which a CPU build replaces by a stand-in without one)."""
    import torch.cuda.graphs
    return [cls for cls in (torch.cuda.graphs.CUDAGraph, getattr(torch._C, "_CUDAGraph", None))
            if cls is not None and "replay" in vars(cls)]


# (the process, the threads that ran Python in it when grading began there: Jupyter's own)
_threads_before: tuple = (None, frozenset())
# Whether a thread left running fails a call: in a kernel being graded (integrity.seal turns it on). A
# student's own checks, and a process that also runs the grader's side (the tests), start threads of
# their own (a checker, Jupyter's clients) that this cannot tell from a notebook's.
_threads_watched = False


def watch_threads() -> None:
    """From now on a thread running Python during a checked call that is not one of those running now fails
    the call. The threads are taken once a process (before any student cell; a kernel forked from a server
    starts Jupyter's threads after the import): a notebook that set up again after starting a thread had it
    taken for Jupyter's (a red team's)."""
    global _threads_before, _threads_watched
    if _threads_before[0] != os.getpid():
        _threads_before = (os.getpid(), frozenset(sys._current_frames()))
    _threads_watched = True


_JUPYTER = frozenset({"ipykernel", "IPython", "jupyter_client", "jupyter_core", "zmq", "tornado", "comm", "ipywidgets",
                      "traitlets", "debugpy"})


def _jupyters(thread) -> bool:
    """A Thread whose work (its target, or its class's run) is a function of one of Jupyter's packages, found
    there under its name (a notebook's function or class that only says it comes from there is not)."""
    work = getattr(thread, "_target", None)
    if work is None:
        work = type(thread).run
    function = getattr(work, "__func__", work)
    module = getattr(function, "__module__", None) or ""
    found = sys.modules.get(module)
    for part in (getattr(function, "__qualname__", "") or "").split("."):
        found = getattr(found, part, None) if part != "<locals>" else None
    return module.split(".")[0] in _JUPYTER and found is function


def _note_other_threads(record) -> None:
    """A thread the notebook started before the call (a thread started during it is refused where it
    starts) that is running Python, idle or not: PyTorch's dispatch modes are per thread, so whatever it
    does while the call runs is not watched (a red team's logging QueueListener computed the softmax)."""
    if not _threads_watched or _threads_before[0] != os.getpid():
        return
    import threading
    own = {threading.get_ident(), *_threads_before[1],
           *(t.ident for t in (getattr(_compile_pool, "_threads", None) or ()))}
    # ... and Jupyter's, started later (ipykernel starts one when a cell prints much): a Thread whose work is
    # a function of Jupyter's packages. (Jupyter's threads run what they are handed, which stays open.)
    own |= {t.ident for t in threading.enumerate() if _jupyters(t)}
    others = [ident for ident in sys._current_frames() if ident not in own]
    if others:
        names = {t.ident: t.name for t in threading.enumerate()}
        entry = (f"{len(others)} thread(s) the notebook started, running while it was checked "
                 f"({', '.join(names.get(i, 'unnamed') for i in others[:3])}: work in another thread, which the "
                 f"grader does not watch; stop them, or restart the kernel, before your work is checked)")
        if entry not in record.torch_ops:
            record.torch_ops.append(entry)


class _HandLaunch:
    """A kernel compiled ahead and launched by hand: `k = kernel.warmup(..., grid=(1,))`, then
    `k[grid](...)`, as in Triton's softmax tutorial. On a GPU that launch reaches the driver without
    JITFunction.run, so CompiledKernel's `k[grid]` hands back one of these, whose `run` the launch wrapper
    watches like any other: its arguments are checked, it counts as a launch of its kernel."""

    def __init__(self, compiled, grid):
        jit_fn = getattr(getattr(compiled, "src", None), "fn", None)   # the JITFunction it was compiled from
        self.compiled, self.grid, self.kernel = compiled, grid, jit_fn
        self.fn = getattr(jit_fn, "fn", None)                          # its Python function
        self.arg_names = list(getattr(jit_fn, "arg_names", ()))
        self.__name__ = getattr(self.fn, "__name__", None) or str(getattr(compiled, "name", "kernel"))

    def run(self, *args, **kwargs):   # (wrapped by _launch_wrapper: the watched launch)
        if _compiling_only:
            return self.compiled       # compiled already
        _hand_launch_getitem(self.compiled, self.grid)(*args, **kwargs)
        return self.compiled

    def __call__(self, *args, **kwargs):
        return self.run(*args, **kwargs)

    def odd(self) -> str | None:
        """What of the launch is not Triton's own or plain: the grid, which Triton's launcher indexes, and
        the compiled kernel's launcher, which it calls."""
        if type(self.grid) not in (tuple, list) or any(type(n) is not int for n in self.grid):
            return f"a grid of type {type(self.grid).__name__} (give a tuple of ints)"
        compiled = self.compiled
        if not _library_class(type(compiled)) or any(
                name in vars(compiled) and not _library_class(type(vars(compiled)[name]))
                for name in ("run", "launch_metadata")):
            return "a compiled kernel whose launcher is not Triton's"
        return None


_hand_launch_getitem = None   # CompiledKernel.__getitem__ as Triton defines it


def _install() -> None:
    """Put the wrappers in place once, when the grader is imported (before any student cell runs, so a
    notebook that keeps a reference to `torch.Tensor.tolist` keeps the wrapper). They do nothing outside
    watch()."""
    gpu_compile.remember_tritons_own()   # Triton's functions, known by identity before a notebook can touch them
    global _jit_run
    import triton.runtime.jit as jit
    _jit_run = jit.JITFunction.run
    for cls, method, counts, tritons in _launch_methods():
        setattr(cls, method, _launch_wrapper(getattr(cls, method), counts, tritons, method in ("run", "__call__")))
    global _hand_launch_getitem
    import triton.compiler.compiler as compiler
    compiled = getattr(compiler, "CompiledKernel", None)
    if compiled is not None and hasattr(compiled, "__getitem__"):
        _hand_launch_getitem = compiled.__getitem__
        compiled.__getitem__ = lambda self, grid: _HandLaunch(self, grid)
    _HandLaunch.run = _launch_wrapper(_HandLaunch.run, True, True, True)
    for name in EXITS:
        if hasattr(torch.Tensor, name):
            setattr(torch.Tensor, name, _exit_wrapper(name, getattr(torch.Tensor, name)))
    for owner, name in ENTRIES:
        if hasattr(owner, name):
            what = f"{getattr(owner, '__name__', 'torch')}.{name}"
            original = getattr(owner, name)
            setattr(owner, name, staticmethod(_entry_wrapper(what, original)) if isinstance(owner, type)
                    else _entry_wrapper(what, original))
    torch.UntypedStorage.resize_ = _storage_resize_wrapper(torch.UntypedStorage.resize_)
    # Work in another thread: the dispatch mode is the calling thread's alone, so PyTorch there would go
    # unseen. An honest wrapper starts no thread and hands nothing to a pool.
    import concurrent.futures
    import threading
    for cls, name in ((threading.Thread, "start"), (concurrent.futures.ThreadPoolExecutor, "submit")):
        setattr(cls, name, _handoff_wrapper(f"{cls.__name__}.{name}", getattr(cls, name)))
    for cls in _graph_classes():   # (the subclass's replay calls its base's: a replay may count twice)
        cls.replay = _graph_replay_wrapper(cls.replay)
    import triton.testing   # (Triton's autotuner imports it by name when it is made: it finds the wrapper)
    triton.testing.do_bench_cudagraph = _graph_bench_wrapper(triton.testing.do_bench_cudagraph)
    import _thread
    for name in ("start_new_thread", "start_joinable_thread"):   # (threading's own are bound already)
        if hasattr(_thread, name):
            setattr(_thread, name, _handoff_wrapper(f"_thread.{name}", getattr(_thread, name)))
    try:
        import triton.runtime.interpreter as interp
        builder = interp.InterpreterBuilder
    except (ImportError, AttributeError):  # pragma: no cover - Triton without its interpreter
        builder = None
    for name, method in (vars(builder).items() if builder is not None else ()):
        if name.startswith("create_") and callable(method):
            setattr(builder, name, _builder_wrapper(name, method))
    raw = getattr(sys.modules.get("triton.runtime.interpreter"), "_interpreter", None)   # the C loads and stores
    for name in ("load", "store", "atomic_rmw", "atomic_cas"):
        if callable(getattr(raw, name, None)):
            setattr(raw, name, functools.partial(_builder_wrapper(name, lambda _, *a, f=getattr(raw, name), **k: f(*a, **k)),
                                                 None))
    bounds.install()   # in the CPU interpreter: loads and stores outside the kernel's tensors
    lane_races.install()   # ... and a load of what another lane of the program stored, with no barrier
    program_races.install()   # ... and an element two programs touch, one storing it, with no atomic between


_install()


def _tensors_in(values):
    if isinstance(values, torch.Tensor):
        yield values
    elif _is_descriptor(values):        # a tensor descriptor reaches its tensor as a pointer does
        yield from _tensors_in(values.base)
    elif isinstance(values, (list, tuple)):
        for v in values:
            yield from _tensors_in(v)
    elif isinstance(values, dict):
        for v in values.values():
            yield from _tensors_in(v)


def _numbers_in(values, place=()):
    """(place, number) for the numbers and strings among launch arguments, nested in tuples, lists and
    dicts (and in Triton's constexprs), each with where it sits. A tensor gives its address and its dtype
    (a kernel can subtract two pointers, and branch on a dtype), at places of their own (ADDRESS, DTYPE)."""
    if isinstance(values, torch.Tensor):
        yield (*place, ADDRESS), values.data_ptr()
        yield (*place, DTYPE), str(values.dtype)
    elif isinstance(values, (bool, str)):
        yield place, values
    elif isinstance(values, numbers.Integral):   # (NumPy's integers too)
        yield place, int(values)
    elif isinstance(values, numbers.Number):
        yield place, float(values) if isinstance(values, numbers.Real) else complex(values)
    elif isinstance(values, (list, tuple)):
        for i, v in enumerate(values):
            yield from _numbers_in(v, (*place, i))
    elif isinstance(values, dict):
        for k, v in values.items():
            yield from _numbers_in(v, (*place, k))
    elif type(values).__module__.split(".")[0] == "triton" and hasattr(values, "value"):   # a tl.constexpr
        yield from _numbers_in(values.value, place)
    elif _is_descriptor(values):   # its tensor, and the numbers of its shape and strides (any size fits a
        for name in ("base", "shape", "strides", "block_shape"):   # zero stride: they can carry anything)
            yield from _numbers_in(getattr(values, name, ()), (*place, name))


ADDRESS, DTYPE = "address", "dtype"


def _bits(value, last=None) -> int:
    """What a number handed to a launch can carry: an int its bits (and a sign), a float 64, a string (a
    constexpr a kernel may unroll over) 8 a character; an address, how far it moved from `last`
    (a view a row further on moves by a row: a few bits; another tensor, by as many as a choice among
    that many tensors carries)."""
    if isinstance(value, bool):
        return 1
    if isinstance(value, int):
        moved = value - last if isinstance(last, int) else value
        return max(1, abs(moved).bit_length() + (moved < 0))
    if isinstance(value, (float, complex)):
        return 64
    return 8 * max(1, len(value))


def _function_of(launcher):
    """The Python function a launcher runs (a JITFunction's, an interpreter's executor's, an autotuner's)."""
    fn = launcher
    for _ in range(4):
        if isinstance(fn, types.FunctionType):
            return fn
        fn = getattr(fn, "fn", None)
    return type(launcher)


@contextmanager
def watch(poison: bool = True, also_allowed=(), ops: bool = True, tune_briefly: bool | None = None,
          memory: bool = False, linear_above: int | None = None, follow_copies: bool = True,
          sum_limit: int | None = None, allocations: bool = False, launch_bits: int | None = None,
          pieces: int | None = None):
    """Run a block under the watcher; yields the CallRecord it fills in.

    `also_allowed` names extra ATen ops an exercise permits (e.g. "sum" to add up per-block partials).
    With `ops=False` only Triton launches are counted: no dispatch mode sits between PyTorch and its
    kernels, so the block runs at full speed (a student's own speed check times under it).
    `tune_briefly` (by default as `ops`) times an autotuner's candidates for a few milliseconds each
    instead of Triton's default: for checks of correctness, not for calls that are timed.
    `memory` notes the storages the block's ops and launches use (CallRecord.touched).
    `linear_above`: PyTorch may apply only linear maps, so many times, to tensors of more elements than
    this, and only so many other ops to smaller ones (LINEAR_OPS).
    `follow_copies=False`: with linear_above, a Triton launch's outputs are values of their own, not
    compared with its arguments (CallRecord.after_launch). For timed calls: the comparison is GPU work
    of the grader's own, which would be timed and profiled as the student's. Their correctness checks
    compare, and the profiled call's share of PyTorch kernels still shows PyTorch doing the work.
    `sum_limit`: a PyTorch sum may read no more elements than this at once, and all of them no more than
    ADDITION_ROOM times this computed from one tensor in the call (_Watcher._summed).
    `allocations`: note what the block's ops allocate, and the memory its launches are handed or its ops write
    (CallRecord.allocations, CallRecord.reached).
    `launch_bits`: the block may hand its launches at most this many bits in numbers (_Watcher.handed_to_launch).
    `pieces`: its PyTorch ops may join or copy into place at most this many pieces (_Watcher._joined).
    """
    global _active
    # PyTorch imports its compiler the first time a dispatch mode's op runs (torch._compile's wrapper):
    # inside the watch, on an H200, that import met the watch's own ops half way and left the module
    # half made, and every later call in the process failed (an honest dropout among them). So it is
    # imported here, before the mode is in force: the same import, earlier.
    if "torch._dynamo" not in sys.modules:
        import torch._dynamo  # noqa: F401
    record = CallRecord(touched={} if memory else None, linear_above=linear_above, follow_copies=follow_copies,
                        sum_limit=sum_limit, allocations=[] if allocations else None,
                        reached={} if allocations else None, launch_bits=launch_bits, pieces=pieces)
    _note_replaced_operators(record)
    _note_other_threads(record)
    watcher = _Watcher(record, poison, ALLOWED_OPS | frozenset(also_allowed))
    outer, _active = _active, _Watch(record, watcher, compile_ahead=ops if tune_briefly is None else tune_briefly,
                                   ops=ops)
    try:
        with (watcher if ops else nullcontext()):
            yield record
    finally:
        _active = outer
        _note_replaced_operators(record)   # also one the call itself registered
        _note_other_threads(record)        # also one it started by a way not watched
        if _interpreted is not None:
            _interpreted.extend(record.interpreted)


_interpreted = None   # where interpreted launches are gathered, inside interpreted_launches()


@contextmanager
def interpreted_launches():
    """Gather the interpreted launches of every watch inside the block (a check's cases), as a list."""
    global _interpreted
    outer, _interpreted = _interpreted, []
    try:
        yield _interpreted
    finally:
        _interpreted = outer
