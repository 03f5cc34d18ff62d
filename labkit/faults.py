"""Fault injection and checkpoint-based recovery for PS training.

What happens when a task dies:

- a **worker**: the coordinator notices, reschedules the closures that worker had
  on the others, and training goes on (closures run *at least* once);
- a **parameter server**: its variables are gone. Every closure fails with
  ``UnavailableError``/``AbortedError`` and the coordinator cannot continue. The
  fix: restart the PS, rebuild strategy, coordinator and model, and restore the
  last checkpoint. At most one checkpoint interval of steps is lost;
- the **coordinator**: nothing trains until it is restarted; it resumes from the
  last checkpoint too (see ``labkit.deploy.coordinator``).

``train_with_recovery`` is that recovery driver, with faults injected at chosen steps.
"""
import contextlib
import math
import random
import threading
import time
import weakref
from dataclasses import dataclass, field

import labkit  # noqa: F401  (Keras 2 must be selected before TensorFlow loads)
import psutil
import tensorflow as tf

from labkit import models, train
from labkit.runtime import children, loglines, processes, tfruntime

PS_FAILURES = (tf.errors.UnavailableError, tf.errors.AbortedError)


@dataclass
class Fault:
    """At training step ``step``, ``action`` ("kill" or "restart") the task ``task``."""

    step: int
    task: str
    action: str = "kill"

    def __post_init__(self):
        if self.action not in ("kill", "restart"):
            raise ValueError(f"a fault's action must be 'kill' or 'restart', not {self.action!r}")


def kill_after(cluster, task, seconds):
    """Kill ``task`` of ``cluster`` ``seconds`` from now, from a timer thread; returns the Timer.

    For ``model.fit``, which offers no hook between steps. The thread only kills: no printing.
    """
    timer = threading.Timer(seconds, cluster.kill, args=(task,))
    timer.daemon = True
    timer.start()
    return timer


class KillAtStep(processes.Watcher):
    """While the block runs, kill ``task`` of ``cluster`` once (SIGKILL, as a crashed machine dies) as soon
    as ``counter``, a step counter on the parameter servers (``job.optimizer.iterations``), reaches ``step``.

    A watcher thread polls the counter; ``killed_at`` is the step it read right before the kill
    (None if the block ended first). ``watched(variable)`` tells whether ``variable`` is that counter.
    """

    def __init__(self, cluster, task, counter, step, interval=0.02):
        super().__init__(interval)
        self.cluster, self.task, self.step = cluster, task, step
        self.killed_at, self._counter = None, weakref.ref(counter)

    def watched(self, variable):
        return self._counter() is variable

    def poll(self):
        """True (stop watching) once the task was killed, or the counter is gone or unreachable."""
        counter = self._counter()
        try:
            reached = int(counter.numpy()) if counter is not None else None
        except PS_FAILURES:
            return True  # the parameter server died some other way
        if reached is not None and reached >= self.step:
            self.killed_at = reached
            self.cluster.kill(self.task)
        return reached is None or self.killed_at is not None


def save_while_killing(cluster, task, manager, delay_seconds, checkpoint_number):
    """``manager.save(checkpoint_number)`` with ``task`` killed ``delay_seconds`` after the save starts.

    Returns the error the save raised, or None if it finished before the kill.
    """
    timer = kill_after(cluster, task, delay_seconds)
    try:
        manager.save(checkpoint_number=checkpoint_number)
        return None
    except PS_FAILURES as error:
        return error
    finally:
        timer.join()


def random_faults(tasks, count, num_steps, seed=0):
    """``count`` kills of tasks drawn from ``tasks`` at random steps in (0, num_steps), reproducibly."""
    rng = random.Random(seed)
    return sorted((Fault(rng.randrange(1, num_steps), rng.choice(list(tasks))) for _ in range(count)),
                  key=lambda fault: fault.step)


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


def mnist_job(resolver, data, steps_per_closure=10, batch_size=64, learning_rate=1e-3, dataset_fn=None):
    """A TrainingJob for the MNIST MLP on the cluster that ``resolver`` describes.

    ``dataset_fn``: where the workers' batches come from; by default
    ``labkit.data.mnist_dataset_fn(data, batch_size)`` (each worker reads the arrays from files).
    """
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = models.mnist_mlp(learning_rate=learning_rate)
        optimizer = tf.keras.optimizers.legacy.Adam(learning_rate)

    return TrainingJob(strategy, coordinator, model, optimizer,
                       train.make_train_steps(strategy, model, optimizer, models.mean_cross_entropy, steps_per_closure),
                       train.per_worker_iterator(coordinator, dataset_fn or train.mnist_dataset_fn(data, batch_size)),
                       steps_per_closure,
                       resolver.cluster_spec().num_tasks("worker"))


