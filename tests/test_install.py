"""`make lab` as students meet it: Linux only (one message otherwise), root allowed, no test tools."""
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _make(*args, cwd=REPO):
    # A make of its own, not a sub-make of `make test` (which would add "Entering directory" lines).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return subprocess.run(["make", *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


def _lab_command(output: str) -> str:
    return next(line for line in output.splitlines() if "jupyter lab" in line)


def test_on_macos_or_windows_make_lab_stops_with_one_message_before_installing(tmp_path):
    for system in ("Darwin", "MINGW64_NT-10.0-19045"):
        run = _make("lab", f"OS_NAME={system}", f"VENV={tmp_path / 'venv'}")
        assert run.returncode != 0
        assert "Colab" in run.stderr and "WSL2" in run.stderr, run.stderr
        assert not (tmp_path / "venv").exists()          # nothing was installed


def test_make_lab_starts_jupyterlab_as_root_too(tmp_path):
    venv = f"VENV={tmp_path / 'venv'}"
    as_root = _lab_command(_make("-n", "lab", "OS_NAME=Linux", "USER_ID=0", venv).stdout)
    as_user = _lab_command(_make("-n", "lab", "OS_NAME=Linux", "USER_ID=1000", venv).stdout)
    assert "jupyter lab" in as_root and "--allow-root" in as_root
    assert "jupyter lab" in as_user and "--allow-root" not in as_user


def test_students_get_the_course_without_the_test_suite_s_tools(tmp_path):
    venv = f"VENV={tmp_path / 'venv'}"
    lab = _make("-n", "lab", "OS_NAME=Linux", venv).stdout
    test = _make("-n", "test", "OS_NAME=Linux", venv).stdout
    assert "pip install -q -e .\n" in lab and ".[test]" not in lab
    assert '-e ".[test]"' in test
