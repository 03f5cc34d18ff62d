"""A sweep: every point measured on its cluster (a warm-up interval, then timed ones), beside a single-process
baseline, as result rows."""
import gc
import itertools
import os
from dataclasses import asdict

from labkit import traffic
from labkit.bench.points import interval_steps
from labkit.bench.stats import spread
from labkit.bench.workloads import Data, workload
from labkit.cluster import LocalCluster
from labkit.meter import Meter
from labkit.progress import ProgressLines


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
                        evaluate=evaluate, description=None)  # tracing, datasets, first pulls: not metered
    timed = train.run(coordinator, train_steps, batches, repeats * steps, steps_per_closure, log_every_steps=steps,
                      evaluate=evaluate, description=None, meter=meter)
    return warm_up.accuracy + timed.accuracy


def result_row(point, work, meter, steps, accuracies, target_accuracy):
    """One flat row of results (for the CSV) from a finished measurement."""
    from labkit.models import model_bytes  # TensorFlow: imported here, so that `labkit --help` starts fast
    from labkit.train import first_reaching

    steps_per_s = spread([steps / s for s in meter.seconds])
    wall = sum(meter.seconds)
    reached = first_reaching(accuracies, target_accuracy)
    steps_to_target = (reached + 1) * steps if reached is not None else None
    M = model_bytes(work.model)
    row = {**asdict(point), "model_bytes": M, "interval_steps": steps, "intervals": len(meter.seconds),
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


def measure_single_process(point, data, repeats, min_steps, target_accuracy, meter=Meter):
    """Plain Keras model.fit in this process, not on the cluster: the baseline every ratio divides by."""
    work = workload(point.model, data, point.batch_size, point.steps_per_closure)
    meter, steps = meter({"coordinator": os.getpid()}), interval_steps(point, min_steps)
    accuracies = run_fit(work, meter, steps, repeats, work.dataset_fn())
    return result_row(point, work, meter, steps, accuracies, target_accuracy)


def measure_on_cluster(point, cluster, strategy, coordinator, data, repeats, min_steps, target_accuracy,
                       meter=Meter, custom_loop=run_custom):
    """One point on a running cluster, with the custom loop or model.fit (``meter``, ``custom_loop``: see ``measure_points``)."""
    import tensorflow as tf

    with strategy.scope():
        work = workload(point.model, data, point.batch_size, point.steps_per_closure)
    pids = {"coordinator": os.getpid(), **{task.name: task.pid for task in cluster.tasks}}
    meter, steps = meter(pids, traffic.ps_pids(cluster)), interval_steps(point, min_steps)
    if point.loop == "fit":
        dataset = tf.keras.utils.experimental.DatasetCreator(lambda context: work.dataset_fn())
        accuracies = run_fit(work, meter, steps, repeats, dataset)
    else:
        accuracies = custom_loop(work, meter, steps, repeats, point.steps_per_closure, strategy, coordinator)
    return result_row(point, work, meter, steps, accuracies, target_accuracy)


def measure_points(points, repeats=5, min_steps=50, target_accuracy=0.9, data=None, min_shard_bytes=64 * 1024,
          meter=Meter, custom_loop=run_custom):
    """Measure every point; one cluster per (workers, ps) shape. Returns rows with ratios added.

    Each point: one warm-up interval (tracing, dataset creation, first pulls), then
    ``repeats`` timed intervals of at least ``min_steps`` steps, test accuracy after each.
    Beside each cluster shape, just before its points (its tasks started and idle), the
    single-process baselines of its models and batch sizes are measured again: each ratio
    divides by a baseline taken under the same load as the point.
    ``data``: a ``Data`` already loaded for these models (loaded here if not given).
    Variables of at least ``min_shard_bytes`` are sharded over the parameter servers.
    ``meter`` (a class like ``Meter``) times each interval and ``custom_loop`` (like ``run_custom``)
    runs the custom loop's intervals: notebook 08 passes its own definitions.
    """
    import tensorflow as tf

    data = data or Data({p.model for p in points})
    baselines = [p for p in points if p.loop == "single-process"]
    shapes = [(shape, list(group)) for shape, group in itertools.groupby(
        sorted((p for p in points if p.loop != "single-process"), key=lambda p: (p.workers, p.ps)),
        key=lambda p: (p.workers, p.ps))]
    beside = {shape: [b for b in baselines if any((p.model, p.batch_size) == (b.model, b.batch_size) for p in group)]
              for shape, group in shapes}
    rows = []
    total = sum(len(group) + len(beside[shape]) for shape, group in shapes)
    progress = ProgressLines(total, "bench", unit="point", every_seconds=0)  # a line per point measured
    for (workers, ps), group in shapes:
        with LocalCluster(workers, ps, name="bench") as cluster:
            partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(min_shard_bytes, ps)
            strategy = cluster.strategy(variable_partitioner=partitioner)
            coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
            for point in beside[(workers, ps)] + group:
                if point.loop == "single-process":
                    row = measure_single_process(point, data, repeats, min_steps, target_accuracy, meter)
                    measured = f"{point.model} single process, beside {workers}w {ps}ps"
                else:
                    row = measure_on_cluster(point, cluster, strategy, coordinator, data,
                                             repeats, min_steps, target_accuracy, meter, custom_loop)
                    measured = f"{point.model} {point.loop} {workers}w {ps}ps K={point.steps_per_closure}"
                gc.collect()  # free this point's functions while their workers still run
                rows.append({**row, "beside_workers": workers, "beside_ps": ps})
                progress.line(len(rows), measured=measured)
    return add_ratios(rows)


def add_ratios(rows):
    """Each row's samples/s divided by the single-process baseline of the same model and batch size,
    measured beside the same cluster shape."""
    def key(row):
        return row["model"], row["batch_size"], row["beside_workers"], row["beside_ps"]

    baseline = {key(r): r["samples_per_s_median"] for r in rows if r["loop"] == "single-process"}
    for row in rows:
        base = baseline.get(key(row))
        row["ratio_to_single_process"] = row["samples_per_s_median"] / base if base else None
    return rows