@dataclass(kw_only=True)
class RecoveryReport(train.History):
    """The outcome of ``train_with_recovery``: a History with a row after each checkpoint (wall
    seconds since the start, the step, the evaluation), the timeline and the recoveries."""

    timeline: Timeline
    # dicts: failed_at_step (steps run when the PS died), resumed_from_step (the step of the
    # checkpoint actually restored), steps_lost (the difference), seconds (to recover)
    recoveries: list = field(default_factory=list)
    restarted_cpu: dict = field(default_factory=dict)  # task -> (pid, CPU seconds at restart, CPU seconds at end)
    steps_scheduled: int = 0  # in all closures scheduled, also those lost with a parameter server


def train_with_recovery(make_job, num_steps, checkpoint_dir, checkpoint_every=100, faults=(),
                        cluster=None, evaluate=None, max_recoveries=3, echo=False):
    """Train until ``optimizer.iterations`` reaches ``num_steps``, checkpointing every ``checkpoint_every`` steps.

    ``make_job()`` builds a fresh TrainingJob. ``faults`` are applied to ``cluster`` at their
    step (a kill waits for the step counter to reach it). On a PS failure, dead tasks of
    ``cluster`` are restarted and a new job resumes from the latest checkpoint. ``evaluate(model)``
    returns a dict after each checkpoint; ``echo`` prints the timeline as it grows.
    A closure re-run after a worker failure can carry the step count past ``num_steps``.
    """
    report = RecoveryReport(timeline=Timeline(echo=echo))
    pending = sorted(faults, key=lambda fault: fault.step)
    failure = None
    while True:
        job = None  # the failed job, and earlier jobs' functions, go now, while nothing reconnects the cluster
        tfruntime.free_unreachable_functions_before_reconnecting()
        job = make_job()
        checkpoint = tf.train.Checkpoint(model=job.model, optimizer=job.optimizer)
        manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir, max_to_keep=2)
        if manager.latest_checkpoint:
            checkpoint.restore(manager.latest_checkpoint)
        step = int(job.optimizer.iterations.numpy())
        report.timeline.add(step, loglines.resumed_line(step) if step else "started")
        # Every worker takes part from the first closure on, also when one connects late.
        refused = wait_until_workers_reach_parameter_servers(job)
        if failure:
            report.timeline.add(step, f"every worker reaches the parameter servers ({refused} refused tries)")
            failure.update(resumed_from_step=step, steps_lost=failure["failed_at_step"] - step,
                           seconds=time.monotonic() - failure.pop("began"))
            report.recoveries.append(failure)
        try:
            completed, ran_before_kill = [], None
            while step < num_steps:
                completed = []
                closures = math.ceil(min(checkpoint_every, num_steps - step) / job.steps_per_closure)
                for closure in range(1, closures + 1):
                    completed.append(job.coordinator.schedule(job.train_steps, args=(job.iterator,)))
                    report.steps_scheduled += job.steps_per_closure
                    # A fault waits until one closure per worker is scheduled beyond its step; a kill
                    # then lands once the step counter on the PS reaches that step, while the workers
                    # run the closures after it. The value read is the progress the kill ends.
                    beyond = (job.num_workers if closure < closures else 0) * job.steps_per_closure
                    while (cluster is not None and pending
                           and pending[0].step + beyond <= step + closure * job.steps_per_closure):
                        fault = pending.pop(0)
                        reached = _wait_for_step(job, fault.step) if fault.action == "kill" else fault.step
                        if fault.action == "kill" and fault.task.startswith("ps"):
                            ran_before_kill = reached
                        _apply(fault, cluster, report, reached)
                job.coordinator.join()
                step = int(job.optimizer.iterations.numpy())
                manager.save(checkpoint_number=step)
                _record(report, step, job.model, evaluate)
                report.timeline.add(step, loglines.CHECKPOINT_SAVED)
            if report.final_step != step:  # resumed from a checkpoint at or past num_steps
                _record(report, step, job.model, evaluate)
            report.timeline.add(step, "training finished")
            for task, (pid, cpu_then, _) in report.restarted_cpu.items():
                report.restarted_cpu[task] = (pid, cpu_then, cpu_seconds(pid))
            return report
        except PS_FAILURES as error:
            # Progress reached when the PS died, whose updates died with it: for an injected kill,
            # the step counter read from the PS just before the kill; else the completed closures.
            failed_at_step = ran_before_kill if ran_before_kill is not None else \
                step + job.steps_per_closure * sum(_succeeded(value) for value in completed)
            failure = {"failed_at_step": failed_at_step, "began": time.monotonic()}
            report.timeline.add(failed_at_step, f"{type(error).__name__}: a parameter server is gone "
                                                f"({_first_line(error.message)})")
            if cluster is None or len(report.recoveries) >= max_recoveries:
                raise
            for dead in [row["task"] for row in cluster.status() if not row["alive"]]:
                cluster.restart(dead)
                report.timeline.add(failed_at_step, f"restarted {dead}")


