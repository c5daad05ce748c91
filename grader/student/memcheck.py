"""Run a student's function once under NVIDIA's compute-sanitizer, from a notebook, and say what it found.

On a GPU nobody stops a kernel that reads or writes past its tensors: the access lands in a neighbour's
memory, or kills the CUDA context ("an illegal memory access was encountered"), and every later CUDA
call of the notebook fails. compute-sanitizer (its memcheck tool) watches every access of every kernel
and names the first bad ones: the kernel, the thread and program, the address and how far it lies from
the nearest allocation. It has to run a whole process, so `memcheck(fn, *args)` writes the function,
what it calls (its kernels, helpers, constants, modules) and its arguments to a folder, runs that as a
script under the sanitizer with PyTorch's caching allocator off (each tensor its own allocation, so
"past the end" of a tensor is outside every allocation), and prints a summary. The notebook's own
process, and its CUDA context, are not touched.
"""
from __future__ import annotations

import ast
import functools
import inspect
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import types
from pathlib import Path

WHERE = ("compute-sanitizer comes with NVIDIA's CUDA Toolkit (https://developer.nvidia.com/cuda-toolkit), in "
         "its bin folder, often /usr/local/cuda/bin.")
TIMEOUT_S = 600          # the sanitizer makes a program many times slower: small sizes run in seconds
SHOWN = 3                # distinct errors said
SCRIPT_NAME = "run.py"
RETURNED = "memcheck: the call returned"   # the script's last line: the call ran to its end


class CannotCarry(Exception):
    """A name the function uses whose value cannot be written into a script."""


