"""What the class hub's memory guard stops when a learner is over their limit (tests/test_hub.py sees it stop a real
learner's kernel): real processes, named and sized as ``memory.by_user`` reports a learner's."""
import subprocess
import sys

import psutil

from labkit.runtime import processes
from labkit.tools.memory_guard import stop_largest

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]
WITH_A_CHILD = [sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
                "'import time; time.sleep(60)']); time.sleep(60)"]


def test_the_guard_stops_the_largest_kernel_with_what_it_started_else_the_largest_process_never_the_server():
    started = [subprocess.Popen(command) for command in (WITH_A_CHILD, SLEEP, SLEEP)]
    try:
        launcher, other, server = (psutil.Process(process.pid) for process in started)
        kernel = processes.wait_until(lambda: launcher.children(), 30, "the launcher's kernel to start")[0]
        learner = {launcher: ("kernel launcher", 100), kernel: ("kernel", 150), other: ("python", 200),
                   server: ("jupyter server", 900)}
        assert stop_largest(learner) == (f"their largest kernel (pid {launcher.pid}) with every process it started, 2 in all", 250)
        assert processes.wait_until_gone([launcher.pid, kernel.pid], 10) == []
        del learner[launcher], learner[kernel]
        assert stop_largest(learner) == (f"their largest process, python (pid {other.pid})", 200)
        assert processes.wait_until_gone([other.pid], 10) == []
        del learner[other]
        assert stop_largest(learner) == ("nothing (only their Jupyter server runs)", 0)
        assert processes.running(server.pid), "a learner's Jupyter server is never stopped"
    finally:
        for process in started:
            process.kill()
            process.wait()
