"""``labkit grade SUBMISSIONS --out DIR``: run learners' exercise notebooks and grade them.

SUBMISSIONS is a folder, or a Canvas or Moodle bulk-download .zip (unpacked into ``DIR/_unpacked``);
``labkit.tools.submissions`` says which learner each file belongs to. Per learner and exercise the
latest notebook is graded, in ``DIR/<learner>/<exercise>/``; the submissions themselves are only read.
``DIR/grades.csv`` has one row per learner: per exercise of ``--reference`` its score (one point per passed
check) and per check ``passed``, ``failed``, ``not attempted`` or ``not submitted``; each written answer
``answered`` or ``not attempted`` (for the instructor to read, no points); the total, out of every check of
every reference exercise (``gradebook.points_possible``: feedback.md and the exports count the same); and
notes (a timeout, a cell stopped at ``--cell-timeout``, a leftover process, a late or superseded file, a file
that is not a notebook). ``DIR/notebooks.csv`` has one row per graded notebook (status, score, seconds, why
it ended). ``DIR/<learner>/feedback.md`` gives the total, each exercise's score and each failing check's
message. ``--export canvas`` writes ``DIR/canvas.csv`` for Canvas's gradebook import, and
``DIR/canvas-feedback.zip`` for its "Re-Upload Submissions": each graded notebook back under the name Canvas
gave it, its learner's feedback in a first cell (Canvas attaches each file to that learner's submission).

How the grader decides, and what it trusts:

- The exercise is recognised by its cells' ids: a notebook counts as an exercise when it keeps at least
  half of that exercise's cell ids (``MATCH_SHARE``). JupyterLab keeps a cell's id through edits, saves,
  moves and renames; cells copied or retyped into a new notebook get new ids. A notebook that keeps too
  few is ``not recognised`` (its row says how many it kept), and the exercise its file name names (``ex3``)
  says ``not recognised`` in grades.csv and feedback.md instead of ``not submitted``. Its *check cells* (the cells calling ``checklist.passed``) and its parameters
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
``labkit.runtime.children`` in its own session), with its own kernel (isolated from the network where
the system allows it: ``labkit.runtime.isolation``), and a clean environment: none of
the grader's variables but PATH, LANG, LANGUAGE, TZ, TERM, LC_* and LABKIT_*; its own HOME (with a copy
of Keras's cached MNIST), temporary folder, ``LABKIT_STATE_DIR`` and ``LABKIT_ARRAY_DIR``; and
``LABKIT_OFFLINE=1``. Its clusters pick free ports as always. Each cell has ``--cell-timeout``
seconds (then it is interrupted and the next cell runs), the notebook ``--timeout`` seconds. All of
its processes carry a per-run marker in their environment, and the worker adopts (on Linux) any process
whose parent exits. After the run (or at its ``--timeout``, when the worker is killed) every process
with that marker, and every one the worker adopted, is killed, kernel and TensorFlow tasks included;
a run that left processes behind says so in its row, and one that cannot be killed is reported,
never stopping the others. ``LABKIT_MAX_TASKS`` (``--max-tasks``) caps the task processes of any
cluster a notebook starts (a LocalCluster, an all-reduce run, servers started by hand: ``children.check_task_limit``):
a notebook asking for 16 workers gets a ``TaskLimitError`` and the status ``refused``; a server started by hand
in too big a cluster exits saying why.

Statuses: ``ok`` (it ran; checks may still fail), ``timeout``, ``kernel died`` (the checks it had not
reached fail), ``not recognised`` (too few of an exercise's cell ids), ``refused`` (over the task
limit), ``leaked processes`` (it ran, but
left processes that the grader killed), ``error`` (the file is not a readable notebook).
"""
import copy
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
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

from labkit.data import KERAS_CACHE
from labkit.runtime import children, processes
from labkit.tools import exercises, gradebook, submissions

