"""Tests for labkit.runtime.tfconfig: every bad TF_CONFIG gets its own clear error."""

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from labkit.runtime import tfconfig
from labkit.runtime.tfconfig import TFConfigError

CLUSTER = {
    "chief": ["localhost:2222"],
    "worker": ["localhost:2223", "localhost:2224"],
    "ps": ["localhost:2225"],
}
WORKER_0 = {"type": "worker", "index": 0}


def make(cluster=None, task=None, **extra_keys):
    """A TF_CONFIG dict: the valid default with `cluster`, `task` or extra keys swapped in."""
    config = {"cluster": CLUSTER if cluster is None else cluster, "task": WORKER_0 if task is None else task}
    config.update(extra_keys)
    return config


def cluster_with(**task_types):
    """CLUSTER with some task types replaced; one set to None is removed."""
    cluster = dict(CLUSTER)
    for task_type, addresses in task_types.items():
        if addresses is None:
            del cluster[task_type]
        else:
            cluster[task_type] = addresses
    return cluster


def without(mapping, key):
    return {k: v for k, v in mapping.items() if k != key}


def worker_address(address):
    """A config whose worker:0 has `address`."""
    return make(cluster_with(worker=[address, "localhost:2224"]))


BAD_INPUTS = [
    # (1) not valid JSON: the message keeps json's position
    pytest.param('{"cluster": {', ["not valid JSON", "line 1, column 14", "character 13"],
                 id="01-invalid-json"),
    pytest.param("{'cluster': {}}", ["not valid JSON", "double quotes"], id="01-json-single-quotes"),
    # (2) top level not an object
    pytest.param('["localhost:2222"]', ["must be a JSON object", "(type list)"], id="02-top-level-list"),
    pytest.param(42, ["must be a JSON object", "got 42 (type int)"], id="02-top-level-number"),
    # (3) missing "cluster"
    pytest.param(without(make(), "cluster"), ['missing "cluster"'], id="03-missing-cluster"),
    # (4) "cluster" not an object / empty
    pytest.param(make(cluster=["localhost:2222"]), ['"cluster" must be an object'],
                 id="04-cluster-not-object"),
    pytest.param(make(cluster={}), ['"cluster" is empty'], id="04-cluster-empty"),
    # (5) missing "task"
    pytest.param(without(make(), "task"), ['missing "task"'], id="05-missing-task"),
    # (6) "task" missing "type" or "index" (or not an object at all)
    pytest.param(make(task={"index": 0}), ['"task" is missing "type"'], id="06-task-missing-type"),
    pytest.param(make(task={"type": "worker"}), ['"task" is missing "index"'], id="06-task-missing-index"),
    pytest.param(make(task="worker:0"), ['"task" must be an object'], id="06-task-not-object"),
    # (7) unknown task type in the cluster, with a suggestion
    pytest.param(make(cluster_with(worker=None, workers=["localhost:2223"])),
                 ["unknown task type 'workers'", "Did you mean 'worker'?"], id="07-unknown-task-type"),
    # (8) no "ps" task
    pytest.param(make(cluster_with(ps=None)), ["no 'ps' task"], id="08-no-ps"),
    # (9) no "worker" task
    pytest.param(make(cluster_with(worker=None), task={"type": "ps", "index": 0}),
                 ["no 'worker' task"], id="09-no-worker"),
    # (10) a task type's addresses are not a non-empty list of strings
    pytest.param(make(cluster_with(ps="localhost:2225")), ["task type 'ps' must have a non-empty list"],
                 id="10-addresses-string"),
    pytest.param(make(cluster_with(ps=[])), ["task type 'ps' must have a non-empty list"], id="10-addresses-empty"),
    pytest.param(make(cluster_with(ps=[2225])), ["task type 'ps' must have a non-empty list"],
                 id="10-address-number"),
    # (11) address not of the form host:port
    pytest.param(worker_address("localhost"), ["'localhost' is not of the form host:port"], id="11-no-port"),
    pytest.param(worker_address("http://x:1"), ["looks like a URL"], id="11-url"),
    pytest.param(worker_address("::1:2222"), ["'::1:2222' is not of the form host:port", "[::1]:2222"],
                 id="11-ipv6-without-brackets"),
    pytest.param(worker_address("[::1]"), ["'[::1]' is not of the form host:port"],
                 id="11-ipv6-without-port"),
    # (12) port not an integer
    pytest.param(worker_address("localhost:abc"), ["port 'abc'", "is not an integer"], id="12-port-not-int"),
    pytest.param(worker_address("localhost:"), ["port ''", "is not an integer"], id="12-port-empty"),
    # (13) port out of range
    pytest.param(worker_address("localhost:70000"), ["port 70000", "out of range", "1 to 65535"],
                 id="13-port-too-big"),
    pytest.param(worker_address("localhost:0"), ["port 0", "out of range"], id="13-port-zero"),
    # (14) the same address used twice: both tasks are named
    pytest.param(make(cluster_with(ps=["localhost:2223"])), ["used by both worker:0 and ps:0"],
                 id="14-duplicate-address"),
    pytest.param(make(cluster_with(ps=["LOCALHOST:2224"])), ["used by both worker:1 and ps:0"],
                 id="14-duplicate-address-case"),
    # (15) more than one chief
    pytest.param(make(cluster_with(chief=["localhost:2222", "localhost:2226"])), ["2 chiefs"],
                 id="15-two-chiefs"),
    # (16) evaluator listed inside "cluster"
    pytest.param(make(cluster_with(evaluator=["localhost:2226"])),
                 ['evaluator must not be listed in "cluster"', 'task type is "evaluator"'],
                 id="16-evaluator-in-cluster"),
    # (17) unknown task type, with a suggestion
    pytest.param(make(task={"type": "wroker", "index": 0}),
                 ["unknown task type 'wroker'", "Did you mean 'worker'?"],
                 id="17-unknown-task-type"),
    # (18) task index negative or not an int
    pytest.param(make(task={"type": "worker", "index": -1}), ["task index -1 must be a non-negative integer"],
                 id="18-index-negative"),
    pytest.param(make(task={"type": "worker", "index": "0"}),
                 ["task index '0' must be a non-negative integer"],
                 id="18-index-string"),
    pytest.param(make(task={"type": "worker", "index": True}),
                 ["task index True must be a non-negative integer"],
                 id="18-index-bool"),
    pytest.param(make(task={"type": "worker", "index": 1.0}),
                 ["task index 1.0 must be a non-negative integer"],
                 id="18-index-float"),
    # (19) task index out of range for its task type
    pytest.param(make(task={"type": "worker", "index": 2}),
                 ["task index 2 is out of range: the cluster has 2 'worker' tasks (indices 0..1). "
                  "Use an index from 0 to 1."], id="19-index-out-of-range"),
    # (20) task type not in the cluster
    pytest.param(make(cluster_with(chief=None), task={"type": "chief", "index": 0}),
                 ["task type 'chief' does not appear in \"cluster\""], id="20-task-type-not-in-cluster"),
    # (21) syntactically invalid host
    pytest.param(worker_address("my host:2222"), ["host 'my host'", "not a valid hostname or IP address"],
                 id="21-host-with-space"),
    pytest.param(worker_address("_worker:2222"), ["host '_worker'", "not a valid hostname"],
                 id="21-host-underscore"),
    pytest.param(worker_address("-worker:2222"), ["host '-worker'", "not a valid hostname"],
                 id="21-host-hyphen"),
    pytest.param(worker_address(":2222"), ["host ''", "not a valid hostname"], id="21-host-empty"),
    pytest.param(worker_address("10.0.0.256:2222"), ["host '10.0.0.256'", "not a valid"], id="21-bad-ipv4"),
    pytest.param(worker_address("[localhost]:2222"), ["host 'localhost'", "not a valid"],
                 id="21-brackets-not-ipv6"),
    # unknown top-level key, with a suggestion
    pytest.param(make(clusters={}), ["unknown top-level key 'clusters'", "Did you mean 'cluster'?"],
                 id="22-unknown-top-level-key"),
    # a TFJob's replica type names where TF_CONFIG has the lower-case task types
    pytest.param(make(task={"type": "PS", "index": 0}), ["unknown task type 'PS'", "Did you mean 'ps'?"],
                 id="23-tfjob-replica-type-as-task-type"),
    pytest.param(make(cluster_with(worker=None, Worker=["localhost:2223"])),
                 ["unknown task type 'Worker'", "Did you mean 'worker'?"], id="23-tfjob-replica-type-as-task-type"),
    # what a TFJob with enableDynamicWorker sets
    pytest.param({"sparseCluster": {"ps": ["pslab-ps-0.default.svc:2222"], "worker": {"0": "pslab-worker-0.default.svc:2222"}},
                  "task": WORKER_0}, ['"sparseCluster" instead of "cluster"', "Remove enableDynamicWorker"],
                 id="24-tfjob-sparse-cluster"),
]


