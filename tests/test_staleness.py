"""Staleness: the version counter, the delay buffer, the learning-rate rules, and the
end-to-end case on a real cluster where plain async SGD suffers and alpha/tau recovers."""
import numpy as np
import pytest
import tensorflow as tf

import labkit
from labkit import staleness
from labkit.data import load_mnist


def sgd(rule=staleness.Constant(), delay=0, learning_rate=1.0):
    variable = tf.Variable([0.0])
    return variable, staleness.StalenessSGD([variable], rule, learning_rate, delay)


def test_tau_is_the_number_of_updates_applied_between_read_and_apply():
    variable, optimizer = sgd()
    early_read = optimizer.read_version()
    for _ in range(3):  # three other updates land first
        assert int(optimizer.apply([tf.constant([1.0])], optimizer.read_version())) == 0
    assert int(optimizer.apply([tf.constant([1.0])], early_read)) == 3
    assert int(optimizer.version.numpy()) == 4
    assert optimizer.staleness_counts()[0, :4].tolist() == [3, 0, 0, 1]


def test_the_delay_buffer_applies_each_gradient_exactly_delay_steps_late():
    variable, optimizer = sgd(delay=4)
    taus, applied = [], []
    for step in range(10):
        before = float(variable.numpy()[0])
        taus.append(int(optimizer.apply([tf.constant([float(step + 1)])], optimizer.read_version())))
        applied.append(before - float(variable.numpy()[0]))
    assert applied == [0, 0, 0, 0, 1, 2, 3, 4, 5, 6]  # gradient of step s lands at step s + 4
    assert taus[4:] == [0, 1, 2, 3, 4, 4]              # computed at version max(0, s - 4)
    assert int(optimizer.version.numpy()) == 6


@pytest.mark.parametrize("rule, taus, scales", [
    (staleness.Constant(), [0, 1, 16], [1, 1, 1]),
    (staleness.InverseTau(), [0, 1, 4, 16], [1, 1, 0.25, 1 / 16]),
    (staleness.InverseOnePlusTau(), [0, 1, 15], [1, 0.5, 1 / 16]),
    (staleness.Bounded(4), [0, 4, 5, 30], [1, 1, 0, 0]),
], ids=lambda value: getattr(value, "name", None))
def test_rules_scale_the_learning_rate_by_staleness(rule, taus, scales):
    np.testing.assert_allclose(rule.scale(tf.constant(taus, tf.int64)).numpy(), scales, rtol=1e-6)


def test_an_update_scaled_by_its_staleness_moves_the_variable_that_much():
    variable, optimizer = sgd(staleness.InverseTau(), learning_rate=0.5)
    stale_read = optimizer.read_version()
    for _ in range(4):
        optimizer.apply([tf.constant([0.0])], optimizer.read_version())
    optimizer.apply([tf.constant([2.0])], stale_read)  # tau = 4: step 0.5 * 2 / 4
    np.testing.assert_allclose(variable.numpy(), [-0.25])


def test_bounded_staleness_rejects_updates_beyond_the_bound_and_counts_them():
    variable, optimizer = sgd(staleness.Bounded(2))
    stale_read = optimizer.read_version()
    for _ in range(3):
        optimizer.apply([tf.constant([1.0])], optimizer.read_version())
    optimizer.apply([tf.constant([100.0])], stale_read)  # tau = 3 > 2: dropped
    np.testing.assert_allclose(variable.numpy(), [-3.0])
    assert int(optimizer.dropped.numpy()) == 1


@pytest.mark.parametrize("make, message", [
    (lambda: staleness.Bounded(-1), "bound must be >= 0"),
    (lambda: sgd(delay=-2), "delay must be >= 0"),
])
def test_bad_settings_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.slow
def test_staleness_aware_rate_recovers_most_of_what_delay_16_costs_plain_async():
    data = load_mnist()
    with labkit.LocalCluster(num_workers=1, num_ps=1, name="test-staleness") as cluster:
        strategy = cluster.strategy()
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)

        def train(rule, delay):
            return staleness.train_mnist(strategy, coordinator, data, 1, rule, learning_rate=0.5,
                                         delay=delay, num_steps=600, evaluate_every=100)
        fresh, stale = train(staleness.Constant(), 0), train(staleness.Constant(), 16)
        aware = train(staleness.InverseTau(), 16)
    print({run.rule + f" delay {run.delay}": run.accuracy for run in (fresh, stale, aware)})
    assert aware.counts[0, 16] == 600 - 2 * 16  # every update after the buffer filled was 16 steps stale
    gap = fresh.final_accuracy - stale.final_accuracy
    assert gap >= 0.05, "plain async should lose at least 5 points at delay 16 and this learning rate"
    assert aware.final_accuracy - stale.final_accuracy >= gap / 2
