"""`python -m grader.pipeline.nbgrader_process ARGS` is nbgrader's command line (`python -m nbgrader ARGS`) as the
batch starts it for each notebook, without two fixed costs that every notebook used to pay.

- jsonschema (which nbformat imports) also imports `rfc3987_syntax` when that package is installed
  (jsonschema[format-nongpl] brings it in). That module builds some thirty Lark parsers when it is
  imported: 1.3 to 1.9 s of CPU in every nbgrader process, all for the `iri` format check, which no
  notebook schema uses (upstream: python-jsonschema/jsonschema#1428). The import is optional in jsonschema,
  so it is kept out here.
- A command that creates the gradebook (the course's first) reads the newest revision of nbgrader's
  database schema from nbgrader's migration scripts here, instead of by `alembic heads` in a process of its
  own, which imported alembic and nbgrader again: 3.9 s of CPU on the 2-core CI machine, in every test that
  grades a new course.
- Once nbgrader has written the grades and the autograded notebook, the process ends at once
  (`os._exit`) instead of tearing down torch, the checker's warm-up thread and ZeroMQ, which took
  0.6 to 1 s. Logging is shut down and output flushed first, and the exit status is nbgrader's. The
  kernel has already been shut down by then (nbclient does that when the notebook ends), and the batch
  kills anything left behind, as before.

It also bounds what one notebook's output may cost this process, which runs as the grader (root in the
container) and keeps every output the kernel sends until it writes the graded notebook. A red team's
cell printed 400 MB in 10 s: this process grew to 1.45 GB and wrote a 400 MB notebook, and a cell left to
its time limit would have taken the machine's memory from the whole batch. So:
- what the kernel's messages add to the notebook (printed text, displays, results, errors, widget
  state) is capped per notebook (`cap_outputs`, sandbox.OUTPUT_LIMIT_MB) as it arrives: past the cap,
  printed text and displays are dropped with a note in the cell, and errors and results, which nbgrader
  scores, are kept but cut short. The cap is here, in the grader's process, not in the kernel, where the
  student's code could undo it. nbclient 0.11 has no such limit, and nbgrader's LimitOutput (which
  autograde runs after Execute) cuts a cell's text to 1000 lines only once the notebook has run, and a
  line may be of any length;
- this process may take at most sandbox.NBGRADER_MEMORY_ENV GiB for its data (RLIMIT_DATA, set by the
  batch from the machine's memory, as the kernel's is: sandbox.nbgrader_memory_gib), for what the cap
  cannot see: one message of hundreds of MB is read whole before it is cut. Past it this notebook fails
  and scores 0 (the batch says why); the batch and the other notebooks go on.
  This process ends as soon as reading the kernel's messages runs out of that memory
  (`end_when_output_runs_out_of_memory`): nbclient would wait for the cell to end, and a kernel printing in a
  loop held its worker for as long as it printed, up to the notebook's time limit.
"""
from __future__ import annotations

import logging
import os
import resource
import sys
import traceback

# A None entry makes `import rfc3987_syntax` raise ImportError, which jsonschema handles.
sys.modules.setdefault("rfc3987_syntax", None)

from grader.pipeline import fork_server, sandbox  # noqa: E402 - after the line above (they import no jsonschema)


# Past the output cap, each string of an error or a result (what nbgrader scores: an error is 0, a number
# partial points) is cut to this many characters instead of dropped.
KEPT_CHARS = 2000
# Messages whose content nbclient keeps in the notebook; others (status, clear_output, ...) pass untouched.
STORED = {"stream", "display_data", "execute_result", "error", "update_display_data", "comm_open", "comm_msg"}
SCORED = {"execute_result", "error"}
CAPPED_NOTE = "\n[grading: this notebook's output passed {mb} MB; the rest of it was not kept]\n"


def limit_memory() -> None:
    """RLIMIT_DATA for this process, from sandbox.NBGRADER_MEMORY_ENV (unset: none). Its soft limit only:
    the sandbox's launcher, still root, sets its kernel's own; a kernel that is not sandboxed inherits it."""
    gib = os.environ.get(sandbox.NBGRADER_MEMORY_ENV)
    if gib and float(gib) > 0:
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        limit = int(float(gib) * 2**30)
        resource.setrlimit(resource.RLIMIT_DATA, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))


_memory_errors = []   # MemoryErrors raised while this process graded its notebook (note_memory_errors)


