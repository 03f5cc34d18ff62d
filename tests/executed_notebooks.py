"""Each smoke notebook's run under nbval: a fresh results folder before its first cell, and after its last
the executed copy, outputs included, saved to runs/smoke/ (a pytest plugin: tests/conftest.py registers it).

A test that reads an executed copy is marked ``pytest.mark.reads(NOTEBOOK)``: tests/conftest.py puts it
in the notebook's group, after the notebook's cells, so it runs in the same process just after the
notebook ran, and ``executed_copy`` hands it the copy this process saved.

nbval has no option to save what it executed. This reads what its own nbdime reporter reads, attributes
of its items that nbval does not document: a cell item's ``cell`` (the cell in the notebook nbval read)
and ``test_outputs`` (what the kernel sent back), and its notebook item's ``nb``.
"""
import os
import re
import shutil

import nbformat
import pytest

from smoke_notebooks import ROOT, SMOKE_DIR, results_dir

EXECUTED_DIR = ROOT / "runs" / "smoke"
# A cell containing one of these draws a figure, so it must output an image.
FIGURE_CALLS = re.compile(r"plt\.show\(\)|\bbench\.plot(_predictions)?\(")

STARTED, SAVED = set(), set()  # the smoke notebooks this process started running, and saved
SCHEDULED = set()  # the smoke notebooks this pytest call runs (tests/conftest.py fills it after collection)


def is_smoke_cell(item):
    return item.path.parent == SMOKE_DIR


def pytest_runtest_setup(item):
    if is_smoke_cell(item) and item.path.name not in STARTED:
        STARTED.add(item.path.name)
        shutil.rmtree(results_dir(item.path.name), ignore_errors=True)  # a result must come from this run


def pytest_runtest_teardown(item, nextitem):
    if not is_smoke_cell(item):
        return
    item.cell.outputs = item.test_outputs or []
    if nextitem is None or nextitem.parent is not item.parent:
        save(item.parent.nb, item.path.name)


def save(notebook, name):
    """Write the executed notebook to runs/smoke/, its code cells numbered 1, 2, ... as nbval ran them."""
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for number, cell in enumerate(code_cells, start=1):
        cell.execution_count = number
    EXECUTED_DIR.mkdir(parents=True, exist_ok=True)
    partial = EXECUTED_DIR / f".{name}.{os.getpid()}"
    nbformat.write(notebook, partial)
    os.replace(partial, EXECUTED_DIR / name)  # another pytest call reading it sees all or nothing
    SAVED.add(name)


def executed_copy(name):
    """The path of smoke notebook ``name`` as nbval executed it just before, in this process, for a test
    marked ``reads(name)``; skip the test if this pytest call does not run the notebook."""
    if name in SAVED:
        return EXECUTED_DIR / name
    if name in SCHEDULED:
        pytest.fail(f"{name} runs in this pytest call, but not before this test in this process: mark the test "
                    f"pytest.mark.reads({name!r}) and keep pyproject.toml's --dist each (tests/conftest.py groups them)")
    pytest.skip(f"{name} was not executed in this pytest call: run its smoke copy in the same "
                f"pytest call, e.g. pytest tests/smoke/{name} <this test file>")
