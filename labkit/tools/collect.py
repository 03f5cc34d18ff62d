"""``labkit collect``: the exercise notebooks in each class hub learner's home, copied for ``labkit grade``.

``labkit collect --group pslab --out class/`` gathers them into the folder ``labkit grade`` takes:
``class/<learner>/ex1_basic_cluster.ipynb``, ...

It reads ``~/work/exercises/`` of each member of the group (the work folder the hub copies for each learner on
their first login) and copies the notebooks named as the kit's exercises are, with their file times (``labkit
grade`` takes the newest of several). Nothing in a learner's home changes. A file is collected only if it is a
regular file its learner owns inside their home: a link to another learner's notebook is not taken as theirs.
The folder it writes is root's alone (0700), as the learners' work folders are theirs. Run it as root; then
``labkit grade class/ --out graded/``.
"""
import os
import pwd
import stat
from pathlib import Path

from labkit.tools.hub import members

EXERCISES = Path(__file__).resolve().parents[2] / "exercises"
WORK = "work"  # the learner's work folder in their home (labkit.tools.learner_server)


def read_own_file(path, user):
    """(bytes, os.stat_result) of ``path`` if it is a regular file (not a link) that ``user`` (a pwd entry) owns,
    inside their home; else None. The file is opened before it is judged, so it cannot be swapped in between."""
    if not path.resolve().is_relative_to(Path(user.pw_dir).resolve()):
        return None
    try:
        file = open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb")
    except OSError:
        return None
    with file:
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode) or status.st_uid != user.pw_uid:
            return None
        return file.read(), status


def collect(out, learners, exercises=EXERCISES, work=WORK):
    """Copy each of ``learners``' (user names) exercise notebooks into ``out``/<learner>/; return {learner: [the
    names copied]}, an empty list for a learner who had none."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty: give a new folder to --out.")
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    out.chmod(0o700)
    names = sorted(path.name for path in Path(exercises).glob("*.ipynb"))
    collected = {}
    for learner in learners:
        user = pwd.getpwnam(learner)
        collected[learner] = []
        for name in names:
            found = read_own_file(Path(user.pw_dir, work, "exercises", name), user)
            if found:
                (out / learner).mkdir(mode=0o700, exist_ok=True)
                (out / learner / name).write_bytes(found[0])
                os.utime(out / learner / name, ns=(found[1].st_atime_ns, found[1].st_mtime_ns))
                collected[learner].append(name)
    return collected


def learners_of(group, names):
    """The learners to collect from: ``names`` if given, else the members of ``group``."""
    if names:
        unknown = [name for name in names if name not in {user.pw_name for user in pwd.getpwall()}]
        if unknown:
            raise ValueError(f"no such user: {', '.join(unknown)}.")
        return names
    if not group:
        raise ValueError("name the learners: --group GROUP (the class hub's group) or their user names.")
    return sorted(members(group).values())


def run(args):
    """``labkit collect``: collect, then say what was found and how to grade it."""
    if os.geteuid() != 0:
        raise ValueError("collect reads every learner's home: run it as root (sudo .venv/bin/labkit collect ...).")
    collected = collect(args.out, learners_of(args.group, args.learners))
    empty = sorted(learner for learner, names in collected.items() if not names)
    print(f"{args.out}/: {sum(map(len, collected.values()))} exercise notebooks of {len(collected) - len(empty)} "
          f"learner(s)" + (f"; nothing from {', '.join(empty)}" if empty else "") +
          f". Grade them: labkit grade {args.out} --out graded/")
