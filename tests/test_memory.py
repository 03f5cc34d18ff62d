"""The peak-memory sampler behind `labkit sweep` and `make measurements`, on real processes."""
import json
import os
import subprocess
import sys
import time

from labkit.tools.memory import PeakMemory

HOLD_300_MB = "import time; block = bytearray(300_000_000); block[::4096] = b'x' * len(block[::4096]); time.sleep(3)"


def test_the_peaks_count_every_child_and_its_private_memory():
    with PeakMemory(interval=0.1) as memory:
        children = [subprocess.Popen([sys.executable, "-c", HOLD_300_MB]) for _ in range(2)]
        for child in children:
            child.wait()
    assert memory.pss_mb >= 600, "two children each touching 300 MB"
    assert memory.rss_mb >= memory.pss_mb, "RSS counts shared pages once per process: never less than PSS"
    assert memory.alone_mb >= 600
    assert max(memory.task_pss_mb.values()) >= 600, "same-named processes are summed under one name"
    assert memory.peaks()["peak_pss_mb"] == memory.pss_mb


def test_with_no_child_running_the_peaks_stay_zero():
    with PeakMemory(interval=0.05) as memory:
        time.sleep(0.2)
    assert memory.peaks() == {"peak_pss_mb": 0, "peak_rss_mb": 0, "peak_alone_mb": 0, "largest_tasks": ""}


def test_each_all_reduce_worker_is_named_by_its_task_not_summed_as_python():
    # processes with the all-reduce worker's module on their command line and its TF_CONFIG (sleeping, not training)
    with PeakMemory(interval=0.1) as memory:
        workers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)", "-m", "labkit.allreduce"],
                                    env=os.environ | {"TF_CONFIG": json.dumps({"task": {"type": "worker", "index": i}})})
                   for i in range(2)]
        for worker in workers:
            worker.wait()
    assert set(memory.task_pss_mb) == {"all-reduce worker:0", "all-reduce worker:1"}
