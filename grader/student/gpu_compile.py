"""Compile a student's kernels for the grading GPU on a machine that has none.

Triton's CPU interpreter runs a kernel's Python code as it is written, and is more lenient than the
compiler: a loop-carried `s = 0` that becomes a float, a block size that is not a power of two or a
dtype mismatch in `tl.where` run there and fail only at grading time, on the GPU. So after a visible
check passes in the interpreter, the kernels it launched are compiled by Triton's real compiler for the
grading GPU's target (the H100's sm_90), which needs no GPU: Triton's wheel brings its own compiler
back end and `ptxas`. They are also compiled for Colab's T4 (sm_75), where a student may run them: a
failure there (fp8, tensor descriptors) is said, and costs nothing.

The interpreter has rebuilt Triton's language for itself in this process, so the compiling happens in a
child Python without it: the kernels' source (and that of the @triton.jit functions, constants and
modules they use) is written to a file there, imported, and compiled with the signature each launch
had. Anything this cannot rebuild (a global that is neither of those) means no verdict, not a failure:
only the compiler's own errors are reported.
"""
from __future__ import annotations

import ast
import atexit
import builtins
import contextlib
import dis
import functools
import inspect
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
import types
from pathlib import Path

from grader.student import interpreter_lang

# (backend, compute capability, warp size) of the grading GPU, where a kernel must compile, and of the GPU
# students most often run on (Colab's free T4), where failing to compile is said but costs nothing; named
# as the messages name them.
GRADING_TARGETS = {"the grading H100 (sm_90)": ("cuda", 90, 32)}
OTHER_TARGETS = {"Colab's T4 (sm_75)": ("cuda", 75, 32)}
TARGETS = {**GRADING_TARGETS, **OTHER_TARGETS}
TIMEOUT_S = 120


def launch(executor, args, kwargs) -> list:
    """[(the @triton.jit kernel, its arguments described)]: what a compile needs to know of one launch in
    the interpreter (its GridExecutor runs a rewritten copy of the kernel's function, in the globals
    where the kernel's name is bound), or [] when the kernel cannot be found."""
    fn = getattr(executor, "fn", None)
    kernel = getattr(fn, "__globals__", {}).get(getattr(fn, "__name__", None))
    while kernel is not None and type(kernel).__name__ != "InterpretedFunction":
        kernel = getattr(kernel, "fn", None)      # an Autotuner or Heuristics bound to that name
    if kernel is None:
        return []
    return [(kernel, tuple(_describe(a) for a in args),
             {k: _describe(v) for k, v in kwargs.items() if k not in ("grid", "warmup")})]


def kernel_of(executor):
    """The @triton.jit kernel an interpreter launch runs (see launch), or None."""
    found = launch(executor, (), {})
    return found[0][0] if found else None


# Python a kernel may not reach in its body, which the interpreter runs as plain Python and a GPU's
# compiler refuses: a loaded block's NumPy values (`.handle`, the interpreter's own), NumPy and PyTorch,
# imports, and the builtins that fetch attributes or code by a computed name.
_FOREIGN_MODULES = ("numpy", "torch", "scipy", "cupy", "jax")
_REFLECTION = {"getattr", "setattr", "vars", "globals", "locals", "eval", "exec", "compile", "__import__"}
_NOT_TRITON_CACHE = {}


def not_triton(kernel) -> list:
    """What a kernel's body (and the @triton.jit and plain Python functions it calls, followed a few calls
    deep) does that only the CPU interpreter runs: ["`np.exp` (numpy)", ...]. A plain Python helper is
    fine in itself (one computing a block size from constexpr values compiles); what it reaches is not."""
    return [what for kind, what in _reach_of(kernel) if kind == "foreign"]


def prints(kernel) -> list:
    """The prints a kernel's body makes (`tl.device_print`, `print`, `tl.static_print`), found as
    not_triton finds Python: ["`tl.device_print`", ...]. A print is a way out of a kernel besides its
    outputs, the way the grader counts: the interpreter prints a block's exact values (hex=True: every
    bit), a GPU's printf writes them to the process's stdout, and code that reads its own stdout has them
    (a red team's cross-entropy read the logits so and computed the loss in Python)."""
    return [what for kind, what in _reach_of(kernel) if kind == "print"]


_PRINTS = ("device_print", "static_print")   # Triton's, besides the builtin print (a device_print compiled)


def _reach_of(kernel) -> list:
    fn = getattr(kernel, "fn", kernel)
    key = getattr(fn, "__code__", None)
    if key not in _NOT_TRITON_CACHE:
        try:
            _NOT_TRITON_CACHE[key] = _foreign_reach(fn, set(), 0) if key is not None else []
        except Exception:  # noqa: BLE001 - code this cannot read: no verdict, never the student's error
            _NOT_TRITON_CACHE[key] = []
    return _NOT_TRITON_CACHE[key]


def _foreign_reach(fn, seen: set, depth: int) -> list:
    """[(kind, what)] a function's body reaches: "foreign" (Python that is not Triton) or "print"."""
    fn = getattr(fn, "fn", fn)
    if id(fn) in seen or depth > 4 or not isinstance(fn, types.FunctionType):
        return []
    seen.add(id(fn))
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return []
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.FunctionDef) else tree.body
    scope = {**fn.__globals__, **(inspect.getclosurevars(fn).nonlocals if fn.__closure__ else {})}
    local = {a.arg for a in ast.walk(tree.body[0].args) if isinstance(a, ast.arg)} \
        if isinstance(tree.body[0], ast.FunctionDef) else set()
    local |= {n.id for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    found = []

    def within(name, reached):
        return [(kind, f"{what} in `{name}`" if " in `" not in what else what) for kind, what in reached]

    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(("foreign", "an import"))
            elif isinstance(node, ast.Raise):   # (Triton compiles no raise: its message would be Python's)
                found.append(("foreign", "`raise`"))
            elif isinstance(node, ast.Attribute) and (node.attr == "handle" or node.attr.startswith("_")):
                found.append(("foreign", f"`.{node.attr}`"))
            elif isinstance(node, ast.Call):
                name, obj = _resolved(node.func, scope, local)
                if name is None:
                    continue
                module = (obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None)) or ""
                if not isinstance(module, str):
                    continue
                # (Triton 3.3's interpreter leaves tl's functions patched after a launch, tl.device_print as a
                # lambda, tl.static_print as the builtin print: the name as written tells then)
                if obj is print or (module.split(".")[0] == "triton" and (
                        getattr(obj, "__name__", None) in _PRINTS or name.split(".")[-1] in _PRINTS)):
                    found.append(("print", f"`{name}`"))
                    continue
                if _python_object_call(obj, module):
                    found.append(("foreign", f"`{name}` (a call to a Python object or its method)"))
                    continue
                inner = getattr(obj, "fn", None)
                if isinstance(inner, types.FunctionType) and (inner.__module__ or "").split(".")[0] == "triton":
                    continue                    # Triton's own language (tl.max is a @triton.jit function)
                if isinstance(inner, types.FunctionType):   # the student's @triton.jit function
                    found += within(name, _foreign_reach(obj.fn, seen, depth + 1))
                    continue
                if module.split(".")[0] == "triton":
                    continue
                if name in _REFLECTION and module == "builtins":
                    found.append(("foreign", f"`{name}`"))
                elif module.split(".")[0] in _FOREIGN_MODULES or type(obj).__module__.split(".")[0] in _FOREIGN_MODULES:
                    found.append(("foreign", f"`{name}` ({module.split('.')[0] or type(obj).__module__.split('.')[0]})"))
                else:
                    found += within(name, _foreign_reach(obj, seen, depth + 1))
    return list(dict.fromkeys(found))


def _python_object_call(obj, module: str) -> bool:
    """Whether a kernel's call goes to a Python object rather than to a function: a method of one (a list's
    append or pop: a red team's kernel handed its blocks to the host through a list, and took a mask from
    one), or an instance with __call__ (which may wrap a print). Triton compiles neither; the interpreter
    runs both as Python. Triton's own objects, classes and functions are not such calls."""
    if module.split(".")[0] == "triton" or isinstance(obj, (type, types.FunctionType, types.ModuleType)):
        return False
    if isinstance(obj, types.BuiltinFunctionType):   # a builtin function, or a builtin method of an object
        return not isinstance(getattr(obj, "__self__", None), (types.ModuleType, type(None)))
    return isinstance(obj, types.MethodType) or not isinstance(getattr(obj, "fn", None), types.FunctionType)


def globals_read(kernel) -> list:
    """[(name, value)] of the numbers, strings and constexprs a kernel (and the @triton.jit functions it
    names) reads from its module's globals as they are now: the interpreter reads them at each launch,
    so a global changed between launches is a way in (a red team's mask, two constexpr words at a time)."""
    found, seen, todo = [], set(), [getattr(kernel, "fn", kernel)]
    while todo:
        fn = todo.pop()
        if not isinstance(fn, types.FunctionType) or id(fn) in seen or len(seen) > 16:
            continue
        seen.add(id(fn))
        for name in fn.__code__.co_names:
            value = fn.__globals__.get(name)
            if isinstance(getattr(value, "fn", None), types.FunctionType) and \
                    (value.fn.__module__ or "").split(".")[0] != "triton":
                todo.append(value.fn)
            elif isinstance(value, (int, float, str)) or (type(value).__module__.split(".")[0] == "triton"
                                                          and isinstance(getattr(value, "value", None), (int, float, str))):
                found.append((f"{fn.__name__}.{name}", value))
    return found


def _resolved(func, scope: dict, local: set):
    """(the dotted name, the object) a call's function names through the kernel's globals, or (None, None)."""
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or func.id in local:
        return None, None
    import builtins
    obj = scope.get(func.id, getattr(builtins, func.id, None))
    if obj is None:
        return None, None
    for part in reversed(parts):
        try:
            obj = getattr(obj, part)
        except Exception:  # noqa: BLE001 - a name this cannot follow: no verdict on it
            return None, None
    return ".".join([func.id, *reversed(parts)]), obj


def _describe(value):
    import torch
    if isinstance(value, torch.Tensor):
        # with whether its address is a multiple of 16 bytes, which Triton's launcher specializes on
        return {"tensor": str(value.dtype).replace("torch.", ""), "aligned": value.data_ptr() % 16 == 0,
                "type": _mangled(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "value") and isinstance(getattr(value, "value"), (bool, int, float, str)):
        return value.value    # a tl.constexpr
    if (type(value).__module__ or "").split(".")[0] == "triton" and type(value).__name__ == "dtype":
        return {"dtype": str(value.name)}
    if _jit_fn(value) is not None:   # a @triton.jit function handed to a kernel (a constexpr to call)
        return {"jit": value.fn.__name__}
    return {"other": type(value).__name__, "type": _mangled(value)}


def _mangled(value):
    """The type Triton's launcher gives an argument in its signature ("*bf16", "tensordesc<bf16[64, 64]>", a
    tuple's as a list), or None where it gives none."""
    if isinstance(value, tuple):   # element by element: the launcher's own makes a 1 a constant in a tuple
        types_ = [_mangled(v) for v in value]
        return None if None in types_ else types_
    try:
        from triton.runtime.jit import mangle_type
        return mangle_type(value)
    except Exception:  # noqa: BLE001 - a kind of argument Triton's launcher does not take
        return None


def enabled() -> bool:
    return os.environ.get("GRADER_GPU_COMPILE", "1") != "0"


def check(launches: list) -> tuple:
    """(how many compiles were judged, [(kernel name, target name, the compiler's message) of each that
    failed], [resource_usage of each kernel compiled for the grading GPU, with its kernel's name]).
    (0, [], []) when nothing could be judged. Each kernel is compiled from the module the front end is
    handed at its launches (source_for_compiler), with the @triton.jit functions its launches hand it."""
    modules, seen = {}, set()
    for kernel, args, kwargs in launches:
        key = (id(kernel), json.dumps([args, kwargs], sort_keys=True, default=str))
        if key in seen:
            continue
        seen.add(key)
        handed = [kernel.fn.__globals__.get(d["jit"]) for d in [*args, *kwargs.values()]
                  if isinstance(d, dict) and set(d) == {"jit"}]   # (@triton.jit functions handed in, by name)
        try:
            module, refused, _, _ = source_for_compiler(kernel, [h for h in handed if _jit_fn(h) is not None])
        except (OSError, TypeError, SyntaxError, ValueError):
            continue    # the source cannot be had (a kernel typed at a prompt, say): no verdict for it
        if not refused:   # (what it cannot copy the front end has refused, or gives no verdict on)
            modules.setdefault(module, []).append(_with_defaults(kernel.fn, args, kwargs))
    judged, failures, usage = 0, [], []
    for module, specs in modules.items():
        n, failed, used = _compile_in_child(module, specs)
        judged, failures, usage = judged + n, failures + failed, usage + used
    return judged, failures, usage


def _with_defaults(fn, args, kwargs) -> dict:
    """A launch (described, as `launch` gives it) with the kernel's defaults for what it did not pass, as the
    front end was handed it: the module has no default expressions (compiler_def)."""
    options = {k: v for k, v in kwargs.items() if k in ("num_warps", "num_stages")}
    try:
        signature = inspect.signature(fn)
        bound = signature.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in signature.parameters})
    except (TypeError, ValueError):
        return {"kernel": fn.__name__, "args": list(args), "kwargs": kwargs}
    for name, parameter in signature.parameters.items():
        if name not in bound.arguments and parameter.default is not inspect.Parameter.empty:
            bound.arguments[name] = _describe(parameter.default)
    return {"kernel": fn.__name__, "args": [], "kwargs": {**bound.arguments, **options}}


