"""Keras ``model.fit`` on a parameter-server cluster (Keras 2 / tf_keras).

With ParameterServerStrategy, ``model.fit`` needs a ``DatasetCreator`` (each
worker builds its own input pipeline from ``dataset_fn``), a dataset that
repeats, and ``steps_per_epoch``. Batch-level callbacks are not supported, so
progress is reported once per epoch.
"""
import labkit  # noqa: F401  (Keras 2 must be selected before TensorFlow loads)
import numpy as np
import tensorflow as tf
from tqdm.auto import tqdm


def make_dataset_fn(x, y, global_batch_size, seed=0):
    """A ``dataset_fn(input_context)`` that gives each worker its own shard, shuffled and repeated."""
    def dataset_fn(input_context):
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
        dataset = tf.data.Dataset.from_tensor_slices((x, y))
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        return dataset.shuffle(10_000, seed=seed).repeat().batch(batch_size).prefetch(2)
    return dataset_fn


class EpochProgress(tf.keras.callbacks.Callback):
    """A tqdm bar advanced once per epoch, showing the epoch's loss and accuracy."""

    def __init__(self, epochs):
        super().__init__()
        self.bar = tqdm(total=epochs, desc="epochs", unit="epoch")

    def on_epoch_end(self, epoch, logs=None):
        self.bar.set_postfix({name: f"{value:.3f}" for name, value in (logs or {}).items()})
        self.bar.update(1)

    def on_train_end(self, logs=None):
        self.bar.close()


def fit(model, x, y, epochs, steps_per_epoch, global_batch_size=64, seed=0):
    """Train ``model`` (built under the strategy's scope) on arrays ``x, y``; return the History."""
    creator = tf.keras.utils.experimental.DatasetCreator(make_dataset_fn(x, y, global_batch_size, seed))
    return model.fit(creator, epochs=epochs, steps_per_epoch=steps_per_epoch,
                     callbacks=[EpochProgress(epochs)], verbose=0)


def accuracy(model, x, y):
    """Fraction of ``x`` classified as ``y``, computed on this process with the PS's current variables."""
    predictions = np.argmax(model(x).numpy(), axis=1)
    return float(np.mean(predictions == y))
