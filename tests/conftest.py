"""Shared set-up: the grader picks the device before any test module defines a Triton kernel."""
import subprocess
from pathlib import Path

import pytest

import grader
from grader.course import Course

DEVICE = grader.setup(quiet=True)
REPO = Path(__file__).resolve().parent.parent

on_cpu_only = pytest.mark.skipif(DEVICE.is_gpu, reason="checks the behaviour without a GPU")


def wrap_triton_takes_interpreted_kernels() -> bool:
    """Whether this PyTorch's wrap_triton launches a kernel of Triton's CPU interpreter (2.7's and 2.9's
    refuse: there an honest triton_op notebook fails on the CPU as it would in the student's own notebook)."""
    if DEVICE.is_gpu:
        return True
    import torch
    import triton
    from torch.library import wrap_triton

    @triton.jit
    def probe(x_ptr):
        pass
    try:
        wrap_triton(probe)[(1,)](torch.zeros(1))
        return True
    except Exception:   # noqa: BLE001 - what PyTorch says is its own business here
        return False


def needs_gpu(reason: str = "needs a CUDA GPU"):
    """Marks a test `gpu` and skips it without one (`pytest -m gpu` on a GPU machine runs just these)."""
    def mark(test):
        return pytest.mark.gpu(pytest.mark.skipif(not DEVICE.is_gpu, reason=reason)(test))
    return mark


on_gpu_only = needs_gpu()

# What a test file needs beyond Python and the CPU, as markers (pyproject.toml describes them):
# `make test-fast` leaves these files out, `make test` and CI run everything.
FILES_MARKED = {
    "e2e": {"test_adversarial_batch", "test_checker", "test_cli", "test_colab_runtime",
            "test_headless", "test_isolation", "test_kernel_forks", "test_nbgrader_pipeline", "test_parallel_batch",
            "test_redteam", "test_redteam_pipeline_softmax", "test_student_edition"},
    "browser": {"test_browser"},
    "postgres": {"test_gradebook_postgres"},
}


def require_sandbox():
    """Skip where kernels cannot run as a user of their own (a private /root holding Python, say), but
    fail where the environment says they must (REQUIRE_SANDBOX=1, as CI sets it)."""
    import os
    from grader.pipeline import sandbox
    why_not = sandbox.unavailable()
    if why_not:
        if os.environ.get("REQUIRE_SANDBOX"):
            pytest.fail(f"kernels cannot be sandboxed here: {why_not}")
        pytest.skip(f"kernels cannot be sandboxed here: {why_not}")


# Files whose tests share nothing (no fixture wider than a test, no order): with `--dist loadfile` pytest-xdist
# hands their tests to its workers one by one; every other file's tests, and a lecture notebook's cells, go
# to one worker and run there in order, as loadfile does.
SPREAD = {"test_wrong_variants", "test_solutions", "test_timer"}


# The files that take longest (worker-seconds of one CI run, the most first), handed out first: pytest-xdist
# would start with the files of the most tests, which left these, of one or two tests each, for the end, and
# one worker grading the adversarial class alone for minutes after the other had finished.
LONGEST_FIRST = ["test_adversarial_batch", "test_colab_runtime", "test_parallel_batch", "test_headless",
                 "test_redteam_pipeline_softmax", "test_checker", "test_browser", "test_nbgrader_pipeline",
                 "test_gradebook_postgres", "test_isolation", "test_redteam", "test_timer"]


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling
    config.option.loadscopereorder = False   # in the order of collection: LONGEST_FIRST's

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return nodeid if Path(file).stem in SPREAD else super()._split_scope(nodeid)
    return Scheduling(config, log)


def pytest_runtest_logreport(report):
    """FAILURES_AT_ONCE=1 (.ci/gpu-env sets it): a failure's message is printed as soon as the test fails,
    not only in pytest's summary at the end, which a run stopped at a time limit never prints (a GPU
    machine's calls have one: a failing honest variant's message was lost so)."""
    import os
    if os.environ.get("FAILURES_AT_ONCE") and report.failed:
        print(f"\n--- {report.nodeid} ({report.when}) failed:\n{report.longreprtext[-6000:]}\n", flush=True)


