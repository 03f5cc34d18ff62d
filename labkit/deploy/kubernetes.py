"""``labkit export --k8s``: the same cluster as Kubernetes manifests.

From the cluster description ``labkit export`` reads (task type -> list of "host:port") it keeps
how many tasks each task type has and their ports, and replaces each host by a stable DNS
name: every task gets a headless Service, so ``<name>-ps-0`` resolves to that task's Pod.
It writes one multi-document YAML file holding:

- one Pod per ps and worker task, running ``python -m labkit.runtime.server``;
- the chief as a Job, running the training program (it finishes; the servers do not);
- a headless Service per task (the chief's too: it is in every TF_CONFIG);
- a NetworkPolicy that admits traffic to the TF ports only from this cluster's own Pods,
  because TensorFlow's servers accept anyone who reaches them, with no authentication;
- ReadWriteMany PersistentVolumeClaims: one mounted at /checkpoints on the chief and every ps
  (each ps writes its own variables into the chief's checkpoint directory), one at /data on
  the chief and every worker (the chief writes the training data there once, one shard file
  per worker, and each worker reads its own: only file names cross the network).

Each container gets its own TF_CONFIG in its environment, exactly as a LocalCluster task does.
The image is any image with labkit installed: the repository's Dockerfile builds one.

``tfjob_manifests`` (``labkit export --tfjob``) writes the same cluster for the Kubeflow Training
Operator instead: one TFJob, whose operator makes the Pods and Services and sets every TF_CONFIG
itself (``operator_tf_config`` shows what it sets), beside the claims and the NetworkPolicy.
``check_tfjob`` checks a TFJob offline with the operator's Python SDK models and the Kubernetes schemas.
"""
import json
import re
from pathlib import Path
from types import SimpleNamespace

import yaml

from labkit.runtime import processes, tfconfig

DEFAULT_NAME = "pslab"
CHECKPOINT_DIR = "/checkpoints"
DATA_DIR = "/data"
# Every worker mounts the data volume: the chief writes the shards once, each worker reads its own.
DEFAULT_CHIEF_COMMAND = f"python -m labkit.deploy.coordinator --checkpoint-dir {CHECKPOINT_DIR} --data-dir {DATA_DIR}"
TASK_MEMORY = "1Gi"  # room for one task process (docs/measurements.md lists the tasks' measured peaks)
# Claim -> where it is mounted, and per task type the claims it mounts (True: read-only).
MOUNT_PATHS = {"checkpoints": CHECKPOINT_DIR, "data": DATA_DIR}
MOUNTS = {"chief": {"checkpoints": False, "data": False}, "ps": {"checkpoints": False},
          "worker": {"data": True}, "evaluator": {"checkpoints": True}}
