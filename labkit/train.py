"""A custom training loop on ``tf.distribute.coordinator.ClusterCoordinator``.

What ``model.fit`` does on a PS cluster, in plain sight:

1. each worker builds its own input pipeline (``create_per_worker_dataset``);
2. a ``tf.function`` that runs K training steps is *scheduled*: the coordinator
   puts it in a queue and returns a ``RemoteValue`` at once; a free worker runs it,
   reading variables from the parameter servers and sending updates back;
3. ``fetch()`` waits for one result, ``join()`` for all; a closure whose worker
   dies is run again on another worker (at-least-once execution).

Progress comes from completed closures on the coordinator: PS training has no
batch-level callbacks. It is printed as text lines (``labkit.progress``).

Every lab times its training here: a warm-up first (not timed), then intervals, each timed and
metered by a ``labkit.meter.Meter``, with a row of the ``TrainingLog`` after each.
"""
import math
from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

from labkit.pipelines import mnist_dataset_fn, with_slowed_worker
from labkit.meter import Meter
from labkit.progress import ProgressLines
from labkit.runtime import processes


@dataclass(kw_only=True)
class TrainingLog:
    """What a training run returns: one row per interval, with the step reached, the run's clock,
    mean training loss, steps/s, metrics and evaluation results.

    Every lab's training function returns a TrainingLog, or a subclass that adds the lab's own
    measurements (``compression.Result``, ``staleness.Run``, ``recovery.RecoveryReport``,
    ``allreduce.Phase``). A value a run does not measure is NaN.
    """

    step: list = field(default_factory=list)
    seconds: list = field(default_factory=list)  # the run's clock at each row (training time; faults: wall time)
    loss: list = field(default_factory=list)
    steps_per_second: list = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    evaluation: dict = field(default_factory=dict)

    def record(self, step, seconds, loss=math.nan, steps_per_second=math.nan, metrics=None, evaluation=None):
        self.step.append(step)
        self.seconds.append(seconds)
        self.loss.append(loss)
        self.steps_per_second.append(steps_per_second)
        for name, value in (metrics or {}).items():
            self.metrics.setdefault(name, []).append(value)
        for name, value in (evaluation or {}).items():
            self.evaluation.setdefault(name, []).append(value)

    @property
    def final_step(self):
        return self.step[-1] if self.step else 0

    @property
    def total_seconds(self):
        return self.seconds[-1] if self.seconds else 0.0

    @property
    def accuracy(self):
        """Test accuracy at each evaluation (``evaluation["accuracy"]``)."""
        return self.evaluation.get("accuracy", [])

    @property
    def final_accuracy(self):
        if not self.accuracy:
            raise ValueError("this run recorded no accuracy: pass an evaluation that returns {'accuracy': ...}.")
        return self.accuracy[-1]

    def first_reaching(self, accuracy, column="step"):
        """``column`` (a list of this run's, e.g. "step" or "seconds", or an evaluation name) at the first
        row whose accuracy is at least ``accuracy``; None if no row reached it."""
        values = self.evaluation[column] if column in self.evaluation else getattr(self, column)
        row = first_reaching(self.accuracy, accuracy)
        return None if row is None else values[row]


def first_reaching(values, target):
    """Index of the first value >= ``target``, or None (a missing value, None, never reaches it)."""
    return next((i for i, value in enumerate(values) if value is not None and value >= target), None)


