"""The five exercises: exercises/ is generated from solutions/ and in sync with it; every exercise
notebook runs up to its first stub and fails there; then, in the same kernel, as a learner who writes
the answers goes on, the solution's cells pass their checks with small parameters; and each exercise's
checks reject at least one typical wrong answer."""
import copy
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import nbformat
import papermill.iorw
import papermill.parameterize
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from labkit.runtime import processes
from labkit.tools import cli, exercises, grade
from support import processes_running

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS, EXERCISES = ROOT / "solutions", ROOT / "exercises"
if not SOLUTIONS.is_dir():
    pytest.skip("no solutions/ here (a learner bundle): these tests run the solutions", allow_module_level=True)
CELL_TIMEOUT = 300

SMOKE_PARAMETERS = {
    "ex1_basic_cluster.ipynb": {"epochs": 2, "steps_per_epoch": 60, "target_accuracy": 0.75},
    "ex2_gradient_compression.ipynb": {"num_workers": 1, "num_steps": 100, "max_accuracy_loss": 0.05},
    "ex3_fault_tolerance.ipynb": {"num_workers": 1, "num_steps": 200, "checkpoint_every": 50, "kill_step": 80,
                                  "target_accuracy": 0.75},
    "ex4_performance_analysis.ipynb": {"worker_counts": [1, 2], "timed_steps": 100, "repeats": 2},
    "ex5_staleness_checks.ipynb": {"num_steps": 60},
}


@dataclass(frozen=True)
class WrongAnswer:
    """``answer`` put into the solution region of the cell containing ``cell``; the next cell
    containing ``check`` must then fail with an AssertionError (or CheckFailed) whose message contains ``hint``.
    The cells between run too, unless ``skip_between`` (where the check calls the answer itself)."""

    cell: str
    answer: str
    check: str
    hint: str
    skip_between: bool = False


# ex3's recovery with the numbers typed in and nothing restored (the check reads the restored job itself)
HARD_CODED_RECOVERY = """
    try:
        train_until(job, manager, num_steps)
    except recovery.PS_FAILURES:
        cluster.restart("ps:0")
        job = make_job()
        manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=job.model, optimizer=job.optimizer),
                                             checkpoint_dir, max_to_keep=2)
        resumed_at, steps_lost = 200, 50
"""