TASK_ENV = {"TF_USE_LEGACY_KERAS": "1", "GRPC_FAIL_FAST": "use_caller", "PYTHONUNBUFFERED": "1"}
RUN_AS_USER = 1000  # the Dockerfile's pslab user; fsGroup makes the checkpoint volume writable for it
_NAME = re.compile(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?")


def service_name(name, task):
    """The DNS name of a task's headless Service, e.g. ``pslab-worker-1`` for "worker:1"."""
    task_type, index = tfconfig.parse_task(task)
    return f"{name}-{task_type}-{index}"


def kubernetes_cluster(cluster, name=DEFAULT_NAME):
    """The cluster with each task's host replaced by its Service's DNS name (ports kept)."""
    check_name(name)
    renamed = {}
    for entry in tfconfig.host_plan(cluster):  # checks the description; ps, workers, chief, in index order
        task_type, _ = tfconfig.parse_task(entry["task"])
        renamed.setdefault(task_type, []).append(f"{service_name(name, entry['task'])}:{entry['port']}")
    return renamed


def check_name(name):
    """Refuse a name that cannot prefix Kubernetes object and DNS names."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"the name {name!r} cannot prefix Kubernetes names: use 1 to 40 lowercase letters, "
                         "digits and '-', starting with a letter and not ending with '-', e.g. 'pslab'.")


def _check_image_and_chief(cluster, image):
    if not image or not isinstance(image, str):
        raise ValueError("give the container image to run, e.g. --image registry.example.com/pslab:0.1 "
                         "(build it with the repository's Dockerfile).")
    if "chief" not in cluster:
        raise tfconfig.TFConfigError(
            'the cluster has no "chief", the task that runs the training program. Add one, '
            'e.g. --chief 10.0.0.9:2222, or "chief": ["10.0.0.9:2222"] in the cluster file.')


def manifests(cluster, image, name=DEFAULT_NAME, chief_command=DEFAULT_CHIEF_COMMAND,
              checkpoint_size="1Gi", data_size="1Gi") -> list[dict]:
    """Every Kubernetes object that runs ``cluster`` with ``image``, as dicts ready for YAML."""
    _check_image_and_chief(cluster, image)
    plan = tfconfig.host_plan(kubernetes_cluster(cluster, name))
    objects = [_claim(name, "checkpoints", checkpoint_size), _claim(name, "data", data_size)]
    for entry in plan:
        objects.append(_service(name, entry))
        if entry["task"] == "chief:0":
            objects.append(_chief_job(name, entry, image, chief_command))
        else:
            objects.append(_task_pod(name, entry, image))
    objects.append(_network_policy(name, sorted({entry["port"] for entry in plan})))
    return objects


def _labels(name, task=None):
    labels = {"app.kubernetes.io/part-of": "pslab", "pslab/cluster": name}
    return labels | ({"pslab/task": task.replace(":", "-")} if task else {})


def _container(container_name, task_type, image, command, port, port_name, tf_config=None):
    env = [{"name": "TF_CONFIG", "value": tf_config}] if tf_config else []
    env += [{"name": key, "value": value} for key, value in TASK_ENV.items()]
    container = {"name": container_name, "image": image, "command": list(command), "env": env,
                 "ports": [{"name": port_name, "containerPort": port, "protocol": "TCP"}],
                 "resources": {"requests": {"memory": TASK_MEMORY}}}
    if MOUNTS[task_type]:
        container["volumeMounts"] = [{"name": claim, "mountPath": MOUNT_PATHS[claim]} | (
            {"readOnly": True} if read_only else {}) for claim, read_only in MOUNTS[task_type].items()]
    return container


def _pod_spec(name, task_type, container, restart_policy=None):
    spec = {"restartPolicy": restart_policy} if restart_policy else {}
    spec |= {"securityContext": {"runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_USER, "fsGroup": RUN_AS_USER},
             "containers": [container]}
    if MOUNTS[task_type]:
        spec["volumes"] = [{"name": claim, "persistentVolumeClaim": {"claimName": f"{name}-{claim}"}}
                           for claim in MOUNTS[task_type]]
    return spec


def _task_spec(name, entry, image, command, restart_policy):
    task_type = entry["task"].split(":")[0]
    container = _container(task_type, task_type, image, command, entry["port"], "tf", entry["tf_config"])
    return _pod_spec(name, task_type, container, restart_policy)


def _task_pod(name, entry, image):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": service_name(name, entry["task"]), "labels": _labels(name, entry["task"])},
            "spec": _task_spec(name, entry, image, SERVER_COMMAND, "Always")}


def _chief_job(name, entry, image, chief_command):
    template = {"metadata": {"labels": _labels(name, entry["task"])},
                "spec": _task_spec(name, entry, image, ["sh", "-c", chief_command], "OnFailure")}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": f"{name}-chief", "labels": _labels(name, entry["task"])},
            "spec": {"backoffLimit": 3, "template": template}}


def _service(name, entry):
    """A headless Service: its DNS name resolves to the task's Pod IP, even before the Pod is ready."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": service_name(name, entry["task"]), "labels": _labels(name, entry["task"])},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": _labels(name, entry["task"]),
                     "ports": [{"name": "tf", "port": entry["port"], "targetPort": entry["port"],
                                "protocol": "TCP"}]}}


def _network_policy(name, ports):
    def own_pods():  # a new dict each time, so the YAML repeats it instead of using an anchor
        return {"matchLabels": {"pslab/cluster": name}}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": f"{name}-tf-ports", "labels": _labels(name)},
            "spec": {"podSelector": own_pods(), "policyTypes": ["Ingress"],
                     "ingress": [{"from": [{"podSelector": own_pods()}],
                                  "ports": [{"protocol": "TCP", "port": port} for port in ports]}]}}


def _claim(name, claim, size):
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": f"{name}-{claim}", "labels": _labels(name)},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": size}}}}


