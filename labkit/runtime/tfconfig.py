"""Build, check and explain TF_CONFIG, the cluster description TensorFlow reads.

Every process of a cluster gets a JSON string in the TF_CONFIG environment variable.
Its "cluster" part is the same everywhere (task type -> list of "host:port" addresses);
its "task" part says which type and index this one process is, e.g. worker 1.
(TensorFlow's device names call a task type a "job": ``/job:ps/task:0``. This kit says task type.)
What the Kubeflow Training Operator sets in a TFJob's Pods passes the same checks: lower-case
task types, addresses ``<tfjob-name>-<type>-<index>.<namespace>.svc:<port>`` and "environment": "cloud".
"""

import difflib
import ipaddress
import json
import re
import shlex

from labkit.runtime import processes

CLUSTER_TASK_TYPES = ("chief", "worker", "ps")
TASK_TYPES = CLUSTER_TASK_TYPES + ("evaluator",)
TOP_LEVEL_KEYS = ("cluster", "task", "rpc_layer", "environment")
WHAT_EACH_TASK_TYPE_DOES = {
    "chief": "the coordinator: it runs the training program and schedules functions on the workers",
    "worker": "a worker: it runs the functions the coordinator schedules, using variables on the ps tasks",
    "ps": "a parameter server: it stores the model variables and applies the updates workers send",
    "evaluator": "the evaluator: it reads the checkpoints the chief writes and evaluates them",
}
SECURITY_WARNING = (
    "Warning: every TF server listens on all network interfaces (0.0.0.0) with no authentication; "
    "anyone who can reach its port can run code on that machine. "
    "Only run a cluster on a trusted private network."
)
EXAMPLE_CLUSTER = '{"worker": ["localhost:2222"], "ps": ["localhost:2223"]}'
EXAMPLE_TASK = '{"type": "worker", "index": 0}'
ADDRESS_FIX = "Write it as host:port, e.g. 'localhost:2222', '10.0.0.5:2222' or '[::1]:2222'."
_HOSTNAME_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


class TFConfigError(ValueError):
    """A TF_CONFIG that TensorFlow would reject or misread; the message says how to fix it."""


