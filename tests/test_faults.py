"""Fault injection's own rules. The worker, parameter-server and coordinator failures and model.fit's
BackupAndRestore run end to end in notebook 07's smoke run (tests/test_notebook_07_fault_tolerance.py), whose checks
(labkit.checks: at_least_once, worked_after_restart, one_recovery_per_failure, coordinator_resumed,
fit_skipped_epochs) assert what these tests asserted before; tests/test_checks.py shows each check
failing on a wrong outcome. scripts/stress_faults.py repeats the three kills many times.
"""
import socket
import subprocess
import sys
import types

import pytest

from labkit import faults, recovery
from labkit.cluster import Task
from labkit.runtime import processes

tf = pytest.importorskip("tensorflow")


def test_random_faults_are_reproducible():
    first = faults.random_faults(["worker:0", "worker:1"], 3, 500, seed=7)
    assert first == faults.random_faults(["worker:0", "worker:1"], 3, 500, seed=7)
    assert [f.step for f in first] == sorted(f.step for f in first) and all(0 < f.step < 500 for f in first)


def test_a_bad_fault_action_is_a_clear_error():
    with pytest.raises(ValueError, match="must be 'kill' or 'restart'"):
        faults.Fault(10, "worker:0", "pause")


class Counter:
    """A step counter on ps:0 (``task``): reading it fails as TensorFlow's read does once the process is gone."""

    def __init__(self, task, read=None):
        self.task, self.value, self.read, self.reads = task, 0, read, []

    def numpy(self):
        self.reads.append(self.value)
        if self.read:
            self.read()
        if not self.task.alive():
            raise tf.errors.UnavailableError(None, None, "recvmsg:Connection reset by peer")
        return self.value


def kill_at_step(sleeper, tmp_path, counter_of, step=80):
    """A KillAtStep on a cluster of one task, ps:0, run by ``sleeper``; and its counter."""
    task = Task("ps", 0, 2222, tmp_path / "ps-0.log", sleeper)
    cluster = types.SimpleNamespace(task=lambda name: task, kill=lambda name: (sleeper.kill(), sleeper.wait()))
    counter = counter_of(task)
    return faults.KillAtStep(cluster, "ps:0", counter, step), counter


def wait_until_watch_ends(watcher):
    processes.wait_until(lambda: not watcher._thread.is_alive(), 10, "the watch to end")  # noqa: SLF001


def test_kill_at_step_kills_once_the_counter_reaches_its_step(sleeper, tmp_path):
    failure, counter = kill_at_step(sleeper, tmp_path, Counter)
    with failure:
        counter.value = 83
        wait_until_watch_ends(failure)
    assert failure.killed_at == 83 and sleeper.poll() is not None


def test_kill_at_step_says_so_when_the_task_died_by_other_hands_first(sleeper, tmp_path):
    # The flake of exercise 3: training failed at step 3 while ps:0 still ran (a worker's channel to the
    # restarted ps:0 was still in its reconnect back-off), the recovery restarted ps:0, and the watch ended
    # with killed_at None; the check then said "train_until must train past kill_step".
    failure, counter = kill_at_step(sleeper, tmp_path, Counter)
    died_first = r"ps:0 died before the step counter reached 80 \(the last step read: 3\), and not by this watcher"
    with pytest.raises(faults.WatchError, match=died_first):
        with failure:
            counter.value = 3
            processes.wait_until(lambda: 3 in counter.reads, 10, "the watcher to read step 3")
            sleeper.kill()  # the recovery's cluster.restart("ps:0")
            sleeper.wait()
            wait_until_watch_ends(failure)
    assert failure.killed_at is None


def test_kill_at_step_says_so_when_its_counter_was_freed(sleeper, tmp_path):
    failure, counter = kill_at_step(sleeper, tmp_path, Counter)
    del counter
    with pytest.raises(faults.WatchError, match="the step counter was freed before it reached step 80"):
        with failure:
            wait_until_watch_ends(failure)
    assert sleeper.poll() is None


def test_an_error_in_the_watcher_thread_is_raised_when_its_block_ends(sleeper, tmp_path):
    def fails():
        raise tf.errors.NotFoundError(None, None, "Resource localhost/iter does not exist")

    for own_error in (None, ZeroDivisionError):  # an error of the block's own wins
        failure, counter = kill_at_step(sleeper, tmp_path, lambda task: Counter(task, read=fails))
        with pytest.raises(own_error or tf.errors.NotFoundError), failure:
            wait_until_watch_ends(failure)
            if own_error:
                raise own_error


# A restarted worker as the coordinator finds it: it listens, and once connected to, it uses some CPU
# (the new context, the datasets), then rests.
RESTARTED_WORKER = """
import socket, sys, time
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
print(server.getsockname()[1], flush=True)
connection, _ = server.accept()
while time.process_time() < 0.3:
    pass
print("resting", flush=True)
sys.stdin.read()
"""


