"""labkit grade: submissions are run, each in its own kernel and cluster, and graded by the kit's own
check cells; bad input gets a clear row or error; nothing a notebook starts outlives its grading."""
import csv
import hashlib
import time

import nbformat
import psutil
import pytest

from labkit.tools import cli, grade
from labkit.cluster import LocalCluster, MAX_TASKS_VARIABLE, TaskLimitError
from test_exercises import EXERCISES, SMOKE_PARAMETERS, SOLUTIONS, WRONG_ANSWERS, with_answer

pytestmark = pytest.mark.notebook

EX1, EX2, EX5 = "ex1_basic_cluster.ipynb", "ex2_gradient_compression.ipynb", "ex5_staleness_checks.ipynb"
EX1_CHECKS = ["TF_CONFIGs", "servers serving", "cluster trains", "processes stopped"]
EX2_CHECKS = ["compressor shrinks the payload", "training with compression"]
EX5_CHECKS = ["version counter", "staleness filter", "stale updates dropped", "histogram read"]


def variant(directory, name, replacements=(), extra_cells=()):
    """The notebook ``directory/name`` with, for each (text, new source), the cell containing text replaced."""
    notebook = nbformat.read(directory / name, as_version=4)
    for text, source in replacements:
        cell = next(cell for cell in notebook.cells if text in cell.source)
        cell.source = source(cell.source) if callable(source) else source
    notebook.cells += [nbformat.v4.new_code_cell(source) for source in extra_cells]
    return notebook


def wrong(name, check):
    """The solution with the typical wrong answer that ``check`` must reject."""
    answer = next(answer for answer in WRONG_ANSWERS[name] if answer.check == check)
    return variant(SOLUTIONS, name, [(answer.cell, lambda source: with_answer(source, answer.answer))])


def submit(folder, notebooks):
    """Write each learner's notebook (a file, or a folder with one file when the name ends in /)."""
    for learner, notebook in notebooks.items():
        path = folder / (learner + "work.ipynb" if learner.endswith("/") else learner + ".ipynb")
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(notebook, str):
            path.write_text(notebook)
        else:
            nbformat.write(notebook, path)
    return {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in folder.rglob("*") if path.is_file()}


def parameters_file(tmp_path):
    """The smoke parameters, but ex5 on one worker: the ex5 runs graded here never reach a check that needs
    a second worker's stale updates (each stops at a wrong answer or a broken cell first)."""
    parameters = {name.split("_")[0]: dict(values) for name, values in SMOKE_PARAMETERS.items()}
    parameters["ex5"]["num_workers"] = 1
    path = tmp_path / "parameters.yaml"
    path.write_text("".join(f"{short}: {values!r}\n" for short, values in parameters.items()))
    return path


def read_grades(out):
    with open(out / "grades.csv") as file:
        return {row["learner"]: row for row in csv.DictReader(file)}


def checks_of(row, exercise):
    return {column.split(": ", 1)[1]: value for column, value in row.items()
            if column.startswith(f"{exercise}: ") and not column.endswith("(written)")}


def processes_of(out):
    """Processes still running that a graded notebook under ``out`` started (they carry its state dir)."""
    found = []
    for process in psutil.process_iter(["environ"]):
        if str(out) in (process.info["environ"] or {}).get("LABKIT_STATE_DIR", ""):
            found.append(process.pid)
    return found


# ----- without running a kernel ---------------------------------------------------------------
def test_bad_input_gets_a_clear_error_or_row_and_the_submissions_are_untouched(tmp_path):
    with pytest.raises(SystemExit, match="labkit grade: no folder at"):
        cli.main(["grade", str(tmp_path / "missing"), "--out", str(tmp_path / "out")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="is empty"):
        cli.main(["grade", str(tmp_path / "empty"), "--out", str(tmp_path / "out")])
    submissions = tmp_path / "submissions"
    lesson = nbformat.read(SOLUTIONS.parent / "notebooks" / "00_welcome.ipynb", as_version=4)
    (submissions / "nothing").mkdir(parents=True)
    (submissions / "nothing" / "notes.txt").write_text("no notebook here")
    before = submit(submissions, {"corrupt": '{"cells": [', "json": '{"a": 1}', "lesson": lesson})
    cli.main(["grade", str(submissions), "--out", str(tmp_path / "out")])
    rows = read_grades(tmp_path / "out")
    assert {learner: row["status"] for learner, row in rows.items()} == {
        "corrupt": "error", "json": "error", "lesson": "refused", "nothing": "error"}
    assert "not a readable Jupyter notebook" in rows["corrupt"]["detail"]
    assert "not one of the exercises" in rows["lesson"]["detail"]
    assert "holds no .ipynb notebook" in rows["nothing"]["detail"]
    assert "not a readable Jupyter notebook" in (tmp_path / "out" / "corrupt" / "feedback.md").read_text()
    after = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in submissions.rglob("*") if path.is_file()}
    assert after == before, "grading changed or removed a submitted file"
    with pytest.raises(SystemExit, match="is not empty"):
        cli.main(["grade", str(submissions), "--out", str(tmp_path / "out")])


