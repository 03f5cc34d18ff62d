"""Every point measured on its cluster, a warm-up then timed intervals, beside a single-process baseline.

Each point gives one result row."""
import gc
import itertools
import math
import os
import time
from dataclasses import asdict, dataclass

from labkit import traffic
from labkit.bench.points import interval_steps
from labkit.bench.workloads import Data, workload
from labkit.cluster import LocalCluster
from labkit.meter import Meter
from labkit.progress import ProgressLines
from labkit.verdict import five_number_summary

MIN_BASELINE_SECONDS = 0.25  # each timed interval of a single-process baseline lasts at least this long


def machine_cpu_seconds():
    """CPU seconds every program on this machine has used so far (all cores; idle and I/O wait excluded)."""
    import psutil

    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


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
    """Warm-up epoch + ``repeats`` epochs of ``steps`` steps timed by ``meter``, with model.fit; test accuracy after each."""
    accuracies = []
    work.model.fit(dataset, epochs=repeats + 1, steps_per_epoch=steps, verbose=0,
                   callbacks=[_interval_callback(meter, work.evaluate, accuracies)])
    return accuracies


def run_custom(work, meter, steps, repeats, steps_per_closure, strategy, coordinator):
    """The same with labkit.train's packed closures: a warm-up interval, then ``repeats`` timed by ``meter``."""
    from labkit import models, train

    batches = train.per_worker_iterator(coordinator, work.dataset_fn)
    train_steps = train.make_train_steps(strategy, work.model, work.model.optimizer, models.mean_cross_entropy,
                                         steps_per_closure, work.metrics)

    def evaluate():
        return {"accuracy": work.evaluate()}

    warm_up = train.run(coordinator, train_steps, batches, steps, steps_per_closure, log_every_steps=steps,
                        recording=train.Recording(evaluate=evaluate, description=None))  # tracing, datasets, first pulls
    timed = train.run(coordinator, train_steps, batches, repeats * steps, steps_per_closure, log_every_steps=steps,
                      recording=train.Recording(evaluate=evaluate, description=None, meter=meter))
    return warm_up.accuracy + timed.accuracy


def result_row(point, work, meter, steps, accuracies, target_accuracy):
    """One flat row of results (for the CSV) from a finished measurement."""
    from labkit.models import model_bytes  # TensorFlow: imported here, so that `labkit --help` starts fast
    from labkit.train import first_reaching

    steps_per_s = five_number_summary([steps / s for s in meter.seconds])
    wall = sum(meter.seconds)
    reached = first_reaching(accuracies, target_accuracy)
    steps_to_target = (reached + 1) * steps if reached is not None else None
    M = model_bytes(work.model)
    row = {**asdict(point), "model_bytes": M, "interval_steps": steps, "intervals": len(meter.seconds),
           **{f"steps_per_s_{k}": v for k, v in steps_per_s.items()},
           **{f"samples_per_s_{k}": v * point.batch_size for k, v in steps_per_s.items()},
           "samples_per_s_intervals": [steps * point.batch_size / s for s in meter.seconds],  # JSON only: a verdict's values
           "final_accuracy": accuracies[-1], "steps_to_target": steps_to_target,
           # steps needed x time per step at the steady rate (tracing and evaluation excluded)
           "seconds_to_target": steps_to_target / steps_per_s["median"] if steps_to_target else None,
           "cpu_coordinator": meter.cpu_seconds["coordinator"] / wall,
           "cpu_workers": sum(v for k, v in meter.cpu_seconds.items() if k.startswith("worker")) / wall,
           "cpu_ps": sum(v for k, v in meter.cpu_seconds.items() if k.startswith("ps")) / wall,
           "cpu_per_task": {k: v / wall for k, v in meter.cpu_seconds.items()},
           # every program's, ours included: what other programs took is this minus the tasks' columns
           "cpu_machine": meter.counts["machine"] / wall if "machine" in meter.counts else None,
           "analytic_bytes_per_step": 2 * M if point.workers else 0,
           "analytic_bytes_per_ps_per_step": 2 * M / point.ps if point.workers else 0}
    measured = meter.bytes / (steps * len(meter.seconds)) if meter.bytes else None
    row["measured_push_bytes_per_step"] = measured.received if measured else None
    row["measured_pull_bytes_per_step"] = measured.sent if measured else None
    return row


