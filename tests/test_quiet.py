"""A graded call's warnings go to stdout (nbgrader scores a cell with stderr 0), each once, with whose they are."""
import os
import sys
import warnings

import numpy
import pytest

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


def test_a_warning_is_never_asked_for_its_text_or_file_after_the_call(capfd):
    # The printout runs after the guard stopped watching: a red team's warning computed the answer in its
    # __str__ (called a second time there) or in its file name's startswith, and scored full marks.
    asked = []

    class Note(UserWarning):
        def __str__(self):
            asked.append("__str__")
            return "note"

    class Where(str):
        def startswith(self, *args):
            asked.append("startswith")
            return str.startswith(self, *args)

    class Odd(UserWarning):
        def __init__(self):
            super().__init__(["not", "text"])
    with stderr_to_stdout():
        warnings.warn(Note("tuning note"))
        called_inside = len(asked)      # (Python's warnings module reads the text once, inside the call)
        warnings.warn_explicit("a note", UserWarning, Where("/tmp/notes.py"), 1)
        warnings.warn(Odd())
    out = capfd.readouterr().out
    assert asked == ["__str__"] and called_inside == 1
    assert "(warning from your code) Note: tuning note" in out
    assert "(warning from your code) UserWarning: a note" in out
    assert "(warning from your code) Odd: (not shown: a message of class Odd)" in out


def test_warnings_of_a_call_that_raises_are_still_printed(capfd):

    with pytest.raises(ValueError):
        with stderr_to_stdout():
            warnings.warn("BLOCK_SIZE too large")
            raise ValueError("boom")
    assert "(warning from your code) UserWarning: BLOCK_SIZE too large" in capfd.readouterr().out


def test_a_watched_call_s_warnings_are_let_go_of_inside_and_printed_outside(capfd):
    # Objects of the call's (a warning's source, a filter it added) are freed at the end of the inner block,
    # inside the guard's watch, and the enclosing printout gets plain text only.
    import weakref
    from grader.quiet import let_go_of_warnings

    class Note:
        pass
    freed = []
    with stderr_to_stdout():
        with let_go_of_warnings():
            source, entry = Note(), Note()
            weakref.finalize(source, freed.append, "source")
            weakref.finalize(entry, freed.append, "filter's entry")
            warnings.warn("a note", UserWarning, source=source)
            warnings.filters.append(("ignore", None, entry, None, 0))
            del source, entry
        assert sorted(freed) == ["filter's entry", "source"]
    assert "(warning from your code) UserWarning: a note" in capfd.readouterr().out
