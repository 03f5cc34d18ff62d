"""Where LocalClusters are known: by name in this process, and by a state file for other processes.

In this process a cluster is known by its name, so that a re-run cell's new cluster stops the old one
of the same name. Across processes (``labkit status``, ``labkit down``, a notebook's last check) each
running cluster is a JSON file in ``state_dir()``, written by its owner and read by anyone.
"""
import json
import os
import tempfile
from pathlib import Path

import psutil

from labkit.runtime import processes

_live_clusters = {}  # name -> LocalCluster of this process, so a re-run cell replaces its old cluster


def replace_live(name, cluster):
    """Make ``cluster`` this process's cluster called ``name``, stopping the earlier one if it runs."""
    previous = _live_clusters.get(name)
    if previous is not None and previous.running:
        print(f"labkit: stopping the earlier cluster named {name!r} before starting this one.")
        previous.stop()
    _live_clusters[name] = cluster


def forget(name, owner_pid, cluster):
    """``cluster`` (called ``name``, owned by ``owner_pid``) stopped: remove its state file and its name."""
    state_path(name, owner_pid).unlink(missing_ok=True)
    if _live_clusters.get(name) is cluster:
        del _live_clusters[name]


def state_dir(home=None):
    """Where clusters record themselves for ``labkit status``: ``LABKIT_STATE_DIR``, read when used; in ``home``, where
    that user's clusters record themselves unless they set it."""
    default = Path(home or Path.home()) / ".cache" / "labkit" / "clusters"
    return default if home else Path(os.environ.get("LABKIT_STATE_DIR", default))


def record(state):
    """Write ``state`` (a dict with ``name``, ``owner_pid``, ``tasks``, ...) where other processes read it."""
    path = state_path(state["name"], state["owner_pid"])
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written aside, then renamed: a reader (`labkit status`) sees the old file or the new, never half.
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as file:
        json.dump(state, file, indent=1)
    os.replace(file.name, path)


def state_path(name, owner_pid):
    """Where the cluster ``name`` of process ``owner_pid`` is recorded for other processes."""
    return state_dir() / f"{name}-{owner_pid}.json"


def running_clusters(directory=None):
    """Clusters recorded by live LocalCluster owners on this machine, with each task's liveness: this user's, or
    those recorded in ``directory`` (another user's state folder, read and left as it is)."""
    found = []
    for path in sorted(Path(directory or state_dir()).glob("*.json")):
        state = json.loads(path.read_text())
        if not processes.running(state["owner_pid"]):
            if directory is None:
                path.unlink(missing_ok=True)
            continue
        for task in state["tasks"]:
            task["alive"] = task["pid"] is not None and processes.running(task["pid"])
        found.append(state)
    return found


def stop_recorded(state, grace_seconds=processes.STOP_GRACE_SECONDS):
    """Stop the task processes of a cluster that another process owns (a dict of ``running_clusters()``).

    The owner (a notebook's kernel, ``labkit up``) keeps running: only its tasks stop, as if
    each had been killed. Returns the names of the tasks that were still running.
    """
    running = {task["task"]: psutil.Process(task["pid"]) for task in state["tasks"] if _serving_task(task["pid"])}
    processes.stop_others(list(running.values()), grace_seconds)
    state_path(state["name"], state["owner_pid"]).unlink(missing_ok=True)
    return list(running)


def _serving_task(pid):
    """True if ``pid`` is a running (not zombie) ``labkit.runtime.server`` task, not another program that got the pid."""
    try:
        return bool(pid) and processes.running(pid) and processes.SERVER_MODULE in psutil.Process(pid).cmdline()
    except psutil.Error:
        return False
