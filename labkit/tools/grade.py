"""``labkit grade SUBMISSIONS --out DIR``: run learners' exercise notebooks and grade them.

SUBMISSIONS is a folder holding, per learner, one notebook file or one folder (any names;
a folder may hold several exercises). Each notebook is copied to ``DIR/<learner>/`` and run
there; the submissions themselves are only read. ``DIR/grades.csv`` gets one row per learner
and exercise: a status, a score (one point per passed check), and per check ``passed``,
``failed`` or ``not attempted``; each written answer is ``answered`` or ``not attempted``
(for the instructor to read). ``DIR/<learner>/feedback.md`` gives each failing check's message.

How the grader decides, and what it trusts:

- The exercise is recognised by its cells' ids (the learner's notebook keeps those of
  exercises/). Its *check cells* (the cells calling ``checklist.passed``) and its parameters
  cell are replaced by the reference's own, in place (a deleted one is put back), so that
  editing or deleting a check, or asking for other parameters, changes nothing. A check
  passes when the grader's own run of its cell raises nothing; the learner's
  ``checklist.passed(...)`` calls are never read, so calling it by hand counts for nothing.
- The checks observe the work themselves (they re-run the learner's function, read restored
  variables from the parameter server), so numbers a learner types in do not pass them.
- A check whose solution cells all still hold the exercise's stub is ``not attempted``; a notebook
  with no check attempted is not run (its row says so).
- The learner's code runs in the same kernel as the checks: code written to patch labkit
  itself could fool them, as with any grader that runs the learner's code in its process.
  Read the executed notebook (``executed.ipynb``) of a score that surprises you.

Every notebook runs in its own worker process (``python -m labkit.tools.grade_worker``, started with
``labkit.runtime.children`` in its own session), with its own kernel, ``LABKIT_STATE_DIR``,
``LABKIT_ARRAY_DIR`` and temporary folder; its clusters pick free ports as always. All of
its processes carry a per-run marker in their environment. After the run (or at its
``--timeout``, when the worker is killed) every process with that marker is found with psutil
and killed, kernel and TensorFlow tasks included, whatever session or parent it has; a run
that left processes behind says so in its status. ``LABKIT_MAX_TASKS`` (``--max-tasks``) caps
the task processes of any LocalCluster a notebook starts: a notebook asking for 16 workers
gets a ``TaskLimitError`` and the status ``refused``.

Statuses: ``ok`` (it ran; checks may still fail), ``timeout``, ``kernel died``, ``refused``
(not an exercise, or over the task limit), ``leaked processes`` (it ran, but left processes
that the grader killed), ``error`` (the file is not a readable notebook).
"""
import copy
import csv
import json
import os
import re
import shutil
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import psutil
import yaml

from labkit.runtime import children, processes
from labkit.tools import exercises
from labkit.cluster import MAX_TASKS_VARIABLE

DEFAULT_REFERENCE = Path(__file__).resolve().parents[2] / "exercises"
RUN_MARKER = "LABKIT_GRADE_RUN"  # in the environment of every process a graded notebook starts
PASSED_CALL = re.compile(r"""checklist\.passed\(\s*["']([^"']+)["']\s*\)""")
SUMMARY_SOURCE = "checklist.summary()"
STUB_MESSAGE = "replace this line with your solution"  # a stub's NotImplementedError: not worth a feedback line
LEFTOVER_GRACE_SECONDS = 10.0  # tasks exit on their own when their kernel has gone; wait that long first


class SubmissionError(ValueError):
    """A submission that cannot be graded; ``status`` says which kind ("error" or "refused")."""

    def __init__(self, message, status="error"):
        super().__init__(message)
        self.status = status


# ----- the reference exercises -----------------------------------------------------------
@dataclass
class Check:
    name: str
    cell_id: str
    covers: list  # ids of the solution cells whose work this check judges


@dataclass
class Exercise:
    """One exercise notebook of exercises/, as the grader needs it."""

    name: str  # the file's stem, e.g. ex3_fault_tolerance
    notebook: object
    checks: list = field(default_factory=list)
    written: dict = field(default_factory=dict)  # markdown answer cell id -> its title
    stub_ids: set = field(default_factory=set)  # cells holding a stub in the exercise
    parameters_id: str = None
    summary_id: str = None

    @property
    def short(self):
        return self.name.split("_")[0]

    @property
    def columns(self):
        return [f"{self.short}: {check.name}" for check in self.checks] + \
               [f"{self.short}: {title} (written)" for title in self.written.values()]


