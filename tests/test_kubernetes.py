"""`labkit export --k8s`: manifests valid against the Kubernetes schemas (offline), TF_CONFIGs consistent."""
import copy
import json
import socket

import kubernetes_validate
import kubernetes_validate.utils
import pytest
import yaml

from labkit.deploy import kubernetes
from labkit.runtime import tfconfig
from labkit.tools import cli

CLUSTER = {"chief": ["10.0.0.9:2222"], "ps": ["10.0.0.1:2222", "10.0.0.4:2223"],
           "worker": ["10.0.0.2:2222", "10.0.0.3:2222"]}
# An older version many clusters still run, and the newest whose schemas kubernetes-validate ships.
KUBERNETES_VERSIONS = ["1.30.0", kubernetes_validate.utils.latest_version()]


@pytest.fixture
def no_network(monkeypatch):
    """Any connection attempt fails: the validation must use only the schemas in the package."""
    def refuse(*args, **kwargs):
        raise OSError("network access during an offline test")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def exported(tmp_path, **kwargs):
    objects = kubernetes.manifests(CLUSTER, image="registry.example.com/pslab:0.1", **kwargs)
    path = kubernetes.write(objects, tmp_path / "k8s")
    assert "&id" not in path.read_text(), "YAML anchors: every object must be written out in full for readers"
    return list(yaml.safe_load_all(path.read_text()))


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_manifest_validates_offline_against_the_schemas(tmp_path, no_network, version):
    documents = exported(tmp_path)
    kinds = [document["kind"] for document in documents]
    assert kinds.count("Pod") == 4 and kinds.count("Job") == 1 and kinds.count("Service") == 5
    assert kinds.count("NetworkPolicy") == 1 and kinds.count("PersistentVolumeClaim") == 2
    for document in documents:
        kubernetes_validate.validate(document, version, strict=True)


def test_the_validator_rejects_a_broken_manifest(no_network):
    pod = next(o for o in kubernetes.manifests(CLUSTER, "pslab:0.1") if o["kind"] == "Pod")
    pod["spec"]["containers"][0]["ports"][0]["containerPort"] = "2222"  # a string, not an integer
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, KUBERNETES_VERSIONS[0], strict=True)
    pod["spec"]["containers"][0]["ports"][0]["containerPort"] = 2222
    pod["spec"]["restartPolicy"] = "Always"
    pod["spec"]["containerz"] = []  # an unknown field: strict validation refuses it
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, KUBERNETES_VERSIONS[0], strict=True)


def _pod_specs(documents):
    """(labels, pod spec) of every Pod and of the Job's pod template."""
    for document in documents:
        if document["kind"] == "Pod":
            yield document["metadata"]["labels"], document["spec"]
        elif document["kind"] == "Job":
            yield document["spec"]["template"]["metadata"]["labels"], document["spec"]["template"]["spec"]


def test_every_tf_config_names_the_services_dns_names(tmp_path):
    documents = exported(tmp_path)
    services = {s["metadata"]["name"]: s for s in documents if s["kind"] == "Service"}
    pods = list(_pod_specs(documents))
    configs = kubernetes.tf_configs(documents)
    assert set(configs) == {f"{task_type}:{i}" for task_type, addresses in CLUSTER.items()
                            for i in range(len(addresses))}
    expected_cluster = {task_type: [f"pslab-{task_type}-{i}:{address.rsplit(':')[1]}"
                                    for i, address in enumerate(addresses)] for task_type, addresses in CLUSTER.items()}
    for task, config in configs.items():
        tfconfig.validate(config)
        assert {task_type: config["cluster"][task_type] for task_type in CLUSTER} == expected_cluster, task
    for task_type, addresses in expected_cluster.items():
        for index, address in enumerate(addresses):
            host, port = address.split(":")
            service = services[host]
            assert service["spec"]["clusterIP"] == "None"  # headless: the name resolves to the Pod itself
            assert service["spec"]["ports"][0]["port"] == int(port)
            selected = [spec for labels, spec in pods
                        if all(labels.get(k) == v for k, v in service["spec"]["selector"].items())]
            assert len(selected) == 1, f"{host} selects {len(selected)} pods"
            [container] = selected[0]["containers"]
            env = {variable["name"]: variable["value"] for variable in container["env"]}
            assert json.loads(env["TF_CONFIG"])["task"] == {"type": task_type, "index": index}
            assert container["ports"][0]["containerPort"] == int(port)


