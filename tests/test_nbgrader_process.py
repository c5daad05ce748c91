"""nbgrader's command line as the batch starts it (grader/pipeline/nbgrader_process.py).

The class graded through the whole pipeline (collect, sanitize, autograde, export, regrade) is
tests/test_adversarial_batch.py: one class for every case, each notebook graded once per run.
"""
import subprocess
import sys


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
