"""Benchmarks that measure side by side in one run and print ratios: ``labkit bench``.

``labkit bench``: the benchmark's points measured. Training throughput (samples/s, steps/s),
time to a target accuracy, CPU per task and bytes per step, against the number of
workers and parameter servers, step packing, model size and batch size; with a
single-process baseline measured just before and just after each point and ``model.fit`` in
the same run, so every figure is also a ratio. ``labkit bench --report`` runs notebook 08
on the points. ``labkit bench startup``: cluster start-to-ready against a bare
TensorFlow import.

One module per concern:

- ``points``: the points the benchmark measures, its settings and their checks
- ``workloads``: the models and their real data
- ``measure``: every point on its cluster between two measurements of its baseline (a warm-up interval, then intervals timed by
  ``labkit.meter.Meter``, with ``model.fit`` or ``labkit.train.run``), as result rows with ratios
- ``files``, ``plots``: results as CSV/JSON, a text table, the figure
- ``report``: every point measured and saved, or run through notebook 08
- ``costmodel``: steps/s predicted from costs measured on one worker, and the slowest resource
- ``link``: one point over rate-limited links between network namespaces, against the cost model
- ``startup``: the start-up benchmark
"""
from labkit.bench import costmodel
from labkit.bench.files import format_table, load, machine, save
from labkit.bench.points import DEFAULTS, Point, base_point, check, interval_steps, points
from labkit.bench.plots import plot, plot_predictions
from labkit.bench.report import NOTEBOOK, report, run_and_save
from labkit.bench.startup import startup
from labkit.bench.measure import (Baseline, Connected, add_ratios, measure_on_cluster, measure_points, result_row,
                                  run_custom, run_fit)
from labkit.bench.workloads import LM_SEQUENCE_LENGTH, MNIST_MODELS, MODELS, Data, Workload, workload

__all__ = ["costmodel", "format_table", "load", "machine", "save", "run_custom", "run_fit", "DEFAULTS", "Point",
           "base_point", "check", "interval_steps", "points", "plot", "plot_predictions", "NOTEBOOK", "report", "run_and_save",
           "startup", "Baseline", "Connected", "add_ratios", "measure_on_cluster",
           "result_row", "measure_points", "LM_SEQUENCE_LENGTH", "MNIST_MODELS", "MODELS", "Data", "Workload", "workload"]
