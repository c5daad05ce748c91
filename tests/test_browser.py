"""The course in a real browser: JupyterLab as a student and an instructor see it.

The module starts the course's JupyterLab on loopback, in a temporary copy of the course, and drives it
with headless Chromium through Playwright:
1. a lecture notebook runs (Run > Run All Cells), shows its output, and its slider redraws the picture;
2. the vector add exercise filled with a wrong kernel shows the failing check's teaching message;
3. the same exercise filled with the reference solution passes its check;
4. a student's JupyterLab (`make lab`) has none of nbgrader's instructor tools and no news question;
5. nbgrader's formgrader loads for the instructor (`make lab-instructor`) and lists the assignments.
Each step leaves a screenshot in $GRADER_ARTIFACTS (default: test-artifacts/browser/).

Needs the playwright package and Chromium (Debian's `chromium`); without them the tests skip, unless
REQUIRE_BROWSER=1 (CI sets it), where they fail. Leave them out with `pytest -k "not browser"`.
"""
import copy
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import nbformat
import psutil
import pytest

from conftest import DEVICE, REPO

try:
    from playwright.sync_api import Error as PlaywrightError, expect, sync_playwright
except ImportError:  # the `browser` fixture skips, or fails under REQUIRE_BROWSER=1
    sync_playwright = None

ARTIFACTS = Path(os.environ.get("GRADER_ARTIFACTS") or REPO / "test-artifacts" / "browser")
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
STEP_TIMEOUT_MS = 30_000       # one click, one page, one widget update (generous: 2 slow cores)
RUN_ALL_TIMEOUT_MS = 150_000   # every cell of a notebook, Triton kernels in the CPU interpreter
SERVER_START_S = 90


# --------------------------------------------------------------------------------------------
# Browser and server
# --------------------------------------------------------------------------------------------

def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if sync_playwright is None:
        return "the playwright package is not installed (pip install -e '.[test]')"
    if _chromium() is None:
        return "no chromium on PATH (apt-get install chromium)"
    return None


@pytest.fixture(scope="module")
def browser():
    missing = _missing_browser()
    if missing and os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail(f"REQUIRE_BROWSER=1 but {missing}", pytrace=False)
    if missing:
        pytest.skip(missing)
    # Playwright's assertions wait 5 s by default: too short on a loaded machine.
    expect.set_options(timeout=STEP_TIMEOUT_MS)
    with sync_playwright() as pw:
        # Playwright cannot download its own browsers here: drive the system's Chromium.
        chromium = pw.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Lab:
    """A running JupyterLab: how to reach it."""

    def __init__(self, port: int, token: str):
        self.port, self.token = port, token

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}?token={self.token}"


def _write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _solution_cell(notebook: Path, grade_id: str) -> str:
    """The instructor's code of one solution cell, without nbgrader's BEGIN/END SOLUTION markers."""
    nb = nbformat.read(notebook, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    markers = ("### BEGIN SOLUTION", "### END SOLUTION")
    return "\n".join(line for line in cell.source.splitlines() if line.strip() not in markers)


def _hand_in_vector_add(root: Path) -> None:
    """Two filled-in copies of exercises/day1/vector_add.ipynb, as two students would hand them in."""
    right = _solution_cell(root / "solutions/day1/vector_add.ipynb", "add")
    # Off by one: the mask drops the last element, so it is never written.
    wrong = right.replace("mask = offsets < n_elements", "mask = offsets < n_elements - 1")
    assert wrong != right, "the solution's mask line changed: update the wrong variant"
    exercise = nbformat.read(root / "exercises/day1/vector_add.ipynb", as_version=4)
    for name, code in [("vector_add_wrong", wrong), ("vector_add_right", right)]:
        nb = copy.deepcopy(exercise)
        cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "add")
        cell.source = code
        nbformat.write(nb, root / "exercises/day1" / f"{name}.ipynb")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_up(proc: subprocess.Popen, lab: Lab, log: Path) -> None:
    # Loopback only: a proxy from the environment must not get in the way.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with opener.open(lab.url("api/status"), timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"JupyterLab did not answer in {SERVER_START_S} s:\n{log.read_text()[-3000:]}")


