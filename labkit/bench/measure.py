"""Every point measured on its cluster shape, in rounds beside its single-process baseline: result rows.

On each cluster shape (a worker count, the most PS), every point of that shape and the single-process baseline
of each of its models and batch sizes is built and warmed up (one interval, not timed: tracing, datasets, first
pulls), then timed in ``repeats`` rounds of one interval each, the order reversed every other round
(``verdict.interleave_many``: A B C, C B A...). Any two of them are therefore compared round by round
(``verdict.interleaved``), the load of each moment divided out; a point's ratio to one process is such a
comparison with its baseline.
"""
import contextlib
import gc
import itertools
import math
import os
from dataclasses import asdict, dataclass

from labkit import traffic, verdict
from labkit.bench.points import interval_steps, shape
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


def custom_loop(work, batches, steps_per_closure, strategy, coordinator):
    """labkit.train's packed closures: a function that trains one interval of ``steps`` steps, timed by ``meter``,
    and returns the test accuracy after it (None for the LM) and the steps it trained."""
    from labkit import models, train

    train_steps = train.make_train_steps(strategy, work.model, work.model.optimizer, models.mean_cross_entropy,
                                         steps_per_closure, work.metrics)

    def interval(meter, steps):
        recording = train.Recording(evaluate=lambda: {"accuracy": work.evaluate()}, description=None, meter=meter)
        timed = train.run(coordinator, train_steps, batches, steps, steps_per_closure, log_every_steps=steps,
                          recording=recording)
        return timed.accuracy[-1], steps
    return interval


def fit_loop(work, dataset, warm_up_epoch=False):
    """model.fit: a function that trains one interval of ``steps`` steps, timed by ``meter``, and returns the test
    accuracy after it and the steps it trained. On a cluster each call of model.fit builds the workers' datasets
    again: there, ``warm_up_epoch`` runs a first epoch of the same length, untimed (and trained: counted)."""
    import tensorflow as tf

    class LastEpochTimed(tf.keras.callbacks.Callback):
        def __init__(self, meter, epochs):
            super().__init__()
            self.meter, self.last = meter, epochs - 1

        def on_epoch_begin(self, epoch, logs=None):
            if epoch == self.last:
                self.meter.begin()

        def on_epoch_end(self, epoch, logs=None):
            if epoch == self.last:
                self.meter.end()

    epochs = 2 if warm_up_epoch else 1

    def interval(meter, steps):
        work.model.fit(dataset, epochs=epochs, steps_per_epoch=steps, verbose=0, callbacks=[LastEpochTimed(meter, epochs)])
        return work.evaluate(), epochs * steps
    return interval


def target_outcome(row, target_accuracy, distinct_test_examples):
    """What one run (one seed) says about ``target_accuracy``: "reached" (an evaluation reached it), "not reached"
    (its last accuracy is more than the test set's resolution below it, ``verdict.resolution_floor``) or "cannot
    tell" (within it: another seed, or another draw of test images, might have reached it)."""
    if row["steps_to_target"]:
        return "reached"
    floor = verdict.resolution_floor(distinct_test_examples, target_accuracy)
    return "not reached" if target_accuracy - row["final_accuracy"] > floor else verdict.CANNOT_TELL


class Measured:
    """One point (or baseline) on its shape: ``measure()`` trains one interval, timed by its meter, and keeps the
    accuracy after it (``evaluations``: steps trained so far, accuracy); ``row()`` is its result row."""

    def __init__(self, point, work, train_interval, meter, steps, placement=contextlib.nullcontext):
        self.point, self.work, self.train_interval, self.meter, self.steps = point, work, train_interval, meter, steps
        self.placement, self.evaluations = placement, []

    def _train(self, meter):
        with self.placement():
            accuracy, trained = self.train_interval(meter, self.steps)
        self.evaluations.append((trained + (self.evaluations[-1][0] if self.evaluations else 0), accuracy))

    def warm_up(self):
        """One interval, not timed (its meter is a throwaway); returns its seconds."""
        throwaway = Meter()
        self._train(throwaway)
        return throwaway.seconds[-1]

    def measure(self):
        """One timed interval; returns its samples/s."""
        self._train(self.meter)
        return self.steps * self.point.batch_size / self.meter.seconds[-1]

    def row(self, target_accuracy):
        return result_row(self.point, self.work, self.meter, self.steps, self.evaluations, target_accuracy)


