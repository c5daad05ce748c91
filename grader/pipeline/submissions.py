"""Collect students' notebooks from an LMS or Colab download, and sanitize them before grading.

collect: files named like `Copy of day2_softmax.ipynb`, `alice_day2_softmax (1).ipynb`,
`alice/softmax.ipynb`, or as Canvas, Moodle and Blackboard name their downloads, in a folder or a zip, are matched
to a student and to one of the day's notebooks and copied to nbgrader's layout,
`grading/submitted/<student>/<day>/<notebook>.ipynb`; of two attempts the newer is kept. What cannot be
matched is reported, never dropped silently. The originals are not touched.

sanitize: each collected notebook is rebuilt on the released notebook: the student's solution cells
are kept, every other graded or locked cell comes from the release (a deleted or edited test cell is
restored, a duplicated graded cell - which crashes nbgrader's autograde - is dropped), outputs are
cleared and the kernelspec is set. A file that is not a notebook is replaced by the untouched release,
so that the student scores 0 with a recorded reason and the batch goes on.
"""
from __future__ import annotations

import difflib
import itertools
import os
import re
import shutil
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from grader.pipeline import code_rules

KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


@dataclass
class CollectReport:
    copied: list = field(default_factory=list)      # (source, student, notebook)
    unmatched: list = field(default_factory=list)   # (source, reason)
    replaced: list = field(default_factory=list)    # (older source, newer source) for one student+notebook

    def summary(self) -> str:
        lines = [f"collected {len(self.copied)} notebooks from "
                 f"{len({s for _, s, _ in self.copied})} students"]
        for old, new in self.replaced:
            lines.append(f"  two files for the same notebook: kept {new}, not {old}")
        for src, why in self.unmatched:
            lines.append(f"  NOT COLLECTED {src}: {why}")
        return "\n".join(lines)


# A second copy of a file: a browser's " (1)", or Canvas's "-1" for a resubmission. The number says
# which attempt is the newer one.
ATTEMPT = re.compile(r"(?:\s*\((\d+)\)|-(\d+))$")
# How LMS downloads name a submission, once lower-cased with spaces as "_" (the part before the file's
# own name): Canvas "name_userid_submissionid_" (with "late_" first if late), Moodle
# "full_name_participantid_assignsubmission_file_". A Canvas submission id changes with every attempt
# and a Moodle participant id with every assignment: the student is Canvas's name and user id, Moodle's
# full name.
CANVAS = re.compile(r"^(?:late_)?(?P<name>[a-z][a-z0-9]*)_(?P<user>\d+)_\d+$")
MOODLE = re.compile(r"^(?P<name>.+?)_\d+_assignsubmission_(?:file|onlinetext)$")
# Blackboard: "assignment name_username_attempt_YYYY-MM-DD-hh-mm-ss_" (the date with "_" once cleaned);
# the username is the last word before "_attempt_", and the date orders a student's attempts.
BLACKBOARD = re.compile(r"^(?:.*_)?(?P<name>[a-z0-9.]+)_attempt_\d{4}(?:_\d{2}){5}$")
BLACKBOARD_DATE = re.compile(r"_attempt_(\d{4})-(\d{2})-(\d{2})-(\d{2})-(\d{2})-(\d{2})_")


def attempt(name: str) -> int:
    """0 for a file's first copy, N for its " (N)" or "-N" copy; a Blackboard attempt's date as a number."""
    dated = BLACKBOARD_DATE.search(name)
    if dated:
        return int("".join(dated.groups()))
    match = ATTEMPT.search(re.sub(r"\.ipynb$", "", name, flags=re.I))
    return int(match.group(1) or match.group(2)) if match else 0


def _clean_stem(name: str) -> str:
    stem = re.sub(r"\.ipynb$", "", name, flags=re.I)
    while ATTEMPT.search(stem):
        stem = ATTEMPT.sub("", stem)
    stem = re.sub(r"^(copy of\s+)+", "", stem, flags=re.I)       # Colab's "Copy of ..."
    return stem.strip().lower().replace(" ", "_").replace("-", "_")


def _student(prefix: str, day: str) -> str:
    """The student's name from what precedes the notebook's name (or from a folder's name)."""
    previous = None
    while prefix != previous:   # "..._copy_of_day2_" -> "..."
        previous = prefix
        prefix = re.sub(rf"[_\s]*{day}[_\s]*$", "", prefix).strip("_ ")
        prefix = re.sub(r"[_\s]*copy_of$", "", prefix).strip("_ ")
    for lms in (CANVAS, MOODLE, BLACKBOARD):
        match = lms.match(prefix)
        if match:
            return "_".join(p for p in (match.group("name"), match.groupdict().get("user")) if p).strip("_ ")
    return prefix