DEFAULT_REFERENCE = Path(__file__).resolve().parents[2] / "exercises"
RUN_MARKER = "LABKIT_GRADE_RUN"  # in the environment of every process a graded notebook starts
SUMMARY_SOURCE = "checklist.summary()"
STUB_MESSAGE = "replace this line with your solution"  # a stub's NotImplementedError: not worth a feedback line
KEPT_VARIABLES = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM")  # of the grader's environment, what a graded run gets
UNPACKED = "_unpacked"  # the folder in --out into which a .zip is unpacked
LEFTOVER_GRACE_SECONDS = 10.0  # tasks exit on their own when their kernel has gone; wait that long first
# A process's start time as two processes read it (psutil: its ticks since boot plus the boot time, which Linux gives
# in whole seconds and recomputes from the wall clock) may differ by a second; a pid is not reused within one.
SAME_START_SECONDS = 1.01


class SubmissionError(ValueError):
    """A submission that cannot be graded; ``status`` says which kind ("error" or "not recognised"), ``meant``
    the exercise its file name names (its short name, "ex3"), if any."""

    def __init__(self, message, status="error", meant=""):
        super().__init__(message)
        self.status = status
        self.meant = meant


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
    def title(self):
        """The notebook's heading ("Exercise 1 · A parameter-server cluster by hand"), else its name."""
        return next((cell.source.splitlines()[0][2:].strip() for cell in self.notebook.cells
                     if cell.cell_type == "markdown" and cell.source.startswith("# ")), self.name)

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
        for name in exercises.PASSED_CALL.findall(cell.source):
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
def read_notebook(path):
    """The notebook at ``path``, or SubmissionError saying why it cannot be read."""
    try:
        notebook = nbformat.read(path, as_version=4)
    except Exception as error:  # nbformat raises JSON, validation and encoding errors of many kinds
        raise SubmissionError(f"{path.name} is not a readable Jupyter notebook ({type(error).__name__}: "
                              f"{str(error).splitlines()[0][:200]}). Ask the learner for the .ipynb file "
                              "saved from Jupyter.") from None
    if not isinstance(notebook.get("cells"), list):
        raise SubmissionError(f"{path.name} is JSON but not a notebook (no list of cells).")
    return notebook


MATCH_SHARE = 0.5  # of an exercise's cell ids that a submitted notebook must keep to count as that exercise


def match_exercise(notebook, exercises_list, name):
    """The exercise whose cell ids the submitted notebook shares most (at least ``MATCH_SHARE`` of them);
    else a SubmissionError "not recognised" that says how many it kept and why ids matter."""
    ids = {cell.get("id") for cell in notebook.cells}
    shares = [(len(ids & {cell.id for cell in exercise.notebook.cells}), exercise) for exercise in exercises_list]
    kept, exercise = max(shares, key=lambda pair: pair[0] / len(pair[1].notebook.cells))
    if kept / len(exercise.notebook.cells) >= MATCH_SHARE:
        return exercise
    meant = next((other.short for other in exercises_list if re.search(rf"(?<![a-z0-9]){other.short}(?![0-9])",
                                                                        name.lower())), "")
    found = ("no shared cell ids with any exercise" if not kept else
             f"it keeps {kept} of the {len(exercise.notebook.cells)} cell ids of {exercise.name}, and at least half are "
             "needed")
    raise SubmissionError(f"{name}: not recognised: {found} ({', '.join(e.name for e in exercises_list)}). The grader "
                          "knows an exercise by its cells' ids, which JupyterLab keeps through edits and saves; cells "
                          "copied or retyped into a new notebook get new ids. Hand in the exercise notebook you "
                          "worked in (work/exercises/).", status=gradebook.NOT_RECOGNISED, meant=meant)


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
        kept = [line for line in cell.source.splitlines() if not exercises.PASSED_CALL.search(line)]
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
@dataclass
class Settings:
    """How each notebook is run: the same for the whole class."""

    timeout: float = 900.0  # seconds per notebook
    cell_timeout: float = 600.0  # seconds per cell
    max_tasks: int = 4
    parameters: dict = field(default_factory=dict)
    kernel: str = "pslab"

    def __post_init__(self):
        if self.timeout <= 0 or self.cell_timeout <= 0 or self.max_tasks < 2:
            raise ValueError("--timeout and --cell-timeout must be > 0 and --max-tasks >= 2 (a worker and a "
                             "parameter server).")