_DONE: dict = {}   # what was compiled already in this process, and what the compiler said


def _request_key(module: str, specs: list) -> str:
    """What a compile is asked (the module's text and the launches), as the key its verdict is kept under."""
    return module + json.dumps(specs, sort_keys=True, default=str)


def _compile_in_child(module: str, specs: list) -> tuple:
    key = _request_key(module, specs)
    if key in _DONE:
        return _DONE[key]
    with tempfile.TemporaryDirectory(prefix="grader-gpu-compile-") as folder:
        Path(folder, "student_kernels.py").write_text(module)
        Path(folder, "specs.json").write_text(json.dumps({"specs": specs, "targets": TARGETS}))
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        try:
            proc = subprocess.run([sys.executable, "-c", _CHILD, folder, str(Path(__file__).resolve().parents[2])],
                                  env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            return 0, [], []
    try:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        verdict = int(result["judged"]), [tuple(r) for r in result["failures"]], list(result["usage"])
    except (ValueError, IndexError, KeyError, TypeError):
        verdict = 0, [], []    # the child could not judge (no compiler back end here, say): no verdict
    _DONE[key] = verdict
    return verdict


def _as_tuples(value):
    return tuple(_as_tuples(v) for v in value) if isinstance(value, list) else value


# Triton's names for the element types of the tensors a launch passed
_TRITON_TYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int64": "i64",
                 "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "i1"}


def compile_jobs(module, specs: list, unknown: list | None = None) -> dict:
    """{key: (spec, kernel, signature, constexprs, attrs, options)}: one compile per kernel, signature and
    options, from the launches described by `launch` (run where `module`, the rebuilt kernels, was imported
    without the interpreter). A launch with an argument that cannot be described is left out, and
    (kernel, argument) added to `unknown`."""
    jobs = {}
    for spec in specs:
        fn = getattr(module, spec["kernel"])
        values = dict(zip(fn.arg_names, spec["args"]))
        values.update({k: v for k, v in spec["kwargs"].items() if k in fn.arg_names})
        for param, name in zip(fn.params, fn.arg_names):   # the defaults a launch did not pass
            default = getattr(param, "default", inspect.Parameter.empty)
            if name not in values and default is not inspect.Parameter.empty:
                if type(default).__name__ == "constexpr" and _plain(getattr(default, "value", None)):
                    default = default.value
                if _plain(default) or type(default).__name__ == "dtype":
                    values[name] = {"dtype": str(default.name)} if type(default).__name__ == "dtype" else default
        options = {k: v for k, v in spec["kwargs"].items() if k in ("num_warps", "num_stages")}
        signature, constexprs, missing = {}, {}, []
        # What the launcher assumes of a GPU launch and the compiler builds on (16-byte vector loads): pointers
        # and integers that are multiples of 16. Without it the registers said would be those of a kernel with
        # no vector loads (for Day 5's dropout 150, where an H200 ran it with 40).
        divisible = {}
        for i, name in enumerate(fn.arg_names):
            v = values.get(name)
            if isinstance(v, dict) and set(v) == {"jit"}:   # the module's function of that name, as a constexpr
                v = getattr(module, v["jit"], None)
                if type(v).__name__ != "JITFunction":
                    missing.append(name)
                    continue
                signature[name], constexprs[name] = "constexpr", v
            elif fn.params[i].is_constexpr:
                if isinstance(v, dict) and set(v) == {"dtype"}:
                    import triton.language as tl
                    v = tl.dtype(v["dtype"])
                elif isinstance(v, dict):   # an object the launch was given: no compile can be told of it
                    missing.append(name)
                    continue
                signature[name], constexprs[name] = "constexpr", v
            elif isinstance(v, dict) and "tensor" in v and v["tensor"] in _TRITON_TYPES:
                signature[name] = "*" + _TRITON_TYPES[v["tensor"]]
                if v.get("aligned"):
                    divisible[(i,)] = [["tt.divisibility", 16]]
            elif isinstance(v, bool):
                signature[name] = "i1"
            elif isinstance(v, int):
                signature[name] = "i32" if -2**31 <= v < 2**31 else "i64"
                if v % 16 == 0:
                    divisible[(i,)] = [["tt.divisibility", 16]]
            elif isinstance(v, float):
                signature[name] = "fp32"
            elif v is None and name in values:
                signature[name], constexprs[name] = "constexpr", None
            elif isinstance(v, dict) and isinstance(v.get("type"), (str, list)):
                # a tensor descriptor, a tuple: the type Triton's launcher gave it (a tuple's as a tuple)
                signature[name] = _as_tuples(v["type"])
            else:
                missing.append(name)
        if missing:
            if unknown is not None:
                unknown += [(spec["kernel"], name) for name in missing]
            continue
        # Of launches that differ only in what is a multiple of 16, the one with the most (a case's sizes
        # vary; the timed, large one is usually the aligned one).
        key = json.dumps([spec["kernel"], signature, constexprs, options], sort_keys=True, default=str)
        if key not in jobs or len(divisible) > len(jobs[key][4]):
            jobs[key] = (spec, fn, signature, constexprs, divisible, options)
    return jobs


def _def_source(fn) -> str:
    """The function's source from its `def` on: its decorators (autotune, heuristics) stay here."""
    source = textwrap.dedent(inspect.getsource(fn))
    node = ast.parse(source).body[0]
    lines = source.splitlines()
    return "\n".join(lines[node.lineno - 1:])


def resource_usage(compiled) -> dict:
    """What a compiled kernel asks of the GPU, read without one: warps and shared memory per program
    (Triton's metadata) and, where the cuobjdump that Triton's wheel ships is there, the registers per
    thread that ptxas gave it and its local memory per thread (spilled registers, a stack)."""
    import re
    import subprocess
    md = compiled.metadata
    usage = {k: getattr(md, k) for k in ("name", "num_warps", "num_stages", "shared") if hasattr(md, k)}
    try:
        from triton.tools.disasm import path_to_cuobjdump
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(compiled.asm["cubin"])
        try:
            cuobjdump = path_to_cuobjdump()
            if isinstance(cuobjdump, tuple):   # (path, version) before Triton 3.4
                cuobjdump = cuobjdump[0]
            said = subprocess.run([cuobjdump, "-res-usage", f.name], capture_output=True, text=True,
                                  timeout=60).stdout
        finally:
            os.remove(f.name)
        for key, field in (("registers", "REG"), ("local_bytes", "LOCAL")):
            found = re.search(field + r":(\d+)", said)
            if found:
                usage[key] = int(found.group(1))
    except Exception:   # noqa: BLE001 - no cuobjdump, no cubin: the metadata alone
        pass
    return usage


def describe_usage(usage: list, most: int = 4) -> list:
    """A line per kernel (per distinct figures, at most `most`) saying what it asks of an SM of the grading
    GPU and how many of its programs one SM then holds (grader.hardware.occupancy)."""
    from grader.hardware import occupancy
    lines, seen = [], set()
    for u in usage:
        figures = (u.get("kernel"), u.get("registers"), u.get("local_bytes"), u.get("num_warps"), u.get("shared"))
        if figures in seen or u.get("num_warps") is None or len(lines) >= most:
            continue
        seen.add(figures)
        kernel, registers, local, warps, shared = figures
        capability = u.get("capability") or divmod(TARGETS.get(u.get("target"), ("cuda", 90, 32))[1], 10)
        parts = [f"{registers} registers per thread" if registers is not None else None,
                 (f"{local} bytes per thread of local memory (registers spilled to memory, which is slow: "
                  f"smaller blocks or fewer num_stages keep them in registers)" if local else "no spills")
                 if local is not None else None,
                 f"{warps} warps", f"{(shared or 0) / 1024:.0f} KiB of shared memory per program"]
        line = f"  `{kernel}` on {u.get('target')}: " + ", ".join(p for p in parts if p)
        fit = occupancy(registers, shared or 0, warps, capability) if registers is not None else None
        if fit is not None:
            line += (f"; one SM holds {fit.programs} of its programs at once ({fit.warps} warps, "
                     f"{fit.fraction:.0%} occupancy, limited by {fit.limited_by})")
        lines.append(line + ".")
    return lines


# The child: import the kernels (as a file, so Triton can read their source), compile each launch's
# signature for each target, print [[kernel, target, message], ...] of the compile errors as its last line.
_CHILD = r'''
import json, pathlib, sys, warnings
warnings.simplefilter("ignore")
folder = sys.argv[1]
sys.path.insert(0, folder)
sys.path.insert(1, sys.argv[2])   # where the grader is: resource_usage
try:
    from grader.student.gpu_compile import GRADING_TARGETS, compile_jobs, compiler_message, resource_usage
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.errors import CompilationError
    import student_kernels
except Exception:
    print(json.dumps({"judged": 0, "failures": [], "usage": []})); sys.exit(0)
setup = json.loads(pathlib.Path(folder, "specs.json").read_text())
failures, judged, usage = [], 0, []
jobs = compile_jobs(student_kernels, setup["specs"])
for spec, fn, signature, constexprs, divisible, options in jobs.values():
    for target_name, target in setup["targets"].items():
        try:
            compiled = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=divisible),
                                      target=GPUTarget(*target), options=options)
        except CompilationError as e:
            text = compiler_message(e)   # with the error inside a called @triton.jit function
            if "is not defined" in text:   # a global this module could not rebuild: no verdict
                continue
            failures.append([spec["kernel"], target_name, text])
            judged += 1
            continue
        except Exception:
            continue                        # the compiler's back end, not the student's code
        judged += 1
        if target_name in GRADING_TARGETS:
            usage.append(dict(resource_usage(compiled), kernel=spec["kernel"], target=target_name))
print(json.dumps({"judged": judged, "failures": failures, "usage": usage}))
'''


def usage_said(compiled, dev) -> list:
    """Lines on what the student's kernels asked of this GPU's SMs, as its driver loaded them: for the
    checker, from what the kernel's process reports (checked for form, said as feedback, never part of
    a verdict), and for a student's own speed check, from its launches."""
    usage = []
    for u in compiled if isinstance(compiled, list) else []:
        if not isinstance(u, dict) or not isinstance(u.get("kernel"), str):
            continue
        figures = {k: u.get(k) for k in ("registers", "local_bytes", "num_warps", "shared")}
        if all(isinstance(v, int) and 0 <= v < 2**24 for v in figures.values()) and figures["num_warps"] > 0:
            usage.append(dict(figures, kernel=u["kernel"][:80], target=dev.name, capability=dev.capability))
    lines = describe_usage(usage)
    return ["  what your kernels ask of each SM:"] + [line.replace(f" on {dev.name}:", ":", 1) for line in lines] \
        if lines else []


# --- What Triton's compiler makes of an interpreted kernel, at each launch --------------------------------
#
# In the interpreter a kernel's body is Python, and Python runs much that Triton's compiler refuses: NumPy on
# a block's values (reached through a helper, an alias, an object's __getitem__ ...), float() of a block, a
# plain Python function. Red teams found one route after another past not_triton's reading of the source,
# which can only list what it knows. So at each interpreted launch under a check, the kernel and every
# @triton.jit function it reaches are handed, with the globals they read at that moment, to Triton's own
# front end (the source to Triton IR, for the grading GPU; no back end, no GPU), which refuses all of these
# as it would on the GPU. A global of a kind the compiler takes no copy of (a plain function, an object of
# the student's class, a list) is refused as it is: Triton's compiler reads no such global in a kernel.
# The globals read are noted, and before each program of the launch they must still be the same objects
# (a grid function, a hook or an object's __index__ runs between the check and the programs).

FRONTEND_TIMEOUT_S = 120
_MISSING = object()   # a global no longer (or not yet) bound


def _global_names(code) -> tuple:
    """The global names a function's code loads (its nested code's too), as Python looks them up."""
    names = _GLOBAL_NAMES.get(code)
    if names is None:
        found = [ins.argval for ins in dis.get_instructions(code) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")]
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                found += _global_names(const)
        names = _GLOBAL_NAMES[code] = tuple(dict.fromkeys(found))
    return names


_GLOBAL_NAMES: dict = {}


def compiler_def(fn, source: str, helper: bool = False) -> str | None:
    """The function as Triton's compiler is to read it: its body as written, its parameters annotated only
    with whether each is a tl.constexpr and without their default expressions, so that nothing of the
    student's runs when the module is imported: a launched kernel's defaults come with each launch's values,
    and a `helper`'s are the values its defaults have now, written as literals (ValueError where one is not
    a number, a string, None or a dtype). None where the `def` is not one Python would name so."""
    node = ast.parse(source).body[0]
    if not isinstance(node, ast.FunctionDef) or node.name != fn.__name__ or not node.name.isidentifier():
        return None
    node.decorator_list, node.returns = [], None
    arguments = node.args
    for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
        constexpr = arg.annotation is not None and "constexpr" in ast.unparse(arg.annotation)
        arg.annotation = ast.Attribute(ast.Name("tl", ast.Load()), "constexpr", ast.Load()) if constexpr else None
    for arg in (arguments.vararg, arguments.kwarg):
        if arg is not None:
            arg.annotation = None
    arguments.defaults, arguments.kw_defaults = [], [None] * len(arguments.kwonlyargs)
    if helper:
        positional = [*arguments.posonlyargs, *arguments.args]
        values = fn.__defaults__ or ()
        arguments.defaults = [_default_literal(fn, a.arg, v) for a, v in zip(positional[len(positional) - len(values):], values)]
        given = fn.__kwdefaults__ or {}
        arguments.kw_defaults = [_default_literal(fn, a.arg, given[a.arg]) if a.arg in given else None
                                 for a in arguments.kwonlyargs]
    return ast.unparse(node)


def _default_literal(fn, name: str, value):
    """A helper's default as an expression of its value (a tl.constexpr of one, too)."""
    constexpr = _tritons_class(type(value)) and type(value).__name__ == "constexpr"
    text = _constant(getattr(value, "value", _MISSING) if constexpr else value)
    if text is None:
        raise ValueError(f"`{fn.__name__}`'s default for `{name}` (a {type(value).__name__}: a @triton.jit function's "
                         f"defaults may be numbers, strings, None and dtypes)")
    return ast.parse(f"triton.language.constexpr({text})" if constexpr else text, mode="eval").body


def runs_as_read(executed, reached: dict) -> list:
    """The functions whose code the interpreter runs is not that of the source handed to the compiler (a
    file or a cell's cached lines changed after Triton's interpreter read them): `executed` the kernel's
    function that the launch calls, `reached` {function: its source} (source_for_compiler). Triton 3.4 on
    runs a rewrite of each function's source (its interpreter's ASTTransformer), made once and kept; before,
    the function itself."""
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - triton is a dependency
        return []
    rewriter = getattr(interpreter, "FunctionRewriter", None)
    kept = getattr(getattr(interpreter, "InterpretedFunction", None), "rewritten_fn", {})
    differ = []
    for fn, source in reached.items():
        tree = ast.parse(source)
        if rewriter is not None:
            tree = ast.fix_missing_locations(rewriter.ast_transformer.visit(tree))
        expected = next((c for c in compile(tree, "<source>", "exec").co_consts
                         if isinstance(c, types.CodeType) and c.co_name == fn.__name__), None)
        running = [executed] if fn is _original_of(executed, kept) else []
        running += [kept[fn]] if rewriter is not None and fn in kept else []
        running += [fn] if rewriter is None else []
        if expected is None or any(not _same_code(expected, f.__code__) for f in running):
            differ.append(fn.__name__)
    return differ


def _original_of(executed, kept: dict):
    """The student's function whose rewrite the interpreter runs (InterpretedFunction.rewritten_fn)."""
    return next((fn for fn, rewritten in kept.items() if rewritten is executed), executed)


def _same_code(a, b) -> bool:
    """Whether two code objects run the same: the same instructions, names and constants."""
    if (a.co_code, a.co_names, a.co_varnames, a.co_freevars, a.co_cellvars) != \
            (b.co_code, b.co_names, b.co_varnames, b.co_freevars, b.co_cellvars) or len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if isinstance(x, types.CodeType) and isinstance(y, types.CodeType):
            if not _same_code(x, y):
                return False
        elif type(x) is not type(y) or repr(x) != repr(y):
            return False
    return True


def _plain(value) -> bool:
    """A number, a string, None, or a tuple of them: exactly those types (a subclass runs its own code)."""
    if type(value) is tuple:
        return all(_plain(v) for v in value)
    return type(value) in (bool, int, float, str, type(None))


def _literal(value) -> str:
    if type(value) is float and value != value or value in (float("inf"), float("-inf")):
        return f"float({str(value)!r})"
    return repr(value)


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:
        return _MISSING


def _is_jit(value) -> bool:
    """A @triton.jit function, interpreted or not, whose function is a Python function."""
    return type(value).__name__ in ("InterpretedFunction", "JITFunction") and _tritons_class(type(value)) \
        and isinstance(getattr(value, "fn", None), types.FunctionType)


def _jit_fn(value):
    """The Python function of a student's @triton.jit function (interpreted or not), else None."""
    if _is_jit(value) and (value.fn.__module__ or "").split(".")[0] != "triton":
        return value.fn
    return None


def _noinline(jit_object) -> bool:
    """Whether a @triton.jit function was made with noinline=True (interpreted, the flag is among the keyword
    arguments it keeps, or its rewriter keeps before Triton 3.4)."""
    kept = getattr(jit_object, "kwargs", None) or getattr(getattr(jit_object, "rewriter", None), "kwargs", None) or {}
    return bool(getattr(jit_object, "noinline", False) or kept.get("noinline"))


# What Triton's modules bound before any notebook code ran (remember_tritons_own): a function, class or
# module is Triton's by identity, not by the module and name it states, which a notebook can write
# (functools.update_wrapper(f, tl.max)), nor by what a module binds now (a notebook can rebind tl.max).
_TRITONS = {"objects": {}, "code": {}, "globals": {}}


def remember_tritons_own() -> None:
    """Note Triton's modules, the classes and functions they define and the code of those functions (with
    the code of the functions those make at run time: the interpreter's stand-ins and wrappers). Called
    before any notebook code runs: when the grader is imported into a notebook's process, and at the start
    of the compiler's process."""
    import importlib
    import pkgutil
    import triton.language
    for module in pkgutil.walk_packages(triton.language.__path__, "triton.language."):
        with contextlib.suppress(Exception):   # (a back end's module that does not import here)
            importlib.import_module(module.name)
    for name in ("triton.runtime.interpreter", "triton.runtime.jit", "triton.compiler.code_generator",
                 "triton.tools.tensor_descriptor", "triton.testing"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    _note_tritons_modules()


def _note_tritons_modules() -> bool:
    """Note the modules of Triton's not noted yet (imported since: a Triton module's first import after
    remember_tritons_own is trusted as it is found); whether there were any."""
    objects, code, dicts = _TRITONS["objects"], _TRITONS["code"], _TRITONS["globals"]
    if _TRITONS.get("modules_seen") == len(sys.modules):   # (nothing imported since the last look)
        return False
    _TRITONS["modules_seen"] = len(sys.modules)
    new = [module for name, module in list(sys.modules.items())
           if (name == "triton" or name.startswith("triton.")) and isinstance(module, types.ModuleType)
           and id(module) not in objects]
    for module in new:
        objects[id(module)], dicts[id(vars(module))] = module, vars(module)
    for module in new:
        for value in list(vars(module).values()):
            _note_tritons(value, objects, code, 0)
    return bool(new)


def _note_tritons(value, objects: dict, code: dict, depth: int) -> None:
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    elif isinstance(value, property):
        for accessor in (value.fget, value.fset):
            _note_tritons(accessor, objects, code, depth)
        return
    if depth > 4 or id(value) in objects or not isinstance(value, (type, types.FunctionType,
                                                                    types.BuiltinFunctionType)):
        if str(type(value).__module__).split(".")[0] == "triton" and id(value) not in objects \
                and isinstance(getattr(value, "fn", None), types.FunctionType) \
                and str(getattr(value.fn, "__module__", "")).split(".")[0] == "triton":
            objects[id(value)] = value                 # Triton's @triton.jit functions (tl.sigmoid, tl.max)
            _note_tritons(value.fn, objects, code, depth + 1)
        return
    if str(getattr(value, "__module__", None) or "").split(".")[0] != "triton":
        return                                         # (what Triton imports from elsewhere: numpy, typing)
    objects[id(value)] = value
    if isinstance(value, type):
        for member in list(vars(value).values()):
            _note_tritons(member, objects, code, depth + 1)
    elif isinstance(value, types.FunctionType):
        todo = [value.__code__]
        while todo:   # the code of the functions it makes: lambdas, closures, nested definitions
            made = todo.pop()
            code[id(made)] = made
            todo += [c for c in made.co_consts if isinstance(c, types.CodeType) and id(c) not in code]
        wrapped = getattr(value, "__wrapped__", None)
        if wrapped is not None:
            _note_tritons(wrapped, objects, code, depth + 1)


def _is_tritons(value) -> bool:
    """Whether `value` is a module, class or function of Triton's (remember_tritons_own), or a function Triton
    made from its own code in one of its modules (the interpreter's wrappers of its builtins, whose builtin,
    kept as the default `member`, must be Triton's too). Before anything is noted (a process that never
    called remember_tritons_own), by the module and name it states."""
    objects = _TRITONS["objects"]
    if not objects:
        module = getattr(value, "__module__", None) or getattr(value, "__name__", "")
        return str(module).split(".")[0] == "triton"
    return _known_as_tritons(value) or (_note_tritons_modules() and _known_as_tritons(value))


def _known_as_tritons(value) -> bool:
    if _TRITONS["objects"].get(id(value)) is value:
        return True
    if isinstance(value, types.FunctionType):
        member = (value.__kwdefaults__ or {}).get("member", _MISSING)
        return _TRITONS["code"].get(id(value.__code__)) is value.__code__ \
            and _TRITONS["globals"].get(id(value.__globals__)) is value.__globals__ \
            and (member is _MISSING or _is_tritons(member))
    return False


def _tritons_class(kind) -> bool:
    """A class Triton defines (a notebook's class that only claims one of Triton's modules is not)."""
    if not _TRITONS["objects"]:
        module = getattr(kind, "__module__", None) or ""
        return module.split(".")[0] == "triton" and getattr(sys.modules.get(module), kind.__name__, None) is kind
    return isinstance(kind, type) and _is_tritons(kind)


def _tritons_own(fn, value) -> bool:
    """Whether `value` is what Triton's module `fn.__module__` binds to `fn.__name__` (and was so before any
    notebook code ran)."""
    module = fn.__module__ or ""
    return module.split(".")[0] == "triton" and _MODULE_NAME.fullmatch(module) is not None \
        and fn.__name__.isidentifier() and getattr(sys.modules.get(module), fn.__name__, None) is value \
        and (not _TRITONS["objects"] or _is_tritons(value))


def _constant(value) -> str | None:
    """The expression for a plain value or one of Triton's scalar types (tl.float16), else None."""
    if _plain(value):
        return _literal(value)
    if _tritons_class(type(value)) and type(value).__name__ == "dtype" \
            and _MODULE_NAME.fullmatch(str(getattr(value, "name", ""))):
        return f"triton.language.dtype({value.name!r})"
    return None


def source_for_compiler(kernel, handed=()) -> tuple:
    """(module text, [what it reads that Triton's compiler takes no copy of], [(where, name, object)] every
    global the kernel and the @triton.jit functions it reaches read now, {function: its source}): what
    Triton's front end is to compile for this interpreted kernel (its function or its @triton.jit object),
    as its source reads and its globals are at this moment, with the @triton.jit functions `handed` to it
    as arguments."""
    defs, lines, aliases, refused, reads, reached = {}, [], [], [], [], {}
    first = getattr(kernel, "fn", kernel)
    todo = [first, *(_jit_fn(f) for f in handed)]
    # helpers made with @triton.jit(noinline=True): compiled as functions of their own, which take scalars only
    noinline = {f.fn.__name__ for f in handed if _noinline(f)}
    while todo:
        fn = todo.pop()
        if fn in reached:
            continue
        if fn.__name__ in defs:
            refused.append(f"two @triton.jit functions named `{fn.__name__}`")
            continue
        reached[fn] = _def_source(fn)   # as it reads now: a file or a cell's lines may have changed
        try:
            defs[fn.__name__] = compiler_def(fn, reached[fn], helper=fn is not first)
        except ValueError as e:
            refused.append(str(e))
            continue
        if defs[fn.__name__] is None:
            refused.append(f"`{fn.__name__}`, a function whose source does not define it under that name")
            continue
        # Triton's interpreter runs it at module level, where the names it reads from its enclosing function
        # are read as globals: each must be the very object the module's global of that name is
        differing = [name for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ())
                     if _cell_value(cell) is not fn.__globals__.get(name, _MISSING)]
        if differing:
            refused.append(f"the variables of the function `{fn.__name__}` is defined in "
                           f"({', '.join(differing[:3])}): define @triton.jit functions at module level")
            continue
        introspecting = sorted(set(_global_names(fn.__code__)) & _INTROSPECTION)
        if introspecting:
            refused.append(f"Python's `{introspecting[0]}` in `{fn.__name__}` (Triton's compiler evaluates it on its own "
                           f"objects, the interpreter on a block's values)")
            continue
        cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
        for name in dict.fromkeys([*_global_names(fn.__code__), *cells]):
            if name in cells:
                where = cells[name]
                try:
                    value = where.cell_contents
                except ValueError:
                    value = _MISSING
            else:
                where = fn.__globals__ if name in fn.__globals__ else vars(builtins)
                value = where.get(name, _MISSING)
            reads.append((where, name, value))
            if value is _MISSING or where is vars(builtins):
                continue                # the front end says what it makes of a builtin, or of no such name
            line = _rebuilt(name, value, todo)
            if _jit_fn(value) is not None and _noinline(value):
                noinline.add(value.fn.__name__)
            if line == "":
                continue
            if line is None:
                kind = "function" if isinstance(value, types.FunctionType) else type(value).__name__
                refused.append(f"`{name}` (a @triton.constexpr_function that does more than arithmetic on numbers: "
                               f"its body runs as Python, here and where Triton compiles, so it may use numbers, "
                               f"min, max, abs, int, float, round, len, range, math and its own names only)"
                               if kind == "ConstexprFunction" else
                               f"`{name}` (a {kind}: a kernel may read @triton.jit functions, Triton's modules "
                               f"and math, tl.constexpr values and arithmetic @triton.constexpr_functions; "
                               f"Triton's compiler takes nothing else)")
            elif line.startswith("="):
                aliases.append(f"{name} {line}")
            elif line not in lines:
                lines.append(line)
    header = ["import triton", "import triton.language as tl", *lines]
    bodies = [f"@triton.jit{'(noinline=True)' if name in noinline else ''}\n{source}" for name, source in defs.items()
              if source is not None]
    return ("\n".join(header) + "\n\n\n" + "\n\n\n".join(bodies) + "\n\n" + "\n".join(aliases) + "\n",
            refused, reads, reached)


_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
# Python's builtins that reach attributes or code by name: Triton's compiler evaluates getattr on its own
# values (a red team's `getattr(x, "handle")`, with defaults for what the compiler's values lack, compiled),
# while the interpreter hands them a block's NumPy array.
# Python's containers that change in place: a kernel may not make or change one at compile time (the compiler
# reads a loop's body twice, the interpreter runs it once a pass: a ninth red team's list reversed in a loop
# ended in another state on each side)
_CHANGING = (list, dict, set, bytearray)
_INTROSPECTION = frozenset({"getattr", "hasattr", "setattr", "delattr", "vars", "dir", "globals", "locals", "eval",
                            "exec", "compile", "__import__", "open", "breakpoint", "type", "object", "super"})


def _importable(module: str, value) -> bool:
    """Whether `value` is the module named `module`, a name that is only a module's name."""
    return bool(_MODULE_NAME.fullmatch(module or "")) and sys.modules.get(module) is value


def _rebuilt(name: str, value, todo: list) -> str | None:
    """The line that binds `name` as Triton's compiler would see it ("= other" for a @triton.jit function
    under another name), or None for a global it is not to be given: of a kind it refuses, or a module
    other than Triton's and math (whatever a kernel reaches through another module, NumPy's or operator's,
    is Python that only the interpreter runs, in a branch the compiler may never read)."""
    if not name.isidentifier():
        return None
    fn = _jit_fn(value)
    if fn is not None:
        todo.append(fn)
        if not fn.__name__.isidentifier():
            return None
        return f"= {fn.__name__}" if fn.__name__ != name else ""
    if isinstance(value, types.ModuleType):
        module = getattr(value, "__name__", "")
        if _importable(module, value) and (module == "math" or module.split(".")[0] == "triton"):
            return f"import {module} as {name}"
        return None
    if _constant(value) is not None:
        return f"{name} = {_constant(value)}"
    if _tritons_class(type(value)) and type(value).__name__ == "constexpr":
        inner = _constant(getattr(value, "value", _MISSING))
        return None if inner is None else f"{name} = triton.language.constexpr({inner})"
    if _is_jit(value) and _tritons_own(value.fn, value):   # Triton's own, imported by its name (tl.sigmoid)
        return f"from {value.fn.__module__} import {value.fn.__name__} as {name}"
    if type(value).__name__ == "ConstexprFunction" and _tritons_class(type(value)):
        return _constexpr_function(name, value)
    own, qualname = getattr(value, "__module__", None) or "", getattr(value, "__qualname__", "")
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)) and own.split(".")[0] == "triton" \
            and qualname.isidentifier() and _MODULE_NAME.fullmatch(own) \
            and getattr(sys.modules.get(own), qualname, None) is value:
        return f"from {own} import {qualname} as {name}"
    return None