def match_name(path: Path, day: str, notebooks: list, root: Path) -> tuple:
    """(student, notebook) for a submitted file, or (None, reason)."""
    stem = _clean_stem(path.name)
    found = [nb for nb in sorted(notebooks, key=len, reverse=True) if stem.endswith(nb.lower())]
    if not found:
        return None, f"its name matches none of {day}'s notebooks ({', '.join(sorted(notebooks))})"
    notebook = found[0]
    student = _student(stem[: len(stem) - len(notebook)], day)
    if student:
        return student, notebook
    rel = path.relative_to(root)
    if len(rel.parts) > 1:  # the student's name is the folder the file sits in
        student = _student(_clean_stem(rel.parts[-2] + "_"), day)
        if student:
            return student, notebook
    return None, "no student name in the file name or its folder"


def read_id_map(path: Path) -> dict:
    """LMS id -> student id, from a CSV of two columns (a header line is optional): the ids `collect`
    finds (a Canvas "name_userid", a Moodle full name, a Blackboard username, a folder's name), written
    as they are or as the LMS shows them ("Bob Jones")."""
    import csv
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r and any(cell.strip() for cell in r)]
    if rows and len(rows[0]) >= 2 and rows[0][1].strip().lower().replace(" ", "_") in ("student_id", "student", "id"):
        rows = rows[1:]
    mapping = {}
    for number, row in enumerate(rows, 1):
        if len(row) < 2 or not row[0].strip() or not row[1].strip():
            raise ValueError(f"{path}, row {number}: expected two columns, an LMS id and a student id")
        mapping[_clean_stem(row[0].strip())] = row[1].strip()
    return mapping


def collect(source: Path, day: str, notebooks: list, submitted: Path, id_map: dict | None = None) -> CollectReport:
    """Copy the notebooks of one day from a folder or zip into `submitted/<student>/<day>/`; with an
    id map, students are named by it, and a file of anyone it does not list is reported, not copied."""
    report = CollectReport()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(source)
        if zipfile.is_zipfile(root):
            with zipfile.ZipFile(root) as z:
                z.extractall(tmp)
                for info in z.infolist():   # extracting dates every file now: keep the zip's dates
                    stamp = time.mktime(info.date_time + (0, 0, -1))
                    target = (Path(tmp) / info.filename).resolve()
                    if target.is_file() and target.is_relative_to(Path(tmp).resolve()):
                        os.utime(target, (stamp, stamp))
            root = Path(tmp)
        chosen = {}
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            if "__MACOSX" in path.parts or path.name.startswith("."):
                continue
            if path.suffix.lower() != ".ipynb":
                report.unmatched.append((str(path.relative_to(root)), "not an .ipynb file"))
                continue
            student, notebook = match_name(path, day, notebooks, root)
            if student is None:
                report.unmatched.append((str(path.relative_to(root)), notebook))
                continue
            if id_map is not None:
                if student not in id_map:
                    report.unmatched.append((str(path.relative_to(root)), f"{student} is not in the id map"))
                    continue
                student = id_map[student]
            key = (student, notebook)
            if key in chosen:
                older, newer = sorted([chosen[key], path], key=lambda p: (attempt(p.name), p.stat().st_mtime, p.name))
                report.replaced.append((str(older.relative_to(root)), str(newer.relative_to(root))))
                chosen[key] = newer
            else:
                chosen[key] = path
        for (student, notebook), path in sorted(chosen.items()):
            dest = Path(submitted) / student / day / f"{notebook}.ipynb"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
            report.copied.append((str(path.relative_to(root)), student, notebook))
    return report


def _grade_id(cell):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _is_solution(cell):
    return bool(cell.get("metadata", {}).get("nbgrader", {}).get("solution"))


def _source(cell) -> str:
    src = cell.get("source", "")
    return src if isinstance(src, str) else "".join(src)


def _similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()


