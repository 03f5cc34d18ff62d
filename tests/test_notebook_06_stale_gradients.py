"""Notebook 06 (stale gradients) at its smoke parameters, as on macOS (no `ss`, no PSS): every cell runs and
asserts, a learner sees every figure and no unexplained red, it records the results it declares
(tests/support/smoke.py); and JupyterLab shows its executed copy with its figures and no red."""
import pytest

from support.browser import browser_page, lab, look_at_figures_and_stderr, needs_chromium  # noqa: F401  (fixtures)
from support.smoke import SmokeNotebook


class TestSmokeRun(SmokeNotebook):
    notebook = "06_stale_gradients.ipynb"

    @pytest.mark.browser
    @needs_chromium
    def test_jupyterlab_shows_its_figures_and_no_red(self, executed, lab, browser_page):
        look_at_figures_and_stderr(browser_page, lab, executed.path)