# A @triton.constexpr_function runs as Python: where the compiler calls it (the front end's process) and in
# the interpreter alike, on whatever it is handed. So only arithmetic on numbers is taken: the statements
# and expressions below, calls of these builtins and of math's functions, and globals that are numbers,
# strings, dtypes or math (nothing that reaches an attribute or a function of anything else).
_CONSTEXPR_STATEMENTS = (ast.Return, ast.Assign, ast.AugAssign, ast.If, ast.For, ast.Pass, ast.Expr)
_CONSTEXPR_EXPRESSIONS = (ast.Constant, ast.Name, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp,
                          ast.Tuple, ast.List, ast.Subscript, ast.Call, ast.Attribute, ast.Slice)
_CONSTEXPR_BUILTINS = {"min", "max", "abs", "int", "float", "bool", "round", "len", "range", "divmod", "pow"}


def _constexpr_function(name: str, value) -> str | None:
    """The lines that define a @triton.constexpr_function for Triton's compiler, or None where it does more
    than arithmetic on numbers (see above)."""
    fn = getattr(value, "fn", None)
    if not isinstance(fn, types.FunctionType) or not fn.__name__.isidentifier() or fn.__closure__:
        return None
    try:
        node = ast.parse(_def_source(fn)).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return None
    if not isinstance(node, ast.FunctionDef) or node.name != fn.__name__ or node.args.vararg or node.args.kwarg:
        return None
    node.decorator_list, node.returns = [], None
    arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
    for arg in arguments:
        arg.annotation = None
    local = {a.arg for a in arguments} | {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                                          and isinstance(n.ctx, ast.Store)}
    lines = []
    # No state kept from one call to the next: a default that is a list, a store into an item (a red team's
    # `memo=[...]` carried what it had read of one call's text into the next)
    if any(isinstance(sub, (ast.List, ast.Dict, ast.Set)) for d in [*node.args.defaults, *node.args.kw_defaults]
           if d is not None for sub in ast.walk(d)) or \
            any(isinstance(t, (ast.Subscript, ast.Attribute)) for sub in ast.walk(node)
                if isinstance(sub, (ast.Assign, ast.AugAssign))
                for t in (sub.targets if isinstance(sub, ast.Assign) else [sub.target])):
        return None
    for part in [*node.body, *node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]:
        for sub in ast.walk(part):
            if isinstance(sub, ast.stmt) and not isinstance(sub, _CONSTEXPR_STATEMENTS):
                return None
            if isinstance(sub, ast.expr) and not isinstance(sub, _CONSTEXPR_EXPRESSIONS):
                return None
            if isinstance(sub, ast.Expr) and not isinstance(sub.value, ast.Constant):
                return None
            if isinstance(sub, ast.Call) and not (isinstance(sub.func, ast.Name) and sub.func.id in _CONSTEXPR_BUILTINS
                                                  and sub.func.id not in local and sub.func.id not in fn.__globals__
                                                  or _math_function(sub.func, fn)):
                return None
            if isinstance(sub, ast.Attribute) and not (_math_function(sub, fn) or _math_constant(sub, fn)):
                return None
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id not in local \
                    and sub.id not in _CONSTEXPR_BUILTINS:
                if fn.__globals__.get(sub.id) is math:
                    continue
                text = _constant(fn.__globals__.get(sub.id, _MISSING))
                if text is None:
                    return None
                lines.append(f"{sub.id} = {text}")
    lines.append("@triton.constexpr_function\n" + ast.unparse(node))
    if name != fn.__name__:
        lines.append(f"{name} = {fn.__name__}")
    return "import math\n" + "\n".join(dict.fromkeys(lines))


