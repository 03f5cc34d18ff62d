"""Each notebook's declaration (its "labkit" metadata): present in every notebook, read back as written, its
smoke parameters and results_dir parameters of the notebook; a missing or broken one is a clear error."""
import re

import nbformat
import pytest

from labkit.tools import declaration
from support.smoke import DECLARATIONS, NOTEBOOKS


def test_every_notebook_has_a_declaration_that_records_something():
    declarations = declaration.read_all(NOTEBOOKS)
    assert sorted(declarations) == sorted(path.name for path in NOTEBOOKS.glob("*.ipynb"))
    assert [name for name, notebook in declarations.items() if not notebook.records] == []


def test_a_declaration_is_read_back_as_written_and_explains_only_its_lines(tmp_path):
    path = tmp_path / "lab.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), path)
    declaration.write(path, {"num_steps": 20}, {"accuracy"}, [(r"^UserWarning: ", "TensorFlow's own warning")], "fast")
    read = declaration.read(path)
    assert (read.smoke_parameters, read.records, read.smoke_why) == ({"num_steps": 20}, {"accuracy"}, "fast")
    assert read.unexplained(["UserWarning: tf.data", "E0000 Failed to remove function"]) == [
        "E0000 Failed to remove function"]
    assert nbformat.read(path, as_version=4).cells[0].source == "x = 1"


def test_a_notebook_without_a_declaration_says_how_to_add_one(tmp_path):
    path = tmp_path / "11_new_lab.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), path)
    with pytest.raises(declaration.DeclarationError, match=re.escape('11_new_lab.ipynb has no "labkit" declaration')):
        declaration.read(path)


def test_a_broken_stderr_pattern_fails_when_read(tmp_path):
    path = tmp_path / "lab.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), path)
    declaration.write(path, {}, {"accuracy"}, [("([unclosed", "a typo")])
    with pytest.raises(re.error):
        declaration.read(path)


def parameters_cell(path):
    notebook = nbformat.read(path, as_version=4)
    tagged = [cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name} needs exactly one cell tagged 'parameters'"
    return tagged[0].source


@pytest.mark.parametrize("name", sorted(DECLARATIONS))
def test_every_smoke_parameter_and_results_dir_is_a_parameter_of_the_notebook(name):
    declared = parameters_cell(NOTEBOOKS / name)
    for parameter in [*DECLARATIONS[name].smoke_parameters, "results_dir"]:
        assert f"{parameter} =" in declared, f"{name} has no parameter {parameter!r}"
