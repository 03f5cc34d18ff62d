"""Staleness: the version counter (claimed after the update), the delay buffers, the rules and
SSP's bounded wait; runs with the same seeds are paired (the same weights, batches and delays).

Tau measured on real clusters of 1 and 2 workers (checks.measured_staleness) and the accuracy
comparisons (plain async vs the rules at injected delays) are asserted by notebook 06's smoke
run, not trained again here."""
import numpy as np
import pytest
import tensorflow as tf

import labkit
from labkit import checks, staleness
from labkit.data import load_mnist


OPTIMIZER_OPTIONS = ("num_workers", "max_tau", "seed", "steps_scheduled")  # the rest is the Update's


def sgd(rule=staleness.Constant(), delay=0, learning_rate=1.0, **options):
    variable = tf.Variable([0.0])
    update = {name: value for name, value in options.items() if name not in OPTIMIZER_OPTIONS}
    rest = {name: value for name, value in options.items() if name in OPTIMIZER_OPTIONS}
    return variable, staleness.StalenessSGD([variable], staleness.Update(rule, learning_rate, delay, **update), **rest)


def test_tau_is_the_number_of_updates_applied_between_read_and_apply():
    variable, optimizer = sgd()
    early_read = optimizer.begin_step(0)
    for _ in range(3):  # three other updates land first
        assert int(optimizer.apply([tf.constant([1.0])], optimizer.begin_step(0))) == 0
    assert int(optimizer.apply([tf.constant([1.0])], early_read)) == 3
    assert int(optimizer.version.numpy()) == 4
    assert optimizer.staleness_counts()[0, :4].tolist() == [3, 0, 0, 1]


def test_the_version_is_claimed_after_the_update_in_the_graph():
    """The claim (assign_add on the version) must depend on every assign_sub of the update."""
    checks.claims_after_update(lambda variables: staleness.StalenessSGD(variables))


def test_the_delay_buffer_applies_each_gradient_exactly_delay_steps_late():
    variable, optimizer = sgd(delay=4)
    taus, applied = [], []
    for step in range(10):
        before = float(variable.numpy()[0])
        taus.append(int(optimizer.apply([tf.constant([float(step + 1)])], optimizer.begin_step(0))))
        applied.append(before - float(variable.numpy()[0]))
    assert applied == [0, 0, 0, 0, 1, 2, 3, 4, 5, 6]  # gradient of step s lands at step s + 4
    assert taus[4:] == [0, 1, 2, 3, 4, 4]              # computed at version max(0, s - 4)
    assert int(optimizer.version.numpy()) == 6


def test_a_random_delay_varies_around_its_mean_and_applies_every_gradient_once():
    variable, optimizer = sgd(delay=4, random_delay=True)
    for step in range(400):
        optimizer.apply([tf.constant([1.0])], optimizer.begin_step(0))
    taus = optimizer.staleness_counts()[0]
    mean = taus @ np.arange(len(taus)) / taus.sum()
    assert 3.0 < mean < 5.0 and taus[1] > 0 and taus[9:].sum() > 0, f"geometric around 4 expected, got {taus}"
    assert taus.sum() == 400 - 4 == -variable.numpy()[0]  # the 4 still waiting are not applied


@pytest.mark.parametrize("rule, taus, scales", [
    (staleness.Constant(), [0, 1, 16], [1, 1, 1]),
    (staleness.InverseTau(), [0, 1, 4, 16], [1, 1, 0.25, 1 / 16]),
    (staleness.InverseOnePlusTau(), [0, 1, 15], [1, 0.5, 1 / 16]),
    (staleness.StalenessFilter(4), [0, 4, 5, 30], [1, 1, 0, 0]),
], ids=lambda value: getattr(value, "name", None))
def test_rules_scale_the_learning_rate_by_staleness(rule, taus, scales):
    np.testing.assert_allclose(rule.scale(tf.constant(taus, tf.int64)).numpy(), scales, rtol=1e-6)