def test_the_network_policy_admits_only_the_clusters_pods_on_the_tf_ports(tmp_path):
    documents = exported(tmp_path, name="lab7")
    [policy] = [d for d in documents if d["kind"] == "NetworkPolicy"]
    own = {"pslab/cluster": "lab7"}
    assert policy["spec"]["podSelector"]["matchLabels"] == own
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    [rule] = policy["spec"]["ingress"]
    assert rule["from"] == [{"podSelector": {"matchLabels": own}}]
    assert sorted(port["port"] for port in rule["ports"]) == [2222, 2223]
    for labels, _ in _pod_specs(documents):
        assert labels["pslab/cluster"] == "lab7"  # every task is covered by the policy


# Per task type, the claims its Pods mount, where, and whether read-only (None: writable).
EXPECTED_MOUNTS = {"chief": {"pslab-checkpoints": ("/checkpoints", None), "pslab-data": ("/data", None)},
                   "ps": {"pslab-checkpoints": ("/checkpoints", None)},
                   "worker": {"pslab-data": ("/data", True)}}


def mounts(spec):
    """The claims a pod spec mounts: claim name -> (mount path, readOnly)."""
    [container] = spec["containers"]
    claims = {volume["name"]: volume["persistentVolumeClaim"]["claimName"] for volume in spec.get("volumes", [])}
    return {claims[mount["name"]]: (mount["mountPath"], mount.get("readOnly"))
            for mount in container.get("volumeMounts", [])}


def test_chief_and_ps_share_the_checkpoints_chief_and_workers_the_data(tmp_path):
    documents = exported(tmp_path)
    mounted = {json.loads({v["name"]: v["value"] for v in spec["containers"][0]["env"]}["TF_CONFIG"])["task"]["type"]:
               mounts(spec) for _, spec in _pod_specs(documents)}
    assert mounted == EXPECTED_MOUNTS
    [chief] = [spec for _, spec in _pod_specs(documents) if spec["containers"][0]["name"] == "chief"]
    assert "--data-dir /data" in chief["containers"][0]["command"][-1]  # the workers read the shards written there


def test_cli_writes_the_manifests_and_needs_an_image(tmp_path, capsys):
    flags = ["export", "--k8s", "--chief", "a:2222", "--ps", "b:2222", "--worker", "c:2222"]
    cli.main(flags + ["--image", "pslab:0.1", "--out", str(tmp_path / "out")])
    written = list(yaml.safe_load_all((tmp_path / "out" / "kubernetes.yaml").read_text()))
    assert {d["metadata"]["name"] for d in written if d["kind"] == "Service"} == \
        {"pslab-chief-0", "pslab-ps-0", "pslab-worker-0"}
    assert "kubectl apply -f" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="container image"):
        cli.main(flags + ["--out", str(tmp_path / "other")])
    with pytest.raises(SystemExit, match="use it with --tfjob"):
        cli.main(flags + ["--evaluator", "--image", "pslab:0.1", "--out", str(tmp_path / "other")])


@pytest.mark.parametrize("name", ["PSLab", "lab_1", "-lab", "x" * 41])
def test_a_name_kubernetes_refuses_gets_a_clear_error(name):
    with pytest.raises(ValueError, match="lowercase letters"):
        kubernetes.manifests(CLUSTER, "pslab:0.1", name=name)


def test_notebook_09s_check_passes_on_the_export_and_fails_on_inconsistent_names():
    from labkit import checks

    objects = kubernetes.manifests(CLUSTER, "pslab:0.1")
    assert checks.kubernetes_names_consistent(objects) == 5

    renamed = copy.deepcopy(objects)
    next(o for o in renamed if o["kind"] == "Service")["metadata"]["name"] = "pslab-ps-9"
    moved = copy.deepcopy(objects)
    next(o for o in moved if o["kind"] == "Service")["spec"]["ports"][0]["port"] = 2999
    disagreeing = copy.deepcopy(objects)
    [pod] = [o for o in disagreeing if o["kind"] == "Pod"][:1]
    env = pod["spec"]["containers"][0]["env"][0]
    config = json.loads(env["value"])
    config["cluster"]["ps"][0] = "10.0.0.1:2222"
    env["value"] = json.dumps(config)
    missing = [o for o in objects if o["kind"] != "Job"]
    for broken, message in [(renamed, "not a Service's DNS name"), (moved, "not a Service's DNS name"),
                            (disagreeing, "2 different clusters"), (missing, "every task needs exactly one")]:
        with pytest.raises(AssertionError, match=message):
            checks.kubernetes_names_consistent(broken)


# --- labkit export --tfjob: a TFJob for the Kubeflow Training Operator ---------------------------

IMAGE = "registry.example.com/pslab:0.1"


def tfjob_objects(**kwargs):
    return {item["kind"]: item for item in kubernetes.tfjob_manifests(CLUSTER, IMAGE, **kwargs)}


