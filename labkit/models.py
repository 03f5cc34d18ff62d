"""Models for the labs, built with tf.keras (Keras 2 via tf_keras, see labkit/__init__)."""
import labkit  # noqa: F401  (Keras 2 must be selected before TensorFlow loads)
import tensorflow as tf


def mnist_mlp(hidden_units=128, learning_rate=1e-3, steps_per_execution=1):
    """A small compiled MLP for MNIST vectors; build it under ``strategy.scope()`` for PS training.

    ``steps_per_execution`` packs that many training steps into each function the
    coordinator schedules on a worker, so per-step dispatch overhead is paid once per pack.
    """
    model = tf.keras.Sequential([
        tf.keras.Input(shape=(784,)),
        tf.keras.layers.Dense(hidden_units, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    model.compile(
        optimizer=tf.keras.optimizers.legacy.Adam(learning_rate),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        steps_per_execution=steps_per_execution,
    )
    return model
