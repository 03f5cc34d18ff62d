"""The input pipelines every lab uses: each worker's own stream of batches, shard files, a slowed worker.

Under ParameterServerStrategy a ``dataset_fn`` is traced ONCE, on the coordinator,
and that one graph runs on every worker. A fixed shuffle seed in it therefore gives
every worker the identical batch sequence. ``shuffled_batches`` folds the worker's
index into the seed, so each worker streams its own order, reproducible from one seed.
The MNIST pipelines read their arrays from files (``labkit.data.ArrayFile``), never as
constants of the traced function.
"""
import hashlib
import os
import shutil
from pathlib import Path

import numpy as np

from labkit.data import token_windows

SEEDS_PER_WORKER = 1_000  # worker_seed gives distinct seeds to up to this many workers


def current_worker_index(input_context=None):
    """The index of the worker building the dataset; 0 in a local, eager run.

    Under ParameterServerStrategy, inside a ``dataset_fn`` given to ``create_per_worker_dataset``
    (or to ``model.fit``), it is a value each worker fills in when it runs the traced function;
    the input context there is always pipeline 0 of 1. Under MultiWorkerMirroredStrategy each
    worker calls the ``dataset_fn`` itself, eagerly, and its ``input_context.input_pipeline_id``
    is its index.
    """
    import tensorflow as tf

    pipeline = input_context.input_pipeline_id if input_context is not None else 0
    if not tf.inside_function():
        return pipeline
    return tf.distribute.coordinator.experimental_get_current_worker_index() + pipeline


def worker_seed(seed, input_context=None):
    """``seed`` folded with the index of the worker that builds the dataset: ``seed * 1000 + index``."""
    import tensorflow as tf

    return tf.constant(seed * SEEDS_PER_WORKER, tf.int64) + tf.cast(current_worker_index(input_context), tf.int64)


