"""Shared test fixtures. Every test must leave no labkit task process behind."""
import os
import shutil
import tempfile
import time
import uuid

import psutil
import pytest

# Before labkit is imported: clusters of this test run record themselves in a directory of
# its own, never in ~/.cache (kept if this file is imported again, as tests.conftest).
STATE_PREFIX = "labkit-test-state-"
if not os.path.basename(os.environ.get("LABKIT_STATE_DIR", "")).startswith(STATE_PREFIX):
    os.environ["LABKIT_STATE_DIR"] = tempfile.mkdtemp(prefix=STATE_PREFIX)
STATE_DIR = os.environ["LABKIT_STATE_DIR"]

import labkit  # noqa: E402, F401  (selects Keras 2 before any test imports TensorFlow)
from smoke_notebooks import prepare as prepare_smoke_notebooks
from executed_notebooks import pytest_runtest_teardown  # noqa: F401  (saves what nbval ran to runs/smoke/)

# Inherited by every process this test run starts (kernels, CLIs, task servers), so the
# orphan check counts this run's task processes only, not those of another run.
RUN_MARK = ("LABKIT_TEST_RUN", uuid.uuid4().hex)
os.environ[RUN_MARK[0]] = RUN_MARK[1]


def pytest_configure(config):
    """Write the smoke copies of the notebooks into tests/smoke/, where nbval collects them."""
    prepare_smoke_notebooks()


def pytest_unconfigure(config):
    shutil.rmtree(STATE_DIR, ignore_errors=True)


def task_processes():
    """Live `python -m labkit.server` processes started by this test run."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = process.info["cmdline"] or []
        if "labkit.server" not in cmdline or process.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            if process.environ().get(RUN_MARK[0]) == RUN_MARK[1]:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def is_running(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_until_gone(pids, timeout=15.0):
    """Wait for every pid to exit; return the ones still alive after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if is_running(pid)]
        time.sleep(0.1)
    return alive


@pytest.fixture(autouse=True, scope="module")
def no_orphan_task_processes():
    """Fail a test module after which a task process it started is still running."""
    before = {p.pid for p in task_processes()}
    yield
    started = [p.pid for p in task_processes() if p.pid not in before]
    assert wait_until_gone(started) == [], "task processes outlived the test that started them"
