"""Run a student's notebook kernel as an unprivileged user, so that it cannot touch the class's grades.

nbgrader executes a notebook in a Jupyter kernel that has the rights of whoever runs nbgrader. A cell
could then rewrite another student's submission in grading/submitted, edit the gradebook, or signal the
grader. When the grader runs as root (as it does in the project's container), `course-grader autograde`
starts every kernel through this module instead: the launcher, still root, gives the kernel a private
home folder, then drops to the `nobody` user and becomes the ordinary IPython kernel. As `nobody` the
student's code can read the course (it must import `grader`, torch and triton) but write nowhere
except its own home and /tmp, and cannot signal the grader's processes. nbgrader itself, still root,
writes the grades.

Where the grader does not run as root, or `nobody` cannot run a kernel here (the Python environment or
the GPU not readable by others), `unavailable()` says why and kernels run with the grader's rights.
"""
from __future__ import annotations

import functools
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

KERNEL_NAME = "grader-sandbox"
USER = "nobody"
# Variables a kernel must not inherit: a PostgreSQL gradebook's URL holds its password.
SECRETS = ("NBGRADER_DB_URL", "PGPASSWORD", "PGPASSFILE")
PROBE = ("import torch, triton, ipykernel, grader, os; "
         "print(torch.cuda.is_available()); os.listdir('.')")


@functools.lru_cache(maxsize=1)
def unavailable() -> str | None:
    """Why kernels cannot be sandboxed on this machine, or None when they can.

    Probed once per process (a kernel-like start as `nobody`, a few seconds): the batch, `doctor` and
    `course-run`'s report all ask."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "the grader does not run as root, so it cannot start kernels as another user"
    try:
        pw = pwd.getpwnam(USER)
    except KeyError:
        return f"there is no user {USER!r}"
    try:
        import torch
        want_gpu = torch.cuda.is_available()
    except ImportError:
        want_gpu = False
    home = tempfile.mkdtemp(prefix="grader-probe-")
    try:
        os.chown(home, pw.pw_uid, pw.pw_gid)
        probe = subprocess.run([sys.executable, "-c", PROBE], cwd=home, env=_kernel_env(Path(home)),
                               preexec_fn=_drop(pw), capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as e:
        return (f"user {USER!r} cannot run {sys.executable} ({e.strerror or e}: is a folder on its path, such "
                f"as /root, closed to other users?)")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        return f"user {USER!r} cannot start a kernel here ({last[:200]})"
    if want_gpu and probe.stdout.strip() != "True":
        return f"user {USER!r} cannot see the GPU (check the permissions of /dev/nvidia*)"
    return None


def kernelspec_dir(parent: Path) -> Path:
    """A Jupyter data folder holding the sandboxed kernel's spec: put it on JUPYTER_PATH."""
    spec = Path(parent) / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "grader.sandbox", "{connection_file}"],
        "display_name": "Python 3 (grading sandbox)",
        "language": "python",
    }))
    return Path(parent)


def _kernel_env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in SECRETS}
    env.update(HOME=str(home), TRITON_CACHE_DIR=str(home / "triton"), MPLCONFIGDIR=str(home / "matplotlib"),
               IPYTHONDIR=str(home / "ipython"), JUPYTER_RUNTIME_DIR=str(home), XDG_CACHE_HOME=str(home / "cache"),
               TMPDIR=str(home))
    return env


def _drop(pw):
    def drop():
        os.setgroups([])
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)
    return drop


def launch(connection_file: str, extra: list) -> None:
    """Become the kernel: private home, then `nobody`, then ipykernel (this process is replaced)."""
    pw = pwd.getpwnam(USER)
    home = Path(tempfile.mkdtemp(prefix="grader-kernel-", dir=os.environ.get("GRADER_SANDBOX_TMP")))
    connection = home / "connection.json"
    shutil.copy(connection_file, connection)
    for path in (home, connection):
        os.chown(path, pw.pw_uid, pw.pw_gid)
    env = _kernel_env(home)
    _drop(pw)()
    os.execve(sys.executable, [sys.executable, "-m", "ipykernel_launcher", "-f", str(connection), *extra], env)


if __name__ == "__main__":
    launch(sys.argv[1], sys.argv[2:])
