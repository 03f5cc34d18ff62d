"""Every check of labkit.checks.allreduce rejects a wrong result (and accepts the right one).

Real objects throughout: real processes, checkpoints written by TensorFlow, matplotlib axes; only the
numbers fed in are chosen to be wrong.
"""
import pytest

import labkit  # noqa: F401  (Keras 2 before TensorFlow)
from labkit import checks


def test_10_a_strategy_short_of_the_target_is_named():
    checks.both_reached({"PS": 0.9, "all-reduce": 0.88}, 0.85)
    with pytest.raises(AssertionError, match="all-reduce"):
        checks.both_reached({"PS": 0.9, "all-reduce": 0.8}, 0.85)


def test_10_the_slowed_worker_bounds_sync_but_not_async():
    limit = checks.lockstep_limit(2, 64, 100)  # 2 x 64 samples per 0.1 s
    assert limit == 1280
    checks.sync_waited(1200, 2, 64, 100)
    with pytest.raises(AssertionError, match="really slowed"):
        checks.sync_waited(3000, 2, 64, 100)
    checks.async_did_not_wait(3000, 2, 64, 100)
    with pytest.raises(AssertionError, match="wait for the slow one"):
        checks.async_did_not_wait(1200, 2, 64, 100)


def test_10_bytes_far_from_the_payload_are_refused():
    checks.link_bytes_near(1.1e6, 1e6, "PS")
    for wrong in (0.5e6, 2e6):
        with pytest.raises(AssertionError, match="PS: "):
            checks.link_bytes_near(wrong, 1e6, "PS")


def test_10_a_sparse_step_must_move_rows_not_the_table():
    checks.moved_rows_not_table(70_000, 32_768, 64_000_000)
    with pytest.raises(AssertionError, match="dense table"):
        checks.moved_rows_not_table(64_000_000, 32_768, 64_000_000)
    with pytest.raises(AssertionError, match="touched rows"):
        checks.moved_rows_not_table(1_000, 32_768, 64_000_000)


def test_10_the_table_must_be_sharded_on_ps_and_replicated_under_all_reduce():
    checks.sharded_over_ps({"ps:0": 64_000_008, "ps:1": 64_000_000}, 2)
    with pytest.raises(AssertionError, match="spread over 2"):
        checks.sharded_over_ps({"ps:0": 128_000_008}, 2)
    with pytest.raises(AssertionError, match="outside the parameter servers"):
        checks.sharded_over_ps({"ps:0": 8, "worker:0": 128_000_000}, 2)
    checks.replicated([128_000_000, 128_000_000], 64_000_000)
    with pytest.raises(AssertionError, match="less than the table"):
        checks.replicated([128_000_000, 0], 64_000_000)


def test_10_a_winner_is_named_only_outside_the_seeds_spread():
    seconds = {"parameter servers": [3.9, 4.1, 4.0], "all-reduce": [2.8, 2.9, 3.0]}
    checks.winner_outside_spread("all-reduce", seconds)
    with pytest.raises(AssertionError, match="every seed of all-reduce did better"):
        checks.winner_outside_spread(None, seconds)
    with pytest.raises(AssertionError, match="every seed of all-reduce did better"):
        checks.winner_outside_spread("parameter servers", seconds)
    overlapping = {"parameter servers": [3.9, 4.1, 2.9], "all-reduce": [2.8, 3.0, 3.0]}
    checks.winner_outside_spread(None, overlapping)
    with pytest.raises(AssertionError, match="ranges overlap"):
        checks.winner_outside_spread("all-reduce", overlapping)
    speeds = {"parameter servers": [4500, 4600, 4400], "all-reduce": [7600, 7700, 7500]}
    checks.winner_outside_spread("all-reduce", speeds, higher_is_better=True)
    with pytest.raises(AssertionError, match="every seed of all-reduce"):
        checks.winner_outside_spread("parameter servers", speeds, higher_is_better=True)


def test_10_a_spread_needs_three_seeds_per_side():
    with pytest.raises(AssertionError, match="at least 3 seeds"):
        checks.winner_outside_spread("all-reduce", {"parameter servers": [3.9, 4.1], "all-reduce": [2.8, 2.9, 3.0]})
