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
