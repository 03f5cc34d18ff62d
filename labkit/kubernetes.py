"""``labkit export --k8s``: the same cluster as Kubernetes manifests.

From the cluster description ``labkit export`` reads (job -> list of "host:port") it keeps
how many tasks each job has and their ports, and replaces each host by a stable DNS
name: every task gets a headless Service, so ``<name>-ps-0`` resolves to that task's Pod.
It writes one multi-document YAML file holding:

- one Pod per ps and worker task, running ``python -m labkit.server``;
- the chief as a Job, running the training program (it finishes; the servers do not);
- a headless Service per task (the chief's too: it is in every TF_CONFIG);
- a NetworkPolicy that admits traffic to the TF ports only from this cluster's own Pods,
  because TensorFlow's servers accept anyone who reaches them, with no authentication;
- a ReadWriteMany PersistentVolumeClaim mounted at /checkpoints on the chief and every ps:
  each ps writes its own variables into the chief's checkpoint directory.

Each container gets its own TF_CONFIG in its environment, exactly as a LocalCluster task does.
The image is any image with labkit installed: the repository's Dockerfile builds one.
"""
import json
import re
from pathlib import Path

import yaml

from labkit import tfconfig

DEFAULT_NAME = "pslab"
CHECKPOINT_DIR = "/checkpoints"
# The pods share no disk but the checkpoint volume: the arrays travel in the dataset function.
DEFAULT_CHIEF_COMMAND = f"python -m labkit.coordinator --checkpoint-dir {CHECKPOINT_DIR} --ship-arrays"
TASK_MEMORY = "1Gi"  # an idle task process uses ~730 MB here
TASK_ENV = {"TF_USE_LEGACY_KERAS": "1", "GRPC_FAIL_FAST": "use_caller", "PYTHONUNBUFFERED": "1"}
RUN_AS_USER = 1000  # the Dockerfile's pslab user; fsGroup makes the checkpoint volume writable for it
_NAME = re.compile(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?")


def service_name(name, task):
    """The DNS name of a task's headless Service, e.g. ``pslab-worker-1`` for "worker:1"."""
    job, index = tfconfig.parse_task(task)
    return f"{name}-{job}-{index}"


def kubernetes_cluster(cluster, name=DEFAULT_NAME):
    """The cluster with each task's host replaced by its Service's DNS name (ports kept)."""
    check_name(name)
    renamed = {}
    for entry in tfconfig.host_plan(cluster):  # checks the description; ps, workers, chief, in index order
        job, _ = tfconfig.parse_task(entry["task"])
        renamed.setdefault(job, []).append(f"{service_name(name, entry['task'])}:{entry['port']}")
    return renamed


def check_name(name):
    """Refuse a name that cannot prefix Kubernetes object and DNS names."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"the name {name!r} cannot prefix Kubernetes names: use 1 to 40 lowercase letters, "
                         "digits and '-', starting with a letter and not ending with '-', e.g. 'pslab'.")


def manifests(cluster, image, name=DEFAULT_NAME, chief_command=DEFAULT_CHIEF_COMMAND,
              checkpoint_size="1Gi") -> list[dict]:
    """Every Kubernetes object that runs ``cluster`` with ``image``, as dicts ready for YAML."""
    if not image or not isinstance(image, str):
        raise ValueError("give the container image to run, e.g. --image registry.example.com/pslab:0.1 "
                         "(build it with the repository's Dockerfile).")
    if "chief" not in cluster:
        raise tfconfig.TFConfigError(
            'the cluster has no "chief", the task that runs the training program. Add one, '
            'e.g. --chief 10.0.0.9:2222, or "chief": ["10.0.0.9:2222"] in the cluster file.')
    plan = tfconfig.host_plan(kubernetes_cluster(cluster, name))
    objects = [_checkpoint_claim(name, checkpoint_size)]
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


def _container(entry, image, command):
    job = entry["task"].split(":")[0]
    env = [{"name": "TF_CONFIG", "value": entry["tf_config"]}]
    env += [{"name": key, "value": value} for key, value in TASK_ENV.items()]
    container = {"name": job, "image": image, "command": command, "env": env,
                 "ports": [{"name": "tf", "containerPort": entry["port"], "protocol": "TCP"}],
                 "resources": {"requests": {"memory": TASK_MEMORY}}}
    if job in ("chief", "ps"):
        container["volumeMounts"] = [{"name": "checkpoints", "mountPath": CHECKPOINT_DIR}]
    return container


def _pod_spec(name, entry, image, command, restart_policy):
    spec = {"restartPolicy": restart_policy,
            "securityContext": {"runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_USER, "fsGroup": RUN_AS_USER},
            "containers": [_container(entry, image, command)]}
    if entry["task"].split(":")[0] in ("chief", "ps"):
        spec["volumes"] = [{"name": "checkpoints",
                            "persistentVolumeClaim": {"claimName": f"{name}-checkpoints"}}]
    return spec


def _task_pod(name, entry, image):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": service_name(name, entry["task"]), "labels": _labels(name, entry["task"])},
            "spec": _pod_spec(name, entry, image, ["python", "-m", "labkit.server"], "Always")}


def _chief_job(name, entry, image, chief_command):
    template = {"metadata": {"labels": _labels(name, entry["task"])},
                "spec": _pod_spec(name, entry, image, ["sh", "-c", chief_command], "OnFailure")}
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


def _checkpoint_claim(name, size):
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": f"{name}-checkpoints", "labels": _labels(name)},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": size}}}}


HEADER = """\
# PS Lab cluster "{name}" for Kubernetes, written by `labkit export --k8s`.
#   kubectl apply -f {file}             start it (ps and workers wait; the chief Job trains)
#   kubectl logs -f job/{name}-chief     follow the training
#   kubectl delete -f {file}            stop everything: ps and worker Pods serve until deleted
# TensorFlow servers listen on all interfaces with NO authentication. The NetworkPolicy below
# admits traffic to their ports only from this cluster's own Pods; it is enforced only where
# the network plugin supports NetworkPolicy (Calico, Cilium, ...): check yours does.
# The checkpoint claim needs a storage class that offers ReadWriteMany (NFS, EFS, Filestore...).
"""


def write(objects, out_dir, name=DEFAULT_NAME, file_name="kubernetes.yaml") -> Path:
    """Write the objects as one multi-document YAML file in a new or empty ``out_dir``; return its path."""
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ValueError(f"{out_dir} is not empty (an earlier export?). Delete it or choose another directory.")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / file_name
    path.write_text(HEADER.format(name=name, file=file_name)
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