def ran_out_of_memory() -> str | None:
    """Whether this process came close to its RLIMIT_DATA (its peak resident memory, which the kernel's
    processes do not count in, past 3/4 of it), or ran out of it while it graded (a MemoryError of its
    own: on an H200 machine nbgrader failed so at a resident peak below 3/4 of the limit, which counts
    memory reserved and not yet used): how far, in words, or None."""
    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # Linux gives kB
    if soft == resource.RLIM_INFINITY or (peak < 0.75 * soft and not _memory_errors):
        return None
    return f"{sandbox.OUT_OF_MEMORY} ({peak / 2**30:.1f} GiB at its peak, of {soft / 2**30:.1f} GiB)"


def note_memory_errors() -> None:
    """Note a MemoryError raised in this process while nbgrader converts (executes and grades) the notebook:
    nbgrader catches it and logs only its traceback. A MemoryError in the kernel is the student's own: it
    reaches this process as a cell's error output, never raised here."""
    from nbgrader.converters.base import BaseConverter
    if getattr(BaseConverter.convert_single_notebook, "noted", False):
        return
    convert = BaseConverter.convert_single_notebook

    def noted_convert(self, *args, **kwargs):
        try:
            return convert(self, *args, **kwargs)
        except MemoryError:
            _memory_errors.append(True)
            raise

    noted_convert.noted = True
    BaseConverter.convert_single_notebook = noted_convert


def end_when_output_runs_out_of_memory() -> None:
    """End this process (status 1, the reason in words) when reading or keeping the kernel's messages raises
    a MemoryError. nbclient reads them in a task of their own, and that task's error reaches the cell only
    once the kernel has answered that the cell ended: a cell that kept printing held the notebook until it
    stopped or its time limit came. The batch kills the kernel left behind, as for any notebook.
    (`_async_poll_output_msg` is nbclient's own; where a version lacks it, nbclient's way stays.)"""
    from nbclient import NotebookClient
    poll = getattr(NotebookClient, "_async_poll_output_msg", None)
    if poll is None or getattr(poll, "ends", False):
        return

    async def poll_or_end(self, *args, **kwargs):
        try:
            return await poll(self, *args, **kwargs)
        except MemoryError:
            _memory_errors.append(True)
            end(1)

    poll_or_end.ends = True
    NotebookClient._async_poll_output_msg = poll_or_end


def end(status: int) -> None:
    """End this process with `status`, saying first in our own words if it ran out of memory: the log also
    holds what the kernel writes to its standard error (a MemoryError of its own, say), and a MemoryError
    here may end nbgrader in any of several ways."""
    why = ran_out_of_memory() if status != 0 else None
    if why:
        print(why, file=sys.stderr)
    logging.shutdown()
    fork_server.exit_flushed(status)


