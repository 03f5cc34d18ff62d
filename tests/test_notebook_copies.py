"""A notebook definition marked `# labkit: NAME` is labkit's NAME, character for character: `make sync-notebooks`
(labkit/tools/notebook_copies.py) rewrites it from labkit's source, and here syncing changes nothing."""
import ast

import nbformat
import pytest

from labkit.tools import notebook_copies
from labkit.tools import syntax
from labkit.tools.notebook_copies import CopyMarkerError, sync

STALENESS_NOTEBOOK = notebook_copies.PACKAGE.parent / "notebooks" / "06_stale_gradients.ipynb"
CLAIM = "        with tf.control_dependencies(updates):  # the claim: only after the update has landed\n"


@pytest.mark.parametrize("path", notebook_copies.notebooks(), ids=lambda path: path.name)
def test_syncing_changes_nothing(path):
    assert sync(path, write=False) == [], f"{path.name} differs from labkit's code: run make sync-notebooks"


def test_a_drifted_copy_is_found_and_rewritten(tmp_path):
    notebook = nbformat.read(STALENESS_NOTEBOOK, as_version=4)
    [cell] = [cell for cell in notebook.cells if "# labkit: staleness.StalenessSGD.apply" in cell.source]
    as_kept = cell.source
    cell.source = as_kept.replace(CLAIM, "        if True:  # the claim, before the update has landed\n")
    assert cell.source != as_kept
    drifted = tmp_path / "claims_early.ipynb"
    nbformat.write(notebook, drifted)
    assert sync(drifted, write=False) == ["staleness.StalenessSGD.apply"]
    assert sync(drifted) == ["staleness.StalenessSGD.apply"]
    [rewritten] = [cell for cell in nbformat.read(drifted, as_version=4).cells if cell.source.startswith(as_kept[:40])]
    assert rewritten.source == as_kept


@pytest.mark.parametrize("source, complaint", [
    ("# labkit: staleness.NoSuchThing\ndef f():\n    pass", "labkit/staleness.py defines no NoSuchThing"),
    ("# labkit: nowhere.f\ndef f():\n    pass", "names no labkit module"),
    ("# labkit: staleness.swap\n\ndef swap():\n    pass", "is not just above a definition"),
    ("class A:\n# labkit: staleness.StalenessSGD.apply\n    def apply(self):\n        pass", "is not just above"),
], ids=["unknown-name", "unknown-module", "blank-line-between", "wrong-indentation"])
def test_a_marker_that_marks_nothing_is_refused(source, complaint):
    with pytest.raises(CopyMarkerError, match=complaint):
        notebook_copies.synced(source)


def definitions(source):
    """Every function and class definition in ``source``, methods included."""
    return [node for node in ast.walk(syntax.parse(source)) if isinstance(node, notebook_copies.DEFINITIONS)]


def unmarked_copies(paths):
    """The definitions in notebooks ``paths`` that are labkit code, syntax tree for syntax tree, with no `# labkit:` line."""
    kit = {ast.dump(node) for path in notebook_copies.PACKAGE.rglob("*.py") for node in definitions(path.read_text())}
    unmarked = []
    for path in paths:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "code":
                continue
            marked_lines = {line for _, node in notebook_copies.marked(cell.source)
                            for line in range(node.lineno, node.end_lineno + 1)}
            unmarked += [f"{path.name}: {node.name}" for node in definitions(cell.source)
                         if node.lineno not in marked_lines and ast.dump(node) in kit]
    return unmarked


def test_a_notebook_copy_of_labkit_code_is_marked(tmp_path):
    """A definition copied from labkit without its `# labkit:` line would drift unseen: none is."""
    assert unmarked_copies(notebook_copies.notebooks()) == [], "mark each with `# labkit: NAME` on the line above it"
    notebook = nbformat.read(STALENESS_NOTEBOOK, as_version=4)
    for cell in notebook.cells:
        cell.source = cell.source.replace("    # labkit: staleness.StalenessSGD.apply\n", "")
    nbformat.write(notebook, tmp_path / "unmarked.ipynb")
    assert unmarked_copies([tmp_path / "unmarked.ipynb"]) == ["unmarked.ipynb: apply"]
