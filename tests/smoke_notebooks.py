"""Small parameters for every notebook, so the test suite runs each one in minutes.

`make test` runs nbval on papermill-prepared copies of the notebooks written to
`tests/smoke/`, with the parameters each notebook's declaration gives (the learner
defaults train for longer; `make test-defaults` runs those). Each notebook asserts its own outcomes, so a smoke copy still checks
accuracy, perplexity and recovery, at a smaller scale.
"""
import os
from pathlib import Path

import nbformat
import papermill

from labkit.tools import declaration

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SMOKE_DIR = Path(__file__).resolve().parent / "smoke"
RESULTS_DIR = ROOT / "runs" / "smoke-results"  # each smoke run records its results.json here

# Each notebook's declaration (its "labkit" metadata, labkit.tools.declaration) holds its smoke parameters and why they suffice.
DECLARATIONS = declaration.read_all(NOTEBOOKS)
SMOKE_PARAMETERS = {name: notebook.smoke_parameters for name, notebook in DECLARATIONS.items()}


def results_dir(name):
    """Where the smoke run of notebook ``name`` records its results (``labkit.tools.results``)."""
    return RESULTS_DIR / Path(name).stem


def takes_results_dir(name):
    """Whether the notebook's parameters cell has ``results_dir``."""
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    return any("parameters" in cell.metadata.get("tags", []) and "results_dir" in cell.source
               for cell in notebook.cells)


def prepare():
    """Write each notebook with its smoke parameters injected (not executed).

    Each copy replaces the last in one step (a pytest call collecting them meanwhile reads one or the
    other, never half a file), so a call may write them while another runs.
    """
    SMOKE_DIR.mkdir(exist_ok=True)
    for stale in set(SMOKE_DIR.glob("*.ipynb")) - {SMOKE_DIR / name for name in SMOKE_PARAMETERS}:
        stale.unlink()
    for name, parameters in SMOKE_PARAMETERS.items():
        if takes_results_dir(name):
            parameters = parameters | {"results_dir": str(results_dir(name))}
        notebook = papermill.execute_notebook(str(NOTEBOOKS / name), None, parameters=parameters,
                                              prepare_only=True, kernel_name="pslab", progress_bar=False)
        partial = SMOKE_DIR / f".{name}.{os.getpid()}"
        nbformat.write(notebook, partial)
        os.replace(partial, SMOKE_DIR / name)
