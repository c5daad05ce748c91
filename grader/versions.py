"""The torch and triton this course supports: the oldest are those pyproject.toml declares (written once
there, read back from the installed package's metadata), checked when a notebook calls grader.setup()."""
from __future__ import annotations

import re
from importlib import metadata

PACKAGE = "gpu-course"
CHECKED = ("torch", "triton")
# NumPy 2.4 refuses int() of a one-element array, which the CPU interpreter of Triton before 3.7 does
# for every loop bound and scalar argument ("only 0-dimensional arrays can be converted"): measured with
# Triton 3.6.0 and NumPy 2.4.6 here and 2.5.2 on a GPU machine; 3.7 squeezes the array first.
INTERPRETER_NEEDS = {"triton": "3.7", "numpy_below": "2.4"}


def _release(version: str) -> tuple:
    """(2, 6, 0) from "2.6.0+cu124", "3.2.0" or "2.7.0a0": local builds and pre-releases as their release."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])


def declared_minimums() -> dict:
    """{"torch": "2.6", "triton": "3.2"} from the course's declared requirements; {} when the course is
    not installed as a package (run from a source tree on sys.path)."""
    try:
        requirements = metadata.requires(PACKAGE) or []
    except metadata.PackageNotFoundError:
        return {}
    minimums = {}
    for requirement in requirements:
        found = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*>=\s*([\d.]+)\s*", requirement.split(";")[0])
        if found and found.group(1).lower() in CHECKED:
            minimums[found.group(1).lower()] = found.group(2)
    return minimums


def _installed() -> dict:
    found = {}
    for name in CHECKED + ("numpy",):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def upgrades(interpreter: bool = False, installed: dict | None = None, minimums: dict | None = None) -> list:
    """One line per package this course cannot work with here, saying what to install."""
    minimums = declared_minimums() if minimums is None else minimums
    installed = _installed() if installed is None else installed
    lines = []
    for name, oldest in minimums.items():
        version = installed.get(name)
        if version is not None and _release(version) < _release(oldest):
            lines.append(f"{name} {version} is older than this course supports ({oldest} or newer): "
                         f"pip install -U '{name}>={oldest}' (on Colab, then restart the runtime).")
    triton, numpy = installed.get("triton"), installed.get("numpy")
    if (interpreter and triton and numpy and _release(triton) < _release(INTERPRETER_NEEDS["triton"])
            and _release(numpy) >= _release(INTERPRETER_NEEDS["numpy_below"])):
        lines.append(f"Triton {triton}'s CPU interpreter does not work with NumPy {numpy}: "
                     f"pip install 'numpy<{INTERPRETER_NEEDS['numpy_below']}', or "
                     f"pip install -U 'triton>={INTERPRETER_NEEDS['triton']}'.")
    return lines
