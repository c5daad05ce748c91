"""Running notebooks without a browser, without stalls: the executor behind course-run and autograde.

nbclient (which nbconvert and nbgrader's autograde use) stands in for the browser's Output widget: when
a cell writes into an `ipywidgets.Output` (`with out: ...`, `interact`, `clear_output(wait=True)`), the
client sends the widget's new state back to the kernel as a `comm_msg` on the shell socket, from the
coroutine that reads IOPub, while another coroutine awaits the cell's `execute_reply` on that same
socket. ZeroMQ signals a readable socket by an edge on one file descriptor; a send on the socket can
consume the edge of the reply that arrives at that moment, and the waiting coroutine then sleeps until
its poll times out. The reply is found then, so the cell "succeeds" after exactly the cell timeout,
or a notebook makes no progress at all with the kernel idle in `epoll_wait`. Measured here on 2 busy
cores, of 100 executions of a cell that redraws into an Output widget, 5 to 15 took exactly their
20 s timeout; with the short polls below, 8 of 100 waited one poll (0.5 s); with the widget's sends
held back as well, none did. This is the upstream report "when cell contains ipywidget, execute
cell will sometimes block" (https://github.com/jupyter/nbclient/issues/312;
a fix is proposed in pull request 311).

The course works around it in two independent ways, both kept narrow:
- Output-widget state goes to the kernel after the cell's reply has arrived, never while it is
  awaited (`_HeldOutputWidget`). Only the newest state of each widget is sent: it is the whole state.
- The wait for a reply is cut into short polls (`REPLY_POLL_S`), each of which ends by checking the
  socket again, so a missed wake-up from any other cause costs at most that long, not the timeout.

The course's own drawings also avoid Output widgets (`grader.lectures.drawing`), so its lectures run without
stalls under any executor, `jupyter nbconvert --execute` and papermill included. nbval, which CI uses
for the lectures, talks to the kernel with a blocking client and never sends widget state: it is not
affected. `tests/test_headless.py` is the stress test.
"""
from __future__ import annotations

import asyncio
import importlib
import os
import threading
import time
from pathlib import Path
from queue import Empty

import nbformat

from nbclient import NotebookClient
from nbclient.output_widget import OutputWidget
from nbclient.util import run_sync
from nbgrader.preprocessors import execute as nbgrader_execute

from grader.checker import GO_ENV, ready_file

# How long one poll for a cell's reply waits before the socket is checked again (seconds).
REPLY_POLL_S = 0.5


class _HeldOutputWidget(OutputWidget):
    """nbclient's stand-in for a front end's Output widget, whose state updates wait for the reply."""

    def send(self, data=None, metadata=None, buffers=None):
        self.executor._held_widget_sends[self.comm_id] = (self, data, metadata, buffers)


class HeadlessMixin:
    """What a NotebookClient needs to execute widget cells without stalling (see the module's text)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._held_widget_sends = {}
        self.widget_registry["@jupyter-widgets/output"]["OutputModel"] = _HeldOutputWidget

    async def async_execute_cell(self, *args, **kwargs):
        channel = self.kc.shell_channel
        if not getattr(channel.get_msg, "in_short_polls", False):
            channel.get_msg = _in_short_polls(channel.get_msg)
        try:
            return await super().async_execute_cell(*args, **kwargs)
        finally:
            self._send_held_widget_state()

    def _send_held_widget_state(self):
        held, self._held_widget_sends = self._held_widget_sends, {}
        if self.kc is None:
            return
        for widget, data, metadata, buffers in held.values():
            OutputWidget.send(widget, data, metadata, buffers)

    # nbclient's blocking entry point wraps the base class's coroutine, not an override: wrap ours.
    def execute_cell(self, *args, **kwargs):
        return run_sync(self.async_execute_cell)(*args, **kwargs)


def _in_short_polls(get_msg):
    """`get_msg(timeout)` of an async channel, as polls of at most REPLY_POLL_S seconds each."""

    async def get_msg_in_short_polls(timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return await get_msg(timeout=REPLY_POLL_S if left is None else min(REPLY_POLL_S, left))
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    get_msg_in_short_polls.in_short_polls = True
    return get_msg_in_short_polls


class HeadlessClient(HeadlessMixin, NotebookClient):
    """nbclient's NotebookClient with the fixes above: what `course-grader course-run` executes with."""


