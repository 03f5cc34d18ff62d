"""labkit grade: submissions are run, each in its own kernel and cluster, and graded by the kit's own
check cells; bad input gets a clear row or error; nothing a notebook starts outlives its grading."""
import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile

import jsonschema
import nbformat
import psutil
import pytest

from labkit.runtime import children, isolation, processes
from labkit.tools import cli, grade, gradescope
from labkit.cluster import LocalCluster
from support.exercises import EXERCISES, SMOKE_PARAMETERS, SOLUTIONS, WRONG_ANSWERS, with_answer

pytestmark = pytest.mark.notebook

EX1, EX2, EX5 = "ex1_basic_cluster.ipynb", "ex2_gradient_compression.ipynb", "ex5_staleness_checks.ipynb"
EX4 = "ex4_performance_analysis.ipynb"
EX1_CHECKS = ["TF_CONFIGs", "servers serving", "cluster trains", "processes stopped"]
EX2_CHECKS = ["compressor shrinks the payload", "training with compression"]
EX4_CHECKS = ["one time per worker count", "timed on the cluster", "differences beyond the spread",
              "time vs workers plot"]
EX5_CHECKS = ["version counter", "staleness filter", "stale updates dropped", "histogram read"]
EX3_CHECKS = ["checkpoints saved", "resumed from the checkpoint", "trained to the end"]
EX6_CHECKS = ["a permutation", "your spreading on the cluster", "the busiest server cooled"]
ALL_CHECKS = len(EX1_CHECKS + EX2_CHECKS + EX3_CHECKS + EX4_CHECKS + EX5_CHECKS + EX6_CHECKS)  # the total's maximum
EX_TITLES = {"ex1": "Exercise 1 · A parameter-server cluster by hand", "ex2": "Exercise 2 · Gradient compression",
             "ex3": "Exercise 3 · Checkpoints and recovery",
             "ex4": "Exercise 4 · Training time against the number of workers",
             "ex5": "Exercise 5 · Asynchronous updates with staleness checks",
             "ex6": "Exercise 6 · Hot keys on the parameter servers"}
