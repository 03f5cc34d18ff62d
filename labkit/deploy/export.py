"""``labkit export``: the files each real machine needs to run its part of a cluster.

From a cluster (task type -> list of "host:port", the "cluster" part of TF_CONFIG) it writes
``plan.txt`` (what runs where, in which order, which ports to open) and, per host, one
directory per task holding ``tf_config.json`` and ``run.sh``, the command from
``tfconfig.host_plan``: ``python -m labkit.runtime.server`` for ps and workers, the training
program for the chief. Copy a host's directory to that machine and run each ``run.sh``.

``start_task`` runs an exported task here (in a network namespace if given), which is
how notebook 09 and tests/test_multihost.py play several machines on one computer.
"""
import json
import os
import sys
from pathlib import Path

import yaml

from labkit.progress import ProgressLines
from labkit.runtime import children, loglines, processes, tfconfig

# Both directories on storage the hosts share: the chief writes the training shards into data/
# once and each worker reads its own; for machines that share no disk, --ship-arrays instead.
DEFAULT_CHIEF_COMMAND = 'python -m labkit.deploy.coordinator --checkpoint-dir "$PWD/checkpoints" --data-dir "$PWD/data"'
CLUSTER_FILE_EXAMPLE = "chief: [10.0.0.9:2222]\nps: [10.0.0.1:2222]\nworker: [10.0.0.2:2222, 10.0.0.3:2222]"
LOG_NAME = "task.log"  # each started task's output, in its directory, new at each start
START_ORDER = ("ps", "worker", "chief")  # servers first: the chief connects to all of them


def load_cluster(path) -> dict:
    """Read a cluster from a YAML or JSON file: task type -> list of "host:port" (a whole TF_CONFIG works too)."""
    try:
        cluster = yaml.safe_load(Path(path).read_text())
    except OSError as error:
        raise tfconfig.TFConfigError(f"cannot read the cluster file {str(path)!r}: {error.strerror}. "
                                     "Check the path.") from None
    except yaml.YAMLError as error:
        raise tfconfig.TFConfigError(f"the cluster file {str(path)!r} is not valid YAML or JSON:\n{error}\n"
                                     f"Write it like this:\n{CLUSTER_FILE_EXAMPLE}") from None
    if isinstance(cluster, dict) and "cluster" in cluster:
        cluster = cluster["cluster"]
    return cluster


def cluster_from_flags(chief=None, ps=(), worker=()) -> dict:
    """The cluster given as addresses on the command line (``--chief``, ``--ps``, ``--worker``)."""
    cluster = {"chief": [chief] if chief else [], "ps": list(ps), "worker": list(worker)}
    return {task_type: addresses for task_type, addresses in cluster.items() if addresses}


def export(cluster: dict, out_dir, chief_command: str = DEFAULT_CHIEF_COMMAND) -> list[dict]:
    """Write plan.txt and every task's tf_config.json and run.sh under ``out_dir``; return the host plan."""
    plan = tfconfig.host_plan(cluster, chief_command)
    if "chief" not in cluster:
        raise tfconfig.TFConfigError(
            'the cluster has no "chief", the machine that runs the training program (the coordinator). '
            'Add one, e.g. --chief 10.0.0.9:2222, or "chief": ["10.0.0.9:2222"] in the cluster file.')
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ValueError(f"{out_dir} is not empty (an earlier export?). Delete it or choose another "
                         "directory: files of hosts no longer in the cluster would be left there.")
    rules = firewall(plan)
    for entry in plan:
        directory = out_dir / entry["host"] / entry["task"].replace(":", "-")
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "tf_config.json").write_text(json.dumps(json.loads(entry["tf_config"]), indent=2) + "\n")
        run = directory / "run.sh"
        run.write_text(
            "#!/bin/sh\n"
            f"# {entry['task']} on host {entry['host']}, port {entry['port']}.\n"
            f"# It listens on EVERY network interface with no authentication: open port {entry['port']}\n"
            f"# to {_peers(rules[entry['host']])}, on a private network.\n"
            '# Needs Python with labkit installed, as "python" on PATH (e.g. an activated .venv).\n'
            'cd "$(dirname "$0")"\n'
            f"exec env {entry['command']}\n")
        run.chmod(0o755)
    (out_dir / "plan.txt").write_text(format_plan(plan) + "\n")
    return plan


