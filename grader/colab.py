"""Google Colab: the first code cell of every notebook, and the README's "Open in Colab" links.

Colab's runtime comes with a CUDA build of torch and triton, and with numpy, matplotlib, ipywidgets
(7.x) and IPython: everything the notebooks import except this package. So the first code cell of
every notebook (course/, solutions/, and through nbgrader exercises/) installs `grader` from the
course's GitHub repository at a release tag when it runs in Colab, with `--no-deps` so that pip
leaves Colab's torch alone, and does nothing anywhere else (JupyterLab, nbval in CI, nbgrader).

That cell is literal text in 35 notebooks, generated from the two settings below. To publish the course
(the student edition, README "Two repositories") or point it at a new release, run
`course-grader colab --repo https://github.com/OWNER/NAME --ref TAG`: it writes the settings here,
rewrites the cell in course/ and solutions/ and the links in README.md, and regenerates exercises/.
Until then the course is unpublished: the cell stops in Colab with a message that says so, and the README
says how to publish instead of linking to a repository that does not exist. tests/test_colab.py fails
while any notebook or the README disagrees with this module.
"""
from __future__ import annotations

import os
import re
import sys
import textwrap
from pathlib import Path

import nbformat

# ---- Written by `course-grader colab --repo URL --ref TAG` (None: not published yet) -------------------
# The students' repository on GitHub, and a tag (or commit) there whose `grader` matches these notebooks.
COURSE_REPO = None
COURSE_REF = None
# -------------------------------------------------------------------------------------------------------

# What Colab lacks besides the course, as pinned pip requirements. Nothing today: nbgrader, jupyterlab,
# pytest and nbval (pyproject's other dependencies) are for instructors and CI, not for students.
COLAB_EXTRA_PACKAGES: tuple = ()

CELL_ID = "colab-install"   # the cell's id in every notebook, so that `rewrite` finds it again
GRADE_ID = "colab"          # its nbgrader id in solutions/: a locked cell, restored if a student edits it
LINKS_START = "<!-- colab-links:start -->"
LINKS_END = "<!-- colab-links:end -->"


