"""The fork server that starts each notebook's nbgrader (grader/pipeline/fork_server.py).

The batch tests grade through it (tests/test_adversarial_batch.py: a notebook killed past its time limit,
gates, the sandbox), and tests/test_redteam.py checks that a kernel cannot reach its socket.
"""
import os
import subprocess
import sys
import tempfile

import pytest

from conftest import REPO
from grader.pipeline import fork_server

NBGRADER = [sys.executable, "-m", fork_server.MODULE]


def _printed_by(code: str, cwd=None) -> list:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))   # the grader from any folder
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=cwd,
                         env=dict(os.environ, PYTHONPATH=path))
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.split()


def test_what_the_server_imports_starts_no_python_thread_and_no_cuda():
    # (on a GPU machine this also says that importing torch and Triton left CUDA uninitialized)
    assert _printed_by("from grader.pipeline import fork_server as f\n"
                       "f.load(f.PRELOAD)\n"
                       "print(f._python_threads(), f._cuda_initialized())") == ["1", "False"]


def test_the_server_has_set_up_a_gradebook_and_a_validator_and_written_nothing(tmp_path):
    # nbgrader_process.warm_up: SQLAlchemy's mappings of nbgrader's tables and nbformat's compiled schema are
    # inherited by every fork; its gradebook was in memory, so nothing is left in the folder it ran in
    printed = _printed_by("import nbformat.validator, nbgrader.api\nfrom grader.pipeline import fork_server as f\n"
                          "f.load(f.PRELOAD)\n"
                          "print(len(nbformat.validator.validators), nbgrader.api.Course.__mapper__.configured)",
                          cwd=tmp_path)
    assert printed == ["2", "True"], printed
    assert not list(tmp_path.iterdir())


def test_a_preload_entry_may_be_optional_or_name_a_function_to_run(tmp_path):
    (tmp_path / "warm.py").write_text("import sys\ndef up():\n    sys.modules['warm'].ran = True\n")
    assert _printed_by("import sys; sys.path.insert(0, '.'); from grader.pipeline import fork_server as f\n"
                       "f.load(['json', 'no_such_package.part?', 'json.no_such_module?', 'warm:up'])\n"
                       "import warm; print(warm.ran, 'no_such_package' in sys.modules)", cwd=tmp_path) == ["True", "False"]
    with pytest.raises(AssertionError, match="ModuleNotFoundError"):    # not optional: its absence is an error
        _printed_by("from grader.pipeline import fork_server as f\nf.load(['no_such_package'])")


@pytest.mark.skipif(not os.path.exists("/dev/nvidiactl"), reason="needs a GPU")
def test_a_process_that_initialized_cuda_is_not_forked_from():
    assert _printed_by("import torch; from grader.pipeline import fork_server as f\n"
                       "before = f._cuda_initialized(); torch.zeros(1, device='cuda')\n"
                       "print(before, f._cuda_initialized())") == ["False", "True"]


@pytest.fixture
def forks(tmp_path):
    folder = tmp_path / "server"
    folder.mkdir(mode=0o700)
    server = fork_server.ForkServer(folder, dict(os.environ), REPO)
    yield server
    server.close()


def _run(forks, args, cwd):
    out = tempfile.TemporaryFile("w+")
    proc = forks.start(NBGRADER + args, cwd, dict(os.environ), out)
    assert proc is not None and proc.pid != forks.proc.pid
    code = proc.wait(timeout=120)
    out.seek(0)
    return code, out.read()


def test_a_fork_is_nbgrader_with_its_arguments_output_and_exit_status(forks, tmp_path):
    assert forks.ready
    import nbgrader
    code, printed = _run(forks, ["--version"], tmp_path)
    assert code == 0 and nbgrader.__version__ in printed
    code, printed = _run(forks, ["autograde", "nosuchday", "--student", "x"], tmp_path)
    assert code == 1, printed
    # anything but nbgrader's command line is left to the caller to start as a process
    assert forks.start([sys.executable, "-c", "pass"], tmp_path, dict(os.environ), tempfile.TemporaryFile()) is None


def test_a_request_sent_while_the_server_imports_waits_and_one_it_refuses_falls_back(tmp_path):
    # The server listens before it imports: a request sent meanwhile is answered once the imports are done.
    # Where the imports leave a thread running it serves none, and `start` says so (None: a new process).
    (tmp_path / "slow_server.py").write_text(
        "import os, sys, threading, time\nfrom grader.pipeline import fork_server\n"
        "if os.environ['HOW'] == 'refuse': threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
        "fork_server.serve(sys.argv[1])\n")
    for how in ("serve", "refuse"):
        folder = tmp_path / how
        folder.mkdir(mode=0o700)
        env = dict(os.environ, HOW=how,
                   PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), str(tmp_path), os.environ.get("PYTHONPATH")])))
        server = fork_server.ForkServer(folder, env, REPO, module="slow_server")
        try:
            assert server.ready   # listening, still importing
            proc = server.start(NBGRADER + ["--version"], tmp_path, dict(os.environ), tempfile.TemporaryFile("w+"))
            if how == "serve":
                assert proc is not None and proc.wait(timeout=120) == 0
            else:
                assert proc is None and server.proc.wait(timeout=60) == 3
        finally:
            server.close()


def test_the_server_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv(fork_server.OFF_ENV, "0")
    server = fork_server.ForkServer(tmp_path, dict(os.environ), REPO)
    assert not server.ready and server.start(NBGRADER + ["--version"], tmp_path, {}, None) is None
    server.close()


def test_the_server_imports_from_the_course_not_from_where_the_batch_was_started(forks, tmp_path):
    # `python -m` puts the working folder first on sys.path: a module planted in a folder student code can
    # write (the batch started from /tmp) must not be imported by the server or its forks, which run as root
    with open(f"/proc/{forks.proc.pid}/cwd/nbgrader_config.py"):
        pass   # the server runs in the course's root (where nbgrader_config.py is)
    assert os.path.realpath(f"/proc/{forks.proc.pid}/cwd") == os.path.realpath(REPO)


def test_a_thread_an_import_left_for_a_moment_is_waited_for_and_one_that_stays_is_not():
    # (in a process of its own, as the server is: this one may run threads of its own, xdist's)
    script = ("import threading, time\nfrom grader.pipeline import fork_server\n"
              "threading.Thread(target=time.sleep, args=(0.2,)).start()\n"
              "print(fork_server._others_ended(5.0))\n"
              "stays = threading.Event()\nthreading.Thread(target=stays.wait, args=(30,)).start()\n"
              "started = time.monotonic()\nprint(fork_server._others_ended(0.3), time.monotonic() - started < 5)\n"
              "stays.set()\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.stdout.split() == ["True", "False", "True"], done.stdout + done.stderr
