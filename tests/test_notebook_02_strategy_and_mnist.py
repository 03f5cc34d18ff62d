"""Notebook 02 (the strategy and MNIST) at its smoke parameters, as on macOS (no `ss`, no PSS): every cell runs and
asserts, a learner sees every figure and no unexplained red, and it records the results it declares
(tests/support/smoke.py)."""
from support.smoke import SmokeNotebook


class TestSmokeRun(SmokeNotebook):
    notebook = "02_strategy_and_mnist.ipynb"
