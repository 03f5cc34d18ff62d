"""A class graded with `labkit grade --jobs 2`: the wall time, the memory, what each kind of hand-in took.

6 learners each hand in every exercise, as solved, half solved, blank, with a cell that sleeps forever, or cut off.

    python -m measurements.items.grading FOLDER    # the run: writes FOLDER/grading.json
"""
import itertools
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import nbformat

from measurements.items import Run
from measurements.records import ROOT, gigabytes, measured_at, minutes, titled

# Per learner, what they hand in for each exercise in turn (in the order of solutions/, the list repeated as often
# as needed); FLAGS are the options the class is graded with.
GRADED_CLASS = {"learner1": ["solution"], "learner2": ["solution"], "learner3": ["solution"],
                "learner4": ["partial"], "learner5": ["partial"],
                "learner6": ["blank", "sleeper", "corrupt", "solution", "partial"]}
JOBS = 2
FLAGS = {"cell_timeout": 120.0, "timeout": 600.0}  # the sleeper's cell is stopped at the cell timeout
KINDS = {"solution": "the solution", "partial": "its first answer cell solved, the others as handed out",
         "blank": "the exercise as handed out", "sleeper": "the solution and a cell that sleeps forever",
         "corrupt": "a notebook file cut off halfway"}


def runs():
    return [Run("grading", lambda folder: [sys.executable, "-m", __name__, str(folder)])]


def result(run, folder):
    """The class's time, memory and size, and per kind of hand-in: notebooks, statuses, checks passed, seconds."""
    path = folder / "grading.json"
    if not path.exists():
        return None
    graded = json.loads(path.read_text())
    kinds = {}
    for kind in KINDS:
        mine = [row for row in graded["notebooks"] if row["kind"] == kind]
        if mine:
            seconds = [float(row["seconds"]) for row in mine]
            kinds[kind] = {"notebooks": len(mine), "statuses": dict(Counter(row["status"] for row in mine)),
                           "score": sum(row["score"] for row in mine), "max_score": sum(row["max_score"] for row in mine),
                           "median_seconds": statistics.median(seconds), "longest_seconds": max(seconds)}
    return {"seconds": graded["seconds"], "jobs": graded["jobs"], "flags": graded["flags"],
            "learners": len({row["learner"] for row in graded["notebooks"]}), "notebooks": len(graded["notebooks"]),
            **{key: graded[key] for key in ("peak_pss_mb", "peak_alone_mb", "peak_rss_mb")}, "kinds": kinds}


def section(recorded):
    return titled("Grading a class", recorded.get("grading"), class_graded)


def class_graded(record):
    graded = record["result"]
    flags = " ".join(f"--{name.replace('_', '-')} {value:g}" for name, value in graded["flags"].items())
    lines = [f"`labkit grade --jobs {graded['jobs']} {flags}` over a class of {graded['notebooks']} notebooks: "
             f"{graded['learners']} learners,",
             "each handing in every exercise, built by `measurements/items/grading.py` from `solutions/` and `exercises/`",
             f"as the first column says; every exercise at its defaults ({measured_at(record)}).", "",
             f"**{minutes(graded['seconds'])}** for the class; at its peak {gigabytes(graded['peak_pss_mb'])} of memory "
             f"(PSS of every grader worker, kernel and task; {gigabytes(graded['peak_alone_mb'])} alone).", "",
             "| handed in | notebooks | status | checks passed | seconds each (median, longest) |",
             "|---|---|---|---|---|"]
    for kind, seen in graded["kinds"].items():
        statuses = ", ".join(f"{status} ({count})" for status, count in seen["statuses"].items())
        passed = f"{seen['score']} of {seen['max_score']}" if seen["max_score"] else "none graded"
        lines.append(f"| {KINDS[kind]} | {seen['notebooks']} | {statuses} | {passed} "
                     f"| {seen['median_seconds']:.0f}, {seen['longest_seconds']:.0f} |")
    return lines + [""]


def hand_ins(exercise_paths):
    """{(learner, exercise path): the kind of hand-in}: every learner of GRADED_CLASS hands in every exercise."""
    return {(learner, path): kind for learner, plan in GRADED_CLASS.items()
            for kind, path in zip(itertools.cycle(plan), exercise_paths)}


def handed_in(kind, exercise_path):
    """The notebook text a learner hands in for the exercise at ``exercise_path``, being ``kind`` (KINDS)."""
    from labkit.tools import grade

    solution = ROOT / "solutions" / exercise_path.name
    if kind == "blank":
        return exercise_path.read_text()
    if kind == "corrupt":
        text = solution.read_text()
        return text[:len(text) // 2]
    if kind == "solution":
        return solution.read_text()
    if kind == "sleeper":
        notebook = nbformat.read(solution, as_version=4)
        notebook.cells.append(nbformat.v4.new_code_cell("import time\ntime.sleep(10 ** 6)"))
        return nbformat.writes(notebook)
    first_answer = grade.load_exercise(exercise_path).checks[0].covers[0]  # "partial": that cell from the solution
    answer = next(cell for cell in nbformat.read(solution, as_version=4).cells if cell.get("id") == first_answer)
    notebook = nbformat.read(exercise_path, as_version=4)
    notebook.cells = [answer if cell.get("id") == first_answer else cell for cell in notebook.cells]
    return nbformat.writes(notebook)


def grade_class(folder):
    """Grade GRADED_CLASS, built from solutions/ and exercises/, with `labkit grade --jobs JOBS`; write the wall
    time, the peak memory (summed PSS of every grader's worker, kernel and task) and each notebook's row."""
    from labkit.tools import grade
    from labkit.tools.memory import PeakMemory

    exercise_paths = sorted((ROOT / "exercises").glob("*.ipynb"))
    with tempfile.TemporaryDirectory(prefix="pslab-grading-") as work:
        kinds = {}
        for (learner, exercise_path), kind in hand_ins(exercise_paths).items():
            (Path(work) / "class" / learner).mkdir(parents=True, exist_ok=True)
            (Path(work) / "class" / learner / exercise_path.name).write_text(handed_in(kind, exercise_path))
            kinds[learner, exercise_path.stem.split("_")[0]] = kind
        began = time.monotonic()
        with PeakMemory() as memory:
            _, rows = grade.grade(Path(work) / "class", Path(work) / "graded", jobs=JOBS, settings=grade.Settings(**FLAGS))
        seconds = round(time.monotonic() - began)
    notebooks = [{"learner": row["learner"], "kind": kinds[row["learner"], Path(row["file"]).stem.split("_")[0]],
                  **{key: row[key] for key in ("file", "status", "score", "max_score", "seconds")}} for row in rows]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "grading.json").write_text(json.dumps({"seconds": seconds, "jobs": JOBS, "flags": FLAGS,
                                                     **memory.peaks(), "notebooks": notebooks}, indent=1))
    print(f"graded {len(notebooks)} notebooks with --jobs {JOBS} in {seconds} s", flush=True)


if __name__ == "__main__":
    grade_class(Path(sys.argv[1]))
