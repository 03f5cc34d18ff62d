"""Benchmarks that measure side by side in one run and print ratios: ``labkit bench``.

``labkit bench``: the benchmark's points measured. Training throughput (samples/s, steps/s),
time to a target accuracy, CPU per task and bytes per step, against the number of
workers and parameter servers, step packing, model size and batch size; every point of a cluster shape
and its single-process baseline timed in the same rounds, interleaved, with ``model.fit`` in the same
run, so every figure is also a ratio measured side by side. ``labkit bench --report`` runs notebook 08
on the points. ``labkit bench startup``: cluster start-to-ready against a bare
TensorFlow import.

One module per concern:

- ``points``: the points the benchmark measures, its settings and their checks
- ``workloads``: the models and their real data
- ``measure``: every point on its cluster shape, beside its single-process baseline: a warm-up interval each, then
  rounds of one interval of each (timed by ``labkit.meter.Meter``, with ``model.fit`` or ``labkit.train.run``), the
  order reversed every other round, as result rows with ratios
- ``files``, ``plots``: results as CSV/JSON, a text table, the figure
- ``report``: every point measured and saved, or run through notebook 08
- ``costmodel``: steps/s predicted from costs measured on one worker, and the slowest resource
- ``link``: one point over rate-limited links between network namespaces, against the cost model
- ``startup``: the start-up benchmark
"""
from labkit.bench import costmodel
from labkit.bench.files import format_table, load, machine, save
from labkit.bench.points import DEFAULTS, Point, base_point, check, interval_steps, points, shape
from labkit.bench.plots import plot, plot_predictions
from labkit.bench.report import NOTEBOOK, report, run_and_save
from labkit.bench.startup import startup
from labkit.bench.measure import (Connected, Measured, add_ratios, baseline, custom_loop, fit_loop, measure_points, on_cluster,
                                  placed_on, result_row, target_outcome)
from labkit.bench.workloads import LM_SEQUENCE_LENGTH, MNIST_MODELS, MODELS, Data, Workload, workload

__all__ = ["costmodel", "format_table", "load", "machine", "save", "custom_loop", "fit_loop", "DEFAULTS", "Point",
           "base_point", "check", "interval_steps", "points", "shape", "plot", "plot_predictions", "NOTEBOOK", "report",
           "run_and_save", "startup", "Connected", "Measured", "add_ratios", "baseline", "on_cluster", "placed_on",
           "result_row", "target_outcome", "measure_points", "LM_SEQUENCE_LENGTH", "MNIST_MODELS", "MODELS", "Data", "Workload", "workload"]
