"""Landlock's write confinement of a sandboxed kernel (grader/pipeline/landlock.py), in a child process.

tests/test_redteam.py grades a notebook that tries to write its own memory through the real pipeline."""
import subprocess
import sys

import pytest

from grader.pipeline import landlock

pytestmark = pytest.mark.skipif(not landlock.abi(), reason="this Linux kernel has no Landlock")

TRIES = """
import sys
from grader.pipeline import landlock
print(landlock.restrict_writes([sys.argv[1], "/dev", "/no/such/folder"]))
for path, mode in ((sys.argv[1] + "/notes.txt", "w"), ("/dev/null", "w"), ("/proc/self/mem", "r+b"),
                   (sys.argv[2] + "/outside.txt", "w"), ("/proc/self/status", "r")):
    try:
        open(path, mode).close()
        print("wrote" if "w" in mode or "+" in mode else "read", path)
    except OSError as e:
        print("refused", path, type(e).__name__)
"""


def test_a_confined_process_writes_only_beneath_its_folders(tmp_path):
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    out = subprocess.run([sys.executable, "-c", TRIES, str(inside), str(outside)], capture_output=True,
                         text=True, timeout=120)
    lines = out.stdout.splitlines()
    assert lines == ["None", f"wrote {inside}/notes.txt", "wrote /dev/null", "refused /proc/self/mem PermissionError",
                     f"refused {outside}/outside.txt PermissionError", "read /proc/self/status"], out.stdout + out.stderr
    # ... and only that process: this one still writes where it likes.
    (outside / "after.txt").write_text("ok")
