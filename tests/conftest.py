"""Shared test fixtures. Every test must leave no labkit task process behind (see support.py)."""
import labkit  # noqa: F401  (selects Keras 2 before any test imports TensorFlow)
from smoke_notebooks import prepare as prepare_smoke_notebooks
from support import no_orphan_task_processes  # noqa: F401  (an autouse fixture for every module)


def pytest_configure(config):
    """Write the smoke copies of the notebooks into tests/smoke/, where nbval collects them."""
    prepare_smoke_notebooks()
