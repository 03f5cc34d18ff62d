"""The five exercises: exercises/ is generated from solutions/ and in sync with it; every exercise
notebook runs up to its first stub and fails there; then, in the same kernel, as a learner who writes
the answers goes on, the solution's cells pass their checks with small parameters; and each exercise's
checks reject at least one typical wrong answer."""
import copy

import jsonschema
import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from labkit.runtime import processes
from labkit.tools import cli, exercises, grade
from support.exercises import CELL_TIMEOUT, EXERCISES, NAMES, SMOKE_PARAMETERS, SOLUTIONS, WRONG_ANSWERS, with_answer
from support.processes import processes_running
from support.smoke import like_macos, smoke_copy



def run(client, cells, start=0, wrong_answers=()):
    """Run ``cells[start:]`` one by one in ``client``'s kernel until a cell fails.

    Before a cell that a wrong answer targets, the wrong version of it runs, then the cells after
    it up to its check cell. Returns (index of the failing cell or None, its error, and for each
    wrong answer the index of the cell where it failed and the error).
    """
    outcomes = {}
    for index in range(start, len(cells)):
        for wrong in wrong_answers:
            if wrong.cell in cells[index].source:
                outcomes[wrong] = run_wrong_answer(client, cells, index, wrong)
        try:
            client.execute_cell(cells[index], index)
        except CellExecutionError as error:
            return index, error, outcomes
    return None, None, outcomes


def run_wrong_answer(client, cells, index, wrong):
    check = next(i for i in range(index + 1, len(cells)) if wrong.check in cells[i].source)
    for i in [index, check] if wrong.skip_between else range(index, check + 1):
        cell = copy.deepcopy(cells[i])
        if i == index:
            cell.source = with_answer(cell.source, wrong.answer)
        try:
            client.execute_cell(cell, i)
        except CellExecutionError as error:
            return i - check, error
    return None, None


def learner_servers():
    """Server processes (tf_server.py of exercise 1) started by this test run."""
    return [process.pid for process in processes_running("tf_server.py")]


# ----- the generator -----------------------------------------------------------------
def test_exercises_are_generated_from_the_solutions():
    assert exercises.out_of_sync(SOLUTIONS, EXERCISES) == [], (
        "exercises/ differs from what solutions/ generates. Authors: edit solutions/, then `make exercises`. "
        "(Learners work in work/, which no test reads.)")


def test_the_generator_refuses_to_overwrite_an_edited_exercise_unless_forced(tmp_path):
    target = tmp_path / "exercises"
    exercises.generate(SOLUTIONS, target)
    exercises.generate(SOLUTIONS, target)  # unchanged files are simply written again
    edited = target / NAMES[0]
    answer = edited.read_text().replace("YOUR CODE HERE", "my answer")
    edited.write_text(answer)
    (target / "ex0_mine.ipynb").write_text("{}")
    with pytest.raises(FileExistsError, match=f"ex0_mine.ipynb, {NAMES[0]} in .* changed since the generator"):
        exercises.generate(SOLUTIONS, target)
    assert edited.read_text() == answer and (target / "ex0_mine.ipynb").exists(), "nothing may be lost"
    with pytest.raises(SystemExit, match="--force"):
        cli.main(["exercises", "--solutions", str(SOLUTIONS), "--exercises", str(target)])
    assert edited.read_text() == answer
    cli.main(["exercises", "--force", "--solutions", str(SOLUTIONS), "--exercises", str(target)])
    assert exercises.out_of_sync(SOLUTIONS, target) == []


def test_a_file_the_generator_wrote_is_replaced_when_its_solution_changes(tmp_path):
    solutions, target = tmp_path / "solutions", tmp_path / "exercises"
    solutions.mkdir()
    (solutions / NAMES[0]).write_text((SOLUTIONS / NAMES[0]).read_text())
    exercises.generate(solutions, target)
    notebook = nbformat.read(solutions / NAMES[0], as_version=4)
    notebook.cells.insert(0, nbformat.v4.new_markdown_cell("A new introduction."))
    nbformat.write(notebook, solutions / NAMES[0])
    exercises.generate(solutions, target)
    assert "A new introduction." in (target / NAMES[0]).read_text()
    assert exercises.out_of_sync(solutions, target) == []


