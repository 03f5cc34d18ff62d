"""What learners handed in, as ``labkit grade`` reads it: a folder or a learning platform's bulk-download .zip.

Each top-level entry of the folder (or archive) belongs to one learner, named by the first pattern
that fits its name:

- Canvas ("Download Submissions"): ``sortablename_[late_]userid_submissionid_original.ipynb``, e.g.
  ``lovelaceada_12345_67890_ex1_basic_cluster.ipynb``; the learner is the user id (12345).
- Moodle ("Download all submissions"): a folder (or file prefix) ``Full Name_123456_assignsubmission_file_``;
  the learner is the participant id (123456), named Full Name.
- anything else: the file's stem (``ada.ipynb``) or the folder's name (``ada/``, any notebooks inside).
  With ``--roster``, a roster id that is a word of the name (``ex1_s1234.ipynb``) names the learner instead.

Several notebooks of one exercise from one learner: the latest (the highest Canvas submission id, else the
newest file) is graded, the others are listed. Files that are not notebooks are listed, never graded.
"""
import csv
import os
import re
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

CANVAS_NAME = re.compile(r"^(?P<name>[^_]+)_(?:(?P<late>late)_)?(?P<id>\d+)_(?P<order>\d+)_(?P<original>.+)$",
                         re.IGNORECASE)
MOODLE_NAME = re.compile(r"^(?P<name>.+?)_(?P<id>\d+)_assignsubmission_(?:file|onlinetext)_(?P<original>.*)$")
ROSTER_ID_COLUMNS = ("id", "ID", "learner", "student_id")  # the first one present names the learner
ROSTER_NAME_COLUMNS = ("name", "Student")


@dataclass
class Submission:
    """One notebook (or unreadable entry) handed in by one learner."""

    learner: str  # the learner's id: their row in grades.csv and their folder in --out
    path: Path
    original: str  # the file's name as the learner gave it
    order: tuple = ()  # sorts a learner's submissions of one exercise: the last is the latest
    late: bool = False


@dataclass
class Learner:
    id: str
    name: str = ""
    submissions: list = field(default_factory=list)
    other_files: list = field(default_factory=list)  # handed in, not notebooks: listed, not graded
    roster: dict = field(default_factory=dict)  # the learner's roster row, when there is a roster


def unpack(source, folder):
    """The folder to grade: ``source`` itself, or the .zip ``source`` unpacked into ``folder``."""
    source = Path(source)
    if source.is_dir():
        return source
    if not source.exists():
        raise ValueError(f"no folder or .zip at {source}: give the folder of submitted notebooks "
                         "or the learning platform's bulk-download .zip.")
    try:
        with zipfile.ZipFile(source) as archive:
            damaged = archive.testzip()
            if not damaged:
                for member in archive.infolist():
                    path = Path(archive.extract(member, folder))  # extract() drops "..", "/" and drive letters
                    stamp = datetime(*member.date_time).timestamp()  # the submission's time orders resubmissions
                    os.utime(path, (stamp, stamp))
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        damaged = f"{type(error).__name__}: {error}"
    if damaged:
        raise ValueError(f"{source} is not a readable .zip archive (damaged: {damaged}): download it again from "
                         "the learning platform, or unpack it yourself and give the folder.")
    return Path(folder)


def read_roster(path):
    """The roster CSV as {learner id: its row}; Canvas's gradebook export works as it is."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as file:
            rows = list(csv.DictReader(file))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise ValueError(f"cannot read --roster {path}: {error}") from None
    columns = rows[0].keys() if rows else []
    id_column = next((column for column in ROSTER_ID_COLUMNS if column in columns), None)
    if id_column is None:
        raise ValueError(f"--roster {path} needs a column naming each learner: one of {', '.join(ROSTER_ID_COLUMNS)} "
                         f"(its columns: {', '.join(columns) or 'none'}).")
    return {row[id_column].strip(): row for row in rows if (row[id_column] or "").strip()
            and not row[id_column].strip().startswith("Points Possible")}


def find_learners(folder, roster=None):
    """{learner id: Learner} for every entry of ``folder``, with the roster's learners who handed in nothing."""
    folder = Path(folder)
    roster = roster or {}
    learners = {}
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith((".", "__MACOSX")):
            continue
        learner_id, name, original, order, late = _identify(entry, roster)
        learner = learners.setdefault(learner_id, Learner(learner_id, name))
        files = sorted(path for path in entry.rglob("*") if path.is_file()
                       and ".ipynb_checkpoints" not in path.parts) if entry.is_dir() else [entry]
        for path in files:
            shown = str(path.relative_to(entry)) if entry.is_dir() else original
            if path.suffix == ".ipynb":
                learner.submissions.append(Submission(learner_id, path, shown, (order, path.stat().st_mtime), late))
            else:
                learner.other_files.append(shown)
    for learner_id, row in roster.items():
        learner = learners.setdefault(learner_id, Learner(learner_id))
        learner.roster = row
        learner.name = next((row[column] for column in ROSTER_NAME_COLUMNS if row.get(column)), learner.name)
    if not learners:
        raise ValueError(f"{folder} is empty: put the submitted notebooks in it (one file or one folder per learner).")
    return learners


def _identify(entry, roster):
    """(learner id, name, original file name, order, late) from an entry's name."""
    name = entry.name
    canvas = None if entry.is_dir() else CANVAS_NAME.match(name)
    if canvas:
        return canvas["id"], canvas["name"], canvas["original"], int(canvas["order"]), bool(canvas["late"])
    moodle = MOODLE_NAME.match(name)
    if moodle:
        return moodle["id"], moodle["name"], moodle["original"] or name, 0, False
    words = set(re.split(r"[^A-Za-z0-9]+", entry.stem if entry.is_file() else name))
    on_roster = sorted(words & set(roster))
    return (on_roster[0] if on_roster else entry.stem if entry.is_file() else name), "", name, 0, False