def load_exercise(path):
    """An Exercise from a generated exercise notebook: its check cells, stubs and written answers."""
    notebook = nbformat.read(path, as_version=4)
    exercise = Exercise(Path(path).stem, notebook)
    title, since_last_check = "", []
    for cell in notebook.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            title = cell.source.splitlines()[0][3:].strip()
        if _has_stub(cell):
            exercise.stub_ids.add(cell.id)
            if cell.cell_type == "markdown":
                exercise.written[cell.id] = title
            else:
                since_last_check.append(cell.id)
        if cell.cell_type != "code":
            continue
        if "parameters" in cell.metadata.get("tags", []):
            exercise.parameters_id = cell.id
        if cell.source.strip() == SUMMARY_SOURCE:
            exercise.summary_id = cell.id
        for name in PASSED_CALL.findall(cell.source):
            covers = since_last_check or (exercise.checks[-1].covers if exercise.checks else [])
            exercise.checks.append(Check(name, cell.id, covers))
            since_last_check = []
    if not exercise.checks:
        raise ValueError(f"{path} has no check cell (none calls checklist.passed): is it an exercise notebook?")
    return exercise


def load_exercises(directory):
    paths = sorted(Path(directory).glob("*.ipynb"))
    if not paths:
        raise ValueError(f"no exercise notebooks in {directory}: pass --reference with the kit's exercises/ folder.")
    return [load_exercise(path) for path in paths]


def _has_stub(cell):
    stub = exercises.CODE_STUB[1] if cell.cell_type == "code" else exercises.MARKDOWN_STUB[0]
    return stub in cell.source


# ----- the submissions --------------------------------------------------------------------
@dataclass
class Submission:
    learner: str  # a name for its row and its folder in --out
    path: Path


def find_submissions(folder):
    """One Submission per notebook: a notebook file in ``folder`` or each notebook in a learner's sub-folder."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"no folder at {folder}: give the folder into which you put the submitted notebooks "
                         "(one file or one folder per learner).")
    found = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            notebooks = sorted(path for path in entry.rglob("*.ipynb") if ".ipynb_checkpoints" not in path.parts)
            if not notebooks:
                found.append(Submission(entry.name, entry))  # graded as an error: nothing to grade
            for path in notebooks:
                found.append(Submission(entry.name if len(notebooks) == 1 else f"{entry.name}-{path.stem}", path))
        else:
            found.append(Submission(entry.stem, entry))
    if not found:
        raise ValueError(f"{folder} is empty: put the submitted notebooks in it (one file or one folder per learner).")
    return found


def read_notebook(path):
    """The notebook at ``path``, or SubmissionError saying why it cannot be read."""
    if path.is_dir():
        raise SubmissionError(f"the folder {path.name}/ holds no .ipynb notebook.")
    try:
        notebook = nbformat.read(path, as_version=4)
    except Exception as error:  # nbformat raises JSON, validation and encoding errors of many kinds
        raise SubmissionError(f"{path.name} is not a readable Jupyter notebook ({type(error).__name__}: "
                              f"{str(error).splitlines()[0][:200]}). Ask the learner for the .ipynb file "
                              "saved from Jupyter.") from None
    if not isinstance(notebook.get("cells"), list):
        raise SubmissionError(f"{path.name} is JSON but not a notebook (no list of cells).")
    return notebook


def match_exercise(notebook, exercises_list, name):
    """The exercise whose cell ids the submitted notebook shares most (at least half of them)."""
    ids = {cell.get("id") for cell in notebook.cells}
    shares = [(len(ids & {cell.id for cell in exercise.notebook.cells}) / len(exercise.notebook.cells), exercise)
              for exercise in exercises_list]
    share, exercise = max(shares, key=lambda pair: pair[0])
    if share < 0.5:
        raise SubmissionError(f"{name} is not one of the exercises ({', '.join(e.name for e in exercises_list)}): "
                              "it has almost none of their cells. Submit the exercise notebook you worked in.",
                              status="refused")
    return exercise


def graded_notebook(submitted, exercise, parameters):
    """The notebook the grader runs: the learner's cells, with the reference's check cells and parameters cell
    (put back where deleted), ``parameters`` set after it, and no summary cell."""
    reference = {cell.id: _graders_version(cell, exercise) for cell in exercise.notebook.cells}
    fixed = {check.cell_id for check in exercise.checks} | {exercise.parameters_id}
    cells = [reference[cell.get("id")] if cell.get("id") in fixed else copy.deepcopy(cell)
             for cell in submitted.cells if cell.get("id") != exercise.summary_id]
    present = {cell.get("id") for cell in cells}
    for index, cell in enumerate(exercise.notebook.cells):
        if cell.id in fixed and cell.id not in present:
            before = [c.id for c in exercise.notebook.cells[:index]]
            positions = [i for i, c in enumerate(cells) if c.get("id") in before]
            cells.insert(positions[-1] + 1 if positions else 0, reference[cell.id])
    if parameters:
        at = next(i for i, cell in enumerate(cells) if cell.get("id") == exercise.parameters_id)
        cells.insert(at + 1, nbformat.v4.new_code_cell(
            "# set by labkit grade --parameters\n" + "\n".join(f"{key} = {value!r}" for key, value in parameters.items())))
    for cell in cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    graded = nbformat.v4.new_notebook(cells=cells, metadata=copy.deepcopy(exercise.notebook.metadata))
    return graded


def _graders_version(cell, exercise):
    """A copy of a reference cell; a check cell with labkit's own checks and without its checklist call."""
    cell = copy.deepcopy(cell)
    if cell.id in {check.cell_id for check in exercise.checks}:
        kept = [line for line in cell.source.splitlines() if not PASSED_CALL.search(line)]
        cell.source = "\n".join(["from labkit import checks  # labkit grade: the kit's checks, whatever the notebook did"]
                                 + kept)
    return cell


