"""Run each student notebook's kernel as a user of its own, so that it cannot reach the class's grades.

nbgrader executes a notebook in a Jupyter kernel that has the rights of whoever runs nbgrader. A cell
could then read or rewrite other students' submissions in grading/, edit the gradebook, or signal the
grader. When the grader runs as root (as it does in the project's container), `course-grader autograde`
starts every kernel through this module instead: the launcher, still root, gives the kernel a private
home folder, then drops to a user id of its own (`kernel_uid`: unnamed, used by no account and by no
other live kernel) and becomes the ordinary IPython kernel; nbgrader's process gives it the notebook's
own folder before its first cell (`hand_over`).

As that user the student's code can read the course's code (it must import `grader`, torch and triton)
but not the grading workspace, which `closed_workspace` makes readable by the grader alone (the
submissions, the gradebook, the feedback, other notebooks' autograded folders) nor `solutions/`; it can
write only its home, its notebook's folder and /tmp, and it cannot signal the grader or another
student's kernel. nbgrader itself, still root, writes the grades.

Where the grader does not run as root, or a plain user cannot run a kernel here (the Python environment
or the GPU not readable by others), `unavailable()` says why and kernels run with the grader's rights.
"""
from __future__ import annotations

import compileall
import contextlib
import functools
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from grader.course import REPO, Course
from grader.pipeline import landlock

KERNEL_NAME = "grader-sandbox"
# Kernel user ids: this base plus the launcher's process id, so no two live kernels share one. Far above
# the ids that accounts get (and below 2**31, which some tools take as a signed number).
UID_BASE = 1_000_000_000
USER = "a user of its own (uid 10^9 + the kernel's process id)"
# The autograded folders' root (set by the batch): a kernel started in a folder under it takes that
# folder as its own, as a notebook's working directory.
AUTOGRADED_ENV = "GRADER_AUTOGRADED"
# Variables a kernel must not inherit: a PostgreSQL gradebook's URL holds its password; the hidden
# cases' seed is the grading checker's alone.
SECRETS = ("NBGRADER_DB_URL", "PGPASSWORD", "PGPASSFILE", "GRADER_SECRET_SEED")
# Where the launcher writes its kernel's user id (set by the batch for each notebook, in a folder that is
# the grader's alone): after the notebook, every process of that user is killed (kill_users).
UIDS_ENV = "GRADER_KERNEL_UIDS"
# What the batch tells each launcher and no kernel needs: where it records its kernel's user id, where
# it finds the kernel server (kernel_forks.SOCKET_ENV).
LAUNCHER_ONLY = (UIDS_ENV, "GRADER_KERNEL_SERVER")
# The most processes and threads a kernel's user may have at once (RLIMIT_NPROC counts both). A kernel
# with torch's thread pool and Triton's compiler threads uses tens to a few hundred on a machine with
# many cores; a notebook that forks without end is stopped there instead of filling the machine's
# process table while it waits for its time limit. GRADER_PROCESS_LIMIT changes it.
PROCESS_LIMIT = 4096
# The most memory each of a kernel's processes may map for its private data (RLIMIT_DATA), in GiB: a
# notebook that allocates without end gets a MemoryError in its cell instead of taking the machine's
# memory from the grader and the other notebooks. GPU memory is not counted (the driver maps it as shared
# memory), nor the address space CUDA reserves without using it. A guard against the common runaway, not
# a boundary: shared memory and several processes go past it (docs/threat-model.md). The batch sets it
# from the machine's memory (memory_limit_gib); an instructor may set it.
MEMORY_ENV = "GRADER_MEMORY_LIMIT_GIB"
# The most memory the grader's own process for one notebook (its nbgrader, which holds every output the
# kernel sends) may take for its data (RLIMIT_DATA), in GiB: a notebook that prints hundreds of MB fails
# alone instead of taking the machine's memory from the batch (grader/pipeline/nbgrader_process.py). The
# batch sets it from the machine's memory (nbgrader_memory_gib), sandboxed or not; an instructor may set it.
NBGRADER_MEMORY_ENV = "GRADER_NBGRADER_MEMORY_GIB"
# The most a notebook's outputs may hold in its graded copy, in MB (millions of characters); past it the
# rest is not kept (nbgrader_process.cap_outputs, which logs OUTPUT_CAPPED). "0": no cap.
OUTPUT_ENV = "GRADER_OUTPUT_LIMIT_MB"
OUTPUT_LIMIT_MB = 10
OUTPUT_CAPPED = "grading: output capped"
# What nbgrader's process logs as each cell starts (nbgrader_process.mark_cells), followed by the cell's
# number and name: a notebook killed at its time limit is told which cell was still running.
RUNNING_CELL = "grading: running cell"
# What a failed nbgrader says in its log when it had come close to its memory limit (nbgrader_process).
OUT_OF_MEMORY = "grading: nbgrader ran out of memory"
# The largest file a kernel may write (RLIMIT_FSIZE), in GiB: a write past it fails with "File too large"
# in the cell (the kernel ignores SIGXFSZ, which would kill it). Triton's and torch's caches hold files of
# kB to a few MB, and the course's notebooks write none of their own; but the kernel hands the checker
# each output of a case as a file (grader/student/serve.py), and the largest, linear + cross-entropy's
# weight gradient at its timed shape (128256 x 4096 in bfloat16), is 0.98 GiB: twice that, so an honest
# output never meets the limit. What a kernel leaves in its notebook's folder is removed when the
# notebook ends (reclaim). GRADER_FILE_SIZE_LIMIT_GIB changes it.
FILE_SIZE_ENV = "GRADER_FILE_SIZE_LIMIT_GIB"
FILE_SIZE_LIMIT_GIB = 2.0
# Where a batch's kernels import the grader from (put first on their PYTHONPATH by the launcher): a copy
# without the hidden cases and the prediction formulas (kernel_grader), while the instructor's exercise
# data is the grader's alone (closed_workspace). Unset: the kernel imports the grader as it is installed.
KERNEL_GRADER_ENV = "GRADER_KERNEL_GRADER"
# "1": the launcher confines the kernel's writes with Landlock (grader/pipeline/landlock.py). The batch sets
# it where writes_confined() found that a confined kernel still computes.
LANDLOCK_ENV = "GRADER_LANDLOCK"
LANDLOCK_PROBE = "import sys, torch\nx = torch.ones(4, device=sys.argv[1])\nprint(float((x + 1).sum()))"
PROBE = ("import torch, triton, ipykernel, grader, os, getpass; getpass.getuser(); "
         "print(torch.cuda.is_available()); os.listdir('.')")