def test_an_update_scaled_by_its_staleness_moves_the_variable_that_much():
    variable, optimizer = sgd(staleness.InverseTau(), learning_rate=0.5)
    stale_read = optimizer.begin_step(0)
    for _ in range(4):
        optimizer.apply([tf.constant([0.0])], optimizer.begin_step(0))
    optimizer.apply([tf.constant([2.0])], stale_read)  # tau = 4: step 0.5 * 2 / 4
    np.testing.assert_allclose(variable.numpy(), [-0.25])


def test_the_staleness_filter_drops_updates_beyond_its_bound_and_they_claim_no_version():
    variable, optimizer = sgd(staleness.StalenessFilter(2))
    stale_read = optimizer.begin_step(0)
    for _ in range(3):
        optimizer.apply([tf.constant([1.0])], optimizer.begin_step(0))
    optimizer.apply([tf.constant([100.0])], stale_read)  # tau = 3 > 2: dropped
    np.testing.assert_allclose(variable.numpy(), [-3.0])
    assert int(optimizer.dropped.numpy()) == 1
    assert int(optimizer.version.numpy()) == 3, "a dropped update must not advance the version"


def test_dc_asgd_adds_lambda_g_g_times_the_distance_moved_since_the_read():
    variable, optimizer = sgd(staleness.DelayCompensated(0.5), learning_rate=1.0)
    read = optimizer.read_parameters()
    np.testing.assert_allclose(read[0].numpy(), [0.0])
    variable.assign([1.0])  # other updates moved the parameter by +1 since the read
    optimizer.apply([tf.constant([2.0])], optimizer.begin_step(0), 0, read)
    np.testing.assert_allclose(variable.numpy(), [1.0 - (2.0 + 0.5 * 2.0 * 2.0 * 1.0)])


def test_dc_asgd_through_the_delay_buffer_uses_the_parameters_read_with_that_gradient():
    variable, optimizer = sgd(staleness.DelayCompensated(1.0), delay=1)
    optimizer.apply([tf.constant([1.0])], optimizer.begin_step(0), 0, optimizer.read_parameters())  # held back
    variable.assign([2.0])  # other updates moved the parameter from 0 to 2
    optimizer.apply([tf.constant([1.0])], optimizer.begin_step(0), 0, optimizer.read_parameters())
    np.testing.assert_allclose(variable.numpy(), [2.0 - (1.0 + 1.0 * 1.0 * 1.0 * (2.0 - 0.0))])


def test_adaptive_dc_asgd_divides_lambda_by_the_bias_corrected_root_mean_square_of_the_gradient():
    rule = staleness.AdaptiveDelayCompensated(2.0, momentum=0.95)
    variable, optimizer = sgd(rule, learning_rate=1.0)
    for gradient in (2.0, 4.0):
        read = optimizer.read_parameters()
        variable.assign_add([1.0])  # moved by +1 since the read
        before = float(variable.numpy()[0])
        optimizer.apply([tf.constant([gradient])], optimizer.begin_step(0), 0, read)
    mean_square = 0.95 * (0.05 * 2.0 ** 2) + 0.05 * 4.0 ** 2  # m·(1 - m)·2² + (1 - m)·4², from 0
    np.testing.assert_allclose(rule.mean_squares[variable.ref()].numpy(), [mean_square], rtol=1e-6)
    corrected = mean_square / (1 - 0.95 ** 2)  # the mean of 2² and 4², weighted m : 1
    np.testing.assert_allclose(variable.numpy(), [before - (4.0 + 2.0 / np.sqrt(corrected) * 4.0 * 4.0 * 1.0)], rtol=1e-5)


