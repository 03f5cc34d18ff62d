"""What a learner sees in the executed smoke notebooks: every figure drawn, no unexplained red,
and the results each run recorded for scripts and `labkit sweep`.

Each test of a notebook reads the copy nbval executed just before, in the same process (saved to
runs/smoke/ by executed_notebooks.py; the test is marked reads(NOTEBOOK)); it runs no notebook itself.
"""
import re

import nbformat
import pytest

from executed_notebooks import FIGURE_CALLS, executed_copy
from labkit.tools import results
from smoke_notebooks import DECLARATIONS, NOTEBOOKS, SMOKE_PARAMETERS, results_dir, takes_results_dir

pytestmark = pytest.mark.notebook

BARE_FIGURE = re.compile(r"^<Figure size [^>]*>$")


def executed(name):
    return nbformat.read(executed_copy(name), as_version=4)


def each_reading(names):
    """Parameters: each of ``names``, its test marked as reading that notebook."""
    return [pytest.param(name, marks=pytest.mark.reads(name)) for name in sorted(names)]


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


def stderr_lines(notebook):
    """Every line the notebook's cells wrote to stderr."""
    return [line for cell in notebook.cells for output in cell.get("outputs", [])
            if output.output_type == "stream" and output.name == "stderr" for line in output.text.splitlines()]


@pytest.mark.parametrize("name", each_reading(SMOKE_PARAMETERS))
def test_every_figure_is_an_image(name):
    notebook = executed(name)
    assert bare_figures(notebook) == [], f"{name}: figures shown as text, not drawn"
    assert figure_cells_without_image(notebook) == [], f"{name}: cells that draw a figure but show no image"


@pytest.mark.parametrize("name", each_reading(SMOKE_PARAMETERS))
def test_no_unexplained_stderr(name):
    lines = DECLARATIONS[name].unexplained(stderr_lines(executed(name)))
    assert lines == [], f"{name}: {len(lines)} unexplained stderr lines:\n" + "\n".join(lines[:20])


@pytest.mark.parametrize("name", each_reading(DECLARATIONS))
def test_every_notebook_records_its_key_results(name):
    executed_copy(name)  # its smoke run has finished
    recorded = results.load(results_dir(name))
    expected = DECLARATIONS[name].records
    assert expected <= set(recorded), f"{name} did not record {sorted(expected - set(recorded))}"
    assert all(recorded[key] is not None for key in expected), f"{name} recorded None: {recorded}"
    if results.VERDICTS in expected:  # each checked again: no winner by less than its interval or floor allows
        assert recorded[results.VERDICTS], f"{name} recorded no verdict"
        results.record_verdicts(None, recorded[results.VERDICTS])


def test_every_notebook_takes_a_results_dir_and_says_what_it_records():
    names = sorted(path.name for path in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    assert [name for name in names if not takes_results_dir(name)] == []
    assert [name for name in names if not DECLARATIONS[name].records] == []


def test_every_notebook_says_how_long_it_runs_and_how_much_memory_it_needs():
    run_time = re.compile(r"^\*Runs in (under|about) [0-9.½]+ minutes? with its defaults on a 2-core machine.*; "
                          r"[0-9.]+ GB of memory at its peak", re.M)
    silent = [path.name for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
              if not run_time.search(nbformat.read(path, as_version=4).cells[0].source)]
    assert silent == [], f"notebooks without their measured run time at the top: {silent}"


def notebook_with(source, *outputs):
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source, outputs=list(outputs))])


def test_the_checks_see_a_figure_left_as_text_and_red_lines():
    as_text = nbformat.v4.new_output("execute_result", data={"text/plain": "<Figure size 1200x850 with 4 Axes>"},
                                     execution_count=1)
    drawn = nbformat.v4.new_output("display_data", data={"text/plain": "<Figure size 640x480 with 1 Axes>",
                                                         "image/png": "iVBORw0KGgo="})
    red = nbformat.v4.new_output("stream", name="stderr", text="E0000 context.cc:911] Failed to remove function\n")
    assert bare_figures(notebook_with("figure", as_text)) == [(0, "<Figure size 1200x850 with 4 Axes>")]
    assert figure_cells_without_image(notebook_with("figure = bench.plot(rows, path, base)\nfigure", as_text)) == [0]
    assert figure_cells_without_image(notebook_with("plt.show()")) == [0]
    assert bare_figures(notebook_with("plt.show()", drawn)) == []
    assert figure_cells_without_image(notebook_with("plt.show()", drawn)) == []
    assert stderr_lines(notebook_with("cluster.stop()", red)) == ["E0000 context.cc:911] Failed to remove function"]
    warning = ("/venv/tensorflow/python/data/ops/dataset_ops.py:463: UserWarning: To make it possible to preserve "
               "tf.data options across serialization boundaries, their implementation has moved")
    assert DECLARATIONS["02_strategy_and_mnist.ipynb"].unexplained([warning, "E0000 context.cc:911] Failed to remove function"]) == [
        "E0000 context.cc:911] Failed to remove function"]