def _as_a_kernel_user(args: list, confined: bool = False):
    """Run `python args` as a new kernel user in a fresh home, with a kernel's environment (and its writes
    confined as launch confines them): the CompletedProcess, or the exception that stopped it starting."""
    uid = kernel_uid()
    home = tempfile.mkdtemp(prefix="grader-probe-")

    def become():
        _drop(uid)()
        if confined:
            why = _confine_writes(home, home)
            if why is not None:
                raise OSError(why)
    try:
        os.chown(home, uid, uid)
        return subprocess.run([sys.executable, *args], cwd=home, env=kernel_env(Path(home)), preexec_fn=become,
                              capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as e:
        return e
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _last_error(probe) -> str:
    return ((probe.stderr.strip().splitlines() or ["no output"])[-1])[:200]


@functools.lru_cache(maxsize=1)
def unavailable() -> str | None:
    """Why kernels cannot be sandboxed on this machine, or None when they can.

    Probed once per process (a kernel-like start as a kernel's user, a few seconds): the batch, `doctor`
    and `course-run`'s report all ask."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "the grader does not run as root, so it cannot start kernels as another user"
    try:
        import torch
        want_gpu = torch.cuda.is_available()
    except ImportError:
        want_gpu = False
    probe = _as_a_kernel_user(["-c", PROBE])
    if isinstance(probe, Exception):
        return (f"a plain user cannot run {sys.executable} ({getattr(probe, 'strerror', None) or probe}: is a "
                f"folder on its path, such as /root, closed to other users?)")
    if probe.returncode != 0:
        return f"a plain user cannot start a kernel here ({_last_error(probe)})"
    if want_gpu and probe.stdout.strip() != "True":
        return "a plain user cannot see the GPU (check the permissions of /dev/nvidia*)"
    return None


@functools.lru_cache(maxsize=1)
def writes_confined() -> str | None:
    """Why Landlock will not confine the kernels' writes on this machine, or None when it will.

    Probed once per process: a kernel's user under Landlock must still compute, on the GPU where there is
    one. (On one GPU machine, a virtual one, CUDA failed to start under Landlock: "OS call failed or
    operation not supported on this OS", from cudaGetDeviceCount; there the file modes alone apply.)"""
    why_not = unavailable()
    if why_not is not None:
        return why_not
    if not landlock.abi():
        return "this Linux kernel has no Landlock"
    import torch
    device = "cuda" if torch.cuda.is_available() else "cpu"   # as the grader sees it, not the confined kernel
    probe = _as_a_kernel_user(["-c", LANDLOCK_PROBE, device], confined=True)
    if isinstance(probe, Exception):
        return f"Landlock could not confine a kernel here ({probe})"
    if probe.returncode != 0:
        return f"a kernel confined by Landlock could not compute here ({_last_error(probe)})"
    return None


def _confine_writes(home: str, folder: str) -> str | None:
    """Landlock for a kernel: it writes to its home, its notebook's folder, /tmp and devices only."""
    return landlock.restrict_writes([home, folder, "/tmp", "/dev"])


def kernel_uid(pid: int | None = None) -> int:
    return UID_BASE + (os.getpid() if pid is None else pid)


def process_limit() -> int:
    return int(os.environ.get("GRADER_PROCESS_LIMIT") or PROCESS_LIMIT)


def memory_limit_gib(kernels_at_once: int) -> float:
    """Each running kernel's share of half the machine's memory (at least 4 GiB): the rest is the
    grader's, the waiting kernels' and the system's."""
    import psutil
    return max(4.0, psutil.virtual_memory().total / 2**30 / 2 / max(1, kernels_at_once))


def nbgrader_memory_gib(kernels_at_once: int) -> float:
    """The limit of each running notebook's nbgrader (NBGRADER_MEMORY_ENV): half its kernel's (at least
    4 GiB), so that a kernel and its nbgrader both at their limits leave a quarter of the machine to the
    rest. An honest notebook's nbgrader holds torch, the checker and a few kB of outputs: well under 1 GiB
    of data without a GPU."""
    return max(4.0, memory_limit_gib(kernels_at_once) / 2)


def file_size_limit() -> int:
    """RLIMIT_FSIZE for a kernel, in bytes (FILE_SIZE_ENV)."""
    return int(float(os.environ.get(FILE_SIZE_ENV) or FILE_SIZE_LIMIT_GIB) * 2**30)


def _kill_all_as(uid: int):
    """For a child process: become `uid` and, at once, kill(-1). That signals every process this user may
    signal, that is every process of that user and no other. Linux holds back new processes while it
    sends, and a process with a kill pending cannot fork, so one call reaches everything, however it hid
    (a new session, a process that forks and exits to change its pid). It runs before the child's exec:
    a red team's leftover that sent kill(-1) every millisecond killed a killer that was still starting
    Python."""
    def kill_all():
        _drop(uid)()
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return kill_all


def _running(uid: int) -> list:
    """The processes of `uid` that are alive (an ended one waiting to be collected does not count)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as f:
                    status = dict(line.split(":", 1) for line in f if ":" in line)
            except (OSError, ValueError):
                continue
            if int(status.get("Uid", "-1").split()[0]) == uid and not status.get("State", "").strip().startswith("Z"):
                found.append(int(entry))
    return found


def _remove_files_of(uid: int, folders=("/tmp", "/dev/shm")) -> None:
    """What the user left in the shared temporary folders (disk or memory): removed with it."""
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass


def kill_user(uid: int, attempts: int = 50) -> None:
    """Kill every process of a kernel user and remove the files it left in /tmp and /dev/shm.

    What a notebook leaves behind runs as its kernel's user, which no other live kernel has, so this ends
    it all, including processes the batch's own process tree no longer shows. Each kill is checked by
    looking for a live process of that user, and repeated until there is none."""
    if uid < UID_BASE:   # never root's or an account's processes
        return
    for _ in range(attempts):
        if not _running(uid):
            break
        # The child kills before it runs anything; what it runs then does not matter. (Python code in a
        # child of a process with threads could deadlock on a lock another thread held; the child's
        # code takes none, glibc's malloc is made safe across fork, and the time limit bounds it.)
        try:
            subprocess.run([sys.executable, "-I", "-S", "-c", ""], preexec_fn=_kill_all_as(uid),
                           timeout=10, capture_output=True)
        except (OSError, subprocess.SubprocessError):   # e.g. the user is at its process limit
            pass
    _remove_files_of(uid)


def kill_users(record: Path) -> None:
    """kill_user for every kernel user listed in `record` (UIDS_ENV, one id per line), then forget it."""
    try:
        lines = record.read_text().split()
    except OSError:
        return
    for line in lines:
        if line.isdigit():
            kill_user(int(line))
    record.unlink(missing_ok=True)


def kernel_grader(folder: Path) -> Path:
    """Write into `folder` the grader that a batch's kernels import: this one, with its exercise data as
    the student edition has it (no hidden case, no prediction formula: edition.without_answers). The
    checker names each case's shape when it asks, and judges predictions in its own process, so the
    kernel needs neither; a notebook that reads the instructor's files by their path finds them closed
    (closed_workspace). Readable by every kernel's user; returns the folder to put on PYTHONPATH."""
    from grader.pipeline import edition
    source = Path(REPO) / "grader"
    shutil.copytree(source, folder / "grader", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for module in sorted((folder / "grader" / "exercises").glob("day*.py")):
        module.write_text(edition.without_answers(module.read_text(), f"grader.exercises.{module.stem}"))
    # compiled now, as the grader: a kernel cannot write its bytecode cache here, and would compile every module
    compileall.compile_dir(str(folder), quiet=1)
    for path in [folder, *folder.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return folder


@contextlib.contextmanager
def closed_workspace(course: Course, log=print, exercise_data: bool = False):
    """While the block runs (the kernels of a batch), the grading workspace is the grader's alone.

    grading/ may be entered but not listed (a kernel must reach its notebook's folder); submissions,
    feedback and every file in grading/ (the gradebook, the runs logs) are the grader's only; the
    autograded folders are entered by name only, and each notebook's folder is its kernel's alone.
    The course's source (`solutions/`) holds the reference answers and hidden tests: closed too where the
    course is writable; so is the grader's exercise data (hidden cases, prediction formulas) with
    `exercise_data`, where kernels import a copy without them (kernel_grader).
    Afterwards the modes are as they were, so that an instructor's own account can read the results
    (`course-grader report` after grading in the container).
    """
    grading, autograded = course.grading, course.autograded
    autograded.mkdir(parents=True, exist_ok=True)
    closing = [(grading, 0o711)] + [(p, 0o600 if p.is_file() else 0o711 if p == autograded else 0o700)
                                    for p in grading.iterdir() if not p.is_symlink()]
    # The course's solutions, and those of the checkout the grader is installed from, if another one; and
    # where kernels import a copy without answers (KERNEL_GRADER_ENV), the instructor's exercise data.
    all_solutions = {course.source, Course.of(REPO).source}
    if exercise_data:
        all_solutions.add(Path(REPO) / "grader" / "exercises")
    closing += [(folder, 0o700) for folder in all_solutions if folder.is_dir()]
    with _closed_together([path for path, _ in closing]):
        for path, mode in closing:
            try:
                os.chmod(path, mode)
            except OSError as e:
                if path in all_solutions and path.stat().st_mode & 0o005:
                    log(f"warning: {path} stays readable by student code ({e.strerror}): make it readable "
                        f"by the grader only where the course is built (the Dockerfile does)")
    for folder in autograded.glob("*/*"):
        reclaim(folder)
    try:
        yield
    finally:
        for folder in autograded.glob("*/*"):
            reclaim(folder, mode=0o755)
        for student in autograded.iterdir():
            if student.is_dir():
                os.chmod(student, 0o755)
        with _closed_together([path for path, _ in closing], leaving=True) as last:
            for path, mode in last.items():
                try:
                    os.chmod(path, mode)
                except OSError:
                    pass


# Batches running at once on one machine share folders they close (the installed grader's exercise data,
# its solutions; a course's grading/ when two days are graded side by side). Each closes them and puts
# back their modes at its end: the first batch to end would open them while another still runs (seen in
# CI, where two test workers grade at once: a notebook read the exercise data). So the modes they had
# before any batch closed them, and the batches (process ids) that hold each, are kept in one file,
# under a lock: a folder is opened again when the last live batch holding it ends. A batch that died
# holding one leaves its entry, with the mode from before: the next batch to end puts that back.
_CLOSED_REGISTRY = Path(tempfile.gettempdir()) / f"course-grader-closed-{os.getuid()}.json"


@contextlib.contextmanager
def _closed_together(paths: list, leaving: bool = False):
    """Entering (leaving=False): note this process as a holder of `paths`, their modes first noted where
    no live batch holds them; yields {}. Leaving: drop this process; yields {path: mode to put back} for the
    paths no live batch holds any more."""
    import fcntl
    fd = os.open(_CLOSED_REGISTRY, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with os.fdopen(os.dup(fd), "r+") as f:
            try:
                held = json.loads(f.read() or "{}")
            except ValueError:
                held = {}
            back = {}
            for path in map(str, paths):
                entry = held.get(path)
                if not leaving:
                    if entry is None:
                        entry = held[path] = {"mode": os.stat(path).st_mode & 0o7777, "pids": []}
                    entry["pids"] = sorted({pid for pid in entry["pids"] if _alive(pid)} | {os.getpid()})
                elif entry is not None:
                    entry["pids"] = [pid for pid in entry["pids"] if pid != os.getpid() and _alive(pid)]
                    if not entry["pids"]:
                        back[Path(path)] = held.pop(path)["mode"]
            yield back
            f.seek(0)
            f.truncate()
            f.write(json.dumps(held))
    finally:
        os.close(fd)   # the lock goes with the descriptor


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def reclaim(folder: Path, mode: int = 0o700) -> None:
    """Give a notebook's folder back to the grader once its kernel has ended (a later kernel may get its uid).

    Links the kernel made there are removed first: nbgrader, as root, writes the graded notebook into this
    folder and follows a link (a red team's notebook replaced itself with a link to a classmate's
    submission, which nbgrader then overwrote with its own graded answers).

    So is everything else a kernel made there (what a kernel user owns): files and folders of any size
    would otherwise stay after grading, the grader's, for every student (a red team's notebook left 64 MB).
    What nbgrader put there (the submission's notebooks and files, the graded notebooks) is root's: kept."""
    if not folder.is_dir() or folder.is_symlink():
        return
    for path in [folder, *folder.rglob("*")]:
        try:
            info = path.lstat()
            if path != folder and info.st_uid >= UID_BASE and stat.S_ISDIR(info.st_mode):
                shutil.rmtree(path)   # a folder the kernel made, whatever is in it
                continue
            if path != folder and (info.st_uid >= UID_BASE or stat.S_ISLNK(info.st_mode)
                                   or (stat.S_ISREG(info.st_mode) and info.st_nlink > 1)):
                path.unlink()   # a kernel's file, a symbolic link, or a hard link to a file elsewhere
                continue
            os.chown(path, 0, 0, follow_symlinks=False)
        except (OSError, RecursionError):   # gone with its folder already; a folder nested past recursion
            pass
    os.chmod(folder, mode)


def kernelspec_dir(parent: Path) -> Path:
    """A Jupyter data folder holding the sandboxed kernel's spec: put it on JUPYTER_PATH."""
    spec = Path(parent) / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "grader.pipeline.sandbox", "{connection_file}"],
        "display_name": "Python 3 (grading sandbox)",
        "language": "python",
    }))
    return Path(parent)


def kernel_env(home: Path, base: dict | None = None) -> dict:
    """A kernel's environment: the grader's (`base`, by default this process's) without its secrets and
    the batch's own settings for the launcher, the grader without answers first on its import path."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if k not in SECRETS and k not in LAUNCHER_ONLY}
    if env.get(KERNEL_GRADER_ENV):   # the grader without answers comes first (kernel_grader)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.pop(KERNEL_GRADER_ENV), env.get("PYTHONPATH")]))
    env.update(HOME=str(home), TRITON_CACHE_DIR=str(home / "triton"), MPLCONFIGDIR=str(home / "matplotlib"),
               IPYTHONDIR=str(home / "ipython"), JUPYTER_RUNTIME_DIR=str(home), XDG_CACHE_HOME=str(home / "cache"),
               TORCHINDUCTOR_CACHE_DIR=str(home / "inductor"), TMPDIR=str(home),
               # A kernel's user id has no account: getpass.getuser() (torch's compile caches ask it)
               # reads these before it would look the id up and fail.
               USER="student", LOGNAME="student")
    return env


def _drop(uid: int):
    def drop():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    return drop


def close_ahead(folder: Path) -> None:
    """Before nbgrader copies a submission into a notebook's folder: the folder the grader's alone (and
    its student's folder entered, not listed). Made now, not at hand_over: a notebook started ahead of
    its turn has its submission there while another student's kernel runs (a red team read it)."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder.parent, 0o711)
    if folder.stat().st_uid == 0:     # one that a running kernel of the same student has stays its own
        os.chmod(folder, 0o700)


def _notebook_folder(folder) -> Path | None:
    """The folder as a notebook's folder under the batch's autograded root, or None if it is not one."""
    autograded = os.environ.get(AUTOGRADED_ENV)
    folder = Path(os.path.realpath(folder))
    if autograded and folder.is_relative_to(os.path.realpath(autograded)) \
            and folder != Path(os.path.realpath(autograded)):
        return folder
    return None


def take_back(folder, uid: int) -> None:
    """After a sandboxed kernel has ended, before nbgrader writes into its folder: every process of its
    user killed, and the folder the grader's again (reclaim)."""
    kill_user(uid)
    folder = _notebook_folder(folder)
    if folder is not None:
        reclaim(folder)


def hand_over(folder, uid: int) -> None:
    """Make a notebook's folder under the autograded root its kernel's alone (`uid`, see kernel_uid).

    nbgrader's process (grader.checker.headless) calls this before the kernel runs its first cell, not
    the launcher: a kernel may be started while the notebook before it, in the same folder, still runs."""
    folder = _notebook_folder(folder)
    if folder is not None:
        os.chmod(folder.parent, 0o711)       # the student's folder: entered, not listed
        os.chown(folder, uid, uid)           # the notebook's folder: this kernel's alone
        os.chmod(folder, 0o700)


# The kernel's command: ipykernel_launcher's, with torch imported first. Every notebook imports it (seconds
# on a GPU machine), and a kernel started ahead of its turn (grader.pipeline.batch) then has it ready.
KERNEL_MAIN = ("import sys; sys.path[0] == '' and sys.path.pop(0); import torch; "
               "from ipykernel import kernelapp; kernelapp.launch_new_instance()")


def launch(connection_file: str, extra: list) -> None:
    """Become the kernel: a private home, a user of its own, then ipykernel (this process is replaced, or
    stands in for a kernel forked by the batch's kernel server: kernel_forks.py)."""
    uid = kernel_uid()
    home = Path(tempfile.mkdtemp(prefix="grader-kernel-", dir=os.environ.get("GRADER_SANDBOX_TMP")))
    connection = home / "connection.json"
    shutil.copy(connection_file, connection)
    for path in (home, connection):
        os.chown(path, uid, uid)
    env = kernel_env(home)
    record = os.environ.get(UIDS_ENV)
    if record:
        with open(record, "a") as f:
            f.write(f"{uid}\n")
        # Forked only where the batch kills every process of this user when the notebook ends: a launcher
        # killed outright leaves its forked kernel running until then.
        from grader.pipeline import kernel_forks
        status = kernel_forks.run_forked(uid, str(home), str(connection), extra, env)
        if status is not None:
            kernel_forks.end_as(status)
    confine(uid, str(home))
    os.execve(sys.executable, [sys.executable, "-c", KERNEL_MAIN, "-f", str(connection), *extra], env)


def confine(uid: int, home: str) -> None:
    """What a kernel's process does, as root, before it runs any of the kernel's code: its limits, its user
    of its own, and its writes confined. In the notebook's folder (its working directory)."""
    resource.setrlimit(resource.RLIMIT_NPROC, (process_limit(), process_limit()))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))   # no core files of a crashed GPU process on the disk
    # No file past FILE_SIZE_ENV: the write fails (EFBIG) instead of the signal killing the kernel.
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit(), file_size_limit()))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # kept across exec
    if os.environ.get(MEMORY_ENV):
        limit = int(float(os.environ[MEMORY_ENV]) * 2**30)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    _drop(uid)()
    # Writes only to its home, its notebook's folder (where nbgrader starts it), /tmp and devices, and not
    # to its own memory through /proc (grader/pipeline/landlock.py); where that cannot be, file modes alone.
    if os.environ.get(LANDLOCK_ENV) == "1":
        why = _confine_writes(home, os.getcwd())
        if why is not None:   # into nbgrader's log; the kernel runs, confined by file modes alone
            print(f"grading sandbox: writes not confined ({why})", file=sys.stderr, flush=True)


if __name__ == "__main__":
    launch(sys.argv[1], sys.argv[2:])