def test_a_restarted_optimizer_runs_as_a_new_one_with_that_seed_through_one_traced_step():
    """Seeds share one optimizer and traced step: restart must leave no trace of the run before."""
    def trajectory(variable, optimizer, step):
        return [float(step(tf.constant([float(i % 3 + 1)]))) for i in range(30)], variable.numpy().tolist()

    def make(seed):
        variable, optimizer = sgd(staleness.AdaptiveDelayCompensated(0.5), delay=4, learning_rate=0.1,
                                  random_delay=True, seed=seed)
        step = tf.function(lambda g: optimizer.apply([g], optimizer.begin_step(0), 0, optimizer.read_parameters()))
        return variable, optimizer, step

    fresh = trajectory(*make(seed=7))
    variable, optimizer, step = make(seed=3)
    trajectory(variable, optimizer, step)
    variable.assign([0.0])
    optimizer.restart(7)
    assert trajectory(variable, optimizer, step) == fresh
    assert step.experimental_get_tracing_count() == 1
    assert optimizer.staleness_counts().sum() == 30 - 4 and int(optimizer.dropped.numpy()) == 0


def test_ssp_makes_a_worker_too_far_ahead_wait_and_gives_up_after_the_timeout():
    variable, optimizer = sgd(num_workers=2, ssp_bound=1, max_wait_ms=40, poll_ms=2)
    for _ in range(2):  # worker 0 finishes 2 steps, worker 1 none: worker 0 is 2 clocks ahead
        optimizer.apply([tf.constant([1.0])], optimizer.begin_step(0), worker=0)
    optimizer.begin_step(1)  # the slowest never waits
    assert float(optimizer.waited.numpy()) == 0.0
    optimizer.begin_step(0)  # 20 polls of 2 ms, then it gives up: at least 40 ms of wall time
    waited = float(optimizer.waited.numpy())
    assert waited >= 0.04 and int(optimizer.timeouts.numpy()) == 1  # wall time: no upper bound under load
    optimizer.apply([tf.constant([1.0])], optimizer.begin_step(1), worker=1)  # worker 1 catches up to 1
    optimizer.begin_step(0)  # 2 - 1 = 1 ahead: within the bound, no wait
    assert float(optimizer.waited.numpy()) == waited and int(optimizer.timeouts.numpy()) == 1
    assert optimizer.clocks.numpy().tolist() == [2, 1]


@pytest.mark.parametrize("steps_scheduled, worker_1_in_a_step, timeouts", [
    (2, False, 0),  # every scheduled step has begun and worker 1 is in none: it runs no more, nobody waits for it
    (3, False, 1),  # one step not begun yet: worker 1 may take it, so worker 0 waits for it (and times out)
    (3, True, 1),   # worker 1 is in a step: it will finish it, so worker 0 waits for it
])
def test_ssp_waits_only_for_a_worker_that_may_still_run_a_step(steps_scheduled, worker_1_in_a_step, timeouts):
    variable, optimizer = sgd(num_workers=2, ssp_bound=0, max_wait_ms=40, steps_scheduled=steps_scheduled)
    if worker_1_in_a_step:
        optimizer.begin_step(1)
    optimizer.apply([tf.constant([1.0])], optimizer.begin_step(0), worker=0)  # worker 0: 1 clock ahead
    optimizer.begin_step(0)
    assert int(optimizer.timeouts.numpy()) == timeouts
    assert int(optimizer.max_lead.numpy()) == timeouts, "a step began 1 ahead only where the wait gave up"


@pytest.mark.parametrize("make, message", [
    (lambda: staleness.StalenessFilter(-1), "max_tau must be >= 0"),
    (lambda: staleness.DelayCompensated(-0.1), "strength"),
    (lambda: sgd(delay=-2), "delay must be >= 0"),
    (lambda: sgd(random_delay=True), "needs a mean delay"),
    (lambda: sgd(ssp_bound=-1), "ssp_bound must be >= 0"),
    (lambda: staleness.Schedule(num_steps=600, evaluate_every=70), "must be a multiple of evaluate_every"),
    (lambda: staleness.Schedule(evaluate_every=50, steps_per_closure=20), "a multiple of steps_per_closure"),
    (lambda: staleness.Batches(slow_ms=20), "give the index of the worker to slow"),
    (lambda: staleness.Batches(slow_worker=0, slow_ms=-5), "its pause per batch in ms"),
])
def test_bad_settings_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


