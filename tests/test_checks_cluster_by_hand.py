"""Every check of labkit.checks.cluster_by_hand rejects a wrong result (and accepts the right one).

Real objects throughout: real processes, checkpoints written by TensorFlow, matplotlib axes; only the
numbers fed in are chosen to be wrong.
"""
import subprocess
import sys

import pytest

from labkit import checks


def ex1_configs(ports):
    cluster = {"ps": [f"localhost:{ports[0]}"], "worker": [f"localhost:{ports[1]}"], "chief": [f"localhost:{ports[2]}"]}
    return {f"{task_type}:{index}": {"cluster": cluster, "task": {"type": task_type, "index": index}}
            for task_type, addresses in cluster.items() for index in range(len(addresses))}


def test_ex1_a_non_loopback_host_is_refused_with_the_security_fact():
    cluster = {"ps": ["10.0.0.5:2222"], "worker": ["localhost:2223"], "chief": ["localhost:2224"]}
    configs = {f"{task_type}:{index}": {"cluster": cluster, "task": {"type": task_type, "index": index}}
               for task_type, addresses in cluster.items() for index in range(len(addresses))}
    with pytest.raises(AssertionError, match="listens on every interface whatever host"):
        checks.tf_configs_valid(configs, 1)


@pytest.mark.parametrize("names, message", [
    (["ps:0", "worker:0", "chief:0"], "do not start a server for chief:0"),
    (["ps:0"], r"start one process for each of \['ps:0', 'worker:0'\]"),
])
def test_ex1_servers_serving_needs_one_process_per_server(sleeper, names, message):
    with pytest.raises(AssertionError, match=message):
        checks.servers_serving({name: sleeper for name in names}, ex1_configs([2222, 2223, 2224]))


def test_ex1_a_server_that_exited_is_named(tmp_path):
    exited = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    exited.wait()
    with pytest.raises(AssertionError, match="exited with code 3 before serving"):
        checks.servers_serving({"ps:0": exited, "worker:0": exited}, ex1_configs([2222, 2223, 2224]))


def test_ex1_a_server_that_never_listens_is_named_after_the_timeout(sleeper):
    with pytest.raises(AssertionError, match="ps:0 is not reachable on port 2222 after 0.3 s"):
        checks.servers_serving({"ps:0": sleeper, "worker:0": sleeper}, ex1_configs([2222, 2223, 2224]), timeout=0.3)


def test_ex1_a_chief_that_did_not_join_is_refused():
    with pytest.raises(AssertionError, match="this notebook does not serve at localhost:2224"):
        checks.cluster_trained(ex1_configs([2222, 2223, 2224]), model=None, data=None, target_accuracy=0.9)
