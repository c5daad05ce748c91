"""Autograde a whole class with nbgrader: each notebook of each student in its own process tree, under a
hard time limit, on as many GPUs (workers) as the machine has.

nbgrader alone stops at the first notebook that crashes it and cannot stop a kernel that spins on the
GPU (such a kernel ignores interrupts). Here every (student, notebook) autograde is its own process tree,
killed when it outlives `timeout_s`: that notebook gets 0 with the reason, and the student's other
notebooks and the rest of the class are still graded. Every run is recorded, with the GPU and the
versions it ran on, in grading/runs-<day>.csv.

Workers: one per visible GPU by default. Each worker runs one notebook at a time and gives its nbgrader
CUDA_VISIBLE_DEVICES=<its GPU>, so two notebooks never run on one GPU and never disturb each other's
timings. The next notebooks' nbgrader (AHEAD) are started while one runs: each imports, reads the
gradebook and starts its kernel (which loads torch), seconds of CPU work on a GPU machine, then waits at
its gate (a file in the batch's own folder) and touches the GPU only once the notebook before has ended. Without a GPU
the default is one worker; more may be asked for (correctness only is graded).
The gradebook (SQLite or PostgreSQL) and grading on several machines (--shard): docs/grading-at-scale.md.

Student code cannot reach past its own notebook where the grader runs as root (the project's container):
every notebook's kernel then runs as a user of its own (grader/pipeline/sandbox.py), so it cannot read or
rewrite another student's submission, the gradebook, the solutions or the grader. A process that a
notebook leaves behind, even one that detached itself into a session of its own, is found and killed
when its notebook ends: the batch adopts orphans (Linux's child subreaper) and nbgrader's output goes
to a file, not a pipe that such a process could hold open.
"""
from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import csv
import itertools
import os
import platform
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from grader.checker import FLAGGED, GO_ENV, ready_file
from grader.course import Course
from grader.pipeline import fork_server, gpus, gradebook, kernel_forks, processes, sandbox

# How many notebooks a worker starts ahead of the one that runs: two, so that a notebook that takes a
# second or two (a prediction exercise) does not leave the next one's seconds of setting up in turn.
AHEAD = 2
WAIT_POLL_S = 0.1   # how often a worker looks at its running notebook (and starts the next ones)
# What the batch keeps of a notebook's nbgrader log (its output file, which the kernel writes too: any
# amount where it is not sandboxed, up to sandbox.FILE_SIZE_ENV where it is): the last LOG_LINES lines,
# each cut to LOG_LINE_CHARS, read a block at a time. The run log's reason comes from its last errors.
# A notebook none of whose cells has started this long after its turn came has a kernel that never started
# (a stuck start, a port taken): it is killed then and graded once more (kernel_never_started), rather
# than at its time limit (900 s by default). A kernel starts in seconds, tens on a busy 2-core machine.
# A CI run lost 240 s waiting for one at a test's time limit.
STARTUP_S = 120
LOG_LINES = 5000
LOG_LINE_CHARS = 2000


