"""The oldest torch and triton the course supports: declared once (pyproject.toml), checked at set-up."""
import re
from pathlib import Path

from grader import versions

REPO = Path(__file__).resolve().parent.parent


def test_the_minimums_checked_are_the_ones_pyproject_declares():
    declared = dict(re.findall(r'"(torch|triton)>=([\d.]+)"', (REPO / "pyproject.toml").read_text()))
    assert set(declared) == {"torch", "triton"}
    assert versions.declared_minimums() == declared


def test_an_older_package_is_named_with_what_to_install():
    minimums = {"torch": "2.7", "triton": "3.3"}
    lines = versions.upgrades(installed={"torch": "2.5.1+cu124", "triton": "3.1.0"}, minimums=minimums)
    assert len(lines) == 2
    assert "torch 2.5.1+cu124 is older" in lines[0] and "pip install -U 'torch>=2.7'" in lines[0]
    assert "pip install -U 'triton>=3.3'" in lines[1]


def test_supported_local_and_pre_release_builds_pass():
    minimums = {"torch": "2.7", "triton": "3.3"}
    for installed in ({"torch": "2.7.0+cu126", "triton": "3.3.0"}, {"torch": "2.13.0+cpu", "triton": "3.9.0"},
                      {"torch": "2.12.0a0+git1234", "triton": "3.10.0"}, {"torch": "2.11.0"}):
        assert versions.upgrades(installed=installed, minimums=minimums) == [], installed


def test_set_up_says_what_to_upgrade(monkeypatch, capsys):
    import grader
    monkeypatch.setattr(versions, "upgrades", lambda **kwargs: ["torch 2.5.1 is older than this course supports"])
    grader.setup()
    assert "torch 2.5.1 is older than this course supports" in capsys.readouterr().out


def test_an_old_triton_interpreter_with_a_new_numpy_is_named_only_where_it_runs():
    # Measured: Triton 3.3 to 3.6's interpreter fails every loop over a run-time bound with NumPy 2.4 (3.6.0
    # with 2.4.6, and with 2.5.2 on a GPU machine forced onto the interpreter), and passes with NumPy 2.3;
    # Triton 3.7 and later work with both.
    old = {"torch": "2.11.0", "triton": "3.6.0", "numpy": "2.4.1"}
    line, = versions.upgrades(interpreter=True, installed=old, minimums={})
    assert "NumPy 2.4.1" in line and "numpy<2.4" in line and "triton>=3.7" in line
    assert versions.upgrades(interpreter=False, installed=old, minimums={}) == []      # on a GPU: no interpreter
    assert versions.upgrades(interpreter=True, installed=dict(old, numpy="2.3.5"), minimums={}) == []
    assert versions.upgrades(interpreter=True, installed=dict(old, triton="3.7.0"), minimums={}) == []
