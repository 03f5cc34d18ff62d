"""Each notebook's manifest (its "labkit" metadata): present in every notebook, read back as written,
and a missing or broken one is a clear error."""
import re

import nbformat
import pytest

from labkit.tools import manifest
from smoke_notebooks import NOTEBOOKS


def test_every_notebook_has_a_manifest_that_records_something():
    manifests = manifest.read_all(NOTEBOOKS)
    assert sorted(manifests) == sorted(path.name for path in NOTEBOOKS.glob("*.ipynb"))
    assert [name for name, notebook in manifests.items() if not notebook.records] == []


def test_a_manifest_is_read_back_as_written_and_explains_only_its_lines(tmp_path):
    path = tmp_path / "lab.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), path)
    manifest.write(path, {"num_steps": 20}, {"accuracy"}, [(r"^UserWarning: ", "TensorFlow's own warning")], "fast")
    read = manifest.read(path)
    assert (read.smoke_parameters, read.records, read.smoke_why) == ({"num_steps": 20}, {"accuracy"}, "fast")
    assert read.unexplained(["UserWarning: tf.data", "E0000 Failed to remove function"]) == [
        "E0000 Failed to remove function"]
    assert nbformat.read(path, as_version=4).cells[0].source == "x = 1"


def test_a_notebook_without_a_manifest_says_how_to_add_one(tmp_path):
    path = tmp_path / "11_new_lab.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), path)
    with pytest.raises(manifest.ManifestError, match=re.escape('11_new_lab.ipynb has no "labkit" manifest')):
        manifest.read(path)


def test_a_broken_stderr_pattern_fails_when_read(tmp_path):
    path = tmp_path / "lab.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), path)
    manifest.write(path, {}, {"accuracy"}, [("([unclosed", "a typo")])
    with pytest.raises(re.error):
        manifest.read(path)
