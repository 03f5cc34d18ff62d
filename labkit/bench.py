"""Benchmarks that measure side by side in one run and print ratios.

``labkit bench``: a performance sweep. Training throughput (samples/s, steps/s),
time to a target accuracy, CPU per task and bytes per step, against the number of
workers and parameter servers, step packing, model size and batch size; with a
single-process baseline and ``model.fit`` measured in the same run, so every figure
is also a ratio. ``labkit bench --report`` runs notebook 08 on the sweep.

``python -m labkit.bench startup``: how long a LocalCluster takes from start()
to every task serving, against a bare ``python -c "import tensorflow"`` timed
in the same run. Importing TensorFlow is the floor for any task process, so
the ratio shows what the cluster machinery adds on top.
"""
import argparse
import csv
import gc
import itertools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import psutil

import labkit
from labkit import traffic
from labkit.cluster import LocalCluster

MODELS = {
    "mlp": "MNIST MLP, 128 hidden units",
    "wide-mlp": "MNIST MLP, 1024 hidden units",
    "lm": "mini transformer LM (2 layers, d_model 64) on Python's help text, 32-character windows",
}
MNIST_MODELS = ("mlp", "wide-mlp")
LM_SEQUENCE_LENGTH = 32
LOOPS = ("custom", "fit", "single-process")
NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "08_performance_analysis.ipynb"


# ----- statistics -------------------------------------------------------------
def spread(values):
    """Median, quartiles and extremes of a list of measurements."""
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return {"median": float(median), "q1": float(q1), "q3": float(q3),
            "min": float(min(values)), "max": float(max(values))}


def first_reaching(values, target):
    """Index of the first value >= target, or None."""
    return next((i for i, value in enumerate(values) if value >= target), None)


# ----- what to measure ----------------------------------------------------------
@dataclass(frozen=True)
class Point:
    """One measurement: a model trained by a loop on a cluster shape, with a packing and batch size.

    ``loop`` is "custom" (labkit.train), "fit" (tf_keras model.fit) or "single-process"
    (plain Keras model.fit, no cluster: workers = ps = 0).
    """

    model: str
    loop: str
    workers: int
    ps: int
    packing: int
    batch_size: int


def _check_counts(name, values, flag, minimum=1, example="1 2 4"):
    if not values or any(not isinstance(v, int) or v < minimum for v in values):
        raise ValueError(f"{name} must be whole numbers >= {minimum}, got {list(values)}. "
                         f"Give e.g. {flag} {example}.")


def plan(workers, ps, packing, models, batch_sizes, cores=None):
    """The points of a sweep: a curve over workers x packing, every other axis varied around a base point.

    The base point uses the first model, PS count and batch size, and the worker count
    closest to the number of cores. At the base: every model x PS count x packing, model.fit
    against the custom loop for the MNIST models, and every batch size. Each (model, batch
    size) also gets a single-process baseline at the largest packing.
    """
    _check_counts("worker counts", workers, "--workers", example="1 2 3 4")
    _check_counts("parameter server counts", ps, "--ps", example="1 2")
    _check_counts("steps per closure (packing)", packing, "--packing", example="1 10 50")
    _check_counts("batch sizes", batch_sizes, "--batch-sizes", example="64 256")
    unknown = [name for name in models if name not in MODELS] or ([] if models else ["(none)"])
    if unknown:
        raise ValueError(f"unknown model {unknown[0]!r}: choose from {', '.join(MODELS)}, "
                         f"e.g. --models mlp lm.")
    base_workers, num_ps, batch = base_point(workers, ps, batch_sizes, cores)
    model = models[0]
    points = [Point(model, "custom", w, num_ps, k, batch) for w, k in itertools.product(workers, packing)]
    points += [Point(m, "custom", base_workers, p, k, batch) for m, p, k in itertools.product(models, ps, packing)]
    points += [Point(m, "fit", base_workers, num_ps, k, batch)
               for m, k in itertools.product(models, packing) if m in MNIST_MODELS]
    points += [Point(model, "custom", base_workers, num_ps, k, b) for b, k in itertools.product(batch_sizes, packing)]
    baselines = [Point(p.model, "single-process", 0, 0, max(packing), p.batch_size) for p in points]
    return list(dict.fromkeys(baselines + points))  # in order, without repeats


