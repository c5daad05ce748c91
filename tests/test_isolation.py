"""Grading as the grading container does it: the course read-only, no network, only grading/ writable.

The container (README, "Grading untrusted submissions") is `docker run --network none --read-only`
with grading/ mounted writable. Here the same confinement comes from Linux namespaces (`unshare`): a
private mount namespace where the course is re-mounted read-only and grading/ is bound in from a
writable folder, and a network namespace with nothing but loopback.
"""
import csv
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, nbgrader

UNSHARE = shutil.which("unshare")


def _confined(course, grading, code):
    script = f'''
set -e
ip link set lo up                                   # Jupyter talks to its kernel over loopback
mount --bind "{course}" "{course}" && mount -o remount,bind,ro "{course}"
mount --bind "{grading}" "{course}/grading"
if touch "{course}/written" 2>/dev/null; then echo "the course is writable"; exit 3; fi
if {sys.executable} -c "import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)" 2>/dev/null; then
  echo "the network is reachable"; exit 4
fi
cd "{course}"
{sys.executable} -c "{code}"
'''
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]))
    return subprocess.run([UNSHARE, "--mount", "--net", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, env=env, timeout=900)


@pytest.mark.skipif(UNSHARE is None or os.geteuid() != 0, reason="needs unshare and root (as in CI)")
def test_autograde_works_with_the_course_read_only_and_no_network(course_copy, tmp_path):
    nbgrader(course_copy, "generate_assignment", "day1", "--force")
    submitted = course_copy / "grading" / "submitted" / "ro_student" / "day1"
    submitted.mkdir(parents=True)
    shutil.copy(course_copy / "solutions" / "day1" / "vector_add.ipynb", submitted)
    nbgrader(course_copy, "db", "student", "add", "ro_student")
    grading = tmp_path / "grading"                     # the writable volume, as `-v grading:/course/grading`
    shutil.move(course_copy / "grading", grading)
    (course_copy / "grading").mkdir()

    probe = _confined(course_copy, grading, "print('confined')")
    if probe.returncode != 0 and "confined" not in probe.stdout:
        if "Operation not permitted" in probe.stderr or "permission denied" in probe.stderr.lower():
            pytest.skip(f"namespaces not allowed here: {probe.stderr.strip()[-200:]}")
        raise AssertionError(probe.stdout + probe.stderr)

    proc = _confined(course_copy, grading,
                     "from pathlib import Path; from grader.pipeline import batch; "
                     "runs = batch.autograde_day(Path('.'), 'day1', timeout_s=600, log=print); "
                     "print('STATUS', [r.status for r in runs])")
    assert proc.returncode == 0 and "STATUS" in proc.stdout, proc.stdout + proc.stderr
    assert "'failed'" not in proc.stdout and "'timed out'" not in proc.stdout, proc.stdout
    assert not (course_copy / "written").exists()

    shutil.rmtree(course_copy / "grading")
    shutil.move(grading, course_copy / "grading")
    nbgrader(course_copy, "export", "--to", "grades.csv")
    rows = {r["student_id"]: float(r["score"]) for r in csv.DictReader(open(course_copy / "grades.csv"))}
    assert rows["ro_student"] == 3.0   # vector_add's correctness points (speed needs a GPU)