class Baseline:
    """Plain Keras model.fit in this process, not on the cluster: the baseline every ratio divides by.

    ``measure()`` runs a warm-up interval and ``repeats`` timed ones on the same model each time it is
    called, so that it can be measured again just before and just after each cluster point; ``slots``
    holds each measurement's median samples/s, ``row()`` the result row over all of them.
    """

    def __init__(self, point, data, repeats, min_steps, meter=Meter):
        self.point, self.repeats = point, repeats
        self.work = workload(point.model, data, point.batch_size, point.steps_per_closure)
        self.meter = meter({"coordinator": os.getpid()}, counters={"machine": machine_cpu_seconds})
        self.steps = self._interval_steps(data, min_steps)
        self.accuracies, self.slots = [], []

    def _interval_steps(self, data, min_steps):
        """At least ``min_steps``, and enough steps for an interval of MIN_BASELINE_SECONDS at the speed of a
        first run on a throwaway model: one process steps fast, and in a short interval Keras's own overhead
        per epoch and the timer's resolution would weigh on the result."""
        steps = interval_steps(self.point, min_steps)
        trial = workload(self.point.model, data, self.point.batch_size, self.point.steps_per_closure)
        for _ in range(2):  # the first traces the function; the second is timed
            began = time.perf_counter()
            trial.model.fit(trial.dataset_fn(), epochs=1, steps_per_epoch=steps, verbose=0)
        return steps * max(1, math.ceil(MIN_BASELINE_SECONDS / (time.perf_counter() - began)))

    def measure(self):
        """One more measurement; returns its median samples/s."""
        first = len(self.meter.seconds)
        self.accuracies += run_fit(self.work, self.meter, self.steps, self.repeats, self.work.dataset_fn())
        self.slots.append(five_number_summary([self.steps / s for s in self.meter.seconds[first:]])["median"] * self.point.batch_size)
        return self.slots[-1]

    def row(self, target_accuracy):
        return result_row(self.point, self.work, self.meter, self.steps, self.accuracies, target_accuracy)


@dataclass(frozen=True)
class Connected:
    """A running ``cluster``, and this process's ``strategy`` and ``coordinator`` on it."""

    cluster: LocalCluster
    strategy: object
    coordinator: object


def measure_on_cluster(point, connected, data, repeats, min_steps, target_accuracy, meter=Meter, custom_loop=run_custom):
    """One point on a ``Connected`` cluster, with the custom loop or model.fit (``meter``, ``custom_loop``: see
    ``measure_points``)."""
    import tensorflow as tf

    with connected.strategy.scope():
        work = workload(point.model, data, point.batch_size, point.steps_per_closure)
    pids = {"coordinator": os.getpid(), **{task.name: task.pid for task in connected.cluster.tasks}}
    meter = meter(pids, traffic.ps_pids(connected.cluster), {"machine": machine_cpu_seconds})
    steps = interval_steps(point, min_steps)
    if point.loop == "fit":
        dataset = tf.keras.utils.experimental.DatasetCreator(lambda context: work.dataset_fn())
        accuracies = run_fit(work, meter, steps, repeats, dataset)
    else:
        accuracies = custom_loop(work, meter, steps, repeats, point.steps_per_closure, connected.strategy,
                                 connected.coordinator)
    return result_row(point, work, meter, steps, accuracies, target_accuracy)


