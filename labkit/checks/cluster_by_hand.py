"""Checks of exercise 1 (a cluster by hand)."""
import os

from labkit.runtime import tfconfig
from labkit.runtime.processes import serving, wait_until
from labkit.checks.core import learned, require


LOOPBACK_HOSTS = ("localhost", "127.0.0.1")


def tf_configs_valid(configs, num_workers):
    """``configs`` maps "ps:0", "worker:0", ..., "chief:0" to one valid TF_CONFIG dict each."""
    wanted = {"ps:0", "chief:0", *(f"worker:{i}" for i in range(num_workers))}
    require(set(configs) == wanted, f"tf_configs has entries for {sorted(configs)}, but the cluster has "
                                    f"{sorted(wanted)}: one TF_CONFIG per process, keyed like 'worker:1'.")
    cluster = configs["ps:0"].get("cluster", {})
    ports = {}
    for name, config in configs.items():
        require(config.get("cluster") == cluster, f"{name}'s cluster differs from ps:0's: every process "
                                                  "gets the same 'cluster' part; only 'task' changes.")
        task_type, index = tfconfig.parse_task(name)
        require(config.get("task") == {"type": task_type, "index": index},
            f"the TF_CONFIG under {name!r} has task {config.get('task')}: its 'task' must name that "
            f"process, {{'type': {task_type!r}, 'index': {index}}}.")
        address = _address(cluster, name)
        require(address, f"the cluster lists no address for {name}: give it one, e.g. 'localhost:2223'.")
        host, _, port = address.rpartition(":")
        require(host in LOOPBACK_HOSTS, f"{name} is at {address}: use 'localhost' for every task, since they "
                                        "all run on this machine. (That tells the others where to connect; it "
                                        "does not keep a server private: a TF server listens on every interface "
                                        "whatever host its TF_CONFIG names.)")
        require(port not in ports, f"{name} has port {port}, like {ports.get(port)}: only one server can "
                                   f"listen there, so {name} would not be reachable. Did you give it a port "
                                   f"different from {ports.get(port)}?")
        ports[port] = name
    for name, config in configs.items():
        try:
            tfconfig.validate(config)
        except tfconfig.TFConfigError as error:
            raise AssertionError(f"{name}: {error}") from None


def _address(cluster, name):
    task_type, index = tfconfig.parse_task(name)
    addresses = cluster.get(task_type, [])
    return addresses[index] if index < len(addresses) else None


def servers_serving(processes, configs, timeout=60.0):
    """Every ps and worker process is alive and accepts connections on its own port."""
    servers = sorted(name for name in configs if not name.startswith("chief"))
    require("chief:0" not in processes, "do not start a server for chief:0: the chief is this notebook; "
                                        "it joins the cluster when it creates the strategy.")
    require(sorted(processes) == servers, f"processes has {sorted(processes)}; start one process for each of {servers}.")
    ports = {name: int(_address(configs[name]["cluster"], name).rpartition(":")[2]) for name in servers}
    waiting = list(servers)

    def every_server_serves():
        while waiting:
            name = waiting[0]
            if not serving(processes[name].pid, ports[name]):
                code = processes[name].poll()
                require(code is None, f"{name}'s process exited with code {code} before serving: read its log. "
                                      "Did you pass TF_CONFIG in its environment (env=...)?")
                return False
            waiting.pop(0)
        return True

    wait_until(every_server_serves, timeout, "every server to serve", interval=0.1, error=lambda _: AssertionError(
        f"{waiting[0]} is not reachable on port {ports[waiting[0]]} after {timeout:g} s: "
        "did its server start with its own TF_CONFIG?"))


def cluster_trained(configs, model, data, target_accuracy):
    """This process joined the learner's cluster as its chief, the model lives on the ps, and it learned MNIST."""
    address = _address(configs["chief:0"]["cluster"], "chief:0")
    require(serving(os.getpid(), int(address.rpartition(":")[2])),
        f"this notebook does not serve at {address}, chief:0's address: build the strategy's resolver from "
        "your cluster, with task_type='chief' and task_id=0.")
    devices = {variable.device for variable in model.variables}
    require(all("/job:ps" in device for device in devices),
        f"the model's variables live on {sorted(devices)}, not on the parameter server: "
        "create the model inside `with strategy.scope():`.")
    return learned(model, data, target_accuracy)
