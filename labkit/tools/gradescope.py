"""``labkit grade --gradescope-autograder OUT.zip``: the kit as a Gradescope autograder.

The zip holds, at its root, Gradescope's two scripts and the kit itself (the package, the exercises it
grades against, ``pyproject.toml`` with the pinned stack, the Makefile that installs it):

- ``setup.sh`` (run once, as root, when Gradescope builds the image): a supported Python, then
  ``make install``, the learners' own route to the pinned stack and the pslab kernel;
- ``run_autograder`` (run per submission): ``python -m labkit.tools.gradescope``, which grades the
  files in ``ROOT/submission`` as one learner's with ``labkit grade`` and the settings the zip was built
  with, and writes ``ROOT/results/results.json`` in Gradescope's format: one test per check of every
  reference exercise (one point when it passes), the total, and the learner's feedback.md as the output.

ROOT is ``/autograder`` on Gradescope; ``LABKIT_AUTOGRADER_ROOT`` names another (to try the autograder
on this machine).
"""
import argparse
import dataclasses
import json
import math
import shutil
import tempfile
import time
import zipfile
from pathlib import Path

from labkit.tools import grade, gradebook

KIT = Path(__file__).resolve().parents[2]
KIT_FILES = ("pyproject.toml", "README.md", "Makefile", "scripts/find_python.sh", "scripts/wheelhouse.py",
             "scripts/check_platforms.py", "jupyterlab/overrides.json")  # what `make install` reads
SETTINGS_FILE = "grading.json"  # in the zip: the Settings that `labkit grade` would use
LEARNER = "submission"  # the learner's id in the grading: Gradescope grades one at a time
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")  # Gradescope's values, for every test
EXECUTABLE = 0o100755 << 16  # a zip entry's external attributes: a regular file, rwxr-xr-x

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, in /autograder/source: a Python the kit supports, then `make install`
# (the kit's pinned stack from pyproject.toml into .venv, and the pslab kernel).
set -eu
cd "$(dirname "$0")"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y make python3-venv
if ! sh scripts/find_python.sh > /dev/null; then  # Ubuntu 22.04's python3 is 3.10
    apt-get install -y python3.11 python3.11-venv
