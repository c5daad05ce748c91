"""Every notebook opens in Colab: its first code cell is grader/colab.py's install cell, which installs
the course there and does nothing elsewhere; the README links every notebook."""
import os
import shutil
import subprocess
import sys
import types

import nbformat
import pytest

import grader.colab
from grader import colab
from conftest import REPO

NOTEBOOKS = sorted(p for folder in ("course", "solutions", "exercises") for p in (REPO / folder).glob("*/*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(REPO)))
def test_the_first_code_cell_is_the_install_cell(path):
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.source == colab.install_cell_source(), f"run `course-grader colab` ({path.name})"
    assert first.id == colab.CELL_ID
    meta = first.metadata.get("nbgrader")
    if path.parts[len(REPO.parts)] == "course":
        assert meta is None
    else:  # read-only and worth no points: nbgrader and `sanitize` put it back as released
        assert meta["grade_id"] == colab.GRADE_ID and meta["locked"] and not meta["grade"] and not meta["solution"]


def test_rewriting_changes_nothing_when_all_is_in_step(tmp_path):
    for folder in ("course", "solutions"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    shutil.copytree(REPO / "exercises", tmp_path / "exercises")
    shutil.copy(REPO / "README.md", tmp_path)
    assert colab.rewrite(tmp_path) == []


def test_rewriting_replaces_the_cell_once(tmp_path, monkeypatch):
    path = tmp_path / "nb.ipynb"
    shutil.copy(REPO / "course" / "day1" / "01_what_is_a_kernel.ipynb", path)
    _published(monkeypatch, PUBLISHED[0], "v9.9.9")
    assert colab.update_notebook(path, nbgrader=False)
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    assert "@v9.9.9" in cells[0].source and sum("pip" in c.source for c in cells) == 1
    assert "grader.setup()" in cells[1].source
    assert not colab.update_notebook(path, nbgrader=False)


def _run_cell(monkeypatch, colab_env: bool):
    """Execute the install cell as a kernel would, with pip and Colab's widget switch replaced."""
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(("pip", a[0])))
    monkeypatch.setattr(grader.colab, "enable_widgets", lambda: calls.append(("widgets",)))
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    if colab_env:
        monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab_20250101-060000_RC00")
    else:
        monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    exec(colab.install_cell_source(), {"__name__": "__main__"})
    return calls


def test_outside_colab_the_cell_does_nothing(monkeypatch):
    assert _run_cell(monkeypatch, colab_env=False) == []


PUBLISHED = ("https://github.com/example-school/gpu-course-students", "v1.2.0")


def _published(monkeypatch, repo=PUBLISHED[0], ref=PUBLISHED[1]):
    monkeypatch.setattr(colab, "COURSE_REPO", repo)
    monkeypatch.setattr(colab, "COURSE_REF", ref)


def test_unpublished_the_cell_stops_in_colab_with_the_reason_and_does_nothing_elsewhere(monkeypatch):
    _published(monkeypatch, None, None)
    assert _run_cell(monkeypatch, colab_env=False) == []
    with pytest.raises(RuntimeError, match="not published for Colab yet"):
        _run_cell(monkeypatch, colab_env=True)


def test_in_colab_the_cell_pip_installs_the_pinned_course_without_touching_torch(monkeypatch):
    _published(monkeypatch)
    calls = _run_cell(monkeypatch, colab_env=True)
    (_, pip), widgets = calls
    assert pip[1:5] == ["-m", "pip", "install", "-q"] and "--no-deps" in pip
    assert "gpu-course @ git+https://github.com/example-school/gpu-course-students@v1.2.0" in pip
    assert not any(arg.split("=")[0].split("<")[0].split(">")[0] in ("torch", "triton") for arg in pip)
    assert widgets == ("widgets",)


def test_the_cell_is_detected_by_the_colab_module_too(monkeypatch):
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    assert colab.in_colab()


@pytest.mark.parametrize("version, switched_on", [("7.7.1", False), ("8.1.5", True)])
def test_widgets_need_colabs_widget_manager_only_with_ipywidgets_8(monkeypatch, version, switched_on):
    switched = []
    output = types.SimpleNamespace(enable_custom_widget_manager=lambda: switched.append(True))
    google_colab = types.ModuleType("google.colab")
    google_colab.output = output
    monkeypatch.setitem(sys.modules, "google.colab", google_colab)
    monkeypatch.setitem(sys.modules, "ipywidgets", types.SimpleNamespace(__version__=version))
    colab.enable_widgets()
    assert bool(switched) == switched_on


def test_the_readme_s_colab_section_is_the_one_the_settings_make():
    readme = (REPO / "README.md").read_text()
    assert readme.count(colab.LINKS_START) == 1 and readme.count(colab.LINKS_END) == 1
    section = colab.LINKS_START + readme.split(colab.LINKS_START)[1].split(colab.LINKS_END)[0] + colab.LINKS_END
    assert section == colab.readme_section(REPO), "run `course-grader colab`"


def test_published_the_readme_links_every_lecture_and_exercise_in_colab(monkeypatch):
    _published(monkeypatch)
    section = colab.readme_section(REPO)
    students = sorted(p.relative_to(REPO).as_posix() for f in ("course", "exercises") for p in (REPO / f).glob("*/*.ipynb"))
    assert len(students) > 20
    for path in students:
        assert (f"https://colab.research.google.com/github/example-school/gpu-course-students/blob/v1.2.0/{path})"
                in section)
    assert "solutions/" not in section


def test_unpublished_the_readme_links_nowhere_and_says_how_to_publish(monkeypatch):
    _published(monkeypatch, None, None)
    section = colab.readme_section(REPO)
    assert "colab.research.google.com" not in section and "github.com/" in section
    assert "course-grader colab --repo" in section and "student-edition" in section


def test_the_settings_are_written_by_the_command_and_checked(tmp_path, monkeypatch):
    _published(monkeypatch, None, None)       # the running module's settings are put back after the test
    module = tmp_path / "colab.py"
    shutil.copy(REPO / "grader" / "colab.py", module)
    colab.configure("https://github.com/example-school/gpu-course-students.git", "v2.0", module=module)
    text = module.read_text()
    assert "COURSE_REPO = 'https://github.com/example-school/gpu-course-students'\n" in text
    assert "COURSE_REF = 'v2.0'\n" in text
    assert colab.published() and colab.requirement().endswith("gpu-course-students@v2.0")
    for repo, ref in (("https://gitlab.com/school/course", "v1"), ("https://github.com/only-owner", "v1"),
                      ("https://github.com/a/b", "v1; rm -rf ~")):
        with pytest.raises(ValueError):
            colab.configure(repo, ref, module=module)
    assert module.read_text() == text     # a refused setting writes nothing


def test_what_the_notebooks_import_reads_no_file_of_the_repository():
    # Colab gets the package from pip, not the repository: the modules a notebook imports (grader and
    # its lecture helpers) must not reach for the course's other files (notebooks, docs).
    # (grader imports its public names on first use: ask for every one, as the notebooks do)
    code = ("import sys, grader, grader.lectures.day1, grader.lectures.day2, grader.lectures.day3, "
            "grader.lectures.day4; "
            "[getattr(grader, name) for name in grader.__all__]; "
            "print('\\n'.join(m.__file__ for n, m in sys.modules.items() if n.split('.')[0] == 'grader'))")
    files = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                           check=True, env=dict(os.environ, GRADER_FORCE_CPU="1")).stdout.split()
    assert len(files) > 10
    for path in files:
        text = open(path).read()
        assert "parent.parent" not in text and "REPO" not in text and "open(" not in text, path


def test_the_command_writes_the_settings_rewrites_then_regenerates_the_exercises(monkeypatch, capsys):
    from grader.pipeline import cli
    done = []
    monkeypatch.setattr(colab, "configure", lambda repo, ref: done.append(("configure", repo, ref)))
    monkeypatch.setattr(colab, "rewrite", lambda root: done.append(("rewrite", root)) or [])
    monkeypatch.setattr(cli, "release", lambda days: done.append(("release", days)) or 0)
    assert cli.main(["colab"]) == 0
    assert done == [("rewrite", cli.REPO), ("release", [])]
    done.clear()
    assert cli.main(["colab", "--repo", PUBLISHED[0], "--ref", PUBLISHED[1]]) == 0
    assert done == [("configure", *PUBLISHED), ("rewrite", cli.REPO), ("release", [])]
    done.clear()
    assert cli.main(["colab", "--repo", PUBLISHED[0]]) == 2 and done == []
    assert "both --repo and --ref" in capsys.readouterr().err
