"""The grading checker: the verdict of every graded cell, computed where the student's code cannot reach.

At grading time nbgrader runs the student's notebook in a Jupyter kernel: the student's process. The
course's executor (`grader.checker.headless.Execute`), which runs in nbgrader's own process, recognises each
graded test cell (its source comes from the instructor's copy, `grader.check(...)` and its kind) and,
instead of running it in the kernel, asks `Checker` for the verdict:

- `cells` reads which checks a graded cell asks for;
- `exchange` is the folder through which the kernel hands results over, read with care;
- `verdicts` draws the inputs from a seed the kernel never holds, has the kernel call the student's
  function on them (`grader.student.serve`, the only code of the protocol that runs in the student's process),
  computes the expected values itself and compares, and writes the cell's outputs, which is what
  nbgrader scores;
- `timer` is the grader's clock, a process of its own that times the student's calls and the
  PyTorch baseline and checks every timed call's output.

docs/threat-model.md says what this stops and what it does not yet.
"""

# Marks a line of nbgrader's log that the batch copies into the instructor's run log (grader.pipeline.batch).
FLAGGED = "grading checker flagged:"
# A file the batch creates when a notebook may run (grader.pipeline.batch): until then its nbgrader process
# gets everything ready (imports, the gradebook, the kernel with torch loaded) and runs no cell. Once it
# has set up the student's folder, it creates ready_file(that file): the batch then starts the next one.
GO_ENV = "GRADER_GO_FILE"


def ready_file(go):
    return go.with_name(go.name + ".ready")