def _math_function(node, fn) -> bool:
    """`math.f`, with math the module and f one of its functions."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
        and fn.__globals__.get(node.value.id) is math and isinstance(getattr(math, node.attr, None), types.BuiltinFunctionType)


def _math_constant(node, fn) -> bool:
    """`math.pi`, `math.inf`: a float of math's."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
        and fn.__globals__.get(node.value.id) is math and type(getattr(math, node.attr, None)) is float


def reads_changed(reads: list) -> list:
    """The names of `reads` (source_for_compiler) bound to another object now."""
    changed = []
    for where, name, value in reads:
        if isinstance(where, dict):
            now = where.get(name, _MISSING)
        else:
            try:
                now = where.cell_contents
            except ValueError:
                now = _MISSING
        if now is not value:
            changed.append(name)
    return changed


def compiler_message(error: BaseException) -> str:
    """A compile error's text, with the errors inside the @triton.jit functions it called."""
    parts, cause = [str(error).strip()], error.__cause__
    while cause is not None and len(parts) < 4:
        parts.append(str(cause).strip())
        cause = cause.__cause__
    return "\n".join(p for p in parts if p)


def frontend(fn, signature, constexprs, attrs, options, target) -> str | None:
    """Triton's front end on one launch (the source to Triton IR for `target`): None where it compiles,
    else the compiler's message. Raises only where no front end can be set up here (the machine's)."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend
    from triton.compiler.errors import CompilationError
    target = GPUTarget(*target)
    backend = make_backend(target)
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    options = backend.parse_options(dict(options, **src.parse_options()))
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    setup = (options, backend.get_codegen_implementation(options), backend.get_module_map(), context)
    try:   # (Triton 3.5 on also hands it the target)
        with_target = "target" in inspect.signature(src.make_ir).parameters
        module = src.make_ir(*((target,) if with_target else ()), *setup)
    except Exception as e:  # noqa: BLE001 - whatever the front end raises is its verdict on the source
        return compiler_message(e) if isinstance(e, CompilationError) else f"{type(e).__name__}: {e}"
    return _to_gpu_ir(backend, src, options, module)


def _to_gpu_ir(backend, src, options, module) -> str | None:
    """The back end's first two stages (Triton IR optimised, then laid out for the GPU: ttir, ttgir), which
    are MLIR passes that run the same on any machine: None where they pass, else why they failed (a combine
    function that joins and sums its scalars passes the front end and fails here). Stages that need the GPU's
    tools (PTX, the binary) are the informational compile's (check), which gives no verdict."""
    stages = {}
    try:
        takes_language = len(inspect.signature(backend.add_stages).parameters) > 2
        backend.add_stages(stages, options, *((src.language,) if takes_language else ()))
        passes = [stages[name] for name in ("ttir", "ttgir")]
    except Exception:  # noqa: BLE001 - a back end this cannot drive: no verdict, never the student's error
        return None
    metadata = {}
    for name, run in zip(("ttir", "ttgir"), passes):
        try:   # (MLIR's diagnostics go to the front end's process's stderr, which nobody reads)
            module = run(module, metadata)
        except Exception as e:  # noqa: BLE001 - a failed pass is the compiler's verdict on the kernel
            return f"Triton's compiler fails on it after its front end, in its {name} passes ({type(e).__name__}: {e})"
    return None


# The front end's process: imports the kernels rebuilt (as files, where Triton reads their source) and
# answers each request with the launches it refuses, a JSON line after MARK.
_FRONTEND_CHILD = r'''
import contextlib, copy, importlib.util, json, os, pathlib, sys, tempfile, warnings
warnings.simplefilter("ignore")
sys.path[:0] = sys.argv[1:]   # the grader, then the Triton the checked process runs
MARK = "@@frontend@@"
try:
    from grader.student.gpu_compile import GRADING_TARGETS, compile_jobs, frontend
    import triton.compiler.compiler
except Exception as e:
    print(MARK + json.dumps({"unavailable": repr(e)}), flush=True)
    sys.exit(0)
from grader.student.gpu_compile import merge_sets, police_compile_time, record_visits, remember_tritons_own
remember_tritons_own()
visits_now = record_visits()   # (filled in by the compiler as it compiles)
values_now = police_compile_time()
folder = tempfile.mkdtemp(prefix="grader-frontend-")   # the modules it imports; removed when its stdin ends
print(MARK + json.dumps({"ready": True, "folder": folder}), flush=True)
sys.path.insert(0, folder)
target = list(GRADING_TARGETS.values())[0]
# A launch's scalar values (a row's offset, a seed) are the compiler's only by their type and whether they
# are multiples of 16: a check that launches once a row asks the same compile hundreds of times. Each
# module is imported once and each compile made once (its verdict, and what the compiler visited and was
# given, kept under the module's text and the job).
modules, judged_jobs = {}, {}
for n, line in enumerate(sys.stdin):
    request, failures, judged, compiled = json.loads(line), [], 0, 0
    visited, values = {}, {}   # of this request's compiles
    try:
        with contextlib.redirect_stdout(sys.stderr):
            module = modules.get(request["module"])
            if module is None:
                name = f"student_kernels_{n}"
                path = os.path.join(folder, name + ".py")
                pathlib.Path(path).write_text(request["module"])
                spec = importlib.util.spec_from_file_location(name, path)
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                spec.loader.exec_module(module)
                modules[request["module"]] = module
            unknown = []
            jobs = compile_jobs(module, request["specs"], unknown)
            failures += [[kernel, f"its argument `{name}` is of a kind Triton's launcher cannot hand a kernel"]
                         for kernel, name in unknown]
            for key, (spec_, fn, signature, constexprs, attrs, options) in jobs.items():
                job = (request["module"], key, json.dumps(sorted(attrs.items()), default=str))
                if job not in judged_jobs:
                    visits_now.clear()
                    values_now.clear()
                    message = frontend(fn, signature, constexprs, attrs, options, target)
                    judged_jobs[job] = (message, copy.deepcopy(visits_now), copy.deepcopy(values_now))
                    compiled += 1
                message, job_visits, job_values = judged_jobs[job]
                merge_sets(visited, job_visits)
                merge_sets(values, job_values)
                judged += 1
                if message:
                    failures.append([spec_["kernel"], message])
    except Exception as e:
        failures.append(["", f"{type(e).__name__}: {e}"])
    print(MARK + json.dumps({"failures": failures, "judged": judged, "compiled": compiled,
                             "visited": {name: {kinds: sorted(nodes) for kinds, nodes in calls.items()}
                                         for name, calls in visited.items()},
                             "values": {name: {kinds: {i: sorted(v) if i == "static" else {k: sorted(s) for k, s in v.items()}
                                                       for i, v in nodes.items()} for kinds, nodes in calls.items()}
                                        for name, calls in values.items()}}), flush=True)
import shutil
shutil.rmtree(folder, ignore_errors=True)   # (one was left in /tmp by every process that checked a kernel)
'''
_FRONTEND_MARK = "@@frontend@@"