def _stop_tree(proc: subprocess.Popen) -> None:
    """Stop the server and everything it started. Kernels run in sessions of their own, so a
    process-group kill would miss them: list the tree first, then end the server, then stragglers."""
    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    proc.terminate()  # the server shuts its kernels down on SIGTERM
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    _, alive = psutil.wait_procs(children, timeout=10)
    for child in alive:
        child.kill()


# The view `make lab` gives students: nbgrader's instructor tools, its assignment and course lists and
# JupyterLab's news question switched off by the course's own Jupyter configuration.
STUDENT_CONFIG = REPO / "grader" / "jupyter_student"


@contextmanager
def _running_lab(tmp: Path, student: bool):
    """JupyterLab on loopback, in a temporary copy of the course, as `make lab` (student) or
    `make lab-instructor` starts it."""
    # The notebook directory: a copy of the course, so that running and saving notebooks, the
    # formgrader's gradebook (grading/) and the handed-in exercises change nothing in the repository.
    root = tmp / "course"
    root.mkdir()
    shutil.copy(REPO / "nbgrader_config.py", root)
    for folder in ("course", "exercises", "solutions"):
        shutil.copytree(REPO / folder, root / folder,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    _hand_in_vector_add(root)

    # Jupyter's own config, data, runtime files and JupyterLab's settings: all temporary, so the
    # user's are neither read nor touched.
    jupyter = tmp / "jupyter"
    settings = jupyter / "lab-settings"
    if not student:   # (the student's view has no news question to begin with: a test checks that)
        # No "get notified about official Jupyter news?" toast over the buttons.
        _write_json(settings / "@jupyterlab/apputils-extension/notification.jupyterlab-settings",
                    {"fetchNews": "false", "checkForUpdates": False})
    # Render every cell (no virtual scrolling), so that outputs far down a notebook are in the page.
    _write_json(settings / "@jupyterlab/notebook-extension/tracker.jupyterlab-settings",
                {"windowingMode": "none"})
    # nbgrader's exchange (release/collect) would default to /usr/local/share/nbgrader/exchange.
    (jupyter / "exchange").mkdir()
    (jupyter / "config").mkdir()
    (jupyter / "config" / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.Exchange.root = {str(jupyter / 'exchange')!r}\n")
    port, token = _free_port(), secrets.token_hex(16)
    venv_bin = os.path.dirname(sys.executable)
    env = dict(os.environ,
               JUPYTER_TOKEN=token,  # in the environment, not on the command line that `ps` shows
               JUPYTER_CONFIG_DIR=str(jupyter / "config"),
               JUPYTER_DATA_DIR=str(jupyter / "data"),
               JUPYTER_RUNTIME_DIR=str(jupyter / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(settings),
               JUPYTERLAB_WORKSPACES_DIR=str(jupyter / "workspaces"),
               IPYTHONDIR=str(jupyter / "ipython"),
               # The kernel must be this environment's Python (torch, triton, grader): its
               # share/jupyter, with the `python3` kernelspec, comes before the user's, and its
               # bin/ comes first on PATH for the kernelspec's bare `python`.
               JUPYTER_PREFER_ENV_PATH="1",
               PATH=os.pathsep.join([venv_bin, os.environ.get("PATH", "")]),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    env.pop("JUPYTER_PATH", None)      # no extra kernelspecs or extensions from elsewhere
    env.pop("JUPYTER_CONFIG_PATH", None)
    if student:
        env["JUPYTER_CONFIG_PATH"] = str(STUDENT_CONFIG)
    env.pop("NBGRADER_DB_URL", None)   # the formgrader's gradebook: a SQLite file in the copy
    log = tmp / f"jupyter-server-{'student' if student else 'instructor'}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.open_browser=False",
             "--ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0",
             f"--notebook-dir={root}", "--allow-root"],  # root in containers and CI
            cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    lab = Lab(port, token)
    try:
        _wait_until_up(proc, lab, log)
        yield lab
    finally:
        _stop_tree(proc)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(log, ARTIFACTS / log.name)  # the token appears there as [secret]




@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with _running_lab(tmp_path_factory.mktemp("student"), student=True) as running:
        yield running


@pytest.fixture(scope="module")
def instructor_lab(tmp_path_factory):
    with _running_lab(tmp_path_factory.mktemp("instructor"), student=False) as running:
        yield running


@pytest.fixture
def page(browser, lab, request):
    # No stale screenshot of an earlier failure of this test.
    (ARTIFACTS / f"failed-{request.node.name}.png").unlink(missing_ok=True)
    # A fresh browser context per test: no state carried over from the previous step.
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(STEP_TIMEOUT_MS)
    yield page
    context.close()


# --------------------------------------------------------------------------------------------
# What a user does in JupyterLab, and what they see
# --------------------------------------------------------------------------------------------

def screenshot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


@contextmanager
def explained(page, what: str):
    """Turn a failed wait into a failure that says what was missing and what the page showed,
    with a screenshot named after the test."""
    try:
        yield
    except (AssertionError, PlaywrightError) as error:
        # Playwright's own message (what it waited for), without its long accessibility snapshot.
        detail = str(error).split("Aria snapshot:")[0].strip()
        test = os.environ.get("PYTEST_CURRENT_TEST", "test").split("::")[-1].split(" ")[0]
        try:
            screenshot(page, f"failed-{test}")
            text = page.locator("body").inner_text()
        except PlaywrightError as e:
            text = f"(could not read the page: {e})"
        message = f"{what}\n{detail}\n--- end of the page's visible text ---\n{text[-2500:]}"
        raise pytest.fail.Exception(message, pytrace=False) from None


# JavaScript run in the page, to wait for the kernel and for cells.
# The status bar's kernel item reads "<kernel name> | Idle" once the kernel is started, connected and
# idle. (The notebook toolbar's execution indicator already says idle before any kernel exists.)
KERNEL_IDLE = r"""() => [...document.querySelectorAll('.jp-StatusBar-Item')]
    .some(item => /^Python.*\| Idle$/.test(item.textContent.trim()))"""
# Run All marks every code cell [*] at once, and each gets its number once it has run.
RUN_STARTED = r"""() => [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
    .some(prompt => /\[(\*|\d+)\]/.test(prompt.textContent))"""
# No cell is running or queued and the first one has run. (After an error JupyterLab runs nothing
# further: the cells left go back to [ ]:.)
NOTHING_RUNNING = r"""() => {
    const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
        .map(prompt => prompt.textContent);
    return /\[\d+\]/.test(prompts[0]) && !prompts.some(prompt => prompt.includes('*'));
}"""


def open_notebook(page, lab: Lab, path: str) -> None:
    # `reset`: start from an empty workspace, with only this notebook open.
    page.goto(lab.url(f"lab/tree/{path}") + "&reset")
    with explained(page, f"{path} did not open with a started, idle Python kernel"):
        page.wait_for_function(KERNEL_IDLE, timeout=RUN_ALL_TIMEOUT_MS)


def run_all_cells(page, what: str) -> None:
    with explained(page, f"Run > Run All Cells did not start in {what}"):
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        page.wait_for_function(RUN_STARTED)
    with explained(page, f"Run > Run All Cells did not finish in {what}"):
        page.wait_for_function(NOTHING_RUNNING, timeout=RUN_ALL_TIMEOUT_MS)
        page.wait_for_function(KERNEL_IDLE)


def output_with(page, text: str):
    """The first output area showing `text`."""
    return page.locator(".jp-OutputArea-output", has_text=text).first


# --------------------------------------------------------------------------------------------
# The tests
# --------------------------------------------------------------------------------------------

def test_lecture_runs_and_its_slider_redraws(page, lab):
    open_notebook(page, lab, "course/day1/03_first_kernel.ipynb")
    run_all_cells(page, "lecture 03_first_kernel")

    with explained(page, "the lecture's outputs are not shown"):
        # grader.setup() ran in the kernel: the kernel is this environment's Python
        expect(output_with(page, "Running on")).to_be_visible()
        # the Triton kernel ran and printed its comparison with PyTorch
        expect(output_with(page, "5 program(s), matches torch")).to_be_visible()
        # the too-small grid demonstration printed its count of unwritten elements
        expect(output_with(page, "elements never written: 904")).to_be_visible()
        # matplotlib drawings are rendered as images
        expect(page.locator(".jp-OutputArea-output img").first).to_be_visible()
    output_with(page, "matches torch").scroll_into_view_if_needed()
    screenshot(page, "1-lecture-after-run")

    slider = page.locator(".widget-slider", has_text="n_elements").first
    handle = slider.locator(".noUi-handle")
    summary = page.locator(".widget-html", has_text="triton.cdiv").first
    drawing = page.locator("img.widget-image").first   # the drawing: PNG bytes in an Image widget
    with explained(page, "the tiling widget (n_elements slider, summary, drawing) is not shown"):
        expect(handle).to_have_attribute("aria-valuenow", "100.0")
        expect(summary).to_contain_text("triton.cdiv(100, 16)")
        expect(drawing).to_be_visible()
    drawing_before = drawing.get_attribute("src")

    # Drag the n_elements handle to the right, as a student would with the mouse.
    slider.scroll_into_view_if_needed()
    box = handle.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + 40, y, steps=5)
    page.mouse.up()

    with explained(page, "the slider did not move, or the kernel did not redraw for its new value"):
        expect(handle).not_to_have_attribute("aria-valuenow", "100.0")
        n = int(float(handle.get_attribute("aria-valuenow")))
        expect(summary).to_contain_text(f"triton.cdiv({n}, 16)")
        expect(drawing).not_to_have_attribute("src", drawing_before)
    # The widget at the top of the view: sliders, summary and the new drawing in one picture.
    slider.evaluate("element => element.scrollIntoView({block: 'start'})")
    screenshot(page, "2-widget-after-move")


def test_wrong_kernel_shows_the_teaching_message(page, lab):
    open_notebook(page, lab, "exercises/day1/vector_add_wrong.ipynb")
    run_all_cells(page, "vector add with an off-by-one mask")
    # The correctness check's message names what went wrong and what to look at.
    message = output_with(page, "never written")
    with explained(page, "the failing correctness check's message is not shown"):
        expect(message).to_contain_text("vector add on shape")
        expect(message).to_contain_text("Check that your grid covers every element")
        expect(message).to_contain_text("the mask is not too strict")
    message.scroll_into_view_if_needed()
    screenshot(page, "3-exercise-failing")


def test_reference_solution_passes(page, lab):
    open_notebook(page, lab, "exercises/day1/vector_add_right.ipynb")
    run_all_cells(page, "vector add with the reference solution")
    with explained(page, "the passing checks' messages are not shown"):
        expect(output_with(page, "OK: vector add is correct on")).to_be_visible()
        # Run All stops at the first error: the speed check, the last cell, ran, so nothing failed.
        speed = "speed score:" if DEVICE.is_gpu else "needs a CUDA GPU"
        expect(output_with(page, speed)).to_be_visible()
    output_with(page, "OK: vector add is correct on").scroll_into_view_if_needed()
    screenshot(page, "4-exercise-passing")


def test_a_student_s_lab_has_no_instructor_tools_and_no_news_question(page, lab):
    assert page.goto(lab.url("formgrader")).status == 404
    page.goto(lab.url("lab/tree/exercises/day1/vector_add.ipynb") + "&reset")
    with explained(page, "the student's JupyterLab did not open the exercise"):
        page.wait_for_function(KERNEL_IDLE, timeout=RUN_ALL_TIMEOUT_MS)
    config = json.loads(page.locator("#jupyter-config-data").text_content())
    disabled = config["disabledExtensions"]
    disabled = set(disabled) if isinstance(disabled, list) else {k for k, v in disabled.items() if v}
    assert {"@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
            "@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:course-list",
            "@jupyter/nbgrader:menu", "@jupyterlab/apputils-extension:announcements"} <= disabled
    page.wait_for_timeout(3000)   # the news question, where it is asked, comes a moment after the page
    expect(page.get_by_role("menuitem", name="Nbgrader", exact=True)).to_have_count(0)   # its menu lists those tools
    expect(page.get_by_role("button", name="Validate")).to_be_visible()   # nbgrader's check before handing in stays
    text = page.locator("body").inner_text()
    for absent in ("official Jupyter news", "Error fetching courses", "Formgrader", "Assignment List"):
        assert absent not in text, absent
    screenshot(page, "0-student-lab")


def test_formgrader_lists_the_assignments(page, instructor_lab):
    lab = instructor_lab
    page.goto(lab.url("formgrader"))
    with explained(page, "nbgrader's formgrader did not load the course's assignments"):
        expect(page.get_by_role("heading", name="Manage Assignments")).to_be_visible()
        # The table is filled by the page's own requests to the formgrader API, from solutions/.
        for day in ("day1", "day2", "day3", "day4"):
            expect(page.locator("tr", has_text=day).first).to_be_visible()
    screenshot(page, "5-formgrader")