WRONG_ANSWERS = {
    "ex1_basic_cluster.ipynb": [
        WrongAnswer("ports = [portpicker", """
cluster = {"ps": [f"localhost:{ports[0]}"], "worker": [f"localhost:{ports[1]}"] * num_workers,
           "chief": [f"localhost:{ports[-1]}"]}
tf_configs = {f"{task_type}:{index}": {"cluster": cluster, "task": {"type": task_type, "index": index}}
              for task_type, addresses in cluster.items() for index in range(len(addresses))}
""", "checks.tf_configs_valid(", "Did you give it a port different from worker:0?"),
        WrongAnswer("process.terminate()", """
for name, process in processes.items():
    if name.startswith("worker"):
        process.terminate()
        process.wait()
""", "checks.processes_stopped(", "still running: ps:0"),
    ],
    "ex2_gradient_compression.ipynb": [
        WrongAnswer("class TopK", """
    def compress(self, gradient):
        return {"gradient": tf.where(tf.abs(gradient) < 0.01, 0.0, gradient)}
""", "checks.compressor_shrinks(", "zeros still take 4 bytes each"),
        WrongAnswer("class TopK", """
    def compress(self, gradient):
        flat = tf.reshape(gradient, [-1])
        positions = tf.math.top_k(tf.abs(flat), k=math.ceil(self.ratio * flat.shape[0])).indices
        return {"values": tf.gather(flat, positions), "positions": positions}

    def decompress(self, payload, shape):  # wrong: the values land one position further on
        positions = (payload["positions"] + 1) % math.prod(shape)
        return tf.reshape(tf.scatter_nd(positions[:, None], payload["values"], [math.prod(shape)]), shape)

    def bytes_per_step(self, shape):
        return 8 * math.ceil(self.ratio * math.prod(shape))
""", "checks.compressor_shrinks(", "exact values at the positions they came from"),
    ],
    "ex3_fault_tolerance.ipynb": [
        WrongAnswer("def train_until", """
    step = int(job.optimizer.iterations.numpy())
    while step < num_steps:  # saves after every closure, not at the multiples of checkpoint_every
        job.coordinator.schedule(job.train_steps, args=(job.iterator,))
        job.coordinator.join()
        step = int(job.optimizer.iterations.numpy())
        manager.save(checkpoint_number=step)
""", "checks.checkpoint_saved(", "it should hold step"),
        WrongAnswer("faults.KillAtStep(", HARD_CODED_RECOVERY, "checks.recovered(", "the new job starts at step 0"),
    ],
    "ex4_performance_analysis.ipynb": [
        WrongAnswer("seconds_by_workers = {num_workers: time_training", """
seconds_by_workers = {num_workers: [1.5] * repeats for num_workers in worker_counts}
relative_spread_by_workers = {num_workers: 0.0 for num_workers in worker_counts}
""", "checks.timed_every_worker_count(", "do not copy one timing"),
        WrongAnswer("def time_training", """
    return [1.0 + repeat / 10 for repeat in range(repeats)]  # made-up timings, no cluster
""", "checks.timed_the_cluster(", "scheduled nothing on the cluster"),
        WrongAnswer("def time_training", """
    with labkit.LocalCluster(num_workers=num_workers, num_ps=num_ps, name="exercise-4") as cluster:
        strategy = cluster.strategy()
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        with strategy.scope():
            model = models.mnist_mlp()
            optimizer = tf.keras.optimizers.legacy.SGD(0.1)
        train_steps = train.make_train_steps(strategy, model, optimizer, models.mean_cross_entropy,
                                             steps_per_closure)
        batches = train.per_worker_iterator(coordinator, dataset_fn)
        seconds = []
        for _ in range(repeats):  # no warm-up: the first block also traces the function
            began = time.perf_counter()
            for _ in range(timed_steps // steps_per_closure):
                coordinator.schedule(train_steps, args=(batches,))
            coordinator.join()
            seconds.append(time.perf_counter() - began)
        return seconds
""", "checks.timed_the_cluster(", "has no warm-up", skip_between=True),
        WrongAnswer("beyond_spread = {}", """
counts = sorted(seconds_by_workers)
beyond_spread = {}
for fewer, more in zip(counts, counts[1:]):  # keyed (more, fewer)
    a, b = seconds_by_workers[fewer], seconds_by_workers[more]
    beyond_spread[(more, fewer)] = max(a) < min(b) or max(b) < min(a)
""", "checks.beyond_spread(", "one per pair of consecutive worker counts"),
        WrongAnswer("figure, axis = plt.subplots", """
axis.plot(list(seconds_by_workers.values()), marker="o")
axis.set_xlabel("workers")
axis.set_ylabel("seconds")
""", "checks.plot_shows(", "not the worker counts"),
    ],
    "ex5_staleness_checks.ipynb": [
        WrongAnswer("class StalenessSGD", """
        tau = self.version.assign_add(1) - 1 - read_version
        for variable, gradient in zip(self.variables, gradients):
            variable.assign_sub(self.learning_rate * gradient)
        return tau
""", "checks.claims_after_update(", "claimed without waiting for the update"),
        WrongAnswer("class StalenessFilter", """
        return tf.cast(tau < self.max_tau, tf.float32)
""", "checks.filter_rule(", "steps stale is still allowed"),
        WrongAnswer("filtered = staleness.train_mnist", """
filtered = staleness.train_mnist(strategy, coordinator, data, num_workers,
                                 staleness.Update(staleness.StalenessFilter(max_tau), learning_rate),
                                 staleness.Schedule(num_steps, evaluate_every=num_steps, steps_per_closure=1),
                                 slow_worker=0, slow_ms=slow_ms)
""", "checks.used_own_filter(", "not your filter"),
        WrongAnswer("updates_by_tau = ", """
updates_by_tau = filtered.counts.sum(axis=0)
dropped_share = updates_by_tau[:max_tau + 1].sum() / updates_by_tau.sum()  # the kept ones
""", "checks.dropped_share_read(", "count the updates in the histogram's columns beyond max_tau"),
    ],
}
NAMES = sorted(SMOKE_PARAMETERS)


def with_answer(source, answer):
    """``source`` with the body of its solution region replaced by ``answer``."""
    begin, end = source.index(exercises.BEGIN), source.index(exercises.END)
    start = source.index("\n", begin) + 1
    return source[:start] + answer.strip("\n") + "\n" + source[source.rindex("\n", 0, end) + 1:]


def smoke_copy(directory, name):
    notebook = papermill.iorw.load_notebook_node(str(directory / name))
    return papermill.parameterize.parameterize_notebook(notebook, SMOKE_PARAMETERS[name], kernel_name="pslab")


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
    exercise, solution = smoke_copy(EXERCISES, name), smoke_copy(SOLUTIONS, name)
    first_stub = next(index for index, cell in enumerate(exercise.cells)
                      if cell.cell_type == "code" and exercises.CODE_STUB[1] in cell.source)
    assert [cell.source for cell in exercise.cells[:first_stub]] == \
        [cell.source for cell in solution.cells[:first_stub]], "the cells before the first stub differ"
    # a copy for the client: nbclient puts every cell it ran into its notebook's cells
    client = NotebookClient(copy.deepcopy(solution), kernel_name="pslab", timeout=CELL_TIMEOUT,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.reset_execution_trackers()
    with client.setup_kernel():
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