@pytest.mark.parametrize("tf_config, fragments", BAD_INPUTS)
def test_bad_input_is_rejected_with_a_specific_message(tf_config, fragments):
    with pytest.raises(TFConfigError) as caught:
        tfconfig.validate(tf_config)
    for fragment in fragments:
        assert fragment in str(caught.value)


@pytest.mark.parametrize("tf_config, fragments", [p for p in BAD_INPUTS if isinstance(p.values[0], dict)])
def test_bad_input_as_json_string_gives_the_same_message(tf_config, fragments):
    with pytest.raises(TFConfigError) as caught:
        tfconfig.validate(json.dumps(tf_config))
    for fragment in fragments:
        assert fragment in str(caught.value)


def test_tfconfig_error_is_a_value_error():
    assert issubclass(TFConfigError, ValueError)


@pytest.mark.parametrize("tf_config", [
    pytest.param(make(), id="plain"),
    pytest.param(make(task={"type": "worker", "index": 1, "trial": "7"}), id="extra-task-key"),
    pytest.param(make(rpc_layer="grpc", environment="cloud"), id="rpc-layer-and-environment"),
    pytest.param(make(task={"type": "evaluator", "index": 0}), id="evaluator-outside-cluster"),
    pytest.param(make(cluster_with(chief=None)), id="no-chief"),
    pytest.param(make(cluster_with(ps=["[::1]:2225", "10.0.0.5:2225", "ps-1.example.com:65535"])),
                 id="ip-and-dns"),
])
def test_good_input_is_accepted(tf_config):
    assert tfconfig.validate(tf_config) == tf_config
    assert tfconfig.validate(json.dumps(tf_config)) == tf_config