def merge_sets(into: dict, more: dict) -> None:
    """Add `more` to `into`: dictionaries of dictionaries whose leaves are sets (the visits and values of
    compiles, record_visits and police_compile_time), the sets joined."""
    for key, value in more.items():
        if isinstance(value, dict):
            merge_sets(into.setdefault(key, {}), value)
        else:
            into[key] = into.get(key, set()) | value


class FrontendFailed(Exception):
    """The front end's process did not start or answer."""
_frontend_state: dict = {}     # "proc": the front end's process; "unavailable": why there is none;
                               # "compiled": how many compiles it made (launches that differ only in
                               # values the compiler does not see share one)
_FRONTEND_DONE: dict = {}


def _frontend_reply(proc, timeout_s: float):
    import select
    deadline = time.monotonic() + timeout_s
    buffer = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if not ready:
            raise TimeoutError
        chunk = os.read(proc.stdout.fileno(), 1 << 16)
        if not chunk:
            raise EOFError
        buffer += chunk
        for line in buffer.split(b"\n")[:-1]:
            text = line.decode(errors="replace")
            if text.startswith(_FRONTEND_MARK):
                return json.loads(text[len(_FRONTEND_MARK):])
        buffer = buffer[buffer.rfind(b"\n") + 1:]


def _frontend_process():
    proc = _frontend_state.get("proc")
    if proc is not None and proc.poll() is None:
        return proc
    if "unavailable" in _frontend_state:
        return None
    # Isolated (-I: no PYTHON* variable, no user site) and with an environment of its own: nothing the
    # notebook set in its os.environ reaches it (a red team's PYTHONHOME kept it from starting at all).
    env = {"PATH": os.defpath, "HOME": tempfile.gettempdir(), "LANG": "C.UTF-8"}
    proc = None
    try:
        import triton   # the child imports the Triton this process runs (where PYTHONPATH put it, too)
        places = [str(Path(__file__).resolve().parents[2]), str(Path(triton.__file__).resolve().parents[1])]
        start = subprocess.Popen   # (by this name: test_colab reads the notebooks' modules for file opens)
        proc = start([sys.executable, "-I", "-c", _FRONTEND_CHILD, *places],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        hello = _frontend_reply(proc, FRONTEND_TIMEOUT_S)
    except (OSError, ValueError, TimeoutError, EOFError) as e:
        hello = {"failed": repr(e)}
    if not hello.get("ready"):
        if proc is not None:
            _stop_frontend(proc)
        if "unavailable" not in hello:   # it did not start (limits the notebook set, say): refused, not unjudged
            raise FrontendFailed(str(hello.get("failed", "no answer"))[:200])
        # This Triton has no front end to run (its import failed): the machine's, not the notebook's
        _frontend_state["unavailable"] = str(hello["unavailable"])[:200]
        print(f"Note: Triton's compiler front end could not be started here ({_frontend_state['unavailable']}): "
              f"kernels are judged by the interpreter and a reading of their source only.")
        return None
    _frontend_state["proc"], _frontend_state["folder"] = proc, hello.get("folder")
    atexit.register(_stop_frontend, proc)
    return proc


def _stop_frontend(proc) -> None:
    with contextlib.suppress(OSError):
        proc.stdin.close()      # its loop ends
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    with contextlib.suppress(OSError):
        proc.stdout.close()


def frontend_refusals(module: str, specs: list) -> list | None:
    """[(kernel, the compiler's message)] of the launches (`launch`'s descriptions) that Triton's front end
    refuses for the grading GPU, in its own process; None where no front end runs here (no verdict). A front
    end that does not answer in FRONTEND_TIMEOUT_S, or dies, refuses: an honest kernel takes milliseconds."""
    key = _request_key(module, specs)
    if key in _FRONTEND_DONE:
        return _FRONTEND_DONE[key][0]
    try:
        proc = _frontend_process()
    except FrontendFailed as e:
        return [("", f"Triton's compiler front end did not start ({e})")]
    if proc is None:
        return None
    visited, values = {}, {}
    try:
        proc.stdin.write((json.dumps({"module": module, "specs": specs}, default=str) + "\n").encode())
        proc.stdin.flush()
        reply = _frontend_reply(proc, FRONTEND_TIMEOUT_S)
        verdict = [tuple(f) for f in reply["failures"]]
        _frontend_state["compiled"] = _frontend_state.get("compiled", 0) + int(reply.get("compiled", 0))
        visited = {name: {kinds: frozenset(nodes) for kinds, nodes in calls.items()}
                   for name, calls in reply["visited"].items()}
        values = {name: {kinds: {i if i == "static" else int(i): frozenset(v) if i == "static" else
                                 {key: frozenset(s) for key, s in v.items()} for i, v in nodes.items()}
                         for kinds, nodes in calls.items()}
                  for name, calls in reply.get("values", {}).items()}
    except (OSError, ValueError, KeyError, TypeError, TimeoutError, EOFError) as e:
        proc.kill()
        _stop_frontend(proc)
        _frontend_state.pop("proc", None)
        verdict = [("", f"Triton's compiler did not finish with it ({type(e).__name__})")]
    _FRONTEND_DONE[key] = (verdict, visited, values)
    return verdict


def frontend_visited(module: str, specs: list) -> dict:
    """{function name: {the kinds of a call it was compiled for (record_visits): the indices (body_nodes) of
    the nodes of its body that Triton's code generator visited}} in the front end's compile of these
    launches (frontend_refusals, asked first)."""
    return _FRONTEND_DONE.get(_request_key(module, specs), ((), {}, {}))[1]


def frontend_values(module: str, specs: list) -> dict:
    """{function name: {the kinds of a call: {index in body_nodes: {unrolled loops' indices: {value_kind}}},
    "static": {unrolled loops}}}: what each expression gave the compiler in the front end's compile of these
    launches (police_compile_time; frontend_refusals, asked first)."""
    return _FRONTEND_DONE.get(_request_key(module, specs), ((), {}, {}))[2]


# ---------------------------------------------------------------------------------------------------
# What the compiler compiled, and only that, is what the interpreter may run. The compiler decides a
# branch whose condition it knows (a constexpr, `isinstance(...)` of its own objects) when it compiles,
# and never reads the other; the interpreter decides the same condition with its own objects, which may
# differ (a red team's `isinstance(tl.range(1), range)` and `hasattr(tl.multiple_of, "func")`), and
# then runs plain Python the compiler never saw. So each node of a body the compiler did not visit is
# made, for the launch, into an error the interpreter raises if it gets there (`as_compiled`).

def body_nodes(fdef) -> list:
    """The nodes of a function's body in one fixed order (each statement's, breadth first): how the
    compiler's process and this one name them."""
    return [node for statement in fdef.body for node in ast.walk(statement)]


def record_visits() -> dict:
    """In the front end's process: Triton's code generator notes, for each @triton.jit function it compiles,
    the nodes of its body it visits, for each kind of call it compiles it for ({name: {call_kinds as JSON:
    {index in body_nodes}}}; the launched kernel's kind is "launch"). Every visit_* is watched, since some
    call others directly. (A node compiled for a call on constexpr numbers is not compiled for a call on
    blocks: a red team ran float() of blocks in a helper the compiler had read with numbers only.)"""
    from triton.compiler import code_generator
    generator = code_generator.CodeGenerator
    visited: dict = {}
    calls: list = []   # the kinds of the calls being compiled, innermost last

    def watched(method):
        def visit(self, node, *args, **kwargs):
            nodes = vars(self).get("_grader_nodes")
            if nodes is None and isinstance(node, ast.Module) and node.body and isinstance(node.body[0], ast.FunctionDef) \
                    and _compiling_students(self):   # (not Triton's own @triton.jit functions, which share names)
                fdef = node.body[0]
                kinds = json.dumps(calls[-1]) if calls else "launch"
                nodes = self._grader_nodes = (fdef.name, kinds, {id(n): i for i, n in enumerate(body_nodes(fdef))}, fdef)
            if nodes is not None and id(node) in nodes[2]:
                visited.setdefault(nodes[0], {}).setdefault(nodes[1], set()).add(nodes[2][id(node)])
            return method(self, node, *args, **kwargs)
        return visit

    def watched_call(method):
        def call(self, fn, args, kwargs, *rest, **options):
            calls.append(call_kinds(getattr(fn, "fn", fn), args, kwargs))
            try:
                return method(self, fn, args, kwargs, *rest, **options)
            finally:
                calls.pop()
        return call

    for name, method in list(vars(generator).items()):
        if (name == "visit" or name.startswith("visit_")) and callable(method):
            setattr(generator, name, watched(method))
    if callable(vars(generator).get("call_JitFunction")):
        generator.call_JitFunction = watched_call(generator.call_JitFunction)
    return visited


def _compiling_students(generator) -> bool:
    """Whether Triton's code generator is compiling a function of the notebook's (the rebuilt module's),
    not one of Triton's own."""
    fn = getattr(getattr(generator, "jit_fn", None), "fn", None)
    return (getattr(fn, "__module__", None) or "").startswith("student_kernels")


# What Triton's compiler runs as Python while it compiles (arithmetic on constexprs, a method of a string, a
# function of math) the interpreter runs again with what the kernel holds then: for a call on blocks, the
# data. So Python that could read a block's values (its text, its handle, an internal name) or that reaches
# past Triton, math and plain values (NumPy through a Triton module's globals) is refused where the
# compiler meets it: in a kernel, only Triton's language decides what a GPU computes. (A red team computed
# the softmax with NumPy from a block's text, in code the compiler had compiled for a string.)
class CompileTimePython(Exception):
    """Python a kernel may not run at compile time (police_compile_time)."""


def police_compile_time() -> dict:
    """In the front end's process: every value an expression of a notebook's kernel gives the compiler must
    be one of Triton's, a plain value or math's (_not_for_kernels); Python's functions it may call (math's,
    a string's methods) are handed no block, nor are `min` and `max` (the interpreter runs Python's, which
    are not elementwise); no text is formatted from a block; a print is called by its own name only (the
    name the source's reading finds it by: gpu_compile.prints). Returns what it notes of the values the
    expressions gave ({name: {call_kinds as JSON: {index in body_nodes: {the indices of the unrolled loops
    around it, as JSON: {value_kind}}, "static": {index of each unrolled loop}}}}, record_visits' keys, which
    it needs called first), for the interpreter's copy to check (agrees)."""
    import triton.language as tl
    from triton.compiler import code_generator
    from triton.compiler.errors import CompilationError
    generator = code_generator.CodeGenerator
    builtins_ok = {id(f) for name, f in generator.builtin_namespace.items()
                   if name not in _INTROSPECTION and f not in _CHANGING}
    not_on_blocks = {id(generator.builtin_namespace[name]): name for name in ("min", "max")}
    printing = {id(generator.builtin_namespace["print"]), id(tl.device_print), id(tl.static_print)}
    visit, binary = generator.visit, generator._apply_binary_method
    values: dict = {}

    def refuse(self, node, message):
        raise CompilationError(getattr(getattr(self, "jit_fn", None), "src", None), node,
                               f"{message}. Triton's compiler would run this Python once, on its own stand-ins, "
                               f"where the interpreter runs it on your data; in a kernel only Triton's language "
                               f"(with math and plain numbers) may compute.")

    def checked(self, node, *args, **kwargs):
        if isinstance(node, ast.Call):
            vars(self).setdefault("_grader_callees", set()).add(id(node.func))
        value = visit(self, node, *args, **kwargs)
        if not isinstance(node, ast.expr) or not _compiling_students(self):
            return value
        text = _Source(node)   # (made into text only for a refusal: every expression of a kernel passes here)
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            refuse(self, node, f"`{text}` reads an internal name (one that starts with _)")
        what = _not_for_kernels(value, builtins_ok)
        if what:
            refuse(self, node, f"`{text}` is {what}")
        noted = vars(self).get("_grader_nodes")   # (function, kinds of call, {id(node): index}, def): record_visits'
        if noted is not None and id(node) in noted[2] and isinstance(getattr(node, "ctx", ast.Load()), ast.Load):
            builtin = isinstance(node, ast.Name) and node.id in generator.builtin_namespace \
                and generator.builtin_namespace[node.id] is value and node.id not in getattr(self, "gscope", {})
            loops = vars(self).get("_grader_loops")
            if loops is None:
                loops = self._grader_loops = (_enclosing_loops(noted[3]), set())
            noting = values.setdefault(noted[0], {}).setdefault(noted[1], {})
            if id(node) in loops[0]["iterators"] and _unwrapped(value) is tl.static_range:
                unrolled = loops[0]["iterators"][id(node)]   # (a loop the compiler unrolls)
                loops[1].add(id(unrolled))
                noting.setdefault("static", set()).add(noted[2][id(unrolled)])
            # the values of the indices of the unrolled loops around it: what it gave in each iteration
            key = json.dumps([_index_value(self.lscope.get(f.target.id)) for f in loops[0].get(id(node), ())
                              if id(f) in loops[1]])
            noting.setdefault(noted[2][id(node)], {}).setdefault(key, set()).add(value_kind(value, builtin))
        held = value.value if isinstance(value, tl.constexpr) else value
        if id(held) in printing and not (id(node) in vars(self).get("_grader_callees", ()) and (
                isinstance(node, ast.Name) and node.id == "print" or isinstance(node, ast.Attribute) and node.attr in _PRINTS)):
            refuse(self, node, f"`{text}` is a print under another name (call `print` or `tl.device_print` itself, "
                               f"and take the prints out before a check)")
        if id(held) in not_on_blocks and isinstance(node, ast.Name) and node.id == not_on_blocks[id(held)] \
                and node.id not in getattr(self, "gscope", {}):   # (Python's, not tl.minimum imported by name)
            name = not_on_blocks[id(held)]
            return _handed_no_blocks(held, lambda: refuse(
                self, node, f"Python's `{name}` is handed a block: use tl.{name}imum (the interpreter runs Python's "
                            f"`{name}`, which compares whole blocks, not their elements)"), scalars=True)
        if _pythons_callable(value, builtins_ok):
            return _handed_no_blocks(value, lambda: refuse(self, node, f"`{text}` is handed a block"))
        return value

    def checked_binary(self, *args):
        lhs, rhs = args[-2:]
        if _compiling_students(self) and ((_text(lhs) and _holds_block(rhs)) or (_text(rhs) and _holds_block(lhs))):
            refuse(self, getattr(self, "cur_node", None), "formats a block as text")
        return binary(self, *args)

    generator.visit, generator._apply_binary_method = checked, checked_binary
    return values


def _enclosing_loops(fdef) -> dict:
    """{id(node): [the `for` loops around it, outermost first]} of a def's body, and under "iterators" {id of
    a loop's iterator's function (`tl.static_range` in `for k in tl.static_range(n)`): the loop}; only loops
    whose index is a plain name."""
    found: dict = {"iterators": {}}

    def walk(node, around):
        for child in ast.iter_child_nodes(node):
            inside = around
            if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and any(
                    child is c for c in (*node.body, *node.orelse)):
                inside = around + [node]
            found[id(child)] = inside
            walk(child, inside)
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and isinstance(node.iter, ast.Call):
            found["iterators"][id(node.iter.func)] = node

    for statement in fdef.body:
        found[id(statement)] = []
        walk(statement, [])
    return found


def _unwrapped(value):
    """A tl.constexpr's value (a constexpr's, ...), anything else as it is."""
    constexpr = _numpy_and_core()[1].constexpr
    for _ in range(16):
        if not isinstance(value, constexpr):
            break
        value = value.value
    return value


class _Source:
    """An expression's source, written out only where a message needs it."""
    def __init__(self, node):
        self.node = node

    def __format__(self, spec) -> str:
        return format(ast.unparse(self.node), spec)


def _not_for_kernels(value, builtins_ok: set, depth: int = 0) -> str | None:
    """What `value` is, if a kernel's expression may not give it to the compiler, else None: plain values
    and tuples of them, Triton's own values, functions and classes (triton.language, its @triton.jit and
    constexpr functions), the modules math, triton and triton.language.*, math's functions, Triton's list
    of Python's builtins for kernels (less the introspecting ones), and methods of allowed values."""
    if depth > 16:
        return "nested too deeply"
    if value is None or value is Ellipsis or value is NotImplemented \
            or type(value) in (bool, int, float, complex, str, bytes, slice, range):
        return None     # (Triton 3.3's compiler makes `math.pi > 3` NotImplemented)
    if type(value) in (tuple, list):
        return next(filter(None, (_not_for_kernels(v, builtins_ok, depth + 1) for v in value)), None)
    if isinstance(value, types.ModuleType):
        name = getattr(value, "__name__", "")
        return None if name in ("math", "triton") or name.startswith("triton.language") else f"the module {name}"
    if id(value) in builtins_ok:
        return None
    if isinstance(value, type) and value in _CHANGING:
        return f"Python's `{value.__name__}`, whose objects change in place (a kernel keeps no Python state that " \
               f"changes: the compiler reads a loop's body twice and both sides of a run-time `if`, the interpreter " \
               f"runs what it runs, so the two would end in different states; use a tuple)"
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType, types.MethodType,
                          types.MethodWrapperType)):
        owner = getattr(value, "__self__", None)
        if type(owner) in _CHANGING:
            return f"a method of a {type(owner).__name__} (a kernel keeps no Python state that changes)"
        if isinstance(owner, types.ModuleType):
            return None if owner.__name__ == "math" else f"a function of {owner.__name__}"
        if owner is None:
            return f"Python's {getattr(value, '__name__', value)!r}"
        return _not_for_kernels(owner, builtins_ok, depth + 1)
    if isinstance(value, (type, types.FunctionType)):
        module = getattr(value, "__module__", None) or ""
        if module.startswith("triton.language") or (module == "triton" and isinstance(value, types.FunctionType)
                                                    and value.__name__ in ("cdiv", "next_power_of_2")):
            return None
        if isinstance(value, type) and _exported_by_triton_language(value):
            return None     # (tl.PropagateNan: a class of Triton's C++ module)
        return f"the {module}.{getattr(value, '__qualname__', value)}"
    module = type(value).__module__ or ""
    if module.startswith("triton.language") or module in ("triton.runtime.jit", "triton.compiler.code_generator"):
        if _tritons_class(type(value)) and type(value).__name__ == "constexpr":
            if _holds_block(value.value) or _holds_block(getattr(value.value, "__self__", None)):
                return "a tl.constexpr made of a block"   # (its text: the compiler's placeholder, the interpreter's values)
            return _not_for_kernels(value.value, builtins_ok, depth + 1)
        if _tritons_class(type(value)) and type(value).__name__ == "tuple":
            return _not_for_kernels(list(value.values), builtins_ok, depth + 1)
        return None
    if _exported_by_triton_language(type(value)):
        return None         # (tl.PropagateNan.ALL)
    return f"a {module}.{type(value).__qualname__} object"


