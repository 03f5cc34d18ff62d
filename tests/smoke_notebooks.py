"""Small parameters for every notebook, so the test suite runs each one in minutes.

`make test` runs nbval on papermill-prepared copies of the notebooks written to
`tests/smoke/`, with the parameters each notebook's manifest gives (the learner
defaults train for longer; `make test-defaults` runs those). Each notebook asserts its own outcomes, so a smoke copy still checks
accuracy, perplexity and recovery, at a smaller scale.
"""
import shutil
from pathlib import Path

import nbformat
import papermill

from labkit.tools import manifest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SMOKE_DIR = Path(__file__).resolve().parent / "smoke"
RESULTS_DIR = ROOT / "runs" / "smoke-results"  # each smoke run records its results.json here

# Each notebook's manifest (its "labkit" metadata, labkit.tools.manifest) holds its smoke parameters and why they suffice.
MANIFESTS = manifest.read_all(NOTEBOOKS)
SMOKE_PARAMETERS = {name: notebook.smoke_parameters for name, notebook in MANIFESTS.items()}


def results_dir(name):
    """Where the smoke run of notebook ``name`` records its results (``labkit.tools.results``)."""
    return RESULTS_DIR / Path(name).stem


def takes_results_dir(name):
    """Whether the notebook's parameters cell has ``results_dir``."""
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    return any("parameters" in cell.metadata.get("tags", []) and "results_dir" in cell.source
               for cell in notebook.cells)


def prepare(destination=SMOKE_DIR):
    """Write each notebook with its smoke parameters injected (not executed)."""
    destination.mkdir(exist_ok=True)
    for stale in destination.glob("*.ipynb"):
        stale.unlink()
    shutil.rmtree(RESULTS_DIR, ignore_errors=True)  # a result must come from this run
    for name, parameters in SMOKE_PARAMETERS.items():
        if takes_results_dir(name):
            parameters = parameters | {"results_dir": str(results_dir(name))}
        papermill.execute_notebook(str(NOTEBOOKS / name), str(destination / name), parameters=parameters,
                                   prepare_only=True, kernel_name="pslab", progress_bar=False)
    return sorted(destination.glob("*.ipynb"))
