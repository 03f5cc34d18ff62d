"""Shared test fixtures. Every test must leave no labkit task process behind (see support.py)."""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Clusters of this test run record themselves in a directory of its own, never in ~/.cache
# (labkit reads the variable when it writes; pytest-xdist's workers inherit it from the controller).
STATE_DIR = os.environ["LABKIT_STATE_DIR"] = tempfile.mkdtemp(prefix="labkit-test-state-")
# The arrays the labs' dataset functions read from files (labkit.data.array_file), likewise.
ARRAY_DIR = os.environ["LABKIT_ARRAY_DIR"] = os.path.join(STATE_DIR, "arrays")

import pytest  # noqa: E402
from _pytest.mark.expression import Expression  # noqa: E402  (what -m uses)

import labkit  # noqa: E402, F401  (selects Keras 2 before any test imports TensorFlow)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import like_macos  # noqa: E402
import executed_notebooks  # noqa: E402
from executed_notebooks import pytest_runtest_teardown  # noqa: E402, F401  (saves what nbval ran to runs/smoke/)
from smoke_notebooks import SMOKE_DIR, prepare as prepare_smoke_notebooks  # noqa: E402
from support import no_orphan_task_processes  # noqa: E402, F401  (an autouse fixture for every module)
import tier_times  # noqa: E402

# The slowest test files (test-seconds in `make test`, from a fresh-clone run), started first, so that
# the two workers end together (`make test` keeps this order: --no-loadscope-reorder).
LONGEST_FIRST = ["test_exercises.py", "07_fault_tolerance.ipynb", "test_grade.py", "06_stale_gradients.ipynb",
                 "05_gradient_compression.ipynb", "03_custom_training_loop.ipynb", "02_strategy_and_mnist.ipynb",
                 "10_ps_vs_allreduce.ipynb", "test_cli.py", "04_mini_transformer_lm.ipynb",
                 "08_performance_analysis.ipynb", "test_allreduce.py", "09_laptop_to_cluster.ipynb",
                 "test_bootstrap.py", "test_train.py", "test_browser.py", "test_sweep.py", "test_cluster.py",
                 "test_multihost.py"]

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


def selects_tier(config, tier):
    """Whether ``-m`` (if given) can select a test marked only ``tier``."""
    expression = config.option.markexpr
    return not expression or Expression.compile(expression).evaluate(lambda name, **_: name == tier)


def collects(config, directory):
    """Whether this pytest call's paths (its arguments, else testpaths) reach into ``directory``."""
    arguments = config.args or config.getini("testpaths")
    for argument in arguments:
        path = (config.invocation_params.dir / argument.split("::")[0]).resolve()
        if path == directory or directory in path.parents or path in directory.parents:
            return not any(directory == Path(ignored).resolve() for ignored in config.getoption("ignore") or [])
    return False


def pytest_configure(config):
    """Write the smoke copies of the notebooks into tests/smoke/, where nbval collects them, but only
    when this call collects them (``pytest tests/test_data.py`` or ``-m unit`` does not).

    Under pytest-xdist only the controlling process writes them, before its workers collect.
    """
    tier_times.register(config)
    config.runs_smoke_notebooks = collects(config, SMOKE_DIR) and selects_tier(config, "notebook")
    if config.runs_smoke_notebooks and "PYTEST_XDIST_WORKER" not in os.environ:
        prepare_smoke_notebooks()


def pytest_ignore_collect(collection_path, config):
    """Leave stale smoke copies alone when this call did not write fresh ones."""
    if collection_path == SMOKE_DIR and not config.runs_smoke_notebooks:
        return True
    return None


def pytest_itemcollected(item):
    """Mark each test with its tier: a smoke notebook's cells are notebook tests, unmarked tests unit tests."""
    if item.path.parent == SMOKE_DIR:
        item.add_marker(pytest.mark.notebook)
    elif not any(item.get_closest_marker(tier) for tier in TIERS_BEYOND_UNIT):
        item.add_marker(pytest.mark.unit)


def pytest_collection_modifyitems(config, items):
    """The longest files first, the tests that read executed notebooks last. `make test` runs those
    readers in a second pytest call (-m reads), after every notebook ran: under pytest-xdist a reader
    would otherwise wait for a notebook still queued on the other worker."""
    def order(item):
        name = item.path.name
        return (item.get_closest_marker("reads") is not None,
                LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST))

    items.sort(key=order)  # stable: a file's tests keep their order
    # `make test`'s second call collects only the files that write the marker out (the Makefile's READERS).
    reader_files = {item.path for item in items if item.get_closest_marker("reads")}
    unfound = sorted(path.name for path in reader_files if "mark.reads" not in path.read_text())
    if unfound:
        raise pytest.UsageError(f"{', '.join(unfound)}: write `pytest.mark.reads` out in a reader's file; "
                                "the Makefile's second call collects only the files that say it")
    executed_notebooks.SCHEDULED.update(item.path.name for item in items if item.path.parent == SMOKE_DIR)


def pytest_unconfigure(config):
    shutil.rmtree(STATE_DIR, ignore_errors=True)


@pytest.fixture
def sleeper(tmp_path):
    """A real, idle child process (killed at the end)."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path)
    yield process
    process.kill()
    process.wait()

