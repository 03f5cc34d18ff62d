"""Every notebook runs under papermill with small parameters and other cluster shapes.

nbval runs each notebook with its learner defaults (see `testpaths` and
`--nbval-lax` in pyproject.toml); here papermill checks what a sweep passes in.
"""
from pathlib import Path

import nbformat
import papermill
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
SMALL_TRAINING = {"epochs": 3, "steps_per_epoch": 40, "target_accuracy": 0.8, "snippet_timeout_s": 8}
# nbval already runs every notebook with its defaults; these runs add what a sweep does:
# another cluster shape, small parameters, and the LM's smoke floor. Each costs minutes.
RUNS = [
    ("01_tf_config_and_cluster.ipynb", {"num_workers": 3, "num_ps": 2}),
    ("02_strategy_and_mnist.ipynb", SMALL_TRAINING),
    ("03_custom_training_loop.ipynb", {"num_workers": 1, "num_ps": 1, "num_steps": 200,
                                       "timing_steps": 100, "target_accuracy": 0.8}),
    # Smoke run of the LM: validation perplexity must still fall at least 2x (asserted inside).
    ("04_mini_transformer_lm.ipynb", {"num_steps": 200, "sample_length": 60, "min_perplexity_drop": 2.0}),
]
NO_PARAMETERS_TO_VARY = {"00_welcome.ipynb"}
RUN_BY_NBVAL_ONLY = {"07_fault_tolerance.ipynb"}  # its smoke run cost 2 minutes and added no coverage


def test_every_notebook_is_covered():
    covered = {name for name, _ in RUNS} | NO_PARAMETERS_TO_VARY | RUN_BY_NBVAL_ONLY
    assert {path.name for path in NOTEBOOKS.glob("*.ipynb")} == covered


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda path: path.name)
def test_every_notebook_has_one_parameters_cell_for_papermill(path):
    notebook = nbformat.read(path, as_version=4)
    tagged = [cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name} needs exactly one cell tagged 'parameters'"


@pytest.mark.slow
@pytest.mark.parametrize("name, parameters", RUNS, ids=[f"{n}-{p}" for n, p in RUNS])
def test_notebook_runs_with_parameters(name, parameters, tmp_path):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    [tagged] = [cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", [])]
    for parameter in parameters:
        assert f"{parameter} =" in tagged.source, f"{name} has no parameter {parameter!r}"
    output = tmp_path / name
    papermill.execute_notebook(str(NOTEBOOKS / name), str(output), parameters=parameters,
                               cwd=str(NOTEBOOKS), kernel_name="pslab", progress_bar=False)
    executed = nbformat.read(output, as_version=4)
    errors = [out for cell in executed.cells for out in cell.get("outputs", []) if out.output_type == "error"]
    assert errors == []
