"""labkit.embeddings: where a row lives, what a lookup moves, the spreading, memory lines and the budget, and a
parameter server's load measured on a real cluster."""
import math

import numpy as np
import pytest
import tensorflow as tf

import labkit
from labkit import embeddings, train


def test_row_ranges_split_as_tensorflows_partitioners_split_a_variable():
    assert embeddings.shard_sizes(10, 3) == [4, 3, 3]
    assert embeddings.shard_sizes(9, 3) == [3, 3, 3]
    shard, row = embeddings.shard_of([0, 3, 4, 6, 7, 9], [4, 3, 3])
    assert shard.numpy().tolist() == [0, 0, 1, 1, 2, 2] and row.numpy().tolist() == [0, 3, 0, 2, 0, 2]
    with pytest.raises(ValueError, match="cannot split 2 rows into 3 shards"):
        embeddings.shard_sizes(2, 3)


def test_the_lookup_returns_tensorflows_rows_in_the_shape_of_the_ids():
    shards = [tf.Variable(tf.random.stateless_normal([size, 5], [1, index]))
              for index, size in enumerate(embeddings.shard_sizes(11, 3))]
    ids = tf.constant([[10, 0, 10, 4], [3, 3, 7, 1]], tf.int64)
    rows = embeddings.lookup(shards, ids)
    assert rows.shape == (2, 4, 5)
    np.testing.assert_allclose(rows, tf.nn.embedding_lookup(shards, ids))


def test_the_lookups_gradient_is_the_distinct_rows_each_once():
    shards = [tf.Variable(tf.ones([size, 2])) for size in embeddings.shard_sizes(6, 2)]
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(embeddings.lookup(shards, tf.constant([5, 0, 5, 5], tf.int64)))
    gradients = tape.gradient(loss, shards)
    assert all(isinstance(gradient, tf.IndexedSlices) for gradient in gradients)
    assert sorted(gradients[0].indices.numpy().tolist()) == [0] and sorted(gradients[1].indices.numpy().tolist()) == [2]
    np.testing.assert_allclose(gradients[1].values, [[3.0, 3.0]])  # id 5 thrice: one row, the three summed


def test_spread_is_a_permutation_that_scatters_the_popular_ids():
    for rows in (7, 10_007, 3_000_000):
        if rows <= 10_007:
            placed = embeddings.spread(tf.range(rows, dtype=tf.int64), rows).numpy()
            assert sorted(placed.tolist()) == list(range(rows))
    sizes = embeddings.shard_sizes(3_000_000, 3)
    before, _ = embeddings.shard_of(np.arange(10), sizes)
    after, _ = embeddings.shard_of(embeddings.spread(np.arange(10), 3_000_000), sizes)
    assert set(before.numpy()) == {0} and set(after.numpy()) == {0, 1, 2}


def test_bytes_per_step_count_each_distinct_id_once_on_its_shard():
    ids = np.array([0, 0, 1, 5, 9, 9, 9])  # distinct: 0, 1 (shard 0), 5 (shard 1), 9 (shard 2)
    per_row = 8 + 2 * 4 * 16
    assert embeddings.bytes_per_step(ids, [4, 3, 3], 16).tolist() == [2 * per_row, per_row, per_row]


def test_zipf_ids_favour_the_first_items_and_exponent_zero_draws_alike():
    skewed = embeddings.draw_items(100_000, 20_000, 1.1, seed=[0, 0]).numpy()
    alike = embeddings.draw_items(100_000, 20_000, 0.0, seed=[0, 0]).numpy()
    assert skewed.min() >= 0 and skewed.max() < 100_000 and alike.max() < 100_000
    assert np.mean(skewed < 1_000) > 0.5 > 0.05 > np.mean(alike < 1_000)
    assert np.array_equal(skewed, embeddings.draw_items(100_000, 20_000, 1.1, seed=[0, 0]).numpy())
    harmonic = embeddings.draw_items(1_000, 5_000, 1.0, seed=[1, 0]).numpy()
    assert 0 <= harmonic.min() and harmonic.max() < 1_000


def test_a_memory_line_is_fitted_on_three_or_more_points_and_says_what_fits():
    line = embeddings.MemoryLine.fit([250_000, 500_000, 750_000], [200, 250, 300])
    assert line.base_mb == pytest.approx(150) and line.mb_per_million_rows == pytest.approx(200)
    assert line.residual_mb == pytest.approx(0, abs=1e-9)
    assert line.predict(1_000_000) == pytest.approx(350)
    assert line.rows_within(550) == 2_000_000 and line.rows_within(100) == 0
    assert embeddings.MemoryLine(100, 0, 0).rows_within(200) == math.inf
    with pytest.raises(ValueError, match="3 or more points"):
        embeddings.MemoryLine.fit([1, 2], [3, 4])


