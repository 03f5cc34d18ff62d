"""Notebook 11 (embedding tables on parameter servers) at its smoke parameters, with `ss`, as on Linux: every cell
runs and asserts (memory lines checked on unfitted points, all-reduce refused past the budget, bytes following the
distinct ids, the hot server cooled, the recommender beating popularity), a learner sees every figure and no
unexplained red, and it records the results and verdicts it declares (tests/support/smoke.py)."""
import pytest

from labkit.tools import results
from support.smoke import RESULTS_DIR, SmokeNotebook


class TestSmokeRun(SmokeNotebook):
    notebook = "11_embedding_tables.ipynb"
    keeps_ss = True  # bytes_follow_distinct_ids, spreading_cooled_the_hot_server and more_servers_fewer_bytes count socket bytes

    @pytest.mark.notebook
    def test_both_verdicts_are_recorded_as_wins(self, executed):
        executed.to_the_end()
        recorded = results.load(RESULTS_DIR / "11_embedding_tables")
        verdicts = {found["name"]: found for found in recorded["verdicts"]}
        assert set(verdicts) == {"recommender_vs_popularity_mse", "spread_vs_row_ranges_hottest_share"}
        assert all(found["verdict"] == "wins" and found["comparisons"] == 2 for found in verdicts.values()), verdicts
        assert recorded["hot_ps_share_before"] > 0.6 > 0.4 > recorded["hot_ps_share_after"], recorded