def did_you_mean(name, choices):
    """The hint " Did you mean 'x'?" for the choice closest to ``name`` (one differing only in case first), or ""."""
    same_but_case = [choice for choice in choices if choice.lower() == str(name).lower()]
    close = same_but_case or difflib.get_close_matches(str(name), choices, n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def build(cluster: dict[str, list[str]], task_type: str, task_index: int) -> dict:
    """Return the TF_CONFIG dict for task `task_type:task_index` of `cluster`."""
    config = {"cluster": cluster, "task": {"type": task_type, "index": task_index}}
    validate(config)
    return {"cluster": {type_: list(addresses) for type_, addresses in cluster.items()},
            "task": {"type": task_type, "index": task_index}}


def validate(tf_config: dict | str) -> dict:
    """Check a TF_CONFIG (a dict or the JSON string from the environment); return it as a dict."""
    config = _parse(tf_config)
    if "sparseCluster" in config:
        raise TFConfigError('TF_CONFIG has "sparseCluster" instead of "cluster": a TFJob with enableDynamicWorker '
                            "writes it, and ParameterServerStrategy needs every task listed. Remove "
                            "enableDynamicWorker from the TFJob.")
    for key in config:
        if key not in TOP_LEVEL_KEYS:
            hint = did_you_mean(key, TOP_LEVEL_KEYS)
            raise TFConfigError(f"unknown top-level key {key!r} in TF_CONFIG.{hint} "
                                f"Allowed keys are {', '.join(TOP_LEVEL_KEYS)}; remove the others.")
    for key in ("cluster", "task"):
        if key not in config:
            raise TFConfigError(f'TF_CONFIG is missing "{key}". It needs both "cluster" and "task", e.g. '
                                f'{{"cluster": {EXAMPLE_CLUSTER}, "task": {EXAMPLE_TASK}}}.')
    _check_cluster(config["cluster"])
    _check_task(config["task"], config["cluster"])
    return config


def _parse(tf_config):
    if isinstance(tf_config, str):
        try:
            tf_config = json.loads(tf_config)
        except json.JSONDecodeError as error:
            raise TFConfigError(
                f"TF_CONFIG is not valid JSON: {error.msg} at line {error.lineno}, column {error.colno} "
                f"(character {error.pos}). JSON needs double quotes around keys and strings; "
                "let json.dumps() write it for you.") from None
    if not isinstance(tf_config, dict):
        raise TFConfigError(f'TF_CONFIG must be a JSON object like {{"cluster": ..., "task": ...}}, '
                            f"got {tf_config!r} (type {type(tf_config).__name__}).")
    return tf_config


def _check_cluster(cluster):
    if not isinstance(cluster, dict):
        raise TFConfigError(f'"cluster" must be an object mapping task types to address lists, '
                            f"e.g. {EXAMPLE_CLUSTER}; got {cluster!r}.")
    if not cluster:
        raise TFConfigError(f'"cluster" is empty. List the task types and their addresses, e.g. {EXAMPLE_CLUSTER}.')
    used_by = {}
    for task_type, addresses in cluster.items():
        if task_type == "evaluator":
            raise TFConfigError('the evaluator must not be listed in "cluster": it is not part of the '
                                'cluster. Remove it here and give the evaluator process its own TF_CONFIG '
                                'whose task type is "evaluator".')
        if task_type not in CLUSTER_TASK_TYPES:
            raise TFConfigError(f"unknown task type {task_type!r} in \"cluster\".{did_you_mean(task_type, CLUSTER_TASK_TYPES)} "
                                f"The task types in a cluster are {', '.join(CLUSTER_TASK_TYPES)}.")
        if not isinstance(addresses, list) or not addresses or not all(isinstance(a, str) for a in addresses):
            raise TFConfigError(f'task type {task_type!r} must have a non-empty list of "host:port" strings, '
                                f'e.g. ["localhost:2222"]; got {addresses!r}.')
        for index, address in enumerate(addresses):
            host, port = _split_address(address)
            key = (host.lower(), port)
            if key in used_by:
                raise TFConfigError(f"address {address!r} is used by both {used_by[key]} and {task_type}:{index}. "
                                    "Every task needs its own host:port; give one of them another port.")
            used_by[key] = f"{task_type}:{index}"
    for task_type in ("ps", "worker"):
        if task_type not in cluster:
            raise TFConfigError(f"the cluster has no {task_type!r} task, but parameter-server training needs at "
                                f'least one. Add e.g. "{task_type}": ["localhost:2230"] to "cluster".')
    if len(cluster.get("chief", [])) > 1:
        raise TFConfigError(f"the cluster lists {len(cluster['chief'])} chiefs, but there can be only one "
                            '(the coordinator). Keep one address under "chief" and move the others '
                            'to "worker".')


def _split_address(address):
    """Split 'host:port' or '[ipv6]:port' into (host, port), checking both parts."""
    if "://" in address:
        raise TFConfigError(f"address {address!r} looks like a URL; TF_CONFIG wants no scheme. {ADDRESS_FIX}")
    host, colon, port = address.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    if not colon or (":" in host and not bracketed):
        raise TFConfigError(f"address {address!r} is not of the form host:port. {ADDRESS_FIX}")
    if not re.fullmatch(r"[0-9]+", port):
        raise TFConfigError(f"port {port!r} in address {address!r} is not an integer. "
                            "Use a number such as 2222.")
    if not 1 <= int(port) <= 65535:
        raise TFConfigError(f"port {port} in address {address!r} is out of range: ports go from 1 to 65535. "
                            "Use a free port such as 2222.")
    host = host[1:-1] if bracketed else host
    if not _is_valid_host(host, bracketed):
        raise TFConfigError(f"host {host!r} in address {address!r} is not a valid hostname or IP address. "
                            "Hostnames use only letters, digits, '-' and '.' (no spaces or '_'); "
                            "IPv6 addresses go in brackets, e.g. '[::1]:2222'.")
    return host, int(port)


def _is_valid_host(host, bracketed):
    try:
        version = ipaddress.ip_address(host).version
    except ValueError:
        version = None
    if bracketed:
        return version == 6
    if re.fullmatch(r"[0-9.]+", host):
        return version == 4
    return len(host) <= 253 and all(_HOSTNAME_LABEL.fullmatch(label) for label in host.split("."))


def _check_task(task, cluster):
    if not isinstance(task, dict):
        raise TFConfigError(f'"task" must be an object like {EXAMPLE_TASK}; got {task!r}.')
    for key in ("type", "index"):
        if key not in task:
            raise TFConfigError(f'"task" is missing "{key}". It names this process, e.g. {EXAMPLE_TASK}.')
    task_type, index = task["type"], task["index"]
    if task_type not in TASK_TYPES:
        raise TFConfigError(f"unknown task type {task_type!r}.{did_you_mean(task_type, TASK_TYPES)} "
                            f"Task types are {', '.join(TASK_TYPES)}.")
    if type(index) is not int or index < 0:
        raise TFConfigError(f"task index {index!r} must be a non-negative integer such as 0 "
                            "(a JSON number, not a string or true/false).")
    if task_type == "evaluator":
        return
    if task_type not in cluster:
        raise TFConfigError(f"task type {task_type!r} does not appear in \"cluster\". Add {task_type!r} "
                            f"tasks to the cluster or use one of its task types: {', '.join(cluster)}.")
    count = len(cluster[task_type])
    if index >= count:
        raise TFConfigError(f"task index {index} is out of range: the cluster has {count} {task_type!r} "
                            f"tasks (indices 0..{count - 1}). Use an index from 0 to {count - 1}.")


def _tasks(cluster):
    """Yield (task type, index, address) for every task in start order: ps, workers, then the chief."""
    for task_type in ("ps", "worker", "chief"):
        for index, address in enumerate(cluster.get(task_type, [])):
            yield task_type, index, address


def explain(tf_config: dict | str) -> str:
    """Describe a TF_CONFIG as a table of tasks, marking this process and what it does."""
    config = validate(tf_config)
    task_type, task_index = config["task"]["type"], config["task"]["index"]
    rows = list(_tasks(config["cluster"]))
    if task_type == "evaluator":
        rows.append(("evaluator", task_index, "(not in the cluster)"))
    width = max(len(address) for _, _, address in rows)
    lines = [f"{'type':<10}{'index':<7}address"]
    for row_type, index, address in rows:
        marker = "  <- this process" if (row_type, index) == (task_type, task_index) else ""
        lines.append(f"{row_type:<10}{index:<7}{address:<{width}}{marker}".rstrip())
    lines.append(f"This process is {task_type}:{task_index}, {WHAT_EACH_TASK_TYPE_DOES[task_type]}.")
    lines.append(SECURITY_WARNING)
    return "\n".join(lines)


def for_every_task(cluster: dict[str, list[str]]) -> dict[str, dict]:
    """Return the TF_CONFIG of every task in `cluster`, keyed like "worker:0"."""
    _check_cluster(cluster)
    return {f"{task_type}:{index}": build(cluster, task_type, index) for task_type, index, _ in _tasks(cluster)}


def host_plan(cluster: dict[str, list[str]], chief_command: str = "python train.py") -> list[dict]:
    """List, for every task, the host and port it runs on and the shell command that starts it there."""
    plan = []
    for name, config in for_every_task(cluster).items():
        task_type, index = parse_task(name)
        host, port = _split_address(cluster[task_type][index])
        tf_config = json.dumps(config)
        program = chief_command if task_type == "chief" else f"python -m {processes.SERVER_MODULE}"
        plan.append({"task": name, "host": host, "port": port, "tf_config": tf_config,
                     "command": f"TF_CONFIG={shlex.quote(tf_config)} {program}"})
    return plan


def format_host_plan(plan: list[dict]) -> str:
    """Render a host_plan() as printable text, grouped by host."""
    lines = ["Start every ps and worker task first, then the chief."]
    for host in dict.fromkeys(entry["host"] for entry in plan):
        lines.append(f"\n# on host {host}")
        for entry in plan:
            if entry["host"] == host:
                lines += [f"# {entry['task']}", entry["command"]]
    lines.append("\n" + SECURITY_WARNING)
    return "\n".join(lines)


def parse_task(name: str) -> tuple[str, int]:
    """Split a task name like "worker:1" into ("worker", 1)."""
    match = re.fullmatch(r"([a-z]+):([0-9]+)", name) if isinstance(name, str) else None
    if not match:
        raise TFConfigError(f"task name {name!r} is not of the form type:index. Write it like 'worker:1'.")
    task_type, index = match.group(1), int(match.group(2))
    if task_type not in TASK_TYPES:
        raise TFConfigError(f"unknown task type {task_type!r} in task name {name!r}.{did_you_mean(task_type, TASK_TYPES)} "
                            f"Task types are {', '.join(TASK_TYPES)}.")
    return task_type, index
