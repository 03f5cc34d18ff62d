"""Bytes that really crossed the network into and out of the parameter servers.

Reads the kernel's per-connection TCP counters with ``ss -tinp`` (Linux, iproute2)
and adds them up over every connection the PS processes hold. TensorFlow moves a
tensor between processes by having the *receiver* ask for it, so a PS opens
connections to the workers to fetch gradients and answers the workers' requests
for parameters. Over all its connections, what a PS received is what workers
pushed (gradients and update payloads, plus RPC framing) and what it sent is
what they pulled (parameters). Counters of connections that closed in between
are not seen.

Where ``ss`` is missing (macOS), ``loopback_traffic`` reads the loopback interface's counters
instead (psutil, on Linux, macOS and Windows): all loopback traffic in the interval, of every
process on this machine, not one process's sockets. Checks that compare socket bytes with theory
are skipped there (``NOT_COMPARABLE``).
"""
import re
import shutil
import subprocess
from dataclasses import dataclass

import psutil

LOOPBACK = "all loopback traffic in the interval"
LOOPBACK_INTERFACES = ("lo", "lo0")  # Linux, macOS
UNAVAILABLE = ("`ss` (iproute2, Linux) is not on PATH (macOS has none), so the bytes on each socket cannot be "
               "measured here; the notebooks report the payload bytes they send, or "
               f"{LOOPBACK} (every process on this machine).")
NOT_COMPARABLE = (f"skipped: it compares the bytes on sockets with theory, and {LOOPBACK} counts every process "
                  "on this machine; it runs where `ss` is on PATH (Linux, WSL2).")
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


def loopback_traffic():
    """Bytes through the loopback interface so far, by every process on this machine (each byte is both
    received and sent there)."""
    counters = psutil.net_io_counters(pernic=True)
    name = next((name for name in LOOPBACK_INTERFACES if name in counters), None)
    if name is None:
        raise RuntimeError(f"no loopback interface ({' or '.join(LOOPBACK_INTERFACES)}) among {sorted(counters)}")
    return Traffic(received=counters[name].bytes_recv, sent=counters[name].bytes_sent)


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
    Without ``ss`` one total instead: ``{LOOPBACK: bytes sent through the loopback interface so far}``.
    """
    if not available():
        return {LOOPBACK: loopback_traffic().sent}
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


def connections_between(pids, ports):
    """Which task has a TCP connection open to which other task's port now: sorted (from, to) task names.

    ``pids`` and ``ports``: task name -> its process id, and -> the port it listens on (tasks on one
    machine, so a port names a task). Reads each process's own sockets with psutil (no ``ss``); a
    process that has exited has none.
    """
    task_by_port, pairs = {port: task for task, port in ports.items()}, set()
    for task, pid in pids.items():
        try:
            connections = psutil.Process(pid).net_connections(kind="tcp")
        except psutil.NoSuchProcess:
            continue
        for connection in connections:
            peer = task_by_port.get(connection.raddr.port) if connection.raddr else None
            if connection.status == psutil.CONN_ESTABLISHED and peer not in (None, task):
                pairs.add((task, peer))
    return sorted(pairs)
