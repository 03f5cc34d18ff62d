"""This test run's processes: its mark on each, the task processes among them, the orphan check of every module.

Every process the run starts inherits the mark; tests/conftest.py gives every test module the orphan check.

Import it as ``support.processes``, never as ``tests.support.processes``: a second import would run this file
again and give the run a second mark, and the orphan check would then look for the wrong one.
"""
import os
import signal
import uuid

import psutil
import pytest

from labkit.runtime import processes

if __name__ != "support.processes":
    raise ImportError(f"import this module as `support.processes`, not `{__name__}`: a second copy would give "
                      "the test run a second LABKIT_TEST_RUN mark and blind the orphan check.")

# Inherited by every process this test run starts (kernels, CLIs, task servers), so the
# orphan check counts this run's task processes only, not those of another run (a pytest
# run started by a test, say, gets its own mark).
RUN_MARK = ("LABKIT_TEST_RUN", uuid.uuid4().hex)
os.environ[RUN_MARK[0]] = RUN_MARK[1]
ORPHAN_MESSAGE = "task processes outlived the test that started them"
ORPHAN_GRACE_SECONDS = 15.0  # how long a module's task processes may take to exit after it


def processes_running(marker):
    """Live processes started by this test run whose command line has an argument ending in ``marker``."""
    def named(process):
        try:
            return any(part.endswith(marker) for part in process.cmdline())
        except psutil.Error:
            return False

    return [process for process in processes.carrying(RUN_MARK[0], lambda value: value == RUN_MARK[1])
            if named(process)]


def task_processes():
    """Live `python -m labkit.runtime.server` and `python -m labkit.allreduce` (all-reduce worker) processes
    started by this test run."""
    return processes_running(processes.SERVER_MODULE) + processes_running("labkit.allreduce")


def default_ctrl_c():
    """``preexec_fn`` for a child that a test stops with Ctrl-C (SIGINT): whatever this test process
    inherited (a shell starts background jobs with SIGINT ignored), the child gets the default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])


def signal_state(pid):
    """The SigBlk/SigIgn/SigCgt lines of a process, to explain a Ctrl-C that did nothing."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return " ".join(line.strip() for line in status if line.startswith(("SigBlk", "SigIgn", "SigCgt")))
    except OSError as error:
        return str(error)


@pytest.fixture(autouse=True, scope="module")
def no_orphan_task_processes():
    """Fail a test module after which a task process it started is still running."""
    before = {p.pid for p in task_processes()}
    yield
    started = [p.pid for p in task_processes() if p.pid not in before]
    assert processes.wait_until_gone(started, ORPHAN_GRACE_SECONDS) == [], f"{ORPHAN_MESSAGE}: pids {started}"