def test_a_solution_region_becomes_a_stub_and_everything_else_stays():
    solution = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("Write f."),
        nbformat.v4.new_code_cell("def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n\nf(1)",
                                  execution_count=3, outputs=[nbformat.v4.new_output("stream", text="2")]),
        nbformat.v4.new_markdown_cell("Why?\n### BEGIN SOLUTION\nBecause.\n### END SOLUTION"),
    ])
    exercise = exercises.exercise_notebook(solution)
    assert [cell.id for cell in exercise.cells] == [cell.id for cell in solution.cells]
    assert exercise.cells[0].source == "Write f."
    assert exercise.cells[1].source == ('def f(x):\n    # YOUR CODE HERE\n'
                                        '    raise NotImplementedError("replace this line with your solution")\n\nf(1)')
    assert exercise.cells[1].outputs == [] and exercise.cells[1].execution_count is None
    assert exercise.cells[2].source == "Why?\nYOUR ANSWER HERE"
    assert "return 2 * x" in solution.cells[1].source, "the solution notebook must not change"


# nbgrader's cell metadata, schema version 3: its JSON schema, as nbgrader ships it (nbgraderformat/v3.json).
NBGRADER_V3 = {
    "type": "object", "required": ["schema_version", "grade", "locked", "solution"], "additionalProperties": False,
    "properties": {
        "schema_version": {"type": "integer", "minimum": 3, "maximum": 3}, "grade": {"type": "boolean"},
        "locked": {"type": "boolean"}, "solution": {"type": "boolean"}, "task": {"type": "boolean"},
        "grade_id": {"type": "string", "pattern": "^[a-zA-Z0-9_\\-]*$"}, "points": {"type": "number", "minimum": 0},
        "checksum": {"type": "string", "minLength": 32, "maxLength": 32},
        "cell_type": {"type": "string", "enum": ["raw", "code", "markdown"]}}}


def nbgrader_problems(notebook):
    """What nbgrader's validator (MetadataValidatorV3) refuses in ``notebook``: the schema, then its rules (a grade
    id where any role is set, points on a grade cell, markdown graded only as a solution, no grade id twice)."""
    problems, ids = [], set()
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader")
        if meta is None:
            continue
        problems += [f"{cell.id}: {error.message}" for error in jsonschema.Draft4Validator(NBGRADER_V3).iter_errors(meta)]
        if (meta.get("grade") or meta.get("solution") or meta.get("locked")) and not meta.get("grade_id"):
            problems.append(f"{cell.id}: no grade_id")
        if meta.get("grade") and "points" not in meta:
            problems.append(f"{cell.id}: a grade cell without points")
        if cell.cell_type == "markdown" and meta.get("grade") != meta.get("solution"):
            problems.append(f"{cell.id}: a markdown cell must be grade and solution, or neither")
        if meta.get("grade_id") in ids:
            problems.append(f"{cell.id}: duplicate grade_id {meta['grade_id']}")
        ids.add(meta.get("grade_id"))
    return problems


@pytest.mark.parametrize("name", NAMES)
def test_exercise_cells_carry_the_nbgrader_metadata_of_their_role(name):
    """Answers are solution cells, written answers manually graded ones, check cells locked tests worth
    their checks (as labkit grade counts them); nbgrader's validator rules accept the notebook."""
    notebook = nbformat.read(EXERCISES / name, as_version=4)
    exercise = grade.load_exercise(EXERCISES / name)
    assert nbgrader_problems(notebook) == []
    roles = {cell.id: cell.metadata.get("nbgrader") for cell in notebook.cells}
    checks = {check.cell_id for check in exercise.checks}
    assert sum(roles[cell_id]["points"] for cell_id in checks) == len(exercise.checks)
    assert all(roles[cell_id]["grade"] and roles[cell_id]["locked"] and not roles[cell_id]["solution"]
               for cell_id in checks)
    assert all(roles[cell_id]["solution"] and not roles[cell_id]["locked"] for cell_id in exercise.stub_ids)
    assert all(roles[cell_id]["grade"] for cell_id in exercise.written)
    assert {cell_id for cell_id, meta in roles.items() if meta} == checks | exercise.stub_ids
    assert {meta["schema_version"] for meta in roles.values() if meta} == {exercises.NBGRADER_SCHEMA_VERSION}


def test_the_nbgrader_rules_refuse_broken_metadata():
    notebook = nbformat.read(EXERCISES / NAMES[0], as_version=4)
    check, answer = (next(cell for cell in notebook.cells if cell.metadata.get("nbgrader", {}).get(role))
                     for role in ("grade", "solution"))
    del check.metadata.nbgrader["points"]
    answer.metadata.nbgrader["grade_id"] = check.metadata.nbgrader["grade_id"]
    answer.metadata.nbgrader["schema_version"] = 4
    assert set(nbgrader_problems(notebook)) == {f"{check.id}: a grade cell without points",
                                                f"{answer.id}: 4 is greater than the maximum of 3",
                                                f"{check.id}: duplicate grade_id {check.metadata.nbgrader['grade_id']}"}


