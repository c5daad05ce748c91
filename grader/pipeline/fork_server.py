"""Each notebook's nbgrader process, forked from one that has already imported what nbgrader needs.

Every notebook is graded by an nbgrader process of its own (grader/pipeline/nbgrader_process.py). Each
one used to import nbgrader, nbconvert, nbclient, ZeroMQ, torch and the grading checker before it read
its notebook, seconds of CPU paid again for every notebook of every student. The batch now starts one
server that imports them once; each notebook's nbgrader is a fork of it, with the notebook's own
command line, folder, environment and output file.

What keeps a fork the same as a freshly started nbgrader:
- the server imports, and sets up what nbgrader would set up on its first gradebook and notebook with a
  gradebook in memory (nbgrader_process.warm_up): it reads no notebook, opens no course's gradebook and
  never touches a GPU, so CUDA is initialized in each fork, after its CUDA_VISIBLE_DEVICES is set;
- it forks only while Python runs no other thread (a lock held by another thread would stay locked in
  the fork) and CUDA is not initialized; otherwise it refuses to serve and the batch starts
  nbgrader as before;
- the fork gets the environment the batch gives it, as a new process would (not what the server's
  imports set in the server's: `import torch._dynamo` sets TORCHINDUCTOR_CACHE_DIR to a folder named
  after the user who imports it, root's there, and a kernel finds its own).

A fork is the server's child, so the server reaps it and tells the batch its exit status; it is still a
descendant of the batch, which kills its process tree past the time limit and adopts what it leaves
behind (grader/pipeline/processes.py). The server ends with the batch. Its socket is in a folder only
the grader can enter: a kernel cannot ask it for anything. (`ps` shows a fork with the server's command
line.) GRADER_FORK_SERVER=0 turns it off.

Protocol, over a Unix socket of SOCK_SEQPACKET records: the batch sends the request as JSON with the
output file's descriptor attached; the server answers the fork's pid, then, when it ends, its exit
status as subprocess.Popen.returncode reports it (negative: killed by that signal).
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from grader.pipeline import processes

# What every nbgrader process of the batch imports: nbgrader's app and autograde converter, the course's
# executor (nbgrader_config.py names it) and its checker (torch), nbclient and its kernel client; what
# they import only when they first need it (jupyter_client's kernel specs import IPython, PyTorch's
# autograd its symbolic shapes and with them SymPy, the checker the submission rules and its clock); then
# what each did once per process on its first gradebook and notebook (nbgrader_process.warm_up). Those
# had taken about half of each notebook's nbgrader CPU time (py-spy, the adversarial class, CI's 2 cores).
PRELOAD = ("grader.pipeline.nbgrader_process", "nbgrader.apps.nbgraderapp", "nbgrader.converters.autograde",
           "grader.checker.headless", "grader.checker.verdicts", "nbclient", "jupyter_client", "zmq",
           "zmq.asyncio", "tornado.ioloop", "IPython", "torch.fx.experimental.symbolic_shapes",
           "grader.pipeline.code_rules", "grader.checker.timer", "grader.pipeline.nbgrader_process:warm_up")
MODULE = "grader.pipeline.nbgrader_process"   # the only command a fork runs: `python -m MODULE ARGS`
OFF_ENV = "GRADER_FORK_SERVER"   # "0": every nbgrader is started as a new process, as before
REAP_POLL_S = 0.05
START_TIMEOUT_S = 300
THREADS_SETTLE_S = 5.0   # how long the server waits for threads its imports left to end before it refuses to serve


def _python_threads() -> int:
    """Threads started by Python code. (Importing NumPy starts OpenBLAS's worker threads, which OpenBLAS
    itself shuts down and restarts around a fork, as every program that forks after importing NumPy or
    torch relies on; CUDA, which does not survive a fork, is never initialized here.)"""
    return threading.active_count()


def _others_ended(within_s: float) -> bool:
    """Whether every other thread ends within `within_s` (a thread an import started for a moment, which
    a machine under load may not have finished yet)."""
    deadline = time.monotonic() + within_s
    for thread in threading.enumerate():
        if thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
    return _python_threads() == 1


def _cuda_initialized() -> bool:
    """Whether this process has initialized CUDA: once it has, its forks cannot use the GPU. Initializing
    opens the driver's device files (/dev/nvidiactl, /dev/nvidia0, ...), which is what this looks for.
    Merely loading the driver's library is harmless, and a CUDA build of torch does that at import."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return True   # cannot tell: do not fork
    for fd in fds:
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/dev/nvidia"):
                return True
        except OSError:   # the descriptor listdir itself used, closed since
            continue
    return False


def load(preload) -> None:
    """Import each module named: "module", "module?" where it is installed (a newer library's part),
    "module:function" then call its function (work done once here that every fork would do again)."""
    for entry in preload:
        name, _, function = entry.partition(":")
        optional = name.endswith("?")
        name = name.rstrip("?")
        if optional and not _findable(name):
            continue
        module = importlib.import_module(name)
        if function:
            getattr(module, function)()


def _findable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:   # a parent package is missing
        return False


