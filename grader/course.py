"""The course as one object: where its folders are (as nbgrader_config.py says), its days and notebooks,
who handed a day in, how nbgrader is run on it, and a scratch copy of it to grade in.

Every module that needs one of these asks here, so that moving a module never moves the course, and a
folder renamed in nbgrader_config.py is renamed for the whole grader.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

REPO = Path(__file__).resolve().parent.parent

# How long a writer to a SQLite gradebook waits for another's lock before failing with "database is
# locked". nbgrader's transactions last milliseconds; Python's default wait (5 s) is passed when an
# instructor's tool (formgrader, a sqlite3 shell, a backup) holds the file for a while.
SQLITE_BUSY_TIMEOUT_S = 300


@dataclass(frozen=True)
class Course:
    root: Path
    source: Path         # solutions/: reference answers and hidden tests (the student edition has none)
    release: Path        # exercises/: what students get, one folder a day
    submitted: Path      # submitted/<student>/<day>/<notebook>.ipynb
    autograded: Path     # autograded/<student>/<day>/<notebook>.ipynb
    feedback: Path       # feedback/<student>/<day>/<notebook>.html
    db_url: str          # SQLite with a long busy timeout, or the PostgreSQL URL from NBGRADER_DB_URL
    course_id: str       # "" unless the config names the course

    @classmethod
    def of(cls, root=REPO) -> "Course":
        """The course whose nbgrader_config.py is in `root`, read as nbgrader reads it."""
        from traitlets.config.loader import PyFileConfigLoader
        root = Path(root).resolve()
        config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config().CourseDirectory
        home = Path(config.get("root", root))

        def folder(name, default):
            return home / config.get(name, default)

        url = config.get("db_url") or f"sqlite:///{home / 'gradebook.db'}"  # nbgrader's own default
        return cls(root, folder("source_directory", "source"), folder("release_directory", "release"),
                   folder("submitted_directory", "submitted"), folder("autograded_directory", "autograded"),
                   folder("feedback_directory", "feedback"), with_busy_timeout(url), config.get("course_id", ""))

    @property
    def grading(self) -> Path:
        """The grading workspace: what git ignores (the gradebook, the run logs, the reports)."""
        return self.submitted.parent

    def days(self) -> list:
        """The course's days: the release's folders (both editions have them; tests keep the release equal
        to what nbgrader generates from the solutions)."""
        return sorted(p.name for p in self.release.glob("day*") if p.is_dir()) if self.release.is_dir() else []

    def source_days(self) -> list:
        """The days of the solutions (the source edition): a day is there before its first release."""
        return sorted(p.name for p in self.source.glob("day*") if p.is_dir()) if self.source.is_dir() else []

    def notebooks(self, day: str) -> list:
        """A day's notebooks, as released (the names nbgrader knows)."""
        return sorted(p.stem for p in (self.release / day).glob("*.ipynb"))

    def students(self, day: str) -> list:
        """The students whose work for the day has been collected."""
        if not self.submitted.is_dir():
            return []
        return sorted(p.name for p in self.submitted.iterdir() if (p / day).is_dir())

    def nbgrader_env(self, base: dict | None = None) -> dict:
        """The environment nbgrader runs in: this Python's scripts first on PATH (nbgrader runs `alembic`
        from there), and this checkout's grader importable (nbgrader_config.py imports it)."""
        env = dict(os.environ if base is None else base)
        env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        env.pop("NBGRADER_EXECUTION", None)  # set inside an autograded kernel: not for an nbgrader it starts
        return env

    def nbgrader(self, *args: str, env: dict | None = None, capture: bool = True) -> subprocess.CompletedProcess:
        """Run one nbgrader command on this course (`nbgrader ARGS` in its root), by the command line the batch
        gives each notebook (grader.pipeline.nbgrader_process: nbgrader's, without an import that took about
        2 s of every nbgrader command on the 2-core CI machine)."""
        return subprocess.run([sys.executable, "-m", "grader.pipeline.nbgrader_process", *args], cwd=self.root,
                              env=self.nbgrader_env(env), capture_output=capture, text=True)

    def scratch_copy(self, root: Path) -> "Course":
        """A throwaway course in `root` (which must not exist yet): this one's config, solutions and
        exercises, with a grading workspace of its own."""
        root = Path(root)
        root.mkdir(parents=True)
        shutil.copy(self.root / "nbgrader_config.py", root)
        for folder in (self.source, self.release):
            shutil.copytree(folder, root / folder.relative_to(self.root))
        return Course.of(root)


def with_busy_timeout(url: str) -> str:
    """A SQLite URL with a long busy timeout (SQLAlchemy passes ?timeout= to sqlite3.connect);
    other databases' URLs unchanged."""
    if not url.startswith("sqlite") or "timeout" in dict(parse_qsl(urlsplit(url).query)):
        return url
    return f"{url}{'&' if '?' in url else '?'}timeout={SQLITE_BUSY_TIMEOUT_S}"