def base_point(workers, ps, batch_sizes, cores=None):
    """(workers, ps, batch size) of the base point: the worker count closest to the cores, the first of the others."""
    cores = cores or os.cpu_count()
    return min(workers, key=lambda count: (abs(count - cores), count)), ps[0], batch_sizes[0]


# ----- workloads ------------------------------------------------------------------
class Data:
    """The real data every workload trains on, loaded once per sweep."""

    def __init__(self, models):
        from labkit.data import load_mnist, load_text_corpus

        self.mnist = load_mnist() if set(models) & set(MNIST_MODELS) else None
        self.corpus = load_text_corpus() if "lm" in models else None


@dataclass
class Workload:
    """A compiled model, its input pipeline and (for MNIST) its test accuracy."""

    model: object
    dataset_fn: object  # () -> repeating tf.data.Dataset of (features, labels) batches
    evaluate: object    # () -> test accuracy, or None for the LM
    metrics: list = field(default_factory=list)


def workload(name, data, batch_size, packing, seed=0):
    """Build model ``name`` (call it under ``strategy.scope()`` for a cluster) and its data."""
    import tensorflow as tf

    from labkit import fit, models
    from labkit.data import mnist_dataset_fn, next_token_windows

    tf.keras.utils.set_random_seed(seed)
    if name in MNIST_MODELS:
        mnist = data.mnist
        model = models.mnist_mlp(hidden_units=128 if name == "mlp" else 1024, steps_per_execution=packing)

        return Workload(model, mnist_dataset_fn(mnist, batch_size, seed), lambda: fit.accuracy(model, mnist.x_test, mnist.y_test),
                        [tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
    corpus, sequence_length = data.corpus, LM_SEQUENCE_LENGTH
    model = models.mini_transformer_lm(len(corpus.vocabulary), sequence_length)
    model.compile(optimizer=tf.keras.optimizers.legacy.Adam(3e-3), loss=models.mean_cross_entropy,
                  steps_per_execution=packing)
    return Workload(model, lambda: next_token_windows(corpus.train_ids, sequence_length, batch_size, seed),
                    lambda: None)


def parameter_bytes(model):
    """M: bytes of the trainable parameters, what a worker pulls (and pushes as gradients) per step."""
    return sum(4 * v.shape.num_elements() for v in model.trainable_variables)


# ----- measuring --------------------------------------------------------------------
class Meter:
    """Wall time, CPU seconds of each task and bytes through the parameter servers, per interval."""

    def __init__(self, pids, ps_pids=()):
        self.pids = pids  # task name -> process id
        self.ps_pids = list(ps_pids) if traffic.available() else []
        self.seconds, self.cpu_seconds = [], dict.fromkeys(pids, 0.0)
        self.bytes = traffic.Traffic(0, 0) if self.ps_pids else None

    def _read(self):
        cpu = {name: sum(psutil.Process(pid).cpu_times()[:2]) for name, pid in self.pids.items()}
        return time.perf_counter(), cpu, traffic.process_traffic(self.ps_pids) if self.ps_pids else None

    def begin(self):
        self._began = self._read()

    def end(self):
        (began, cpu_before, bytes_before), (ended, cpu_after, bytes_after) = self._began, self._read()
        self.seconds.append(ended - began)
        for name in self.pids:
            self.cpu_seconds[name] += cpu_after[name] - cpu_before[name]
        if self.ps_pids:
            self.bytes = self.bytes + (bytes_after - bytes_before)


def _interval_callback(meter, evaluate, accuracies):
    """A Keras callback: epoch 0 is the warm-up; every later epoch is one timed interval."""
    import tensorflow as tf

    class Intervals(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch:
                meter.begin()

        def on_epoch_end(self, epoch, logs=None):
            if epoch:
                meter.end()
            accuracies.append(evaluate())
    return Intervals()


def run_fit(work, meter, steps, repeats, dataset):
    """Warm-up epoch + ``repeats`` timed epochs of ``steps`` steps with model.fit; test accuracy after each."""
    accuracies = []
    work.model.fit(dataset, epochs=repeats + 1, steps_per_epoch=steps, verbose=0,
                   callbacks=[_interval_callback(meter, work.evaluate, accuracies)])
    return accuracies


def run_custom(work, meter, steps, repeats, packing, strategy, coordinator):
    """The same with labkit.train's packed closures: schedule steps / packing closures, join, evaluate."""
    from labkit import models, train

    batches = train.per_worker_iterator(coordinator, work.dataset_fn)
    train_steps = train.make_train_steps(strategy, work.model, work.model.optimizer, models.mean_cross_entropy,
                                         packing, work.metrics)
    accuracies = []
    for interval in range(repeats + 1):
        if interval:
            meter.begin()
        for _ in range(steps // packing):
            coordinator.schedule(train_steps, args=(batches,))
        coordinator.join()
        if interval:
            meter.end()
        accuracies.append(work.evaluate())
    return accuracies


def interval_steps(point, min_steps):
    """Steps per interval: at least ``min_steps``, and whole closures for every worker."""
    unit = point.packing * max(1, point.workers)
    return unit * math.ceil(min_steps / unit)


def result_row(point, work, meter, steps, accuracies, target_accuracy):
    """One flat row of results (for the CSV) from a finished measurement."""
    steps_per_s = spread([steps / s for s in meter.seconds])
    wall = sum(meter.seconds)
    reached = first_reaching([a if a is not None else -1 for a in accuracies], target_accuracy)
    steps_to_target = (reached + 1) * steps if reached is not None else None
    M = parameter_bytes(work.model)
    row = {**asdict(point), "parameter_bytes": M, "interval_steps": steps, "intervals": len(meter.seconds),
           **{f"steps_per_s_{k}": v for k, v in steps_per_s.items()},
           **{f"samples_per_s_{k}": v * point.batch_size for k, v in steps_per_s.items()},
           "final_accuracy": accuracies[-1], "steps_to_target": steps_to_target,
           # steps needed x time per step at the steady rate (tracing and evaluation excluded)
           "seconds_to_target": steps_to_target / steps_per_s["median"] if steps_to_target else None,
           "cpu_coordinator": meter.cpu_seconds["coordinator"] / wall,
           "cpu_workers": sum(v for k, v in meter.cpu_seconds.items() if k.startswith("worker")) / wall,
           "cpu_ps": sum(v for k, v in meter.cpu_seconds.items() if k.startswith("ps")) / wall,
           "cpu_per_task": {k: v / wall for k, v in meter.cpu_seconds.items()},
           "analytic_bytes_per_step": 2 * M if point.workers else 0,
           "analytic_bytes_per_ps_per_step": 2 * M / point.ps if point.workers else 0}
    measured = meter.bytes / (steps * len(meter.seconds)) if meter.bytes else None
    row["measured_push_bytes_per_step"] = measured.received if measured else None
    row["measured_pull_bytes_per_step"] = measured.sent if measured else None
    return row


def measure_single_process(point, data, repeats, min_steps, target_accuracy):
    """Plain Keras model.fit in this process, no cluster: the baseline every ratio divides by."""
    work = workload(point.model, data, point.batch_size, point.packing)
    meter, steps = Meter({"coordinator": os.getpid()}), interval_steps(point, min_steps)
    accuracies = run_fit(work, meter, steps, repeats, work.dataset_fn())
    return result_row(point, work, meter, steps, accuracies, target_accuracy)


def measure_on_cluster(point, cluster, strategy, coordinator, data, repeats, min_steps, target_accuracy):
    """One point on a running cluster, with the custom loop or model.fit."""
    import tensorflow as tf

    with strategy.scope():
        work = workload(point.model, data, point.batch_size, point.packing)
    pids = {"coordinator": os.getpid(), **{task.name: task.pid for task in cluster.tasks}}
    meter, steps = Meter(pids, traffic.ps_pids(cluster)), interval_steps(point, min_steps)
    if point.loop == "fit":
        dataset = tf.keras.utils.experimental.DatasetCreator(lambda context: work.dataset_fn())
        accuracies = run_fit(work, meter, steps, repeats, dataset)
    else:
        accuracies = run_custom(work, meter, steps, repeats, point.packing, strategy, coordinator)
    return result_row(point, work, meter, steps, accuracies, target_accuracy)


def sweep(points, repeats=5, min_steps=50, target_accuracy=0.9, data=None, min_shard_bytes=64 * 1024):
    """Measure every point; one cluster per (workers, ps) shape. Returns rows with ratios added.

    Each point: one warm-up interval (tracing, dataset creation, first pulls), then
    ``repeats`` timed intervals of at least ``min_steps`` steps, test accuracy after each.
    ``data``: a ``Data`` already loaded for these models (loaded here if not given).
    Variables of at least ``min_shard_bytes`` are sharded over the parameter servers.
    """
    import tensorflow as tf
    from tqdm.auto import tqdm

    data = data or Data({p.model for p in points})
    rows = []
    with tqdm(total=len(points), desc="bench", unit="point") as bar:
        for point in [p for p in points if p.loop == "single-process"]:
            bar.set_postfix_str(f"{point.model} single process")
            rows.append(measure_single_process(point, data, repeats, min_steps, target_accuracy))
            bar.update()
        for (workers, ps), group in itertools.groupby(
                sorted((p for p in points if p.loop != "single-process"), key=lambda p: (p.workers, p.ps)),
                key=lambda p: (p.workers, p.ps)):
            with LocalCluster(workers, ps, name="bench") as cluster:
                partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(min_shard_bytes, ps)
                strategy = cluster.strategy(variable_partitioner=partitioner)
                coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
                for point in group:
                    bar.set_postfix_str(f"{point.model} {point.loop} {workers}w {ps}ps K={point.packing}")
                    rows.append(measure_on_cluster(point, cluster, strategy, coordinator, data,
                                                   repeats, min_steps, target_accuracy))
                    gc.collect()  # free this point's functions while their workers still run
                    bar.update()
    return add_ratios(rows)


def add_ratios(rows):
    """Each row's samples/s divided by the single-process baseline of the same model and batch size."""
    baseline = {(r["model"], r["batch_size"]): r["samples_per_s_median"] for r in rows
                if r["loop"] == "single-process"}
    for row in rows:
        base = baseline.get((row["model"], row["batch_size"]))
        row["ratio_to_single_process"] = row["samples_per_s_median"] / base if base else None
    return rows


# ----- results ------------------------------------------------------------------------
def machine():
    """What the numbers were measured on: cores, memory, load, versions."""
    return {"cores": os.cpu_count(), "physical_cores": psutil.cpu_count(logical=False),
            "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "load_average_1_5_15_min": [round(x, 2) for x in os.getloadavg()],
            "platform": platform.platform(), "versions": labkit.versions()}


def save(rows, out_dir, settings):
    """Write results.csv and results.json (with the machine description and settings); return the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    columns = [name for name in rows[0] if name != "cpu_per_task"]
    with open(out_dir / "results.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    document = {"machine": machine(), "settings": settings, "models": MODELS, "results": rows}
    (out_dir / "results.json").write_text(json.dumps(document, indent=1))
    return out_dir / "results.csv", out_dir / "results.json"


def format_table(rows):
    """A text table: samples/s (median, quartiles), ratio to one process, time to target, CPU, bytes."""
    def number(value, form, scale=1):
        return "-" if value is None else format(value / scale, form)

    lines = [f"{'model':<9}{'loop':<15}{'w':>2}{'ps':>3}{'K':>4}{'batch':>6}{'samples/s':>10}{'q1–q3':>14}"
             f"{'÷1 proc':>8}{'to target s':>12}{'CPU coord/work/ps':>19}{'pull/push KB/step':>19}"]
    for r in rows:
        quartiles = f"{r['samples_per_s_q1']:,.0f}–{r['samples_per_s_q3']:,.0f}"
        cpu = f"{r['cpu_coordinator']:.2f}/{r['cpu_workers']:.2f}/{r['cpu_ps']:.2f}"
        kilobytes = [number(r[f"measured_{d}_bytes_per_step"], ",.0f", 1e3) for d in ("pull", "push")]
        lines.append(f"{r['model']:<9}{r['loop']:<15}{r['workers']:>2}{r['ps']:>3}{r['packing']:>4}{r['batch_size']:>6}"
                     f"{r['samples_per_s_median']:>10,.0f}{quartiles:>14}{number(r['ratio_to_single_process'], '.2f'):>8}"
                     f"{number(r['seconds_to_target'], '.1f'):>12}{cpu:>19}{'/'.join(kilobytes):>19}")
    return "\n".join(lines)


def load(out_dir):
    """The document saved by ``save``: machine, settings, models and result rows."""
    return json.loads((Path(out_dir) / "results.json").read_text())


def plot(rows, path, base):
    """Four panels: samples/s against workers; ratio to one process; PS count per model; custom vs fit.

    ``base``: the (workers, ps, batch size) of the base point, from ``base_point``.
    """
    from matplotlib.figure import Figure  # no pyplot: works headless (Agg) and shows in a notebook
    from matplotlib.ticker import MaxNLocator

    figure = Figure(figsize=(12, 8.5))
    axes = figure.subplots(2, 2)
    workers, ps, batch = base
    custom = [r for r in rows if r["loop"] == "custom"]
    first_model = custom[0]["model"]

    def errorbars(axis, chosen, x, label, **style):
        chosen = sorted(chosen, key=lambda r: r[x])
        y = [r["samples_per_s_median"] for r in chosen]
        low = [r["samples_per_s_median"] - r["samples_per_s_q1"] for r in chosen]
        high = [r["samples_per_s_q3"] - r["samples_per_s_median"] for r in chosen]
        axis.errorbar([r[x] for r in chosen], y, yerr=[low, high], marker="o", capsize=3, label=label, **style)

    axis = axes[0, 0]
    for packing in sorted({r["packing"] for r in custom}):
        errorbars(axis, [r for r in custom if r["model"] == first_model and r["ps"] == ps and
                         r["batch_size"] == batch and r["packing"] == packing], "workers", f"{packing} steps/closure")
    for r in rows:
        if r["loop"] == "single-process" and r["model"] == first_model and r["batch_size"] == batch:
            axis.axhline(r["samples_per_s_median"], color="grey", linestyle=":", label="one process, no cluster")
    axis.set(title=f"{first_model}: samples/s against workers ({ps} ps)", xlabel="workers", ylabel="samples/s")
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.legend(fontsize=8)

    axis = axes[0, 1]
    at_base = [r for r in custom if (r["workers"], r["ps"], r["batch_size"]) == (workers, ps, batch)]
    models = list(dict.fromkeys(r["model"] for r in at_base))
    packings = sorted({r["packing"] for r in at_base})
    width = 0.8 / len(packings)
    for i, packing in enumerate(packings):
        ratios = [next((r["ratio_to_single_process"] or 0 for r in at_base
                        if r["model"] == m and r["packing"] == packing), 0) for m in models]
        axis.bar(np.arange(len(models)) + i * width, ratios, width, label=f"{packing} steps/closure")
    axis.axhline(1, color="grey", linestyle=":")
    axis.set(title=f"cluster ÷ one process, samples/s ({workers} workers, {ps} ps)", ylabel="ratio",
             xticks=np.arange(len(models)) + width * (len(packings) - 1) / 2, xticklabels=models)
    axis.legend(fontsize=8)

    axis = axes[1, 0]
    top = max(packings)
    for model in models:
        errorbars(axis, [r for r in custom if r["model"] == model and r["workers"] == workers and
                         r["batch_size"] == batch and r["packing"] == top], "ps", model)
    axis.set(title=f"samples/s against parameter servers ({workers} workers, {top} steps/closure)",
             xlabel="parameter servers", ylabel="samples/s", yscale="log")
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.legend(fontsize=8)

    axis = axes[1, 1]
    for loop, style in (("custom", "-"), ("fit", "--")):
        for color, model in zip(("C0", "C1"), MNIST_MODELS):
            chosen = [r for r in rows if r["loop"] == loop and r["model"] == model and
                      (r["workers"], r["ps"], r["batch_size"]) == (workers, ps, batch)]
            if chosen:
                errorbars(axis, chosen, "packing", f"{model} {'labkit.train' if loop == 'custom' else 'model.fit'}",
                          linestyle=style, color=color)
    axis.set(title=f"custom loop vs model.fit ({workers} workers, {ps} ps)", xlabel="steps per closure / execution",
             ylabel="samples/s", xscale="log")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return figure


DEFAULTS = {"workers": [1, 2, 3, 4], "ps": [1, 2], "packing": [1, 10, 50], "models": list(MODELS),
            "batch_sizes": [64, 256], "repeats": 5, "min_steps": 50, "target_accuracy": 0.9}


def check(settings):
    """Raise a ValueError saying what is wrong with a sweep's settings (see DEFAULTS), and return its points."""
    unknown = set(settings) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown setting(s) {sorted(unknown)}; the settings are {', '.join(DEFAULTS)}.")
    settings = {**DEFAULTS, **settings}
    if not isinstance(settings["repeats"], int) or settings["repeats"] < 2:
        raise ValueError(f"repeats must be a whole number >= 2 to show a spread, got {settings['repeats']!r}; "
                         "e.g. --repeats 5.")
    if not isinstance(settings["min_steps"], int) or settings["min_steps"] < 1:
        raise ValueError(f"min_steps must be a whole number >= 1, got {settings['min_steps']!r}; e.g. --min-steps 100.")
    if not 0 < settings["target_accuracy"] <= 1:
        raise ValueError(f"target_accuracy must be in (0, 1], got {settings['target_accuracy']!r}; "
                         "e.g. --target-accuracy 0.85.")
    return plan(*(settings[name] for name in ("workers", "ps", "packing", "models", "batch_sizes")))


def run_and_save(out_dir, **settings):
    """Plan, sweep, save CSV + JSON + sweep.png in ``out_dir``; return the rows. Settings: see DEFAULTS."""
    points = check(settings)
    settings = {**DEFAULTS, **settings}
    rows = sweep(points, settings["repeats"], settings["min_steps"], settings["target_accuracy"])
    csv_path, json_path = save(rows, out_dir, settings)
    plot(rows, Path(out_dir) / "sweep.png", base_point(settings["workers"], settings["ps"], settings["batch_sizes"]))
    print(format_table(rows))
    print(f"saved {csv_path}, {json_path} and {Path(out_dir) / 'sweep.png'}")
    return rows


def report(out_dir, **settings):
    """Run notebook 08 with papermill on these settings; it writes its results into ``out_dir``."""
    import papermill

    check(settings)
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    parameters = {name: list(value) if isinstance(value, tuple) else value for name, value in settings.items()}
    executed = out_dir / NOTEBOOK.name
    papermill.execute_notebook(str(NOTEBOOK), str(executed), parameters={**parameters, "out_dir": str(out_dir)},
                               cwd=str(NOTEBOOK.parent), kernel_name="pslab", progress_bar=False)
    print(f"executed notebook: {executed}")
    return executed


# ----- start-up benchmark -----------------------------------------------------------------
def time_bare_import():
    """Seconds for a fresh Python process to import TensorFlow and exit."""
    began = time.monotonic()
    subprocess.run([sys.executable, "-c", "import tensorflow"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - began


def time_cluster_start(num_workers, num_ps):
    """Seconds from LocalCluster start() to every task serving."""
    with LocalCluster(num_workers, num_ps, name="bench-startup") as cluster:
        return cluster.ready_seconds


def startup(repeats, num_workers, num_ps, out_dir):
    """Alternate the two measurements ``repeats`` times; print medians and their ratio."""
    imports, starts = [], []
    for round_number in range(1, repeats + 1):
        imports.append(time_bare_import())
        starts.append(time_cluster_start(num_workers, num_ps))
        print(f"round {round_number}/{repeats}: import tensorflow {imports[-1]:.2f} s, "
              f"cluster ready {starts[-1]:.2f} s", flush=True)
    result = {
        "benchmark": "startup", "num_workers": num_workers, "num_ps": num_ps, "repeats": repeats,
        "import_tensorflow_s": statistics.median(imports), "cluster_ready_s": statistics.median(starts),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
    }
    result["ratio"] = result["cluster_ready_s"] / result["import_tensorflow_s"]
    print(f"\nmedian bare `import tensorflow`: {result['import_tensorflow_s']:.2f} s")
    print(f"median cluster start-to-ready ({num_workers} workers + {num_ps} ps, started in parallel): "
          f"{result['cluster_ready_s']:.2f} s")
    print(f"ratio cluster / import: {result['ratio']:.2f} (goal: <= 1.5)")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "startup.json").write_text(json.dumps(result, indent=2))
    print(f"saved {out_dir / 'startup.json'}")
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m labkit.bench", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="benchmark", required=True)
    start = commands.add_parser("startup", help="cluster start-to-ready vs bare TensorFlow import")
    start.add_argument("--repeats", type=int, default=3)
    start.add_argument("--workers", type=int, default=2)
    start.add_argument("--ps", type=int, default=1)
    start.add_argument("--out", type=Path, default=Path("runs/bench"))
    args = parser.parse_args(argv)
    startup(args.repeats, args.workers, args.ps, args.out)


if __name__ == "__main__":
    main()