SECURITY_AND_STORAGE = """\
# TensorFlow servers listen on all interfaces with NO authentication. The NetworkPolicy below
# admits traffic to their ports only from this cluster's own Pods; it is enforced only where
# the network plugin supports NetworkPolicy (Calico, Cilium, ...): check yours does.
# The checkpoint and data claims need a storage class that offers ReadWriteMany (NFS, EFS, Filestore...).
"""
HEADER = """\
# PS Lab cluster "{name}" for Kubernetes, written by `labkit export --k8s`.
#   kubectl apply -f {file}             start it (ps and workers wait; the chief Job trains)
#   kubectl logs -f job/{name}-chief     follow the training
#   kubectl delete -f {file}            stop everything: ps and worker Pods serve until deleted
""" + SECURITY_AND_STORAGE
TFJOB_HEADER = """\
# PS Lab cluster "{name}" as a Kubeflow TFJob, written by `labkit export --tfjob`.
# Needs the Kubeflow Training Operator in the cluster (docs/kubernetes.md says how to install it).
#   kubectl apply -f {file}      submit it: the operator makes the Pods and Services
#   kubectl get tfjob {name} -w       watch its state (Created, Running, Succeeded or Failed)
#   kubectl logs -f {name}-chief-0    follow the training
#   kubectl delete tfjob {name}       delete the TFJob and its Pods, keep the claims (checkpoints, data)
#   kubectl delete -f {file}     delete everything, the claims and their checkpoints too
# When the chief finishes, the operator deletes the ps and worker Pods (cleanPodPolicy: Running).
""" + SECURITY_AND_STORAGE


