"""``labkit status --all-users``: who runs what on a shared server (a class hub, ``make hub``), and its memory.

For each user who runs a Jupyter server, a kernel or a labkit program here: their memory (summed PSS, as the
kit measures it: ``labkit.tools.memory``) and what it is made of, then each cluster their kernels recorded
(``labkit.registry``, read from their home, never changed). It reads every user's processes, so it needs root.
"""
import os
import pwd
import re
from collections import Counter

import psutil

from labkit import registry
from labkit.tools import memory
from labkit.tools.cli import cluster_lines

GB = 1e9
KIT_PROGRAMS = {name for _, name in memory.PROGRAMS}  # what memory.task_name calls a kit's process, tasks aside
TASK = re.compile(r"(all-reduce )?[a-z]+:\d+")  # what it calls a task: "ps:0", "all-reduce worker:1"


def is_the_kits(name):
    """Whether ``memory.task_name``'s ``name`` is one of the kit's programs: a server, kernel or task."""
    return name in KIT_PROGRAMS or bool(TASK.fullmatch(name))


def kit_users():
    """The uids of the users who run one of the kit's programs here now."""
    found = set()
    for process in psutil.process_iter(["uids"]):
        try:
            if process.info["uids"] and is_the_kits(memory.task_name(process)):
                found.add(process.info["uids"].real)
        except psutil.Error:
            continue
    return found


def report():
    """The lines ``labkit status --all-users`` prints; ValueError without root."""
    if os.geteuid() != 0:
        raise ValueError("--all-users reads every user's processes and their memory: run it as root "
                         "(sudo .venv/bin/labkit status --all-users).")
    lines, total = [], 0
    users = memory.by_user(kit_users())
    for uid, processes in sorted(users.items()):
        user = pwd.getpwuid(uid)
        sizes = Counter()
        for name, size in processes.values():
            sizes[name if is_the_kits(name) else "other"] += size
        used = sum(sizes.values())
        total += used
        parts = ", ".join(f"{name} {size / GB:.2f}" for name, size in sizes.most_common())
        lines.append(f"{user.pw_name} (uid {uid}): {used / GB:.1f} GB in {len(processes)} processes ({parts}; GB, PSS)")
        for state in registry.running_clusters(registry.state_dir(user.pw_dir)):
            lines += ["  " + line for line in cluster_lines(state)]
    if not users:
        return ["no user runs a Jupyter server, kernel or labkit task here"]
    return lines + [f"{len(users)} user(s), {total / GB:.1f} GB in all (PSS), of this machine's "
                    f"{psutil.virtual_memory().total / GB:.1f} GB"]
