"""Each sandboxed kernel, forked from one that has already imported torch and ipykernel.

A sandboxed kernel used to be a new Python process (sandbox.launch): it imported torch and ipykernel
before it answered, about 3.5 s of CPU on the 2-core machine that runs CI, paid again for every notebook
of every student. During a batch one server per batch imports them once, as root, and each kernel is a
fork of it that then does what the launcher did before it became the kernel: the same limits, the same
user of its own, the same Landlock rules, then ipykernel with the notebook's connection file.

What keeps a forked kernel the same as a started one:
- the server runs with a kernel's environment (sandbox.kernel_env: no secret), from the folder of the
  grader copy that kernels import (no hidden case), and imports what a started kernel imports first
  (sandbox.KERNEL_MAIN's torch and ipykernel) and what the grader's watch imports on its first operation
  (torch._dynamo, which PyTorch imports for any dispatch mode, and Triton with it): nothing that keeps a
  setting of the notebook's. Triton reads TRITON_INTERPRET when a kernel is defined, and grader.setup sets
  it through Triton's settings anyway; Triton and PyTorch read their cache folders (in the kernel's home)
  when they compile. Nor CUDA: the server refuses to serve if its imports initialized it;
- the fork takes the launcher's environment, standard streams, working folder and argument list; its
  own session (as Jupyter gives a kernel); the server's socket closed; Python's `__main__` and the grader's
  modules forgotten, temporary folder unset and NumPy's generator seeded anew (Python's own `random`
  reseeds itself in a fork), then sandbox.confine: limits, user, Landlock; then marked dumpable, as a
  process that ran a new program is (its /proc files its own user's: Landlock keeps it from writing its
  memory there, as before);
- the launcher, which Jupyter started as the kernel, stays in its place until the kernel ends: it
  forwards Jupyter's signals (an interrupt is SIGINT) to the kernel and exits with its exit status. A
  launcher killed outright leaves its kernel to the batch, which kills every process of the kernel's user
  when the notebook ends (sandbox.kill_users): so a kernel is only forked where that list is kept.

The server's socket is in the batch's folder that only the grader can enter; a kernel, forked after the
socket is closed, cannot ask it for anything. GRADER_KERNEL_FORKS=0 turns it off: every kernel is then
started as a new process, as before.
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import socket
import sys
import tempfile
import types

from grader.pipeline import fork_server

# What every kernel imports before it answers (sandbox.KERNEL_MAIN), and what every kernel that reaches a
# check imports then: torch._dynamo (grader/student/guard.py's watch), about 2.2 s of CPU on the 2-core
# machine that runs CI, Triton among it, and the part of Triton that its first launch imports (Gluon, since
# Triton 3.4: 0.2 to 0.4 s a kernel, 6% of each kernel's CPU time in the adversarial class). Not ipykernel's
# debugger, which every kernel imports too (4%): debugpy sets a variable in the environment of the process
# that imports it, which a fork, given its kernel's own environment, would not have.
PRELOAD = ("torch", "ipykernel.kernelapp", "torch._dynamo", "triton.experimental.gluon?")
OFF_ENV = "GRADER_KERNEL_FORKS"
# Where the launcher finds the server (set by the batch; kept from the kernel's environment).
SOCKET_ENV = "GRADER_KERNEL_SERVER"
SOCKET_NAME = "kernels.sock"
PR_SET_DUMPABLE = 4
# Signals Jupyter sends a kernel's process (interrupt, terminate, and those a user may send by hand).
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def _become_kernel(request: dict, fds: list, sockets: list) -> None:
    """In the fork: the kernel, as sandbox.launch would have made it with execve."""
    from grader.pipeline import sandbox
    for s in sockets:
        s.close()
    for target, fd in enumerate(fds):   # the launcher's stdin, stdout, stderr
        os.dup2(fd, target)
        os.close(fd)
    try:
        os.setsid()
        os.chdir(request["cwd"])
        # A started kernel's import path: its PYTHONPATH, then the environment's own (`python -c`, with
        # KERNEL_MAIN's pop of ''); this server's first entry was its `python -m` folder.
        ours = _python_path(os.environ)
        site = [p for p in sys.path[1:] if p and os.path.abspath(p) not in ours]
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[:] = _python_path(os.environ) + site
        tempfile.tempdir = None    # found again from the kernel's TMPDIR
        # the generators a started kernel seeds afresh (torch's CUDA ones only once CUDA starts)
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        if "torch" in sys.modules:
            sys.modules["torch"].seed()
        sys.modules["__main__"] = types.ModuleType("__main__")
        for name in [m for m in sys.modules if m == "grader" or m.startswith("grader.")]:
            del sys.modules[name]  # the kernel imports the grader itself, from its PYTHONPATH
        sys.argv = ["-c", "-f", request["connection"], *request["extra"]]
        sandbox.confine(request["uid"], request["home"])
        # A process whose user changed is marked not dumpable (its /proc files root's) until it runs a new
        # program, which a started kernel did: marked again as a started kernel is.
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    except BaseException:   # noqa: BLE001 - said in nbgrader's log (the launcher's stderr); the kernel never starts
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    # Then the kernel, ended as Python ends a started one: its exit status, exit handlers, output flushed.
    import atexit
    import traceback
    from ipykernel import kernelapp
    status = 0
    try:
        kernelapp.launch_new_instance()
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (e.code is not None)
    except BaseException:   # noqa: BLE001 - reported as Python would report it, with the same status
        traceback.print_exc()
        status = 1
    atexit._run_exitfuncs()
    fork_server.exit_flushed(status)


def _python_path(env) -> list:
    return [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]


def run_forked(uid: int, home: str, connection: str, extra: list, env: dict) -> int | None:
    """In the launcher: have the server fork this notebook's kernel, stand in for it until it ends, and
    return its exit status (negative: the signal that killed it). None: no server here, or it did not
    answer; the launcher then becomes the kernel itself."""
    path = os.environ.get(SOCKET_ENV)
    if not path or os.environ.get(OFF_ENV) == "0":
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(path)
        request = {"uid": uid, "home": home, "connection": connection, "extra": extra, "env": env,
                   "cwd": os.getcwd()}
        socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
        pid = int(conn.recv(64))
    except (OSError, ValueError):
        conn.close()
        return None
    for sig in FORWARDED:
        signal.signal(sig, lambda number, _frame: _signal(pid, number))
    try:
        data = conn.recv(64)
    except OSError:
        data = b""
    return int(data) if data else -signal.SIGKILL   # no answer: the server was killed, with the batch


def end_as(status: int) -> None:
    """End the launcher as its forked kernel ended (run_forked's status): the same exit status, or killed by
    the same signal, but with no core file. The launcher is root and its folder is the student's, where a
    kernel that aborted would otherwise have the launcher's core, with its environment, left behind (a red
    team's, under a core-file limit above 0; the kernel itself has none: sandbox.confine)."""
    if status < 0:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    os._exit(status & 0xFF)


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        pass


def server(folder, kernel_env: dict, cwd) -> fork_server.ForkServer:
    """The batch's side: start the server (ForkServer.ready says whether it listens)."""
    return fork_server.ForkServer(folder, kernel_env, cwd, module=__name__, off_env=OFF_ENV, name=SOCKET_NAME)


if __name__ == "__main__":
    # `python -m` put this folder first on the import path: the kernel's is set per request.
    fork_server.serve(sys.argv[1], preload=PRELOAD, become=_become_kernel, fds_per_request=3)
