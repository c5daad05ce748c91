"""nbgrader's command line as the batch starts it (grader/pipeline/nbgrader_process.py).

The class graded through the whole pipeline (collect, sanitize, autograde, export, regrade) is
tests/test_adversarial_batch.py: one class for every case, each notebook graded once per run.
"""
import subprocess
import sys

import pytest


def test_the_quicker_nbgrader_process_keeps_nbgrader_s_exit_status(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "grader.pipeline.nbgrader_process", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
    assert run("--version").returncode == 0
    failed = run("autograde", "nosuchday", "--student", "x")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    # and jsonschema's optional IRI parser (about 1.5 s of imports per process) stays out
    probe = subprocess.run([sys.executable, "-c", "import sys, grader.pipeline.nbgrader_process, nbformat.validator; "
                            "import jsonschema; print(sys.modules.get('rfc3987_syntax'))"],
                           capture_output=True, text=True, timeout=120)
    assert probe.stdout.strip() == "None", probe.stdout + probe.stderr


def test_a_memory_error_of_nbgrader_s_own_is_said_in_words_where_its_resident_peak_stayed_low(monkeypatch):
    # nbgrader catches the MemoryError and logs its traceback; the batch tells the student only from this line
    import resource
    from nbgrader.converters.base import BaseConverter
    from grader.pipeline import nbgrader_process, sandbox
    def convert(self, name):
        raise {"x.ipynb": MemoryError, "y.ipynb": ValueError}[name]()
    monkeypatch.setattr(BaseConverter, "convert_single_notebook", convert)   # put back after the test
    monkeypatch.setattr(nbgrader_process, "_memory_errors", [])
    soft = 64 * 2**30   # far above what this process holds: its peak alone says nothing
    monkeypatch.setattr(resource, "getrlimit", lambda which: (soft, resource.RLIM_INFINITY))
    nbgrader_process.note_memory_errors()
    for name, error in (("y.ipynb", ValueError), ("x.ipynb", MemoryError)):
        with pytest.raises(error):   # nbgrader still gets the error, and handles it as before
            BaseConverter.convert_single_notebook(object(), name)
        if error is ValueError:      # another error is not memory
            assert nbgrader_process.ran_out_of_memory() is None
    said = nbgrader_process.ran_out_of_memory()
    assert said is not None and said.startswith(sandbox.OUT_OF_MEMORY), said


def test_a_new_gradebook_gets_the_schema_revision_nbgrader_s_own_way_gives_without_a_process_of_its_own(tmp_path, monkeypatch):
    # nbgrader ran `alembic heads` in a new process for every new gradebook (3.9 s of CPU); read here instead
    import sqlite3
    import nbgrader.api
    from grader.pipeline import nbgrader_process
    by_alembic = nbgrader.api.get_alembic_version()          # nbgrader's own way: the `alembic` command
    monkeypatch.setattr(nbgrader.api, "get_alembic_version", nbgrader.api.get_alembic_version)  # put back after
    monkeypatch.setattr(subprocess, "check_output", lambda *a, **k: pytest.fail(f"a process was started: {a}"))
    nbgrader_process.read_schema_revision_here()
    nbgrader.api.Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}").close()
    with sqlite3.connect(tmp_path / "gradebook.db") as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [(by_alembic,)]
    assert by_alembic and len(by_alembic) == 12, by_alembic
