"""The notebooks as `make test` runs them: each one's smoke copy run once, saved, and checked as a learner sees it.

A smoke copy is the notebook with the small parameters of its declaration; it runs in a fresh kernel and is saved
to runs/smoke/.

A notebook's test module, tests/test_notebook_<its name>.py, holds a class ``TestSmokeRun(SmokeNotebook)`` that
names the notebook: the class runs it once (the class-scoped fixture ``executed``) and checks that every cell ran
(the notebook asserts its own outcomes: accuracy, perplexity, recovery), every figure is an image, no stderr line
is unexplained and every declared result is recorded. The module adds what is particular to its notebook.
"""
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import nbformat
import papermill.iorw
import papermill.parameterize
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from labkit.tools import declaration, results
from support.scripts import script

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
EXECUTED_DIR = ROOT / "runs" / "smoke"  # each executed smoke copy, outputs included (`make site` shows them)
RESULTS_DIR = ROOT / "runs" / "smoke-results"  # each smoke run's results.json, in a folder of its own
KERNEL = "pslab"
CELL_TIMEOUT = 600
DECLARATIONS = declaration.read_all(NOTEBOOKS)
# A cell containing one of these draws a figure, so it must output an image.
FIGURE_CALLS = re.compile(r"plt\.show\(\)|\bbench\.plot(_predictions)?\(")
BARE_FIGURE = re.compile(r"^<Figure size [^>]*>$")


def smoke_copy(path, parameters):
    """The notebook at ``path`` with ``parameters`` in a cell after its parameters cell, as papermill injects them."""
    notebook = papermill.iorw.load_notebook_node(str(path))
    return papermill.parameterize.parameterize_notebook(notebook, parameters, kernel_name=KERNEL)


@cache
def path_without_ss():
    """A PATH of links to every program on this process's PATH but `ss` (scripts/like_macos.py), made once."""
    return script("like_macos").environment(tempfile.mkdtemp(prefix="like-macos-path-"))["PATH"]


def like_macos():
    """This process's environment as labkit sees macOS: no `ss` on PATH, PSS hidden (scripts/like_macos.py)."""
    return os.environ | {"PATH": path_without_ss(), script("like_macos").HIDE_PSS: "1"}


@dataclass
class SmokeRun:
    """A smoke copy as it ran: ``notebook`` with its outputs, up to the cell that raised ``error`` if one did."""

    name: str
    notebook: nbformat.NotebookNode
    error: CellExecutionError | None

    @property
    def path(self):
        """Where the executed copy is saved."""
        return EXECUTED_DIR / self.name

    def to_the_end(self):
        """The executed notebook; the calling test fails at once if a cell failed (its own test says which)."""
        if self.error is not None:
            pytest.fail(f"{self.name} did not run to the end: test_every_cell_runs_and_asserts shows the cell",
                        pytrace=False)
        return self.notebook


def execute(notebook, folder, env=None):
    """Run ``notebook``'s cells in a fresh kernel started in ``folder`` (with ``env``, else this process's
    environment) until one fails; its outputs go into ``notebook``. Return the error, or None."""
    client = NotebookClient(notebook, kernel_name=KERNEL, timeout=CELL_TIMEOUT, resources={"metadata": {"path": str(folder)}})
    try:
        client.execute(**({} if env is None else {"env": env}))
    except CellExecutionError as error:
        return error
    return None


def run(name, keeps_ss=False):
    """Run notebook ``name``'s smoke copy in a fresh kernel, as on macOS unless ``keeps_ss``; save it to runs/smoke/.

    The run records its results in a fresh folder of its own, and runs in runs/smoke/ (the relative paths of its
    parameters start there)."""
    results_dir = RESULTS_DIR / Path(name).stem
    shutil.rmtree(results_dir, ignore_errors=True)  # a result must come from this run
    notebook = smoke_copy(NOTEBOOKS / name, DECLARATIONS[name].smoke_parameters | {"results_dir": str(results_dir)})
    EXECUTED_DIR.mkdir(parents=True, exist_ok=True)
    error = execute(notebook, EXECUTED_DIR, None if keeps_ss else like_macos())
    partial = EXECUTED_DIR / f".{name}.{os.getpid()}"
    nbformat.write(notebook, partial)
    os.replace(partial, EXECUTED_DIR / name)  # another pytest call reading it sees all or nothing
    return SmokeRun(name, notebook, error)