# Gradescope's results.json as its autograder specification describes it (the fields the kit writes).
GRADESCOPE_RESULTS = {
    "type": "object", "required": ["score", "tests"],
    "properties": {
        "score": {"type": "number"}, "execution_time": {"type": "number"}, "output": {"type": "string"},
        "output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]},
        "tests": {"type": "array", "items": {
            "type": "object", "required": ["name", "score", "max_score", "output", "visibility"],
            "properties": {"name": {"type": "string"}, "score": {"type": "number"}, "max_score": {"type": "number"},
                           "status": {"enum": ["passed", "failed"]}, "output": {"type": "string"},
                           "visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]}}}}}}
# seconds: the hung notebook's kernel and 2-task cluster were up after 8 s at load 5 (make test's), 13 s at load 1
# on a slower day, 31 s at load 10, 50 s at load 12; each try lasts its whole timeout, so the first is short
HANG_TIMEOUTS = (15, 45, 90)


def variant(directory, name, replacements=(), extra_cells=()):
    """The notebook ``directory/name`` with, for each (text, new source), the cell containing text replaced."""
    notebook = nbformat.read(directory / name, as_version=4)
    for text, source in replacements:
        cell = next(cell for cell in notebook.cells if text in cell.source)
        cell.source = source(cell.source) if callable(source) else source
    notebook.cells += [nbformat.v4.new_code_cell(source) for source in extra_cells]
    return notebook


def wrong(name, hint):
    """The solution with the typical wrong answer whose rejection says ``hint``."""
    answer = next(answer for answer in WRONG_ANSWERS[name] if answer.hint == hint)
    return variant(SOLUTIONS, name, [(answer.cell, lambda source: with_answer(source, answer.answer))])


def solution_cell(name, text):
    """The source of the solution's cell containing ``text``."""
    return next(cell.source for cell in nbformat.read(SOLUTIONS / name, as_version=4).cells if text in cell.source)


def submit(folder, notebooks):
    """Write each notebook at its name + .ipynb (``ada/ex1``: a learner's folder)."""
    for name, notebook in notebooks.items():
        path = folder / (name + ".ipynb")
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(notebook, str):
            path.write_text(notebook)
        else:
            nbformat.write(notebook, path)
    return {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in folder.rglob("*") if path.is_file()}


def rebuilt(path):
    """The notebook at ``path`` as a learner who copied every cell into a new notebook hands it in: new cell ids."""
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        cell.id = nbformat.v4.new_code_cell().id
    return notebook


def half_kept(path):
    """The notebook at ``path`` with the ids of its second half of cells changed: it keeps exactly half."""
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells[(len(notebook.cells) + 1) // 2:]:
        cell.id = nbformat.v4.new_code_cell().id
    return notebook


def parameters_file(tmp_path):
    """The smoke parameters of tests/test_exercises.py, as `labkit grade --parameters` reads them."""
    path = tmp_path / "parameters.yaml"
    path.write_text("".join(f"{name.split('_')[0]}: {values!r}\n" for name, values in SMOKE_PARAMETERS.items()))
    return path


def read_grades(out, table="grades.csv"):
    """grades.csv by learner, or notebooks.csv by learner and exercise (or file name, for an unreadable one)."""
    with open(out / table) as file:
        rows = list(csv.DictReader(file))
    if table == "grades.csv":
        return {row["learner"]: row for row in rows}
    return {(row["learner"], row["exercise"] or row["file"]): row for row in rows}


def checks_of(row, exercise):
    return {column.split(": ", 1)[1]: value for column, value in row.items()
            if column.startswith(f"{exercise}: ") and not column.endswith("(written)")}


def processes_of(out):
    """Processes still running that a graded notebook under ``out`` started (they carry its state dir)."""
    return [process.pid for process in processes.carrying("LABKIT_STATE_DIR", lambda value: str(out) in value)]


# ----- without running a kernel ---------------------------------------------------------------
def test_bad_input_gets_a_clear_error_or_row_and_the_submissions_are_untouched(tmp_path):
    with pytest.raises(SystemExit, match="labkit grade: no folder or .zip at"):
        cli.main(["grade", str(tmp_path / "missing"), "--out", str(tmp_path / "out")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="is empty"):
        cli.main(["grade", str(tmp_path / "empty"), "--out", str(tmp_path / "out")])
    with pytest.raises(SystemExit, match="give the SUBMISSIONS to grade and --out DIR"):
        cli.main(["grade", str(tmp_path / "empty")])
    with pytest.raises(SystemExit, match="it grades nothing here: leave out SUBMISSIONS, --out"):
        cli.main(["grade", str(tmp_path / "empty"), "--out", str(tmp_path / "out"),
                  "--gradescope-autograder", str(tmp_path / "autograder.zip")])
    with pytest.raises(SystemExit, match="--visibility and --full-mnist set up the Gradescope autograder"):
        cli.main(["grade", str(tmp_path / "empty"), "--out", str(tmp_path / "out"), "--visibility", "hidden"])
    with pytest.raises(SystemExit, match="--visibility later: Gradescope knows visible, hidden, after_due_date"):
        cli.main(["grade", "--gradescope-autograder", str(tmp_path / "autograder.zip"), "--visibility", "later"])
    with pytest.raises(SystemExit, match="autograder.tar: name a .zip file"):
        cli.main(["grade", "--gradescope-autograder", str(tmp_path / "autograder.tar")])
    with pytest.raises(SystemExit, match="has no check cell"):
        cli.main(["grade", "--gradescope-autograder", str(tmp_path / "autograder.zip"),
                  "--reference", str(SOLUTIONS.parent / "notebooks")])
    assert not (tmp_path / "autograder.zip").exists()
    (tmp_path / "broken.zip").write_bytes(b"PK\x03\x04 cut off in the download")
    with pytest.raises(SystemExit, match="broken.zip is not a readable .zip archive"):
        cli.main(["grade", str(tmp_path / "broken.zip"), "--out", str(tmp_path / "out")])
    with pytest.raises(SystemExit, match="no Jupyter kernel named 'no-such-kernel'"):
        cli.main(["grade", str(tmp_path / "empty"), "--out", str(tmp_path / "out"), "--kernel", "no-such-kernel"])
    submissions = tmp_path / "submissions"
    lesson = nbformat.read(SOLUTIONS.parent / "notebooks" / "00_welcome.ipynb", as_version=4)
    (submissions / "nothing").mkdir(parents=True)
    (submissions / "nothing" / "notes.txt").write_text("no notebook here")
    before = submit(submissions, {"corrupt": '{"cells": [', "json": '{"a": 1}', "lesson": lesson,
                                  "rebuilt/ex1_basic_cluster": rebuilt(EXERCISES / EX1),
                                  "halved/ex1_basic_cluster": half_kept(EXERCISES / EX1)})
    cli.main(["grade", str(submissions), "--out", str(tmp_path / "out")])
    notebooks = read_grades(tmp_path / "out", "notebooks.csv")
    assert {learner: row["status"] for (learner, _), row in notebooks.items()} == {
        "corrupt": "error", "json": "error", "lesson": "not recognised", "rebuilt": "not recognised",
        "halved": "ok"}, "a notebook keeping half of an exercise's cell ids counts as that exercise"
    assert "not a readable Jupyter notebook" in notebooks["corrupt", "corrupt.ipynb"]["detail"]
    assert "lesson.ipynb: not recognised: no shared cell ids" in notebooks["lesson", "lesson.ipynb"]["detail"]
    learners = read_grades(tmp_path / "out")
    assert sorted(learners) == ["corrupt", "halved", "json", "lesson", "nothing", "rebuilt"], "one row per learner"
    assert checks_of(learners["rebuilt"], "ex1") == dict.fromkeys(EX1_CHECKS, "not recognised")
    assert checks_of(learners["lesson"], "ex1") == dict.fromkeys(EX1_CHECKS, "not submitted"), \
        "a file name that names no exercise leaves every exercise not submitted"
    feedback = (tmp_path / "out" / "rebuilt" / "feedback.md").read_text()
    assert "- Exercise 1: 0 of 4 (not recognised: see below)" in feedback
    assert "not recognised: no shared cell ids with any exercise" in feedback and "cells copied or retyped" in feedback
    assert learners["nothing"]["notes"] == "no notebook handed in; not notebooks, not graded: notes.txt"
    assert "corrupt.ipynb: error (corrupt.ipynb is not a readable Jupyter notebook" in learners["corrupt"]["notes"]
    assert "not a readable Jupyter notebook" in (tmp_path / "out" / "corrupt" / "feedback.md").read_text()
    after = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in submissions.rglob("*") if path.is_file()}
    assert after == before, "grading changed or removed a submitted file"
    with pytest.raises(SystemExit, match="is not empty"):
        cli.main(["grade", str(submissions), "--out", str(tmp_path / "out")])


def test_a_canvas_zip_and_a_moodle_folder_are_graded_as_they_come(tmp_path):
    """Canvas's file names (a resubmission, a late one, a PDF, a corrupt notebook) and a roster from Canvas's
    gradebook export: one row per learner, the latest notebook graded, canvas.csv as Canvas imports it.
    Blank exercises only: no kernel starts."""
    blank_ex1, blank_ex5 = (nbformat.writes(nbformat.read(EXERCISES / name, as_version=4)) for name in (EX1, EX5))
    archive = tmp_path / "submissions.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr(zipfile.ZipInfo("lovelaceada_101_5001_ex1_basic_cluster.ipynb", (2026, 3, 1, 9, 0, 0)), blank_ex1)
        zipped.writestr(zipfile.ZipInfo("lovelaceada_late_101_5002_ex1_basic_cluster-1.ipynb", (2026, 3, 2, 9, 0, 0)),
                        blank_ex1)
        zipped.writestr("lovelaceada_101_5003_ex5_staleness_checks.ipynb", blank_ex5)
        zipped.writestr("hoppergrace_102_5004_report.pdf", b"%PDF-1.4")
        zipped.writestr("hoppergrace_102_5005_ex1_basic_cluster.ipynb", '{"cells": [')
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\n"
                      "    Points Possible,,,,\n"
                      '"Lovelace, Ada",101,s101,ada,Lab A\n"Hopper, Grace",102,s102,grace,Lab A\n'
                      '"Turing, Alan",103,s103,alan,Lab B\n')
    out = tmp_path / "graded"
    cli.main(["grade", str(archive), "--out", str(out), "--roster", str(roster), "--export", "canvas"])
    learners = read_grades(out)
    assert sorted(learners) == ["101", "102", "103"]
    ada, grace, alan = learners["101"], learners["102"], learners["103"]
    assert ada["name"] == "Lovelace, Ada" and ada["total"] == "0" and ada["max_total"] == str(ALL_CHECKS), \
        "the total is out of every check of every exercise, handed in or not"
    assert checks_of(ada, "ex1") == dict.fromkeys(EX1_CHECKS, "not attempted")
    assert "ex1: handed in late" in ada["notes"]
    assert "ex1: graded the latest, ex1_basic_cluster-1.ipynb; not graded: ex1_basic_cluster.ipynb" in ada["notes"]
    assert "not notebooks, not graded: report.pdf" in grace["notes"] and "ex1_basic_cluster.ipynb: error" in grace["notes"]
    assert checks_of(alan, "ex5") == dict.fromkeys(EX5_CHECKS, "not submitted") and "no notebook handed in" in alan["notes"]
    feedback = (out / "101" / "feedback.md").read_text()
    assert f"Total: **0** of {ALL_CHECKS} checks passed" in feedback
    assert "- Exercise 1: 0 of 4\n" in feedback and "- Exercise 2: 0 of 2 (not submitted)" in feedback
    with open(out / "canvas.csv") as file:
        canvas = list(csv.reader(file))
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *EX_TITLES.values(),
                         "PS Lab exercises"], "a column per exercise, then the total"
    assert canvas[1] == ["    Points Possible", "", "", "", "", "4", "2", "3", "4", "4", "3", str(ALL_CHECKS)], \
        "Canvas's points possible: each exercise's checks, and every check for the total"
    assert canvas[2] == ["Lovelace, Ada", "101", "s101", "ada", "Lab A", "0", "0", "0", "0", "0", "0", "0"] and len(canvas) == 5
    with zipfile.ZipFile(out / "canvas-feedback.zip") as returned:
        assert set(returned.namelist()) == {"lovelaceada_late_101_5002_ex1_basic_cluster-1.ipynb",
                                            "lovelaceada_101_5003_ex5_staleness_checks.ipynb"}, \
            "each graded notebook under Canvas's own name (Re-Upload Submissions matches it); nothing unreadable"
        handed_back = nbformat.reads(returned.read("lovelaceada_101_5003_ex5_staleness_checks.ipynb").decode(), 4)
    assert handed_back.cells[0].source == feedback and handed_back.cells[1:] == nbformat.reads(blank_ex5, 4).cells

    moodle = tmp_path / "moodle"
    submit(moodle, {"Ada Lovelace_201_assignsubmission_file_/ex5_staleness_checks": nbformat.reads(blank_ex5, 4)})
    cli.main(["grade", str(moodle), "--out", str(tmp_path / "graded-moodle")])
    row = read_grades(tmp_path / "graded-moodle")["201"]
    assert row["name"] == "Ada Lovelace" and checks_of(row, "ex5") == dict.fromkeys(EX5_CHECKS, "not attempted")


def test_plain_file_names_are_matched_against_the_roster_ids(tmp_path):
    """A roster id that is a word of a plain file or folder name names its learner; part of a word does not.
    Blank exercises only: no kernel starts."""
    blank_ex1, blank_ex5 = (nbformat.read(EXERCISES / name, as_version=4) for name in (EX1, EX5))
    submit(tmp_path / "submissions", {"ex1_s1234": blank_ex1, "s5678-work/ex5": blank_ex5, "stranger": blank_ex1})
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name\ns1234,Ada Lovelace\ns5678,Grace Hopper\ns123,Alan Turing\n")
    out = tmp_path / "graded"
    cli.main(["grade", str(tmp_path / "submissions"), "--out", str(out), "--roster", str(roster)])
    learners = read_grades(out)
    assert sorted(learners) == ["s123", "s1234", "s5678", "stranger"]
    assert learners["s1234"]["name"] == "Ada Lovelace"
    assert checks_of(learners["s1234"], "ex1") == dict.fromkeys(EX1_CHECKS, "not attempted")
    assert checks_of(learners["s5678"], "ex5") == dict.fromkeys(EX5_CHECKS, "not attempted")
    assert "no notebook handed in" in learners["s123"]["notes"], "s123 is part of s1234, not a word of it"
    assert "not on the roster" in learners["stranger"]["notes"]


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
    monkeypatch.setenv(children.MAX_TASKS_VARIABLE, "4")
    with pytest.raises(children.TaskLimitError, match="16 workers and 1 parameter servers make 17 task processes, but at most 4"):
        LocalCluster(num_workers=16, num_ps=1, name="too-big")


def test_a_server_started_by_hand_over_the_task_limit_exits_before_tensorflow_loads(monkeypatch):
    """Exercise 1 starts its servers by hand, not through a LocalCluster: each server checks its TF_CONFIG's
    cluster against the limit itself. ``server.main()`` runs here, as ``python -m labkit.runtime.server`` runs it."""
    from labkit.runtime import server

    def loads_tensorflow():
        raise AssertionError("the server went on to load TensorFlow")

    monkeypatch.setattr(server, "tensorflow_server", loads_tensorflow)
    monkeypatch.setenv(children.MAX_TASKS_VARIABLE, "4")
    cluster = {"ps": ["localhost:2222"], "worker": [f"localhost:{port}" for port in range(2223, 2227)]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 3}}))
    with pytest.raises(SystemExit, match="4 workers and 1 parameter servers in TF_CONFIG make 5 task processes, "
                                         "but at most 4 are allowed here"):
        server.main()
    monkeypatch.setenv(children.MAX_TASKS_VARIABLE, "four")
    with pytest.raises(SystemExit, match="LABKIT_MAX_TASKS must be a whole number"):
        server.main()


CLUSTER, USER = children.MAX_TASKS_VARIABLE, children.MAX_USER_TASKS_VARIABLE


@pytest.mark.parametrize("variable, limit, message", [
    (CLUSTER, "4", None), (CLUSTER, "", None), (CLUSTER, "four", "LABKIT_MAX_TASKS must be a whole number"),
    (USER, "1000", None), (USER, "", None), (USER, "1", r"you would run \d+, but at most 1 are allowed"),
    (USER, "four", "LABKIT_MAX_USER_TASKS must be a whole number")])
def test_the_task_limits_let_a_cluster_within_them_start_and_name_a_bad_limit(monkeypatch, variable, limit, message):
    """LABKIT_MAX_TASKS caps one cluster; LABKIT_MAX_USER_TASKS (a class hub's) caps all of this user's task processes
    at once, so more than a limit of one is refused whatever else runs (tests/test_hub.py sees a learner's second
    cluster refused while their first runs)."""
    monkeypatch.setenv(variable, limit)
    if message:
        with pytest.raises(ValueError, match=message):
            children.check_task_limit(4, "3 workers and 1 parameter server")
    else:
        assert children.check_task_limit(4, "3 workers and 1 parameter server") is None


def unpacked_autograder(tmp_path, *names, options=()):
    """The autograder built for the exercises ``names`` (with more ``options``), unpacked as Gradescope does (into
    ROOT/source, with the scripts' modes as unzip sets them): ROOT."""
    reference = tmp_path / "reference"
    reference.mkdir()
    for name in names:
        shutil.copy(EXERCISES / name, reference)
    autograder = tmp_path / "autograder.zip"
    cli.main(["grade", "--gradescope-autograder", str(autograder), "--reference", str(reference),
              "--parameters", str(parameters_file(tmp_path)), "--cell-timeout", "300", *options])
    root = tmp_path / "autograder"
    with zipfile.ZipFile(autograder) as archive:
        modes = {entry.filename: entry.external_attr >> 16 for entry in archive.infolist()}
        archive.extractall(root / "source")
    for name in ("setup.sh", "run_autograder"):  # as unzip does (extractall drops the modes)
        (root / "source" / name).chmod(modes[name] & 0o777)
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111, "Gradescope runs both scripts"
    return root


def test_the_autograders_setup_is_the_makefiles_install_in_its_own_folder(tmp_path):
    """What can be checked without Gradescope's image: both scripts parse, setup.sh ends in `make install`, and
    in the unpacked folder that install finds every file it needs and a Python the kit supports (make -n: the
    commands it would run, none run). No kernel starts."""
    source = unpacked_autograder(tmp_path, EX1) / "source"
    for name in ("setup.sh", "run_autograder"):
        assert subprocess.run(["bash", "-n", str(source / name)]).returncode == 0, f"{name} does not parse"
    assert (source / "setup.sh").read_text().rstrip().endswith("\nmake install"), "setup.sh installs as learners do"
    dry = subprocess.run(["make", "-n", "install"], cwd=source, capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0 and dry.stderr == "", f"make install cannot run in the autograder's folder: {dry.stderr}"
    assert "scripts/wheelhouse.py install wheelhouse -- -e ." in dry.stdout and "overrides.json" in dry.stdout
    assert "ipykernel install --sys-prefix --name pslab" in dry.stdout
    found = subprocess.run(["sh", "scripts/find_python.sh"], cwd=source, capture_output=True, text=True)
    assert found.returncode == 0 and found.stdout.strip(), found.stderr
    assert (source / "pyproject.toml").read_text() == (gradescope.KIT / "pyproject.toml").read_text(), \
        "the autograder installs the kit's own pins"


# ----- running the notebooks ---------------------------------------------------------------------
LEAVES_A_DETACHED_PROCESS = (  # it also shows what a graded notebook sees of the grader's environment
    "import json, os, subprocess\n"
    "json.dump(dict(os.environ), open('environment.json', 'w'))\n"
    "detached = subprocess.Popen(['setsid', 'env', '-i', 'sleep', '1000'])  # no marker, its own session\n"
    "open('detached.pid', 'w').write(str(detached.pid))")


def test_grading_a_class(tmp_path, monkeypatch):
    """One `labkit grade --jobs 2` over a solution, a typical wrong answer, a blank exercise and broken ones
    (a kernel that dies, a detached leftover process, an instructor's variable to hide). Only the solution
    starts TensorFlow tasks: the others show their grading paths without a cluster."""
    submissions = tmp_path / "submissions"
    before = submit(submissions, {
        "ada/ex2": nbformat.read(SOLUTIONS / EX2, as_version=4),
        "ada/ex1": variant(EXERCISES, EX1, [("ports = [portpicker", solution_cell(EX1, "ports = [portpicker")),
                                            ("server_script = work_dir", "import os\nos._exit(1)")]),  # kernel dies
        "dee": wrong(EX4, "scheduled nothing on the cluster"),  # made-up timings: no cluster
        "eve": nbformat.read(EXERCISES / EX1, as_version=4),  # blank: graded without a kernel
        "fay": variant(EXERCISES, EX1, [  # 1.1 and half of 1.2 answered, with a syntax error; its check "passed" by hand
            ("ports = [portpicker", solution_cell(EX1, "ports = [portpicker")),
            ("server_script = work_dir", solution_cell(EX1, "server_script = work_dir")),
            ('print("started:"', solution_cell(EX1, 'print("started:"').replace(
                "in tf_configs.items():", "in tf_configs.items()", 1)),
            ("checks.servers_serving(", 'checklist.passed("servers serving")')],
            extra_cells=['checklist.passed("servers serving")', LEAVES_A_DETACHED_PROCESS]),
        "gus": variant(SOLUTIONS, EX5, [("cluster = labkit.LocalCluster(", lambda source: source.replace(
            "num_workers=num_workers", "num_workers=16"))]),
    })
    monkeypatch.setenv("PSLAB_INSTRUCTOR_TOKEN", "not for learners")
    out = tmp_path / "graded"
    began = time.monotonic()
    cli.main(["grade", str(submissions), "--out", str(out), "--jobs", "2", "--timeout", "400",
              "--parameters", str(parameters_file(tmp_path)), "--export", "canvas", "--assignment", "Exercises (4567)"])
    print(f"graded 6 notebooks with --jobs 2 in {time.monotonic() - began:.0f} s")
    rows, learners = read_grades(out, "notebooks.csv"), read_grades(out)
    assert {key: row["status"] for key, row in rows.items()} == {
        ("ada", "ex1"): "kernel died", ("ada", "ex2"): "ok", ("dee", "ex4"): "ok", ("eve", "ex1"): "ok",
        ("fay", "ex1"): "leaked processes", ("gus", "ex5"): "refused"}
    assert "at most 4 are allowed" in rows["gus", "ex5"]["detail"]
    assert checks_of(rows["ada", "ex2"], "ex2") == dict.fromkeys(EX2_CHECKS, "passed")
    assert checks_of(learners["ada"], "ex1") == {"TF_CONFIGs": "passed", "servers serving": "failed",
                                                 "cluster trains": "not attempted", "processes stopped": "not attempted"}
    assert "not reached: the run ended (kernel died)" in (out / "ada" / "feedback.md").read_text()
    assert (learners["ada"]["ex1"], learners["ada"]["ex2"], learners["ada"]["total"]) == ("1", "2", "3"), \
        "a learner's row adds up their exercises"
    assert learners["ada"]["ex4: one time per worker count"] == "not submitted"
    with open(out / "canvas.csv") as file:
        canvas = {row["Student"]: row for row in csv.DictReader(file)}
    assert {column: canvas["    Points Possible"][column] for column in (*EX_TITLES.values(), "Exercises (4567)")} \
        == {EX_TITLES["ex1"]: "4", EX_TITLES["ex2"]: "2", EX_TITLES["ex3"]: "3", EX_TITLES["ex4"]: "4",
            EX_TITLES["ex5"]: "4", EX_TITLES["ex6"]: "3", "Exercises (4567)": str(ALL_CHECKS)}, \
        "Canvas's Points Possible row: each exercise's checks, and their sum"
    assert {column: canvas["ada"][column] for column in (*EX_TITLES.values(), "Exercises (4567)")} \
        == {EX_TITLES["ex1"]: "1", EX_TITLES["ex2"]: "2", EX_TITLES["ex3"]: "0", EX_TITLES["ex4"]: "0",
            EX_TITLES["ex5"]: "0", EX_TITLES["ex6"]: "0", "Exercises (4567)": "3"}, \
        "ada's exercises and total in their own columns"
    feedback = (out / "ada" / "feedback.md").read_text()
    assert f"Total: **3** of {ALL_CHECKS} checks passed" in feedback and learners["ada"]["max_total"] == str(ALL_CHECKS), \
        "feedback.md, grades.csv and canvas.csv give one total out of one maximum"
    assert "- Exercise 1: 1 of 4\n" in feedback and "- Exercise 2: 2 of 2\n" in feedback
    assert "ex1: kernel died" in learners["ada"]["notes"]
    assert checks_of(rows["dee", "ex4"], "ex4") == {**dict.fromkeys(EX4_CHECKS, "passed"), "timed on the cluster": "failed"}
    assert learners["dee"]["total"] == "3" and "scheduled nothing on the cluster" in (out / "dee" / "feedback.md").read_text()
    assert learners["dee"]["ex4: 4.5 · Explain the plot (written)"] == "answered"
    assert checks_of(learners["eve"], "ex1") == dict.fromkeys(EX1_CHECKS, "not attempted")
    assert rows["eve", "ex1"]["detail"] == "no check attempted: not run" and not (out / "eve" / "ex1" / "executed.ipynb").exists()
    assert checks_of(learners["fay"], "ex1") == {"TF_CONFIGs": "passed", "servers serving": "failed",
                                                 "cluster trains": "not attempted", "processes stopped": "not attempted"}, \
        "a hand-called passed() counted, or the grading stopped at the syntax error"
    assert "SyntaxError" in (out / "fay" / "feedback.md").read_text()

    seen = json.loads((out / "fay" / "ex1" / "environment.json").read_text())
    assert "PSLAB_INSTRUCTOR_TOKEN" not in seen and seen["PATH"] == os.environ["PATH"]
    if isolation.why_not_isolated() is None:  # no network beyond its own loopback, where Linux allows it
        assert seen["LABKIT_NETWORK"] == isolation.ISOLATED
    assert seen["HOME"] == str(out / "fay" / "ex1" / "home") and seen["TMPDIR"] == str(out / "fay" / "ex1" / "tmp")
    detached = int((out / "fay" / "ex1" / "detached.pid").read_text())
    assert f"left running, killed: sleep 1000 ({detached})" in learners["fay"]["notes"] and not processes.running(detached)
    assert processes_of(out) == []
    after = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in submissions.rglob("*") if path.is_file()}
    assert after == before


def test_a_cell_over_the_cell_timeout_is_stopped_and_the_grading_goes_on(tmp_path):
    """A cell that sleeps far past --cell-timeout is interrupted and named in its learner's row; the cells
    after it run, the notebook ends "ok", and the next learner is graded."""
    sleeper = variant(EXERCISES, EX1, [("ports = [portpicker", solution_cell(EX1, "ports = [portpicker"))],
                      extra_cells=["import time\ntime.sleep(600)", "open('after.txt', 'w').write('ran')"])
    submit(tmp_path / "submissions", {"ada": sleeper, "eve": nbformat.read(EXERCISES / EX1, as_version=4)})
    out = tmp_path / "graded"
    cli.main(["grade", str(tmp_path / "submissions"), "--out", str(out), "--cell-timeout", "5"])
    row, learners = read_grades(out, "notebooks.csv")["ada", "ex1"], read_grades(out)
    graded = nbformat.read(out / "ada" / "ex1" / "graded.ipynb", as_version=4)
    sleeper_cell = next(index for index, cell in enumerate(graded.cells) if "time.sleep(600)" in cell.source)
    assert row["status"] == "ok" and float(row["seconds"]) < 300, "the sleeper stopped the whole notebook"
    assert "stopped at --cell-timeout (5 s): cell " in row["detail"], row["detail"]
    stopped = row["detail"].split("stopped at --cell-timeout (5 s): cell ")[1].split(";")[0].split(", ")
    assert str(sleeper_cell) in stopped, row["detail"]
    assert "stopped at --cell-timeout (5 s)" in learners["ada"]["notes"]
    assert (out / "ada" / "ex1" / "after.txt").read_text() == "ran", "the cell after the sleeper did not run"
    assert "ran longer than 5 s (--cell-timeout): stopped" in (out / "ada" / "feedback.md").read_text()
    assert checks_of(learners["eve"], "ex1") == dict.fromkeys(EX1_CHECKS, "not attempted")
    assert processes_of(out) == []


def test_a_hung_notebook_is_stopped_with_everything_it_started(tmp_path):
    """The hung first cell starts a cluster and a child, writes their pids, and sleeps: at the timeout they
    are all gone, with the kernel. A timeout that came before the cluster was up proves less: the
    grading is then done again with the next, longer timeout."""
    hang = ("import labkit, json, subprocess, time\n"
            "cluster = labkit.LocalCluster(num_workers=1, num_ps=1, name='exercise-5')\n"
            "sleeper = subprocess.Popen(['sleep', '1000'])\n"
            "with open('started.json', 'w') as file:\n"
            "    json.dump([sleeper.pid] + [task.pid for task in cluster.tasks], file)\n"
            "time.sleep(10 ** 6)")
    submit(tmp_path / "submissions", {"hangs": variant(SOLUTIONS, EX5, [("import labkit  # first", hang)])})
    for timeout in HANG_TIMEOUTS:
        out, began = tmp_path / f"graded-{timeout}", time.time()
        cli.main(["grade", str(tmp_path / "submissions"), "--out", str(out), "--timeout", str(timeout)])
        row = read_grades(out, "notebooks.csv")["hangs", "ex5"]
        print(row["detail"])
        assert row["status"] == "timeout" and f"still running after {timeout} s" in row["detail"]
        assert processes_of(out) == []
        started = out / "hangs" / "ex5" / "started.json"
        if started.exists():
            print(f"the hung notebook's cluster was up {started.stat().st_mtime - began:.0f} s after the start")
            break
    else:
        pytest.fail(f"the hung notebook did not start its cluster within {HANG_TIMEOUTS[-1]} s")
    pids = json.loads(started.read_text())
    assert len(pids) == 3 and [pid for pid in pids if processes.running(pid)] == []


def test_the_gradescope_autograder_grades_a_submission_into_results_json(tmp_path):
    """The zip built for ex1 and ex4, unpacked as Gradescope does into a temporary root (its .venv: this one,
    as setup.sh's `make install` would make it), grades a wrong ex4 and writes results.json as Gradescope reads it."""
    root = unpacked_autograder(tmp_path, EX1, EX4, options=["--visibility", "after_published"])
    assert sorted(path.name for path in (root / "source" / "exercises").iterdir()) == [EX1, EX4]
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    (root / "source" / ".venv").symlink_to(sys.prefix)
    submit(root / "submission", {"ex4_performance_analysis": wrong(EX4, "scheduled nothing on the cluster"),
                                 "lovelaceada_12_34_ex1_basic_cluster": rebuilt(EXERCISES / EX1)})
    (root / "submission" / "notes.txt").write_text("not a notebook")
    (tmp_path / "tmp").mkdir()
    subprocess.run([str(root / "run_autograder")], cwd=root, check=True, timeout=600,
                   env=dict(os.environ, LABKIT_AUTOGRADER_ROOT=str(root), TMPDIR=str(tmp_path / "tmp")))
    report = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(report, GRADESCOPE_RESULTS)
    tests = {test["name"]: test for test in report["tests"]}
    assert list(tests) == [f"ex1: {check}" for check in EX1_CHECKS] + [f"ex4: {check}" for check in EX4_CHECKS], \
        "one test per check of every exercise, in order"
    assert report["score"] == sum(test["score"] for test in tests.values()) == 3
    assert all(test["max_score"] == 1 for test in tests.values())
    failed = tests["ex4: timed on the cluster"]
    assert failed["score"] == 0 and failed["status"] == "failed" and "scheduled nothing on the cluster" in failed["output"]
    assert tests["ex4: one time per worker count"]["output"] == "passed"
    assert all(tests[f"ex1: {check}"]["score"] == 0 and tests[f"ex1: {check}"]["output"].startswith(
        "not recognised: lovelaceada_12_34_ex1_basic_cluster.ipynb: not recognised: no shared cell ids")
               for check in EX1_CHECKS), "a rebuilt notebook is named as not recognised, never 'not submitted'"
    assert {report["visibility"], *(test["visibility"] for test in tests.values())} == {"after_published"}
    assert "not notebooks, not graded: notes.txt" in report["output"], "the learner's feedback.md is the output"
    assert "Total: **3** of 8 checks passed" in report["output"] and sum(test["max_score"] for test in tests.values()) == 8, \
        "the feedback's total is Gradescope's score, out of the same maximum"
    assert processes_of(tmp_path / "tmp") == []


def test_the_container_gradescope_needs_comes_from_the_solutions_measured_runs():
    table = {"ex1_basic_cluster": {"peak_pss_mb": 2800, "peak_alone_mb": 2830, "minutes": 0.2,
                                   "small_laptop": {"peak_pss_mb": 1800, "peak_alone_mb": 1810, "minutes": 0.2}},
             "ex4_performance_analysis": {"peak_pss_mb": 2900, "minutes": 0.5,
                                          "small_laptop": {"peak_pss_mb": 1500, "minutes": 0.6}}}
    subset = gradescope.container_needs(["ex1_basic_cluster", "ex4_performance_analysis"], table=table)
    assert subset["memory_gb"] == 3 and subset["peak_gb"] == 1.81, "the subset's largest peak (alone), and 1 GB"
    assert subset["timeout_minutes"] == 5 and subset["notebook_seconds"] == 144, \
        "4 times 0.8 minutes and 1 to start; 4 times the longest, 0.6 minutes"
    full = gradescope.container_needs(["ex1_basic_cluster", "ex4_performance_analysis"], full_mnist=True, table=table)
    assert full["memory_gb"] == 4 and full["notebook_seconds"] == 120
    with pytest.raises(ValueError, match="no measured notebook starts with 'ex9_new'"):
        gradescope.container_needs(["ex9_new"], table=table)


def test_the_autograder_built_with_full_mnist_caches_it_and_says_what_the_container_needs(tmp_path, capsys):
    cli.main(["grade", "--gradescope-autograder", str(tmp_path / "autograder.zip"), "--full-mnist"])
    printed = capsys.readouterr().out
    assert "graded on full MNIST" in printed and "Autograder Settings" in printed and "2 CPUs, memory at least" in printed
    assert "lower it to about" in printed, "the default --timeout is far above the solutions' measured times"
    with zipfile.ZipFile(tmp_path / "autograder.zip") as archive:
        setup = archive.read("setup.sh").decode()
    assert setup.rstrip().splitlines()[-1].startswith(".venv/bin/labkit data download")
    assert setup.index("make install") < setup.index("labkit data download")


def test_a_leftover_recorded_a_second_off_is_still_found():
    """psutil's start time adds the boot time, whole seconds recomputed from the wall clock: the worker's record of
    a process may be a second off the grader's reading, and the leftover must still be found and stopped."""
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        started = psutil.Process(sleeper.pid).create_time()
        assert [process.pid for process in grade._still_running([[sleeper.pid, started + 1.0]])] == [sleeper.pid]
        assert grade._still_running([[sleeper.pid, started - 5.0]]) == [], "another process with a reused pid"
    finally:
        sleeper.kill()
        sleeper.wait()