def not_attempted(submitted, exercise):
    """Names of the checks whose solution cells all still hold the stub (or were deleted), and the
    ids of the written answers not given."""
    cells = {cell.get("id"): cell for cell in submitted.cells}

    def blank(cell_id):
        return cell_id not in cells or _has_stub(cells[cell_id]) or not cells[cell_id].source.strip()
    return ({check.name for check in exercise.checks if all(blank(cell_id) for cell_id in check.covers)},
            {cell_id for cell_id in exercise.written if blank(cell_id)})


# ----- grading every submission (in the grader) -----------------------------------------------
def grade(submissions_dir, out_dir, reference=DEFAULT_REFERENCE, jobs=1, timeout=900.0, max_tasks=4,
          parameters=None, kernel="pslab"):
    """Grade every submission; write grades.csv (after each one) and the feedback files; return the rows."""
    submissions = find_submissions(submissions_dir)
    exercise_list = load_exercises(reference)
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ValueError(f"{out_dir} is not empty (an earlier grading?): choose a new --out folder.")
    if jobs < 1 or timeout <= 0 or max_tasks < 2:
        raise ValueError("--jobs must be >= 1, --timeout > 0 and --max-tasks >= 2 (a worker and a parameter server).")
    out_dir.mkdir(parents=True, exist_ok=True)
    names = _unique_folders([submission.learner for submission in submissions])
    settings = dict(timeout=timeout, max_tasks=max_tasks, parameters=parameters or {}, kernel=kernel)
    rows, lock = [], threading.Lock()

    def one(pair):
        submission, folder = pair
        row = grade_submission(submission, exercise_list, out_dir / folder, **settings)
        with lock:
            rows.append(row)
            write_grades(rows, exercise_list, out_dir / "grades.csv")
        print(f"{row['learner']}: {row['exercise'] or '-'} {row['status']}, score {row['score']}/{row['max_score']}"
              f" ({row['seconds']} s)", flush=True)
        return row

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, zip(submissions, names)))
    rows.sort(key=lambda row: row["learner"])
    write_grades(rows, exercise_list, out_dir / "grades.csv")
    print(f"graded {len(rows)} notebook(s): {out_dir / 'grades.csv'}, feedback in {out_dir}/<learner>/feedback.md")
    return rows


