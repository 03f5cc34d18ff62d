"""LocalCluster on real task processes: start, watch, kill, restart, port clashes, no orphans."""
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from labkit import cluster as cluster_module
from labkit.cluster import ClusterStartError, LocalCluster
from support import is_running, wait_until_gone

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def small_cluster():
    with LocalCluster(num_workers=2, num_ps=1, name="test-lifecycle") as cluster:
        yield cluster


def test_every_task_is_its_own_process_configured_by_its_own_tf_config(small_cluster):
    assert [t.name for t in small_cluster.tasks] == ["ps:0", "worker:0", "worker:1"]
    pids = {task.pid for task in small_cluster.tasks}
    assert len(pids) == 3 and os.getpid() not in pids
    for task in small_cluster.tasks:
        assert task.serving()
        environ = psutil.Process(task.pid).environ()
        assert json.loads(environ["TF_CONFIG"]) == small_cluster.tf_config(task.name)
        assert environ["GRPC_FAIL_FAST"] == "use_caller"
    assert small_cluster.ready_seconds > 0


def test_status_repr_and_html_show_every_task(small_cluster):
    rows = small_cluster.status()
    assert [row["alive"] for row in rows] == [True, True, True]
    assert all("serving at" in row["last_log_line"] for row in rows)
    text, page = repr(small_cluster), small_cluster._repr_html_()
    for task in small_cluster.tasks:
        assert task.address in text and task.address in page
    assert "all network interfaces" in page


def test_kill_then_restart_a_worker_on_the_same_port(small_cluster):
    worker = small_cluster.task("worker:1")
    old_pid, port = worker.pid, worker.port
    small_cluster.kill("worker:1")
    assert not is_running(old_pid)
    assert [row["alive"] for row in small_cluster.status()] == [True, True, False]
    small_cluster.restart("worker:1")
    assert worker.pid != old_pid and worker.port == port
    assert worker.alive() and worker.serving() and worker.restarts == 1


def test_unknown_task_name_is_a_clear_error(small_cluster):
    with pytest.raises(KeyError, match="its tasks are ps:0, worker:0, worker:1"):
        small_cluster.kill("worker:7")


@pytest.mark.parametrize("kwargs, message", [
    ({"num_workers": 0}, "num_workers must be a whole number >= 1"),
    ({"num_ps": 0}, "num_ps must be a whole number >= 1"),
    ({"num_workers": 1.5}, "num_workers must be a whole number >= 1"),
])
def test_bad_sizes_are_refused_before_any_process_starts(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LocalCluster(name="test-bad", **kwargs)


def test_a_taken_port_is_replaced_by_a_free_one(monkeypatch):
    squatter = socket.socket()
    squatter.bind(("", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    ports = iter([taken])
    monkeypatch.setattr(cluster_module, "pick_port", lambda: next(ports, None) or cluster_module.portpicker.pick_unused_port())
    try:
        with LocalCluster(num_workers=1, num_ps=1, name="test-clash") as cluster:
            assert taken not in [task.port for task in cluster.tasks]
            assert all(task.serving() for task in cluster.tasks)
    finally:
        squatter.close()


def test_a_task_that_dies_while_starting_raises_with_its_log(monkeypatch):
    broken = lambda self, task="chief:0": {"cluster": self.cluster_spec, "task": {"type": "worker", "index": 5}}
    monkeypatch.setattr(LocalCluster, "tf_config", broken)
    with pytest.raises(ClusterStartError, match="exited with code 1(.|\n)*bad TF_CONFIG: task index 5 is out of range"):
        LocalCluster(num_workers=1, num_ps=1, name="test-broken")


def test_a_new_cluster_with_the_same_name_stops_the_old_one():
    first = LocalCluster(num_workers=1, num_ps=1, name="test-rerun")
    first_pids = [task.pid for task in first.tasks]
    with LocalCluster(num_workers=1, num_ps=1, name="test-rerun") as second:
        assert wait_until_gone(first_pids, timeout=0.5) == []
        assert second.running


OWNER = textwrap.dedent("""
    import sys, time, labkit
    cluster = labkit.LocalCluster(num_workers=1, num_ps=1, name="orphan-test-" + sys.argv[1])
    print(" ".join(str(task.pid) for task in cluster.tasks), flush=True)
    sys.stdin.readline()  # the test checks the tasks are up, then lets us go on
    if sys.argv[1] == "exception":
        raise RuntimeError("the owner failed without calling stop()")
    time.sleep(600)
""")


def start_owner(how):
    owner = subprocess.Popen([sys.executable, "-c", OWNER, how], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    pids = [int(pid) for pid in owner.stdout.readline().split()]
    assert len(pids) == 2 and all(is_running(pid) for pid in pids)
    owner.stdin.write("go on\n")
    owner.stdin.flush()
    return owner, pids


@pytest.mark.parametrize("how", ["sigkill", "process-group-kill", "ctrl-c", "exception"])
def test_no_task_outlives_its_owner(how):
    owner, pids = start_owner(how)
    if how == "sigkill":
        owner.kill()
    elif how == "process-group-kill":
        os.killpg(owner.pid, signal.SIGKILL)
    elif how == "ctrl-c":
        owner.send_signal(signal.SIGINT)
    owner.wait(timeout=30)
    assert wait_until_gone(pids) == []


def test_a_server_started_by_hand_keeps_serving_with_stdin_closed():
    """On a real machine (nohup, systemd) stdin is /dev/null: that must not read as 'parent gone'."""
    port = cluster_module.pick_port()
    tf_config = {"cluster": {"ps": [f"localhost:{port}"], "worker": ["localhost:1"]},
                 "task": {"type": "ps", "index": 0}}
    env = {key: value for key, value in os.environ.items() if key != "LABKIT_EXIT_WITH_PARENT"}
    server = subprocess.Popen([sys.executable, "-m", "labkit.server"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**env, "TF_CONFIG": json.dumps(tf_config)})
    try:
        assert any("serving at" in line for line in server.stdout)
        time.sleep(1.0)
        assert server.poll() is None, "the server exited although nobody asked it to"
    finally:
        server.kill()
        server.wait()
