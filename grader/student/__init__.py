"""What runs in the student's process: the notebook's checks, and the kernel's side of graded checks.

A notebook imports `grader` and calls its public functions (`grader.check`, `check_speed`, ...), which
live in `checks`. At grading time the verdict is not made here but by the checker (`grader.checker`),
in nbgrader's process; `serve` is the only code the checker asks the kernel to run (call the student's
function on inputs it names, time it, hand back the outputs). `guard` watches the student's calls
(Triton launches, PyTorch ops, values read out), `integrity` notices grader functions a cell replaced,
`interpreter_driver` lets Triton's CPU interpreter run where there is no GPU and `interpreter_lang`
spares it repeated work. Nothing here is
trusted: docs/threat-model.md says what that costs and what the checker does about it.
"""