def grade(source, out_dir, reference=DEFAULT_REFERENCE, jobs=1, settings=None, roster=None,
          export=None, assignment="PS Lab exercises"):
    """Grade every learner's submissions in ``source`` (a folder or a .zip); write grades.csv (one row per
    learner), notebooks.csv (one per notebook), each learner's feedback.md and, with ``export="canvas"``,
    canvas.csv. Return grades.csv's rows and notebooks.csv's (these with each check's message in ``messages``)."""
    settings = settings or Settings()
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ValueError(f"{out_dir} is not empty (an earlier grading?): choose a new --out folder.")
    if jobs < 1:
        raise ValueError(f"--jobs {jobs}: it must be at least 1.")
    exercise_list = load_exercises(reference)
    kernel_path = kernel_data_path(settings.kernel)
    folder = submissions.unpack(source, out_dir / UNPACKED)
    learners = submissions.find_learners(folder, submissions.read_roster(roster) if roster else None)
    chosen, notes = choose_notebooks(learners, exercise_list)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows, sections, lock = [], {}, threading.Lock()

    def one(item):
        submission, notebook, exercise = item
        name = exercise.short if notebook else re.sub(r"[^A-Za-z0-9_.-]", "_", Path(submission.original).stem)
        row, section = grade_submission(submission, notebook, exercise, _learner_folder(out_dir, submission.learner)
                                        / name, settings, kernel_path)
        with lock:
            rows.append(row)
            sections[id(row)] = section
            gradebook.write_notebooks(rows, exercise_list, out_dir / "notebooks.csv")
        print(f"{row['learner']}: {row['exercise'] or row['file']} {row['status']}, score {row['score']}/"
              f"{row['max_score']} ({row['seconds']} s)", flush=True)
        return row

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, chosen))
    rows.sort(key=lambda row: (row["learner"], row["exercise"], row["file"]))
    gradebook.write_notebooks(rows, exercise_list, out_dir / "notebooks.csv")
    for row in rows:  # a notebook that did not end "ok", or whose run has something to say
        if row["status"] != "ok":
            notes.setdefault(row["learner"], []).append(f"{row['exercise'] or row['file']}: {row['status']}"
                                                        + (f" ({row['detail']})" if row["detail"] else ""))
        elif row["detail"]:
            notes.setdefault(row["learner"], []).append(f"{row['exercise']}: {row['detail']}")
    table, columns = gradebook.learner_rows(learners, rows, notes, exercise_list)
    gradebook.write_grades(table, columns, out_dir / "grades.csv")
    for row in table:
        gradebook.write_feedback(_learner_folder(out_dir, row["learner"]) / "feedback.md", learners[row["learner"]],
                                 row, exercise_list,
                                 [sections[id(mine)] for mine in rows if mine["learner"] == row["learner"]])
    if export == "canvas":
        gradebook.write_canvas(table, learners, exercise_list, assignment, out_dir / "canvas.csv")
        feedback_of = {row["learner"]: (_learner_folder(out_dir, row["learner"]) / "feedback.md").read_text()
                       for row in table}
        gradebook.write_canvas_feedback([(submission.path.name, notebook, feedback_of[submission.learner])
                                         for submission, notebook, _ in chosen if notebook is not None
                                         and submissions.CANVAS_NAME.match(submission.path.name)],
                                        out_dir / "canvas-feedback.zip")
    print(f"graded {len(rows)} notebook(s) of {len(table)} learner(s): {out_dir / 'grades.csv'} (one row per "
          f"learner), {out_dir / 'notebooks.csv'}, feedback in {out_dir}/<learner>/feedback.md")
    return table, rows


def kernel_data_path(kernel):
    """The Jupyter data folder holding ``kernel``'s spec: the graded runs' JUPYTER_PATH (their HOME is not yours)."""
    try:
        spec = KernelSpecManager().get_kernel_spec(kernel)
    except NoSuchKernel:
        raise ValueError(f"no Jupyter kernel named {kernel!r}: `make install` installs pslab; "
                         "`jupyter kernelspec list` lists the others, for --kernel.") from None
    return str(Path(spec.resource_dir).parents[1])


