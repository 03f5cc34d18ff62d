"""Checks of notebook 09 (from a laptop to a cluster)."""
import json
from pathlib import Path

from labkit.checks.core import require


def runs_with_its_files(process, directory):
    """A task process runs in its exported directory, with the TF_CONFIG of that directory's file."""
    wanted = json.loads((Path(directory) / "tf_config.json").read_text())
    require(json.loads(process.environ().get("TF_CONFIG", "null")) == wanted,
        f"pid {process.pid} does not have the TF_CONFIG of {directory}/tf_config.json.")
    require(Path(process.cwd()).resolve() == Path(directory).resolve(),
        f"pid {process.pid} runs in {process.cwd()}, not in {directory}.")


def kubernetes_names_consistent(objects):
    """Every container's TF_CONFIG names the same cluster, whose every address is a Service's name and port
    and whose every task runs in exactly one Pod or Job; return the number of tasks."""
    from labkit.deploy import kubernetes

    configs = kubernetes.tf_configs(objects)
    services = {item["metadata"]["name"]: item["spec"]["ports"][0]["port"]
                for item in objects if item["kind"] == "Service"}
    clusters = {json.dumps(config["cluster"], sort_keys=True) for config in configs.values()}
    require(len(clusters) == 1, f"the containers' TF_CONFIGs describe {len(clusters)} different clusters; expected one.")
    cluster = configs[next(iter(configs))]["cluster"]
    tasks = {f"{task_type}:{index}": address for task_type, addresses in cluster.items()
             for index, address in enumerate(addresses)}
    require(set(configs) == set(tasks), f"tasks in the cluster {sorted(tasks)} but containers for {sorted(configs)}: "
                                        "every task needs exactly one container.")
    for task, address in tasks.items():
        host, port = address.rsplit(":", 1)
        require(services.get(host) == int(port),
            f"{task}'s address {address} is not a Service's DNS name and port (Services: {services}).")
    return len(tasks)