def write(objects, out_dir, name=DEFAULT_NAME) -> Path:
    """Write the objects as one multi-document YAML file in a new or empty ``out_dir``; return its path.

    The file is ``tfjob.yaml`` if the objects hold a TFJob, else ``kubernetes.yaml``.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ValueError(f"{out_dir} is not empty (an earlier export?). Delete it or choose another directory.")
    out_dir.mkdir(parents=True, exist_ok=True)
    tfjob = any(item["kind"] == "TFJob" for item in objects)
    path = out_dir / ("tfjob.yaml" if tfjob else "kubernetes.yaml")
    path.write_text((TFJOB_HEADER if tfjob else HEADER).format(name=name, file=path.name)
                    + yaml.safe_dump_all(objects, sort_keys=False, width=120))
    return path


def tf_configs(objects) -> dict[str, dict]:
    """The TF_CONFIG of every container in ``objects``, keyed by task name ("ps:0")."""
    configs = {}
    for item in objects:
        spec = item["spec"]["template"]["spec"] if item["kind"] == "Job" else item.get("spec", {})
        for container in spec.get("containers", []):
            env = {variable["name"]: variable["value"] for variable in container["env"]}
            config = json.loads(env["TF_CONFIG"])
            configs[f"{config['task']['type']}:{config['task']['index']}"] = config
    return configs


# The Kubeflow Training Operator's TFJob (kubeflow.org/v1), as its API defines it.
TFJOB_API_VERSION = "kubeflow.org/v1"
TFJOB_CONTAINER = "tensorflow"  # the operator sets TF_CONFIG in the container of this name only
TFJOB_PORT_NAME = "tfjob-port"  # and takes each replica type's port from the port of this name
TFJOB_PORT = 2222  # the operator's default; every Pod has its own address, so all can use it
REPLICA_TYPES = {"chief": "Chief", "ps": "PS", "worker": "Worker", "evaluator": "Evaluator"}  # TF_CONFIG's names
VALID_REPLICA_TYPES = ("Chief", "Master", "PS", "Worker", "Evaluator")  # Master: an old name for Chief
RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")
CLEAN_POD_POLICIES = ("All", "Running", "None")
# OnFailure restarts a failed container in its own Pod: same name, same address, same volumes.
# A restarted ps comes back empty; the chief, which then loses it, exits with an error and is
# restarted too, and resumes from the latest checkpoint (PS failure = restart the ps and the
# coordinator, as TensorFlow's ParameterServerStrategy prescribes). A lost worker needs no
# restart of anyone else: the coordinator re-runs its closures on the others and takes it back.
RESTART_POLICY = {"chief": "OnFailure", "ps": "OnFailure", "worker": "OnFailure", "evaluator": "OnFailure"}
# Container restarts in the whole TFJob before the operator marks it Failed: a ps failure costs
# one for the ps and one or more for the chief (again if it starts before the ps serves).
BACKOFF_LIMIT = 6
SERVER_COMMAND = ["python", "-m", processes.SERVER_MODULE]
# --until-step: the coordinator's default --num-steps; change both together.
EVALUATOR_COMMAND = f"python -m labkit.deploy.evaluator --checkpoint-dir {CHECKPOINT_DIR} --until-step 600"


class ManifestError(ValueError):
    """A manifest the Training Operator or Kubernetes would refuse; the message lists every reason."""


def tfjob_manifests(cluster, image, name=DEFAULT_NAME, chief_command=DEFAULT_CHIEF_COMMAND, evaluator=False,
                    checkpoint_size="1Gi", data_size="1Gi") -> list[dict]:
    """The claims, one TFJob running ``cluster``'s tasks with ``image``, and the NetworkPolicy, as dicts.

    Of the cluster description only the number of tasks per task type is kept: the operator names each
    task's Service and sets every TF_CONFIG itself (``operator_tf_config``). ``evaluator`` adds an
    Evaluator replica running ``labkit.deploy.evaluator`` on the checkpoints.
    """
    _check_image_and_chief(cluster, image)
    check_name(name)
    tfconfig.for_every_task(cluster)  # the same checks as every export
    replicas = {task_type: len(cluster[task_type]) for task_type in ("chief", "ps", "worker")}
    replicas |= {"evaluator": 1} if evaluator else {}
    commands = {"chief": ["sh", "-c", chief_command], "ps": SERVER_COMMAND, "worker": SERVER_COMMAND,
                "evaluator": ["sh", "-c", EVALUATOR_COMMAND]}
    specs = {REPLICA_TYPES[task_type]: {
        "replicas": count, "restartPolicy": RESTART_POLICY[task_type],
        "template": {"metadata": {"labels": _labels(name)}, "spec": _pod_spec(name, task_type, _container(
            TFJOB_CONTAINER, task_type, image, commands[task_type], TFJOB_PORT, TFJOB_PORT_NAME))}}
        for task_type, count in replicas.items()}
    tfjob = {"apiVersion": TFJOB_API_VERSION, "kind": "TFJob", "metadata": {"name": name, "labels": _labels(name)},
             "spec": {"runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": BACKOFF_LIMIT},
                      "tfReplicaSpecs": specs}}
    return [_claim(name, "checkpoints", checkpoint_size), _claim(name, "data", data_size), tfjob,
            _network_policy(name, [TFJOB_PORT])]


def operator_tf_config(tfjob, task_type, index, namespace="default") -> dict:
    """The TF_CONFIG the Training Operator sets for task ``task_type:index`` of ``tfjob``, by its rule.

    Every replica type but the Evaluator is a task type of the cluster, its name lower-cased; task ``i``'s
    address is its headless Service, ``<tfjob>-<type>-<i>.<namespace>.svc:<port>``; and it adds
    ``"environment": "cloud"``.
    """
    name = tfjob["metadata"]["name"]
    cluster = {}
    for replica_type, spec in tfjob["spec"]["tfReplicaSpecs"].items():
        if replica_type != "Evaluator":
            replica_task_type = replica_type.lower()
            port = next((port["containerPort"] for container in spec["template"]["spec"]["containers"]
                         if container["name"] == TFJOB_CONTAINER for port in container.get("ports", [])
                         if port.get("name") == TFJOB_PORT_NAME), TFJOB_PORT)
            cluster[replica_task_type] = [f"{name}-{replica_task_type}-{i}.{namespace}.svc:{port}"
                                          for i in range(spec.get("replicas", 1))]
    return {"cluster": cluster, "task": {"type": task_type, "index": index}, "environment": "cloud"}


def check_tfjob(tfjob, kubernetes_version=None):
    """Check a TFJob offline; raise ManifestError listing whatever the operator or Kubernetes would refuse.

    Every field must survive a round trip through the Training Operator SDK's ``KubeflowOrgV1TFJob``
    model (a misspelt field does not); replica types, restart and clean-pod policies must be the API's;
    each replica needs a container named "tensorflow" and every container an image (the operator's
    own checks); each pod template must validate strictly against the Kubernetes API schemas of
    ``kubernetes_version`` (default: the newest that kubernetes-validate ships).
    """
    import kubernetes_validate
    from kubeflow.training import ApiClient
    from kubeflow.training.constants import constants

    version = kubernetes_version or kubernetes_validate.utils.latest_version()
    problems = []
    if (tfjob.get("apiVersion"), tfjob.get("kind")) != (TFJOB_API_VERSION, constants.TFJOB_KIND):
        problems.append(f"apiVersion and kind must be {TFJOB_API_VERSION} and TFJob, "
                        f"not {tfjob.get('apiVersion')} and {tfjob.get('kind')}")
    client = ApiClient()
    try:
        model = client.deserialize(SimpleNamespace(data=json.dumps(tfjob)), constants.TFJOB_MODEL)
        problems += [f"unknown field {path}: the TFJob and Kubernetes models have no such field; check its spelling"
                     for path in _unknown_fields(tfjob, client.sanitize_for_serialization(model))]
    except ValueError as error:  # a required field missing, or a value of the wrong type
        problems.append(f"the Training Operator SDK's models refuse it: {error} (a required field missing or misspelt?)")
    spec = tfjob.get("spec", {})
    clean = spec.get("runPolicy", {}).get("cleanPodPolicy", "None")
    if clean not in CLEAN_POD_POLICIES:
        problems.append(f"runPolicy.cleanPodPolicy {clean!r} is not one of {', '.join(CLEAN_POD_POLICIES)}")
    replica_specs = spec.get("tfReplicaSpecs") or {}
    if not replica_specs:
        problems.append("spec.tfReplicaSpecs is missing or empty: list the Chief, PS and Worker replicas")
    for replica_type, replica in replica_specs.items():
        problems += [f"spec.tfReplicaSpecs.{replica_type}: {problem}"
                     for problem in _replica_problems(tfjob, replica_type, replica, version)]
    if replica_specs.get("Chief", {}).get("replicas", 1) > 1:
        problems.append("spec.tfReplicaSpecs.Chief: a TFJob has at most one chief; set replicas: 1")
    if problems:
        raise ManifestError("the TFJob would be refused:\n- " + "\n- ".join(problems))


def _replica_problems(tfjob, replica_type, replica, version):
    import kubernetes_validate

    if replica_type not in VALID_REPLICA_TYPES:
        yield (f"unknown replica type.{tfconfig.did_you_mean(replica_type, VALID_REPLICA_TYPES)} "
               f"A TFJob's replica types are {', '.join(VALID_REPLICA_TYPES)}")
    if replica.get("restartPolicy", "Never") not in RESTART_POLICIES:
        yield f"restartPolicy {replica['restartPolicy']!r} is not one of {', '.join(RESTART_POLICIES)}"
    template = replica.get("template", {})
    containers = template.get("spec", {}).get("containers", [])
    if not any(container.get("name") == TFJOB_CONTAINER for container in containers):
        yield f'no container named "{TFJOB_CONTAINER}": the operator sets TF_CONFIG only in that one'
    for container in containers:
        if not container.get("image"):
            yield f"container {container.get('name')!r} has no image: give the image with labkit installed"
    pod_template = {"apiVersion": "v1", "kind": "PodTemplate",
                    "metadata": {"name": f"{tfjob.get('metadata', {}).get('name')}-{replica_type.lower()}"},
                    "template": template}
    try:
        kubernetes_validate.validate(pod_template, version, strict=True)
    except kubernetes_validate.ValidationError as error:
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.path)
        yield f"{where.removeprefix('.')}: {error.message} (the Kubernetes {version} schemas)"


def _unknown_fields(original, known, path=""):
    """The paths of the fields of ``original`` that its round trip through the models (``known``) lost."""
    if isinstance(original, dict) and isinstance(known, dict):
        for key, value in original.items():
            where = f"{path}.{key}" if path else key
            if key in known:
                yield from _unknown_fields(value, known[key], where)
            else:
                yield where
    elif isinstance(original, list) and isinstance(known, list):
        for index, (item, known_item) in enumerate(zip(original, known)):
            yield from _unknown_fields(item, known_item, f"{path}[{index}]")