def choose_notebooks(learners, exercise_list):
    """[(submission, notebook, exercise)] to grade: per learner and exercise the latest notebook; for an
    unreadable one, (submission, None, its SubmissionError), to be graded as that error. Also {learner: notes}: what was handed in but not graded."""
    chosen, notes = [], {}
    for learner in learners.values():
        mine = notes.setdefault(learner.id, [])
        if learner.roster == {} and any(other.roster for other in learners.values()):
            mine.append("not on the roster")
        if not learner.submissions:
            mine.append("no notebook handed in")
        by_exercise = {}
        for submission in learner.submissions:
            try:
                notebook = read_notebook(submission.path)
                exercise = match_exercise(notebook, exercise_list, submission.original)
            except SubmissionError as error:
                chosen.append((submission, None, error))  # graded as its error, with the reason
                continue
            by_exercise.setdefault(exercise.short, []).append((submission, notebook, exercise))
        for short, handed_in in sorted(by_exercise.items()):
            handed_in.sort(key=lambda item: item[0].order)
            chosen.append(handed_in[-1])
            if handed_in[-1][0].late:
                mine.append(f"{short}: handed in late")
            if len(handed_in) > 1:
                mine.append(f"{short}: graded the latest, {handed_in[-1][0].original}; not graded: "
                            + ", ".join(item[0].original for item in handed_in[:-1]))
        if learner.other_files:
            mine.append("not notebooks, not graded: " + ", ".join(learner.other_files))
    return chosen, notes


def grade_submission(submission, submitted, exercise, folder, settings, kernel_path):
    """Grade one notebook in ``folder`` (created): its row for notebooks.csv and its feedback section.
    ``exercise`` may be the SubmissionError that says why the notebook cannot be graded: its row says so."""
    began = time.monotonic()
    folder.mkdir(parents=True)
    row = {"learner": submission.learner, "file": submission.original, "exercise": "", "status": "",
           "score": 0, "max_score": 0, "seconds": 0.0, "detail": "", "messages": {}, "meant": ""}
    if isinstance(exercise, SubmissionError):
        row.update(status=exercise.status, detail=str(exercise), meant=exercise.meant)
        return row, _feedback_section(row, None, {}, {})
    shutil.copy2(submission.path, folder / "submitted.ipynb")
    row.update(exercise=exercise.short, max_score=len(exercise.checks))
    skipped, unanswered = not_attempted(submitted, exercise)
    own = settings.parameters.get(exercise.name, settings.parameters.get(exercise.short, {}))
    nbformat.write(graded_notebook(submitted, exercise, own), folder / "graded.ipynb")
    if skipped == {check.name for check in exercise.checks}:  # a blank exercise: no kernel, no cluster
        result = {"status": "ok", "checks": {}, "cell_errors": [], "detail": "no check attempted: not run",
                  "leftovers": ""}
    else:
        result = _run_in_worker(folder, exercise, skipped, settings, kernel_path)
    outcomes = {check.name: ["not attempted", ""] if check.name in skipped else
                result["checks"].get(check.name, ["failed", f"not reached: the run ended ({result['status']}) "
                                                             "before this check"])
                for check in exercise.checks}
    refusals = [error for error in result["cell_errors"] if error["ename"] == "TaskLimitError"]
    status = "refused" if refusals and result["status"] == "ok" else result["status"]
    if status == "ok" and result["leftovers"]:
        status = "leaked processes"
    stopped = [str(error["cell"]) for error in result["cell_errors"] if error.get("stopped")]
    detail = "; ".join(filter(None, [
        refusals[0]["evalue"] if refusals else result.get("detail", ""),
        f"stopped at --cell-timeout ({settings.cell_timeout:g} s): cell {', '.join(stopped)}" if stopped else "",
        result["leftovers"]]))
    row.update(status=status, detail=detail, score=sum(outcome[0] == "passed" for outcome in outcomes.values()))
    for check in exercise.checks:
        row[f"{exercise.short}: {check.name}"], row["messages"][check.name] = outcomes[check.name]
    written = {}
    answers = {cell.get("id"): cell.source for cell in submitted.cells}
    for cell_id, title in exercise.written.items():
        column = f"{exercise.short}: {title} (written)"
        row[column] = "not attempted" if cell_id in unanswered else "answered"
        written[title] = None if cell_id in unanswered else answers[cell_id]
    row["seconds"] = round(time.monotonic() - began, 1)
    return row, _feedback_section(row, exercise, outcomes, written, result["cell_errors"])


