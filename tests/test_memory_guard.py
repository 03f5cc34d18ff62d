"""What the class hub's memory guard stops when a learner is over their limit (tests/test_hub.py sees it stop a real
learner's kernel): real processes, named and sized as ``memory.by_user`` reports a learner's."""
import signal
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


def test_the_guard_stops_at_once_when_the_hub_stops_it_even_if_it_started_with_ctrl_c_ignored():
    """The hub stops its services with SIGINT, then SIGTERM 30 s later. A hub started in the background of a shell
    passes SIGINT on ignored: the guard still stops at once, and the hub need not wait. (Its first line comes once it
    listens for the signal.)"""
    guard = subprocess.Popen([sys.executable, "-m", "labkit.tools.memory_guard", "--group", "nogroup", "--limit", "1G"],
                             stdout=subprocess.PIPE, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert "may use 1.0 GiB" in guard.stdout.readline()
        guard.send_signal(signal.SIGINT)
        assert guard.wait(timeout=10) == 0
    finally:
        guard.kill()
        guard.wait()
