"""Fault injection's own rules. The worker, parameter-server and coordinator failures and model.fit's
BackupAndRestore run end to end in notebook 07's smoke copy (tests/smoke, in `make test`), whose checks
(labkit.checks: at_least_once, worked_after_restart, one_recovery_per_failure, coordinator_resumed,
fit_skipped_epochs) assert what these tests asserted before; tests/test_checks.py shows each check
failing on a wrong outcome. scripts/stress_faults.py repeats the three kills many times.
"""
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


class Restarts:
    """A cluster whose ``restart`` starts a process that uses some CPU (as a reconnected worker does) and
    moves the step counter on by ``steps_meanwhile``, as the other workers do while the task starts."""

    def __init__(self, counter, steps_meanwhile):
        self.counter, self.steps_meanwhile, self.process = counter, steps_meanwhile, None

    def restart(self, name):
        busy = "import time\nwhile time.process_time() < 0.3: pass\ntime.sleep(60)"
        self.process = subprocess.Popen([sys.executable, "-c", busy])
        self.counter.value += self.steps_meanwhile

    def task(self, name):
        return types.SimpleNamespace(pid=self.process.pid)


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
        cluster.process.kill()
        cluster.process.wait()
    assert [(step, event) for _, step, event in report.timeline.events] == [
        (52, "restarting worker:1"), (57, "restarted worker:1"), (57, "the coordinator reconnected worker:1")]
