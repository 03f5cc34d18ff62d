"""Every check of labkit.checks.tf_config rejects a wrong result (and accepts the right one).

Real objects throughout: real processes, checkpoints written by TensorFlow, matplotlib axes; only the
numbers fed in are chosen to be wrong.
"""
import pytest

from labkit import checks
from labkit.cluster import Task


def test_01_09_a_task_with_another_cluster_is_named():
    cluster = {"ps": ["localhost:1"], "worker": ["localhost:2"]}
    configs = {"ps:0": {"cluster": cluster}, "worker:0": {"cluster": dict(cluster, worker=["localhost:3"])}}
    checks.same_cluster_everywhere({"ps:0": configs["ps:0"]}, cluster)
    with pytest.raises(AssertionError, match="cluster part of worker:0 differs"):
        checks.same_cluster_everywhere(configs, cluster)
    with pytest.raises(AssertionError, match="no task"):
        checks.same_cluster_everywhere({}, cluster)


def test_01_a_different_received_tf_config_is_refused():
    config = {"cluster": {"ps": ["localhost:1"]}, "task": {"type": "ps", "index": 0}}
    checks.received_its_tf_config("ps:0", config, config)
    with pytest.raises(AssertionError, match="ps:0 got TF_CONFIG"):
        checks.received_its_tf_config("ps:0", dict(config, task={"type": "ps", "index": 1}), config)


@pytest.mark.parametrize("sockets, message", [
    ([("::", 2223)], "does not listen on its port 2222"),
    ([("127.0.0.1", 2222)], "listens on \\['127.0.0.1'\\] only"),
])
def test_01_a_server_must_listen_on_its_port_on_every_interface(sockets, message):
    checks.listens_on_every_interface("ps:0", 2222, [("::", 2222)])
    checks.listens_on_every_interface("ps:0", 2222, [("0.0.0.0", 2222)])
    with pytest.raises(AssertionError, match=message):
        checks.listens_on_every_interface("ps:0", 2222, sockets)


def test_01_an_isolated_kernel_must_refuse_connections_from_outside():
    checks.isolated_kernel_unreachable("isolated", {"192.0.2.2:2222": "refused"})
    checks.isolated_kernel_unreachable("exposed", {"192.0.2.2:2222": "accepted"})  # said, not a failure
    with pytest.raises(AssertionError, match="yet connections from outside to \\['192.0.2.2:2222'\\] were accepted"):
        checks.isolated_kernel_unreachable("isolated", {"192.0.2.2:2222": "accepted"})


def test_01_kill_and_restart_checks_on_real_processes(sleeper, tmp_path):
    task = Task("worker", 1, 2222, tmp_path / "worker-1.log", sleeper)
    with pytest.raises(AssertionError, match="still alive after the kill"):
        checks.task_dead(task)
    checks.restarted_in_place(task, old_pid=sleeper.pid + 1, old_port=2222)
    with pytest.raises(AssertionError, match="still has pid"):
        checks.restarted_in_place(task, old_pid=sleeper.pid, old_port=2222)
    with pytest.raises(AssertionError, match="moved from port 2223"):
        checks.restarted_in_place(task, old_pid=sleeper.pid + 1, old_port=2223)
    with pytest.raises(AssertionError, match="still running: worker:1"):
        checks.pids_gone({"worker:1": sleeper.pid})
    sleeper.kill()
    sleeper.wait()
    checks.task_dead(task)
    checks.pids_gone({"worker:1": sleeper.pid})
    with pytest.raises(AssertionError, match="not alive after the restart"):
        checks.restarted_in_place(task, old_pid=sleeper.pid + 1, old_port=2222)