def replica_containers(tfjob):
    """Replica type -> its one container."""
    return {replica_type: spec["template"]["spec"]["containers"][0]
            for replica_type, spec in tfjob["spec"]["tfReplicaSpecs"].items()}


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_tfjob_passes_the_operator_sdk_models_and_the_schemas_offline(tmp_path, no_network, version):
    path = kubernetes.write(kubernetes.tfjob_manifests(CLUSTER, IMAGE, evaluator=True), tmp_path / "tfjob")
    assert path.name == "tfjob.yaml" and "&id" not in path.read_text()
    documents = list(yaml.safe_load_all(path.read_text()))
    assert [d["kind"] for d in documents] == ["PersistentVolumeClaim", "PersistentVolumeClaim", "TFJob", "NetworkPolicy"]
    [tfjob] = [d for d in documents if d["kind"] == "TFJob"]
    kubernetes.check_tfjob(tfjob, version)
    for document in documents:
        if document["kind"] != "TFJob":
            kubernetes_validate.validate(document, version, strict=True)
    assert tfjob["apiVersion"] == "kubeflow.org/v1"
    specs = tfjob["spec"]["tfReplicaSpecs"]
    assert {replica_type: spec["replicas"] for replica_type, spec in specs.items()} == \
        {"Chief": 1, "PS": 2, "Worker": 2, "Evaluator": 1}
    assert {replica_type: spec["restartPolicy"] for replica_type, spec in specs.items()} == \
        {"Chief": "OnFailure", "PS": "OnFailure", "Worker": "OnFailure", "Evaluator": "OnFailure"}
    assert tfjob["spec"]["runPolicy"]["cleanPodPolicy"] == "Running"  # ps and workers go when the chief is done
    for replica_type, container in replica_containers(tfjob).items():
        env = {variable["name"]: variable["value"] for variable in container["env"]}
        assert env["GRPC_FAIL_FAST"] == "use_caller" and env["TF_USE_LEGACY_KERAS"] == "1", replica_type
        assert "TF_CONFIG" not in env, "the operator sets TF_CONFIG; one written here would be overridden"
        assert container["name"] == "tensorflow" and container["image"] == IMAGE
        assert container["ports"] == [{"name": "tfjob-port", "containerPort": 2222, "protocol": "TCP"}]


def test_the_tfjob_without_an_evaluator_has_the_three_cluster_roles():
    tfjob = tfjob_objects()["TFJob"]
    assert set(tfjob["spec"]["tfReplicaSpecs"]) == {"Chief", "PS", "Worker"}
    kubernetes.check_tfjob(tfjob)


def test_the_tfjob_roles_run_the_kits_programs_and_mount_their_volumes():
    tfjob = tfjob_objects(evaluator=True)["TFJob"]
    commands = {replica_type: " ".join(container["command"])
                for replica_type, container in replica_containers(tfjob).items()}
    assert commands["PS"] == commands["Worker"] == "python -m labkit.runtime.server"
    assert commands["Chief"] == f"sh -c {kubernetes.DEFAULT_CHIEF_COMMAND}"
    assert "--data-dir /data" in commands["Chief"] and "--ship-arrays" not in commands["Chief"]
    assert commands["Evaluator"].startswith("sh -c python -m labkit.deploy.evaluator --checkpoint-dir /checkpoints")
    mounted = {replica_type.lower(): mounts(spec["template"]["spec"])
               for replica_type, spec in tfjob["spec"]["tfReplicaSpecs"].items()}
    assert mounted == EXPECTED_MOUNTS | {"evaluator": {"pslab-checkpoints": ("/checkpoints", True)}}


