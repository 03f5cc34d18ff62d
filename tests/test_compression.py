"""Compressors: exact payload bytes, round trips, unbiasedness and QSGD's variance bound, contraction,
error feedback (also under a changing learning rate); comparing runs over seeds (spread, standard
error); and the compressed pull path on a real cluster keeps each worker's replica exact. The checks
of notebook 05 and exercise 2 are tested in test_checks_compression.py."""
import math

import numpy as np
import pytest
import tensorflow as tf

import labkit
from labkit import checks, compression
from labkit.data import load_mnist

from support.gradients import GRADIENT_SHAPE as SHAPE, gradient  # noqa: F401  (a fixture)

FIXED_SIZE = [compression.Compressor(), compression.TopK(0.05), compression.RandomK(0.1), compression.Int8(),
              compression.QSGD(1), compression.QSGD(2), compression.QSGD(4, bucket_size=128),
              compression.ScaledSign()]


@pytest.mark.parametrize("compressor", FIXED_SIZE, ids=str)
def test_payload_bytes_are_exactly_what_the_compressor_announces(compressor, gradient):
    assert compression.payload_bytes(compressor.compress(gradient)) == compressor.bytes_per_step(SHAPE)


def test_payload_sizes_per_value():
    n = math.prod(SHAPE)
    assert compression.Compressor().bytes_per_step(SHAPE) == 4 * n
    assert compression.TopK(0.01).bytes_per_step(SHAPE) == 8 * 10      # float32 value + int32 position
    assert compression.Int8().bytes_per_step(SHAPE) == n + 4            # int8 code per value + one scale
    assert compression.ScaledSign().bytes_per_step(SHAPE) == n // 8 + 4  # one bit per value + one scale
    # QSGD: ceil(log2(2s+1)) bits per value (sign and level), one float32 norm per bucket of 512
    for levels, bits in ((1, 2), (2, 3), (4, 4)):
        assert compression.QSGD(levels).bytes_per_step(SHAPE) == math.ceil(n * bits / 8) + 4 * 2


@pytest.mark.parametrize("bits", range(1, 9))
def test_packed_bits_unpack_to_the_same_codes(bits):
    codes = tf.random.stateless_uniform([37], seed=[bits, 0], maxval=2 ** bits, dtype=tf.int32)
    packed = compression.pack_bits(codes, bits)
    assert packed.dtype == tf.uint8 and packed.shape[0] == math.ceil(37 * bits / 8)
    np.testing.assert_array_equal(compression.unpack_bits(packed, bits, 37).numpy(), codes.numpy())


def test_threshold_keeps_exactly_the_entries_above_its_fraction_of_the_max(gradient):
    compressor = compression.Threshold(0.5)
    payload = compressor.compress(gradient)
    magnitude = np.abs(gradient.numpy())
    kept = magnitude >= 0.5 * magnitude.max()
    assert compression.payload_bytes(payload) == 8 * kept.sum()
    np.testing.assert_array_equal(compressor.decompress(payload, SHAPE).numpy(), np.where(kept, gradient, 0))


def test_top_k_keeps_the_largest_entries_unchanged_and_contracts(gradient):
    compressor = compression.TopK(0.05)
    dense = compressor.decompress(compressor.compress(gradient), SHAPE).numpy()
    kept = dense != 0
    assert kept.sum() == 50
    np.testing.assert_array_equal(dense[kept], gradient.numpy()[kept])
    assert np.abs(gradient.numpy()[~kept]).max() <= np.abs(dense[kept]).min()
    checks.contracts(gradient, dense, kept.sum())


def test_top_k_ratio_can_change_per_call_for_warm_up(gradient):
    payload = compression.TopK(0.01).compress(gradient, ratio=tf.constant(0.25))
    assert payload["values"].shape[0] == 250


def test_warm_up_ratio_falls_exponentially_from_a_quarter_to_the_target():
    ratios = [float(compression.warmup_ratio(step, 0.001, 100)) for step in (0, 50, 100, 500)]
    np.testing.assert_allclose(ratios, [0.25, math.sqrt(0.25 * 0.001), 0.001, 0.001], rtol=1e-5)


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


def round_trips(compressor, gradient, draws=1000):
    round_trip = tf.function(lambda: compressor.decompress(compressor.compress(gradient), gradient.shape))
    return np.stack([round_trip().numpy() for _ in range(draws)])


# The largest standard deviation one round trip can have, per entry of the gradient g.
STOCHASTIC = [
    (compression.QSGD(levels=4, bucket_size=100),  # half a level of the bucket's norm
     lambda g: np.repeat(np.linalg.norm(g.reshape(-1, 100), axis=1), 100).reshape(g.shape) / 4 / 2),
    (compression.RandomK(0.2), lambda g: np.abs(g) * 2),  # |g|·sqrt(n/k − 1)
]


@pytest.mark.parametrize("compressor, max_std", STOCHASTIC, ids=[str(c) for c, _ in STOCHASTIC])
def test_stochastic_compressors_are_unbiased(compressor, max_std, gradient):
    draws = round_trips(compressor, gradient)
    bias = np.abs(draws.mean(axis=0) - gradient.numpy())
    assert np.all(bias <= 5 * max_std(gradient.numpy()) / math.sqrt(len(draws)) + 1e-6)