def sanitize_notebook(submitted_text: str, release: nbformat.NotebookNode) -> tuple:
    """(clean notebook, list of what was fixed) from a submission's text and the released notebook.

    The result has the release's graded and locked cells in the release's order; each solution cell
    holds the student's code; the student's own extra cells (helpers, experiments) keep their place
    after the graded cell they followed.
    """
    fixes = []
    try:
        student = nbformat.reads(submitted_text, as_version=4)
        cells = [c for c in student.cells if isinstance(c, dict) and c.get("cell_type") in ("code", "markdown", "raw")]
    except Exception as e:  # invalid JSON, an empty or truncated file, not a notebook at all
        return nbformat.from_dict(release), [f"not a readable notebook ({type(e).__name__}): graded as blank"]

    by_id, dropped = {}, set()
    for c in cells:
        gid = _grade_id(c)
        if gid is None:
            continue
        if gid in by_id:
            fixes.append(f"duplicated cell {gid!r} dropped")
            dropped.add(id(c))
        else:
            by_id[gid] = c

    # The student's cell for each solution cell: by its id, else (metadata stripped) by its content.
    answer, matched_to = {}, {}
    for rel_cell in release.cells:
        gid = _grade_id(rel_cell)
        if gid is None or not _is_solution(rel_cell):
            continue
        mine = by_id.get(gid)
        if mine is None:
            free = [c for c in cells if c.get("cell_type") == "code" and _grade_id(c) is None
                    and id(c) not in matched_to]
            best = max(free, key=lambda c: _similarity(_source(c), rel_cell.source), default=None)
            if best is not None and _similarity(_source(best), rel_cell.source) > 0.3:
                mine = best
                fixes.append(f"solution cell {gid!r} recognised by its content (its metadata was missing)")
            else:
                fixes.append(f"solution cell {gid!r} missing: graded as blank")
        if mine is not None:
            answer[gid] = _source(mine)
            matched_to[id(mine)] = gid

    # The student's extra cells, each after the graded cell it followed. A copy of a locked release cell
    # that lost its metadata (the Colab install, the set-up, a test) is not one: the release's comes back.
    locked = {_source(c) for c in release.cells if c.get("metadata", {}).get("nbgrader", {}).get("locked")}
    extras, anchor = {None: []}, None
    for c in cells:
        gid = _grade_id(c) if _grade_id(c) in by_id else matched_to.get(id(c))
        if id(c) in dropped or (gid is None and _source(c) in locked):
            continue
        if gid is not None:
            anchor = gid
            continue
        # A plain cell of the student's, whatever nbgrader metadata it carried: one marked graded without a
        # grade_id made nbgrader raise KeyError, and the whole notebook scored 0. Only the release's cells
        # are graded.
        extra = nbformat.from_dict(c)
        if isinstance(extra.get("metadata"), dict):
            extra.metadata.pop("nbgrader", None)
        extras.setdefault(anchor, []).append(extra)

    # Cells the student put before every graded cell go after the release's set-up cells (the graded
    # code cells before its first solution cell: the Colab install, then the set-up that switches
    # Triton to its interpreter), so that the set-up still runs before any kernel exists.
    graded_code = [c for c in release.cells if c.cell_type == "code" and _grade_id(c)]
    setup = list(itertools.takewhile(lambda c: not _is_solution(c), graded_code)) or graded_code[:1]
    after_setup = _grade_id(setup[-1]) if setup else None
    extras.setdefault(after_setup, [])[:0] = extras.pop(None)
    out = []
    for rel_cell in release.cells:
        gid = _grade_id(rel_cell)
        if gid is None:
            continue  # the student's copy of an ordinary cell is among the extras
        cell = nbformat.from_dict(rel_cell)
        if _is_solution(rel_cell):
            cell.source = answer.get(gid, rel_cell.source)
        elif gid not in by_id:
            if not any(v == gid for v in matched_to.values()):
                fixes.append(f"cell {gid!r} had been deleted: restored")
        elif _source(by_id[gid]) != rel_cell.source:
            fixes.append(f"cell {gid!r} had been edited: restored")
        out.append(cell)
        out.extend(extras.get(gid, []))
    # The student's code (answers and extra cells) must keep to the submission rules: a cell that
    # patches the grader or PyTorch is not run (grader/pipeline/code_rules.py).
    facts = code_rules.NotebookFacts.of(c.source for c in out if c.cell_type == "code")
    for cell in out:
        if cell.cell_type == "code" and (_grade_id(cell) is None or _is_solution(cell)):
            cell.source, done = code_rules.neutralize(cell.source, facts)
            fixes.extend(f"cell {_grade_id(cell) or 'of your own'!r}: {d}" for d in done)
    for i, cell in enumerate(out):
        cell["id"] = f"cell-{i:03d}"  # unique again, whatever the student's copy had
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb = nbformat.v4.new_notebook(cells=out, metadata=dict(release.metadata))
    nb.metadata["kernelspec"] = KERNELSPEC
    return nb, fixes


def sanitize_day(submitted: Path, release_dir: Path, day: str) -> dict:
    """Sanitize every collected notebook of one day in place; the raw copy is kept beside it as .raw.

    Returns {(student, notebook): [fixes]}.
    """
    results = {}
    for release_path in sorted(Path(release_dir).glob("*.ipynb")):
        release = nbformat.read(release_path, as_version=4)
        for student_dir in sorted(p for p in Path(submitted).iterdir() if p.is_dir()):
            path = student_dir / day / release_path.name
            raw = path.with_suffix(".ipynb.raw")
            if not path.exists() and not raw.exists():
                continue
            if not raw.exists():
                shutil.move(path, raw)
            text = raw.read_text(errors="replace")
            nb, fixes = sanitize_notebook(text, release)
            nbformat.write(nb, path)
            results[(student_dir.name, release_path.stem)] = fixes
    return results
