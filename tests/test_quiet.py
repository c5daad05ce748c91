"""A graded call's warnings go to stdout (nbgrader scores a cell with stderr 0), each once, with whose they are."""
import os
import sys
import warnings

import numpy

from grader.quiet import stderr_to_stdout


def test_warnings_are_printed_once_each_with_their_count_and_whose_they_are(capfd):
    inside_numpy = os.path.join(os.path.dirname(numpy.__file__), "core", "somewhere.py")
    with stderr_to_stdout():
        for _ in range(3):
            warnings.warn("this is the student's own warning")
        for _ in range(200):   # (as Triton's interpreter under some NumPy warns at every load)
            warnings.warn_explicit("a library's warning", DeprecationWarning, inside_numpy, 1)
        print("said on stderr", file=sys.stderr)
    out, err = capfd.readouterr()
    assert err == ""
    assert "(warning from your code, 3 times) UserWarning: this is the student's own warning" in out
    assert "(warning from numpy, 200 times) DeprecationWarning: a library's warning" in out
    assert out.count("warning from") == 2 and "said on stderr" in out


def test_a_single_warning_says_no_count(capfd):
    with stderr_to_stdout():
        warnings.warn("once")
    assert "(warning from your code) UserWarning: once" in capfd.readouterr().out