GITHUB_REPO = re.compile(r"https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
GIT_REF = re.compile(r"[A-Za-z0-9_./-]+")


def published() -> bool:
    return COURSE_REPO is not None and COURSE_REF is not None


def requirement() -> str:
    """The pip requirement that installs this package from the course's repository at COURSE_REF."""
    return f"gpu-course @ git+{COURSE_REPO}@{COURSE_REF}"


def install_cell_source() -> str:
    """The first code cell of every notebook. It cannot import grader (not installed yet), so it only
    uses the standard library, and outside Colab it runs three imports and one test."""
    head = (
        "# In Google Colab, install the course's `grader` package (torch and triton come with Colab).\n"
        "# Anywhere else (JupyterLab, nbgrader, CI) this cell does nothing.\n"
        "import importlib, os, subprocess, sys\n"
        'if "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ:\n'
    )
    if not published():
        return head + (
            '    raise RuntimeError("This copy of the course is not published for Colab yet: open the notebook "\n'
            '                       "from the repository your instructor gives you (README, Two repositories).")'
        )
    packages = "".join(f', "{p}"' for p in COLAB_EXTRA_PACKAGES)
    return head + (
        '    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",\n'
        f'                    "{requirement()}"{packages}], check=True)\n'
        "    importlib.invalidate_caches()   # so that the next import sees what pip just added\n"
        "    import grader.colab\n"
        "    grader.colab.enable_widgets()   # so that the notebooks' sliders show"
    )


def configure(repo: str, ref: str, module: Path = Path(__file__)) -> None:
    """Write the students' repository and tag into this module's settings (and into the running one)."""
    global COURSE_REPO, COURSE_REF
    if not GITHUB_REPO.fullmatch(repo.removesuffix(".git")):
        raise ValueError(f"{repo!r} is not a GitHub repository address (https://github.com/OWNER/NAME): "
                         "Colab opens notebooks from GitHub")
    if not GIT_REF.fullmatch(ref):
        raise ValueError(f"{ref!r} is not a tag or commit name")
    text = Path(module).read_text()
    text, n_repo = re.subn(r"^COURSE_REPO = .*$", f"COURSE_REPO = {repo.removesuffix('.git')!r}", text, flags=re.M)
    text, n_ref = re.subn(r"^COURSE_REF = .*$", f"COURSE_REF = {ref!r}", text, flags=re.M)
    assert n_repo == n_ref == 1, "the settings lines of grader/colab.py changed shape"
    Path(module).write_text(text)
    COURSE_REPO, COURSE_REF = repo.removesuffix(".git"), ref


def in_colab() -> bool:
    """The cell's own test: Colab's kernel has imported google.colab, and its runtime sets this variable."""
    return "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ


def enable_widgets() -> None:
    """Make the notebooks' sliders render in Colab. Colab draws its own ipywidgets 7 natively; an
    ipywidgets 8 (if a later Colab ships one) needs Colab's custom widget manager switched on."""
    if not in_colab():
        return
    import ipywidgets
    if int(ipywidgets.__version__.split(".")[0]) >= 8:
        from google.colab import output
        output.enable_custom_widget_manager()


def install_cell(nbgrader: bool) -> nbformat.NotebookNode:
    """The cell as it goes into a notebook. In solutions/ it is a locked nbgrader cell without points:
    read-only in the student's JupyterLab, put back from the release by `sanitize` and nbgrader."""
    cell = nbformat.v4.new_code_cell(install_cell_source())
    cell.id = CELL_ID
    if nbgrader:
        cell.metadata["nbgrader"] = {"grade": False, "grade_id": GRADE_ID, "locked": True,
                                     "schema_version": 3, "solution": False, "task": False}
    return cell


def _is_install_cell(cell) -> bool:
    return cell.get("id") == CELL_ID or cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == GRADE_ID


def update_notebook(path: Path, nbgrader: bool) -> bool:
    """Put the install cell first among the code cells of one notebook; True if the file changed."""
    text = Path(path).read_text()
    nb = nbformat.reads(text, as_version=4)
    nb.cells = [c for c in nb.cells if not _is_install_cell(c)]
    first_code = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
    nb.cells.insert(first_code, install_cell(nbgrader))
    new = nbformat.writes(nb) + "\n"
    if new == text:
        return False
    Path(path).write_text(new)
    return True


def colab_url(path: str) -> str:
    """Where Colab opens a notebook of the repository at COURSE_REF (the same tag the cell installs)."""
    owner_repo = COURSE_REPO.removeprefix("https://github.com/").removesuffix(".git").strip("/")
    return f"https://colab.research.google.com/github/{owner_repo}/blob/{COURSE_REF}/{path}"


def linked_notebooks(root: Path) -> list:
    """The notebooks students open: lectures and exercises (solutions stay with the instructor)."""
    return [p.relative_to(root).as_posix() for folder in ("course", "exercises")
            for p in sorted((Path(root) / folder).glob("*/*.ipynb"))]


def readme_section(root: Path) -> str:
    """The README's Colab section, markers included."""
    if not published():
        return "\n".join([
            LINKS_START,
            "## Open in Colab",
            "",
            *textwrap.wrap(
                "Every lecture and exercise can also run in Google Colab, from the students' repository: this "
                "copy of the course is not published yet, so there are no Colab links here. To publish: build "
                "the student edition (`course-grader student-edition`, README \"Two repositories\"), push it "
                "to a public GitHub repository with a tag, then run `course-grader colab --repo "
                "https://github.com/OWNER/NAME --ref TAG` here and build the edition again. Every notebook's "
                "first cell then installs the course's `grader` from there in Colab, and this section lists "
                "a Colab link for every lecture and exercise.", width=105),
            LINKS_END])
    lines = [
        LINKS_START,
        "## Open in Colab",
        "",
        *textwrap.wrap(
            "Every lecture and exercise also runs in Google Colab. Choose a GPU (Runtime → Change "
            "runtime type → T4 GPU), then run the cells in order: the first one installs the course's "
            f"`grader` package from {COURSE_REPO} at `{COURSE_REF}` (Colab brings torch and triton), and "
            "does nothing outside Colab. To keep your work, File → Save a copy in Drive; to submit an "
            "exercise, File → Download → Download .ipynb. On the free T4 the notebooks use float16 "
            "instead of bfloat16 and tiles that fit its 64 KB of shared memory, and speed checks name "
            "the baseline they timed; speed is graded on the instructor's GPU.", width=105),
        "",
        f"Generated from `grader/colab.py` by `course-grader colab` (links to `{COURSE_REF}`).",
        "",
        "| notebook | |",
        "|---|---|",
    ]
    lines += [f"| `{path}` | [open in Colab]({colab_url(path)}) |" for path in linked_notebooks(root)]
    lines.append(LINKS_END)
    return "\n".join(lines)


def update_readme(path: Path, root: Path) -> bool:
    """Rewrite the README's text between the markers (appending the section if there is none)."""
    text = Path(path).read_text()
    section = readme_section(root)
    if LINKS_START in text and LINKS_END in text:
        head, rest = text.split(LINKS_START, 1)
        new = head + section + rest.split(LINKS_END, 1)[1]
    else:
        new = text.rstrip("\n") + "\n\n" + section + "\n"
    if new == text:
        return False
    Path(path).write_text(new)
    return True


def rewrite(root: Path) -> list:
    """Install cells in course/ and solutions/, links in README.md; returns the files that changed.
    exercises/ are nbgrader's copies of solutions/: regenerate them afterwards (`course-grader colab`
    does)."""
    root = Path(root)
    changed = []
    for folder, nbgrader in (("course", False), ("solutions", True)):
        for path in sorted((root / folder).glob("*/*.ipynb")):
            if update_notebook(path, nbgrader):
                changed.append(path)
    if update_readme(root / "README.md", root):
        changed.append(root / "README.md")
    return changed
