"""A class graded by several workers at once into a PostgreSQL gradebook (NBGRADER_DB_URL).

The test starts a PostgreSQL server of its own: a new cluster in a temporary folder, listening only on a
unix socket there, run by an unprivileged user when the tests run as root (postgres refuses root). It
is stopped and deleted afterwards. Without PostgreSQL's server programs (initdb, pg_ctl) the test
skips, unless REQUIRE_POSTGRES=1 (CI sets it), where it fails.
"""
import csv
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from classroom import CPU_POINTS, DAY, exported, filled, submit, untouched
from conftest import DEVICE, nbgrader
from grader.pipeline import batch

pytestmark = pytest.mark.skipif(DEVICE.is_gpu, reason="expected scores are those without a GPU")


def _server_bin():
    """The folder of PostgreSQL's server programs: Debian keeps them off PATH, per major version."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb and shutil.which("pg_ctl") else None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def postgres():
    """postgresql:// URL of a fresh database on a server of the test's own; stopped and removed after."""
    bindir = _server_bin()
    if bindir is None:
        why = "PostgreSQL's server programs (initdb, pg_ctl) are not installed (apt-get install postgresql)"
        if os.environ.get("REQUIRE_POSTGRES") == "1":
            pytest.fail(f"REQUIRE_POSTGRES=1 but {why}", pytrace=False)
        pytest.skip(why)
    # A short path: a unix socket's path may not exceed ~100 characters.
    base = Path(tempfile.mkdtemp(prefix="pg-"))
    run_as = []
    if os.geteuid() == 0:  # postgres refuses to run as root: run it as an unprivileged account
        user = next((u for u in ("postgres", "nobody") if _has_user(u)), None)
        if user is None or not shutil.which("runuser"):
            pytest.fail("running as root, but there is no postgres/nobody user or no runuser to start PostgreSQL")
        run_as = ["runuser", "-u", user, "--"]
        os.chown(base, pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid)
    data, port = base / "data", _free_port()

    def server(*args):
        return subprocess.run(run_as + [str(bindir / args[0]), *args[1:]], capture_output=True, text=True,
                              timeout=120, cwd=base)

    def check(proc):
        log = (base / "server.log").read_text() if (base / "server.log").exists() else ""
        assert proc.returncode == 0, f"{proc.args}: {proc.stdout}{proc.stderr}{log}"

    try:
        check(server("initdb", "-D", str(data), "-U", "grader", "--auth=trust", "-E", "UTF8", "--no-sync"))
        # Only the unix socket in `base` (no TCP): nothing outside this test can reach the server.
        check(server("pg_ctl", "-D", str(data), "-l", str(base / "server.log"), "-w", "-t", "60",
                     "-o", f"-c listen_addresses='' -k {base} -p {port} -c fsync=off", "start"))
        check(server("createdb", "-h", str(base), "-p", str(port), "-U", "grader", "gradebook"))
        # SQLAlchemy 2.1 reads plain postgresql:// as psycopg 3; the test extra installs psycopg2.
        yield f"postgresql+psycopg2://grader@/gradebook?host={base}&port={port}"
    finally:
        if (data / "postmaster.pid").exists():
            server("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)


def _has_user(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


# student -> {notebook: what they hand in}
CLASS = {
    "alice": {"bias_gelu": filled, "predict_runtime": filled, "vector_add": filled},
    "ivan": {"vector_add": filled},
    "judy": {"bias_gelu": filled, "predict_runtime": untouched},
}
EXPECTED = {"alice": 8.0, "ivan": CPU_POINTS["vector_add"], "judy": CPU_POINTS["bias_gelu"]}


def test_two_workers_grade_a_class_into_a_postgresql_gradebook(postgres, course_copy, monkeypatch):
    monkeypatch.setenv("NBGRADER_DB_URL", postgres)  # read by nbgrader_config.py, in nbgrader and in batch
    nbgrader(course_copy, "generate_assignment", DAY, "--force")
    for student, notebooks in CLASS.items():
        for name, make in notebooks.items():
            submit(course_copy, student, DAY, name, make(DAY, name))

    runs = batch.autograde_day(course_copy, DAY, timeout_s=120, workers=2, log=lambda *a: None)
    # (seen once in CI with both cores busy: one notebook "failed"; the reason says why if it comes back)
    assert [r.status for r in runs if r.status != "not submitted"] == ["graded"] * 6, \
        [(r.status, r.reason) for r in runs if r.status not in ("graded", "not submitted")]
    assert exported(course_copy) == EXPECTED
    assert not (course_copy / "grading" / "gradebook.db").exists()  # nothing went to a SQLite file

    # every graded cell of every notebook handed in has its score in the gradebook: none lost
    from nbgrader.api import Gradebook
    with Gradebook(postgres, "") as gb:
        for student, notebooks in CLASS.items():
            for name in notebooks:
                grades = gb.find_submission_notebook(name, DAY, student).grades
                assert grades and all(g.auto_score is not None for g in grades), (student, name)
    rows = list(csv.DictReader(open(course_copy / "grading" / f"runs-{DAY}.csv")))
    assert len(rows) == 9
