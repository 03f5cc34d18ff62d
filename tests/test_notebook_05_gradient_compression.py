"""Notebook 05 (gradient compression) at its smoke parameters, with `ss`, as on Linux: every cell runs and asserts,
a learner sees every figure and no unexplained red, and it records the results it declares
(tests/support/smoke.py)."""
from support.smoke import SmokeNotebook


class TestSmokeRun(SmokeNotebook):
    notebook = "05_gradient_compression.ipynb"
    keeps_ss = True  # its headline, fewer_total_bytes, counts the bytes on the sockets