def test_the_grader_runs_its_own_check_cells_and_parameters_and_sees_what_is_blank():
    exercises = grade.load_exercises(EXERCISES)
    ex5 = next(exercise for exercise in exercises if exercise.short == "ex5")
    assert [check.name for check in ex5.checks] == EX5_CHECKS
    forged = variant(SOLUTIONS, EX5, [("max_tau = 0", "max_tau = 99"),
                                      ("checks.filter_rule(", 'checklist.passed("staleness filter")')])
    forged.cells = [cell for cell in forged.cells if "checks.dropped_share_read(" not in cell.source]
    graded = grade.graded_notebook(forged, ex5, {"num_steps": 100})
    sources = [cell.source for cell in graded.cells]
    assert "max_tau = 0" in sources[sources.index("# set by labkit grade --parameters\nnum_steps = 100") - 1]
    assert any("checks.filter_rule(StalenessFilter)" in source for source in sources)
    assert any("checks.dropped_share_read(" in source for source in sources), "a deleted check cell is put back"
    assert not any("checklist." in source for source in sources), "the grader never reads the learner's checklist"
    blank = nbformat.read(EXERCISES / EX5, as_version=4)
    assert grade.not_attempted(blank, ex5) == (set(EX5_CHECKS), set())
    assert grade.not_attempted(nbformat.read(SOLUTIONS / EX5, as_version=4), ex5) == (set(), set())
    ex4 = next(exercise for exercise in exercises if exercise.short == "ex4")
    assert list(ex4.written.values()) == ["4.5 · Explain the plot"]
    assert grade.not_attempted(nbformat.read(EXERCISES / "ex4_performance_analysis.ipynb", as_version=4), ex4)[1] \
        == set(ex4.written)


def test_a_cluster_over_the_task_limit_is_refused_before_any_process_starts(monkeypatch):
    monkeypatch.setenv(MAX_TASKS_VARIABLE, "4")
    with pytest.raises(TaskLimitError, match="16 workers and 1 parameter servers make 17 task processes, but at most 4"):
        LocalCluster(num_workers=16, num_ps=1, name="too-big")


# ----- running the notebooks ---------------------------------------------------------------------
def test_grading_a_class(tmp_path):
    """One `labkit grade --jobs 2` over solutions, typical wrong answers, a blank exercise and broken ones."""
    submissions = tmp_path / "submissions"
    before = submit(submissions, {
        "ada/": nbformat.read(SOLUTIONS / EX2, as_version=4),
        "dee": wrong(EX5, "checks.used_own_filter("),
        "eve": nbformat.read(EXERCISES / EX1, as_version=4),  # blank; its cluster is all the learner's code
        "fay": variant(SOLUTIONS, EX5, [  # a syntax error, and the check it breaks "passed" by hand
            ("class StalenessFilter", lambda source: source.replace("return tf.cast(", "return tf.cast((", 1)),
            ("checks.filter_rule(", 'checklist.passed("staleness filter")')],
            extra_cells=['checklist.passed("staleness filter")']),
        "gus": variant(EXERCISES, EX5, [("cluster = labkit.LocalCluster(", lambda source: source.replace(
            "num_workers=num_workers", "num_workers=16"))]),
    })
    out = tmp_path / "graded"
    began = time.monotonic()
    cli.main(["grade", str(submissions), "--out", str(out), "--jobs", "2", "--timeout", "400",
              "--parameters", str(parameters_file(tmp_path))])
    print(f"graded 5 notebooks with --jobs 2 in {time.monotonic() - began:.0f} s")
    rows = read_grades(out)
    assert {learner: row["status"] for learner, row in rows.items()} == {**dict.fromkeys(rows, "ok"), "gus": "refused"}
    assert len(rows) == 5 and "at most 4 are allowed" in rows["gus"]["detail"]
    assert checks_of(rows["ada"], "ex2") == dict.fromkeys(EX2_CHECKS, "passed")
    assert rows["ada"]["score"] == rows["ada"]["max_score"] == "2"
    assert checks_of(rows["dee"], "ex5") == {**dict.fromkeys(EX5_CHECKS, "passed"), "stale updates dropped": "failed"}
    assert rows["dee"]["score"] == "3" and "not your filter" in (out / "dee" / "feedback.md").read_text()
    assert checks_of(rows["eve"], "ex1") == dict.fromkeys(EX1_CHECKS, "not attempted") and rows["eve"]["score"] == "0"
    assert checks_of(rows["fay"], "ex5")["staleness filter"] == "failed", "a hand-called passed() counted"
    assert checks_of(rows["fay"], "ex5")["version counter"] == "passed"
    assert "SyntaxError" in (out / "fay" / "feedback.md").read_text()
    assert processes_of(out) == []
    after = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in submissions.rglob("*") if path.is_file()}
    assert after == before


def test_a_hung_notebook_is_stopped_with_everything_it_started(tmp_path):
    submissions = tmp_path / "submissions"
    hang = ("import subprocess, time\n"
            "cluster = labkit.LocalCluster(num_workers=1, num_ps=1, name='exercise-5')\n"
            "subprocess.Popen(['sleep', '1000'])\n"
            "time.sleep(10 ** 6)")
    submit(submissions, {"hangs": variant(EXERCISES, EX5, [("cluster = labkit.LocalCluster(", hang)])})
    out = tmp_path / "graded"
    cli.main(["grade", str(submissions), "--out", str(out), "--timeout", "30"])
    row = read_grades(out)["hangs"]
    print(row["detail"])
    assert row["status"] == "timeout" and "still running after 30 s" in row["detail"]
    assert processes_of(out) == []