# The instructor's secret seed for the hidden cases: read by the checker, never given to a kernel.
SECRET_SEED_ENV = "GRADER_SECRET_SEED"
GATE_POLL_S = 0.02   # how often a notebook waiting for its turn looks for its gate file (GO_ENV)


def _is_graded_test(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


class Execute(HeadlessMixin, nbgrader_execute.Execute):
    """nbgrader's autograde executor with the fixes above (nbgrader_config.py names it), and the checker.

    While nbgrader autogrades, a graded test cell made of the course's checks (`grader.check(...)`) is
    not run in the student's kernel: the checker (`grader.checker`), in this process, computes its
    verdict and writes the cell's outputs, which is what nbgrader scores. Any other cell runs as usual.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._secret_seed = os.environ.pop(SECRET_SEED_ENV, None)  # before any kernel starts
        self._go = os.environ.pop(GO_ENV, None)
        if self._go is not None:
            # nbgrader has set up the student's folder (copied the day's files) by now: the batch may
            # start the next notebook, which does the same, while this one gets its kernel ready.
            ready_file(Path(self._go)).touch()
        self._gate_passed = threading.Event()
        self._folder_owner = None     # the kernel user that has the notebook's folder
        self._folder = None
        self._checker = None
        # The checker needs torch and the GPU (seconds to load and start): made ready while the
        # kernel starts (or this notebook waits its turn), not when the first graded cell waits. The GPU
        # itself is touched only once the gate is passed: the notebook before may be timing on it.
        self._warm_up = threading.Thread(target=_warm_up_checker, args=(self._gate_passed,), daemon=True)
        self._warm_up.start()

    async def _wait_for_turn(self):
        """Before the first cell: wait until the batch opens this notebook's gate (at once without one)."""
        if self._go is not None:
            parent = os.getppid()
            while not os.path.exists(self._go):
                if os.getppid() != parent:   # the batch that would open the gate is gone: do not wait for ever
                    raise RuntimeError("the grading batch that started this notebook has ended")
                await asyncio.sleep(GATE_POLL_S)
        self._gate_passed.set()

    def _hand_over_folder(self):
        """A sandboxed kernel gets the notebook's folder as its own before it runs a cell (not before its
        turn: the notebook before, of the same student and day, may still be running in that folder)."""
        uid = self._kernel_uid()
        if uid is not None and uid != self._folder_owner:
            from grader.pipeline import sandbox
            self._folder = self.resources.get("metadata", {}).get("path") or os.getcwd()
            sandbox.hand_over(self._folder, uid)
            self._folder_owner = uid

    def _take_folder_back(self):
        """Once the kernel has ended, before nbgrader writes the graded notebook into its folder: nothing of
        the kernel's user runs any more, and the folder is the grader's again, without the links the
        kernel may have left there (nbgrader, as root, would write through them)."""
        if self._folder_owner is not None:
            from grader.pipeline import sandbox
            sandbox.take_back(self._folder, self._folder_owner)
            self._folder_owner = None

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        if not self._gate_passed.is_set():
            await self._wait_for_turn()
        self._hand_over_folder()
        calls = None
        if os.environ.get("NBGRADER_EXECUTION") == "autograde" and _is_graded_test(cell):
            from grader.checker.cells import graded_calls
            calls = graded_calls(cell.source)
        if calls is None:
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        start = time.perf_counter()
        outcome = await self._get_checker(cell_index).outcome(calls)
        cell.outputs = _outputs_of(outcome, execution_count)
        # Where grading time goes, kept in the graded notebook for whoever makes grading faster.
        cell.metadata["grading_seconds"] = round(time.perf_counter() - start, 2)
        if outcome.records:   # what was measured, as data: the class report reads it (pipeline/class_report.py)
            cell.metadata["grading_results"] = outcome.records
        cell.execution_count = execution_count
        self.nb["cells"][cell_index] = cell  # nbclient put the checker's requests there
        return cell

    def _get_checker(self, cell_index):
        if self._checker is None:
            self._warm_up.join()
            from grader.checker import FLAGGED
            from grader.checker.exchange import Exchange
            from grader.checker.verdicts import Checker
            self._exchange = Exchange(self._kernel_uid())
            self._checker = Checker(self._run_in_kernel, self._exchange, self._secret_seed,
                                    flag=lambda message: self.log.warning("%s %s", FLAGGED, message),
                                    speed_checks=self._has_speed_checks(), refused=self._refusals())
        self._checker_cell_index = cell_index
        return self._checker

    def _has_speed_checks(self) -> bool:
        from grader.checker.cells import graded_calls
        return any(c.kind == "check_speed" for cell in self.nb.cells if _is_graded_test(cell)
                   for c in graded_calls(cell.source) or ())

    def _refusals(self) -> list:
        """Why each cell that sanitize replaced was refused (the submission rules it broke)."""
        from grader.pipeline.code_rules import refusal
        return [why for cell in self.nb.cells if cell.cell_type == "code" for why in [refusal(cell.source)] if why]

    def _kernel_uid(self) -> int | None:
        """The user the kernel runs as: under the grading sandbox one of its own, else ours."""
        from grader.pipeline import sandbox
        if self.kernel_name == sandbox.KERNEL_NAME and hasattr(os, "geteuid") and os.geteuid() == 0:
            return sandbox.kernel_uid(self.km.provisioner.pid)
        return None

    async def _run_in_kernel(self, code: str) -> str | None:
        """Run code in the kernel as a cell of its own that nobody sees; its error as text, or None."""
        cell = nbformat.v4.new_code_cell(code)
        await HeadlessMixin.async_execute_cell(self, cell, self._checker_cell_index, store_history=False)
        errors = [o for o in cell.outputs if o.get("output_type") == "error"]
        return f"{errors[0].get('ename')}: {errors[0].get('evalue')}" if errors else None

    def preprocess(self, *args, **kwargs):
        try:
            return super().preprocess(*args, **kwargs)   # the kernel is shut down when this returns
        finally:
            self._take_folder_back()
            if self._checker is not None:
                self.log.info("grading checker: %s", self._checker.summary())
                self.nb.metadata["grading_checker_seconds"] = {
                    what: round(s, 2) for what, s in self._checker.seconds.items()}
                self._checker.close()
                self._exchange.close()
                self._checker = None


def _warm_up_checker(gate_passed: threading.Event) -> None:
    try:
        from grader import device
        importlib.import_module("grader.checker.verdicts")  # loaded now, used by the first graded cell
        gate_passed.wait()
        device.probe()
    except Exception:  # noqa: BLE001 - the checker itself reports any real problem when it starts
        pass


def _outputs_of(outcome, execution_count) -> list:
    """A graded cell's outputs from the checker's outcome, in the form nbgrader scores."""
    outputs = []
    if outcome.lines:
        outputs.append(nbformat.v4.new_output("stream", name="stdout", text="\n".join(outcome.lines) + "\n"))
    if outcome.error:
        name, message = outcome.error
        outputs.append(nbformat.v4.new_output("error", ename=name, evalue=message,
                                              traceback=[f"\x1b[0;31m{name}\x1b[0m: {message}"]))
    elif outcome.points is not None:
        outputs.append(nbformat.v4.new_output("execute_result", data={"text/plain": repr(outcome.points)},
                                              execution_count=execution_count))
    return outputs