def submission_environment(folder, token, settings, kernel_path):
    """A graded notebook's whole environment: none of the grader's variables but ``KEPT_VARIABLES`` (and
    LC_*, LABKIT_*), its own HOME, temporary folder, state and array folders, and no download attempts."""
    home = folder / "home"
    if KERAS_CACHE.exists():  # a copy: the learner's code may write to it, the instructor's stays as it is
        (home / KERAS_CACHE.parent.relative_to(Path.home())).mkdir(parents=True)
        shutil.copy2(KERAS_CACHE, home / KERAS_CACHE.relative_to(Path.home()))
    kept = {name: value for name, value in os.environ.items()
            if name in KEPT_VARIABLES or name.startswith(("LC_", "LABKIT_"))}
    for name in ("state", "arrays", "tmp"):
        (folder / name).mkdir()
    home.mkdir(exist_ok=True)
    return dict(kept, HOME=str(home), TMPDIR=str(folder / "tmp"), JUPYTER_PATH=kernel_path, LABKIT_OFFLINE="1",
                LABKIT_STATE_DIR=str(folder / "state"), LABKIT_ARRAY_DIR=str(folder / "arrays"),
                **{children.MAX_TASKS_VARIABLE: str(settings.max_tasks), RUN_MARKER: token})


def _run_in_worker(folder, exercise, skipped, settings, kernel_path):
    """Run graded.ipynb in a worker process with its own environment; kill everything it started at the end."""
    token = uuid.uuid4().hex
    plan = {"notebook": str(folder / "graded.ipynb"), "executed": str(folder / "executed.ipynb"),
            "result": str(folder / "result.json"), "cwd": str(folder), "kernel": settings.kernel,
            "cell_timeout": settings.cell_timeout,
            "checks": {check.cell_id: [c.name for c in exercise.checks if c.cell_id == check.cell_id]
                       for check in exercise.checks},
            "skip": sorted(skipped)}
    (folder / "plan.json").write_text(json.dumps(plan, indent=1))
    env = submission_environment(folder, token, settings, kernel_path)
    with open(folder / "grader.log", "w") as log:
        worker = children.start("labkit.tools.grade_worker", str(folder / "plan.json"), env=env, stdout=log)
        try:
            worker.wait(settings.timeout)
            timed_out = False
        except psutil.TimeoutExpired:
            timed_out = True
        result_path = Path(plan["result"])
        result = json.loads(result_path.read_text()) if result_path.exists() else {"checks": {}, "cell_errors": []}
        adopted = _still_running(result.get("descendants", []))
        killed, survivors = stop_marked(token, worker, adopted, grace_seconds=0 if timed_out else LEFTOVER_GRACE_SECONDS)
    for name in ("arrays", "home"):  # data copies and caches, rebuilt by any run
        shutil.rmtree(folder / name, ignore_errors=True)
    if timed_out:
        result.update(status="timeout", detail=f"still running after {settings.timeout:g} s: stopped, with the "
                                               f"{len(killed)} process(es) it had started")
    elif result.get("status") not in ("ok", "kernel died"):
        result.update(status="error", detail=f"the grader's worker exited with code {worker.returncode}; "
                                             f"see {folder / 'grader.log'}")
    leftovers = [] if timed_out else [f"left running, killed: {', '.join(killed)}"] if killed else []
    if survivors:
        leftovers.append(f"could not kill {', '.join(survivors)}: kill them by hand")
    result["leftovers"] = "; ".join(leftovers)
    return result


def _still_running(descendants):
    """The processes the worker had adopted (pid, start time), those still running: they may carry no marker."""
    found = []
    for pid, started in descendants:
        try:
            process = psutil.Process(pid)
            if abs(process.create_time() - started) <= SAME_START_SECONDS:
                found.append(process)
        except psutil.NoSuchProcess:
            pass
    return found


