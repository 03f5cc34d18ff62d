"""Notebook 09 (from a laptop to a cluster) at its smoke parameters, as on macOS (no `ss`, no PSS): every cell runs
and asserts, a learner sees every figure and no unexplained red, and it records the results it declares
(tests/support/smoke.py)."""
from support.smoke import SmokeNotebook


class TestSmokeRun(SmokeNotebook):
    notebook = "09_laptop_to_cluster.ipynb"
