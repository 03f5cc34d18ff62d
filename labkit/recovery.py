"""Checkpoint-based recovery from a parameter-server failure: the training layer's recovery driver.

When a parameter server dies its variables are gone: every closure fails with
``UnavailableError``/``AbortedError`` and the coordinator cannot go on. ``train_with_recovery``
catches that, has the dead tasks restarted, rebuilds strategy, coordinator and model, restores the
latest checkpoint and continues; at most one checkpoint interval of steps is lost. A worker's
failure needs none of this (the coordinator reschedules its closures).

The coordinator program (``labkit.deploy.coordinator``) runs this driver; notebook 07 defines the
same ``train_with_recovery`` in a cell and injects faults into it (``labkit.faults``).
"""
import math
import time
from dataclasses import dataclass, field

import tensorflow as tf

from labkit import models, train
from labkit.runtime import loglines, processes, tfruntime

PS_FAILURES = (tf.errors.UnavailableError, tf.errors.AbortedError)


@dataclass
class Timeline:
    """What happened when: seconds since the start, the training step, the event."""

    started: float = field(default_factory=time.monotonic)
    events: list = field(default_factory=list)
    echo: bool = False  # print each event as it happens (used by a coordinator process)

    def add(self, step, event):
        self.events.append((time.monotonic() - self.started, step, event))
        if self.echo:
            print(self.format_event(*self.events[-1]), flush=True)

    def seconds_at(self, starts):
        """Seconds since the start of the first event that starts with ``starts`` (a string or a tuple), or None."""
        return next((seconds for seconds, _, event in self.events if event.startswith(starts)), None)

    @staticmethod
    def format_event(seconds, step, event):
        return loglines.timeline_line(seconds, step, event)

    def __str__(self):
        return "\n".join(self.format_event(*event) for event in self.events)


@dataclass
class TrainingJob:
    """Everything one coordinator needs to train; rebuilt from scratch after a PS failure."""

    strategy: object
    coordinator: object
    model: object
    optimizer: object
    train_steps: object
    iterator: object
    steps_per_closure: int
    num_workers: int
    closures_by_worker: object = None  # a variable on a PS: the closures each worker ran (train.count_closures_by_worker)