def notebooks_ahead(devices: list, cores: int | None = None) -> int:
    """How many notebooks each worker gets ready ahead (AHEAD), fewer where their setting up (about one
    CPU core each, for seconds) would share too few cores with a GPU that is timing kernels."""
    if not devices[0]:
        return AHEAD   # no GPU: nothing is timed
    per_worker = (cores or os.cpu_count() or 1) // len(devices)
    return max(0, min(AHEAD, per_worker // 2 - 1))


@dataclass
class Run:
    student: str
    day: str
    notebook: str
    status: str          # "graded", "timed out", "failed", "not submitted"
    seconds: float
    reason: str
    gpu: str
    gpu_index: str       # the CUDA_VISIBLE_DEVICES its nbgrader process got ("" without a GPU)
    driver: str
    torch: str
    triton: str


def parse_shard(text: str) -> tuple:
    """'K/N' -> (K, N): the K-th of N shares of the class, K counted from 0 (as Slurm array task ids
    --array=0-(N-1) and Kubernetes' JOB_COMPLETION_INDEX count)."""
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard takes K/N, such as 0/4: got {text!r}") from None
    if not (n >= 1 and 0 <= k < n):
        raise ValueError(f"--shard {text}: needs N >= 1 and 0 <= K < N")
    return k, n


def shard_of(students: list, k: int, n: int) -> list:
    """Student k, k+n, k+2n, ... of the sorted class: every shard gets the same list from the same
    submissions, shares differ in size by one at most, and each student is in exactly one."""
    return sorted(students)[k::n]


def nbgrader_command(day: str, student: str, notebook: str, url: str, sandboxed: bool = False) -> list:
    # --notebook restricts the run, and --force then replaces only this notebook's autograded copy
    # (nbgrader's init_destination): the student's other notebooks keep theirs.
    # grader.pipeline.nbgrader_process is nbgrader's command line, started and ended faster (see there).
    command = [sys.executable, "-m", "grader.pipeline.nbgrader_process", "autograde", day, "--student", student,
               "--notebook", notebook, "--force"]
    if sandboxed:
        command.append(f"--Execute.kernel_name={sandbox.KERNEL_NAME}")
    if url.startswith("sqlite"):
        command.append(f"--CourseDirectory.db_url={url}")  # the busy timeout; a PostgreSQL URL (and its
    return command                                          # password) stays off the command line


def grading_env() -> dict:
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    # Number GPUs as nvidia-smi does, so the index in the runs log is the GPU nvidia-smi shows.
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    return env


@dataclass
class Started:
    """A notebook's nbgrader process, started; with a gate, it waits for its turn before running a cell."""
    proc: subprocess.Popen
    out: object                 # the file that collects its output
    day: str
    student: str
    notebook: str
    info: dict
    device: str
    sandboxed: bool
    go: Path | None = None      # created when it may run (grader.checker.GO_ENV)


def start_notebook(course: Course, day: str, student: str, notebook: str, env: dict, info: dict,
                   device: str = "", sandboxed: bool = False, go: Path | None = None,
                   forks: fork_server.ForkServer | None = None) -> Started:
    """Start one notebook's nbgrader in a process tree of its own (a fork of `forks` where given). With
    `go`, nbgrader gets ready (gradebook, its kernel with torch loaded) and runs no cell until
    finish_notebook creates that file."""
    env = dict(env, **({"CUDA_VISIBLE_DEVICES": device} if device else {}), **({GO_ENV: str(go)} if go else {}))
    if sandboxed and go is not None:
        env[sandbox.UIDS_ENV] = str(_uids_record(go))
    if sandboxed:
        sandbox.close_ahead(course.autograded / student / day)
    # Output to a file: a process the notebook leaves behind could hold a pipe open for ever.
    out = tempfile.TemporaryFile("w+")
    command = nbgrader_command(day, student, notebook, course.db_url, sandboxed)
    proc = forks.start(command, course.root, env, out) if forks is not None else None
    if proc is None:
        proc = processes.start(command, cwd=course.root, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    return Started(proc, out, day, student, notebook, info, device, sandboxed, go)


def read_log(out) -> str:
    """The end of a notebook's nbgrader log (LOG_LINES lines of at most LOG_LINE_CHARS), in bounded memory:
    a kernel that writes to its standard output or error writes into this file."""
    out.seek(0)
    lines, partial = collections.deque(maxlen=LOG_LINES), ""
    while True:
        block = out.read(1 << 20)
        if not block:
            break
        *complete, partial = (partial + block).split("\n")
        lines.extend(line[:LOG_LINE_CHARS] for line in complete)
        partial = partial[:LOG_LINE_CHARS]   # a line without end is kept only as far as it is shown
    lines.append(partial)
    return "\n".join(lines)


def a_cell_started(out) -> bool:
    """Whether a notebook's nbgrader log says that a cell has started, read from its start (what a cell
    prints can push the marker out of read_log's last lines) while nbgrader still writes it: by offset
    (os.pread), since the file's position is shared with the nbgrader process that appends to it."""
    marker, tail, offset = sandbox.RUNNING_CELL.encode(), b"", 0
    while True:
        block = os.pread(out.fileno(), 1 << 20, offset)
        if not block:
            return False
        if marker in tail + block:
            return True
        tail, offset = block[-len(marker):], offset + len(block)


def _uids_record(go: Path) -> Path:
    """Where a notebook's kernel launcher writes its user id (sandbox.UIDS_ENV): beside its gate."""
    return go.with_name(go.name + ".uids")


def _kill_leftovers(started: Started) -> None:
    """Kill whatever the notebook's processes left running: everything of its kernel's user where the
    kernel was sandboxed, then the batch's children that are not a running nbgrader."""
    if started.sandboxed and started.go is not None:
        sandbox.kill_users(_uids_record(started.go))
    processes.kill_orphans()


def abandon_notebook(started: Started) -> None:
    """Kill a started notebook that will not get its turn (the batch is ending on an error)."""
    processes.kill_tree(started.proc.pid)
    try:
        started.proc.wait(timeout=30)   # its exit status collected (a process reaped, a fork's answer read)
    except subprocess.TimeoutExpired:
        pass
    processes.forget(started.proc.pid)
    _kill_leftovers(started)
    started.out.close()


def is_ready(started: Started) -> bool:
    """Whether a started notebook's nbgrader has set up the student's folder (or has already ended)."""
    return started.go is None or ready_file(started.go).exists() or started.proc.poll() is not None


def where_it_stood(log: str) -> str:
    """Where a notebook killed at its time limit stood, from the cells its nbgrader logged as started
    (nbgrader_process.mark_cells): the last one, or none if no cell ever ran."""
    cells = [line[len(sandbox.RUNNING_CELL):].strip() for line in log.splitlines()
             if line.startswith(sandbox.RUNNING_CELL)]
    if cells:
        return f"in cell {cells[-1]} (an endless loop or a hung kernel?)"
    return "before its first cell ran (its kernel did not start or did not answer)"


# How nbgrader says that a notebook's kernel never started: no student code ran, so the notebook is graded
# again once. Two kernels starting at once can pick the same TCP port (jupyter_client chooses free ports
# before the kernel binds them): seen on 2 busy cores as "Address already in use", then "Kernel died
# before replying to kernel_info" or "Kernel didn't respond".
NBGRADER_KERNEL_NEVER_STARTED = ("Kernel died before replying to kernel_info", "Kernel didn't respond in",
                                 "Address already in use")
KERNEL_NEVER_STARTED = NBGRADER_KERNEL_NEVER_STARTED + ("before its first cell ran",)   # (where_it_stood's)


def kernel_never_started(run: Run) -> bool:
    """Whether a run that was not graded ended before its kernel ran any of the notebook's cells."""
    return run.status in ("failed", "timed out") and any(sign in run.reason for sign in KERNEL_NEVER_STARTED)


def finish_notebook(course: Course, started: Started, timeout_s: float, meanwhile=lambda: None,
                    startup_s: float | None = None) -> Run:
    """Give a started notebook its turn and wait for it, killed past timeout_s (counted from its turn), or
    past startup_s if no cell of it has started by then (its kernel never started: graded once more).
    `meanwhile` is called about every WAIT_POLL_S while it runs."""
    start = time.monotonic()
    if started.go is not None:
        started.go.touch()
    proc, day, student, notebook = started.proc, started.day, started.student, started.notebook
    looked_for_a_cell = startup_s is None or startup_s >= timeout_s
    with started.out as out:
        try:
            while True:
                try:
                    proc.wait(timeout=WAIT_POLL_S)
                    timed_out = False
                    break
                except subprocess.TimeoutExpired:
                    waited = time.monotonic() - start
                    if waited >= timeout_s:
                        timed_out = True
                        break
                    if not looked_for_a_cell and waited >= startup_s:
                        looked_for_a_cell = True
                        if not a_cell_started(out):
                            timed_out = True
                            break
                    meanwhile()
            if timed_out:
                processes.kill_tree(proc.pid)
                proc.wait(timeout=30)
        finally:
            processes.forget(started.proc.pid)
            _kill_leftovers(started)
            if started.sandboxed:
                sandbox.reclaim(course.autograded / student / day)
        log = read_log(out)
    if timed_out:
        status, reason = "timed out", (f"still running after {min(time.monotonic() - start, timeout_s):.0f} s "
                                       f"{where_it_stood(log)}: scored 0")
    else:
        status, reason = "graded", flags_in(log)
        if proc.returncode != 0 or "[AutogradeApp | ERROR]" in log:
            errors = [line for line in log.splitlines() if "ERROR" in line or "Error" in line]
            ended = (f"nbgrader was killed by signal {-proc.returncode}" if proc.returncode < 0
                     else f"nbgrader exited with status {proc.returncode}")
            why = " | ".join(errors[-3:])[:500] or ended
            memory = [line for line in log.splitlines() if line.startswith(sandbox.OUT_OF_MEMORY)]
            if memory:   # nbgrader's own word (nbgrader_process.ran_out_of_memory), not its kernel's
                # Said first, in words a student can act on (the feedback page shows it: failure_feedback).
                why = (f"the grader ran out of memory while it kept this notebook's output: does a cell print "
                       f"or display hundreds of MB? ({memory[-1][len(sandbox.OUT_OF_MEMORY):].strip(' ()')}) | {why}")
            status, reason = "failed", why + ": scored 0"
        elif sandbox.OUTPUT_CAPPED in log:   # graded; what it printed past the cap was not kept
            reason = "; ".join(filter(None, [reason, f"{sandbox.OUTPUT_CAPPED} (the notebook's output passed "
                                                     f"its limit; the rest was not kept)"]))
    if status != "graded":
        # What a finished failure leaves in nbgrader: no autograded copy (a kill may come before nbgrader
        # removed the last run's), and 0 in the gradebook.
        (course.autograded / student / day / f"{notebook}.ipynb").unlink(missing_ok=True)
        gradebook.zero_notebook(course, day, student, notebook)
    return Run(student, day, notebook, status, round(time.monotonic() - start, 1), reason,
               gpu_index=started.device, **started.info)


def autograde_notebook(course: Course, day: str, student: str, notebook: str, timeout_s: float, env: dict,
                       info: dict, device: str = "", sandboxed: bool = False) -> Run:
    """One notebook of one student, in a process tree of its own, killed past timeout_s."""
    return finish_notebook(course, start_notebook(course, day, student, notebook, env, info, device, sandboxed),
                           timeout_s)


def _in_turn(students: queue.Queue):
    """(student, notebook) pairs, a whole student at a time, taken from the shared queue only when needed:
    a student's notebooks all go to one worker (they share a folder and a submission row)."""
    while True:
        try:
            student, notebooks = students.get_nowait()
        except queue.Empty:
            return
        for notebook in notebooks:
            yield student, notebook


def flags_in(log: str) -> str:
    """What the grading checker refused as physically impossible, from nbgrader's log: kept on record."""
    flagged = [line.split(FLAGGED, 1)[1].strip() for line in log.splitlines() if FLAGGED in line]
    return "; ".join(f"flagged: {f}" for f in flagged)[:500]


def runs_path(course: Course, day: str, shard=None) -> Path:
    name = f"runs-{day}.csv" if shard is None else f"runs-{day}-shard{shard[0]}of{shard[1]}.csv"
    return course.grading / name


def autograde_day(root: Path, day: str, timeout_s: float = 900, students=None, workers=None, shard=None,
                  log=print) -> list:
    """Autograde every collected submission of a day (or shard (K, N) of them).

    timeout_s bounds each notebook. workers defaults to one per visible GPU (one without a GPU).
    Returns one Run per (student, notebook), sorted, and writes them to grading/runs-<day>[-shard].csv.
    """
    course = Course.of(root)
    students = students or course.students(day)
    if shard is not None:
        students = shard_of(students, *shard)
    devices = gpus.worker_devices(workers, gpus.visible_gpus())
    env, info, names = grading_env(), gpus.machine(), gpus.gpu_names()
    log(f"autograding {day} for {len(students)} students"
        + (f" (shard {shard[0]}/{shard[1]})" if shard else "")
        + f" on {info['gpu']} with {len(devices)} worker(s)"
        + (f" (GPUs {', '.join(devices)})" if devices[0] else "")
        + f" (torch {info['torch']}, triton {info['triton']}, {platform.node()})")
    # Each notebook's nbgrader holds its kernel's outputs: bounded, sandboxed or not (nbgrader_process.py).
    env.setdefault(sandbox.NBGRADER_MEMORY_ENV, f"{sandbox.nbgrader_memory_gib(len(devices)):.1f}")
    why_not = sandbox.unavailable()
    if why_not is None:
        env.setdefault(sandbox.MEMORY_ENV, f"{sandbox.memory_limit_gib(len(devices)):.1f}")
        confined = sandbox.writes_confined()
        if confined is None:
            env[sandbox.LANDLOCK_ENV] = "1"
        log("each notebook's kernel runs as a user of its own: it can read the course's code, not the grading "
            f"workspace or the solutions, write only its own folders, and have at most "
            f"{sandbox.process_limit()} processes and threads, {env[sandbox.MEMORY_ENV]} GiB of private data per "
            f"process and files of {sandbox.file_size_limit() / 2**30:g} GiB (what it leaves in its notebook's folder "
            f"is removed)"
            + ("; Linux's Landlock keeps it from writing elsewhere, its own memory included" if confined is None
               else f"; file modes alone say where it writes ({confined})"))
    else:
        log(f"note: student code runs with this account's rights ({why_not}); grade untrusted work in the "
            f"container (see README, 'Untrusted code').")
    if course.db_url.startswith("sqlite") and shard is not None:
        log("warning: a SQLite gradebook is one file on this machine; shards on several machines need a shared "
            "PostgreSQL gradebook (NBGRADER_DB_URL, see docs/grading-at-scale.md)")
    gradebook.prepare_gradebook(course, day, students)

    released = course.notebooks(day)
    todo, runs = [], []
    for student in students:
        handed_in = {p.stem for p in (course.submitted / student / day).glob("*.ipynb")}
        todo.append((student, [nb for nb in released if nb in handed_in]))
        # nbgrader itself gives a notebook that was not handed in 0 (when it grades the student's others).
        runs += [Run(student, day, nb, "not submitted", 0.0, "not handed in: scored 0", gpu="", gpu_index="",
                     driver=info["driver"], torch=info["torch"], triton=info["triton"])
                 for nb in released if nb not in handed_in]
    total = sum(len(nbs) for _, nbs in todo)
    processes.adopt_orphans()
    scratch = Path(tempfile.mkdtemp(prefix="grader-batch-"))
    if why_not is None:  # kernels find the sandboxed kernelspec here, and make their homes here
        os.chmod(scratch, 0o755)
        env = dict(env, JUPYTER_PATH=os.pathsep.join(filter(None, [str(sandbox.kernelspec_dir(scratch)),
                                                                   env.get("JUPYTER_PATH")])),
                   GRADER_SANDBOX_TMP=str(scratch), **{sandbox.AUTOGRADED_ENV: str(course.autograded),
                                                       sandbox.KERNEL_GRADER_ENV: str(sandbox.kernel_grader(scratch / "code"))})
    students_left = queue.Queue()
    for student_notebooks in todo:
        students_left.put(student_notebooks)
    gates = scratch / "gates"   # the grader's alone: no kernel can open another notebook's gate
    gates.mkdir(mode=0o700)
    forks = None                # or ask the fork server for an nbgrader (fork_server.py): same reason
    lock, done, numbers = threading.Lock(), [0], itertools.count()
    ahead = notebooks_ahead(devices)

    def worker(device):
        # Notebooks run one at a time on this worker's GPU. The next ones (`ahead`) are started while one
        # runs and wait at their gates (start_notebook): their seconds of setting up are not spent in turn.
        gpu_info = dict(info, gpu=names.get(device, info["gpu"]))
        upcoming = _in_turn(students_left)

        def top_up():
            # One notebook sets up at a time (nbgrader copies the day's files into the student's folder):
            # the next starts once the last one started has done so (is_ready).
            while len(started) <= ahead and (not started or is_ready(started[-1])):
                job = next(upcoming, None)
                if job is None:
                    return
                go = gates / f"{device or 'cpu'}-{next(numbers)}"
                started.append(start_notebook(course, day, *job, env, gpu_info, device, why_not is None, go,
                                              forks))

        out, started = [], collections.deque()   # started[0] runs (or is next), the others wait
        try:
            top_up()
            while started:
                run = finish_notebook(course, started[0], timeout_s, meanwhile=top_up, startup_s=STARTUP_S)
                started.popleft()
                if kernel_never_started(run):   # once more, in its own turn: no student code has run
                    log(f"{run.student} {run.notebook}: its kernel did not start ({run.reason}); grading it again")
                    again = gates / f"{device or 'cpu'}-{next(numbers)}"
                    run = finish_notebook(course, start_notebook(course, day, run.student, run.notebook, env,
                                                                 gpu_info, device, why_not is None, again, forks),
                                          timeout_s)
                out.append(run)
                with lock:
                    done[0] += 1
                    log(f"[{done[0]}/{total}] {run.student} {run.notebook}: {run.status} ({run.seconds:.0f} s)"
                        + (f" - {run.reason}" if run.reason else ""))
                top_up()
            return out
        finally:
            for waiting in started:
                abandon_notebook(waiting)

    start = time.monotonic()
    closed = sandbox.closed_workspace(course, log, exercise_data=True) if why_not is None else contextlib.nullcontext()
    kernels = None              # the server that forks sandboxed kernels (kernel_forks.py)
    try:
        (scratch / "server").mkdir(mode=0o700)
        if why_not is None:
            home = scratch / "server" / "home"
            home.mkdir()
            kernels = kernel_forks.server(scratch / "server", sandbox.kernel_env(home, env),
                                          cwd=env[sandbox.KERNEL_GRADER_ENV])
        forks = fork_server.ForkServer(scratch / "server", env, course.root)
        if kernels is not None and kernels.ready:
            env[kernel_forks.SOCKET_ENV] = kernels.path
        with closed, concurrent.futures.ThreadPoolExecutor(max_workers=len(devices)) as pool:
            for future in [pool.submit(worker, device) for device in devices]:
                runs += future.result()
    finally:
        for server in (forks, kernels):
            if server is not None:
                server.close()
        processes.kill_orphans()
        processes.adopt_orphans(False)
        shutil.rmtree(scratch, ignore_errors=True)
    runs.sort(key=lambda r: (r.student, r.notebook))

    path = runs_path(course, day, shard)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[field.name for field in fields(Run)])
        writer.writeheader()
        for run in runs:
            writer.writerow(asdict(run))
    counts = {status: sum(r.status == status for r in runs)
              for status in ("graded", "timed out", "failed", "not submitted")}
    log(f"{day}: {total} notebooks of {len(students)} students in {time.monotonic() - start:.0f} s with "
        f"{len(devices)} worker(s): " + ", ".join(f"{n} {status}" for status, n in counts.items())
        + f"; log in {path}")
    return runs