@pytest.mark.parametrize("levels", [1, 2, 4])
def test_qsgd_variance_is_within_the_papers_bound(levels, gradient):
    compressor = compression.QSGD(levels, bucket_size=256)
    draws = round_trips(compressor, gradient, draws=300)
    variance = compression.relative_variance(draws, gradient.numpy())
    checks.within_variance_bound(variance, compressor.variance_bound(gradient.shape.num_elements()))
    assert variance > 0.1 * compressor.variance_bound(1000), "a quantiser this coarse must be noisy"


def test_qsgd_error_is_below_one_level_of_its_bucket(gradient):
    compressor = compression.QSGD(levels=16, bucket_size=1000)
    error = np.abs(compressor.decompress(compressor.compress(gradient), SHAPE).numpy() - gradient.numpy())
    assert error.max() <= float(tf.norm(gradient)) / 16 + 1e-6


@pytest.mark.parametrize("compressor", [compression.TopK(0.01), compression.ScaledSign(), compression.Int8()],
                         ids=str)
def test_error_feedback_loses_nothing_over_steps(compressor):
    """Sum of what was sent + what is still held back == sum of the updates."""
    residual, sent, total = tf.zeros(SHAPE), tf.zeros(SHAPE), tf.zeros(SHAPE)
    for step in range(30):
        update = tf.random.stateless_normal(SHAPE, seed=[step, 7])
        payload, residual = compression.compress_with_feedback(compressor, update, residual)
        sent += compressor.decompress(payload, SHAPE)
        total += update
    np.testing.assert_allclose((sent + residual).numpy(), total.numpy(), atol=1e-4)
    assert float(tf.norm(residual)) > 0, "this compressor should have held something back"


def test_error_feedback_in_update_units_is_exact_when_the_learning_rate_changes():
    """CompressedSGD keeps residuals in update units (lr × g): exact for any schedule. A residual in
    gradient units, rescaled by the current rate when sent, is exact only at a constant rate."""
    gradients = [tf.random.stateless_normal(SHAPE, seed=[step, 3]) for step in range(20)]
    update_units, gradient_units = compression.feedback_books(compression.TopK(0.01), gradients, [0.5] * 20)
    assert update_units < 1e-5 and gradient_units < 1e-5, "at a constant rate both books are exact"
    update_units, gradient_units = compression.feedback_books(compression.TopK(0.01), gradients,
                                                              [0.5] * 10 + [0.05] * 10)
    assert update_units < 1e-5
    assert gradient_units > 0.1


@pytest.mark.parametrize("compressor", [compression.TopK(0.05), compression.Int8(), compression.ScaledSign()],
                         ids=str)
def test_apply_subtracts_the_decompressed_update(compressor, gradient):
    variable = tf.Variable(tf.ones(SHAPE))
    payload = compressor.compress(gradient)
    compressor.apply(variable, payload)
    np.testing.assert_allclose(variable.numpy(), 1 - compressor.decompress(payload, SHAPE).numpy(), rtol=1e-6)


