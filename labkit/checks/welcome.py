"""Checks of notebook 00 (welcome)."""

from labkit.checks.core import require


def keras_2(keras_version):
    """tf.keras is Keras 2 (tf_keras), which parameter-server training needs."""
    require(keras_version.startswith("2"),
        f"tf.keras is Keras {keras_version}, but parameter-server training needs Keras 2. "
        "Restart the kernel (Kernel > Restart Kernel), then run the setup cell first: "
        "`import labkit` must come before anything imports TensorFlow.")