def stop_marked(token, worker, adopted=(), grace_seconds=LEFTOVER_GRACE_SECONDS):
    """Stop ``worker``, its descendants, the ``adopted`` processes and every process whose environment carries
    ``token``, after ``grace_seconds`` for the marked ones to exit on their own (``processes.stop_others``:
    SIGTERM, then SIGKILL). Return "name (pid)" of those that had to be stopped and of those still running even
    then (never raised: the rest of the class goes on)."""
    def marked():
        found = [*adopted, *processes.carrying(RUN_MARKER, lambda value: value == token)]
        try:
            found += [worker, *worker.children(recursive=True)] if worker.is_running() else []
        except psutil.NoSuchProcess:
            pass
        return [process for process in {p.pid: p for p in found}.values() if processes.running(process.pid)]

    # an adopted process has lost its parent, so it never exits on its own: no grace for it
    processes.wait_until_gone([process.pid for process in marked() if process not in adopted], grace_seconds)
    left = marked()
    killed = [f"{_name(process)} ({process.pid})" for process in left if process.pid != worker.pid]
    processes.stop_others(left)
    worker.poll()  # reaps it
    survivors = [f"{_name(process)} ({process.pid})" for process in marked()]
    return killed, survivors


def _name(process):
    try:
        return " ".join(process.cmdline()[:3])[:80] or process.name()
    except psutil.Error:
        return "?"


def _learner_folder(out_dir, learner):
    return out_dir / (re.sub(r"[^A-Za-z0-9_.@-]", "_", learner).lstrip(".") or "learner")


def _feedback_section(row, exercise, outcomes, written, cell_errors=()):
    """The lines of a learner's feedback.md about one notebook."""
    marks = {"passed": "✅", "failed": "❌", "not attempted": "⬜"}
    title = f"Exercise {exercise.short[2:]}" if exercise else f"{row['file']}"
    lines = [f"## {title}", "", f"Status: **{row['status']}** · score {row['score']} of {row['max_score']} checks", ""]
    if row["detail"]:
        lines += [row["detail"], ""]
    if outcomes:
        lines += [f"- {marks[state]} {name}" + (f": {message}" if message else "")
                  for name, (state, message) in outcomes.items()]
        lines.append("")
    if written:
        lines += ["### Written answers (read by your instructor)", ""]
        for title_, answer in written.items():
            lines += [f"#### {title_}", "", answer.strip() if answer else "*not attempted*", ""]
    errors = [error for error in cell_errors if not error["check"] and STUB_MESSAGE not in (error["evalue"] or "")]
    if errors:
        lines += ["### Errors in your cells", ""]
        lines += [f"- cell {error['cell']}: {error['ename']}: {error['evalue'].splitlines()[0][:300] if error['evalue'] else ''}"
                  for error in errors]
        lines.append("")
    return lines


# ----- the command (its options: labkit/tools/cli.py's add_grade) -----------------------------
def settings_from(args):
    """The Settings that the command's options ask for."""
    parameters = {}
    if args.parameters:
        try:
            parameters = yaml.safe_load(Path(args.parameters).read_text()) or {}
        except (OSError, yaml.YAMLError) as error:
            raise ValueError(f"cannot read --parameters {args.parameters}: {error}") from None
        if not isinstance(parameters, dict) or not all(isinstance(v, dict) for v in parameters.values()):
            raise ValueError(f"--parameters {args.parameters} must map each exercise (e.g. ex3) to "
                             "{parameter: value}.")
    return Settings(args.timeout, args.cell_timeout, args.max_tasks, parameters, args.kernel)


def run(args):
    if not (args.submissions and args.out):
        raise ValueError("give the SUBMISSIONS to grade and --out DIR (or --gradescope-autograder OUT.zip, "
                         "to build Gradescope's autograder).")
    return grade(args.submissions, args.out, args.reference or DEFAULT_REFERENCE, args.jobs, settings_from(args),
                 args.roster, args.export, args.assignment)
