"""`labkit export --k8s`: manifests valid against the Kubernetes schemas (offline), TF_CONFIGs consistent."""
import copy
import json
import socket

import kubernetes_validate
import kubernetes_validate.utils
import pytest
import yaml

from labkit import cli, kubernetes, tfconfig

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
    assert kinds.count("NetworkPolicy") == 1 and kinds.count("PersistentVolumeClaim") == 1
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
    assert set(configs) == {f"{job}:{i}" for job, addresses in CLUSTER.items() for i in range(len(addresses))}
    expected_cluster = {job: [f"pslab-{job}-{i}:{address.rsplit(':')[1]}" for i, address in enumerate(addresses)]
                        for job, addresses in CLUSTER.items()}
    for task, config in configs.items():
        tfconfig.validate(config)
        assert {job: config["cluster"][job] for job in CLUSTER} == expected_cluster, task
    for job, addresses in expected_cluster.items():
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
            assert json.loads(env["TF_CONFIG"])["task"] == {"type": job, "index": index}
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


def test_chief_and_ps_share_the_checkpoint_claim_workers_do_not(tmp_path):
    documents = exported(tmp_path)
    mounted = {json.loads({v["name"]: v["value"] for v in spec["containers"][0]["env"]}["TF_CONFIG"])["task"]["type"]:
               [v["persistentVolumeClaim"]["claimName"] for v in spec.get("volumes", [])]
               for _, spec in _pod_specs(documents)}
    assert mounted == {"chief": ["pslab-checkpoints"], "ps": ["pslab-checkpoints"], "worker": []}


def test_cli_writes_the_manifests_and_needs_an_image(tmp_path, capsys):
    flags = ["export", "--k8s", "--chief", "a:2222", "--ps", "b:2222", "--worker", "c:2222"]
    cli.main(flags + ["--image", "pslab:0.1", "--out", str(tmp_path / "out")])
    written = list(yaml.safe_load_all((tmp_path / "out" / "kubernetes.yaml").read_text()))
    assert {d["metadata"]["name"] for d in written if d["kind"] == "Service"} == \
        {"pslab-chief-0", "pslab-ps-0", "pslab-worker-0"}
    assert "kubectl apply -f" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="container image"):
        cli.main(flags + ["--out", str(tmp_path / "other")])


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
