"""Shared test fixtures. Every test must leave no labkit task process behind (see support.py)."""
import os
import shutil
import tempfile

# Before labkit is imported: clusters of this test run record themselves in a directory of
# its own, never in ~/.cache.
STATE_PREFIX = "labkit-test-state-"
if not os.path.basename(os.environ.get("LABKIT_STATE_DIR", "")).startswith(STATE_PREFIX):
    os.environ["LABKIT_STATE_DIR"] = tempfile.mkdtemp(prefix=STATE_PREFIX)
STATE_DIR = os.environ["LABKIT_STATE_DIR"]

import labkit  # noqa: E402, F401  (selects Keras 2 before any test imports TensorFlow)
from executed_notebooks import pytest_runtest_teardown  # noqa: E402, F401  (saves what nbval ran to runs/smoke/)
from smoke_notebooks import prepare as prepare_smoke_notebooks  # noqa: E402
from support import no_orphan_task_processes  # noqa: E402, F401  (an autouse fixture for every module)


def pytest_configure(config):
    """Write the smoke copies of the notebooks into tests/smoke/, where nbval collects them."""
    prepare_smoke_notebooks()


def pytest_unconfigure(config):
    shutil.rmtree(STATE_DIR, ignore_errors=True)