def _exported_by_triton_language(kind) -> bool:
    """A class that triton.language itself binds (tl.PropagateNan, a class of Triton's C++ module)."""
    import triton.language as tl
    return any(value is kind for value in vars(tl).values())


def _pythons_callable(value, builtins_ok: set) -> bool:
    """A function the compiler calls as Python (math's, a string's method, triton.cdiv), not Triton's."""
    if id(value) in builtins_ok:
        return False
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType, types.MethodWrapperType)):
        return True
    return isinstance(value, types.FunctionType) and (value.__module__ or "") == "triton"


def _handed_no_blocks(fn, refuse, scalars: bool = False):
    """`fn`, refusing at a call that hands it a block (inside a tuple too; with `scalars`, a block of more
    than one element: Python's `min` of two scalars is right in the interpreter too, as in Triton's matmul
    tutorial). It keeps fn's __self__, by which the compiler decides how to hand it constexprs."""
    @functools.wraps(fn)   # (Triton's own builtins are told by attributes and a signature that this keeps)
    def call(*args, **kwargs):
        if _holds_block((args, {k: v for k, v in kwargs.items() if k not in ("_semantic", "_builder", "_generator")}),
                        scalars=scalars):
            refuse()
        return fn(*args, **kwargs)
    if hasattr(fn, "__self__"):
        call.__self__ = fn.__self__
    return call


def _holds_block(value, depth: int = 0, scalars: bool = False) -> bool:
    """Whether `value` is, or holds, one of Triton's values other than a constexpr (a block, a scalar; with
    `scalars`, not a scalar)."""
    from triton.language import core
    if depth > 16:
        return True
    if isinstance(value, core.constexpr):
        return _holds_block(value.value, depth + 1, scalars)
    if isinstance(value, dict):
        value = list(value.values())
    if type(value) in (tuple, list) or isinstance(value, getattr(core, "tuple", ())):
        return any(_holds_block(v, depth + 1, scalars) for v in getattr(value, "values", value))
    if scalars and isinstance(value, core.tensor) and not getattr(value, "shape", None):
        return False   # (a scalar: a block of no dimensions)
    return isinstance(value, core.base_value) if hasattr(core, "base_value") else isinstance(value, core.tensor)


def _text(value) -> bool:
    from triton.language import core
    return isinstance(value.value if isinstance(value, core.constexpr) else value, (str, bytes))


_SIGNATURES: dict = {}
_POSITIONAL: dict = {}   # function: its parameters' names, where all are plain positional-or-keyword ones


def call_kinds(fn, args, kwargs) -> list | None:
    """[[parameter, what it is handed]] of a call of a @triton.jit function, as the compiler specializes it
    and the interpreter can tell (_call_kind); None where the arguments do not bind."""
    signature = _SIGNATURES.get(fn)
    if signature is None:
        signature = _SIGNATURES[fn] = inspect.signature(fn)
        fn_positional = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in signature.parameters.values())
        _POSITIONAL[fn] = tuple(signature.parameters) if fn_positional else None
    names = _POSITIONAL.get(fn)
    if names is not None and not kwargs and len(args) == len(names):   # (the common call, without binding:
        return [[name, _call_kind(value)] for name, value in zip(names, args)]   # a combine function's, per element)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return [[name, _call_kind(value)] for name, value in bound.arguments.items()]


def _call_kind(value):
    """"block" for a Triton tensor, a list of its elements' kinds for a tuple (the compiler specializes on
    each), the value's expression for a constant (a number, a string, a dtype, None: a constexpr for the
    compiler), else "any"."""
    import triton.language as tl
    if isinstance(value, tl.constexpr):
        value = value.value
    if isinstance(value, tl.tensor):
        return "block"
    if type(value) in (tuple, list) or (_tritons_class(type(value)) and type(value).__name__ == "tuple"):
        return [_call_kind(v) for v in getattr(value, "values", value)]
    constant = _constant(value)
    return "any" if constant is None else constant


_NUMBER_KIND = re.compile(r"True|False|-?\d+(\.\d*)?(e[-+]?\d+)?|float\('-?(inf|nan)'\)")


def _kind_matches(mine, theirs, constexpr: bool) -> bool:
    """Whether a call the interpreter makes (`mine`) is one the compiler compiled (`theirs`): the same
    kinds, element by element; or a number where the compiler had a block (a loop's index is a Python int
    in the interpreter, a tensor in the compiler), except for a tl.constexpr parameter. "any" is only
    "any": a call the compiler compiled for other arguments tells nothing of this one (a red team's helper
    took a tuple holding a string in one call, a block in the other, and ran the first call's Python on
    the block)."""
    if mine == theirs:
        return True
    if isinstance(mine, list) and isinstance(theirs, list):
        return len(mine) == len(theirs) and all(_kind_matches(a, b, False) for a, b in zip(mine, theirs))
    return theirs == "block" and not constexpr and isinstance(mine, str) and _NUMBER_KIND.fullmatch(mine) is not None


def compiled_for(kinds, compiled: dict, constexprs: set) -> frozenset:
    """The nodes compiled for calls like this one (`kinds`, call_kinds in the interpreter) among `compiled`
    ({call_kinds as JSON: nodes}, record_visits'): for every compiled call whose arguments could be these
    (_kind_matches)."""
    return frozenset().union(*(nodes for key, nodes in compiled.items() if _call_like(kinds, key, constexprs)))


def _frozen(kinds):
    """call_kinds' lists as tuples: a key for a dict."""
    return tuple(_frozen(k) for k in kinds) if isinstance(kinds, list) else kinds


