"""Keras ``model.fit`` on a parameter-server cluster (Keras 2 / tf_keras).

With ParameterServerStrategy, ``model.fit`` needs a dataset that repeats and
``steps_per_epoch``. It accepts a ``DatasetCreator``, ``distribute_datasets_from_function``,
a ``tf.data.Dataset`` or arrays; with a ``dataset_fn`` (the first two) each worker
builds its own pipeline and can fold its index into the shuffle seed. Batch-level
callbacks are not supported, so progress is printed once per epoch (a text line: see
``labkit.progress``).
"""
import tensorflow as tf

from labkit.data import array_file
from labkit.pipelines import shuffled_batches
from labkit.progress import ProgressLines


class EpochProgress(tf.keras.callbacks.Callback):
    """A printed line per epoch, with the epoch's loss and accuracy."""

    def __init__(self, epochs):
        super().__init__()
        self.progress = ProgressLines(epochs, "model.fit", unit="epoch", every_seconds=0)

    def on_epoch_end(self, epoch, logs=None):
        self.progress.line(epoch + 1, **{name: f"{value:.3f}" for name, value in (logs or {}).items()})


def fit(model, x, y, epochs, steps_per_epoch, batch_size=64, seed=0):
    """Train ``model`` (built under the strategy's scope) on arrays ``x, y``; return what model.fit returns (a Keras History).

    ``batch_size`` is per worker and step. Each worker shuffles with its own seed
    (``labkit.pipelines.shuffled_batches``): the input context that ``DatasetCreator``
    passes is pipeline 0 of 1 on every worker under ParameterServerStrategy, so
    ``dataset.shard(context.num_input_pipelines, ...)`` would not split anything.
    The workers read ``x`` and ``y`` from files (``labkit.data.array_file``), not from the traced function.
    """
    files = (array_file(x), array_file(y))
    creator = tf.keras.utils.experimental.DatasetCreator(
        lambda input_context: shuffled_batches(tuple(file.read() for file in files), batch_size, seed))
    return model.fit(creator, epochs=epochs, steps_per_epoch=steps_per_epoch,
                     callbacks=[EpochProgress(epochs)], verbose=0)