@pytest.mark.parametrize("source, message", [
    ("### BEGIN SOLUTION\nx = 1", "never closed"),
    ("x = 1\n### END SOLUTION", "without a ### BEGIN SOLUTION"),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION", "inside another solution region"),
])
def test_broken_markers_are_refused_with_the_line(source, message):
    solution = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    with pytest.raises(ValueError, match=message):
        exercises.exercise_notebook(solution, "ex9.ipynb")


def test_the_check_command_reports_out_of_date_and_the_command_regenerates(tmp_path, capsys):
    target = tmp_path / "exercises"
    cli.main(["exercises", "--solutions", str(SOLUTIONS), "--exercises", str(target)])
    (target / "ex0_left_over.ipynb").write_text("{}")
    (target / NAMES[0]).write_text((target / NAMES[0]).read_text().replace("YOUR CODE HERE", "my answer"))
    with pytest.raises(SystemExit, match=f"out of date in {target}/: ex0_left_over.ipynb, {NAMES[0]}"):
        cli.main(["exercises", "--check", "--solutions", str(SOLUTIONS), "--exercises", str(target)])
    cli.main(["exercises", "--force", "--solutions", str(SOLUTIONS), "--exercises", str(target)])
    cli.main(["exercises", "--check", "--solutions", str(SOLUTIONS), "--exercises", str(target)])
    assert sorted(path.name for path in target.glob("*.ipynb")) == NAMES
    with pytest.raises(SystemExit, match="no notebooks in"):
        cli.main(["exercises", "--solutions", str(tmp_path / "missing")])


@pytest.mark.parametrize("name", NAMES)
def test_solution_notebooks_follow_the_conventions(name):
    notebook = nbformat.read(SOLUTIONS / name, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert notebook.metadata.kernelspec.name == "pslab"
    assert code[0].source.startswith("import labkit") and code[0].source.endswith("labkit.versions()")
    parameters = [cell for cell in code if "parameters" in cell.metadata.get("tags", [])]
    assert len(parameters) == 1, "exactly one cell tagged 'parameters'"
    for parameter in SMOKE_PARAMETERS[name]:
        assert f"{parameter} = " in parameters[0].source, f"no parameter {parameter!r}"
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code), "strip the outputs"
    assert code[-1].source == "checklist.summary()"
    assert any("<summary>Hint</summary>" in cell.source for cell in notebook.cells)
    assert len({cell.id for cell in notebook.cells}) == len(notebook.cells)


# ----- the notebooks, run ----------------------------------------------------------------
@pytest.mark.notebook
@pytest.mark.parametrize("name", NAMES)
def test_exercise_fails_at_its_first_stub_then_the_solution_passes_its_checks_and_rejects_wrong_answers(
        name, tmp_path):
    exercise, solution = (smoke_copy(folder / name, SMOKE_PARAMETERS[name]) for folder in (EXERCISES, SOLUTIONS))
    first_stub = next(index for index, cell in enumerate(exercise.cells)
                      if cell.cell_type == "code" and exercises.CODE_STUB[1] in cell.source)
    assert [cell.source for cell in exercise.cells[:first_stub]] == \
        [cell.source for cell in solution.cells[:first_stub]], "the cells before the first stub differ"
    # a copy for the client: nbclient puts every cell it ran into its notebook's cells
    client = NotebookClient(copy.deepcopy(solution), kernel_name="pslab", timeout=CELL_TIMEOUT,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.reset_execution_trackers()
    with client.setup_kernel(env=like_macos()):  # the exercises run as on macOS: no `ss`, no PSS
        failed_at, error, _ = run(client, exercise.cells)
        assert error is not None, "the exercise notebook ran to the end: its stubs raise nothing"
        assert error.ename == "NotImplementedError" and "replace this line" in error.evalue, \
            f"cell {failed_at} failed, but not at a stub: {error}"
        assert failed_at >= first_stub, f"cell {failed_at} raised NotImplementedError before the first stub"
        # the learner writes the answers and goes on from the first stub, in the same kernel
        failed_at, error, outcomes = run(client, solution.cells, first_stub, WRONG_ANSWERS[name])
    assert error is None, f"cell {failed_at} of {name} failed: {error}"
    assert len(outcomes) == len(WRONG_ANSWERS[name]), "a wrong answer's cell was not found"
    for wrong, (cells_before_check, wrong_error) in outcomes.items():
        assert cells_before_check == 0, f"the wrong answer for {wrong.check} failed before its check: {wrong_error}"
        assert wrong_error.ename in ("AssertionError", "CheckFailed") and wrong.hint in wrong_error.evalue, \
            wrong_error.evalue
    assert processes.wait_until_gone(learner_servers(), timeout=15) == [], \
        "exercise 1's server processes outlived its kernel"
