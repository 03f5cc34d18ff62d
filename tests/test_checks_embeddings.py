"""Every check of labkit.checks.embeddings rejects a wrong result (and accepts the right one)."""
import numpy as np
import pytest
import tensorflow as tf

from labkit import checks, embeddings, verdict


def test_11_a_lookup_that_returns_other_rows_is_refused():
    shards = [tf.Variable(tf.random.stateless_normal([size, 3], [0, index]))
              for index, size in enumerate(embeddings.shard_sizes(9, 3))]
    ids = tf.constant([8, 0, 4], tf.int64)
    expected = tf.nn.embedding_lookup(shards, ids)
    checks.lookup_matches(embeddings.lookup(shards, ids), expected)
    off_by_one = tf.nn.embedding_lookup(shards, tf.minimum(ids + 1, 8))
    with pytest.raises(AssertionError, match="other rows than tf.nn.embedding_lookup"):
        checks.lookup_matches(off_by_one, expected)
    with pytest.raises(AssertionError, match="shape"):
        checks.lookup_matches(expected[:2], expected)


def test_11_a_spread_that_merges_rows_or_leaves_the_table_is_refused():
    checks.spread_is_a_permutation(embeddings.spread, 1_000)
    with pytest.raises(AssertionError, match="not a permutation: 500 of 1,000 rows"):
        checks.spread_is_a_permutation(lambda ids, rows: (ids * 2) % rows, 1_000)  # 2 divides 1,000
    with pytest.raises(AssertionError, match="outside the table"):
        checks.spread_is_a_permutation(lambda ids, rows: ids * 7, 1_000)
    with pytest.raises(AssertionError, match="one row per id"):
        checks.spread_is_a_permutation(lambda ids, rows: ids[: rows // 2], 1_000)


def test_11_a_line_that_misses_its_unfitted_point_is_refused():
    line = embeddings.MemoryLine.fit([1, 2, 3], [110, 120, 130])
    checks.line_predicts(line, 4, 145, "worker")
    with pytest.raises(AssertionError, match="predicts 140 MB at 4 rows, but 200 MB were measured"):
        checks.line_predicts(line, 4, 200, "worker")


def lines(ps=50.0, allreduce=200.0):
    return {"parameter server": embeddings.MemoryLine(160, ps, 1), "worker, parameter servers": embeddings.MemoryLine(180, 15, 1),
            "all-reduce worker": embeddings.MemoryLine(480, allreduce, 3)}


def test_11_tables_must_grow_the_servers_by_their_share_and_an_all_reduce_worker_by_all_of_it():
    checks.held_where_expected(lines(), 128, 3)
    checks.held_where_expected(lines(ps=31.7), 128, 3)  # a run's slope under its 42.7 MB share: PSS and reuse
    with pytest.raises(AssertionError, match="less than half its share"):
        checks.held_where_expected(lines(ps=10), 128, 3)
    with pytest.raises(AssertionError, match="every all-reduce worker holds the whole table"):
        checks.held_where_expected(lines(allreduce=40), 128, 3)


def test_11_a_worker_of_the_parameter_servers_must_hold_no_rows():
    checks.workers_hold_no_rows(15, 250)
    with pytest.raises(AssertionError, match="should hold no rows"):
        checks.workers_hold_no_rows(200, 250)


def test_11_all_reduce_is_refused_exactly_when_over_the_budget():
    checks.allreduce_refused(True, 1_200, 833)
    checks.allreduce_refused(False, 700, 833)
    with pytest.raises(AssertionError, match="yet not refused"):
        checks.allreduce_refused(False, 1_200, 833)
    with pytest.raises(AssertionError, match="refused although"):
        checks.allreduce_refused(True, 700, 833)


def test_11_a_task_over_the_budget_is_named():
    checks.within_budget({"ps:0": 510, "worker:0": 210}, 833)
    with pytest.raises(AssertionError, match="'ps:1': 900"):
        checks.within_budget({"ps:0": 510, "ps:1": 900}, 833)


def paired_record(errors, control=1.27):
    return verdict.paired("recommender_vs_popularity_mse", errors, [control] * len(errors), measure="MSE",
                          higher_is_better=False, comparisons=2).record()


def test_11_the_recommender_must_win_and_close_the_named_share_of_the_gap():
    checks.beats_popularity(paired_record([0.86, 0.87, 0.85]), [0.40, 0.39, 0.41], 0.2)
    with pytest.raises(AssertionError, match="did not beat popularity by a verdict every seed allows .cannot tell."):
        checks.beats_popularity(paired_record([0.86, 1.4, 0.85]), [0.40, -0.1, 0.41], 0.2)
    with pytest.raises(AssertionError, match="closed only 12%"):
        checks.beats_popularity(paired_record([0.86, 0.87, 0.85]), [0.40, 0.12, 0.41], 0.2)


def test_11_bytes_that_follow_the_table_or_the_lookups_are_refused():
    checks.bytes_follow_distinct_ids(1.0, 3.9, 3.93)
    with pytest.raises(AssertionError, match="a table four times larger moved 4.00x"):
        checks.bytes_follow_distinct_ids(4.0, 3.9, 3.93)  # a lookup that reads whole shards
    with pytest.raises(AssertionError, match="four times the ids moved 2.00x"):
        checks.bytes_follow_distinct_ids(1.0, 2.0, 3.93)


def test_11_bytes_below_the_rows_or_far_above_them_are_refused():
    checks.bytes_near_prediction(288_700, 277_000)
    with pytest.raises(AssertionError, match="outside 1x to 1.5x"):
        checks.bytes_near_prediction(200_000, 277_000)
    with pytest.raises(AssertionError, match="outside 1x to 1.5x"):
        checks.bytes_near_prediction(600_000, 277_000)  # every lookup sent, duplicates too


def interleaved_record(after, before):
    return verdict.interleaved("spread_vs_row_ranges_hottest_share", after, before, measure="share",
                               higher_is_better=False, comparisons=2).record()


def test_11_spreading_must_win_and_bring_the_busiest_server_near_an_even_share():
    checks.spreading_cooled_the_hot_server(interleaved_record([0.34, 0.33, 0.34], [0.88, 0.87, 0.88]), 0.88, 0.34, 3)
    with pytest.raises(AssertionError, match="did not lower the busiest server's share"):
        checks.spreading_cooled_the_hot_server(interleaved_record([0.34, 0.9, 0.34], [0.88, 0.87, 0.88]), 0.88, 0.53, 3)
    with pytest.raises(AssertionError, match="still carried 60%"):
        checks.spreading_cooled_the_hot_server(interleaved_record([0.6, 0.6, 0.61], [0.88, 0.87, 0.88]), 0.88, 0.6, 3)


def test_11_more_servers_must_each_carry_less():
    checks.more_servers_fewer_bytes({1: 500_000, 2: 255_000, 3: 172_000})
    with pytest.raises(AssertionError, match="did not fall with every server added"):
        checks.more_servers_fewer_bytes({1: 500_000, 2: 255_000, 3: 300_000})
    with pytest.raises(AssertionError, match="still carried 90%"):
        checks.more_servers_fewer_bytes({1: 500_000, 2: 470_000, 3: 450_000})


def test_ex6_the_busiest_share_over_the_bound_is_named():
    checks.hot_share_within({"ps:0": 0.34, "ps:1": 0.33, "ps:2": 0.33}, 0.45)
    with pytest.raises(AssertionError, match="ps:1 still carried 85%"):
        checks.hot_share_within({"ps:0": 0.07, "ps:1": 0.85, "ps:2": 0.08}, 0.45)