def values_compiled_for(kinds, values: dict, constexprs: set) -> dict:
    """What each expression gave the compiler in the calls like this one (`kinds`, as compiled_for matches
    them) among `values` ({call_kinds as JSON: ...}, frontend_values'), merged: {index: {unrolled loops'
    indices: {value_kind}}, "static": {unrolled loops}}."""
    found: dict = {}
    for key, nodes in values.items():
        if _call_like(kinds, key, constexprs):
            for i, there in nodes.items():
                if i == "static":
                    found[i] = found.get(i, frozenset()) | there
                    continue
                for loop_key, kinds_there in there.items():
                    found.setdefault(i, {})[loop_key] = found.get(i, {}).get(loop_key, frozenset()) | kinds_there
    return found


def _values_key(values: dict) -> str:
    """values_compiled_for's answer as a key for a dict."""
    return json.dumps({str(i): sorted(v) if i == "static" else {k: sorted(s) for k, s in v.items()}
                       for i, v in values.items()}, sort_keys=True)


def _call_like(kinds, key: str, constexprs: set) -> bool:
    """Whether a compiled call (`key`, call_kinds as JSON) could be one with these arguments' kinds."""
    theirs = json.loads(key) if key != "launch" else None
    if theirs is None or kinds is None or len(theirs) != len(kinds):
        return False
    return all(a[0] == b[0] and _kind_matches(a[1], b[1], a[0] in constexprs) for a, b in zip(kinds, theirs))


def _does_nothing(node) -> bool:
    """A statement that runs no code: a docstring or other constant on its own, `pass`, `global`."""
    return isinstance(node, (ast.Pass, ast.Global, ast.Nonlocal)) or \
        (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))


def _is_assertion(node) -> bool:
    """`tl.static_assert(condition, message)` and its kind (a module's attribute: kernels read no other)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr in ("static_assert", "device_assert")


def _only_text(node) -> bool:
    """An expression that only makes text: constants, f-strings of names and their attributes, `+` and `%`."""
    return all(isinstance(n, (ast.Constant, ast.JoinedStr, ast.FormattedValue, ast.Name, ast.Attribute, ast.BinOp,
                              ast.Add, ast.Mod, ast.Load, ast.expr_context)) for n in ast.walk(node))


def uncompiled(fdef, visited: frozenset) -> list:
    """The indices (body_nodes) of the outermost nodes of a body that run code and that the compiler did not
    compile: neither it nor any node inside it visited. (A node whose parts were visited was compiled: the
    code generator reads some nodes through their parts, a loop's `range(...)` call through its function
    and arguments.) Targets of stores, annotations and constants are left as they are."""
    nodes = body_nodes(fdef)
    index = {id(n): i for i, n in enumerate(nodes)}
    compiled = set()

    def mark(node) -> bool:
        inside = [mark(child) for child in ast.iter_child_nodes(node)]
        if index.get(id(node)) in visited or any(inside):
            compiled.add(id(node))
            return True
        return False

    for statement in fdef.body:
        mark(statement)
    outermost = []

    def find(node):
        if id(node) in compiled and _is_assertion(node):   # its message is read only if the assertion fails
            for part in [*node.args, *(k.value for k in node.keywords)]:
                if part is not (node.args[0] if node.args else None) and _only_text(part):
                    continue
                find(part)
            return
        runs = (isinstance(node, ast.stmt) and not _does_nothing(node)) or \
            (isinstance(node, ast.expr) and not isinstance(node, ast.Constant)
             and isinstance(getattr(node, "ctx", ast.Load()), ast.Load))
        if runs and id(node) not in compiled:
            outermost.append(index[id(node)])
            return
        for field, value in ast.iter_fields(node):
            if field in ("annotation", "returns"):   # (never run inside a body)
                continue
            for child in (value if isinstance(value, list) else [value]):
                if isinstance(child, ast.AST):
                    find(child)

    for statement in fdef.body:
        find(statement)
    return outermost


NOT_COMPILED = f"not compiled by Triton {os.urandom(6).hex()}"   # in a poisoned node's error: this process's
VALUE_DIFFERS = f"another value than Triton's compiler {os.urandom(6).hex()}"   # in a disagreeing node's error
_SAID_END = f" [{os.urandom(3).hex()}]"   # where the line's description in those errors ends
_AGREE = f"_grader_agrees_{os.urandom(4).hex()}"   # the checker's name: a parameter of the function around the copy


def as_compiled(fn, compiler_def: str, source: str, poison: list, runs, transformer=None, values=None):
    """`fn` (whose interpreter's form is `runs`) rebuilt from `compiler_def` (the def handed to the compiler,
    source_for_compiler) as the compiler compiled it, for the interpreter:
    - each node of `poison` (body_nodes indices) an error the interpreter raises if it gets there: a
      KeyError naming NOT_COMPILED and the line, by syntax alone (no name a notebook could rebind);
    - each expression of `values` (values_compiled_for's: what it gave the compiler, in each iteration of
      the unrolled loops around it) checked, each time it runs, to give a value the compiler had for it
      there (agrees), else a KeyError naming VALUE_DIFFERS. An f-string's fields are made as the
      compiler makes them (a constexpr's value, no format spec);
    - each loop the compiler did not unroll iterated by interpreter_lang.compiled_loop, so its index is an
      integer block as on the GPU, not a Python int.
    The checker and the loop's iterator are parameters of a function around the copy: cells of its
    closure, which no name in the notebook reaches.
    Positions are those of `source`, the function as its file has it; Triton's interpreter's own rewrite
    (`transformer`, from 3.4) is applied as to any kernel; defaults are those `runs` has.
    A copy is made once for the same function, texts, poison, values and `runs` (the interpreter calls the
    rebuilt function anew for every launch: Day 5's dropout a row at a time made it 868 times, 9 of 40 s)."""
    try:
        key = (fn, compiler_def, source, frozenset(poison), runs, transformer, _values_key(dict(values or {})))
    except TypeError:   # (values not as values_compiled_for gives them: made anew)
        key = None
    rebuilt = _REBUILT.get(key) if key is not None else None
    if rebuilt is None:
        rebuilt = _copy_as_compiled(fn, compiler_def, source, poison, runs, transformer, values)
        if key is not None:
            if len(_REBUILT) >= _REBUILT_KEPT:
                del _REBUILT[next(iter(_REBUILT))]   # the oldest
            _REBUILT[key] = rebuilt
    rebuilt.__defaults__, rebuilt.__kwdefaults__ = runs.__defaults__, runs.__kwdefaults__
    return rebuilt


_REBUILT: dict = {}     # as_compiled's copies, the last _REBUILT_KEPT made
_REBUILT_KEPT = 256


def _copy_as_compiled(fn, compiler_def: str, source: str, poison: list, runs, transformer, values):
    """as_compiled's copy, made."""
    tree = ast.parse(compiler_def)
    fdef = tree.body[0]
    original = ast.parse(source).body[0]
    nodes, places = body_nodes(fdef), body_nodes(original)
    if [type(n) for n in nodes] == [type(n) for n in places]:
        for node, place in zip(nodes, places):
            ast.copy_location(node, place)
    try:
        first = inspect.getsourcelines(fn)[1] + [line.lstrip().startswith("def ")
                                                  for line in inspect.getsourcelines(fn)[0]].index(True)
    except (OSError, TypeError, ValueError):
        first = fn.__code__.co_firstlineno
    index = {id(n): i for i, n in enumerate(nodes)}
    poison, values = set(poison), dict(values or {})
    unrolled = values.pop("static", frozenset())   # the loops the compiler unrolled (tl.static_range)
    loops = _enclosing_loops(fdef)
    # An assertion's message is read by the compiler only if the assertion fails, by the interpreter at
    # every call: one the compiler did not read becomes its own source text (what a failure would show)
    messages = {id(part) for call in ast.walk(fdef) if _is_assertion(call)
                for part in [*call.args[1:], *(k.value for k in call.keywords)]}
    lines = {}

    class Rebuild(ast.NodeTransformer):
        def visit(self, node):
            i = index.get(id(node))
            if i in poison:
                line = first + getattr(node, "lineno", 1) - 1
                error = ast.Subscript(ast.Dict([], []), ast.Constant(f"{NOT_COMPILED}: line {line} of `{fn.__name__}`{_SAID_END}"),
                                      ast.Load())
                if id(node) in messages:
                    error = ast.Constant(ast.unparse(node))
                return ast.copy_location(ast.Expr(error) if isinstance(node, ast.stmt) else error, node)
            if isinstance(node, ast.For) and i not in unrolled and isinstance(node.iter, ast.Call):
                # a loop the compiler compiled as a loop: its index an integer block, as on the GPU
                node.iter = ast.copy_location(ast.Call(ast.Name(_AGREE + "_loop", ast.Load()),
                                                       [node.iter.func, *node.iter.args], node.iter.keywords), node.iter)
            if i in values and _checkable(node):
                lines[i] = (first + getattr(node, "lineno", 1) - 1, ast.unparse(node))   # (its text, before the checks)
            indices = [f.target.id for f in loops.get(id(node), ()) if index.get(id(f)) in unrolled]
            if isinstance(node, ast.FormattedValue):   # an f-string's field as the compiler makes it: the
                node.value = ast.Call(ast.Name(_AGREE + "_text", ast.Load()), [node.value], [])   # constexpr's
                node.format_spec = None                                                         # value, no spec
            node = self.generic_visit(node)
            if i in lines:
                where = [ast.Tuple([ast.Name(t, ast.Load()) for t in indices], ast.Load())] if indices else []
                return ast.copy_location(ast.Call(ast.Name(_AGREE, ast.Load()), [ast.Constant(i), node, *where], []),
                                         node)
            return node

    fdef.body = [Rebuild().visit(statement) for statement in fdef.body]
    for arg in (*fdef.args.posonlyargs, *fdef.args.args, *fdef.args.kwonlyargs, fdef.args.vararg, fdef.args.kwarg):
        if arg is not None:
            arg.annotation = None   # (nothing of the notebook's runs when the def does)
    if transformer is not None:
        tree = transformer.visit(tree)
    outer = ast.FunctionDef(name=_AGREE + "_around", args=ast.arguments(
        posonlyargs=[], args=[ast.arg(_AGREE), ast.arg(_AGREE + "_text"), ast.arg(_AGREE + "_loop")], kwonlyargs=[],
        kw_defaults=[], defaults=[]),
        body=[*tree.body, ast.Return(ast.Name(fn.__name__, ast.Load()))], decorator_list=[], returns=None,
        type_params=[])
    tree = ast.Module([outer], type_ignores=[])
    ast.fix_missing_locations(tree)
    ast.increment_lineno(tree, first - 1)
    namespace: dict = {}
    exec(compile(tree, fn.__code__.co_filename, "exec"), fn.__globals__, namespace)
    rebuilt = namespace[outer.name](_agreement(fn.__name__, {i: values[i] for i in lines}, lines), _unwrapped,
                                    interpreter_lang.compiled_loop)
    return rebuilt


def _checkable(node) -> bool:
    """An expression whose value a call around it can check: one that is read (not a target), not a
    constant, and not a part that only its parent's syntax takes (an f-string's field, a slice, a *)."""
    return isinstance(node, ast.expr) and isinstance(getattr(node, "ctx", ast.Load()), ast.Load) \
        and not isinstance(node, (ast.Constant, ast.FormattedValue, ast.Slice, ast.Starred, ast.Lambda)) \
        and not (isinstance(node, ast.Tuple) and any(isinstance(e, ast.Slice) for e in node.elts))


def _agreement(name: str, values: dict, lines: dict):
    """The check an as_compiled copy calls on the value of each expression `values` names: the value, if
    it agrees with what the compiler had, else a KeyError naming VALUE_DIFFERS and the line."""
    # {index: {the indices of the unrolled loops around it: [value_kind parsed]}}
    kinds = {i: {tuple(json.loads(key)): [json.loads(k) for k in v] for key, v in per.items()} for i, per in values.items()}
    check, said, tensor = agrees, _said_kind, _numpy_and_core()[1].tensor
    plain = {i for i, per in kinds.items() if list(per) == [()]}   # (in no unrolled loop)
    blocks = {i for i in plain if ["b"] in kinds[i][()]}
    # the function or module that last agreed at each node: the same object agrees again (a combine
    # function's `tl.maximum`, read for every pair of elements, is checked once)
    agreed = dict.fromkeys(kinds)

    def agree(i, value, loop=()):
        if type(value) is tensor and i in blocks or value is agreed[i]:
            return value
        if loop and any(type(k) is not int for k in loop):   # (an index rebound in the loop: a 0-d block)
            loop = tuple(_index_value(k) for k in loop)
        had = kinds[i].get(loop, ())
        if check(had, value):
            if i in plain and isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type)):
                agreed[i] = value
            return value
        line, text = lines[i]
        in_loop = f" (in the unrolled iteration {', '.join(map(str, loop))})" if loop else ""
        raise KeyError(f"{VALUE_DIFFERS}: line {line} of `{name}`, where `{text}` gave the compiler{in_loop} "
                       f"{' or '.join(sorted({said(k) for k in had})) or 'nothing'}, and the interpreter "
                       f"{said(value, True)}{_SAID_END}")
    return agree


