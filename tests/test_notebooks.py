"""Every notebook runs: nbval runs a smoke copy of each (see smoke_notebooks.py), with the parameters
its declaration gives (01's is another cluster shape, as `labkit sweep` sets it)."""
import nbformat
import pytest
from papermill.translators import PythonTranslator

from smoke_notebooks import NOTEBOOKS, SMOKE_DIR, SMOKE_PARAMETERS

pytestmark = pytest.mark.notebook


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
    for parameter in SMOKE_PARAMETERS[path.name]:
        assert f"{parameter} =" in declared, f"{path.name} has no parameter {parameter!r}"