# What the Kubeflow Training Operator sets in a TFJob's Pods (its tensorflow.go, genTFConfigJSONStr):
# lower-case task types, each task's headless Service in its namespace, and "environment": "cloud".
OPERATOR_CLUSTER = {"chief": ["pslab-chief-0.lab.svc:2222"], "ps": ["pslab-ps-0.lab.svc:2222"],
                    "worker": ["pslab-worker-0.lab.svc:2222", "pslab-worker-1.lab.svc:2222"]}


@pytest.mark.parametrize("task", [{"type": "chief", "index": 0}, {"type": "ps", "index": 0},
                                  {"type": "worker", "index": 1}, {"type": "evaluator", "index": 0}])
def test_the_tf_config_of_a_tfjob_pod_is_accepted_and_explained(task):
    config = json.dumps({"cluster": OPERATOR_CLUSTER, "task": task, "environment": "cloud"})
    assert tfconfig.validate(config)["task"] == task
    marked = [line for line in tfconfig.explain(config).splitlines() if "<- this process" in line]
    if task["type"] == "evaluator":  # the operator leaves the evaluator out of the cluster, as TensorFlow wants
        assert marked == ["evaluator 0      (not in the cluster)         <- this process"]
    else:
        assert marked[0].split()[:3] == [task["type"], str(task["index"]),
                                         OPERATOR_CLUSTER[task["type"]][task["index"]]]