def pytest_collection_modifyitems(config, items):
    for item in items:
        for marker, files in FILES_MARKED.items():
            if item.path.stem in files:
                item.add_marker(marker)
        if "course_copy" in getattr(item, "fixturenames", ()):
            item.add_marker("batch")
    _take_a_share_of_the_variants(config, items)
    rank = {stem: i for i, stem in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))   # stable: each file's own order kept


def _take_a_share_of_the_variants(config, items):
    """VARIANTS_SHARE=k/n keeps share k of n of tests/test_wrong_variants.py's variants, each test in one
    share by a hash of its name (adding a variant moves no other). CI's two other version pairs run a share
    each: every variant still runs under the main pair and one more."""
    import os
    import zlib
    share = os.environ.get("VARIANTS_SHARE")
    if not share:
        return
    k, n = (int(x) for x in share.split("/"))
    left_out = [item for item in items if item.path.stem == "test_wrong_variants" and "[" in item.name
                and zlib.crc32(item.name.encode()) % n != k]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        gone = set(left_out)
        items[:] = [item for item in items if item not in gone]


@pytest.fixture
def course_copy(tmp_path):
    """A throwaway copy of the course (config, solutions, exercises) to run nbgrader in."""
    return Course.of(REPO).scratch_copy(tmp_path / "course").root


_forks = []   # this test process's fork server for nbgrader commands, started by the first one


def _nbgrader_command(root: Path, *args: str) -> subprocess.CompletedProcess:
    """`nbgrader ARGS` in a course, as Course.nbgrader runs it, but forked from a server that has imported
    nbgrader and set it up once (the batch's, grader/pipeline/fork_server.py): the tests release and export
    some fifty times a run, each command 2 to 3 s of CPU when started anew. Its output and errors come
    back together, as stdout; where no server answers, the command starts anew."""
    import sys
    import tempfile
    from grader.pipeline import fork_server
    course = Course.of(root)
    if not _forks:
        folder = Path(tempfile.mkdtemp(prefix="nbgrader-forks-"))   # private (0700), as the batch's
        _forks.append(fork_server.ForkServer(folder, course.nbgrader_env(), REPO))
    with tempfile.TemporaryFile("w+") as out:
        forked = _forks[0].start([sys.executable, "-m", fork_server.MODULE, *args], root, course.nbgrader_env(), out)
        if forked is None:
            return course.nbgrader(*args)
        code = forked.wait(timeout=900)
        out.seek(0)
        return subprocess.CompletedProcess(["nbgrader", *args], code, out.read(), "")


def nbgrader_server_pids() -> set:
    """The process of the fork server that nbgrader() starts, which lives as long as this test process."""
    return {server.proc.pid for server in _forks if server.proc is not None}


def nbgrader(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run one nbgrader command in a course folder, with the current Python environment (once more if a
    kernel never started: two kernels starting at once on a busy machine can pick the same port)."""
    from grader.pipeline.batch import NBGRADER_KERNEL_NEVER_STARTED
    proc = _nbgrader_command(root, *args)
    if proc.returncode != 0 and any(sign in proc.stdout + proc.stderr for sign in NBGRADER_KERNEL_NEVER_STARTED):
        proc = _nbgrader_command(root, *args)
    if check and proc.returncode != 0:
        raise AssertionError(f"nbgrader {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def timed_runs(key, fn, shape, dtype=None, runs=3):
    """What timing.compare does with a student's call, without the GPU timer: works on the CPU too.
    Every run gets new inputs and, unlike compare (which picks a few at random), is checked."""
    import torch
    from grader.student import checks, guard
    spec = grader.exercises.get(key)
    device = DEVICE.torch_device
    dtype = dtype or torch.float32
    gen = torch.Generator(device=device).manual_seed(0)
    args = spec.make_inputs(shape, dtype, device, gen)
    with guard.watch(poison=False, ops=False) as record:
        timed = checks.student_call(spec, fn, args, shape, dtype, gen, record)
        timed(), timed()  # the warm-up calls
        for run in range(runs):
            timed.prepare()
            timed.verify(timed(), run)
