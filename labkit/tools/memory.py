"""Peak memory of a run: the kernel this process started and every process below it, sampled in a thread.

PSS (proportional set size) divides each shared page among the processes that map it, so summed
over a run's processes it is what the run really takes; the summed RSS counts shared libraries
once per process and overstates it (reported beside it for comparison). PSS also divides pages
shared with other jobs' processes, so on a busy machine it understates what the run takes alone:
``alone`` estimates that, as the processes' private memory (USS) plus the largest shared part of
any one of them (their shared pages are mostly the same libraries, counted once).

PSS exists only on Linux. Elsewhere (macOS, Windows), or with LABKIT_HIDE_PSS=1 (to try that route on
Linux), each process counts by its USS instead (``processes.memory_measure``), which leaves out every
shared page and so understates the run; the peaks' keys name the measure used (``peak_pss_mb`` or ``peak_uss_mb``).
"""
import json
from pathlib import Path

import psutil

from labkit.runtime import processes

MB = 1e6
PROGRAMS = (("ipykernel_launcher", "kernel"), ("labkit.deploy.coordinator", "coordinator"),
            ("labkit.deploy.evaluator", "evaluator"), ("labkit.runtime.isolation", "kernel launcher"),
            ("jupyterlab", "jupyter server"), ("jupyterhub.singleuser", "jupyter server"))  # the first that matches


def task_name(process):
    """What a process of the run is: "kernel", "worker:0", "ps:1", "all-reduce worker:0", "coordinator", ...
    or its program name."""
    cmdline = process.cmdline()
    if processes.SERVER_MODULE in cmdline:
        return _task_in_tf_config(process)
    if "labkit.allreduce" in cmdline:
        return f"all-reduce {_task_in_tf_config(process)}"
    for module, name in PROGRAMS:
        if module in cmdline:  # its own argument, as `python -m` takes it: a setting that names it does not count
            return name
    return Path(cmdline[0]).name if cmdline else process.name()


def _task_in_tf_config(process):
    task = json.loads(process.environ().get("TF_CONFIG", "{}")).get("task", {})
    return f"{task.get('type')}:{task.get('index')}"


class PeakMemory(processes.Watcher):
    """While its ``with`` block runs, samples this process's children (a kernel and the processes it
    starts) and keeps the peaks, in MB: the summed ``processes.memory_measure()`` (PSS, else USS), summed RSS, the alone
    estimate and each task's."""

    def __init__(self, interval=0.5):
        super().__init__(interval)
        self.measure = processes.memory_measure()
        self.peak_mb = self.rss_mb = self.alone_mb = 0
        self.task_mb = {}

    def poll(self):
        measured, rss, private, shared = {}, 0, 0, 0
        for child in psutil.Process().children(recursive=True):
            try:
                name, memory = task_name(child), child.memory_full_info()
            except (psutil.Error, ProcessLookupError):
                continue  # it ended between the listing and the reading
            measured[name] = measured.get(name, 0) + getattr(memory, self.measure) / MB
            rss += memory.rss / MB
            private, shared = private + memory.uss / MB, max(shared, (memory.rss - memory.uss) / MB)
        for name, size in measured.items():
            self.task_mb[name] = max(self.task_mb.get(name, 0), round(size))
        self.peak_mb = max(self.peak_mb, round(sum(measured.values())))
        self.rss_mb = max(self.rss_mb, round(rss))
        self.alone_mb = max(self.alone_mb, round(private + shared))

    def peaks(self):
        """The row of results.csv this run's memory fills; the first key names the measure, which the
        largest tasks' sizes use too."""
        largest = sorted(self.task_mb.items(), key=lambda item: -item[1])[:4]
        return {f"peak_{self.measure}_mb": self.peak_mb, "peak_rss_mb": self.rss_mb, "peak_alone_mb": self.alone_mb,
                "largest_tasks": " ".join(f"{name}={mb}" for name, mb in largest)}


def by_user(uids):
    """{uid: {process: (what it is (task_name), its memory in bytes by ``processes.memory_measure()``)}} of every
    process each of ``uids`` runs now. Reading another user's PSS needs root; a process that ends meanwhile, or
    whose memory cannot be read, is left out."""
    measure, found = processes.memory_measure(), {uid: {} for uid in uids}
    for process in psutil.process_iter(["uids"]):
        uids_now = process.info["uids"]
        if uids_now is None or uids_now.real not in found:
            continue
        try:
            found[uids_now.real][process] = task_name(process), getattr(process.memory_full_info(), measure)
        except (psutil.Error, ProcessLookupError):
            continue
    return found
