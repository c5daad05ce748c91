"""What the grading machine is: its GPUs as nvidia-smi and CUDA_VISIBLE_DEVICES show them, its driver and
library versions (written into every run log), and whether this torch can use its GPU at all.

nvidia-smi is asked rather than torch, so that the batch's own process never initializes CUDA.
"""
from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata


def _nvidia_smi(*query: str) -> list:
    """Rows of `nvidia-smi --query-gpu=...`, [] without a driver. Does not initialize CUDA here."""
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(query)}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    return [[part.strip() for part in line.split(",")] for line in out.stdout.strip().splitlines() if line.strip()]


def machine() -> dict:
    """The GPU, its driver and the library versions that grades are computed with."""
    rows = _nvidia_smi("name", "driver_version")
    gpu, driver = (rows[0][0], rows[0][1]) if rows else ("none (CPU: speed cells score 0)", "")

    def version(name):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"
    return {"gpu": gpu, "driver": driver, "torch": version("torch"), "triton": version("triton")}


def unusable_gpu() -> str | None:
    """Why the GPU that nvidia-smi sees cannot be graded on by this torch, or None.

    The usual cause: a torch wheel built for a newer CUDA than the driver supports (torch 2.13.0 from
    PyPI is a CUDA 13 build, which needs driver 580 or newer). Grading anyway would give every speed
    cell 0 while the run log names the GPU."""
    rows = _nvidia_smi("name", "driver_version")
    if not rows:
        return None
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available(), torch.__version__, "
                            "torch.version.cuda)"], capture_output=True, text=True, timeout=300)
    usable, torch_version, cuda = (probe.stdout.split() + ["?", "?", "?"])[:3]
    if usable == "True":
        return None
    name, driver = (rows[0] + [""])[:2]
    return (f"nvidia-smi sees {name} (driver {driver}), but torch {torch_version} (built for CUDA {cuda}) cannot "
            f"use it, so every speed cell would score 0. Update the NVIDIA driver, or install the torch build "
            f"for the CUDA your driver supports (https://pytorch.org/get-started/locally/).")


def visible_gpus(env=None) -> list:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries (indices or UUIDs).

    A scheduler (Slurm, Kubernetes, Docker --gpus) that already set CUDA_VISIBLE_DEVICES decides:
    its entries are handed out one per worker. Otherwise every GPU nvidia-smi lists.
    """
    env = os.environ if env is None else env
    if env.get("CUDA_VISIBLE_DEVICES") is not None:
        gpus = []
        for entry in (e.strip() for e in env["CUDA_VISIBLE_DEVICES"].split(",")):
            if not entry or entry.startswith("-"):
                break  # CUDA too stops at the first invalid entry; "-1" or "" hides every GPU
            gpus.append(entry)
        return gpus
    return [row[0] for row in _nvidia_smi("index")]


def gpu_names() -> dict:
    """CUDA_VISIBLE_DEVICES entry (index or UUID) -> GPU name, for the runs log of a mixed machine."""
    names = {}
    for index, uuid, name in (row for row in _nvidia_smi("index", "uuid", "name") if len(row) == 3):
        names[index] = names[uuid] = name
    return names


def worker_devices(workers, gpus: list) -> list:
    """The device of each worker: one GPU each, or "" (no GPU) for every worker on a CPU machine."""
    if workers is not None and workers < 1:
        raise ValueError(f"--workers {workers}: needs at least 1")
    if not gpus:
        return [""] * (workers or 1)
    workers = workers or len(gpus)
    if workers > len(gpus):
        raise ValueError(f"{workers} workers but {len(gpus)} GPU(s): two notebooks on one GPU would time each "
                         f"other; use --workers {len(gpus)} or fewer")
    return gpus[:workers]
