"""Compressors: error bounds, exact payload bytes, unbiasedness, error feedback; and the
end-to-end saving on a real cluster, measured on the PS processes' sockets."""
import math

import numpy as np
import pytest
import tensorflow as tf

import labkit
from labkit import compression, traffic
from labkit.data import load_mnist

SHAPE = (40, 25)
FIXED_SIZE = [compression.Compressor(), compression.TopK(0.05), compression.RandomK(0.1),
              compression.Int8(), compression.QSGD(), compression.ScaledSign()]


@pytest.fixture
def gradient():
    return tf.random.stateless_normal(SHAPE, seed=[1, 2])


@pytest.mark.parametrize("compressor", FIXED_SIZE, ids=str)
def test_payload_bytes_are_exactly_what_the_compressor_announces(compressor, gradient):
    assert compression.payload_bytes(compressor.compress(gradient)) == compressor.bytes_per_step(SHAPE)


def test_payload_sizes_per_value():
    n = math.prod(SHAPE)
    assert compression.Compressor().bytes_per_step(SHAPE) == 4 * n
    assert compression.TopK(0.01).bytes_per_step(SHAPE) == 8 * 10      # float32 value + int32 position
    assert compression.Int8().bytes_per_step(SHAPE) == n + 4            # int8 code per value + one scale
    assert compression.ScaledSign().bytes_per_step(SHAPE) == n // 8 + 4  # one bit per value + one scale


def test_threshold_keeps_exactly_the_entries_above_its_fraction_of_the_max(gradient):
    compressor = compression.Threshold(0.5)
    payload = compressor.compress(gradient)
    magnitude = np.abs(gradient.numpy())
    kept = magnitude >= 0.5 * magnitude.max()
    assert compression.payload_bytes(payload) == 8 * kept.sum()
    np.testing.assert_array_equal(compressor.decompress(payload, SHAPE).numpy(), np.where(kept, gradient, 0))


def test_top_k_keeps_the_largest_entries_unchanged(gradient):
    compressor = compression.TopK(0.05)
    dense = compressor.decompress(compressor.compress(gradient), SHAPE).numpy()
    kept = dense != 0
    assert kept.sum() == 50
    np.testing.assert_array_equal(dense[kept], gradient.numpy()[kept])
    assert np.abs(gradient.numpy()[~kept]).max() <= np.abs(dense[kept]).min()


def test_int8_error_is_at_most_half_a_quantisation_step(gradient):
    compressor = compression.Int8()
    payload = compressor.compress(gradient)
    error = np.abs(compressor.decompress(payload, SHAPE).numpy() - gradient.numpy())
    assert payload["codes"].dtype == tf.int8
    assert error.max() <= float(payload["scale"]) / 2 + 1e-6


def test_scaled_sign_sends_one_bit_per_value_and_keeps_every_sign(gradient):
    compressor = compression.ScaledSign()
    payload = compressor.compress(gradient)
    dense = compressor.decompress(payload, SHAPE).numpy()
    assert payload["signs"].dtype == tf.uint8
    np.testing.assert_array_equal(np.sign(dense), np.where(gradient.numpy() >= 0, 1, -1))
    np.testing.assert_allclose(np.abs(dense), np.abs(gradient.numpy()).mean(), rtol=1e-6)


# The largest standard deviation one round trip can have, per entry of the gradient g.
STOCHASTIC = [
    (compression.QSGD(levels=4), lambda g: np.full(g.shape, np.linalg.norm(g) / 4 / 2)),  # half a level
    (compression.RandomK(0.2), lambda g: np.abs(g) * 2),                                 # |g|·sqrt(n/k − 1)
]


@pytest.mark.parametrize("compressor, max_std", STOCHASTIC, ids=[str(c) for c, _ in STOCHASTIC])
def test_stochastic_compressors_are_unbiased(compressor, max_std, gradient):
    round_trip = tf.function(lambda: compressor.decompress(compressor.compress(gradient), SHAPE))
    draws = np.stack([round_trip().numpy() for _ in range(2000)])
    bias = np.abs(draws.mean(axis=0) - gradient.numpy())
    assert np.all(bias <= 5 * max_std(gradient.numpy()) / math.sqrt(len(draws)) + 1e-6)


def test_qsgd_error_is_below_one_level(gradient):
    compressor = compression.QSGD(levels=16)
    payload = compressor.compress(gradient)
    error = np.abs(compressor.decompress(payload, SHAPE).numpy() - gradient.numpy())
    assert error.max() <= float(tf.norm(gradient)) / 16 + 1e-6


@pytest.mark.parametrize("compressor", [compression.TopK(0.01), compression.ScaledSign(), compression.Int8()],
                         ids=str)
def test_error_feedback_loses_nothing_over_steps(compressor):
    """Sum of what was sent + what is still held back == sum of the gradients."""
    residual, sent, total = tf.zeros(SHAPE), tf.zeros(SHAPE), tf.zeros(SHAPE)
    for step in range(30):
        gradient = tf.random.stateless_normal(SHAPE, seed=[step, 7])
        payload, residual = compression.compress_with_feedback(compressor, gradient, residual)
        sent += compressor.decompress(payload, SHAPE)
        total += gradient
    np.testing.assert_allclose((sent + residual).numpy(), total.numpy(), atol=1e-4)
    assert float(tf.norm(residual)) > 0, "this compressor should have held something back"


@pytest.mark.parametrize("compressor", [compression.TopK(0.05), compression.Int8(), compression.ScaledSign()],
                         ids=str)
def test_apply_subtracts_the_decompressed_update(compressor, gradient):
    variable = tf.Variable(tf.ones(SHAPE))
    payload = compressor.compress(gradient)
    compressor.apply(variable, payload, learning_rate=0.5)
    np.testing.assert_allclose(variable.numpy(), 1 - 0.5 * compressor.decompress(payload, SHAPE).numpy(),
                               rtol=1e-6)


@pytest.mark.parametrize("make, message", [
    (lambda: compression.TopK(0), "ratio must be in \\(0, 1\\]"),
    (lambda: compression.RandomK(1.5), "ratio must be in \\(0, 1\\]"),
    (lambda: compression.Threshold(0), "fraction must be in \\(0, 1\\]"),
    (lambda: compression.QSGD(levels=300), "levels must be 1..127"),
])
def test_bad_settings_are_refused_with_the_allowed_range(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.slow
def test_top_k_with_error_feedback_pushes_50x_fewer_bytes_at_the_same_accuracy():
    data = load_mnist()
    with labkit.LocalCluster(num_workers=2, num_ps=1, name="test-compression") as cluster:
        strategy = cluster.strategy()
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        pids = traffic.ps_pids(cluster)
        dense = compression.train_mnist(strategy, coordinator, data, compression.Compressor(), ps_pids=pids)
        top_k = compression.train_mnist(strategy, coordinator, data, compression.TopK(0.005),
                                        error_feedback=True, ps_pids=pids)
    print(dense, top_k, sep="\n")
    assert top_k.ratio >= 50
    assert top_k.test_accuracy >= dense.test_accuracy - 0.02
    if dense.measured is not None:  # the sockets agree: pushes shrank, pulls did not
        assert dense.measured.received / top_k.measured.received >= 50
        assert top_k.measured.received < 1.5 * top_k.pushed_bytes_per_step + 4096
        assert top_k.measured.sent > 0.9 * dense.measured.sent
