"""Colab, simulated end to end: a fresh Python environment with only what Colab's runtime brings (torch,
triton, numpy, matplotlib, ipywidgets 7, ipykernel; a stand-in `google.colab` module), the student
edition published as a git repository at a tag, and each notebook's own first cell installing the
course's grader from there, as it does in Colab. A lecture and an exercise run top to bottom; the
exercise, saved as Colab saves it ("Copy of ...", Colab's metadata), is collected, sanitized and
autograded by the instructor's pipeline.

The torch here is the CPU build of the course's pinned version (PyPI has no CPU build of Colab's, and
Colab's CUDA build is several GB): what is simulated is Colab's environment and the install path.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import classroom
from conftest import nbgrader
from grader import colab
from grader.course import Course
from grader.pipeline import batch, edition, submissions

# What Colab's runtime has that the notebooks use (its ipywidgets is 7.x), and nothing of the course.
COLAB_PACKAGES = ["torch==2.13.0", "triton", "numpy", "matplotlib", "ipywidgets==7.7.1", "ipykernel"]
TAG = "colab-sim"
LECTURE = "course/day1/03_first_kernel.ipynb"
EXERCISE = "exercises/day1/vector_add.ipynb"


def _run(*args, **kwargs):
    proc = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert proc.returncode == 0, f"{' '.join(map(str, args))} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


def _link_installed(requirements: list, site: Path) -> list:
    """The requirements this test's own environment meets (torch, Triton, NumPy, Matplotlib at the versions
    asked for), put in `site` with everything they require: their installed files hard-linked there, as pip
    would have unpacked them from the same wheels (pip's unpacking of torch took a minute of CI's CPU).
    Colab's runtime comes with them installed; what is simulated is that runtime, not pip. Console scripts
    (outside site-packages) are left out; what is not met here is left to pip."""
    from importlib import metadata
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    met, todo, done = [], [], set()
    for text in requirements:
        wanted = Requirement(text)
        try:
            dist = metadata.distribution(wanted.name)
        except metadata.PackageNotFoundError:
            continue
        if wanted.specifier.contains(dist.version, prereleases=True):
            met.append(text)
            todo.append(dist)
    while todo:
        dist = todo.pop()
        name = canonicalize_name(dist.metadata["Name"])
        if name in done:
            continue
        done.add(name)
        for file in dist.files or []:
            source, target = Path(dist.locate_file(file)), site / file
            if ".." in file.parts or not source.is_file():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, target)
            except OSError:   # another file system: copied
                shutil.copy2(source, target)
        for text in dist.requires or []:
            need = Requirement(text)
            if need.marker is None or need.marker.evaluate({"extra": ""}):
                try:
                    todo.append(metadata.distribution(need.name))
                except metadata.PackageNotFoundError:
                    pass    # an optional requirement not installed here: pip decides
    return met


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    """(the environment's Python, a kernel spec folder for it, the published edition's folder)."""
    tmp = tmp_path_factory.mktemp("colab")
    venv = tmp / "python"
    _run(sys.executable, "-m", "venv", str(venv))
    python = venv / "bin" / "python"
    site = Path(_run(str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    preinstalled = _link_installed(COLAB_PACKAGES, site)
    # (--no-compile: Python compiles what the kernel imports when it imports it, not torch's whole tree here)
    _run(str(python), "-m", "pip", "install", "-q", "--no-compile",
         *[p for p in COLAB_PACKAGES if p not in preinstalled], timeout=1500)
    stand_in = site / "google" / "colab"
    stand_in.mkdir(parents=True)
    (site / "google" / "__init__.py").write_text("")
    (stand_in / "__init__.py").write_text('"""A stand-in for Colab\'s own module: the notebooks test for it."""\n')
    (stand_in / "output.py").write_text("def enable_custom_widget_manager():\n    pass\n")
    kernels = tmp / "kernels" / "colab"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (Colab stand-in)", "language": "python",
        "env": {"COLAB_RELEASE_TAG": "release-colab-sim", "PYTHONPATH": ""}}))

    # The student edition, published at a tag, its notebooks' first cells pointing at it.
    published = edition.build(tmp / "edition")
    saved = colab.COURSE_REPO, colab.COURSE_REF
    # (file://localhost/...: the pip that comes with the venv wants a host in a URL requirement)
    colab.COURSE_REPO, colab.COURSE_REF = f"file://localhost{published}", TAG
    try:
        for folder, locked in (("course", False), ("exercises", True)):
            for path in (published / folder).glob("*/*.ipynb"):
                colab.update_notebook(path, nbgrader=locked)
    finally:
        colab.COURSE_REPO, colab.COURSE_REF = saved
    git = ["git", "-c", "user.name=course", "-c", "user.email=course@localhost"]
    _run("git", "init", "-q", cwd=published)
    _run(*git, "add", "-A", cwd=published)
    _run(*git, "commit", "-q", "-m", "student edition", cwd=published)
    _run("git", "tag", TAG, cwd=published)
    return python, kernels.parent, published


def _execute(nb, runtime, cwd: Path):
    """Run a notebook in the Colab stand-in's kernel, from a folder of its own (Colab's /content)."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    _, kernels, _ = runtime
    km = KernelManager(kernel_name="colab", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    cwd.mkdir(parents=True, exist_ok=True)
    try:
        NotebookClient(nb, km=km, timeout=900, resources={"metadata": {"path": str(cwd)}}).execute()
    finally:   # a client given its kernel manager leaves the kernel running: nothing outlives the test
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    return nb


def _text(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_a_lecture_runs_with_the_grader_its_first_cell_installed(runtime, tmp_path):
    python, _, published = runtime
    nb = nbformat.read(published / LECTURE, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import grader; print('grader from', grader.__file__)"))
    text = _text(_execute(nb, runtime, tmp_path / "content"))
    installed_at = text.split("grader from ")[-1].strip()
    assert installed_at.startswith(str(python.parent.parent)), installed_at   # pip put it in Colab's Python


def test_an_exercise_done_in_colab_grades_through_the_pipeline(runtime, tmp_path):
    _, _, published = runtime
    nb = nbformat.read(published / EXERCISE, as_version=4)
    answers = classroom.filled("day1", "vector_add")
    for cell, answer in zip(nb.cells, answers.cells):
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = answer.source
    text = _text(_execute(nb, runtime, tmp_path / "content"))
    assert "OK: vector add is correct" in text, text[-2000:]
    # Saved as Colab saves it: its own metadata, and File > Download under the name of the copy.
    nb.metadata["colab"] = {"provenance": [], "gpuType": "T4"}
    nb.metadata["accelerator"] = "GPU"
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    download = tmp_path / "download" / "zoe"
    download.mkdir(parents=True)
    nbformat.write(nb, download / "Copy of vector_add.ipynb")

    root = classroom.copy_course(tmp_path / "course")
    nbgrader(root, "generate_assignment", "day1", "--force")
    report = submissions.collect(download.parent, "day1", Course.of(root).notebooks("day1"),
                                 root / "grading" / "submitted")
    assert [(s, n) for _, s, n in report.copied] == [("zoe", "vector_add")], report.summary()
    submissions.sanitize_day(root / "grading" / "submitted", root / "exercises" / "day1", "day1")
    batch.autograde_day(root, "day1", timeout_s=600, students=["zoe"], log=lambda *a: None)
    assert classroom.exported(root) == {"zoe": classroom.CPU_POINTS["vector_add"]}
