"""Save each smoke notebook as nbval executed it, outputs included, to runs/smoke/.

nbval runs every cell once and keeps what the kernel sent (``IPyNbCell.test_outputs``)
but writes nothing. This pytest hook writes it down, so that tests/test_notebook_outputs.py
and the browser test read what a learner would see without running the notebooks again.
"""
import os
import re
import time

import nbformat
import pytest
from nbval.plugin import IPyNbCell

from smoke_notebooks import ROOT, SMOKE_DIR

EXECUTED_DIR = ROOT / "runs" / "smoke"
# A cell containing one of these draws a figure, so it must output an image.
FIGURE_CALLS = re.compile(r"plt\.show\(\)|\bbench\.plot(_predictions)?\(")


def pytest_runtest_teardown(item, nextitem):
    if not isinstance(item, IPyNbCell):
        return
    item.cell.outputs = item.test_outputs or []
    item.cell.execution_count = item.cell_num + 1
    if nextitem is None or nextitem.parent is not item.parent:
        EXECUTED_DIR.mkdir(parents=True, exist_ok=True)
        partial = EXECUTED_DIR / f".{item.path.name}.{os.getpid()}"
        nbformat.write(item.parent.nb, partial)
        os.replace(partial, EXECUTED_DIR / item.path.name)  # a reader on another worker sees all or nothing


# Smoke notebooks that this pytest run executes (set by conftest.py after collection). Under
# pytest-xdist another worker may still be running one when a test asks for its executed copy.
SCHEDULED = set()
WAIT_SECONDS = 600


def executed_copy(name):
    """The path of notebook `name` as nbval executed it in this pytest run (waiting for it if this
    run executes it); skip the test if this run does not execute it."""
    path, smoke_copy = EXECUTED_DIR / name, SMOKE_DIR / name

    def done():
        return path.exists() and path.stat().st_mtime >= smoke_copy.stat().st_mtime

    deadline = time.monotonic() + WAIT_SECONDS
    while name in SCHEDULED and not done() and time.monotonic() < deadline:
        time.sleep(1)
    if not done():
        if name in SCHEDULED:
            pytest.fail(f"{name} is part of this run but its executed copy did not appear in {WAIT_SECONDS} s")
        pytest.skip(f"{name} was not executed in this pytest run: run its smoke copy in the same "
                    f"pytest call, e.g. pytest tests/smoke/{name} <this test file>")
    return path
