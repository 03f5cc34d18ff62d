"""Notebook 10 (parameter servers against all-reduce) at its smoke parameters, with `ss`, as on Linux: every cell
runs and asserts, a learner sees every figure and no unexplained red, and it records the results it declares
(tests/support/smoke.py)."""
from support.smoke import SmokeNotebook


class TestSmokeRun(SmokeNotebook):
    notebook = "10_ps_vs_allreduce.ipynb"
    keeps_ss = True  # link_bytes_near and moved_rows_not_table count the bytes on the sockets