def grade_submission(submission, exercise_list, folder, timeout, max_tasks, parameters, kernel):
    """Grade one notebook in ``folder`` (created): its row for grades.csv."""
    began = time.monotonic()
    folder.mkdir(parents=True)
    row = {"learner": submission.learner, "file": str(submission.path.name), "exercise": "", "status": "",
           "score": 0, "max_score": 0, "seconds": 0.0, "detail": ""}
    try:
        submitted = read_notebook(submission.path)
        shutil.copy2(submission.path, folder / "submitted.ipynb")
        exercise = match_exercise(submitted, exercise_list, submission.path.name)
    except SubmissionError as error:
        row.update(status=error.status, detail=str(error))
        _write_feedback(folder / "feedback.md", row, None, {}, {})
        return row
    row.update(exercise=exercise.short, max_score=len(exercise.checks))
    skipped, unanswered = not_attempted(submitted, exercise)
    own = parameters.get(exercise.name, parameters.get(exercise.short, {}))
    nbformat.write(graded_notebook(submitted, exercise, own), folder / "graded.ipynb")
    if skipped == {check.name for check in exercise.checks}:  # a blank exercise: no kernel, no cluster
        result = {"status": "ok", "checks": {}, "cell_errors": [], "detail": "no check attempted: not run"}
    else:
        result = _run_in_worker(folder, exercise, skipped, timeout, max_tasks, kernel)
    outcomes = {check.name: ["not attempted", ""] if check.name in skipped else
                result["checks"].get(check.name, ["failed", f"not reached: the run ended ({result['status']}) "
                                                             "before this check"])
                for check in exercise.checks}
    refusals = [error for error in result["cell_errors"] if error["ename"] == "TaskLimitError"]
    status = "refused" if refusals and result["status"] == "ok" else result["status"]
    if status == "ok" and result.get("leaked"):
        status = "leaked processes"
    detail = refusals[0]["evalue"] if refusals else result.get("detail", "")
    row.update(status=status, detail=detail, score=sum(outcome[0] == "passed" for outcome in outcomes.values()))
    for check in exercise.checks:
        row[f"{exercise.short}: {check.name}"] = outcomes[check.name][0]
    written = {}
    answers = {cell.get("id"): cell.source for cell in submitted.cells}
    for cell_id, title in exercise.written.items():
        column = f"{exercise.short}: {title} (written)"
        row[column] = "not attempted" if cell_id in unanswered else "answered"
        written[title] = None if cell_id in unanswered else answers[cell_id]
    row["seconds"] = round(time.monotonic() - began, 1)
    _write_feedback(folder / "feedback.md", row, exercise, outcomes, written, result["cell_errors"])
    return row


def _run_in_worker(folder, exercise, skipped, timeout, max_tasks, kernel):
    """Run graded.ipynb in a worker process with its own environment; kill everything it started at the end."""
    token = uuid.uuid4().hex
    for name in ("state", "arrays", "tmp"):
        (folder / name).mkdir()
    plan = {"notebook": str(folder / "graded.ipynb"), "executed": str(folder / "executed.ipynb"),
            "result": str(folder / "result.json"), "cwd": str(folder), "kernel": kernel, "cell_timeout": timeout,
            "checks": {check.cell_id: [c.name for c in exercise.checks if c.cell_id == check.cell_id]
                       for check in exercise.checks},
            "skip": sorted(skipped)}
    (folder / "plan.json").write_text(json.dumps(plan, indent=1))
    env = dict(os.environ, LABKIT_STATE_DIR=str(folder / "state"), LABKIT_ARRAY_DIR=str(folder / "arrays"),
               TMPDIR=str(folder / "tmp"), **{MAX_TASKS_VARIABLE: str(max_tasks), RUN_MARKER: token})
    with open(folder / "grader.log", "w") as log:
        worker = children.start("labkit.tools.grade_worker", str(folder / "plan.json"), env=env, stdout=log)
        try:
            worker.wait(timeout)
            timed_out = False
        except psutil.TimeoutExpired:
            timed_out = True
        left = stop_marked(token, [worker], grace_seconds=0 if timed_out else LEFTOVER_GRACE_SECONDS)
    shutil.rmtree(folder / "arrays", ignore_errors=True)  # data copies, rebuilt by any run
    result_path = Path(plan["result"])
    result = json.loads(result_path.read_text()) if result_path.exists() else {"checks": {}, "cell_errors": []}
    if timed_out:
        result.update(status="timeout", detail=f"still running after {timeout:g} s: stopped, with the "
                                               f"{len(left)} process(es) it had started")
    elif result.get("status") not in ("ok", "kernel died"):
        result.update(status="error", detail=f"the grader's worker exited with code {worker.returncode}; "
                                             f"see {folder / 'grader.log'}")
    result["leaked"] = [] if timed_out else left
    return result