@functools.lru_cache(maxsize=1)
def find_sanitizer() -> str | None:
    """The compute-sanitizer executable: on PATH, or in the usual CUDA folders."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for folder in [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda", *sorted(Path("/usr/local").glob("cuda-*"))]:
        candidate = Path(folder) / "bin" / "compute-sanitizer"
        if folder and candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


# --------------------------------------------------------------------------------------------------
# The script: the function and everything it uses, by name
# --------------------------------------------------------------------------------------------------

def _python_function(obj):
    """The Python function behind a function, a @triton.jit kernel, an autotuned or heuristic one."""
    while not isinstance(obj, types.FunctionType) and hasattr(obj, "fn"):
        obj = obj.fn
    return obj if isinstance(obj, types.FunctionType) else None


def _literal(value) -> str | None:
    """Python source that rebuilds `value`, for plain values; None for others."""
    import torch
    import triton
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, torch.dtype):
        return str(value)
    if type(value).__name__ == "constexpr" and hasattr(value, "value"):
        return f"triton.language.constexpr({value.value!r})"
    if isinstance(value, triton.Config):
        return (f"triton.Config({dict(value.kwargs)!r}, num_warps={value.num_warps}, "
                f"num_stages={value.num_stages})")
    if isinstance(value, (list, tuple)):
        parts = [_literal(v) for v in value]
        if None in parts and any(v is not None for v in value):
            return None
        body = ", ".join(parts) + ("," if isinstance(value, tuple) and len(parts) == 1 else "")
        return f"[{body}]" if isinstance(value, list) else f"({body})"
    if isinstance(value, dict):
        parts = {_literal(k): _literal(v) for k, v in value.items()}
        return None if None in parts or None in parts.values() else "{" + ", ".join(f"{k}: {v}" for k, v in parts.items()) + "}"
    return None


def script_parts(fn) -> tuple:
    """(imports, constants, definitions and other names for them): the source of `fn` and, recursively, of every function,
    class or kernel of the notebook it names, with the modules and plain values those name."""
    imports, constants, definitions, aliases, seen = {}, {}, {}, {}, set()

    def carry(obj, owner: str):
        py = _python_function(obj) if not isinstance(obj, type) else None
        target = py or obj
        if id(target) in seen:
            return
        seen.add(id(target))
        try:
            source = textwrap.dedent(inspect.getsource(target))
        except (OSError, TypeError):
            raise CannotCarry(f"the source of `{getattr(target, '__name__', owner)}` cannot be read") from None
        definitions[getattr(target, "__qualname__", owner)] = source
        spaces = dict(getattr(target, "__globals__", None) or vars(sys.modules.get(target.__module__, sys)))
        code = getattr(target, "__code__", None)   # names of an enclosing function's (a closure's) too
        for name, cell in zip(code.co_freevars if code else (), getattr(target, "__closure__", None) or ()):
            try:
                spaces[name] = cell.cell_contents
            except ValueError:     # a cell not filled yet
                pass
        names = {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}
        local = _assigned_inside(source)
        for name in sorted(names - local):
            if name in spaces:
                resolve(name, spaces[name], target.__name__)

    def resolve(name, value, owner):
        if isinstance(value, types.ModuleType):
            imports[name] = (f"import {value.__name__}" if value.__name__ == name
                             else f"import {value.__name__} as {name}")
        elif _python_function(value) is not None or isinstance(value, type):
            module = getattr(_python_function(value) or value, "__module__", "") or ""
            if module in ("__main__", "__mp_main__") or module.startswith("_ipython") or not module:
                carry(value, name)
                if getattr(value, "__name__", name) != name:
                    aliases[name] = f"{name} = {value.__name__}"
            else:   # a library's (or the course's): imported from where it lives
                imports[name] = f"from {module} import {getattr(value, '__name__', name)} as {name}"
        elif type(value).__module__ == "grader.device":   # the notebook's `dev = grader.setup()`
            imports["grader"] = "import grader"
            constants[name] = f"{name} = grader.setup(quiet=True)"
        else:
            literal = _literal(value)
            if literal is None:
                raise CannotCarry(f"`{name}` (used by `{owner}`) is a {type(value).__name__}, which cannot be "
                                  f"written into a script: pass it as an argument, or define it inside the function")
            constants[name] = f"{name} = {literal}"

    carry(fn, getattr(fn, "__name__", "fn"))
    return list(imports.values()), list(constants.values()), list(definitions.values()) + list(aliases.values())


def _assigned_inside(source: str) -> set:
    """Names a definition binds itself (arguments, local variables, loop targets): not globals."""
    bound = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    tree = ast.parse(source).body[0]
    bound.discard(getattr(tree, "name", None))     # the function's own name is a global (recursion)
    return bound


def write_script(fn, args, folder: Path, device: str | None = None) -> Path:
    """folder/run.py, which rebuilds `fn`, loads `args` from folder/args.pt (and moves its tensors to
    `device`, if given), calls fn once and waits for the GPU."""
    import torch
    imports, constants, definitions = script_parts(fn)
    torch.save(list(args), folder / "args.pt")
    moved = ([f"args = [a.to({device!r}) if isinstance(a, torch.Tensor) else a for a in args]"] if device else [])
    lines = ["# Written by grader.memcheck: the function, what it calls, one call.", "import torch", "import triton",
             *sorted(set(imports)), "", *constants, "", *["\n" + d for d in definitions], "",
             f"args = torch.load({str(folder / 'args.pt')!r}, weights_only=False)", *moved,
             f"out = {fn.__name__}(*args)",
             "if torch.cuda.is_available():",
             "    torch.cuda.synchronize()",
             f"print({RETURNED!r})"]
    path = folder / SCRIPT_NAME
    path.write_text("\n".join(lines) + "\n")
    return path


# --------------------------------------------------------------------------------------------------
# The sanitizer's report, summarised
# --------------------------------------------------------------------------------------------------

_ERROR = re.compile(r"^=+\s+(Invalid __global__ (read|write) of size (\d+) bytes?|Misaligned .*|"
                    r"Out-of-range .*|Program hit .*|Malloc/Free error.*)\s*$")
_AT = re.compile(r"^=+\s+at (?:0x[0-9a-f]+ in )?([A-Za-z_][\w:<>]*)(?:\+0x[0-9a-f]+)?(?: in (\S+):(\d+))?")
_THREAD = re.compile(r"by thread \((\d+),(\d+),(\d+)\) in block \((\d+),(\d+),(\d+)\)")
_ADDRESS = re.compile(r"(?:Address|Access to) (0x[0-9a-f]+) is (?:out of bounds|misaligned)")
_NEAREST = re.compile(r"is ([\d,]+) bytes (after|before) the nearest allocation at (0x[0-9a-f]+) of size ([\d,]+) bytes")
_SUMMARY = re.compile(r"ERROR SUMMARY: ([\d,]+) errors?")


def summarise(report: str, sizes: dict | None = None, script: str = "") -> list:
    """Lines saying the first distinct errors of a memcheck report: kernel, access, thread, program, the
    line of `script` (the source that ran) and how far past which allocation (named when its size is
    that of one argument: `sizes`, {bytes: name})."""
    sizes, lines = sizes or {}, script.splitlines()
    found, current = [], None
    for line in report.splitlines():
        error = _ERROR.match(line.strip())
        if error:
            current = {"what": error.group(1)}
            found.append(current)
            continue
        if current is None:
            continue
        at, thread, address, near = _AT.match(line.strip()), _THREAD.search(line), _ADDRESS.search(line), \
            _NEAREST.search(line)
        if at and "kernel" not in current:
            current["kernel"] = at.group(1)
            number = int(at.group(3)) if at.group(3) and at.group(2) == SCRIPT_NAME else 0
            if 0 < number <= len(lines):   # a line of the script (a module it imports is another file)
                current["line"] = lines[number - 1].strip()
        if thread:
            current["thread"], current["block"] = thread.groups()[:3], thread.groups()[3:]
        if address:
            current["address"] = address.group(1)
        if near:
            current["near"] = (int(near.group(1).replace(",", "")), near.group(2), int(near.group(4).replace(",", "")))
    said, seen = [], set()
    for e in found:
        key = (e["what"], e.get("kernel"))
        if key in seen or len(said) >= SHOWN:
            continue
        seen.add(key)
        text = f"  {e['what'].rstrip('.')}"
        if e.get("kernel"):
            text += f" in kernel `{e['kernel']}`"
        if e.get("thread"):
            text += f", thread ({','.join(e['thread'])}) of program ({','.join(e['block'])})"
        if e.get("line"):
            text += f", at `{e['line'][:100]}`"
        if e.get("near"):
            distance, side, size = e["near"]
            what = sizes.get(size)
            text += (f": {distance} bytes {side} the end of an allocation of {size} bytes"
                     if side == "after" else f": {distance} bytes before an allocation of {size} bytes")
            if what:
                text += f" ({what})"
        said.append(text)
    total = _SUMMARY.search(report)
    if total and said:
        said.append(f"  ({total.group(1)} errors in all; the first is usually the one to fix)")
    return said


def _sizes(args) -> dict:
    import torch
    return {a.untyped_storage().nbytes(): f"the size of argument {i}, {tuple(a.shape)} "
            f"{str(a.dtype).replace('torch.', '')}" for i, a in enumerate(args) if isinstance(a, torch.Tensor)}


def memcheck(fn, *args, tool: str = "memcheck") -> bool | None:
    """Run fn(*args) once under compute-sanitizer in a process of its own and print what it found.
    Returns True when it found no error, False when it found some, None when it could not run (no GPU,
    no sanitizer, during grading, a value it cannot carry)."""
    from grader import device
    from grader.student.checks import grading
    if grading():
        print("memcheck runs in your own notebook, not during grading.")
        return None
    if not device.current().is_gpu:
        print("memcheck needs a CUDA GPU. On the CPU, Triton's interpreter is stopped by the grader before "
              "any access outside a kernel's tensors, with the kernel, the tensor and the element named.")
        return None
    if find_sanitizer() is None:
        print("compute-sanitizer is not installed here. " + WHERE)
        return None
    print(f"running {fn.__name__} once under compute-sanitizer --tool {tool} (slow: use a small size) ...")
    found, lines = run(fn, args, tool)
    print("\n".join(lines))
    return found


def run(fn, args, tool: str = "memcheck", device: str | None = None) -> tuple:
    """(True: no error, False: errors, None: could not run; the lines that say so) for one call of fn(*args)
    under compute-sanitizer (`device`: where the script moves the arguments, saved elsewhere)."""
    with tempfile.TemporaryDirectory(prefix="memcheck-") as folder:
        try:
            script = write_script(fn, args, Path(folder), device)
        except CannotCarry as e:
            return None, [f"memcheck cannot run this function on its own: {e}."]
        # what the notebook can import, the script can (the notebook's folder, the course's packages)
        path = [os.getcwd()] + [p for p in sys.path if p and os.path.isdir(p)]
        env = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1", TRITON_INTERPRET="0",
                   PYTHONPATH=os.pathsep.join(dict.fromkeys(path)))
        try:
            proc = subprocess.run([find_sanitizer(), "--tool", tool, "--print-limit", "20", sys.executable,
                                   str(script)], env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
                                  cwd=folder)
        except subprocess.TimeoutExpired:
            return None, [f"compute-sanitizer did not finish in {TIMEOUT_S} s: try a smaller input."]
        report = proc.stdout + proc.stderr
        said = summarise(report, _sizes(args), script.read_text())
    if said:
        return False, ["compute-sanitizer found out-of-bounds or otherwise invalid accesses:", *said,
                       "  An allocation's end is where a mask must stop a load or store: check the mask of the "
                       "loads and stores of that kernel, and the grid that reaches past it."]
    if "ERROR SUMMARY: 0 errors" in report and RETURNED in proc.stdout:
        return True, [f"compute-sanitizer ({tool}) found no invalid access in one call of {fn.__name__}."]
    return None, [f"the call did not finish under compute-sanitizer (exit status {proc.returncode}); the last "
                  f"lines:", *report.splitlines()[-15:]]


def host_copies(args) -> list | None:
    """The arguments copied to the host, kept before a checked call so that, if the call breaks the CUDA
    context with an illegal access, the sanitizer can run it again on them; None where it could not
    (no GPU, no sanitizer, grading)."""
    import torch
    from grader import device
    from grader.student.checks import grading
    if grading() or not device.current().is_gpu or find_sanitizer() is None:
        return None
    return [a.detach().cpu() if isinstance(a, torch.Tensor) else a for a in args]


def after_illegal_access(fn, host_args) -> str:
    """What the sanitizer says of one more call of fn on the arguments of the call that broke the context."""
    _, lines = run(fn, host_args, device="cuda")
    return "Run once more under compute-sanitizer, in a process of its own:\n" + "\n".join(lines)