def make_train_steps(strategy, model, optimizer, loss_fn, steps_per_closure, metrics=()):
    """A ``tf.function`` that runs ``steps_per_closure`` training steps on one worker.

    ``loss_fn(labels, outputs)`` returns the mean loss of a batch. ``metrics`` are
    Keras metrics created under ``strategy.scope()``, updated as ``metric(labels, outputs)``.
    A synchronous strategy (MultiWorkerMirroredStrategy) SUMS the replicas' gradients, so each
    replica's loss is divided by ``num_replicas_in_sync`` (1 under ParameterServerStrategy).
    """
    def one_step(features, labels):
        with tf.GradientTape() as tape:
            outputs = model(features, training=True)
            loss = loss_fn(labels, outputs)
            share_of_the_sum = loss / strategy.num_replicas_in_sync
        gradients = tape.gradient(share_of_the_sum, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        for metric in metrics:
            metric.update_state(labels, outputs)
        return loss

    return pack_steps(strategy, one_step, steps_per_closure, fetch_first=True)


def pack_steps(strategy, one_step, steps_per_closure, fetch_first=False):
    """A ``tf.function`` that runs ``one_step(iterator)`` ``steps_per_closure`` times on one worker.

    ``one_step`` takes the batch from the iterator itself, so it decides what happens before the fetch.
    With ``fetch_first``, the batch is taken before ``strategy.run`` and ``one_step(*batch)`` gets it:
    MultiWorkerMirroredStrategy refuses ``next(iterator)`` inside ``strategy.run``.
    """
    @tf.function
    def train_steps(iterator):
        loss = tf.constant(0.0)
        for _ in tf.range(steps_per_closure):  # step packing: one dispatch, K steps
            loss = strategy.run(one_step, args=next(iterator) if fetch_first else (iterator,))
        return loss

    return train_steps


def count_closures_by_worker(strategy, train_steps, num_workers):
    """``train_steps`` that also counts the closures each worker runs, in a variable on a PS.

    Returns (the counting function, the variable: one count per worker index).
    """
    with strategy.scope():
        counts = tf.Variable(tf.zeros([num_workers], tf.int64), trainable=False, name="closures_by_worker")

    @tf.function
    def counted_train_steps(iterator):
        worker = tf.distribute.coordinator.experimental_get_current_worker_index()  # read when the closure runs
        counts.assign_add(tf.one_hot(worker, num_workers, dtype=tf.int64))
        return train_steps(iterator)

    return counted_train_steps, counts


@dataclass(frozen=True)
class Recording:
    """What each timed interval records and shows: ``metrics`` (Keras metrics, reset after each interval),
    ``evaluate()`` (a dict of numbers, not timed), a progress line titled ``description`` (none if None),
    ``on_progress(training_log)`` (e.g. a dashboard's ``show_training``), the ``training_log`` to record into
    (a TrainingLog or a lab's subclass; a new one if None) and the ``meter`` that times each interval (a
    ``labkit.meter.Meter``; wall time only if None)."""

    metrics: tuple = ()
    evaluate: object = None
    description: str | None = "training"
    on_progress: object = None
    training_log: TrainingLog | None = None
    meter: Meter | None = None


def run(coordinator, train_steps, iterator, num_steps, steps_per_closure, log_every_steps=100, warmup_closures=0,
        recording=Recording()):
    """Schedule closures until ``num_steps`` steps ran in timed intervals; return a TrainingLog (one row per interval).

    ``warmup_closures`` closures run first (tracing, the workers' datasets and first pulls): not
    timed, not metered, not counted in the TrainingLog's steps. Each interval of ``log_every_steps``
    steps is recorded as ``recording`` says (``timed_intervals``).
    """
    if num_steps % steps_per_closure or log_every_steps % steps_per_closure:
        raise ValueError(f"num_steps ({num_steps}) and log_every_steps ({log_every_steps}) must be "
                         f"multiples of steps_per_closure ({steps_per_closure}).")

    def train_closures(closures):
        scheduled = [coordinator.schedule(train_steps, args=(iterator,)) for _ in range(closures)]
        coordinator.join()
        return scheduled  # RemoteValues: their losses are fetched after the interval's timing

    if warmup_closures:
        train_closures(warmup_closures)
    return timed_intervals(lambda steps: train_closures(steps // steps_per_closure), num_steps, log_every_steps,
                           recording)


def timed_intervals(train_interval, num_steps, log_every_steps, recording=Recording()):
    """Call ``train_interval(steps)`` until ``num_steps`` steps ran, ``log_every_steps`` at a time; a TrainingLog.

    ``train_interval`` trains that many steps and returns their losses (numbers, tensors, or
    RemoteValues, fetched after the interval). ``recording.meter`` times and meters each call. After each: a
    row with the steps and training seconds so far, the mean loss, steps/s, the metrics and the evaluation;
    a progress line; ``recording.on_progress(training_log)``.
    """
    training_log = TrainingLog() if recording.training_log is None else recording.training_log
    meter = Meter() if recording.meter is None else recording.meter
    metrics, evaluate = recording.metrics, recording.evaluate
    progress = ProgressLines(num_steps, recording.description) if recording.description else None
    done, training_seconds = 0, 0.0
    while done < num_steps:
        steps = min(log_every_steps, num_steps - done)
        meter.begin()
        losses = train_interval(steps)
        interval_seconds = meter.end()
        done, training_seconds = done + steps, training_seconds + interval_seconds
        training_log.record(step=done, seconds=training_seconds,
                            loss=float(np.mean([loss.fetch() if hasattr(loss, "fetch") else loss for loss in losses])),
                            steps_per_second=steps / interval_seconds,
                            metrics={m.name: float(m.result()) for m in metrics},
                            evaluation=evaluate() if evaluate else {})
        for metric in metrics:
            metric.reset_state()
        if progress:
            progress.line(done, loss=f"{training_log.loss[-1]:.3f}",
                          **{"steps/s": f"{training_log.steps_per_second[-1]:.0f}"})
        if recording.on_progress:
            recording.on_progress(training_log)
    return training_log


def per_worker_iterator(coordinator, dataset_fn):
    """An iterator over a dataset that every worker builds for itself from ``dataset_fn()``."""
    return iter(coordinator.create_per_worker_dataset(dataset_fn))


def worker_count(strategy):
    """How many workers ``strategy`` (a ParameterServerStrategy) trains on; TensorFlow keeps the count in a
    private attribute."""
    return strategy.extended._num_workers


def mnist_batches(coordinator, data, batch_size=64, seed=0, sharded=False, slow_worker=None, slow_ms=0):
    """Each worker's iterator over MNIST training batches (``labkit.pipelines.mnist_dataset_fn``), shuffled by ``seed``:
    the whole training set in each worker's own order, or with ``sharded`` each worker's own share of it.
    Worker ``slow_worker`` (an index) waits ``slow_ms`` before each batch.

    Each worker reads the whole training set from its file when it takes its first batch. Several runs can
    continue the same one (``staleness.Batches.continue_on``), each taking the next batches; two runs compared
    on accuracy take a stream each, seeded alike (``compression.train_mnist`` makes one per run).
    """
    return iter(mnist_datasets(coordinator, data, batch_size, seed, sharded, slow_worker, slow_ms))


def mnist_datasets(coordinator, data, batch_size=64, seed=0, sharded=False, slow_worker=None, slow_ms=0):
    """The per-worker dataset that ``mnist_batches`` (the same arguments) iterates over. Each new iterator over it
    starts the same stream from its beginning, without the workers reading the training set again; each worker
    keeps its copy of the training set while the dataset lives."""
    shards = worker_count(coordinator.strategy) if sharded else None
    dataset_fn = mnist_dataset_fn(data, batch_size, seed, shards=shards)
    return coordinator.create_per_worker_dataset(with_slowed_worker(dataset_fn, slow_worker, slow_ms))


FIRST_BATCH_SECONDS = 60.0  # how long first_batches waits for every worker to run one of its closures


def first_batches(coordinator, dataset_fn, num_workers, timeout=FIRST_BATCH_SECONDS):
    """Each worker's first batch of labels from ``dataset_fn``, as ``{worker index: labels}``.

    A closure returns the index of the worker that ran it with the labels it read;
    a worker runs its closures in the order they were scheduled. Closures go to whichever worker is free,
    so a worker still building its dataset on a busy machine can miss a round: rounds go on until every
    worker has run one, or raise RuntimeError after ``timeout`` seconds (a dead worker's closures go to the others).
    """
    batches = per_worker_iterator(coordinator, dataset_fn)

    @tf.function
    def worker_and_labels(iterator):
        return tf.distribute.coordinator.experimental_get_current_worker_index(), next(iterator)[1]

    first, scheduled = {}, 0

    def every_worker_ran_one():  # a round: two closures per worker, each taken by whichever worker is free
        nonlocal scheduled
        remotes = [coordinator.schedule(worker_and_labels, args=(batches,)) for _ in range(2 * num_workers)]
        scheduled += len(remotes)
        for worker, labels in (remote.fetch() for remote in remotes):
            first.setdefault(int(worker), labels)
        return len(first) == num_workers

    def none_ran(_):
        missing = sorted(set(range(num_workers)) - set(first))
        return RuntimeError(f"workers {missing} ran none of {scheduled} functions scheduled in {timeout:g} s (workers "
                            f"{sorted(first)} did): are they alive and in the cluster the strategy was built from?")

    processes.wait_until(every_worker_ran_one, timeout, "every worker to run one", interval=0, error=none_ran)
    return first
