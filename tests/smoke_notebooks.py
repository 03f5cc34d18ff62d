"""Small parameters for every notebook, so the test suite runs each one in minutes.

`make test` runs nbval on papermill-prepared copies of the notebooks written to
`tests/smoke/` (the learner defaults train for longer; `make test-defaults` runs
those). Each notebook asserts its own outcomes, so a smoke copy still checks
accuracy, perplexity and recovery, at a smaller scale.
"""
import shutil
from pathlib import Path

import nbformat
import papermill

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SMOKE_DIR = Path(__file__).resolve().parent / "smoke"
RESULTS_DIR = ROOT / "runs" / "smoke-results"  # each smoke run records its results.json here

SMALL_TRAINING = {"epochs": 3, "steps_per_epoch": 40, "target_accuracy": 0.8, "snippet_timeout_s": 8}
SMOKE_PARAMETERS = {
    "00_welcome.ipynb": {},
    "01_tf_config_and_cluster.ipynb": {},
    "02_strategy_and_mnist.ipynb": SMALL_TRAINING,
    "03_custom_training_loop.ipynb": {"num_workers": 2, "num_ps": 2, "num_steps": 200,
                                      "timing_steps": 100, "target_accuracy": 0.8},
    # 200 steps: the LM must still beat the unigram count model (the learner run asserts the bigram).
    "04_mini_transformer_lm.ipynb": {"num_steps": 200, "sample_length": 60, "must_beat": "unigram"},
    # One seed: top-k both ways must still cut total socket bytes >= 20x within 5 points, DGC must not
    # lose to naive top-k with momentum, QSGD within its variance bound (asserted inside).
    "05_gradient_compression.ipynb": {"num_steps": 300, "seeds": [0], "max_accuracy_loss": 0.05, "dgc_seeds": [0],
                                      "dgc_min_gain": 0.0, "qsgd_levels": [2], "compare_all_compressors": False},
    # One worker never stale, two with one slowed measurably stale; SSP waits, the filter drops exactly
    # tau > bound; plain async loses >= 5 points at delay 16 and alpha/tau wins back half, over 2 seeds.
    # Packing 10 too: its functions, freed after their cluster stopped, once printed red lines.
    "06_stale_gradients.ipynb": {"worker_counts": [1, 2], "steps_per_closure": [1, 10], "histogram_steps": 100,
                                 "delay_kinds": ["constant"], "seeds": [0, 1], "num_steps": 200},
    # The restarted worker must get work: the driver waits until the coordinator reconnected it, and 260
    # steps remain after its restart (with 160 and no wait, in a fresh-clone run, it got none).
    "07_fault_tolerance.ipynb": {"num_steps": 400, "checkpoint_every": 50, "worker_kill_step": 80,
                                 "worker_restart_step": 140, "ps_kill_step": 130,
                                 "coordinator_kill_step": 150, "fit_epochs": 3, "fit_steps_per_epoch": 30,
                                 "checkpoint_ballast_floats": 2_000_000},
    # One cluster shape, 1 and 10 steps per closure, the MLP: bytes per step are still checked against M, and the cost model
    # predicts every custom-loop point (asserted inside). With a second shape (workers [1, 2]) one run in three
    # printed a worker's "Socket closed" at MultiDeviceIteratorInit, so the smoke run keeps one shape.
    "08_performance_analysis.ipynb": {"workers": [1], "ps": [1], "steps_per_closure": [1, 10], "models": ["mlp"],
                                      "batch_sizes": [64], "repeats": 2, "min_steps": 10, "target_accuracy": 0.5,
                                      "out_dir": "../../runs/bench/smoke08"},
    "09_laptop_to_cluster.ipynb": {"num_workers": 1, "num_steps": 150, "checkpoint_every": 50,
                                   "target_accuracy": 0.8},
    # 2 workers, both strategies, both models, shorter: accuracy, the lockstep limit, bytes per step
    # and where the table lives are still asserted inside.
    # A 250,000-row table (16 MB): the rows on the wire must stay under 1% of it, as at the default 1M.
    "10_ps_vs_allreduce.ipynb": {"intervals": 2, "batches_per_interval": 40, "target_accuracy": 0.6,
                                 "slow_intervals": 1, "embedding_rows": 250_000, "embedding_intervals": 1},
}


def results_dir(name):
    """Where the smoke run of notebook ``name`` records its results (``labkit.results``)."""
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