@pytest.mark.parametrize("make, message", [
    (lambda: compression.TopK(0), "ratio must be in \\(0, 1\\]"),
    (lambda: compression.RandomK(1.5), "ratio must be in \\(0, 1\\]"),
    (lambda: compression.Threshold(0), "fraction must be in \\(0, 1\\]"),
    (lambda: compression.QSGD(levels=300), "levels must be 1..127"),
    (lambda: compression.QSGD(bucket_size=0), "bucket_size must be at least 1"),
    (lambda: compression.CompressedSGD([], compression.Int8(), compression.Push(warmup_steps=10)), "ramps a TopK's ratio"),
    (lambda: compression.Push(momentum_correction=True), "needs a momentum"),
    (lambda: compression.Push(momentum=0.9, factor_masking=True), "needs momentum_correction=True"),
    (lambda: compression.Schedule(num_steps=10), "of two closures at least"),
    (lambda: compression.Schedule(num_steps=105), "must be a multiple of steps_per_closure"),
    (lambda: compression.Schedule(num_steps=40, steps_per_closure=30), "must be a multiple of steps_per_closure"),
    (lambda: compression.Schedule(steps_per_closure=0), "steps_per_closure must be at least 1"),
])
def test_bad_settings_are_refused_with_the_allowed_range(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("push", [compression.Push(0.5), compression.Push(0.5, error_feedback=True, momentum=0.9),
                                  compression.dgc(0.5, warmup_steps=0)], ids=["plain", "naive", "dgc"])
def test_applied_norms_add_up_how_far_each_step_moved_the_parameters(push):
    variable = tf.Variable(tf.ones(SHAPE))
    optimizer = compression.CompressedSGD([variable], compression.TopK(0.05), push)
    moved = 0.0
    for step in range(6):
        before = variable.numpy()
        optimizer.apply_gradients([(tf.random.stateless_normal(SHAPE, seed=[step, 5]), variable)])
        moved += np.linalg.norm(variable.numpy() - before)
    assert float(optimizer.applied_norms.numpy()) == pytest.approx(moved, rel=1e-5)


def test_a_setting_is_named_by_its_compressors_unless_named():
    both_ways = compression.Setting(compressor=compression.TopK(0.01), pull=compression.TopK(0.02),
                                    push=compression.Push(error_feedback=True))
    assert both_ways.title == "push top-k 0.01 +EF, pull top-k 0.02"
    assert compression.Setting().title == "push none, pull dense"
    assert compression.Setting("uncompressed").title == "uncompressed"


# ----- the pull path on a real cluster ---------------------------------------------------------------
@pytest.mark.cluster
def test_compressed_pulls_keep_each_worker_replica_equal_to_what_the_ps_sent_it():
    """After training with top-k pulls, every worker's replica is exactly seen[worker] on the PS, and
    the pulled payload bytes are the announced top-k bytes."""
    data = load_mnist()
    with labkit.LocalCluster(num_workers=2, num_ps=1, name="test-compression") as cluster:
        strategy = cluster.strategy()
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        pull = compression.TopK(0.01)
        with strategy.scope():
            model = compression.models.mnist_mlp()
            optimizer = compression.CompressedSGD(model.trainable_variables, compression.TopK(0.01),
                                                  compression.Push(0.1, error_feedback=True))
            pulls = compression.CompressedPulls(strategy, model.trainable_variables, pull)
        train_steps = compression.make_pulling_train_steps(strategy, model, optimizer, pulls, steps_per_closure=5)
        batches = compression.train.per_worker_iterator(
            coordinator, compression.train.mnist_dataset_fn(data, 64, seed=0, shards=2))
        for _ in range(8):
            coordinator.schedule(train_steps, args=(batches,))
        coordinator.join()
        for replica, seen, variable in zip(pulls.replicas, pulls.seen, model.trainable_variables):
            copies = replica.read_all()
            for worker, copy in enumerate(copies):
                np.testing.assert_array_equal(copy.numpy(), seen.numpy()[worker])
            assert not np.array_equal(copies[0].numpy(), copies[1].numpy()), "each worker has its own replica"
            assert np.abs(variable.numpy() - seen.numpy()[0]).max() > 0, "top-k pulls leave a remainder"
        announced = sum(pull.bytes_per_step(tuple(v.shape)) for v in model.trainable_variables)
        assert int(pulls.pulled_bytes.numpy()) == 40 * announced
        del model, optimizer, pulls, train_steps, batches, coordinator, strategy


def jumping_steps(rate):
    """Steps as notebook 05 measured top-k alone's: about 0.37·rate below a rate of 0.2, then a jump of 5×."""
    return 0.37 * rate * (5 if rate > 0.2 else 1)


def probing(steps_of_rate):
    """A trial for rate_matched whose run's mean step is ``steps_of_rate(its learning rate)``; it keeps each rate."""
    from types import SimpleNamespace
    probed = []

    def trial(setting):
        probed.append(setting.push.learning_rate)
        return SimpleNamespace(applied_step=steps_of_rate(setting.push.learning_rate))
    return trial, probed


START = compression.Setting("top-k alone", compression.TopK(0.002), push=compression.Push(0.1, momentum=0.9))


@pytest.mark.parametrize("power", [0.45, 1.0, 1.3], ids=["residual-carried", "linear", "unstable"])
def test_rate_matched_lands_its_steps_in_the_window_over_the_target(power):
    """Steps that grow as rate^power (the powers measured on notebook 05's runs), from a rate ten times off: the
    probes reach a rate whose step is 1.1 to 1.6 times the target, and change nothing else of the setting."""
    trial, probed = probing(lambda rate: 0.2 * rate ** power)
    matched, run = compression.rate_matched(START, 0.2, trial)
    assert probed[0] == 0.1 and len(probed) <= 3 and matched.push.learning_rate == probed[-1]
    assert 0.22 <= run.applied_step <= 0.32
    assert matched.push.momentum == 0.9 and matched.compressor is START.compressor and matched.name == "top-k alone"


def test_rate_matched_bisects_where_the_step_jumps():
    """A window that falls in the jump (steps 0.074, then 0.37 at a rate of 0.2): the probes close in on the jump
    and the rate just over it is kept, whose steps are the smallest at least as large as the target."""
    trial, probed = probing(jumping_steps)
    matched, run = compression.rate_matched(START, 0.2, trial)
    assert 0.2 < matched.push.learning_rate < 0.3 and run.applied_step == jumping_steps(matched.push.learning_rate)
    assert min(rate for rate in probed if rate > 0.2) == matched.push.learning_rate


def test_rate_matched_says_when_its_probes_ran_out():
    with pytest.raises(ValueError, match="top-k alone: no learning rate in 2 probes gave steps of at least 0.22 "
                                         "\\(the largest: 0.01\\)"):
        compression.rate_matched(START, 0.2, probing(lambda rate: 0.01)[0], probes=2)
