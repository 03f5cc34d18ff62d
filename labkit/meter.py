"""What each timed interval of training cost: wall seconds, CPU seconds per task, bytes on sockets.

``labkit.train`` meters every interval it times with a ``Meter``; the bench, the compression
and all-reduce labs pass one that also reads the processes and counters they care about.
"""
import time

from labkit import traffic
from labkit.runtime.processes import cpu_seconds


class Meter:
    """Wall seconds of each interval, and over all of them: CPU seconds of each task, bytes on the sockets, counts."""

    def __init__(self, cpu_pids=None, socket_pids=(), counters=None):
        # a task or role name -> its process id, or a list of them
        self.cpu_pids = {name: [pids] if isinstance(pids, int) else list(pids) for name, pids in (cpu_pids or {}).items()}
        self.socket_pids = list(socket_pids) if traffic.available() else []  # e.g. the parameter servers
        self.counters = counters or {}  # a name -> a function returning its count so far (e.g. payload bytes)
        self.seconds, self.cpu_seconds = [], dict.fromkeys(self.cpu_pids, 0.0)
        self.counts = dict.fromkeys(self.counters, 0)
        self.bytes = traffic.Traffic(0, 0) if self.socket_pids else None

    def _read(self):
        cpu = {name: sum(cpu_seconds(pid) for pid in pids) for name, pids in self.cpu_pids.items()}
        counts = {name: count() for name, count in self.counters.items()}
        return cpu, counts, traffic.process_traffic(self.socket_pids) if self.socket_pids else None

    def begin(self):
        self._before = self._read()
        self._began = time.perf_counter()  # after reading the counters: reading them is not timed

    def end(self):
        """End the interval; return its wall seconds."""
        ended = time.perf_counter()  # before reading the counters, for the same reason
        (cpu_before, counts_before, bytes_before), (cpu_after, counts_after, bytes_after) = self._before, self._read()
        self.seconds.append(ended - self._began)
        for name in self.cpu_pids:
            self.cpu_seconds[name] += cpu_after[name] - cpu_before[name]
        for name in self.counters:
            self.counts[name] += counts_after[name] - counts_before[name]
        if self.socket_pids:
            self.bytes = self.bytes + (bytes_after - bytes_before)
        return self.seconds[-1]