def firewall(plan: list[dict]) -> dict[str, dict]:
    """Per host: the TCP ports its tasks listen on, and the hosts that must reach them (all the others)."""
    hosts = list(dict.fromkeys(entry["host"] for entry in plan))
    return {host: {"ports": sorted(entry["port"] for entry in plan if entry["host"] == host),
                   "from": [other for other in hosts if other != host]} for host in hosts}


def format_plan(plan: list[dict]) -> str:
    """The host plan as text, followed by the ports each host must open, and to whom."""
    lines = [tfconfig.format_host_plan(plan), "", "Ports to open (TCP), to the cluster's own hosts only:"]
    for host, rule in firewall(plan).items():
        lines.append(f"  {host}: port {', '.join(map(str, rule['ports']))} to {_peers(rule)}")
    lines += ["", "Checkpoints: each ps task writes its own variables into the chief's checkpoint directory,",
              "so that path must be on storage the chief and every ps host share (NFS, a bucket).",
              "Data: the chief writes the training set into its --data-dir once, one shard file per worker,",
              "and each worker reads its own from the same path: storage every worker host shares too.",
              "Hosts that share no disk: give --chief-command with --ship-arrays instead of --data-dir",
              "(the arrays then travel to every task inside the traced dataset function)."]
    return "\n".join(lines)


def _peers(rule):
    if not rule["from"]:
        return "no other machine (every task runs on this host)"
    return f"the cluster's other hosts only ({', '.join(rule['from'])})"


def exported_tasks(out_dir) -> list[tuple[str, str, Path]]:
    """(task, host, directory) for every task written by ``export``: ps first, then workers, the chief last."""
    found = []
    for config_path in Path(out_dir).glob("*/*/tf_config.json"):
        task = json.loads(config_path.read_text())["task"]
        found.append((START_ORDER.index(task["type"]), task["index"], config_path.parent))
    return [(f"{START_ORDER[order]}:{index}", directory.parent.name, directory)
            for order, index, directory in sorted(found)]


def start_task(directory, netns=None):
    """Run the task exported to ``directory`` (its ``run.sh``) as a child that exits with this process.

    Its output goes to a new ``task.log`` there. ``netns``: the network namespace that plays its
    host (needs root). ``python`` in run.sh is this interpreter, as on a host with labkit installed.
    """
    directory = Path(directory)
    command = ["sh", str(directory / "run.sh")]
    if netns:
        command = ["ip", "netns", "exec", netns, *command]
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    with open(directory / LOG_NAME, "wb") as log:
        return children.start_command(command, env=env, stdout=log)


def wait_until_serving(process, directory, timeout=90.0):
    """Return once the ps or worker task started from ``directory`` serves; raise if it died or hung.

    Its log says so: a task in another network namespace cannot be reached from here.
    """
    processes.wait_until_serving(process, Path(directory) / LOG_NAME, name=f"the task in {directory}",
                                 timeout=timeout)


def follow_chief(process, directory, num_steps, timeout=600.0, while_running=None):
    """Wait for the chief started from ``directory`` to finish; return its log.

    Prints its progress from the "checkpoint saved" lines it logs, as text lines (``ProgressLines``:
    a saved notebook keeps them as they were), and calls ``while_running()`` (if given) at each look
    while the chief runs. Ctrl-C, the timeout or a failed chief stop it and raise.
    """
    log = Path(directory) / LOG_NAME
    progress = ProgressLines(num_steps, "chief: training steps")

    def finished():
        exited = process.poll() is not None
        if while_running and not exited:
            while_running()
        saved = loglines.steps_with(loglines.CHECKPOINT_SAVED, log.read_text(errors="replace"))
        if saved:
            progress.line(int(saved[-1]))
        return exited

    try:
        processes.wait_until(finished, timeout, "the chief to finish", interval=0.5, error=lambda message: (
            TimeoutError(f"{message}, so it was stopped. Its log:\n{log_tail(directory)}")))
    finally:
        processes.stop([process])
    if process.returncode != 0:
        raise RuntimeError(f"the chief in {directory} failed (exit code {process.returncode}). "
                           f"Its log:\n{log_tail(directory)}")
    return log.read_text(errors="replace")


def log_tail(directory, lines=15):
    """The last lines of a started task's ``task.log``."""
    return processes.log_tail(Path(directory) / LOG_NAME, lines)

