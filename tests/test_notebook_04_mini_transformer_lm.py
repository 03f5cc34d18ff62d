"""Notebook 04 (the mini transformer language model) at its smoke parameters, with `ss`, as on Linux: every cell
runs and asserts, a learner sees every figure and no unexplained red, and it records the results it declares
(tests/support/smoke.py)."""
from support.smoke import SmokeNotebook


class TestSmokeRun(SmokeNotebook):
    notebook = "04_mini_transformer_lm.ipynb"
    keeps_ss = True  # lookup_sends_rows counts the bytes on the sockets