class EarlyClaimCounter(staleness.StalenessSGD):
    """An early claim: it depends only on the version read, not on the update, so τ reads 0."""

    def apply(self, gradients, read_version, worker=0, read_parameters=()):
        tau = self.version.assign_add(1) - 1 - read_version
        for variable, gradient in zip(self.variables, gradients):
            variable.assign_sub(self.learning_rate * gradient)
        return tau


def test_the_claim_check_rejects_a_counter_that_claims_before_the_update():
    with pytest.raises(AssertionError, match="claimed without waiting for the update"):
        checks.claims_after_update(EarlyClaimCounter)


def run_with(taus_by_worker, dropped=0, updates=None):
    counts = np.zeros((len(taus_by_worker), 65), np.int64)
    for worker, taus in enumerate(taus_by_worker):
        counts[worker, :len(taus)] = taus
    applied = int(counts.sum()) - dropped
    run = staleness.Run(rule="rule", delay="none", learning_rate=0.1, counts=counts, dropped=dropped,
                        clocks=[10] * len(taus_by_worker))
    run.record(int(counts.sum()), 5.0, evaluation={"updates": applied if updates is None else updates, "accuracy": 0.9})
    return run


def test_a_progress_line_names_what_sets_its_run_apart():
    delay = staleness.delay_name(16, random_delay=True)
    assert staleness.run_description("plain async", delay, 0) == "plain async, delay random, configured mean 16, seed 0"
    assert (staleness.run_description("plain async", "none", 1, ssp_bound=2, slowed="worker 0 slowed 20 ms per batch")
            == "plain async, SSP bound 2, worker 0 slowed 20 ms per batch, delay none, seed 1")


def test_tau_quantiles_and_divergence_are_read_from_the_run():
    run = run_with([[50, 30, 15, 5]])
    assert (run.tau_quantile(0.5), run.tau_quantile(0.95), run.max_tau) == (0, 2, 3)
    assert not run.diverged
    run.record(200, 6.0, evaluation={"updates": 100, "accuracy": float("nan")})  # weights no longer finite
    assert run.diverged


@pytest.mark.parametrize("alone, together, message", [
    (run_with([[100]]), run_with([[100], [100]]), "claims its version before the update"),  # the early claim
    (run_with([[98, 2]]), run_with([[60, 40], [90, 10]]), "one worker alone measured tau > 0"),
])
def test_the_measured_staleness_check_rejects_wrong_histograms(alone, together, message):
    checks.measured_staleness(run_with([[100]]), run_with([[60, 40], [90, 10]]))  # a plausible pair passes
    with pytest.raises(AssertionError, match=message):
        checks.measured_staleness(alone, together)


@pytest.mark.parametrize("run, message", [
    (run_with([[50, 20, 10, 5]], dropped=0), "drop exactly those"),
    (run_with([[50, 20, 10, 5]], dropped=15, updates=85), "must not claim a version"),
    (run_with([[85]]), "no update measured tau > 0"),
])
def test_the_filter_check_rejects_wrong_runs(run, message):
    checks.dropped_exactly_the_stale(run_with([[50, 20, 10, 5]], dropped=15), 1)  # 10 + 5 beyond tau 1, dropped, not claimed
    with pytest.raises(AssertionError, match=message):
        checks.dropped_exactly_the_stale(run, 1)


def ssp_run(clocks, dropped=0, waited_seconds=1.0, timeouts=0, max_lead=2):
    run = run_with([[90, 10]], dropped=dropped)
    run.clocks, run.waited_seconds, run.timeouts, run.ssp_bound, run.max_lead = (
        clocks, waited_seconds, timeouts, 2, max_lead)
    return run


@pytest.mark.parametrize("ssp, message", [
    (ssp_run([50, 52], dropped=3), "drops nothing"),
    (ssp_run([50, 52], waited_seconds=0.0), "no worker waited"),
    (ssp_run([40, 60], max_lead=20), "ran ahead without waiting"),
])
def test_the_ssp_check_rejects_runs_that_did_not_wait(ssp, message):
    unbounded = ssp_run([30, 70], waited_seconds=0.0)
    checks.ssp_waited(ssp_run([50, 53]), unbounded, 2)
    with pytest.raises(AssertionError, match=message):
        checks.ssp_waited(ssp, unbounded, 2)