def stop_marked(token, roots, grace_seconds):
    """Kill ``roots``, their descendants and every process whose environment carries ``token`` (after
    ``grace_seconds`` for them to exit on their own); return "name (pid)" of those that had to be killed.
    Raises RuntimeError if any survives."""
    def marked():
        found = []
        for process in psutil.process_iter(["pid", "name", "environ"]):
            if (process.info["environ"] or {}).get(RUN_MARKER) == token:
                found.append(process)
        for root in roots:
            try:
                found += [root, *root.children(recursive=True)] if root.is_running() else []
            except psutil.NoSuchProcess:
                pass
        return [process for process in {p.pid: p for p in found}.values() if processes.running(process.pid)]

    deadline = time.monotonic() + grace_seconds
    while marked() and time.monotonic() < deadline:
        time.sleep(0.2)
    left = marked()
    names = [f"{_name(process)} ({process.pid})" for process in left if process not in roots]
    for process in left:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(left, timeout=10)
    for root in roots:
        if hasattr(root, "wait"):
            try:
                root.wait(0)
            except (psutil.TimeoutExpired, OSError):
                pass
    survivors = marked()
    if survivors:
        raise RuntimeError(f"could not kill {[p.pid for p in survivors]} of a graded notebook; kill them by hand.")
    return names


def _name(process):
    try:
        return " ".join(process.cmdline()[:3])[:80] or process.name()
    except psutil.Error:
        return "?"


def _unique_folders(learners):
    seen, folders = {}, []
    for learner in learners:
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", learner) or "learner"
        seen[base] = seen.get(base, 0) + 1
        folders.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return folders


def write_grades(rows, exercise_list, path):
    columns = ["learner", "file", "exercise", "status", "score", "max_score"]
    used = {row["exercise"] for row in rows}
    columns += [column for exercise in exercise_list if exercise.short in used for column in exercise.columns]
    columns += ["seconds", "detail"]
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)


def _write_feedback(path, row, exercise, outcomes, written, cell_errors=()):
    marks = {"passed": "✅", "failed": "❌", "not attempted": "⬜"}
    title = f"Exercise {exercise.short[2:]}" if exercise else "Submission"
    lines = [f"# {row['learner']} · {title}", "",
             f"Status: **{row['status']}** · score {row['score']} of {row['max_score']} checks", ""]
    if row["detail"]:
        lines += [row["detail"], ""]
    if outcomes:
        lines += ["## Checks", ""]
        lines += [f"- {marks[state]} {name}" + (f": {message}" if message else "")
                  for name, (state, message) in outcomes.items()]
        lines.append("")
    if written:
        lines += ["## Written answers (read by your instructor)", ""]
        for title_, answer in written.items():
            lines += [f"### {title_}", "", answer.strip() if answer else "*not attempted*", ""]
    errors = [error for error in cell_errors if not error["check"] and STUB_MESSAGE not in (error["evalue"] or "")]
    if errors:
        lines += ["## Errors in your cells", ""]
        lines += [f"- cell {error['cell']}: {error['ename']}: {error['evalue'].splitlines()[0][:300] if error['evalue'] else ''}"
                  for error in errors]
        lines.append("")
    path.write_text("\n".join(lines))


# ----- the command (its options: labkit/tools/cli.py's add_grade) -----------------------------
def run(args):
    parameters = {}
    if args.parameters:
        try:
            parameters = yaml.safe_load(Path(args.parameters).read_text()) or {}
        except (OSError, yaml.YAMLError) as error:
            raise ValueError(f"cannot read --parameters {args.parameters}: {error}") from None
        if not isinstance(parameters, dict) or not all(isinstance(v, dict) for v in parameters.values()):
            raise ValueError(f"--parameters {args.parameters} must map each exercise (e.g. ex3) to "
                             "{parameter: value}.")
    rows = grade(args.submissions, args.out, args.reference or DEFAULT_REFERENCE, args.jobs, args.timeout,
                 args.max_tasks, parameters, args.kernel)
    return rows
