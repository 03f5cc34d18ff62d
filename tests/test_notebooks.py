"""Every notebook runs: nbval runs a smoke copy of each (see smoke_notebooks.py), and
papermill runs notebooks the way a parameter sweep does, with other cluster shapes."""
import nbformat
import papermill
import pytest
from papermill.translators import PythonTranslator

from smoke_notebooks import NOTEBOOKS, SMOKE_DIR, SMOKE_PARAMETERS

pytestmark = pytest.mark.notebook

SWEEP_RUNS = [
    ("01_tf_config_and_cluster.ipynb", {"num_workers": 3, "num_ps": 2}),
]


def parameters_cell(path):
    notebook = nbformat.read(path, as_version=4)
    tagged = [cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name} needs exactly one cell tagged 'parameters'"
    return tagged[0]


def test_smoke_copies_carry_their_parameters():
    for name, parameters in SMOKE_PARAMETERS.items():
        copy = nbformat.read(SMOKE_DIR / name, as_version=4)
        injected = [cell for cell in copy.cells if "injected-parameters" in cell.metadata.get("tags", [])]
        for parameter, value in parameters.items():
            assert f"{parameter} = {PythonTranslator.translate(value)}" in injected[0].source, f"{name}: {parameter} not injected"


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda path: path.name)
def test_every_parameter_passed_in_exists(path):
    declared = parameters_cell(path).source
    passed = dict(SMOKE_PARAMETERS[path.name])
    for name, parameters in SWEEP_RUNS:
        if name == path.name:
            passed.update(parameters)
    for parameter in passed:
        assert f"{parameter} =" in declared, f"{path.name} has no parameter {parameter!r}"


@pytest.mark.parametrize("name, parameters", SWEEP_RUNS, ids=[f"{n}-{p}" for n, p in SWEEP_RUNS])
def test_notebook_runs_with_sweep_parameters(name, parameters, tmp_path):
    output = tmp_path / name
    papermill.execute_notebook(str(NOTEBOOKS / name), str(output), parameters=parameters,
                               cwd=str(NOTEBOOKS), kernel_name="pslab", progress_bar=False)
    executed = nbformat.read(output, as_version=4)
    errors = [out for cell in executed.cells for out in cell.get("outputs", []) if out.output_type == "error"]
    assert errors == []
