"""The smoke runs of the notebooks (tests/support/smoke.py): every notebook has its test module, a smoke copy carries
its declared parameters, a run as on macOS sees no `ss` and no PSS, and the checks of what a learner sees can fail;
and the tiers: a test has one."""
import re
import subprocess
import sys

import nbformat
import pytest
from papermill.translators import PythonTranslator

from support import tier_times
from support.smoke import (DECLARATIONS, NOTEBOOKS, ROOT, SmokeRun, bare_figures, execute, figure_cells_without_image,
                           like_macos, smoke_copy, stderr_lines)


@pytest.mark.parametrize("name", sorted(DECLARATIONS))
def test_every_notebook_has_its_test_module(name):
    module = ROOT / "tests" / f"test_notebook_{name.removesuffix('.ipynb')}.py"
    assert module.exists() and re.search(rf'^    notebook = "{re.escape(name)}"$', module.read_text(), re.M), (
        f"write {module.relative_to(ROOT)}: a class TestSmokeRun(SmokeNotebook) with notebook = {name!r} "
        "(docs/contributing.md, Adding a notebook lab)")


@pytest.mark.parametrize("name", sorted(DECLARATIONS))
def test_a_smoke_copy_carries_its_declared_parameters(name):
    parameters = DECLARATIONS[name].smoke_parameters
    copy = smoke_copy(NOTEBOOKS / name, parameters)
    [injected] = [cell for cell in copy.cells if "injected-parameters" in cell.metadata.get("tags", [])]
    for parameter, value in parameters.items():
        assert f"{parameter} = {PythonTranslator.translate(value)}" in injected.source, f"{name}: {parameter} not injected"


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


@pytest.mark.notebook
def test_a_run_as_on_macos_stops_at_the_failing_cell_and_its_readers_say_so(tmp_path):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in [
        "import os, shutil, sys\nprint(shutil.which('ss'), os.environ.get('LABKIT_HIDE_PSS'), file=sys.stderr)",
        "assert 1 + 1 == 3, 'the notebook checks its own outcome'", "print('never runs')"]])
    error = execute(notebook, tmp_path, like_macos())
    assert error is not None and "the notebook checks its own outcome" in str(error)
    assert stderr_lines(notebook) == ["None 1"], "a kernel as on macOS finds no ss and hides PSS"
    assert notebook.cells[2].outputs == []
    with pytest.raises(pytest.fail.Exception, match="did not run to the end"):
        SmokeRun("lab.ipynb", notebook, error).to_the_end()


def test_a_test_has_one_tier_and_unit_without_a_tier_marker():
    assert tier_times.TIERS == ("unit", "cluster", "notebook", "browser", "root", "hub"), "pyproject.toml's markers"
    assert tier_times.tier(["parametrize", "notebook", "timeout"]) == "notebook"
    assert tier_times.tier(["parametrize"]) == "unit"
    with pytest.raises(ValueError, match=r"tier markers \['browser', 'notebook'\]: give it one"):
        tier_times.tier(["browser", "notebook"])


def test_a_phases_cpu_counts_the_processes_it_started_once_they_ended():
    before = tier_times.cpu_seconds_used()
    subprocess.run([sys.executable, "-c", "import time\nend = time.process_time() + 0.3\n"
                                          "while time.process_time() < end: pass"], check=True)
    assert tier_times.cpu_seconds_used() - before >= 0.3