fi
make install
"""
FULL_MNIST = """.venv/bin/labkit data download  # --full-mnist: each graded run gets a copy of full MNIST in its own HOME
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for each submission: grade ROOT/submission, write ROOT/results/results.json.
# ROOT is /autograder, or LABKIT_AUTOGRADER_ROOT (to try the autograder elsewhere).
set -eu
root="${LABKIT_AUTOGRADER_ROOT:-/autograder}"
cd "$root/source"
exec .venv/bin/python -m labkit.tools.gradescope "$root"
"""


# ----- building the zip (on the instructor's machine) -------------------------------------------
def build(out, reference=grade.DEFAULT_REFERENCE, settings=None, visibility="visible", full_mnist=False):
    """Write the autograder zip to ``out``: the scripts, the kit, ``reference``'s exercises, ``settings``, when
    learners see their results (``visibility``, one of Gradescope's ``VISIBILITIES``) and whether setup.sh caches
    full MNIST (``full_mnist``; else every notebook is graded on the 5,000-image subset)."""
    out, settings = Path(out), settings or grade.Settings()
    if visibility not in VISIBILITIES:
        raise ValueError(f"--visibility {visibility}: Gradescope knows {', '.join(VISIBILITIES)}.")
    if out.suffix != ".zip":
        raise ValueError(f"--gradescope-autograder {out}: name a .zip file (Gradescope takes a .zip).")
    missing = [name for name in KIT_FILES if not (KIT / name).is_file()]
    if missing:
        raise ValueError(f"{KIT} is not the kit's folder (no {', '.join(missing)}): build the autograder "
                         "from the kit's clone, where `make install` ran.")
    exercise_list = grade.load_exercises(reference)  # a reference that is not exercises fails here, not on Gradescope
    config = {name: value for name, value in dataclasses.asdict(settings).items() if name != "kernel"}
    config["visibility"] = visibility
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in (("setup.sh", SETUP + (FULL_MNIST if full_mnist else "")), ("run_autograder", RUN)):
            entry = zipfile.ZipInfo(name, time.localtime()[:6])
            entry.external_attr = EXECUTABLE
            archive.writestr(entry, text, zipfile.ZIP_DEFLATED)
        for name in KIT_FILES:
            archive.write(KIT / name, name)
        for path in sorted((KIT / "labkit").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path, path.relative_to(KIT).as_posix())
        for exercise in exercise_list:
            archive.write(Path(reference) / f"{exercise.name}.ipynb", f"exercises/{exercise.name}.ipynb")
        archive.writestr(SETTINGS_FILE, json.dumps(config, indent=1))
    print(f"{out}: a Gradescope autograder for {', '.join(exercise.name for exercise in exercise_list)} "
          f"({gradebook.points_possible(exercise_list)} checks, one point each: the assignment's points), graded on "
          f"{'full MNIST' if full_mnist else 'the 5,000-image MNIST subset (--full-mnist: full MNIST)'}, results "
          f"{visibility.replace('_', ' ')}. Upload it as the assignment's autograder zip, on an Ubuntu 22.04 or 24.04 "
          "base image, and set its Autograder Settings: " + settings_advice(exercise_list, settings, full_mnist))
    return out


def settings_advice(exercise_list, settings, full_mnist):
    """The sentence on the container's CPUs, memory and timeouts, from ``container_needs``."""
    try:
        needs = container_needs([exercise.name for exercise in exercise_list], full_mnist)
    except ValueError as error:
        return f"not measured here ({error}), so the CPUs, memory and timeout are yours to choose."
    return (f"{needs['cpus']} CPUs, memory at least {needs['memory_gb']} GB (the largest peak of these exercises' "
            f"solutions, {needs['peak_gb']:.1f} GB, and {GRADER_GB} GB for the grader), a timeout of at least "
            f"{needs['timeout_minutes']} minutes ({TIME_MARGIN} times their {needs['measured_minutes']:.1f} minutes "
            f"on 2 cores, and {START_MINUTES} for the autograder's start), as docs/measurements.md measured them. "
            f"Each notebook stops at --timeout {settings.timeout:g} s"
            + (f": lower it to about {needs['notebook_seconds']} s ({TIME_MARGIN} times the longest) so that one "
               "hung notebook cannot use the assignment's whole timeout." if settings.timeout > needs['notebook_seconds']
               else "."))


GRADER_GB = 1  # the grader's own processes (run_autograder, its worker, the kernel launcher) beside the notebook's
TIME_MARGIN = 4  # Gradescope's CPUs are slower and shared; a kernel and a cluster start for every notebook
START_MINUTES = 1  # run_autograder's own start and the feedback it writes


def container_needs(names, full_mnist=False, table=None):
    """What Gradescope's container needs to grade the exercises ``names`` (notebook stems), from their solutions'
    measured runs (labkit/tools/notebook_peaks.json, written with docs/measurements.md) in the setting graded:
    CPUs, memory, the assignment's timeout, and a notebook's own."""
    from labkit.tools import doctor

    table = table if table is not None else json.loads(doctor.PEAKS_TABLE.read_text())["notebooks"]
    setting = doctor.FULL_SIZE if full_mnist else doctor.SMALL_LAPTOP
    _, peak_mb = doctor.largest_peak(names, table, setting)
    runs = [table[name] if full_mnist else table[name][doctor.SMALL_LAPTOP] for name in names]
    measured = [run.get("minutes", table[name]["minutes"]) for name, run in zip(names, runs)]
    return {"cpus": 2, "peak_gb": peak_mb / 1000, "memory_gb": math.ceil(peak_mb / 1000 + GRADER_GB),
            "measured_minutes": sum(measured), "timeout_minutes": math.ceil(sum(measured) * TIME_MARGIN + START_MINUTES),
            "notebook_seconds": math.ceil(max(measured) * 60 * TIME_MARGIN)}


# ----- grading one submission (on Gradescope) ------------------------------------------------------
def results(exercise_list, notebooks, feedback, seconds, visibility="visible"):
    """Gradescope's results.json: one test per check of every exercise, the total, ``feedback`` as the output.
    An exercise whose notebook was handed in but not recognised (too few of its cell ids) says so, not
    "not submitted"."""
    graded = {row["exercise"]: row for row in notebooks if row["exercise"]}
    unrecognised = [row for row in notebooks if row["status"] == gradebook.NOT_RECOGNISED]
    strays = ", ".join(row["file"] for row in unrecognised if not row["meant"])
    tests = []
    for exercise in exercise_list:
        row = graded.get(exercise.short)
        meant = [mine for mine in unrecognised if mine["meant"] == exercise.short]
        for check in exercise.checks:
            column = f"{exercise.short}: {check.name}"
            if row:
                state, message = row[column], row["messages"][check.name]
            elif meant:
                state, message = gradebook.NOT_RECOGNISED, meant[-1]["detail"]
            else:
                state = gradebook.NOT_SUBMITTED
                message = f"upload {exercise.name}.ipynb to be graded on it" + (
                    f" ({strays}: not recognised as any exercise, see the feedback)" if strays else "")
            tests.append({"name": column, "score": int(state == "passed"), "max_score": 1,
                          "status": "passed" if state == "passed" else "failed",
                          "output": f"{state}: {message}" if message else state, "visibility": visibility})
    return {"score": sum(test["score"] for test in tests), "execution_time": round(seconds),
            "output": feedback, "output_format": "md", "visibility": visibility, "tests": tests}


def run(root):
    """Grade ``root``/submission as one learner's hand-in; write ``root``/results/results.json."""
    began = time.monotonic()
    root = Path(root)
    source = root / "source"
    config = json.loads((source / SETTINGS_FILE).read_text())
    visibility = config.pop("visibility", "visible")
    settings = grade.Settings(**config)
    exercise_list = grade.load_exercises(source / "exercises")
    with tempfile.TemporaryDirectory(prefix="labkit-gradescope-") as work:
        handed_in = Path(work) / "submissions" / LEARNER
        shutil.copytree(root / "submission", handed_in)
        _, notebooks = grade.grade(handed_in.parent, Path(work) / "graded", source / "exercises", settings=settings)
        feedback = (Path(work) / "graded" / LEARNER / "feedback.md").read_text()
    report = results(exercise_list, notebooks, feedback, time.monotonic() - began, visibility)
    (root / "results").mkdir(exist_ok=True)
    (root / "results" / "results.json").write_text(json.dumps(report, indent=1))
    print(f"score {report['score']} of {len(report['tests'])}: {root / 'results' / 'results.json'}")


# ----- the command (its options: labkit/tools/cli.py's add_grade) -----------------------------------
def command(args):
    """``labkit grade --gradescope-autograder OUT.zip``, refusing the options that only grading here takes."""
    given = [flag for flag, value in (("SUBMISSIONS", args.submissions), ("--out", args.out),
                                      ("--roster", args.roster), ("--export", args.export)) if value]
    if not args.gradescope_autograder:
        raise ValueError("--visibility and --full-mnist set up the Gradescope autograder: use them with "
                         "--gradescope-autograder OUT.zip.")
    if given:
        raise ValueError(f"--gradescope-autograder builds the autograder that Gradescope runs on each submission; "
                         f"it grades nothing here: leave out {', '.join(given)}.")
    return build(args.gradescope_autograder, args.reference or grade.DEFAULT_REFERENCE, grade.settings_from(args),
                 args.visibility or "visible", args.full_mnist)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m labkit.tools.gradescope")
    parser.add_argument("root", help="the autograder's root: /autograder on Gradescope")
    run(parser.parse_args(argv).root)


if __name__ == "__main__":
    main()