def mnist_job(resolver, data, steps_per_closure=10, batch_size=64, learning_rate=1e-3, dataset_fn=None, seed=0):
    """A TrainingJob for the MNIST MLP on the cluster that ``resolver`` describes, its initial weights and
    batches seeded by ``seed``: two jobs with the same seed start from the same weights and the same streams.

    ``dataset_fn``: where the workers' batches come from; by default
    ``labkit.pipelines.mnist_dataset_fn(data, batch_size, seed)`` (each worker reads the arrays from files).
    """
    strategy = tfruntime.connect(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    tf.keras.utils.set_random_seed(seed)
    with strategy.scope():
        model = models.mnist_mlp(learning_rate=learning_rate)
        optimizer = tf.keras.optimizers.legacy.Adam(learning_rate)
    tf.random.set_seed(None)  # the weights only: under a global seed of 0, Dataset.shuffle refuses a tensor seed (files route)

    num_workers = resolver.cluster_spec().num_tasks("worker")
    train_steps, closures_by_worker = train.count_closures_by_worker(
        strategy, train.make_train_steps(strategy, model, optimizer, models.mean_cross_entropy, steps_per_closure),
        num_workers)
    return TrainingJob(strategy, coordinator, model, optimizer, train_steps,
                       train.per_worker_iterator(coordinator, dataset_fn or train.mnist_dataset_fn(data, batch_size, seed)),
                       steps_per_closure, num_workers, closures_by_worker)


@dataclass(frozen=True)
class Checkpoints:
    """Where the recovery driver saves its checkpoints (``directory``) and every how many steps (``every``)."""

    directory: str
    every: int = 100

    def __post_init__(self):
        if self.every < 1:
            raise ValueError(f"checkpoints every {self.every} steps: save every 1 step or more (every=100, say).")


@dataclass(kw_only=True)
class RecoveryReport(train.TrainingLog):
    """The outcome of ``train_with_recovery``: a TrainingLog with a row after each checkpoint (wall
    seconds since the start, the step, the evaluation), the timeline and the recoveries."""

    timeline: Timeline
    # dicts: failed_at_step (steps run when the PS died), resumed_from_step (the step of the
    # checkpoint actually restored), steps_lost (the difference), seconds (from the error to training again)
    recoveries: list = field(default_factory=list)
    steps_scheduled: int = 0  # in all closures scheduled, also those lost with a parameter server


def train_with_recovery(make_job, num_steps, checkpoints, restart=None, evaluate=None, after_schedule=None,
                        max_recoveries=3, echo=False):
    """Train until ``optimizer.iterations`` reaches ``num_steps``, saving ``checkpoints`` (where, how often);
    on a parameter-server failure restart, rebuild, restore the latest checkpoint and continue.

    ``make_job()`` builds a fresh TrainingJob. ``restart()`` restarts the dead tasks and returns their
    names (None: a failure is raised, for whoever runs this program to restart it). ``evaluate(model)``
    returns a dict after each checkpoint. ``after_schedule(job, report, scheduled_to, more)`` runs after
    each closure is scheduled (fault injection); it returns the step counter it read before it killed
    a parameter server, or None. ``echo`` prints the timeline as it grows. A failure during a recovery
    (a PS that dies again before training goes on) is part of that recovery; after ``max_recoveries``
    failures the error is raised.
    """
    report = RecoveryReport(timeline=Timeline(echo=echo))
    failure, failures, step = None, 0, 0
    while True:
        job, completed, killed_at = None, [], None  # the failed job goes now, while nothing reconnects
        try:
            tfruntime.free_unreachable_functions_before_reconnecting()
            job = make_job()                                                   # rebuild: connects again
            checkpoint = tf.train.Checkpoint(model=job.model, optimizer=job.optimizer)
            manager = tf.train.CheckpointManager(checkpoint, checkpoints.directory, max_to_keep=2)
            if manager.latest_checkpoint:
                checkpoint.restore(manager.latest_checkpoint)                  # restore
            step = int(job.optimizer.iterations.numpy())
            report.timeline.add(step, loglines.resumed_line(step) if step else "started")
            refused = wait_until_workers_reach_parameter_servers(job)          # a restarted PS can refuse for a moment
            if failure:
                report.timeline.add(step, f"every worker reaches the parameter servers ({refused} refused tries)")
                failure.update(resumed_from_step=step, steps_lost=failure["failed_at_step"] - step,
                               seconds=time.monotonic() - failure.pop("began"))
                report.recoveries.append(failure)
                failure = None
            while step < num_steps:                                            # continue
                completed = []
                closures = math.ceil(min(checkpoints.every, num_steps - step) / job.steps_per_closure)
                for closure in range(1, closures + 1):
                    completed.append(job.coordinator.schedule(job.train_steps, args=(job.iterator,)))
                    report.steps_scheduled += job.steps_per_closure
                    if after_schedule:
                        read = after_schedule(job, report, step + closure * job.steps_per_closure, closure < closures)
                        killed_at = killed_at if read is None else read
                job.coordinator.join()
                step, completed = int(job.optimizer.iterations.numpy()), []  # their steps now count in step
                manager.save(checkpoint_number=step)                           # checkpoint
                record_row(report, step, job.model, evaluate)
                report.timeline.add(step, loglines.CHECKPOINT_SAVED)
            if report.final_step != step:  # resumed from a checkpoint at or past num_steps
                record_row(report, step, job.model, evaluate)
            report.timeline.add(step, "training finished")
            return report
        except PS_FAILURES as error:                                           # catch
            failures += 1
            if failure is None:
                # Progress when the PS died, whose updates died with it: the step counter read right before
                # an injected kill, else the checkpoint's step plus the closures that completed.
                failed_at = killed_at if killed_at is not None else \
                    step + job.steps_per_closure * sum(succeeded(value) for value in completed)
                failure = {"failed_at_step": failed_at, "began": time.monotonic()}
            report.timeline.add(failure["failed_at_step"], f"{type(error).__name__}: a parameter server is gone "
                                                           f"({first_line(error.message)})")
            if job is not None:  # its worker-failure thread must not reconnect while tasks restart
                tfruntime.stop_reconnecting(job.coordinator)
            if restart is None or failures > max_recoveries:
                raise
            for task in restart():                                             # restart
                report.timeline.add(failure["failed_at_step"], f"restarted {task}")
            if job is not None:
                stop_coordinator(job.coordinator)


def restart_dead_tasks(cluster):
    """Restart every task of ``cluster`` (a LocalCluster) that no longer serves; return their names.

    Not only those no longer alive: a killed task's connections close a moment before its process is
    gone, so the failure can reach the driver while the task still looks alive.
    """
    dead = [task.name for task in cluster.tasks if not task.serving()]
    for task in dead:
        cluster.restart(task)
    return dead


def record_row(report, step, model, evaluate):
    """A row of ``report`` at ``step``: wall seconds since the start and ``evaluate(model)``, if given."""
    report.record(step, time.monotonic() - report.timeline.started, evaluation=evaluate(model) if evaluate else {})


def wait_until_workers_reach_parameter_servers(job, timeout=60.0):
    """Block until every worker reads a variable from every parameter server; return the refused tries.

    A restarted PS serves at once, but a worker's gRPC channel to it can still be in its
    reconnect back-off (TensorFlow caps it at 1 s) and fail calls with "Connection refused".
    A closure scheduled in that window would fail as if the PS had died again.
    """
    one_variable_per_ps = list({variable.device: variable for variable in job.model.variables}.values())
    read = tf.function(lambda: [tf.reduce_sum(variable) for variable in one_variable_per_ps])
    waiting, refusals = list(range(job.num_workers)), []

    def every_worker_reads():
        while waiting:
            try:
                with tf.device(f"/job:worker/replica:0/task:{waiting[0]}"):
                    [value.numpy() for value in read()]
            except PS_FAILURES as error:
                refusals.append(error)
                return False
            waiting.pop(0)
        return True

    processes.wait_until(every_worker_reads, timeout, "every worker to read from every parameter server",
                         interval=0.1, error=lambda message: TimeoutError(
                             f"{message}: worker {waiting[0]} still cannot ({len(refusals)} refused tries; "
                             f"the last: {first_line(refusals[-1].message)})"))
    return len(refusals)


def stop_coordinator(coordinator):
    """Stop a failed job's coordinator once its worker-failure thread has ended (``tfruntime.stop_coordinator``),
    or raise a RuntimeError that says what to do: reconnecting while that thread runs crashes the process."""
    if not tfruntime.stop_coordinator(coordinator):
        raise RuntimeError("the failed coordinator's worker-failure thread is still reconnecting after 30 s, and "
                           "a new connection now could crash this process. Stop the cluster (cluster.stop()) "
                           "and start a new one, or restart the kernel.")


def first_line(message, width=120):
    """The first line of an error message that says something (not a heading such as "Graph execution error:"
    or "2 root error(s) found.")."""
    lines = [line.strip() for line in message.splitlines()
             if line.strip() and not line.strip().endswith((":", "root error(s) found."))]
    line = lines[0] if lines else message.strip()
    return line if len(line) <= width else line[:width - 3] + "..."


def succeeded(remote_value):
    """True if a scheduled closure finished without error."""
    try:
        remote_value.fetch()
        return True
    except Exception:  # the closure failed or was cancelled with the rest
        return False