def _misspell_env(tfjob):
    container = tfjob["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["containers"][0]
    container["envv"] = container.pop("env")


def _rename(tfjob, old, new):
    specs = tfjob["spec"]["tfReplicaSpecs"]
    specs[new] = specs.pop(old)


@pytest.mark.parametrize("break_it, messages", [
    pytest.param(_misspell_env, ["unknown field spec.tfReplicaSpecs.PS.template.spec.containers[0].envv",
                                 "'envv' was unexpected"], id="misspelt-container-field"),
    pytest.param(lambda tfjob: tfjob["spec"]["runPolicy"].__setitem__("backofflimit", 6),
                 ["unknown field spec.runPolicy.backofflimit"], id="misspelt-tfjob-field"),
    pytest.param(lambda tfjob: tfjob["spec"].__setitem__("runpolicy", tfjob["spec"].pop("runPolicy")),
                 ["models refuse it: Invalid value for `run_policy`, must not be `None`"], id="misspelt-required-field"),
    pytest.param(lambda tfjob: _rename(tfjob, "Worker", "Workers"),
                 ["Workers: unknown replica type. Did you mean 'Worker'?"], id="wrong-replica-type"),
    pytest.param(lambda tfjob: _rename(tfjob, "PS", "ps"), ["ps: unknown replica type. Did you mean 'PS'?"],
                 id="lower-case-replica-type"),
    pytest.param(lambda tfjob: replica_containers(tfjob)["Chief"].pop("image"),
                 ["Chief: container 'tensorflow' has no image"], id="missing-image"),
    pytest.param(lambda tfjob: replica_containers(tfjob)["Worker"].__setitem__("name", "worker"),
                 ['Worker: no container named "tensorflow"'], id="container-not-named-tensorflow"),
    pytest.param(lambda tfjob: tfjob["spec"]["tfReplicaSpecs"]["PS"].__setitem__("restartPolicy", "Sometimes"),
                 ["PS: restartPolicy 'Sometimes' is not one of Always, OnFailure, Never, ExitCode"],
                 id="wrong-restart-policy"),
    pytest.param(lambda tfjob: tfjob["spec"]["runPolicy"].__setitem__("cleanPodPolicy", "Finished"),
                 ["cleanPodPolicy 'Finished' is not one of All, Running, None"], id="wrong-clean-pod-policy"),
    pytest.param(lambda tfjob: tfjob["spec"]["tfReplicaSpecs"]["Chief"].__setitem__("replicas", 2),
                 ["at most one chief"], id="two-chiefs"),
    pytest.param(lambda tfjob: replica_containers(tfjob)["PS"]["ports"][0].__setitem__("containerPort", "2222"),
                 ["'2222' is not of type 'integer'"], id="port-as-string"),
    pytest.param(lambda tfjob: tfjob.__setitem__("apiVersion", "kubeflow.org/v2"), ["apiVersion and kind must be"],
                 id="wrong-api-version"),
])
def test_check_tfjob_refuses_a_broken_tfjob_and_says_why(no_network, break_it, messages):
    tfjob = tfjob_objects(evaluator=True)["TFJob"]
    kubernetes.check_tfjob(copy.deepcopy(tfjob))  # the unbroken one passes
    break_it(tfjob)
    with pytest.raises(kubernetes.ManifestError) as refused:
        kubernetes.check_tfjob(tfjob)
    for message in messages:
        assert message in str(refused.value)


def test_the_operators_tf_config_passes_the_kits_checks_for_every_task():
    tfjob = tfjob_objects(evaluator=True)["TFJob"]
    expected = {task_type: [f"pslab-{task_type}-{i}.lab.svc:2222" for i in range(len(addresses))]
                for task_type, addresses in CLUSTER.items()}
    for task_type, count in [("chief", 1), ("ps", 2), ("worker", 2), ("evaluator", 1)]:
        for index in range(count):
            config = kubernetes.operator_tf_config(tfjob, task_type, index, namespace="lab")
            assert config["cluster"] == expected and config["environment"] == "cloud"
            assert tfconfig.validate(json.dumps(config))["task"] == {"type": task_type, "index": index}


def test_the_network_policy_covers_every_tfjob_pod_on_the_tf_port():
    objects = tfjob_objects(name="lab7", evaluator=True)
    policy, tfjob = objects["NetworkPolicy"], objects["TFJob"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector == {"pslab/cluster": "lab7"} and policy["spec"]["ingress"][0]["from"] == [{"podSelector": {"matchLabels": selector}}]
    assert [port["port"] for port in policy["spec"]["ingress"][0]["ports"]] == [2222]
    for replica_type, spec in tfjob["spec"]["tfReplicaSpecs"].items():
        labels = spec["template"]["metadata"]["labels"]
        assert all(labels.get(key) == value for key, value in selector.items()), replica_type


def test_cli_writes_the_tfjob_and_needs_an_image(tmp_path, capsys):
    flags = ["export", "--tfjob", "--chief", "a:2222", "--ps", "b:2222", "--worker", "c:2222", "--worker", "d:2222"]
    cli.main(flags + ["--image", "pslab:0.1", "--evaluator", "--out", str(tmp_path / "out")])
    [tfjob] = [d for d in yaml.safe_load_all((tmp_path / "out" / "tfjob.yaml").read_text()) if d["kind"] == "TFJob"]
    assert {t: s["replicas"] for t, s in tfjob["spec"]["tfReplicaSpecs"].items()} == \
        {"Chief": 1, "PS": 1, "Worker": 2, "Evaluator": 1}
    printed = capsys.readouterr().out
    assert "kubectl apply -f" in printed and "kubectl get tfjob pslab" in printed
    assert "pslab-worker-1.default.svc:2222" in printed
    with pytest.raises(SystemExit, match="container image"):
        cli.main(flags + ["--out", str(tmp_path / "other")])
    with pytest.raises(SystemExit, match="not both"):
        cli.main(flags + ["--k8s", "--image", "pslab:0.1", "--out", str(tmp_path / "other")])
    assert not (tmp_path / "other").exists()
