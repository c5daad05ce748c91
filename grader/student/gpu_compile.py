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
import inspect
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import types
from pathlib import Path

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
        return {"tensor": str(value.dtype).replace("torch.", ""), "aligned": value.data_ptr() % 16 == 0}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "value") and isinstance(getattr(value, "value"), (bool, int, float, str)):
        return value.value    # a tl.constexpr
    return {"other": type(value).__name__}


def enabled() -> bool:
    return os.environ.get("GRADER_GPU_COMPILE", "1") != "0"


def check(launches: list) -> tuple:
    """(how many compiles were judged, [(kernel name, target name, the compiler's message) of each that
    failed], [resource_usage of each kernel compiled for the grading GPU, with its kernel's name]).
    (0, [], []) when nothing could be judged."""
    kernels, seen = {}, set()
    specs = []
    for kernel, args, kwargs in launches:
        key = (id(kernel), json.dumps([args, kwargs], sort_keys=True, default=str))
        if key in seen:
            continue
        seen.add(key)
        try:
            _collect(kernel, kernels)
        except (OSError, TypeError, SyntaxError, ValueError):
            return 0, [], []    # the source cannot be had (a kernel typed at a prompt, say): no verdict
        specs.append({"kernel": kernel.fn.__name__, "args": args, "kwargs": kwargs})
    if not specs:
        return 0, [], []
    return _compile_in_child(_module_text(kernels), specs)


_DONE: dict = {}   # what was compiled already in this process, and what the compiler said


def _compile_in_child(module: str, specs: list) -> tuple:
    key = module + json.dumps(specs, sort_keys=True, default=str)
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


def _collect(kernel, kernels: dict) -> None:
    """The source of an interpreted @triton.jit function and, recursively, of those it calls."""
    fn = kernel.fn
    if fn.__name__ in kernels:
        return
    kernels[fn.__name__] = (_def_source(fn), {})
    names = set()
    _names_used(fn.__code__, names)
    for name in sorted(names):
        value = fn.__globals__.get(name)
        if type(value).__name__ in ("InterpretedFunction", "JITFunction"):   # (a lecture compiles either)
            _collect(value, kernels)
        elif isinstance(value, types.ModuleType):
            kernels[fn.__name__][1][name] = f"import {value.__name__} as {name}"
        elif isinstance(value, (bool, int, float)):
            kernels[fn.__name__][1][name] = f"{name} = {value!r}"
        elif hasattr(value, "value") and type(value).__name__ == "constexpr":
            kernels[fn.__name__][1][name] = f"{name} = triton.language.constexpr({value.value!r})"


def _names_used(code, names: set) -> None:
    names.update(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _names_used(const, names)


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


def _module_text(kernels: dict) -> str:
    header = ["import triton", "import triton.language as tl"]
    for _, globals_ in kernels.values():
        header += [line for line in globals_.values() if line not in header]
    bodies = [f"@triton.jit\n{source}" for source, _ in kernels.values()]
    return "\n".join(header) + "\n\n\n" + "\n\n\n".join(bodies) + "\n"


# The child: import the kernels (as a file, so Triton can read their source), compile each launch's
# signature for each target, print [[kernel, target, message], ...] of the compile errors as its last line.
_CHILD = r'''
import json, pathlib, sys, warnings
warnings.simplefilter("ignore")
folder = sys.argv[1]
sys.path.insert(0, folder)
sys.path.insert(1, sys.argv[2])   # where the grader is: resource_usage
try:
    from grader.student.gpu_compile import GRADING_TARGETS, resource_usage
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.errors import CompilationError
    import student_kernels
except Exception:
    print(json.dumps({"judged": 0, "failures": [], "usage": []})); sys.exit(0)
setup = json.loads(pathlib.Path(folder, "specs.json").read_text())
TYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int64": "i64",
         "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "i1"}
failures, judged, usage, jobs = [], 0, [], {}
for spec in setup["specs"]:
    fn = getattr(student_kernels, spec["kernel"])
    values = dict(zip(fn.arg_names, spec["args"]))
    values.update({k: v for k, v in spec["kwargs"].items() if k in fn.arg_names})
    options = {k: v for k, v in spec["kwargs"].items() if k in ("num_warps", "num_stages")}
    signature, constexprs, unknown = {}, {}, False
    # What the launcher assumes of a GPU launch and the compiler builds on (16-byte vector loads): pointers
    # and integers that are multiples of 16. Without it the registers said would be those of a kernel with
    # no vector loads (for Day 5's dropout 150, where an H200 ran it with 40).
    divisible = {}
    for i, name in enumerate(fn.arg_names):
        v = values.get(name)
        if fn.params[i].is_constexpr:
            signature[name], constexprs[name] = "constexpr", v
        elif isinstance(v, dict) and "tensor" in v and v["tensor"] in TYPES:
            signature[name] = "*" + TYPES[v["tensor"]]
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
        elif v is None and name not in values:
            unknown = True     # a default the launch did not pass: leave this launch unjudged
        else:
            unknown = True
    if unknown:
        continue
    # One compile per kernel, signature and options: of launches that differ only in what is a multiple of
    # 16, the one with the most (a case's sizes vary; the timed, large one is usually the aligned one).
    key = json.dumps([spec["kernel"], signature, constexprs, options], sort_keys=True, default=str)
    if key not in jobs or len(divisible) > len(jobs[key][4]):
        jobs[key] = (spec, fn, signature, constexprs, divisible, options)
for spec, fn, signature, constexprs, divisible, options in jobs.values():
    for target_name, target in setup["targets"].items():
        try:
            compiled = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=divisible),
                                      target=GPUTarget(*target), options=options)
        except CompilationError as e:
            parts, cause = [str(e).strip()], e.__cause__
            while cause is not None and len(parts) < 4:  # the error inside a called @triton.jit function
                parts.append(str(cause).strip())
                cause = cause.__cause__
            text = "\n".join(parts)
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
