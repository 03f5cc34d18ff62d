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

The recovery driver is ``labkit.recovery.train_with_recovery``; this module injects the faults
(``FaultInjector``, its ``after_schedule`` hook; ``train_with_faults`` puts the two together),
kills tasks at a step or during a checkpoint save, and runs and kills the coordinator program.
"""
import contextlib
import os
import random
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from labkit import recovery
from labkit.runtime import children, processes
from labkit.runtime.processes import cpu_seconds


@dataclass
class Fault:
    """At training step ``step``, ``action`` ("kill" or "restart") the task ``task``."""

    step: int
    task: str
    action: str = "kill"

    def __post_init__(self):
        if self.action not in ("kill", "restart"):
            raise ValueError(f"a fault's action must be 'kill' or 'restart', not {self.action!r}")


class WatchError(RuntimeError):
    """A ``KillAtStep`` could not do its kill: the task died by other hands first, or its counter was freed."""


class KillAtStep(processes.Watcher):
    """While the block runs, kill ``task`` of ``cluster`` once (SIGKILL, as a crashed machine dies) as soon
    as ``counter``, a step counter on the parameter servers (``job.optimizer.iterations``), reaches ``step``.

    A watcher thread polls the counter; ``killed_at`` is the step it read right before the kill
    (None if the block ended first). If the task dies by other hands first, or the counter is freed,
    the block raises a ``WatchError`` that says so. ``watched(variable)`` tells whether ``variable`` is that counter.
    """

    def __init__(self, cluster, task, counter, step, interval=0.02):
        super().__init__(interval)
        self.cluster, self.task, self.step = cluster, task, step
        self.killed_at, self.reached, self._counter = None, None, weakref.ref(counter)

    def watched(self, variable):
        return self._counter() is variable

    def poll(self):
        """True (stop watching) once the task was killed; raises ``WatchError`` if the watch cannot go on."""
        counter = self._counter()
        if counter is None:
            raise WatchError(f"the step counter was freed before it reached step {self.step}, so {self.task} "
                             "was not killed: keep the job it belongs to until the block ends.")
        try:
            self.reached = int(counter.numpy())
        except recovery.PS_FAILURES:  # a read can fail while the PS lives (a busy machine): only its death ends the watch
            if self.cluster.task(self.task).alive():
                return False
            last = "no step read yet" if self.reached is None else f"the last step read: {self.reached}"
            raise WatchError(f"{self.task} died before the step counter reached {self.step} ({last}), and not by "
                             f"this watcher's kill: something else killed or restarted it, such as a recovery "
                             f"after training failed while {self.task} still ran.") from None
        if self.reached >= self.step:
            self.killed_at = self.reached
            self.cluster.kill(self.task)
        return self.killed_at is not None


class KillDuringSave(processes.Watcher):
    """While the block runs, kill ``task`` of ``cluster`` once (SIGKILL) as soon as the ``save``-th checkpoint
    save into ``checkpoint_dir`` has begun writing: its temporary files (``ckpt-N_temp``) are there.

    ``killed_during`` is the name of the checkpoint whose save was interrupted (None if none was).
    """

    def __init__(self, cluster, task, checkpoint_dir, save=1, interval=0.002):
        super().__init__(interval)
        self.cluster, self.task, self.checkpoint_dir, self.save = cluster, task, Path(checkpoint_dir), save
        self.killed_during, self._begun = None, set()

    def poll(self):
        """True (stop watching) once the task was killed."""
        self._begun |= {path.name.split("_temp")[0] for path in self.checkpoint_dir.glob("*_temp*")}
        if len(self._begun) >= self.save:
            self.killed_during = sorted(self._begun, key=lambda name: int(name.rpartition("-")[2]))[-1]
            self.cluster.kill(self.task)
        return self.killed_during is not None


def save_while_killing(cluster, task, manager, checkpoint_number):
    """``manager.save(checkpoint_number)`` with ``task`` killed as soon as the save has begun writing files.

    Returns the error the save raised, or None if it finished before the kill.
    """
    with KillDuringSave(cluster, task, manager.directory):
        try:
            manager.save(checkpoint_number=checkpoint_number)
            return None
        except recovery.PS_FAILURES as error:
            return error


def random_faults(tasks, count, num_steps, seed=0):
    """``count`` kills of tasks drawn from ``tasks`` at random steps in (0, num_steps), reproducibly."""
    rng = random.Random(seed)
    return sorted((Fault(rng.randrange(1, num_steps), rng.choice(list(tasks))) for _ in range(count)),
                  key=lambda fault: fault.step)


class FaultInjector:
    """The recovery driver's ``after_schedule`` hook that applies ``faults`` to ``cluster`` at their step.

    A fault waits until one closure per worker is scheduled beyond its step; a kill then lands once
    the step counter on the PS reaches that step, while the workers run the closures after it; a
    restart does not wait for the counter. Each event goes into the timeline at the counter read when
    it happened, not at the fault's step.
    ``restarted``: task -> (the job, the closures each worker had run when the coordinator had reconnected
    it: ``job.closures_by_worker``); ``closures_since_restart`` counts what each ran after.
    """

    def __init__(self, cluster, faults):
        self.cluster, self.pending, self.restarted = cluster, sorted(faults, key=lambda fault: fault.step), {}

    def closures_since_restart(self, task):
        """Closures each worker ran since ``task`` was restarted and reconnected: "worker:i" -> count."""
        job, then = self.restarted[task]
        now = job.closures_by_worker.numpy()
        return {f"worker:{index}": int(count - before) for index, (count, before) in enumerate(zip(now, then))}

    def __call__(self, job, report, scheduled_to, more):
        """Apply the faults due; return the step counter read right before a parameter server was killed, or None."""
        beyond = (job.num_workers if more else 0) * job.steps_per_closure
        killed_ps_at, restarted = None, []
        while self.pending and self.pending[0].step + beyond <= scheduled_to:
            fault = self.pending.pop(0)
            if fault.action == "kill":
                reached = _wait_for_step(job, fault.step)
                self.cluster.kill(fault.task)
                report.timeline.add(reached, f"killed {fault.task}")
                killed_ps_at = reached if fault.task.startswith("ps") else killed_ps_at
            else:  # the driver waits while it starts; the other workers go on
                report.timeline.add(_step_now(job), f"restarting {fault.task}")
                self.cluster.restart(fault.task)
                task = self.cluster.task(fault.task)
                restarted.append((fault, task, cpu_seconds(task.pid)))
                report.timeline.add(_step_now(job), f"restarted {fault.task}")
        for fault, task, cpu_at_restart in restarted:  # the coordinator reconnects once no worker is dead
            if _wait_until_reconnected(task.pid, task.port, cpu_at_restart):
                report.timeline.add(_step_now(job), f"the coordinator reconnected {fault.task}")
            self.restarted[fault.task] = (job, job.closures_by_worker.numpy())
        return killed_ps_at


def train_with_faults(cluster, make_job, num_steps, checkpoints, faults=(), evaluate=None):
    """``recovery.train_with_recovery`` on ``cluster`` with ``faults`` injected; dead tasks are restarted."""
    return recovery.train_with_recovery(make_job, num_steps, checkpoints,
                                        restart=lambda: recovery.restart_dead_tasks(cluster), evaluate=evaluate,
                                        after_schedule=FaultInjector(cluster, faults))


def _step_now(job):
    """The step counter on the PS (``optimizer.iterations``): the steps the workers have run so far."""
    return int(job.optimizer.iterations.numpy())


def _wait_for_step(job, step, timeout=120.0):
    """Poll the step counter (``_step_now``) until it reaches ``step`` or ``timeout`` passes; return it."""
    reached = 0

    def at_step():
        nonlocal reached
        reached = _step_now(job)
        return reached >= step

    with contextlib.suppress(TimeoutError):
        processes.wait_until(at_step, timeout, f"the step counter to reach {step}", interval=0.02)
    return reached


def _wait_until_reconnected(pid, port, cpu_at_restart, timeout=30.0, min_cpu_seconds=0.05, rest_seconds=0.5):
    """Hold the next closures until the coordinator (this process) has reconnected a restarted worker
    and rebuilt its datasets there, so that the worker can take some of them; else the other workers may
    finish them all first. Seen from outside: this process has a connection open to the worker's port
    again (its retries of update_server_def got through), the worker's CPU has moved by
    ``min_cpu_seconds`` since its restart (the new context, the datasets), and it has rested for
    ``rest_seconds`` since the connection was seen (it waits for closures). True if so within ``timeout`` s."""
    last_move = None  # (CPU seconds, when): the last move seen once connected

    def reconnected_and_resting():
        nonlocal last_move
        if last_move is None:
            if not processes.connected(os.getpid(), port):
                return False
            last_move = (cpu_seconds(pid), time.monotonic())
        cpu, now = cpu_seconds(pid), time.monotonic()
        if cpu - last_move[0] > 0.01:  # more than a tick of the kernel's CPU clock
            last_move = (cpu, now)
        return cpu - cpu_at_restart >= min_cpu_seconds and now - last_move[1] >= rest_seconds

    try:
        return processes.wait_until(reconnected_and_resting, timeout,
                                    f"the coordinator to reconnect the worker at port {port}", interval=0.05)
    except TimeoutError:
        return False


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


@dataclass
class CoordinatorRestart:
    """What ``kill_and_restart_coordinator`` saw: the lines the first program printed before its kill, the
    second program's lines, and when (seconds since the first program was started) the first was killed,
    the second printed that it resumed, and the second exited."""

    before_kill: list
    after_restart: list
    killed: float
    resumed: float
    exited: float

    @property
    def recovery_seconds(self):
        """From the kill until the new program trains again: Python and TensorFlow start, connect, restore."""
        return self.resumed - self.killed


def kill_and_restart_coordinator(cluster, arguments, kill_when, resumed_when, finished_when):
    """Run ``labkit.deploy.coordinator``, SIGKILL it once it prints ``kill_when``, start it again, let it finish;
    a ``CoordinatorRestart``."""
    began = time.monotonic()
    first = start_coordinator(cluster, *arguments)
    before_kill = read_until(first, kill_when)
    first.kill()
    killed = time.monotonic() - began
    first.wait()
    second = start_coordinator(cluster, *arguments)
    after_restart = read_until(second, resumed_when)
    resumed = time.monotonic() - began
    after_restart += read_until(second, finished_when)
    if second.wait() != 0:
        raise RuntimeError(f"the restarted coordinator failed; see {cluster.log_dir / 'chief-0.log'}")
    return CoordinatorRestart(before_kill, after_restart, killed, resumed, time.monotonic() - began)


def undisturbed_clock(report):
    """``clock(step)``: the seconds into the undisturbed run ``report`` (a RecoveryReport) at which it had trained
    ``step`` steps, read linearly between its start ("started", step 0) and its checkpoints; beyond its last
    step, at its mean pace."""
    steps = [0, *report.step]
    seconds = [report.timeline.seconds_at("started"), *report.seconds]
    pace = (seconds[-1] - seconds[0]) / (steps[-1] - steps[0])

    def clock(step):
        return float(np.interp(step, steps, seconds)) if step <= steps[-1] else seconds[-1] + (step - steps[-1]) * pace
    return clock


def cost_parts(failed, undisturbed, intervals):
    """What a failure cost, ``failed``'s wall time minus ``undisturbed``'s (two RecoveryReports of the same
    training), in parts that do not overlap and add up to it exactly: [(name, seconds)].

    ``intervals``: (event, name) pairs in the order they happened. A part ends at the first event of
    ``failed``'s timeline that starts with ``event`` (a string or a tuple of them; None: the run's end). It is the
    seconds the part lasted minus the seconds ``undisturbed`` took to train the steps ``failed`` trained in it
    (``undisturbed_clock``): a restart during which the other workers train costs only what they did not do.
    Where the step counter went back (a restore), the steps lost are a part of their own, the undisturbed run's
    seconds for them (they are trained again); so are the steps run beyond the undisturbed run's last (at least
    once). The last interval ends at the run's end (None); an event missing from the timeline is a ValueError.
    """
    if not intervals or intervals[-1][0] is not None:
        raise ValueError("the parts must reach the run's end, where its cost is measured: end the intervals with "
                         "(None, name).")
    clock = undisturbed_clock(undisturbed)
    parts, seconds, step, expected = [], 0.0, 0, 0.0  # the start: both runs' clocks at 0, no step trained
    for event, name in intervals:
        if event is None:
            then, then_step = failed.total_seconds, failed.final_step
        else:
            then, then_step = next(((at, at_step) for at, at_step, happened in failed.timeline.events
                                    if happened.startswith(event)), (None, None))
            if then is None:
                raise ValueError(f"no event starting with {event!r} in the timeline:\n{failed.timeline}")
        then_expected = clock(then_step)
        if then_step < step:  # restored: the steps since the checkpoint are lost
            parts += [(name, then - seconds),
                      (f"the {step - then_step} steps lost, trained again (the undisturbed run's time for them)",
                       expected - then_expected)]
        else:
            parts.append((name, (then - seconds) - (then_expected - expected)))
        seconds, step, expected = then, then_step, then_expected
    beyond = failed.final_step - undisturbed.final_step
    if beyond:
        parts.append((f"the {beyond} step(s) run beyond the undisturbed run's {undisturbed.final_step} (at least "
                      "once; the undisturbed run's time for them)", expected - undisturbed.total_seconds))
    return parts
