"""Every check of labkit.checks.allreduce rejects a wrong result (and accepts the right one).

Real objects throughout: real processes, checkpoints written by TensorFlow, matplotlib axes; only the
numbers fed in are chosen to be wrong.
"""
import pytest

from labkit import checks


def test_10_the_slowed_worker_bounds_sync_but_not_async():
    limit = checks.lockstep_limit_samples_per_s(2, 64, 100)  # 2 x 64 samples per 0.1 s
    assert limit == 1280
    # 20 batches per worker, 2 of them ready at the start: 20 batches in the time of 18 pauses
    assert checks.lockstep_bound_samples_per_s(2, 64, 100, 20) == pytest.approx(1280 * 20 / 18)
    checks.sync_waited(1353, 2, 64, 100, 20)  # measured under load: 2 ready batches, 5.7 % over the limit
    with pytest.raises(AssertionError, match="really slowed"):
        checks.sync_waited(1450, 2, 64, 100, 20)
    checks.sync_waited(1290, 2, 64, 100, 100)
    with pytest.raises(AssertionError, match="really slowed"):
        checks.sync_waited(1320, 2, 64, 100, 100)  # over 100 batches 2 ready ones allow only 2 % more
    checks.async_did_not_wait(3000, 2, 64, 100, 20)
    with pytest.raises(AssertionError, match="wait for the slow one"):
        checks.async_did_not_wait(1400, 2, 64, 100, 20)  # above the limit, but 2 ready batches explain it


def test_10_a_slowed_phase_of_no_more_batches_than_a_worker_has_ready_is_refused():
    with pytest.raises(ValueError, match="batches_per_worker must be more than 2.*got 2. Train the slowed phase longer"):
        checks.sync_waited(1000, 2, 64, 100, 2)


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