def bare_figures(notebook):
    """(cell index, text) of every output whose only rendering is the text `<Figure ...>`."""
    return [(index, output.data["text/plain"]) for index, cell in enumerate(notebook.cells)
            for output in cell.get("outputs", [])
            if BARE_FIGURE.match(output.get("data", {}).get("text/plain", "").strip())
            and not {"image/png", "image/svg+xml"} & set(output.data)]


def figure_cells_without_image(notebook):
    """Indices of the cells that draw a figure but output no image."""
    return [index for index, cell in enumerate(notebook.cells)
            if cell.cell_type == "code" and FIGURE_CALLS.search(cell.source)
            and not any({"image/png", "image/svg+xml"} & set(output.get("data", {})) for output in cell.outputs)]


def figure_cells(path):
    """How many code cells of the notebook at ``path`` draw a figure."""
    return sum(bool(FIGURE_CALLS.search(cell.source)) for cell in nbformat.read(path, as_version=4).cells
               if cell.cell_type == "code")


def stderr_lines(notebook):
    """Every line the notebook's cells wrote to stderr."""
    return [line for cell in notebook.cells for output in cell.get("outputs", [])
            if output.output_type == "stream" and output.name == "stderr" for line in output.text.splitlines()]


class SmokeNotebook:
    """A notebook's smoke run and what every run is checked for: subclass it as ``TestSmokeRun``, naming the notebook."""

    notebook = ""  # its file name in notebooks/
    keeps_ss = False  # True where its checks count the bytes on the sockets with `ss`; else it runs as on macOS

    @pytest.fixture(scope="class")
    @classmethod
    def executed(cls):
        """The smoke run of ``notebook``, run once for the whole class."""
        return run(cls.notebook, cls.keeps_ss)

    @pytest.mark.notebook
    def test_every_cell_runs_and_asserts(self, executed):
        if executed.error is not None:
            pytest.fail(f"{executed.name}: {executed.error}", pytrace=False)

    @pytest.mark.notebook
    def test_every_figure_is_an_image(self, executed):
        notebook = executed.to_the_end()
        assert bare_figures(notebook) == [], f"{executed.name}: figures shown as text, not drawn"
        assert figure_cells_without_image(notebook) == [], f"{executed.name}: cells that draw a figure but show no image"

    @pytest.mark.notebook
    def test_no_unexplained_stderr(self, executed):
        lines = DECLARATIONS[executed.name].unexplained(stderr_lines(executed.to_the_end()))
        assert lines == [], f"{executed.name}: {len(lines)} unexplained stderr lines:\n" + "\n".join(lines[:20])

    @pytest.mark.notebook
    def test_every_declared_result_is_recorded(self, executed):
        executed.to_the_end()
        recorded = results.load(RESULTS_DIR / Path(executed.name).stem)
        expected = DECLARATIONS[executed.name].records
        assert expected <= set(recorded), f"{executed.name} did not record {sorted(expected - set(recorded))}"
        assert all(recorded[key] is not None for key in expected), f"{executed.name} recorded None: {recorded}"
        if results.VERDICTS in expected:  # a list (empty where it concludes no comparison), each checked again:
            assert isinstance(recorded[results.VERDICTS], list), f"{executed.name}: verdicts {recorded[results.VERDICTS]!r}"
            results.record_verdicts(None, recorded[results.VERDICTS])  # no winner by less than its interval or floor allows
