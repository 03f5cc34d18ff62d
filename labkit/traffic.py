"""Bytes that really crossed the network into and out of the parameter servers.

Reads the kernel's per-connection TCP counters with ``ss -tinp`` (Linux, iproute2)
and adds them up over every connection the PS processes hold. TensorFlow moves a
tensor between processes by having the *receiver* ask for it, so a PS opens
connections to the workers to fetch gradients and answers the workers' requests
for parameters. Over all its connections, what a PS received is what workers
pushed (gradients and update payloads, plus RPC framing) and what it sent is
what they pulled (parameters). Counters of connections that closed in between
are not seen.
"""
import re
import shutil
import subprocess
from dataclasses import dataclass

UNAVAILABLE = ("`ss` (iproute2, Linux) is not on PATH (macOS has none), so the bytes on the PS sockets "
               "cannot be measured here; the notebooks report the payload bytes they send instead.")
_PID = re.compile(r"pid=(\d+)")
_COUNTER = re.compile(r"\b(bytes_received|bytes_acked):(\d+)")


@dataclass
class Traffic:
    received: float  # bytes into the processes: pushes
    sent: float      # bytes out of the processes: pulls

    def __add__(self, other):
        return Traffic(self.received + other.received, self.sent + other.sent)

    def __sub__(self, other):
        return Traffic(self.received - other.received, self.sent - other.sent)

    def __truediv__(self, count):
        return Traffic(self.received / count, self.sent / count)


def available():
    """Whether per-connection counters can be read here (Linux with ``ss``)."""
    return shutil.which("ss") is not None


def process_traffic(pids):
    """Bytes received and sent so far over the open TCP connections of these processes."""
    if not available():
        raise RuntimeError(f"{UNAVAILABLE} On Linux, install iproute2 to measure them.")
    output = subprocess.run(["ss", "-tinpH", "state", "established"],
                            capture_output=True, text=True, check=True).stdout
    wanted, owner = {int(pid) for pid in pids}, None
    totals = {"bytes_received": 0, "bytes_acked": 0}
    for line in output.splitlines():
        if not line[:1].isspace():  # a connection line; its counters follow on the next line
            found = _PID.search(line)
            owner = int(found.group(1)) if found else None
        elif owner in wanted:
            for name, value in _COUNTER.findall(line):
                totals[name] += int(value)
    return Traffic(received=totals["bytes_received"], sent=totals["bytes_acked"])


def ps_pids(cluster):
    """The process ids of a LocalCluster's parameter servers."""
    return [task.pid for task in cluster.tasks if task.type == "ps"]


def sent_to_tasks(pid, cluster):
    """Bytes process ``pid`` has sent so far to each task of ``cluster``, by task name ("worker:0": ...).

    Counts its open connections whose peer is a task's port, e.g. what the
    coordinator (the notebook's kernel) shipped to each worker and parameter server.
    """
    if not available():
        raise RuntimeError("`ss` (from iproute2, Linux) is needed to read TCP counters.")
    output = subprocess.run(["ss", "-tinpH", "state", "established"],
                            capture_output=True, text=True, check=True).stdout
    task_by_port = {str(task.port): task.name for task in cluster.tasks}
    sent, peer = dict.fromkeys(task_by_port.values(), 0), None
    for line in output.splitlines():
        if not line[:1].isspace():
            found = _PID.search(line)
            peer_port = line.split()[3].rsplit(":", 1)[-1]  # columns: Recv-Q Send-Q Local Peer users
            peer = task_by_port.get(peer_port) if found and int(found.group(1)) == pid else None
        elif peer:
            sent[peer] += sum(int(value) for name, value in _COUNTER.findall(line) if name == "bytes_acked")
    return sent
