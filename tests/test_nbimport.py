"""labkit.tools.nbimport: nbformat loads without jsonschema's IRI grammar and still validates notebooks."""
import sys

import nbformat
import pytest


def test_pytest_loaded_nbformat_without_the_iri_grammar():
    assert "nbformat" in sys.modules, "nbval imports nbformat when pytest starts"
    assert sys.modules.get("rfc3987_syntax", "not marked") is None, \
        "pyproject.toml's addopts must load -p labkit.tools.nbimport before nbval"


def test_nbformat_still_rejects_a_broken_notebook():
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    nbformat.validate(notebook)
    del notebook.cells[0]["source"]
    with pytest.raises(nbformat.ValidationError, match="source"):
        nbformat.validate(notebook)