def _record(report, step, model, evaluate):
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
                             f"the last: {_first_line(refusals[-1].message)})"))
    return len(refusals)


def _wait_for_step(job, step, timeout=120.0):
    """Poll ``optimizer.iterations`` (on the PS) until it reaches ``step`` or ``timeout`` passes; return it."""
    reached = 0

    def at_step():
        nonlocal reached
        reached = int(job.optimizer.iterations.numpy())
        return reached >= step

    with contextlib.suppress(TimeoutError):
        processes.wait_until(at_step, timeout, f"the step counter to reach {step}", interval=0.02)
    return reached


def _apply(fault, cluster, report, step):
    if fault.action == "kill":
        cluster.kill(fault.task)
        report.timeline.add(step, f"killed {fault.task}")
    else:
        report.timeline.add(step, f"restarting {fault.task}")  # the driver waits while its new process starts
        cluster.restart(fault.task)
        pid = cluster.task(fault.task).pid
        cpu_at_restart = cpu_seconds(pid)
        report.restarted_cpu[fault.task] = (pid, cpu_at_restart, None)
        report.timeline.add(step, f"restarted {fault.task}")
        if _wait_until_reconnected(pid, cpu_at_restart):
            report.timeline.add(step, f"the coordinator reconnected {fault.task}")


def _wait_until_reconnected(pid, cpu_at_restart, timeout=30.0, min_cpu_seconds=0.05):
    """Hold the next closures until the coordinator has reconnected a restarted worker (its thread
    retries update_server_def, then rebuilds that worker's dataset: the worker's CPU moves), so the
    worker can take some of them; else the other workers may finish them all first. True if it did."""
    try:
        return processes.wait_until(lambda: cpu_seconds(pid) - cpu_at_restart >= min_cpu_seconds, timeout,
                                    f"process {pid} to use {min_cpu_seconds} s of CPU", interval=0.05)
    except TimeoutError:
        return False


def cpu_seconds(pid):
    """CPU time a process has used so far (user + system), or 0.0 if it is gone."""
    try:
        times = psutil.Process(pid).cpu_times()
        return times.user + times.system
    except psutil.NoSuchProcess:
        return 0.0


def start_coordinator(cluster, *arguments):
    """Start ``python -m labkit.deploy.coordinator`` as ``cluster``'s chief; read its timeline from ``.stdout``.

    The cluster needs ``chief=True``. The process exits with this one, like task processes.
    """
    if not cluster.chief:
        raise ValueError("the cluster has no chief address: create it with LocalCluster(..., chief=True)")
    return children.start_program("labkit.deploy.coordinator", *arguments, tf_config=cluster.tf_config("chief:0"),
                                  log_path=cluster.log_dir / "chief-0.log", read_stdout=True)


def read_until(process, text):
    """The lines ``process`` prints up to and including the first one containing ``text``."""
    lines = []
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        if text in line:
            return lines
    raise RuntimeError(f"the process ended (exit code {process.wait()}) before printing {text!r}. "
                       "It printed:\n" + "\n".join(lines[-20:]))


def _first_line(message, width=120):
    """The first line of an error message that says something (not a heading such as "Graph execution error:")."""
    lines = [line.strip() for line in message.splitlines() if line.strip() and not line.strip().endswith(":")]
    line = lines[0] if lines else message.strip()
    return line if len(line) <= width else line[:width - 3] + "..."


def _succeeded(remote_value):
    """True if a scheduled closure finished without error."""
    try:
        remote_value.fetch()
        return True
    except Exception:  # the closure failed or was cancelled with the rest
        return False


def kill_and_restart_coordinator(cluster, arguments, kill_when, resumed_when, finished_when):
    """Run ``labkit.deploy.coordinator``, SIGKILL it once it prints ``kill_when``, start it again, let it finish.

    Returns the lines before the kill, the lines after the restart, and the seconds from
    the kill until the new process printed ``resumed_when``.
    """
    first = start_coordinator(cluster, *arguments)
    before_kill = read_until(first, kill_when)
    first.kill()
    killed_at = time.monotonic()
    first.wait()
    second = start_coordinator(cluster, *arguments)
    after_restart = read_until(second, resumed_when)
    recovery_seconds = time.monotonic() - killed_at
    after_restart += read_until(second, finished_when)
    if second.wait() != 0:
        raise RuntimeError(f"the restarted coordinator failed; see {cluster.log_dir / 'chief-0.log'}")
    return before_kill, after_restart, recovery_seconds