def _index_value(value):
    """An unrolled loop's index as both sides key it: an int (a constexpr's), else None (an index the loop's
    body rebound: a block to the compiler, an int or a 0-d block to the interpreter)."""
    value = _unwrapped(value)
    return value if type(value) is int else None


def _said_kind(kind, mine: bool = False) -> str:
    """A value_kind (or, `mine`, a value of the interpreter's) in words, for a message."""
    if mine:
        import triton.language as tl
        value = _unwrapped(kind)
        if type(value) in (bool, int, float, str):
            return repr(value[:60] if type(value) is str else value)
        kind = _kind(value, False, 0)
        if kind[0] == "T" and not isinstance(value, getattr(tl.core, "base_value", tl.tensor)):
            kind = ["T", _triton_name(value)]
        elif kind[0] == "P":
            name = getattr(value, '__name__', type(value).__name__)
            return f"the notebook's function {name}" if isinstance(value, types.FunctionType) else f"Python's {name}"
    if kind[0] == "s":
        return repr(kind[1][:60])
    if kind[0] == "d":
        return f"the dtype {kind[1]}"
    if kind[0] == "T":   # (a name with "@": a function not Triton's own, a notebook's @triton.jit one)
        return f"Triton's {kind[1]}" if not kind[1].startswith("@") else f"the notebook's function {kind[1][1:]}"
    words = {"n": "None", "b": "a block", "B": "a builtin", "P": "a Python object"}
    if kind[0] == "c":
        return repr(kind[1])
    if kind[0] == "t":
        return "(" + ", ".join(_said_kind(k) for k in kind[1]) + ("," if len(kind[1]) == 1 else "") + ")"
    return words[kind[0]]


def dispatching(fn, compiler_def: str, source: str, calls: dict, base, transformer=None, values=None):
    """A stand-in for a helper `fn` that the interpreter calls in place of `base` (its rewrite, or its own
    function): at each call, `base` as the compiler compiled it for calls like it (as_compiled, with what
    was compiled for those calls (compiled_for) and what each expression gave the compiler there,
    `values` being {call_kinds as JSON: {index: {value_kind}}}; each variant made once). Its globals are
    the helper's, as the interpreter expects of the functions it calls (it looks there for `tl`)."""
    fdef = ast.parse(compiler_def).body[0]
    constexprs = {a.arg for a in (*fdef.args.posonlyargs, *fdef.args.args, *fdef.args.kwonlyargs) if a.annotation}
    made, kinds_of, nodes_for, values_for, poison_of, rebuild = \
        {}, call_kinds, compiled_for, values_compiled_for, uncompiled, as_compiled

    by_kinds, frozen, values_key = {}, _frozen, _values_key   # (by closure: `call` runs in the helper's globals)

    def call(*args, **kwargs):
        kinds = kinds_of(fn, args, kwargs)
        variant = by_kinds.get(frozen(kinds))
        if variant is None:
            nodes, checks = nodes_for(kinds, calls, constexprs), values_for(kinds, values or {}, constexprs)
            key = (nodes, values_key(checks))
            variant = made.get(key)
            if variant is None:
                poison = poison_of(fdef, nodes)
                variant = made[key] = rebuild(fn, compiler_def, source, poison, base, transformer, checks) \
                    if poison or checks else base
            by_kinds[frozen(kinds)] = variant
        return variant(*args, **kwargs)

    stand_in = types.FunctionType(call.__code__, fn.__globals__, fn.__name__, None, call.__closure__)
    stand_in.compiler_def = compiler_def   # the helper as compiled (interpreter_lang reads a combine function's)
    return stand_in


# ---------------------------------------------------------------------------------------------------
# The same expression must give the compiler and the interpreter the same value. The compiler runs Python
# (isinstance, a tuple's index, a dict's get) on its own objects; the interpreter runs it again on its own,
# which differ (tl.range is Python's range there, a constexpr a plain int). A condition the two decide
# differently need not branch: the seventh red team's `(0.0, block)[C]` is 0.0 to the compiler, which
# every rule accepts, and the block to the interpreter, whose values `math.exp` then read. So the
# compiler's process notes what each expression of a notebook's function gave it (value_kind), and the
# interpreter's copy of the function checks each one against that (agrees): another value stops the launch.

def value_kind(value, builtin: bool = False) -> str:
    """What an expression gave Triton's compiler, as JSON the interpreter's process can check a value
    against (agrees): ["c", number] for a number or bool, ["n"] None, ["s"] text, ["t", [...]] a tuple,
    ["b"] a block (any of Triton's values), ["B"] a name of Triton's list of Python builtins (`min` is
    Triton's to the compiler, Python's to the interpreter), ["T"] another object of Triton's (a function,
    a dtype, a module), ["P"] any other (math's functions, Python's classes)."""
    return json.dumps(_kind(value, builtin, 0))


def _kind(value, builtin: bool, depth: int):
    from triton.language import core
    value = _unwrapped(value)
    if value is None:
        return ["n"]
    if type(value) in (bool, int, float):
        return ["c", value]
    if type(value) in (str, bytes):
        return ["s", value if type(value) is str else value.decode("latin-1")]
    if isinstance(value, core.dtype) and _tritons_class(type(value)):
        return ["d", str(value)]
    if depth < 16 and (type(value) in (tuple, list) or isinstance(value, getattr(core, "tuple", ()))):
        return ["t", [_kind(v, False, depth + 1) for v in getattr(value, "values", value)]]
    if isinstance(value, (core.tensor, getattr(core, "tensor_descriptor_base", core.tensor))):
        return ["b"]
    if builtin:
        return ["B"]
    return ["T", _triton_name(value)] if _of_triton(value) else ["P"]


def _stands_in_for(value, name: str) -> bool:
    """Whether the interpreter has bound `value` (one of Triton's own) to `name` in Triton's language for
    this launch: its stand-in for the function the compiler had (tl.range, tl.reduce, tl.multiple_of)."""
    import triton.language as tl
    modules = (tl, tl.core, getattr(tl, "math", None), getattr(tl, "standard", None))
    return any(module is not None and getattr(module, name, None) is value for module in modules)


_METHOD_NAMES: dict = {}   # id(function) -> (function, the name a block's class binds it to)


def _method_name(method) -> str | None:
    """The name a block's method has on the block's class (`x.sum` is "sum" whatever the function bound
    there is called: the interpreter binds wrappers), or None for another bound method."""
    from triton.language import core
    if not isinstance(method.__self__, getattr(core, "base_value", core.tensor)):
        return None
    kept = _METHOD_NAMES.get(id(method.__func__))
    if kept is None or kept[0] is not method.__func__:
        names = [k for cls in type(method.__self__).__mro__ for k, v in vars(cls).items() if v is method.__func__]
        kept = _METHOD_NAMES[id(method.__func__)] = (method.__func__, names[0] if names else None)
    return kept[1]


def _triton_name(value) -> str:
    """The name of one of Triton's functions, classes or modules as both sides can tell it: through a
    partial, a bound method, a @triton.jit object and the interpreter's wrappers of Triton's builtins (which
    keep the builtin as their `member` default). A function that is not Triton's own (a notebook's
    @triton.jit helper, or one that only states Triton's module and name) is named with a leading "@": it
    agrees with none of Triton's, nor with a stand-in."""
    for _ in range(8):
        if isinstance(value, functools.partial):
            value = value.func
        elif isinstance(value, types.MethodType):
            method = _method_name(value)   # a block's method, by its name on the block's class
            if method is not None:
                return method if _is_tritons(value.__func__) else "@" + method
            value = value.__func__
        elif _tritons_class(type(value)) and hasattr(value, "__self__") and hasattr(value, "__func__"):
            value = value.__func__          # the compiler's block method (BoundJITMethod, Triton 3.4 on)
        elif isinstance(value, types.FunctionType) and "member" in (value.__kwdefaults__ or {}):
            value = value.__kwdefaults__["member"]
        elif _tritons_class(type(value)) and isinstance(getattr(value, "fn", None), types.FunctionType):
            value = value.fn
        else:
            break
    if isinstance(value, types.ModuleType):   # (by its last part: the compiler reads libdevice as its GPU's)
        name = str(getattr(value, "__name__", "")).rsplit(".", 1)[-1]
    elif isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
        name = str(getattr(value, "__name__", ""))
    else:
        return type(value).__name__
    return name if _is_tritons(value) or value is print else "@" + name


def _of_triton(value) -> bool:
    """Whether an object is Triton's (_is_tritons): a module, a function (also through a partial, as the
    interpreter's tl.multiple_of, or a bound method, as a block's), a class, or an object of Triton's class
    (a @triton.jit function, the notebook's too: _triton_name tells those apart)."""
    if isinstance(value, functools.partial):
        value = value.func
    if isinstance(value, types.MethodType):   # (a block's method: `p.sum`, a @triton.jit function of Triton's)
        value = value.__func__
    if isinstance(value, (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType)):
        return _is_tritons(value)
    return _tritons_class(type(value))


def agrees(kinds, value) -> bool:
    """Whether the interpreter's `value` for an expression is one the compiler had for it (`kinds`, parsed
    value_kind's): the same number (also as a 0-d block of the interpreter's, to its dtype's precision),
    None, text, tuple; a block or a number where the compiler had a block (a loop's index is an int to the
    interpreter); one of Triton's objects where it had one (the interpreter's stand-ins are Triton's too);
    a Python builtin for a builtin's name; else any object not Triton's. Reads no method of the value's
    own: a notebook's object cannot answer for itself."""
    return any(_agrees(kind, value, 0) for kind in kinds)


@functools.cache
def _numpy_and_core():
    import numpy
    from triton.language import core
    return numpy, core


def _agrees(kind, value, depth: int) -> bool:
    np, core = _numpy_and_core()
    value = _unwrapped(value)
    tag = kind[0]
    block = isinstance(value, getattr(core, "base_value", core.tensor))
    number = type(value) in (bool, int, float) or isinstance(value, (np.bool_, np.integer, np.floating))
    if tag == "c":
        if block:
            data = getattr(getattr(value, "handle", None), "data", None)
            if type(data) is not np.ndarray or data.shape not in ((), (1,)) or getattr(value, "shape", None):
                return False
            value, number = data.reshape(()), True
        return number and _same_number(kind[1], value)
    if tag == "n":
        return value is None
    if tag == "s":   # (the interpreter's f-strings are the compiler's: as_compiled)
        return type(value) in (str, bytes) and \
            (value if type(value) is str else value.decode("latin-1")) == kind[1]
    if tag == "d":
        return isinstance(value, core.dtype) and _tritons_class(type(value)) and str(value) == kind[1]
    if tag == "t":   # (a tuple's subclass too, torch.Size: its elements read as a tuple's, not by its methods)
        items = getattr(value, "values", value) if isinstance(value, getattr(core, "tuple", ())) else value
        items = list(tuple.__iter__(items)) if isinstance(items, tuple) else \
            list(list.__iter__(items)) if isinstance(items, list) else None
        return items is not None and len(items) == len(kind[1]) and depth < 16 \
            and all(_agrees(k, v, depth + 1) for k, v in zip(kind[1], items))
    if tag == "b":   # (None: a libdevice function's, whose body the interpreter runs; nothing of a block)
        return block or number or value is None
    if block or number or value is None or type(value) in (str, bytes, tuple, list):
        return False
    if tag == "B":
        return _of_triton(value) or getattr(value, "__module__", None) == "builtins"
    if tag == "T":   # one of Triton's, the same by name (tl.sum is not tl.max), or a stand-in of the interpreter's
        if not _of_triton(value) and value is not print:
            return False
        name = _triton_name(value)   # (a stand-in must be Triton's own: a notebook can bind its own there)
        return name == kind[1] or (not name.startswith("@") and _stands_in_for(value, kind[1]))
    return not _of_triton(value)


def _same_number(theirs, mine) -> bool:
    """A number the compiler had and one of the interpreter's: equal (NaN to NaN), or equal once the first
    is rounded to the second's NumPy type (the interpreter makes an assigned constant a float32 block)."""
    np = _numpy_and_core()[0]
    if isinstance(mine, (np.ndarray, np.generic)):
        try:
            with np.errstate(all="ignore"):
                rounded = np.asarray(theirs).astype(mine.dtype)
        except (OverflowError, ValueError, TypeError):
            return False
        mine = mine.item()
        if rounded.item() == mine or (rounded.item() != rounded.item() and mine != mine):
            return True
    return theirs == mine or (theirs != theirs and mine != mine)


def not_compiled_line(error: BaseException) -> tuple | None:
    """(why, where) an as_compiled copy stopped a launch, from the error the launch raised: why is
    NOT_COMPILED (a node the compiler did not compile) or VALUE_DIFFERS (an expression that gave another
    value than it gave the compiler); else None."""
    seen = 0
    while error is not None and seen < 8:
        for text in (*getattr(error, "args", ()), str(error)):
            for why in (NOT_COMPILED, VALUE_DIFFERS):
                if isinstance(text, str) and why in text and _SAID_END in text:
                    return why, text[text.index(why) + len(why) + 2:text.index(_SAID_END)]
        error, seen = error.__cause__ or error.__context__, seen + 1
    return None
