"""Every check of labkit.checks.allreduce rejects a wrong result (and accepts the right one).

Real objects throughout: real processes, checkpoints written by TensorFlow, matplotlib axes; only the
numbers fed in are chosen to be wrong.
"""
import pytest

from labkit import checks


def test_10_the_slowed_worker_bounds_sync_but_not_async():
    limit = checks.lockstep_limit_samples_per_s(2, 64, 100)  # 2 x 64 samples per 0.1 s
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


def test_10_all_reduce_copies_must_end_identical():
    checks.copies_identical(["ab12", "ab12"])
    with pytest.raises(AssertionError, match="2 different digests among 2 workers"):
        checks.copies_identical(["ab12", "cd34"])


def test_10_updates_per_batch_must_match_the_strategy():
    checks.updates_per_batch_match(1.0, 1.0, "parameter servers")
    checks.updates_per_batch_match(0.5, 0.5, "all-reduce")
    with pytest.raises(AssertionError, match="all-reduce: 1.000 optimizer updates per batch trained, expected 0.500"):
        checks.updates_per_batch_match(1.0, 0.5, "all-reduce")  # one update per worker's batch: not synchronous
    with pytest.raises(AssertionError, match="parameter servers: 0.500"):
        checks.updates_per_batch_match(0.5, 1.0, "parameter servers")
