"""Checks of notebook 01 (TF_CONFIG and the cluster), also used by 09."""

from labkit.checks.core import require


# Each notebook assertion is one of these; tests/test_checks.py feeds each a wrong result.
ALL_INTERFACES = {"0.0.0.0": "every IPv4 interface", "::": "every interface (IPv6, and IPv4 too on Linux)"}


def same_cluster_everywhere(configs, cluster):
    """Every TF_CONFIG in ``configs`` (task name -> dict) has exactly ``cluster`` as its cluster part."""
    differ = sorted(name for name, config in configs.items() if config.get("cluster") != cluster)
    require(configs and not differ, f"the cluster part of {', '.join(differ) or 'no task'} differs from "
                                    f"{cluster}: every process must get the same cluster; only 'task' changes.")


def received_its_tf_config(name, received, expected):
    """The TF_CONFIG a task process really has in its environment is the one it was given."""
    require(received == expected, f"{name} got TF_CONFIG {received}, not {expected}.")


def listens_on_every_interface(name, port, sockets):
    """A TF server listens on its own port, on every interface (``sockets``: its listening (ip, port) pairs)."""
    require(port in [listening for _, listening in sockets],
        f"{name} does not listen on its port {port}; it listens on {sockets}.")
    narrow = [ip for ip, _ in sockets if ip not in ALL_INTERFACES]
    require(not narrow, f"{name} listens on {narrow} only, not on every interface: {sockets}.")


def isolated_kernel_unreachable(network, tried):
    """A kernel that says it is isolated (``network``, from isolation.network_status) got no connection
    accepted from outside (``tried``: where -> accepted, refused or no answer)."""
    accepted = [where for where, result in tried.items() if result == "accepted"]
    require(network != "isolated" or not accepted,
        f"this kernel says it runs in a private network namespace, yet connections from outside to {accepted} "
        "were accepted: its tasks are reachable. Stop the cluster and report this as a bug.")


def task_dead(task):
    """The killed task's process has exited."""
    require(not task.alive(), f"{task.name} (pid {task.pid}) is still alive after the kill.")


def restarted_in_place(task, old_pid, old_port):
    """A restarted task is a new, live process on its old port."""
    require(task.alive(), f"{task.name} is not alive after the restart; read its log, {task.log_path}.")
    require(task.pid != old_pid, f"{task.name} still has pid {old_pid}: a restart starts a new process.")
    require(task.port == old_port, f"{task.name} moved from port {old_port} to {task.port}: the others "
                                   "only know its old address, so a restart must keep the port.")
