"""``python -m labkit.tools.memory_guard --group G --limit 5G``: keep each learner of a class hub within a memory limit.

JupyterHub's ``mem_limit`` reaches a learner's server (as MEM_LIMIT), but LocalProcessSpawner does not enforce it.
The class hub (``labkit.tools.hub``) runs this as one of its services, as root: every ``--interval`` seconds it sums
the memory of each learner's processes (PSS, as the kit measures memory: ``labkit.tools.memory``), all those of
their Unix user: their Jupyter server, kernels, tasks and terminals. A learner over the limit loses their largest
kernel with every process below it (its tasks), or, when a process outside the kernels is larger, that process;
their Jupyter server stays. JupyterLab then says the kernel died and starts a fresh one, as on a laptop whose
memory ran out. Each stop is a line in the hub's log. The guard samples, so it is not a hard cap: memory taken
faster than it looks can still reach the system's own out-of-memory killer first.
"""
import argparse
import signal
import sys
import time

import psutil

from labkit.tools import hub, memory

GiB = 2**30  # as JupyterHub's mem_limit counts


def stop_largest(processes):
    """Kill the largest of a learner's kernels (the launcher JupyterLab started, with its kernel and every task
    below it) and their other processes but the Jupyter server, given as ``{process: (name, bytes)}`` (what
    ``memory.by_user`` gives for one user); return (what was stopped, in words, and its bytes)."""
    groups = {}
    for launcher in (process for process, (name, _) in processes.items() if name == "kernel launcher"):
        try:
            groups[launcher] = [launcher, *launcher.children(recursive=True)]
        except psutil.Error:
            continue
    in_a_kernel = {member for members in groups.values() for member in members}
    groups.update({process: [process] for process, (name, _) in processes.items()
                   if process not in in_a_kernel and name != "jupyter server"})
    if not groups:
        return "nothing (only their Jupyter server runs)", 0
    size = {head: sum(processes.get(member, ("", 0))[1] for member in members) for head, members in groups.items()}
    head = max(size, key=size.get)
    for member in groups[head]:
        try:
            member.kill()
        except psutil.Error:
            pass
    what = (f"their largest kernel (pid {head.pid}) with every process it started, {len(groups[head])} in all"
            if head in in_a_kernel else f"their largest process, {processes[head][0]} (pid {head.pid})")
    return what, size[head]


def guard_once(group, limit_bytes, out=print):
    """One look at every learner of ``group``: stop the largest kernel (or process) of each one over ``limit_bytes``;
    return how many were stopped."""
    learners = hub.members(group)
    stopped = 0
    for uid, processes in memory.by_user(learners).items():
        used = sum(size for _, size in processes.values())
        if used > limit_bytes:
            what, size = stop_largest(processes)
            stopped += size > 0
            out(f"pslab memory guard: {learners[uid]} used {used / GiB:.1f} GiB, over their limit of "
                f"{limit_bytes / GiB:.1f} GiB: stopped {what}, {size / GiB:.1f} GiB", flush=True)
    return stopped


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m labkit.tools.memory_guard", description=__doc__.splitlines()[0])
    parser.add_argument("--group", required=True, help="the class's Unix group: its members are the learners")
    parser.add_argument("--limit", required=True, type=hub.byte_size, metavar="SIZE",
                        help="memory each learner may use, e.g. 5G (JupyterHub's mem_limit)")
    parser.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                        help="seconds between two looks (default: %(default)s)")
    args = parser.parse_args(argv)
    for stop in (signal.SIGINT, signal.SIGTERM):  # the hub stops its services so, and SIGINT may come in ignored
        signal.signal(stop, lambda *_: sys.exit(0))
    print(f"pslab memory guard: each member of group {args.group} may use {args.limit / GiB:.1f} GiB (PSS), "
          f"looked at every {args.interval:g} s", flush=True)
    while True:
        guard_once(args.group, args.limit)
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