@pytest.mark.cluster
def test_labkit_server_starts_from_the_tf_config_a_tfjob_pod_gets(tmp_path):
    """The ps container of an exported TFJob, started as the Pod would start it: its command and
    environment, and the TF_CONFIG the operator sets. Its server needs only its own port; the
    Services' names are looked up by the tasks that connect, so none resolves here, and none needs to."""
    from labkit.deploy import kubernetes
    from labkit.runtime import children, processes
    from labkit.cluster import pick_port

    port = pick_port()
    tfjob = next(item for item in kubernetes.tfjob_manifests(
        {"chief": ["a:2222"], "ps": ["b:2222"], "worker": ["c:2222", "d:2222"]}, "pslab:0.1") if item["kind"] == "TFJob")
    containers = {replica_type: spec["template"]["spec"]["containers"][0]
                  for replica_type, spec in tfjob["spec"]["tfReplicaSpecs"].items()}
    for container in containers.values():  # a free port here; the operator takes it from the tfjob-port
        container["ports"][0]["containerPort"] = port
    config = kubernetes.operator_tf_config(tfjob, "ps", 0, namespace="lab")
    assert config == {"cluster": {task_type: [address.replace(":2222", f":{port}") for address in addresses]
                                  for task_type, addresses in OPERATOR_CLUSTER.items()},
                      "task": {"type": "ps", "index": 0}, "environment": "cloud"}
    env = {variable["name"]: variable["value"] for variable in containers["PS"]["env"]}
    log = tmp_path / "ps.log"
    with open(log, "wb") as output:
        ps = children.start_command(containers["PS"]["command"], stdout=output, env=os.environ | env | {
            "TF_CONFIG": json.dumps(config),  # and "python" is this Python, as in the image
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"})
    try:
        processes.wait_until_serving(ps, log, port=port, name="the TFJob's ps")  # it listens and accepts
        processes.wait_until(lambda: f"ps:0 serving at pslab-ps-0.lab.svc:{port}" in log.read_text(), 30,
                             "the ps to say where it serves")
    finally:
        processes.stop([ps])


def test_build_round_trips_through_json_and_validate():
    config = tfconfig.build(CLUSTER, "ps", 0)
    assert config == {"cluster": CLUSTER, "task": {"type": "ps", "index": 0}}
    assert tfconfig.validate(json.dumps(config)) == config


def test_build_copies_the_cluster():
    config = tfconfig.build(CLUSTER, "worker", 1)
    config["cluster"]["worker"].append("localhost:9999")
    assert CLUSTER["worker"] == ["localhost:2223", "localhost:2224"]


def test_build_rejects_a_bad_task():
    with pytest.raises(TFConfigError, match="out of range"):
        tfconfig.build(CLUSTER, "ps", 1)


def test_explain_lists_every_task_and_marks_this_process():
    text = tfconfig.explain(json.dumps(make(task={"type": "worker", "index": 1})))
    for address in ["localhost:2222", "localhost:2223", "localhost:2224", "localhost:2225"]:
        assert address in text
    marked = [line for line in text.splitlines() if "<- this process" in line]
    assert len(marked) == 1
    assert marked[0].split()[:3] == ["worker", "1", "localhost:2224"]
    assert "runs the functions the coordinator schedules" in text
    assert "0.0.0.0" in text and "no authentication" in text and "trusted private network" in text


@pytest.mark.parametrize("task_type, duty", [
    ("chief", "runs the training program"),
    ("ps", "stores the model variables and applies the updates"),
    ("evaluator", "reads the checkpoints"),
])
def test_explain_says_what_each_role_does(task_type, duty):
    text = tfconfig.explain(make(task={"type": task_type, "index": 0}))
    assert f"This process is {task_type}:0" in text
    assert duty in text
    assert "<- this process" in text


def test_explain_rejects_a_bad_config():
    with pytest.raises(TFConfigError, match="no 'ps' task"):
        tfconfig.explain(make(cluster_with(ps=None)))


def test_for_every_task_gives_one_config_per_task():
    configs = tfconfig.for_every_task(CLUSTER)
    assert sorted(configs) == ["chief:0", "ps:0", "worker:0", "worker:1"]
    for name, config in configs.items():
        task_type, index = name.split(":")
        assert config["task"] == {"type": task_type, "index": int(index)}
        assert config["cluster"] == CLUSTER
        assert tfconfig.validate(json.dumps(config)) == config


def test_for_every_task_rejects_a_bad_cluster():
    with pytest.raises(TFConfigError, match="used by both"):
        tfconfig.for_every_task(cluster_with(ps=["localhost:2222"]))


def test_host_plan_gives_each_task_its_command():
    cluster = {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2222"], "ps": ["[::1]:2222"]}
    plan = tfconfig.host_plan(cluster, chief_command="python my_training.py --epochs 3")
    assert [entry["task"] for entry in plan] == ["ps:0", "worker:0", "worker:1", "chief:0"]
    assert [entry["host"] for entry in plan] == ["::1", "10.0.0.2", "10.0.0.3", "10.0.0.1"]
    assert [entry["port"] for entry in plan] == [2222] * 4
    for entry in plan:
        task_type, index = tfconfig.parse_task(entry["task"])
        program = "python my_training.py --epochs 3" if task_type == "chief" else "python -m labkit.runtime.server"
        assert entry["command"].endswith(" " + program)
        words = shlex.split(entry["command"])
        assert words[0].startswith("TF_CONFIG=")
        assert " ".join(words[1:]) == program
        config = tfconfig.validate(words[0][len("TF_CONFIG="):])
        assert config["task"] == {"type": task_type, "index": index}
        assert config == json.loads(entry["tf_config"])


def test_format_host_plan_groups_commands_by_host():
    cluster = {"chief": ["a.lab:2222"], "worker": ["b.lab:2222", "b.lab:2223"], "ps": ["a.lab:2223"]}
    plan = tfconfig.host_plan(cluster)
    text = tfconfig.format_host_plan(plan)
    assert text.count("# on host a.lab") == 1 and text.count("# on host b.lab") == 1
    host_a, host_b = text.split("# on host a.lab")[1].split("# on host b.lab")
    assert "# chief:0" in host_a and "# ps:0" in host_a and "# worker" not in host_a
    assert "# worker:0" in host_b and "# worker:1" in host_b
    for entry in plan:
        assert entry["command"] in text
    assert "0.0.0.0" in text


@pytest.mark.parametrize("name, expected", [("worker:1", ("worker", 1)), ("ps:0", ("ps", 0)),
                                            ("chief:0", ("chief", 0)), ("evaluator:0", ("evaluator", 0))])
def test_parse_task(name, expected):
    assert tfconfig.parse_task(name) == expected


@pytest.mark.parametrize("name, fragment", [
    pytest.param("worker1", "not of the form type:index", id="no-colon"),
    pytest.param("worker:-1", "not of the form type:index", id="negative-index"),
    pytest.param("worker:", "not of the form type:index", id="no-index"),
    pytest.param(("worker", 1), "not of the form type:index", id="not-a-string"),
    pytest.param("gpu:0", "unknown task type 'gpu'", id="unknown-task-type"),
    pytest.param("wroker:0", "Did you mean 'worker'?", id="typo"),
])
def test_parse_task_rejects_bad_names(name, fragment):
    with pytest.raises(TFConfigError) as caught:
        tfconfig.parse_task(name)
    assert fragment in str(caught.value)
