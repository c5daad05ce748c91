"""`course-grader doctor`: is this machine ready to grade? Each check says what to fix."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from grader.course import Course


@dataclass
class Finding:
    ok: bool
    what: str
    fix: str = ""

    def line(self) -> str:
        return f"[{'ok' if self.ok else 'FIX'}] {self.what}" + (f"\n       -> {self.fix}" if self.fix else "")


def _version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def check(root: Path) -> list:
    import torch
    found = []
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        found.append(Finding(True, f"GPU: {p.name} (compute capability {p.major}.{p.minor}), "
                                   f"{torch.cuda.device_count()} visible"))
        if os.environ.get("TRITON_INTERPRET") == "1":
            found.append(Finding(False, "TRITON_INTERPRET=1 is set: kernels would run on the CPU",
                                 "unset TRITON_INTERPRET before grading"))
    else:
        from grader.pipeline.gpus import unusable_gpu
        why_not = unusable_gpu()
        found.append(Finding(False, why_not or "no CUDA GPU visible: every speed cell would score 0",
                             "" if why_not else "grade on a machine with an NVIDIA GPU (in Docker: --gpus all)"))
    for name in ("torch", "triton", "nbgrader", "nbclient", "ipykernel"):
        v = _version(name)
        found.append(Finding(v is not None, f"{name} {v or 'missing'}", "" if v else f"pip install {name}"))
    from grader.versions import upgrades
    found += [Finding(False, line) for line in upgrades(interpreter=not torch.cuda.is_available())]
    config = root / "nbgrader_config.py"
    found.append(Finding(config.exists(), f"nbgrader config at {config}",
                         "" if config.exists() else "run course-grader from the course's repository root"))
    days = Course.of(root).days() if config.exists() else []
    found.append(Finding(bool(days), f"released assignments: {', '.join(days) or 'none'}",
                         "" if days else "course-grader release"))
    alembic = shutil.which("alembic")
    found.append(Finding(alembic is not None, f"alembic (nbgrader's database tool) on PATH: {alembic or 'no'}",
                         "" if alembic else f"put {os.path.dirname(sys.executable)} on PATH (activate the environment)"))
    try:
        from jupyter_client.kernelspec import KernelSpecManager
        spec = KernelSpecManager().get_kernel_spec("python3")
        python = spec.argv[0]
        probe = subprocess.run([python, "-c", "import grader, triton, torch"], capture_output=True, text=True,
                               cwd=root, env=dict(os.environ, PYTHONPATH=str(root)), timeout=120)
        found.append(Finding(probe.returncode == 0, f"kernel 'python3' ({python}) imports grader, torch, triton",
                             "" if probe.returncode == 0 else
                             f"install the course into the kernel's environment: {probe.stderr.strip()[-200:]}"))
    except Exception as e:  # no such kernelspec, or it cannot start
        found.append(Finding(False, f"kernel 'python3': {e}", "python -m ipykernel install --sys-prefix --name python3"))
    from grader.pipeline import sandbox
    why_not = sandbox.unavailable()
    if why_not is None:
        found.append(Finding(True, f"student kernels run as {sandbox.USER}: they cannot read the grading "
                                   f"workspace or the solutions, nor write the course", ""))
    else:
        found.append(Finding(True, f"student kernels: code would run with this account's rights ({why_not})",
                             "for untrusted submissions, grade in the container, as root (README, 'Untrusted code')"))
    if not os.environ.get("GRADER_IN_CONTAINER"):
        found.append(Finding(True, "not in the grading container: the course and the network are open to student code",
                             "for untrusted submissions, grade in Docker (README, 'Untrusted code')"))
    return found