def serve(path: str, preload=PRELOAD, become=None, fds_per_request: int = 1) -> None:
    """Import `preload`, then fork for each request: the fork runs become(request, fds, sockets) (by default
    the notebook's nbgrader), which must end the process; this one reaps it and answers its exit status.
    grader/pipeline/kernel_forks.py serves kernels the same way."""
    become = become or _become_nbgrader
    # Listening before the imports (seconds): the batch goes on at once, and a request sent meanwhile waits
    # in the queue for its answer. One that the server then refuses to serve gets none, and its process is
    # started as a new one.
    server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    server.bind(path)
    server.listen(64)
    load(preload)
    if _python_threads() != 1 and not _others_ended(THREADS_SETTLE_S):
        names = ", ".join(t.name for t in threading.enumerate() if t is not threading.current_thread())
        print(f"fork server: {_python_threads()} threads after the imports ({names}); not serving", file=sys.stderr,
              flush=True)
        sys.exit(3)
    if _cuda_initialized():
        print("fork server: the imports initialized CUDA; not serving", file=sys.stderr, flush=True)
        sys.exit(3)
    parent = os.getppid()
    waiting = {}   # pid of a running fork -> the connection that asked for it
    while os.getppid() == parent:   # the batch that started this server is still there
        readable, _, _ = select.select([server], [], [], REAP_POLL_S)
        if readable:
            conn, _ = server.accept()
            conn.settimeout(10)   # the batch sends its request as soon as it connects
            try:
                message, fds, _, _ = socket.recv_fds(conn, 1 << 20, fds_per_request)
            except OSError:
                message, fds = b"", []
            if len(fds) != fds_per_request:
                for fd in fds:
                    os.close(fd)
                conn.close()
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                try:
                    become(json.loads(message), fds, [server, conn, *waiting.values()])
                finally:   # a fork must never return into the server's loop
                    os._exit(1)
            for fd in fds:
                os.close(fd)
            waiting[pid] = conn
            try:
                conn.send(str(pid).encode())
            except OSError:   # the batch's worker is gone; the fork is still reaped below
                pass
        while waiting:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = waiting.pop(pid, None)
            if conn is not None:
                try:
                    conn.send(str(os.waitstatus_to_exitcode(status)).encode())
                except OSError:
                    pass
                conn.close()
    # The batch has gone: its forks are left as a started nbgrader would be (one still waiting at its gate
    # gives up by itself, grader.checker.headless).


def _become_nbgrader(request: dict, fds: list, sockets: list) -> None:
    """In the fork: the notebook's nbgrader, as `python -m MODULE ARGS` started in its folder would be.
    (Whatever fails here ends the fork with status 1: serve's `finally`.)"""
    for s in sockets:
        s.close()
    out_fd, = fds
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    os.close(out_fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [MODULE, *request["args"]]
    from grader.pipeline import nbgrader_process
    nbgrader_process.main()   # ends the process with nbgrader's exit status


def exit_flushed(status: int) -> None:
    """End this process at once (no teardown of what it imported) with its output flushed: an nbgrader or
    a kernel that has finished, forked or not."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


class Forked:
    """A fork's handle, with the parts of subprocess.Popen's interface the batch uses."""

    def __init__(self, pid: int, conn: socket.socket):
        self.pid, self._conn, self.returncode = pid, conn, None

    def _read(self, timeout) -> None:
        self._conn.settimeout(timeout)
        try:
            data = self._conn.recv(64)
        except (TimeoutError, BlockingIOError):   # no status yet (a timeout of 0 makes the socket non-blocking)
            raise subprocess.TimeoutExpired(MODULE, timeout) from None
        # No answer at all: the server is gone (killed with the batch), and with it the fork's status.
        self.returncode = int(data) if data else -9
        self._conn.close()

    def poll(self):
        if self.returncode is None:
            try:
                self._read(0)
            except subprocess.TimeoutExpired:
                pass
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None:
            self._read(timeout)
        return self.returncode


class ForkServer:
    """The batch's side: start the server, ask it for forks; None from `start` means "start nbgrader as
    usual" (the server could not start, or the command is not nbgrader_process's)."""

    def __init__(self, folder: Path, env: dict, cwd: Path, module: str = "grader.pipeline.fork_server",
                 off_env: str = OFF_ENV, name: str = "nbgrader.sock"):
        self.path, self.proc, self._ready = str(Path(folder) / name), None, None
        if os.environ.get(off_env) == "0":
            return
        # `python -m` puts its folder (the course's root, as nbgrader was started) first on the import
        # path of the server and every fork, so it must not be one that student code can write (/tmp).
        self.proc = processes.start([sys.executable, "-m", module, self.path], env=env,
                                    cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    @property
    def ready(self) -> bool:
        """Whether the server listens (waits for that the first time): it still imports, and answers each
        request once it has (serve)."""
        if self._ready is None:
            deadline = time.monotonic() + START_TIMEOUT_S
            while (self.proc is not None and not os.path.exists(self.path) and self.proc.poll() is None
                   and time.monotonic() < deadline):
                time.sleep(0.02)
            self._ready = self.proc is not None and os.path.exists(self.path) and self.proc.poll() is None
        return self._ready

    def start(self, command: list, cwd, env: dict, out) -> Forked | None:
        if not self.ready or command[:3] != [sys.executable, "-m", MODULE]:
            return None
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            conn.connect(self.path)
            request = json.dumps({"args": command[3:], "cwd": str(cwd), "env": env}).encode()
            socket.send_fds(conn, [request], [out.fileno()])
            pid = int(conn.recv(64))
        except (OSError, ValueError):
            conn.close()
            return None
        return Forked(pid, conn)

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=30)
            processes.forget(self.proc.pid)


if __name__ == "__main__":
    serve(sys.argv[1])