def measure_points(points, repeats=5, min_steps=50, target_accuracy=0.9, data=None, min_shard_bytes=64 * 1024,
          meter=Meter, custom_loop=run_custom):
    """Measure every point; one cluster per (workers, ps) shape. Returns rows with ratios added.

    Each point: one warm-up interval (tracing, dataset creation, first pulls), then
    ``repeats`` timed intervals of at least ``min_steps`` steps, test accuracy after each.
    The single-process baseline of the point's model and batch size is measured just before
    each point and once more after the shape's last point, on the same cores, the cluster's tasks
    idle: each point's ratio divides by the mean of the baselines just before and just after it
    (``add_ratios``), and ``baseline_drift`` says how much the baseline moved across the point.
    ``data``: a ``Data`` already loaded for these models (loaded here if not given).
    Variables of at least ``min_shard_bytes`` are sharded over the parameter servers.
    ``meter`` (a class like ``Meter``) times each interval and ``custom_loop`` (like ``run_custom``)
    runs the custom loop's intervals: notebook 08 passes its own definitions.
    """
    import tensorflow as tf

    data = data or Data({p.model for p in points})
    single_process = {(p.model, p.batch_size): p for p in points if p.loop == "single-process"}
    shapes = [(shape, list(group)) for shape, group in itertools.groupby(
        sorted((p for p in points if p.loop != "single-process"), key=lambda p: (p.workers, p.ps)),
        key=lambda p: (p.workers, p.ps))]
    rows = []
    total = sum(len(group) + len({(p.model, p.batch_size) for p in group}) for _, group in shapes)
    progress = ProgressLines(total, "bench", unit="point", every_seconds=0)  # a line per point measured
    for (workers, ps), group in shapes:
        with LocalCluster(workers, ps, name="bench") as cluster:
            partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(min_shard_bytes, ps)
            strategy = cluster.strategy(variable_partitioner=partitioner)
            connected = Connected(cluster, strategy, tf.distribute.coordinator.ClusterCoordinator(strategy))
            baselines, measured = {}, []
            for point in group:
                key = (point.model, point.batch_size)
                if key not in baselines:
                    baselines[key] = Baseline(single_process[key], data, repeats, min_steps, meter)
                baselines[key].measure()  # just before the point
                row = measure_on_cluster(point, connected, data, repeats, min_steps, target_accuracy, meter, custom_loop)
                gc.collect()  # free this point's functions while their workers still run
                measured.append({**row, "beside_workers": workers, "beside_ps": ps,
                                 "baseline_slot": len(baselines[key].slots) - 1})
                progress.line(len(rows) + len(measured),
                              measured=f"{point.model} {point.loop} {workers}w {ps}ps K={point.steps_per_closure}")
            for (model, batch_size), baseline in baselines.items():
                baseline.measure()  # just after the shape's last point
                rows.append({**baseline.row(target_accuracy), "beside_workers": workers, "beside_ps": ps,
                             "baseline_slots": baseline.slots})
                progress.line(len(rows) + len(measured), measured=f"{model} single process, beside {workers}w {ps}ps")
            rows += measured
    return add_ratios(rows)


def add_ratios(rows):
    """Each cluster row's samples/s divided by the mean of the baselines of its model and batch size
    measured just before and just after it (beside the same cluster shape); their change is its
    ``baseline_drift`` (after ÷ before − 1). Baseline rows get ratio 1."""
    baselines = {(r["model"], r["batch_size"], r["beside_workers"], r["beside_ps"]): r["baseline_slots"]
                 for r in rows if r["loop"] == "single-process"}
    for row in rows:
        if row["loop"] == "single-process":
            row.update(baseline_samples_per_s=row["samples_per_s_median"], baseline_drift=None)
        else:
            slots = baselines[row["model"], row["batch_size"], row["beside_workers"], row["beside_ps"]]
            before, after = slots[row["baseline_slot"]], slots[row["baseline_slot"] + 1]
            row.update(baseline_samples_per_s=(before + after) / 2, baseline_drift=after / before - 1)
        row["ratio_to_single_process"] = row["samples_per_s_median"] / row["baseline_samples_per_s"]
    return rows