def _size(value, depth: int = 0) -> int:
    """About how many characters a message's content (or its binary buffers) adds to the notebook. A
    structure nested deeper than any honest output counts as too large."""
    if depth > 32:
        return 2**62
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        return len(value)
    if isinstance(value, dict):
        return sum(len(str(k)) + _size(v, depth + 1) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return sum(_size(v, depth + 1) for v in value)
    return 8


def _shortened(value, chars: int, depth: int = 0):
    """The content with every string cut to `chars`, every list and dict to its first 20 items, and
    nothing nested deeper than 8 levels (an error's name, value and traceback, a result's data)."""
    if isinstance(value, str):
        return value if len(value) <= chars else value[:chars] + " [...]"
    if depth > 8:
        return None
    if isinstance(value, dict):   # a result's number (text/plain) first: nbgrader reads partial points there
        items = sorted(value.items(), key=lambda item: item[0] != "text/plain")[:20]
        return {str(k)[:chars]: _shortened(v, chars, depth + 1) for k, v in items}
    if isinstance(value, (list, tuple)):
        return [_shortened(v, chars, depth + 1) for v in value[:20]]
    return value if isinstance(value, (int, float, bool, type(None))) else None


def read_schema_revision_here() -> None:
    """Let nbgrader's Gradebook, when it creates a database, read the schema's newest revision (which it
    stores in the new database's alembic_version table) in this process. Where the migration scripts do not
    give one head, nbgrader's own way (`alembic heads` in a new process) answers, as before."""
    import nbgrader.api
    if getattr(nbgrader.api.get_alembic_version, "here", False):
        return
    by_alembic = nbgrader.api.get_alembic_version

    def schema_revision() -> str:
        from alembic.script import ScriptDirectory
        heads = ScriptDirectory(os.path.join(os.path.dirname(nbgrader.api.__file__), "alembic")).get_heads()
        return heads[0] if len(heads) == 1 else by_alembic()

    schema_revision.here = True
    nbgrader.api.get_alembic_version = schema_revision


def warm_up() -> None:
    """Run once in the batch's fork server (fork_server.PRELOAD), so that every notebook's nbgrader, a fork
    of it, starts with what it would otherwise do again on its first gradebook and its first notebook:
    SQLAlchemy sets up nbgrader's table mappings and imports its lazily loaded modules when a process
    opens its first gradebook (0.6 s of CPU on an idle 2-core machine, about 2 s while CI's tests run
    beside it), and nbformat compiles its schema into a validator the first time it validates (about 0.7 s
    under the same load). The gradebook opened here is in memory: nothing is written, and no course's is
    read."""
    import nbformat
    import nbgrader.api
    read_schema_revision_here()
    with nbgrader.api.Gradebook("sqlite://", "warm-up"):
        pass
    for relaxed in (False, True):   # nbformat keeps a validator for each; nbgrader and nbconvert ask for both
        nbformat.validator.get_validator(nbformat.current_nbformat, nbformat.current_nbformat_minor,
                                         relax_add_props=relaxed)


def cap_outputs(limit_mb: float) -> None:
    """Cap what nbclient keeps of a notebook's outputs at about limit_mb million characters (see the module's
    text). Every message nbclient keeps passes through NotebookClient.process_message: it is wrapped here,
    in this process only (the batch's autograde, one notebook per process, one budget per client)."""
    from nbclient import NotebookClient
    from nbformat.v4 import new_output
    if limit_mb <= 0 or getattr(NotebookClient.process_message, "capped", False):
        return
    process_message = NotebookClient.process_message
    limit = int(limit_mb * 1_000_000)

    def capped_process_message(self, msg, cell, cell_index):
        kind = msg.get("msg_type") or msg.get("header", {}).get("msg_type")
        if kind not in STORED:
            return process_message(self, msg, cell, cell_index)
        left = self.__dict__.setdefault("_grading_output_left", limit)
        size = _size(msg.get("content")) + _size(msg.get("buffers") or [])
        if size <= left:
            self._grading_output_left = left - size
            return process_message(self, msg, cell, cell_index)
        self._grading_output_left = 0
        kept = None
        if kind == "stream" and left > 0:    # what still fits of the text that passed the cap
            msg["content"] = dict(msg["content"], text=str(msg["content"].get("text", ""))[:left])
            kept = process_message(self, msg, cell, cell_index)
        elif kind in SCORED:
            msg["content"] = _shortened(msg["content"], KEPT_CHARS)
            kept = process_message(self, msg, cell, cell_index)
        noted = self.__dict__.setdefault("_grading_output_noted", set())
        if cell_index not in noted:   # once per cell that lost output
            noted.add(cell_index)
            cell.setdefault("outputs", []).append(new_output("stream", name="stderr",
                                                             text=CAPPED_NOTE.format(mb=limit_mb)))
            self.log.warning("%s at %s MB in cell %s", sandbox.OUTPUT_CAPPED, limit_mb, cell_index)
        return kept

    capped_process_message.capped = True
    NotebookClient.process_message = capped_process_message


def cell_name(cell, cell_index: int) -> str:
    """How the batch names a cell to its student: its number as the notebook shows it (from 1) and its
    nbgrader id, else the start of its first line."""
    grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    first = (str(cell.get("source", "")).strip().splitlines() or [""])[0]
    return f"{cell_index + 1} ({grade_id or first[:60]!r})"


def mark_cells() -> None:
    """Log sandbox.RUNNING_CELL and the cell's name as each cell starts, to this process's standard error
    (the batch's log of this notebook): a notebook killed at its time limit is told where it stood, and
    one killed before any such line never got a kernel that answered."""
    from nbclient import NotebookClient
    if getattr(NotebookClient.async_execute_cell, "marked", False):
        return
    execute_cell = NotebookClient.async_execute_cell

    async def marked_execute_cell(self, cell, cell_index, *args, **kwargs):
        if cell.get("cell_type") == "code":
            print(f"{sandbox.RUNNING_CELL} {cell_name(cell, cell_index)}", file=sys.stderr, flush=True)
        return await execute_cell(self, cell, cell_index, *args, **kwargs)

    marked_execute_cell.marked = True
    NotebookClient.async_execute_cell = marked_execute_cell


def main() -> None:
    status = 1
    try:
        limit_memory()
        mark_cells()
        note_memory_errors()
        end_when_output_runs_out_of_memory()
        read_schema_revision_here()
        cap_outputs(float(os.environ.get(sandbox.OUTPUT_ENV) or sandbox.OUTPUT_LIMIT_MB))
        from nbgrader.apps.nbgraderapp import main as nbgrader_main
        sys.argv[0] = "nbgrader"
        nbgrader_main()
        status = 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            status = e.code or 0
        else:
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - reported as Python would report it, with the same status
        traceback.print_exc()
    finally:
        end(status)


if __name__ == "__main__":
    main()