def shuffled_batches(arrays, batch_size, seed=0, input_context=None, shards=None):
    """A repeating dataset of shuffled batches of ``arrays`` (a tuple sliced along the first axis).

    Each worker and epoch gets its own stateless permutation seeded with ``worker_seed(seed)``:
    its own order, the same in every run. (``Dataset.shuffle`` cannot take a tensor seed once
    a global seed is set, e.g. by ``tf.keras.utils.set_random_seed``.) With ``shards=N`` worker ``w``
    permutes only its own share, the examples w, w + N, w + 2N, ... No shuffle buffer is filled: a new
    stream gives its first batch at once, whatever the size of the arrays. A batch's positions are
    shuffled in one op (``index_shuffle_each``), not one op per example: the same examples in the
    same order, for far less of the workers' CPU.
    """
    import tensorflow as tf

    size = int(arrays[0].shape[0])
    seed_of_this_worker = worker_seed(seed, input_context)
    first, step = (0, 1) if shards is None else (tf.cast(current_worker_index(input_context), tf.int64), shards)
    own_size = (size - 1 - first) // step + 1  # how many examples this worker's share holds

    def batch(positions):  # position p of the stream: epoch p // own_size, place p % own_size in it
        shuffled = index_shuffle_each(positions % own_size, seed_of_this_worker, positions // own_size, own_size - 1)
        index = first + step * shuffled
        return tuple(tf.gather(array, index) for array in arrays)

    return tf.data.Dataset.range(2 ** 62).batch(batch_size).map(batch).prefetch(2)


# What tf.random.experimental.index_shuffle puts before a seed of 2 numbers: its op takes 3.
INDEX_SHUFFLE_SEED_PAD = 498_247_692


def index_shuffle_each(places, seed, epochs, max_index):
    """``tf.random.experimental.index_shuffle(places[i], [seed, epochs[i]], max_index)`` for every ``i``, in one op.

    That function cannot take one seed per place: it pads an [n, 2] seed along the wrong axis
    (TensorFlow 2.21). So this calls its op with the seeds padded as the function pads one seed.
    """
    import tensorflow as tf

    places = tf.cast(places, tf.int64)

    def column(value):
        return tf.fill(tf.shape(places), tf.cast(value, tf.int64))
    seeds = tf.stack([column(INDEX_SHUFFLE_SEED_PAD), column(seed), tf.cast(epochs, tf.int64)], axis=1)
    return tf.raw_ops.RandomIndexShuffle(index=places, seed=seeds, max_index=tf.cast(max_index, tf.int64), rounds=4)


def mnist_dataset_fn(data, batch_size, seed=0, ship_arrays=False, shards=None):
    """A ``dataset_fn`` of MNIST training batches for ``create_per_worker_dataset`` or ``DatasetCreator``.

    Each worker streams the whole training set in its own order (``shuffled_batches``); with
    ``shards=N`` worker ``w`` takes every N-th example from the ``w``-th, so no two workers share one.
    Each worker reads the training arrays from files (``MNIST.training_files``); with
    ``ship_arrays=True`` they are captured in the traced function instead and sent to every
    task (for workers that share no disk with the coordinator).
    ``DatasetCreator`` passes an input context; under ParameterServerStrategy it is
    always pipeline 0 of 1 (the function is traced once, on the coordinator), so it
    cannot tell workers apart: the worker index in the seed does that. Under
    MultiWorkerMirroredStrategy its pipeline id is the worker's index (``current_worker_index``).
    """
    files = None if ship_arrays else data.training_files()

    def dataset_fn(input_context=None):
        arrays = (data.x_train, data.y_train) if ship_arrays else tuple(file.read() for file in files)
        return shuffled_batches(arrays, batch_size, seed, input_context, shards)
    return dataset_fn


def power_law_ids(rows, ids_per_example, batch_size, seed=0, input_context=None):
    """Repeating batches of (item ids, label) as a recommendation model sees them: a few items are
    very popular, most are rare.

    Each id is ``floor(rows ** u) - 1`` with ``u`` uniform in [0, 1): a power law, id ``k`` drawn
    with probability about ``1 / ((k + 1) ln rows)``. The label, whether the example's first id is
    even, can only be learned row by row. Each worker draws its own stream (``worker_seed``).
    """
    import tensorflow as tf

    seed_of_this_worker = worker_seed(seed, input_context)

    def batch(step):
        uniform = tf.random.stateless_uniform([batch_size, ids_per_example], tf.stack([seed_of_this_worker, step]))
        ids = tf.cast(tf.floor(tf.pow(float(rows), uniform)), tf.int64) - 1
        ids = tf.clip_by_value(ids, 0, rows - 1)  # float rounding can reach rows itself
        return ids, ids[:, 0] % 2

    return tf.data.Dataset.range(2 ** 62).map(batch).prefetch(2)


def ratings_dataset_fn(ratings, batch_size, seed=0):
    """A ``dataset_fn`` of ({"user": ids, "item": ids}, rating) training batches of ``ratings``
    (a ``labkit.ratings.Ratings``), each worker in its own order (``shuffled_batches``), read from files."""
    files = ratings.training_files()

    def dataset_fn(input_context=None):
        users, items, values = (file.read() for file in files)
        batches = shuffled_batches((users, items, values), batch_size, seed, input_context)
        return batches.map(lambda user, item, rating: ({"user": user, "item": item}, rating))
    return dataset_fn


def next_token_windows(ids, sequence_length, batch_size, seed=0):
    """Shuffled, repeating batches of (input, target) windows: the target is the input shifted by one."""
    windows = token_windows(ids, sequence_length)
    return shuffled_batches((windows[:, :-1], windows[:, 1:]), batch_size, seed)


def write_shards(arrays, directory, num_shards):
    """Write (features, labels) as ``num_shards`` TFRecord files in ``directory``; return their paths.

    Do it once, into a directory every worker can read (a shared disk, NFS, a bucket):
    afterwards only file names cross the network. Example ``i`` goes to shard ``i % num_shards``.
    """
    import tensorflow as tf

    features, labels = (np.asarray(array) for array in arrays)
    if num_shards < 1 or num_shards > len(labels):
        raise ValueError(f"num_shards must be between 1 and the number of examples ({len(labels)}), "
                         f"got {num_shards}.")
    Path(directory).mkdir(parents=True, exist_ok=True)
    paths = [str(Path(directory) / f"shard-{index:05d}-of-{num_shards:05d}.tfrecord") for index in range(num_shards)]
    for index, path in enumerate(paths):
        with tf.io.TFRecordWriter(path) as writer:
            for feature, label in zip(features[index::num_shards], labels[index::num_shards]):
                writer.write(tf.train.Example(features=tf.train.Features(feature={
                    "features": tf.train.Feature(float_list=tf.train.FloatList(value=feature.ravel())),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
                })).SerializeToString())
    return paths


def shared_shards(arrays, directory, num_shards):
    """``write_shards`` once into shared storage; return the shard paths, written now or found there.

    They go to a subdirectory of ``directory`` named by the arrays' content and ``num_shards``,
    written under a temporary name and renamed when complete: a program started again on the
    same volume (a restarted chief) finds every shard or none, and writes them only once.
    """
    features, labels = (np.ascontiguousarray(array) for array in arrays)
    digest = hashlib.blake2b(features.data, digest_size=12)
    digest.update(labels.data)
    target = Path(directory) / f"{digest.hexdigest()}-{num_shards}-shards"
    if not target.exists():
        partial = target.with_name(f".{target.name}.{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)  # left by an earlier run that died while writing
        write_shards((features, labels), partial, num_shards)
        try:
            partial.rename(target)
        except OSError:  # another process completed the same shards first
            shutil.rmtree(partial, ignore_errors=True)
    return sorted(str(path) for path in target.glob("shard-*.tfrecord"))


def files_dataset_fn(paths, num_workers, batch_size, feature_shape=(784,), seed=0, shuffle_buffer=10_000):
    """A ``dataset_fn`` where worker ``w`` reads shard files ``w, w + num_workers, ...`` of ``paths``.

    Only the file names are in the traced function; each worker opens its own files,
    so its examples are disjoint from every other worker's.
    """
    if len(paths) < num_workers:
        raise ValueError(f"{len(paths)} shard files for {num_workers} workers: some workers would read "
                         f"nothing. Write at least num_workers shards (write_shards(..., num_shards={num_workers})).")

    def dataset_fn(input_context=None):
        import tensorflow as tf

        schema = {"features": tf.io.FixedLenFeature(feature_shape, tf.float32),
                  "label": tf.io.FixedLenFeature([], tf.int64)}

        def parse(records):
            parsed = tf.io.parse_example(records, schema)
            return parsed["features"], parsed["label"]

        own_files = tf.data.Dataset.from_tensor_slices(list(paths)).shard(num_workers, current_worker_index())
        records = own_files.interleave(tf.data.TFRecordDataset, cycle_length=1)
        return (records.shuffle(shuffle_buffer, seed=worker_seed(seed)).repeat().batch(batch_size)
                .map(parse).prefetch(2))
    return dataset_fn


def slowed(dataset, milliseconds):
    """The dataset with a pause before each element, like a slow disk or network.

    Prefetching is turned off, or the pauses would hide behind the training steps.
    """
    import tensorflow as tf

    specs = tf.nest.flatten(dataset.element_spec)
    variant = tf.raw_ops.SleepDataset(input_dataset=tf.data.experimental.to_variant(dataset),
                                      sleep_microseconds=int(milliseconds * 1000),
                                      output_types=[spec.dtype for spec in specs],
                                      output_shapes=[spec.shape for spec in specs])
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    options.autotune.enabled = False
    return tf.data.experimental.from_variant(variant, dataset.element_spec).with_options(options)


def with_slowed_worker(dataset_fn, worker, milliseconds):
    """``dataset_fn`` with worker ``worker`` (an index; None: no worker) ``slowed`` by ``milliseconds`` per element."""
    if worker is None:
        return dataset_fn

    def dataset_fn_with_a_slow_worker(input_context=None):
        dataset = dataset_fn(input_context)
        return slowed(dataset, milliseconds) if current_worker_index(input_context) == worker else dataset
    return dataset_fn_with_a_slow_worker
