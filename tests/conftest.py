"""Shared test fixtures, each test's tier and xdist group, and the order of the groups. Every test must
leave no labkit task process behind (see support.py)."""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# All that this test run, its kernels, tasks and programs put in the temporary folder goes into a folder of its
# own (TMPDIR; pytest-xdist's workers inherit it): removed when every test passed, kept for a look otherwise.
# Without it each run would leave hundreds of files in /tmp: nbval kills its kernels, so their own clean-up
# (of TensorFlow's autograph files, the kernel launcher's folder) never runs.
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import like_macos  # noqa: E402
import executed_notebooks  # noqa: E402
from smoke_notebooks import SMOKE_DIR, SMOKE_PARAMETERS, prepare as prepare_smoke_notebooks  # noqa: E402
from support import no_orphan_task_processes  # noqa: E402, F401  (an autouse fixture for every module)
import tier_times  # noqa: E402

# The smoke notebooks and the exercise solutions run as on macOS: `ss` hidden from PATH and PSS hidden
# (scripts/like_macos.py), each once. These four keep `ss`, for checks of the bytes on the sockets
# against theory that nothing else runs on real traffic: 04's lookup_sends_rows, 05's fewer_total_bytes
# (its headline), 08's dense_traffic_is_model_size (and test_bench.py reads its measured bytes), 10's
# link_bytes_near and moved_rows_not_table. (03's byte checks run on real traffic in test_train.py.)
KEEP_SS = {"04_mini_transformer_lm.ipynb", "05_gradient_compression.ipynb", "08_performance_analysis.ipynb",
           "10_ps_vs_allreduce.ipynb"}
LIKE_MACOS = {name: value for name, value in like_macos.environment(tempfile.mkdtemp(dir=STATE_DIR)).items()
              if name in ("PATH", like_macos.HIDE_PSS)}
AS_STARTED = {name: os.environ.get(name) for name in LIKE_MACOS}


def runs_like_macos(item):
    """A smoke notebook's cell (except KEEP_SS) or the exercise notebooks' run."""
    if item.path.parent == SMOKE_DIR:
        return item.path.name not in KEEP_SS
    return item.path.name == "test_exercises.py" and item.get_closest_marker("notebook") is not None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before each test sets up (nbval starts a smoke notebook's kernel there), the environment its
    kernels and task processes inherit: as on macOS, or as this pytest call started."""
    for name, value in (LIKE_MACOS if runs_like_macos(item) else AS_STARTED).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# A test without one of these tier markers is a unit test: no TensorFlow process, no kernel, no root.
TIERS_BEYOND_UNIT = tier_times.TIERS[1:]


def collects(config, directory):
    """Whether this pytest call's paths (its arguments, else testpaths) reach into ``directory``."""
    arguments = config.args or config.getini("testpaths")
    for argument in arguments:
        path = (config.invocation_params.dir / argument.split("::")[0]).resolve()
        if path == directory or directory in path.parents or path in directory.parents:
            return not any(directory == Path(ignored).resolve() for ignored in config.getoption("ignore") or [])
    return False


def pytest_configure(config):
    """Write the smoke copies of the notebooks into tests/smoke/, where nbval collects them, when this call's
    paths reach them (``pytest tests/test_data.py`` writes none; ``-m unit`` writes them and deselects them).

    Under pytest-xdist only the controlling process writes them, before its workers collect.
    """
    tier_times.register(config)
    config.pluginmanager.register(executed_notebooks, "executed_notebooks")
    if collects(config, SMOKE_DIR) and "PYTEST_XDIST_WORKER" not in os.environ:
        prepare_smoke_notebooks()


def group(item):
    """The tests that run in one process, one after the other: a test file's, or a smoke notebook's cells
    and the tests marked ``reads(NOTEBOOK)`` (they read the executed copy that process saved)."""
    reads = list(item.iter_markers("reads"))
    if not reads:
        return item.path.name
    if len(reads) > 1 or len(reads[0].args) != 1 or reads[0].args[0] not in SMOKE_PARAMETERS:
        raise pytest.UsageError(f"{item.nodeid}: a test reads one smoke notebook, named as reads('NAME.ipynb'), one "
                                f"of {', '.join(sorted(SMOKE_PARAMETERS))}; split a test that reads more")
    return reads[0].args[0]


def pytest_itemcollected(item):
    """Mark each test with its tier: a smoke notebook's cells are notebook tests, unmarked tests unit tests."""
    if item.path.parent == SMOKE_DIR:
        item.add_marker(pytest.mark.notebook)
    elif not any(item.get_closest_marker(tier) for tier in TIERS_BEYOND_UNIT):
        item.add_marker(pytest.mark.unit)
    item.user_properties.append(("group", group(item)))  # tests/tier_times.py adds up each group's seconds


# Each group's test seconds by tier in the last `make measurements` (tests/tier_times.py records them under
# `make test`; scripts/measurements.py writes the file). A group not measured yet counts as the median group.
GROUP_SECONDS = json.loads((Path(__file__).parent / "group_seconds.json").read_text())["seconds"]


def seconds(name, tiers):
    """How long group ``name``'s tests of ``tiers`` took when last measured."""
    if name not in GROUP_SECONDS:
        return statistics.median([sum(recorded.values()) for recorded in GROUP_SECONDS.values()] or [1.0])
    return sum(GROUP_SECONDS[name].get(tier, 0.0) for tier in tiers)


def shares(groups, workers):
    """``groups`` ({name: seconds}, longest first) split between ``workers``, so that they end together:
    each group to the worker with the fewest seconds so far."""
    loads = [(0.0, worker, []) for worker in range(workers)]
    for name, duration in groups.items():
        load, worker, names = min(loads)
        loads[worker] = (load + duration, worker, names + [name])
    return [names for _, _, names in loads]


@pytest.hookimpl(trylast=True)  # after -m and -k deselected
def pytest_collection_modifyitems(config, items):
    """Order the tests: the groups longest first (counting the tiers selected: under ``-m unit`` a group's unit
    tests alone); in a notebook's group its cells first, then the tests that read its executed copy. Under
    pytest-xdist (pyproject's --dist each: every worker collects every test) each worker keeps its share of
    the groups, so that a group runs whole in one process."""
    tiers = {}
    for item in items:
        tiers.setdefault(group(item), set()).add(tier_times.tier(item.keywords))
    durations = {name: seconds(name, its_tiers) for name, its_tiers in tiers.items()}
    items.sort(key=lambda item: (-durations[group(item)], group(item), item.path.name != group(item)))
    worker = getattr(config, "workerinput", None)
    if worker:
        ordered = {name: durations[name] for name in dict.fromkeys(group(item) for item in items)}
        mine = set(shares(ordered, worker["workercount"])[int(worker["workerid"].removeprefix("gw"))])
        config.hook.pytest_deselected(items=[item for item in items if group(item) not in mine])
        items[:] = [item for item in items if group(item) in mine]
    executed_notebooks.SCHEDULED.update(item.path.name for item in items if item.path.parent == SMOKE_DIR)


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

