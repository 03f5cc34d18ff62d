"""What a learner sees in the executed smoke notebooks: every figure drawn, no unexplained red.

Reads the copies nbval executed earlier in this pytest run (saved to runs/smoke/ by
executed_notebooks.py); it runs no notebook itself.
"""
import re

import nbformat
import pytest

from executed_notebooks import FIGURE_CALLS, executed_copy
from smoke_notebooks import SMOKE_PARAMETERS

BARE_FIGURE = re.compile(r"^<Figure size [^>]*>$")
# stderr lines a notebook may show (each explained in the notebook). Everything else is noise a
# learner did not ask for.
ALLOWED_STDERR = {
    # fit() on a plain tf.data.Dataset: TensorFlow's auto-shard reads the options while tracing.
    "02_strategy_and_mnist.ipynb": [r"dataset_ops\.py:\d+: UserWarning: To make it possible to preserve tf\.data "
                                    r"options across serialization boundaries",
                                    r'^\s*warnings\.warn\("To make it possible to preserve tf\.data options'],
}


def executed(name):
    return nbformat.read(executed_copy(name), as_version=4)


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


def unexplained(lines, allowed_patterns):
    """The lines that match none of the allowed patterns."""
    return [line for line in lines if not any(re.search(pattern, line) for pattern in allowed_patterns)]


def stderr_lines(notebook):
    """Every line the notebook's cells wrote to stderr."""
    return [line for cell in notebook.cells for output in cell.get("outputs", [])
            if output.output_type == "stream" and output.name == "stderr" for line in output.text.splitlines()]


@pytest.mark.parametrize("name", sorted(SMOKE_PARAMETERS))
def test_every_figure_is_an_image(name):
    notebook = executed(name)
    assert bare_figures(notebook) == [], f"{name}: figures shown as text, not drawn"
    assert figure_cells_without_image(notebook) == [], f"{name}: cells that draw a figure but show no image"


@pytest.mark.parametrize("name", sorted(SMOKE_PARAMETERS))
def test_no_unexplained_stderr(name):
    lines = unexplained(stderr_lines(executed(name)), ALLOWED_STDERR.get(name, []))
    assert lines == [], f"{name}: {len(lines)} unexplained stderr lines:\n" + "\n".join(lines[:20])


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
    allowed_in_02 = ALLOWED_STDERR["02_strategy_and_mnist.ipynb"]
    assert unexplained([warning, "E0000 context.cc:911] Failed to remove function"], allowed_in_02) == [
        "E0000 context.cc:911] Failed to remove function"]
