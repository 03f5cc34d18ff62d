"""Four machines on one computer: `labkit export`'s files run in separate network namespaces.

Each host is a network namespace with its own address on a private bridge (labkit.deploy.netns);
every task runs from its exported run.sh inside its host's namespace, so all cluster
traffic crosses the bridge, where it is counted. Needs root and `ip`; skipped otherwise.
"""
import os
import signal
import subprocess
import sys

import pytest

from labkit.deploy import export
from labkit.runtime import loglines, processes
from support.network import created_network
from support.processes import task_processes

pytestmark = pytest.mark.root

# A private range nothing else on this machine uses; it exists only inside the namespaces.
CHIEF, PS, WORKERS = "10.231.0.1", "10.231.0.2", ["10.231.0.3", "10.231.0.4"]
PORT = 2222  # the same port on every host, as on real machines
NUM_STEPS = 300
MODEL_BYTES = (784 * 128 + 128 + 128 * 10 + 10) * 4  # the MNIST MLP's float32 weights and biases
# The export's own chief command: the namespaces share this machine's disk, as a cluster's hosts
# share a volume, so the chief writes the training shards once and each worker reads its own.
CHIEF_COMMAND = f"{export.DEFAULT_CHIEF_COMMAND} --num-steps {NUM_STEPS} --checkpoint-every {NUM_STEPS}"
OFFLINE_TRAINING_BYTES = 4_000 * (784 * 4 + 8)  # the offline subset's training images and labels: 12.6 MB


@pytest.fixture
def network():
    network = created_network([CHIEF, PS, *WORKERS])
    yield network
    network.destroy()
    assert not network.exists(), "namespaces were left behind"


@pytest.fixture
def started():
    """Processes the test starts; stopped before the network is torn down, even if the test fails."""
    started_processes = []
    yield started_processes
    processes.stop(started_processes)


@pytest.fixture(autouse=True)
def offline_mnist(monkeypatch):
    monkeypatch.setenv("LABKIT_OFFLINE", "1")  # the namespaces have no internet: use the offline subset


def in_namespace(pid, namespace):
    """True if process ``pid`` runs in the network namespace called ``namespace``."""
    return os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(f"/run/netns/{namespace}").st_ino


def test_the_exported_plan_trains_mnist_across_network_namespaces(network, started, tmp_path):
    out = tmp_path / "export"
    addresses = ["--chief", f"{CHIEF}:{PORT}", "--ps", f"{PS}:{PORT}"]
    for worker in WORKERS:
        addresses += ["--worker", f"{worker}:{PORT}"]
    done = subprocess.run([sys.executable, "-m", "labkit.tools.cli", "export", *addresses,
                           "--chief-command", CHIEF_COMMAND, "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    tasks = export.exported_tasks(out)
    assert [(task, host) for task, host, _ in tasks] == [
        ("ps:0", PS), ("worker:0", WORKERS[0]), ("worker:1", WORKERS[1]), ("chief:0", CHIEF)]

    before = network.traffic()
    for _, host, directory in tasks[:-1]:
        started.append(export.start_task(directory, network.namespace(host)))
    for (_, host, directory), process in zip(tasks, started):
        export.wait_until_serving(process, directory)
        assert in_namespace(process.pid, network.namespace(host))
    _, chief_host, chief_dir = tasks[-1]
    chief_log = export.follow_chief(export.start_task(chief_dir, network.namespace(chief_host)), chief_dir,
                                    NUM_STEPS, timeout=180)
    after = network.traffic()

    finished = loglines.finished(chief_log)
    assert finished and finished[0] == NUM_STEPS, chief_log[-3000:]
    accuracy = finished[1]
    crossed = {host: (after[host][0] - before[host][0], after[host][1] - before[host][1]) for host in after}
    print(f"\ntest accuracy {accuracy:.4f} after {NUM_STEPS} steps; bytes through the bridge (sent, received):")
    for host, (sent, received) in crossed.items():
        print(f"  {host:<11} {sent:>12,} {received:>12,}")
    assert accuracy >= 0.85
    # Only file names and functions leave the chief. Shipping the arrays in the graph sent them to
    # every task: 38.2 MB, 3 x the training set, measured with --ship-arrays on this test.
    assert crossed[CHIEF][0] < OFFLINE_TRAINING_BYTES / 10, crossed
    assert loglines.shard_count(chief_log) == len(WORKERS), chief_log[-3000:]
    # Every step reads the whole model from the PS and sends it a gradient of the same size.
    assert min(crossed[PS]) >= NUM_STEPS * MODEL_BYTES, crossed
    for worker in WORKERS:
        assert min(crossed[worker]) >= MODEL_BYTES, f"{worker} took no part: {crossed}"


def test_a_task_in_a_namespace_exits_when_the_process_that_started_it_dies(network, tmp_path):
    plan_dir = tmp_path / "export"
    export.export({"chief": [f"{CHIEF}:{PORT}"], "ps": [f"{PS}:{PORT}"], "worker": [f"{WORKERS[0]}:{PORT}"]},
                  plan_dir)
    ps_dir = plan_dir / PS / "ps-0"
    starter = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from labkit.deploy import export; "
         "ps = export.start_task(sys.argv[1], sys.argv[2]); export.wait_until_serving(ps, sys.argv[1]); "
         "print(ps.pid, flush=True); time.sleep(600)", str(ps_dir), network.namespace(PS)],
        stdout=subprocess.PIPE, text=True)
    try:
        ps_pid = int(starter.stdout.readline())
        assert in_namespace(ps_pid, network.namespace(PS))
        assert ps_pid in [process.pid for process in task_processes()], "the orphan check would not see it"
        starter.send_signal(signal.SIGKILL)
        starter.wait()
        assert processes.wait_until_gone([ps_pid], timeout=15) == [], "the ps task outlived the process that started it"
    finally:
        starter.kill()
        starter.wait()