def result_row(point, work, meter, steps, evaluations, target_accuracy):
    """One flat row of results (for the CSV) from a finished measurement; ``evaluations``: (steps trained so far,
    test accuracy) after the warm-up and after each timed interval."""
    from labkit.models import model_bytes  # TensorFlow: imported here, so that `labkit --help` starts fast
    from labkit.train import first_reaching

    steps_per_s = five_number_summary([steps / s for s in meter.seconds])
    wall = sum(meter.seconds)
    reached = first_reaching([accuracy for _, accuracy in evaluations], target_accuracy)
    steps_to_target = evaluations[reached][0] if reached is not None else None
    M = model_bytes(work.model)
    row = {**asdict(point), "model_bytes": M, "interval_steps": steps, "intervals": len(meter.seconds),
           **{f"steps_per_s_{k}": v for k, v in steps_per_s.items()},
           **{f"samples_per_s_{k}": v * point.batch_size for k, v in steps_per_s.items()},
           "samples_per_s_intervals": [steps * point.batch_size / s for s in meter.seconds],  # JSON only: one per round
           "final_accuracy": evaluations[-1][1], "steps_trained": evaluations[-1][0], "steps_to_target": steps_to_target,
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


def baseline(point, data, min_steps, meter=Meter):
    """The single-process baseline of ``point`` (plain Keras model.fit in this process, not on the cluster): a
    ``Measured``, warmed up, whose intervals last at least MIN_BASELINE_SECONDS (one process steps fast, and in a
    short interval Keras's own overhead per epoch and the timer's resolution would weigh on the result)."""
    work = workload(point.model, data, point.batch_size, point.steps_per_closure)
    measured = Measured(point, work, fit_loop(work, work.dataset_fn()), meter({"coordinator": os.getpid()},
                        counters={"machine": machine_cpu_seconds}), interval_steps(point, min_steps))
    seconds = measured.warm_up()
    measured.steps *= max(1, math.ceil(MIN_BASELINE_SECONDS / seconds))
    return measured


@dataclass(frozen=True)
class Connected:
    """A running ``cluster``, and this process's ``strategy`` and ``coordinator`` on it."""

    cluster: LocalCluster
    strategy: object
    coordinator: object


def on_cluster(point, connected, data, min_steps, batches, meter=Meter, custom=custom_loop):
    """``point`` built on a ``Connected`` cluster (its variables on one PS where ``point.ps`` is 1 and the cluster
    has more), warmed up: a ``Measured``. ``batches``: the workers' iterators of each (model, batch size) so far,
    shared by the points of this cluster (each holds the training set on every worker). ``meter``, ``custom``: see
    ``measure_points``."""
    import tensorflow as tf

    from labkit.train import per_worker_iterator

    cluster, strategy, coordinator = connected.cluster, connected.strategy, connected.coordinator
    placement = strategy.scope
    if point.ps < cluster.num_ps:
        with strategy.scope():
            anchor = tf.Variable(0.0, trainable=False, name="one_ps")  # every variable of the point beside it

        @contextlib.contextmanager
        def placement():  # the optimizer's variables too, made at its first step
            with strategy.scope(), strategy.extended.colocate_vars_with(anchor):
                yield
    with placement():
        work = workload(point.model, data, point.batch_size, point.steps_per_closure)
    if point.loop == "fit":
        train_interval = fit_loop(work, tf.keras.utils.experimental.DatasetCreator(lambda context: work.dataset_fn()),
                                  warm_up_epoch=True)
    else:
        key = (point.model, point.batch_size)
        if key not in batches:  # one per-worker dataset each: one more would be made and dropped for nothing
            batches[key] = per_worker_iterator(coordinator, work.dataset_fn)
        train_interval = custom(work, batches[key], point.steps_per_closure, strategy, coordinator)
    pids = {"coordinator": os.getpid(), **{task.name: task.pid for task in cluster.tasks}}
    measured = Measured(point, work, train_interval, meter(pids, traffic.ps_pids(cluster), {"machine": machine_cpu_seconds}),
                        interval_steps(point, min_steps), placement)
    measured.warm_up()
    return measured


def placed_on(work):
    """{parameter server: bytes} of every variable of ``work``: its model's, its optimizer's and its metrics'."""
    from labkit import sharding

    variables = work.model.variables + work.model.optimizer.variables() + [v for m in work.metrics for v in m.variables]
    return sharding.bytes_per_task(variables)


def measure_points(points, repeats=6, min_steps=50, target_accuracy=0.9, data=None, min_shard_bytes=16 * 1024,
                   meter=Meter, custom=custom_loop):
    """Measure every point in rounds on its cluster shape (see the module's docstring); return result rows.

    ``repeats``: the rounds, one timed interval of at least ``min_steps`` steps of each point per round, test
    accuracy after each. ``data``: a ``Data`` already loaded for these models (loaded here if not given).
    Variables of at least ``min_shard_bytes`` are sharded over the parameter servers. ``meter`` (a class like
    ``Meter``) times each interval and ``custom`` (like ``custom_loop``) runs the custom loop's intervals:
    notebook 08 passes its own definitions.
    """
    import tensorflow as tf

    data = data or Data({p.model for p in points})
    single_process = {(p.model, p.batch_size): p for p in points if p.loop == "single-process"}
    ps_counts = [p.ps for p in points if p.loop != "single-process"]
    shapes = [(shape_of, list(group)) for shape_of, group in itertools.groupby(
        sorted((p for p in points if p.loop != "single-process"), key=lambda p: shape(p, ps_counts)),
        key=lambda p: shape(p, ps_counts))]
    # a line per point warmed up and per round timed
    progress = ProgressLines(sum(len(group) + len({(p.model, p.batch_size) for p in group}) + repeats for _, group in shapes),
                             "bench", unit="measurement", every_seconds=0)
    rows, done = [], 0
    for (workers, num_ps), group in shapes:
        with LocalCluster(workers, num_ps, name="bench") as cluster:
            partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(min_shard_bytes, num_ps)
            strategy = cluster.strategy(variable_partitioner=partitioner)
            connected = Connected(cluster, strategy, tf.distribute.coordinator.ClusterCoordinator(strategy))
            measured, batches = [], {}
            for point in [single_process[key] for key in dict.fromkeys((p.model, p.batch_size) for p in group)] + group:
                measured.append(baseline(point, data, min_steps, meter) if point.loop == "single-process" else
                                on_cluster(point, connected, data, min_steps, batches, meter, custom))
                done += 1
                progress.line(done, warmed_up=_label(point, workers, num_ps))
            first_round = done
            verdict.interleave_many([m.measure for m in measured], repeats, after_block=lambda block: progress.line(
                first_round + block, timed=f"round {block}/{repeats} on {workers}w {num_ps}ps"))
            done += repeats
            beside = {"beside_workers": workers, "beside_ps": num_ps}
            rows += [{**m.row(target_accuracy), **beside, **({"bytes_per_ps": placed_on(m.work)} if m.point.workers else {})}
                     for m in measured]
            del measured, batches
            gc.collect()  # free this shape's functions while its tasks still run (after, they print red lines)
    return add_ratios(rows)


def _label(point, workers, num_ps):
    if point.loop == "single-process":
        return f"{point.model} single process, beside {workers}w {num_ps}ps"
    return f"{point.model} {point.loop} {point.workers}w {point.ps}ps K={point.steps_per_closure}"


def add_ratios(rows):
    """Each cluster row's samples/s against the single-process baseline of its model and batch size, round by
    round on the same shape (``verdict.interleaved``): ``ratio_to_single_process`` and its interval. Baseline
    rows get ratio 1."""
    baselines = {(r["model"], r["batch_size"], r["beside_workers"], r["beside_ps"]): r
                 for r in rows if r["loop"] == "single-process"}
    for row in rows:
        if row["loop"] == "single-process":
            row.update(baseline_samples_per_s=row["samples_per_s_median"], ratio_to_single_process=1.0,
                       ratio_to_single_process_interval=[1.0, 1.0])
            continue
        alone = baselines[row["model"], row["batch_size"], row["beside_workers"], row["beside_ps"]]
        ratio = verdict.interleaved("ratio", row["samples_per_s_intervals"], alone["samples_per_s_intervals"],
                                    measure="samples/s")
        row.update(baseline_samples_per_s=alone["samples_per_s_median"], ratio_to_single_process=ratio.effect,
                   ratio_to_single_process_interval=list(ratio.interval))
    return rows