class Restarts:
    """A cluster whose ``restart`` starts a RESTARTED_WORKER and connects to it, as the coordinator
    reconnects, and moves the step counter on by ``steps_meanwhile``, as the other workers do meanwhile."""

    def __init__(self, counter, steps_meanwhile):
        self.counter, self.steps_meanwhile = counter, steps_meanwhile
        self.process = self.port = self.connection = None

    def restart(self, name):
        self.process = subprocess.Popen([sys.executable, "-c", RESTARTED_WORKER], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        self.port = int(self.process.stdout.readline())
        self.connection = socket.create_connection(("127.0.0.1", self.port))
        self.counter.value += self.steps_meanwhile

    def task(self, name):
        return types.SimpleNamespace(pid=self.process.pid, port=self.port)

    def stop(self):
        self.connection.close()
        self.process.stdin.close()
        self.process.wait()


def test_a_restart_goes_into_the_timeline_at_the_step_counter_read_when_it_happened(sleeper, tmp_path):
    counter = Counter(Task("ps", 0, 2222, tmp_path / "ps-0.log", sleeper))
    counter.value = 52  # the workers ran past the fault's step 50 before the injector was called
    cluster = Restarts(counter, steps_meanwhile=5)
    job = types.SimpleNamespace(optimizer=types.SimpleNamespace(iterations=counter), num_workers=2,
                                steps_per_closure=10, closures_by_worker=types.SimpleNamespace(numpy=lambda: [3, 4]))
    report = types.SimpleNamespace(timeline=recovery.Timeline())
    try:
        faults.FaultInjector(cluster, [faults.Fault(50, "worker:1", "restart")])(job, report, 70, more=True)
    finally:
        cluster.stop()
    assert [(step, event) for _, step, event in report.timeline.events] == [
        (52, "restarting worker:1"), (57, "restarted worker:1"), (57, "the coordinator reconnected worker:1")]


def test_a_restarted_worker_busy_on_its_own_start_is_not_taken_for_reconnected(tmp_path):
    """Its CPU has moved and it rests: it is reconnected while the coordinator has a connection to it, not without."""
    cluster = Restarts(counter=types.SimpleNamespace(value=0), steps_meanwhile=0)
    cluster.restart("worker:1")  # the coordinator (this process) connects
    try:
        assert cluster.process.stdout.readline() == "resting\n"  # its start's CPU is spent

        def reconnected():  # looked at once, with no rest asked for
            return faults._wait_until_reconnected(cluster.process.pid, cluster.port, cpu_at_restart=0.0, timeout=0,
                                                  rest_seconds=0)

        assert reconnected()
        cluster.connection.close()  # as if the coordinator had never connected
        assert not reconnected()
    finally:
        cluster.stop()


def report_of(events, rows):
    """A RecoveryReport with timeline ``events`` (seconds, step, event) and a row (step, seconds) per checkpoint."""
    report = recovery.RecoveryReport(timeline=recovery.Timeline())
    report.timeline.events = list(events)
    for step, seconds in rows:
        report.record(step, seconds)
    return report


# 400 steps: started at 1.0 s, then 100 steps per 0.5 s.
UNDISTURBED = report_of([(1.0, 0, "started")], [(100, 1.5), (200, 2.0), (300, 2.5), (400, 3.0)])


def test_a_ps_failures_cost_parts_add_up_and_charge_the_lost_steps_once():
    failed = report_of([(1.2, 0, "started"), (2.25, 250, "killed ps:0"), (2.35, 250, "UnavailableError: gone"),
                        (3.0, 250, "restarted ps:0"), (5.0, 200, "resumed from checkpoint at step 200"),
                        (5.1, 200, "every worker reaches the parameter servers")],
                       [(100, 1.7), (200, 2.2), (300, 5.8), (400, 6.4)])
    parts = dict(faults.cost_parts(failed, UNDISTURBED, [
        ("started", "start"), ("killed", "to the kill"), ("UnavailableError", "detect"), ("restarted", "restart"),
        ("resumed", "restore"), ("every worker", "wait"), (None, "to the end")]))
    assert sum(parts.values()) == pytest.approx(6.4 - 3.0)
    assert parts == pytest.approx({"start": 0.2, "to the kill": -0.2, "detect": 0.1, "restart": 0.65, "restore": 2.0,
                                   "the 50 steps lost, trained again (the undisturbed run's time for them)": 0.25,
                                   "wait": 0.1, "to the end": 0.3})


def test_a_worker_restart_costs_only_the_steps_the_other_workers_did_not_train_meanwhile():
    failed = report_of([(1.0, 0, "started"), (1.6, 120, "killed worker:1"), (1.7, 130, "restarting worker:1"),
                        (2.7, 230, "restarted worker:1"), (3.7, 230, "the coordinator reconnected worker:1")],
                       [(100, 1.5), (200, 2.4), (300, 4.2), (401, 4.7)])
    parts = faults.cost_parts(failed, UNDISTURBED, [
        ("started", "start"), ("killed", "to the kill"), ("restarting", "to the restart"), ("restarted", "restart"),
        ("the coordinator reconnected", "reconnect"), (None, "to the end")])
    restart = dict(parts)["restart"]
    assert restart == pytest.approx(1.0 - 0.5), "100 steps trained during the 1 s restart, 0.5 s undisturbed"
    assert sum(seconds for _, seconds in parts) == pytest.approx(4.7 - 3.0)
    assert parts[-1] == ("the 1 step(s) run beyond the undisturbed run's 400 (at least once; the undisturbed run's "
                         "time for them)", pytest.approx(0.5 / 100))
    durations = [1.0, 0.6, 0.1, 1.0, 1.0]  # the time between the events: they add up to more than the whole cost
    assert sum(durations[2:]) > 4.7 - 3.0, "the outage's durations alone count the training done meanwhile as cost"


def test_cost_parts_need_the_runs_end_and_every_event_they_name():
    failed = report_of([(1.0, 0, "started")], [(400, 3.0)])
    with pytest.raises(ValueError, match="end the intervals with"):
        faults.cost_parts(failed, UNDISTURBED, [("started", "start")])
    with pytest.raises(ValueError, match="no event starting with 'killed ps'"):
        faults.cost_parts(failed, UNDISTURBED, [("killed ps", "to the kill"), (None, "rest")])