def test_the_budget_shares_what_the_laptop_leaves_and_refuses_a_laptop_too_small():
    assert embeddings.memory_budget_mb(8, 6) == pytest.approx(5000 / 6)
    with pytest.raises(ValueError, match="leaves nothing"):
        embeddings.memory_budget_mb(2, 6)


def test_a_run_over_the_budget_or_the_machines_free_memory_is_refused_before_it_starts():
    embeddings.refuse_over_budget("a run", {"worker:0": 800, "worker:1": 700}, 833, available_mb=4000)
    with pytest.raises(embeddings.MemoryBudgetError, match="1,074 MB in worker:1 .1 of 2 processes over the budget"):
        embeddings.refuse_over_budget("a run", {"worker:0": 800, "worker:1": 1074}, 833, available_mb=4000)
    with pytest.raises(embeddings.MemoryBudgetError, match="1,500 MB in all, more than the 1,000 MB"):
        embeddings.refuse_over_budget("a run", {"worker:0": 800, "worker:1": 700}, 833, available_mb=1000)


def test_the_partitioner_splits_tables_only_and_takes_a_new_count_between_models():
    partitioner = embeddings.TablePartitioner(3)
    assert partitioner(tf.TensorShape([50_000, 16]), tf.float32) == [3, 1]
    assert partitioner(tf.TensorShape([32, 1]), tf.float32) == [1, 1]
    assert partitioner(tf.TensorShape([1]), tf.float32) == [1]
    partitioner.num_shards = 2
    assert partitioner(tf.TensorShape([50_000, 16]), tf.float32) == [2, 1]


def test_a_restart_draws_the_same_weights_for_the_same_seed_and_resets_adagrad():
    model = embeddings.recommender(20, 1_000, 4, spread_ids=embeddings.spread)
    optimizer = tf.keras.optimizers.legacy.Adagrad(embeddings.LEARNING_RATE)
    features = {"user": tf.constant([1, 2], tf.int64), "item": tf.constant([3, 999], tf.int64)}
    with tf.GradientTape() as tape:
        loss = embeddings.mean_squared_error(tf.ones(2), model(features))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    embeddings.restart(model, optimizer, 7)
    first = [variable.numpy().copy() for variable in model.variables]
    assert int(optimizer.iterations.numpy()) == 0
    assert all(np.allclose(slot.numpy(), 0.1) for slot in optimizer.variables()[1:])
    embeddings.restart(model, optimizer, 8)
    assert not np.allclose(first[0], model.variables[0].numpy())
    embeddings.restart(model, optimizer, 7)
    assert all(np.array_equal(a, b.numpy()) for a, b in zip(first, model.variables))


@pytest.mark.cluster
def test_on_a_cluster_row_ranges_heat_one_server_and_spreading_shares_the_bytes():
    """Real servers: with Zipf ids the server of the first range carries most bytes and is asked for most rows, and
    spread shares them out."""
    partitioner = embeddings.TablePartitioner(3)
    with labkit.LocalCluster(num_workers=1, num_ps=3, name="embeddings-test") as cluster:
        coordinator = tf.distribute.coordinator.ClusterCoordinator(cluster.strategy(variable_partitioner=partitioner))
        servers = {task.name: task.pid for task in cluster.tasks if task.type == "ps"}
        load = embeddings.TableLoad(60_000, 1, 8, 512, zipf_exponent=1.1)
        shares, rows = {}, {}
        for name, spread_ids in (("row ranges", None), ("spread", embeddings.spread)):
            built = load.build(coordinator.strategy, spread_ids, steps_per_closure=5)
            measured = embeddings.measure_load(coordinator, built, servers, 20, 5)
            rows[name], shares[name] = measured.rows_per_step, measured.hottest_share
        item_table = built.model.get_layer("item_table").table
        assert [int(shard.shape[0]) for shard in item_table.variables] == embeddings.shard_sizes(60_000, 3)
        assert sorted(built.servers) == sorted(servers)
        del coordinator, built, item_table
    assert shares["row ranges"] > 0.6 and shares["spread"] < 0.45, shares
    busiest = {name: max(counted.values()) / sum(counted.values()) for name, counted in rows.items()}  # rows the steps counted
    assert busiest["row ranges"] > 0.6 and busiest["spread"] < 0.45, busiest
