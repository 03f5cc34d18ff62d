"""Notebook 07 (fault tolerance) at its smoke parameters, as on macOS (no `ss`, no PSS): every cell runs and
asserts, a learner sees every figure and no unexplained red, and it records the results it declares
(tests/support/smoke.py)."""
from support.smoke import SmokeNotebook


class TestSmokeRun(SmokeNotebook):
    notebook = "07_fault_tolerance.ipynb"
