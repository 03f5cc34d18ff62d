"""What every test gets: a temporary folder and state folders of this run's own, each test's tier, the order of the
test files, and the orphan check of every module (tests/support/processes.py). The test modules share code through
tests/support/ alone."""
import os
import shutil
import subprocess
import sys
import tempfile

# All that this test run, its kernels, tasks and programs put in the temporary folder goes into a folder of its
# own (TMPDIR; pytest-xdist's workers inherit it): removed when every test passed, kept for a look otherwise.
# Without it each run would leave hundreds of files in /tmp (TensorFlow's autograph files of every kernel and task).
RUN_TMPDIR_VARIABLE = "PSLAB_TEST_TMPDIR"
OWNS_RUN_TMPDIR = RUN_TMPDIR_VARIABLE not in os.environ  # the controlling process (or the only one)
if OWNS_RUN_TMPDIR:
    os.environ[RUN_TMPDIR_VARIABLE] = os.environ["TMPDIR"] = tempfile.mkdtemp(prefix="pslab-tests-")
tempfile.tempdir = os.environ[RUN_TMPDIR_VARIABLE]
# Clusters of this test run record themselves in a directory of its own, never in ~/.cache
# (labkit reads the variable when it writes; pytest-xdist's workers inherit it from the controller).
STATE_DIR = os.environ["LABKIT_STATE_DIR"] = tempfile.mkdtemp(prefix="labkit-test-state-")
# The arrays the labs' dataset functions read from files (labkit.data.array_file), likewise.
ARRAY_DIR = os.environ["LABKIT_ARRAY_DIR"] = os.path.join(STATE_DIR, "arrays")

import pytest  # noqa: E402

import labkit  # noqa: E402, F401  (selects Keras 2 before any test imports TensorFlow)
from support import tier_times  # noqa: E402
from support.processes import no_orphan_task_processes  # noqa: E402, F401  (an autouse fixture for every module)

# The heaviest tier first: pytest-xdist (--dist loadfile) hands out the test files in this order, so the many short
# unit files even out the workers' ends. pyproject.toml's --no-loadscope-reorder keeps it: by default pytest-xdist
# reorders the files by their number of tests, which put the notebooks' five-test modules last.
FIRST_TO_LAST = ("hub", "notebook", "browser", "root", "cluster", "unit")


def pytest_configure(config):
    tier_times.register(config)


def pytest_itemcollected(item):
    """Mark each test with its tier (before -m selects)."""
    try:
        its_tier = tier_times.tier(marker.name for marker in item.iter_markers())
    except ValueError as error:
        raise pytest.UsageError(f"{item.nodeid}: {error}") from None
    item.add_marker(its_tier)
    item.user_properties.append(("tier", its_tier))  # support/tier_times.py sums each tier's seconds


@pytest.hookimpl(trylast=True)  # after -m and -k deselected
def pytest_collection_modifyitems(config, items):
    """Order the files by their heaviest tier; each file's tests keep their order."""
    heaviest = {}
    for item in items:
        rank = FIRST_TO_LAST.index(dict(item.user_properties)["tier"])
        heaviest[item.path] = min(heaviest.get(item.path, rank), rank)
    items.sort(key=lambda item: (heaviest[item.path], str(item.path)))


def pytest_unconfigure(config):
    shutil.rmtree(STATE_DIR, ignore_errors=True)


@pytest.hookimpl(trylast=True)  # after pytest's own tmp_path clean-up
def pytest_sessionfinish(session, exitstatus):
    """Remove the run's temporary folder when every test passed; otherwise say where it is."""
    if not OWNS_RUN_TMPDIR:
        return
    run_tmpdir = os.environ[RUN_TMPDIR_VARIABLE]
    if exitstatus == pytest.ExitCode.OK:
        shutil.rmtree(run_tmpdir, ignore_errors=True)
    else:
        session.config.get_terminal_writer().line(f"the test run's temporary files are kept in {run_tmpdir}")


@pytest.fixture
def sleeper(tmp_path):
    """A real, idle child process (killed at the end)."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path)
    yield process
    process.kill()
    process.wait()