def test_an_ssp_run_whose_wait_timed_out_reports_its_bound_broken():
    broken = ssp_run([50, 54], timeouts=1, max_lead=3)
    checks.ssp_waited(broken, ssp_run([30, 70], waited_seconds=0.0), 2)  # a timeout is allowed to break it...
    assert not broken.bound_held and ssp_run([50, 52]).bound_held  # ...and the run says so


@pytest.mark.parametrize("plain, aware, message", [
    ([0.88, 0.87, 0.89], [0.89, 0.88, 0.9], "plain async lost only"),             # staleness did no harm
    ([0.1, 0.9, 0.1], [0.8, 0.82, 0.81], "plain async lost only"),                # within the seed spread
    ([0.1, 0.11, 0.1], [0.3, 0.32, 0.31], "won back"),                           # less than half back
])
def test_staleness_aware_won_back_rejects_small_or_noisy_differences(plain, aware, message):
    fresh = [0.91, 0.92, 0.9]
    checks.staleness_aware_won_back(fresh, [0.1, 0.11, 0.1], [0.85, 0.86, 0.84], 0.05)
    with pytest.raises(AssertionError, match=message):
        checks.staleness_aware_won_back(fresh, plain, aware, 0.05)


def test_the_filter_check_names_a_worker_that_applied_nothing():
    run = run_with([[50, 20, 10, 5], [0]], dropped=15)
    run.clocks = [85, 0]
    with pytest.raises(AssertionError, match=r"worker\(s\) \[1\] applied no update"):
        checks.dropped_exactly_the_stale(run, 1)


@pytest.mark.cluster
def test_the_same_seeds_give_the_same_runs_and_a_continued_stream_does_not():
    """Paired runs: each seed starts its own stream, so a second call with the same seeds (a control, say)
    trains on the same batches from the same weights with the same random delays, to the same losses; runs
    that continue one stream see other batches."""
    data = load_mnist(source="offline-subset")
    update, schedule = staleness.Update(staleness.Constant(), 0.5, delay=4, random_delay=True), staleness.Schedule(40, 20)
    with labkit.LocalCluster(num_workers=1, num_ps=1, name="test-staleness-pairs") as cluster:
        strategy = cluster.strategy()
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        first, again = (staleness.train_mnist_over_seeds(strategy, coordinator, data, [0, 1], update, schedule)
                        for _ in range(2))
        continued = staleness.Batches().continue_on(coordinator, data, seed=0)
        on_one_stream = staleness.train_mnist_over_seeds(strategy, coordinator, data, [0, 1], update, schedule,
                                                         batches=continued)
        del continued  # freed while its cluster runs
        trainer = staleness.Trainer(strategy, coordinator, data, update, schedule)
        rerun = [trainer.run(seed) for seed in (1, 0)]
        made_once = staleness.Batches().made_once_per_seed()
        from_kept_streams = [trainer.run(seed, made_once) for seed in (0, 0)]  # the second starts seed 0's again
        traced = trainer.steps.experimental_get_tracing_count()
        del trainer, made_once
    assert [run.loss for run in rerun] == [first[1].loss, first[0].loss], "a Trainer restarts: each seed's own run"
    assert [run.loss for run in from_kept_streams] == [first[0].loss] * 2, "a kept stream starts again"
    assert traced == 1, f"a Trainer traces its step function once, not once per run ({traced} times)"
    assert [run.loss for run in again] == [run.loss for run in first]
    assert [run.taus.tolist() for run in again] == [run.taus.tolist() for run in first]
    assert first[0].loss != first[1].loss, "two seeds, two runs"
    assert on_one_stream[0].loss == first[0].loss, "the stream seeded 0 begins as the first seed's own"
    assert on_one_stream[1].loss != first[1].loss, "the second run continued it: other batches than seed 1's"
