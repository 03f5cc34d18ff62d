"""labkit.verdict: each rule on synthetic data whose right answer is known, and each seen failing on the wrong
rule (runs compared unpaired, an interval alone, no floor, no correction, a z-quantile, the old non-inferiority
allowance, arithmetic ratios, timings in separate blocks, A always first)."""
import json
import math

import numpy as np
import pytest
from scipy import stats

from labkit import data, verdict
from labkit.verdict import CANNOT_TELL, INFERIOR, LOSES, NON_INFERIOR, WINS


def accuracy(name, treatment, control, examples=10_000, **options):
    return verdict.paired(name, treatment, control, measure="test accuracy", distinct_test_examples=examples, **options)


def seeded_pairs(effect, seeds, seed_luck=0.02, noise=0.001, base=0.9, seed=0):
    """Accuracies of paired runs: each seed's luck moves both runs alike; the treatment adds ``effect``."""
    rng = np.random.default_rng(seed)
    control = base + rng.normal(0, seed_luck, seeds)
    return control + effect + rng.normal(0, noise, seeds), control


def test_pairing_cancels_the_seeds_luck_that_hides_a_real_gain_from_unpaired_runs():
    treatment, control = seeded_pairs(effect=0.01, seeds=5)
    found = accuracy("gain", treatment, control)
    assert found.verdict == WINS and found.paired and found.seeds == 5
    assert found.interval[0] < 0.01 < found.interval[1] and found.effect == pytest.approx(0.01, abs=0.002)
    wrong = verdict.unpaired("gain", treatment, control, measure="test accuracy", distinct_test_examples=10_000)
    assert wrong.verdict == CANNOT_TELL  # the same runs, their pairing ignored: the luck swamps the gain


def test_a_winner_needs_every_pair_on_its_side_not_only_an_interval_above_zero():
    differences = np.array([0.02, 0.021, 0.019, 0.022, 0.018, 0.02, 0.021, 0.019, 0.02, -0.001])
    control = np.full(10, 0.9)
    found = accuracy("gain", control + differences, control)
    assert found.interval[0] > 0, "the interval alone would name a winner"
    assert (found.verdict, found.reason) == (CANNOT_TELL, "not every pair agrees")
    assert accuracy("gain", control + np.abs(differences), control).verdict == WINS


def test_a_difference_below_what_the_test_set_resolves_cannot_tell_whatever_the_seeds_say():
    treatment, control = seeded_pairs(effect=0.004, seeds=5, noise=0.0003)
    small_test_set = accuracy("gain", treatment, control, examples=1_000)
    assert small_test_set.interval[0] > 0 and small_test_set.floor == pytest.approx(0.0095, abs=0.0002)
    assert (small_test_set.verdict, small_test_set.reason) == (CANNOT_TELL, "below the resolution floor")
    assert accuracy("gain", treatment, control, examples=100_000).verdict == WINS
    assert accuracy("gain", treatment, control, examples=None).verdict == WINS  # not an accuracy: no floor


@pytest.mark.parametrize("examples, accuracy_level, floor", [
    (1_000, 0.9, math.sqrt(0.09 / 1_000)),   # the offline subset: about a point at 0.9
    (10_000, 0.97, math.sqrt(0.97 * 0.03 / 10_000)),  # full MNIST
    (1_000, 1.0, 1 / 1_000),                  # never less than one example
])
def test_the_resolution_floor_is_one_binomial_standard_error_and_at_least_one_example(examples, accuracy_level, floor):
    assert verdict.resolution_floor(examples, accuracy_level) == pytest.approx(floor)


@pytest.mark.parametrize("examples, accuracy_level", [(0, 0.9), (1.5, 0.9), (True, 0.9), (1_000, 1.2)])
def test_the_resolution_floor_refuses_what_is_not_a_count_and_an_accuracy(examples, accuracy_level):
    with pytest.raises(ValueError, match="distinct_test_examples|accuracy"):
        verdict.resolution_floor(examples, accuracy_level)


def test_several_comparisons_widen_each_interval_by_bonferroni():
    treatment, control = seeded_pairs(effect=0.01, seeds=4, noise=0.003, seed=3)
    one, twenty = accuracy("gain", treatment, control), accuracy("gain", treatment, control, comparisons=20)
    widened = (twenty.interval[1] - twenty.interval[0]) / (one.interval[1] - one.interval[0])
    assert widened == pytest.approx(stats.t.ppf(1 - 0.025 / 20, 3) / stats.t.ppf(0.975, 3))
    assert (one.verdict, twenty.verdict) == (WINS, CANNOT_TELL)  # without the correction this one would be named


def test_the_paired_interval_covers_the_true_effect_at_its_confidence_where_a_z_interval_does_not():
    rng = np.random.default_rng(0)
    covered = z_covered = wrong_wins = 0
    trials = 2_000
    for _ in range(trials):
        differences = rng.normal(0.005, 0.01, 3)
        found = verdict.paired("gain", 0.9 + differences, np.full(3, 0.9), measure="test accuracy")
        covered += found.interval[0] <= 0.005 <= found.interval[1]
        half = 1.96 * differences.std(ddof=1) / math.sqrt(3)
        z_covered += abs(differences.mean() - 0.005) <= half
        null = verdict.paired("gain", 0.9 + differences - 0.005, np.full(3, 0.9), measure="test accuracy")
        wrong_wins += null.verdict != CANNOT_TELL
    assert 0.93 <= covered / trials <= 0.97
    assert z_covered / trials < 0.90, "with 3 seeds a normal quantile covers too little"
    assert wrong_wins / trials <= 0.05  # no effect: a winner named at most as often as the confidence allows


def test_fewer_pairs_than_asked_cannot_tell_and_lower_can_be_better():
    seconds = verdict.paired("time", [5.0, 6.0], [9.0, 9.5], measure="seconds", higher_is_better=False)
    assert (seconds.verdict, seconds.reason) == (CANNOT_TELL, "fewer than 3 pairs")
    assert seconds.effect == pytest.approx(-3.75) and seconds.interval[1] < 0  # the interval alone would say wins
    assert verdict.paired("time", [9.0, 9.5, 9.9], [5.0, 6.0, 6.1], measure="seconds",
                          higher_is_better=False).verdict == LOSES


@pytest.mark.parametrize("treatment, control, expected", [
    ([0.90, 0.91, 0.92], [0.80, 0.82, 0.84], WINS),         # its worst seed beats the control's best
    ([0.80, 0.82, 0.84], [0.90, 0.91, 0.92], LOSES),        # its best seed is below the control's worst
    ([0.84, 0.91, 0.92], [0.80, 0.82, 0.84], CANNOT_TELL),  # a tie at the edge is no win
    ([0.85, 0.86, 0.87], [0.80, 0.82, 0.84], CANNOT_TELL),  # apart, but too close for 3 seeds' interval
])
def test_unpaired_runs_name_a_winner_only_outside_the_others_range(treatment, control, expected):
    assert verdict.unpaired("gain", treatment, control, measure="test accuracy").verdict == expected


def test_unpaired_runs_whose_interval_excludes_zero_but_whose_ranges_overlap_cannot_tell():
    treatment = [0.905, 0.91, 0.92, 0.93, 0.94, 0.95, 0.96, 0.97]
    control = [0.86, 0.87, 0.88, 0.88, 0.89, 0.89, 0.90, 0.91]
    found = verdict.unpaired("gain", treatment, control, measure="test accuracy")
    assert found.interval[0] > 0 and (found.verdict, found.reason) == (CANNOT_TELL, "the seeds' ranges overlap")
    welch = stats.ttest_ind(treatment, control, equal_var=False).confidence_interval(0.95)
    assert found.interval == pytest.approx((welch.low, welch.high))
    assert (found.seeds, found.control_seeds, found.paired) == (8, 8, False)


def test_the_old_allowance_passes_noisier_seeds_that_the_non_inferiority_test_refuses():
    def old_allowance(loss, standard_error, margin=0.01):  # "1 point plus two standard errors"
        return loss <= margin + 2 * standard_error

    dense = np.array([0.90, 0.91, 0.92])
    noisy = dense - np.array([0.004, 0.012, 0.020])   # lost 1.2 points on average, seeds disagreeing
    steady = dense - 0.012                            # lost 1.2 points in every seed
    noisy_error = np.std(dense - noisy, ddof=1) / math.sqrt(3)
    assert old_allowance(0.012, noisy_error) and not old_allowance(0.012, 0.0)  # noise passes, steadiness fails
    found = {name: verdict.non_inferior(accuracy("topk", runs, dense, examples=10_000), 0.01)
             for name, runs in (("noisy", noisy), ("steady", steady))}
    assert found["noisy"].verdict == CANNOT_TELL and found["noisy"].interval[0] < -0.01
    assert found["steady"].verdict == INFERIOR and found["steady"].interval[1] < -0.01
    close = dense - np.array([0.002, 0.003, 0.0025])
    assert verdict.non_inferior(accuracy("topk", close, dense, examples=10_000), 0.01).verdict == NON_INFERIOR


def test_more_noise_never_makes_non_inferiority_easier():
    rng = np.random.default_rng(1)
    dense, jitter = np.full(5, 0.9), rng.normal(0, 1, 5)
    verdicts = [verdict.non_inferior(verdict.paired("topk", dense - 0.003 + noise * jitter, dense,
                                                    measure="test accuracy"), 0.01).verdict
                for noise in (0.0, 0.001, 0.003, 0.01, 0.03)]
    assert verdicts[0] == NON_INFERIOR and verdicts[-1] == CANNOT_TELL
    assert verdicts == sorted(verdicts, key=[NON_INFERIOR, CANNOT_TELL].index), verdicts


def test_non_inferiority_points_the_measures_way_and_needs_a_margin_the_test_set_resolves():
    baseline = np.array([0.30, 0.32, 0.31])   # a validation MSE: lower is better

    def mse(treatment):
        return verdict.paired("mse", treatment, baseline, measure="validation MSE", higher_is_better=False)
    assert verdict.non_inferior(mse(baseline + 0.001), 0.01).verdict == NON_INFERIOR
    assert verdict.non_inferior(mse(baseline + 0.05), 0.01).verdict == INFERIOR
    unresolved = verdict.non_inferior(accuracy("topk", [0.9, 0.91, 0.92], [0.9, 0.91, 0.92], examples=1_000), 0.005)
    assert (unresolved.verdict, unresolved.reason) == (CANNOT_TELL, "the margin is below the resolution floor")
    unpaired = verdict.non_inferior(verdict.unpaired("topk", [0.899, 0.9, 0.901, 0.9], [0.9, 0.901, 0.899],
                                                     measure="test accuracy"), 0.01)
    assert (unpaired.verdict, unpaired.paired, unpaired.control_seeds, unpaired.margin) == (NON_INFERIOR, False, 3, 0.01)
    two = verdict.non_inferior(verdict.paired("topk", [0.9, 0.9], [0.9, 0.9], measure="test accuracy"), 0.01)
    assert (two.verdict, two.reason) == (CANNOT_TELL, "fewer than 3 pairs")
    with pytest.raises(ValueError, match="margin"):
        verdict.non_inferior(verdict.paired("topk", [0.9] * 3, [0.9] * 3, measure="test accuracy"), -0.01)
    with pytest.raises(TypeError, match="reads the verdict of verdict.paired or verdict.unpaired"):
        verdict.non_inferior(verdict.interleaved("time", [1.0] * 3, [1.1] * 3, measure="seconds"), 0.1)


def test_interleaved_ratios_are_averaged_on_a_log_scale():
    found = verdict.interleaved("speed", [2.0, 1.0, 2.0, 1.0], [1.0, 2.0, 1.0, 2.0], measure="samples/s")
    assert found.effect == pytest.approx(1.0) and found.verdict == CANNOT_TELL  # arithmetic: 1.25, "faster"
    assert found.ratio and found.interval[0] < 1 < found.interval[1]


class DriftingMachine:
    """A machine whose speed falls by a third over the run; the treatment is 10 % faster on it. Each measure
    takes one tick; ``first_penalty`` slows whoever runs first in a block (a warm-up)."""

    def __init__(self, ticks, first_penalty=0.0):
        self.tick, self.ticks, self.first_penalty, self.last = 0, ticks, first_penalty, None

    def measure(self, name, gain):
        def run():
            speed = 1000 * (1 - self.tick / self.ticks / 3) * gain
            first = self.tick % 2 == 0
            self.tick, self.last = self.tick + 1, name
            return speed * (1 - self.first_penalty if first else 1)
        return run


def test_interleaving_divides_out_a_drift_that_separate_blocks_mistake_for_a_loss():
    machine = DriftingMachine(ticks=12)
    treatment, control = verdict.interleave(machine.measure("A", 1.1), machine.measure("B", 1.0), 6)
    found = verdict.interleaved("speed", treatment, control, measure="samples/s")
    assert found.verdict == WINS and found.effect == pytest.approx(1.1, rel=0.02)
    machine = DriftingMachine(ticks=12)
    control = [machine.measure("B", 1.0)() for _ in range(6)]   # the baseline first, then the treatment
    treatment = [machine.measure("A", 1.1)() for _ in range(6)]
    separate = verdict.unpaired("speed", treatment, control, measure="samples/s")
    assert separate.verdict != WINS and separate.effect < 0  # the drift reads as the treatment being slower


def test_abba_cancels_a_first_in_block_penalty_that_abab_reads_as_a_loss():
    calls = []
    verdict.interleave(lambda: calls.append("A"), lambda: calls.append("B"), 4)
    assert "".join(calls) == "ABBAABBA"
    calls.clear()
    verdict.interleave(lambda: calls.append("A"), lambda: calls.append("B"), 4, order="ABAB")
    assert "".join(calls) == "ABABABAB"
    found = {}
    for order in ("ABBA", "ABAB"):
        machine = DriftingMachine(ticks=10**9, first_penalty=0.05)  # no drift to speak of; A and B are the same
        a, b = verdict.interleave(machine.measure("A", 1.0), machine.measure("B", 1.0), 6, order=order)
        found[order] = verdict.interleaved("speed", a, b, measure="samples/s")
    assert found["ABBA"].verdict == CANNOT_TELL and found["ABBA"].effect == pytest.approx(1.0, abs=1e-6)
    assert found["ABAB"].verdict == LOSES and found["ABAB"].effect == pytest.approx(0.95, abs=1e-6)


def test_interleaved_seconds_lower_is_better_and_bad_timings_are_refused():
    faster = verdict.interleaved("time", [0.8, 0.82, 0.79], [1.0, 1.01, 0.99], measure="seconds",
                                 higher_is_better=False)
    assert faster.verdict == WINS and faster.effect < 1
    with pytest.raises(ValueError, match="positive"):
        verdict.interleaved("time", [0.8, 0.0, 0.79], [1.0, 1.01, 0.99], measure="seconds")
    with pytest.raises(ValueError, match="order"):
        verdict.interleave(lambda: 1, lambda: 2, 3, order="AABB")


@pytest.mark.parametrize("treatment, control, match", [
    ([0.9, float("nan"), 0.9], [0.5, 0.5, 0.5], "diverged"),
    ([], [0.5], "diverged"),
    ([0.9, 0.9], [0.5, 0.5, 0.5], "same order"),
    ([1.5, 1.6, 1.7], [1.0, 1.1, 1.2], "accuracies in"),
])
def test_a_diverged_seed_unpaired_values_or_a_floor_for_no_accuracy_are_refused(treatment, control, match):
    with pytest.raises(ValueError, match=match):
        verdict.paired("gain", treatment, control, measure="test accuracy", distinct_test_examples=1_000)


def test_the_record_is_json_and_the_sentence_is_made_from_it_alone():
    treatment, control = seeded_pairs(effect=0.01, seeds=5)
    found = accuracy("topk_vs_dense_accuracy", treatment, control, comparisons=2)
    record = json.loads(json.dumps(found.record()))
    assert {"name", "verdict", "effect", "interval", "paired", "seeds", "distinct_test_examples"} <= set(record)
    assert record["interval"] == list(found.interval) and record["seeds"] == 5
    said = verdict.sentence_of(record, "top-k", "dense")
    assert said == found.sentence("top-k", "dense")
    assert said.startswith("Top-k wins against dense on test accuracy: +1.0 points (95% interval ")
    assert found.sentence("α/τ", "α").startswith("α/τ wins against α")  # a symbol keeps its case: not "Α/τ"
    assert "corrected for 2 comparisons; 5 paired seeds, every one agreeing" in said
    one = verdict.paired("gain", [0.91], [0.9], measure="test accuracy").record()
    assert one["interval"] == [None, None]
    one_block = verdict.interleaved("time", [0.8], [1.0], measure="seconds", higher_is_better=False)
    assert one_block.record()["interval"] == [None, None]  # not [0.0, None]: a ratio of 0 is no bound
    assert one_block.sentence("SSP", "async") == ("Cannot tell SSP from async on seconds: 0.80× (no interval from "
                                                  "single values; 1 interleaved block); fewer than 3 blocks.")
    floor = accuracy("gain", *seeded_pairs(effect=0.004, seeds=5, noise=0.0003), examples=1_000)
    assert "1,000 distinct test examples resolve 0.9 points" in floor.sentence("a", "b")
    timed = verdict.unpaired("packing", [5.0, 6.0, 2.0], [1.0, 2.0, 3.0], measure="samples/s", unit="timed intervals")
    assert timed.sentence("K=10", "K=1") == ("Cannot tell K=10 from K=1 on samples/s: +2.33 (95% interval -2.01 to "
                                             "+6.68; 3 unpaired timed intervals each); the interval includes a "
                                             "difference of 0.")


def test_an_accuracy_interval_past_100_points_is_cut_in_the_sentence_not_in_the_record():
    scattered = verdict.paired("rule_vs_control_accuracy", [0.2, 0.9, 0.3], [0.85, 0.3, 0.9], measure="test accuracy",
                               distinct_test_examples=1_000, comparisons=4)
    assert scattered.interval[0] < -1, "three scattered seeds: a t-interval past -100 points"
    said = scattered.sentence("the rule", "its control")
    assert "95% interval -100.0 to " in said and "cut at ±100 points, the most two accuracies can differ by" in said
    assert scattered.record()["interval"][0] < -1, "the record keeps the interval measured (seeds_to_decide reads it)"
    timed = verdict.paired("seconds", [0.2, 9.0, 0.3], [8.5, 0.3, 9.0], measure="seconds")
    assert "cut at" not in timed.sentence("a", "b"), "only accuracies have a most they can differ by"


@pytest.mark.parametrize("change, match", [
    ({"effect": 0.001}, "below the resolution floor"),   # a winner by less than the test set resolves
    ({"interval": [-0.01, 0.03]}, "includes 0 \\(no difference\\)"),
    ({"verdict": "non-inferior", "margin": 0.005, "interval": [-0.01, 0.03]}, "beyond the margin 0.005"),
    ({"verdict": "inferior", "margin": 0.005, "interval": [-0.01, 0.03]}, "reaches inside the margin"),
    ({"verdict": "inferior"}, "no margin"),
    ({"verdict": "better"}, "not one of"),
    ({"name": "top-k"}, "not a plain name"),
    ({"seeds": 0}, "positive count"),
    ({"interval": [0.03, 0.01]}, "lo > hi"),
])
def test_a_record_that_contradicts_itself_or_is_malformed_is_refused(change, match):
    record = accuracy("gain", *seeded_pairs(effect=0.01, seeds=5), examples=1_000).record()
    assert record["verdict"] == WINS
    with pytest.raises(ValueError, match=match):
        verdict.check_record(record | change)
    with pytest.raises(ValueError, match="needs"):
        verdict.check_record({"name": "gain", "verdict": WINS})


def test_the_data_basis_says_what_ran_and_refuses_accuracy_verdicts_on_the_timing_standin():
    subset = data.load_mnist("offline-subset")
    basis = verdict.data_basis(subset)
    assert (str(basis), basis.distinct_test_examples) == ("the offline subset (1,000 test images)", 1_000)
    twice = data.MNIST(subset.x_train, subset.y_train, np.concatenate([subset.x_test] * 2),
                       np.concatenate([subset.y_test] * 2), subset.source, data.OFFLINE_SUBSET)
    assert str(verdict.data_basis(twice)) == "the offline subset (2,000 test images, 1,000 distinct)"
    assert verdict.data_basis(twice).distinct_test_examples == 1_000
    tiled = np.resize(np.arange(1_000), 10_000)  # as data.timing_standin() tiles them (it builds 188 MB)
    standin = verdict.data_basis(data.MNIST(subset.x_train, subset.y_train, subset.x_test[tiled],
                                            subset.y_test[tiled], "stand-in", data.TIMING_STANDIN))
    assert str(standin) == "the timing stand-in (accuracy means nothing)" and not standin.accuracy_means_something
    assert standin.test_examples == 10_000
    with pytest.raises(ValueError, match="timing stand-in, whose accuracy means nothing"):
        standin.distinct_test_examples
    with pytest.raises(TypeError, match="MNIST object"):
        verdict.data_basis(subset.x_test)


def test_summaries_give_mean_and_range_the_difference_of_means_with_its_error_and_five_numbers():
    assert verdict.mean_and_range([0.85, 0.90, 0.88]) == pytest.approx((0.87667, 0.85, 0.90), abs=1e-5)
    difference, error = verdict.mean_difference([0.92, 0.94], [0.90, 0.90])
    assert (difference, error) == pytest.approx((0.03, math.sqrt(np.var([0.92, 0.94], ddof=1) / 2)))
    assert verdict.mean_difference([0.92], [0.90]) == pytest.approx((0.02, 0.0))
    assert verdict.five_number_summary([4.0, 1.0, 3.0, 2.0, 5.0]) == {"median": 3.0, "q1": 2.0, "q3": 4.0,
                                                                      "min": 1.0, "max": 5.0}
    assert verdict.five_number_summary([7.0, 7.0])["median"] == 7.0


@pytest.mark.parametrize("values, others, apart", [([3, 4], [1, 2], 1), ([1, 2], [3, 4], -1), ([2, 4], [1, 2], 0)])
def test_spreads_are_apart_only_when_every_value_is_beyond_every_other(values, others, apart):
    assert verdict.spreads_apart(values, others) == apart


def test_interleave_many_reverses_the_order_every_block_so_a_drift_favours_none():
    calls, blocks_done = [], []
    values = verdict.interleave_many([lambda: calls.append("A") or len(calls), lambda: calls.append("B") or len(calls),
                                      lambda: calls.append("C") or len(calls)], 4,
                                     after_block=lambda n: blocks_done.append((n, len(calls))))
    assert "".join(calls) == "ABCCBAABCCBA"
    assert values == [[1, 6, 7, 12], [2, 5, 8, 11], [3, 4, 9, 10]]
    assert blocks_done == [(1, 3), (2, 6), (3, 9), (4, 12)], "told after each block, with its number"
    machine = DriftingMachine(ticks=18)
    a, b, c = verdict.interleave_many([machine.measure("A", 1.0), machine.measure("B", 1.0),
                                       machine.measure("C", 1.0)], 6)
    same = verdict.interleaved("speed", a, c, measure="samples/s")  # the first and the last of every block
    assert same.verdict == CANNOT_TELL and same.effect == pytest.approx(1.0, abs=0.01)
    with pytest.raises(ValueError, match="at least one block"):
        verdict.interleave_many([lambda: 1], 0)


def test_paired_accuracy_is_paired_on_the_test_examples_that_ran_and_read_against_a_margin_if_given():
    basis = verdict.DataBasis("the offline subset", 1_000, 1_000)
    treatment, control = [0.88, 0.895, 0.90], [0.89, 0.90, 0.91]
    plain = verdict.paired_accuracy("topk", treatment, control, basis, comparisons=2)
    assert plain == verdict.paired("topk", treatment, control, measure="test accuracy", distinct_test_examples=1_000,
                                   comparisons=2)
    kept = verdict.paired_accuracy("topk", treatment, control, basis, comparisons=2, margin=0.02)
    assert kept == verdict.non_inferior(plain, 0.02) and kept.margin == 0.02
    standin = verdict.DataBasis(data.TIMING_STANDIN, 10_000, 1_000)
    with pytest.raises(ValueError, match="timing stand-in"):
        verdict.paired_accuracy("topk", treatment, control, standin)


def pairs_with(mean, spread, seeds, base=0.85):
    """Accuracies of ``seeds`` pairs whose differences have exactly this mean and standard deviation."""
    draws = np.random.default_rng(1).normal(size=seeds)
    differences = mean + spread * (draws - draws.mean()) / draws.std(ddof=1)
    return base + differences, np.full(seeds, base)


@pytest.mark.parametrize("mean, spread, margin, decides", [
    (0.03, 0.01, None, WINS), (-0.011, 0.02, 0.02, NON_INFERIOR),
    (0.001, 0.02, 0.02, NON_INFERIOR),  # an effect below the floor can still be shown inside a margin the set resolves
])
def test_seeds_to_decide_is_the_fewest_whose_interval_would_decide(mean, spread, margin, decides):
    """Where the mean and spread stay as measured, the seeds it projects decide and one fewer does not: with the
    normal's quantile instead of Student's t, or without the correction for comparisons, it projects too few."""
    def judged(seeds):
        found = accuracy("gain", *pairs_with(mean, spread, seeds), comparisons=6)
        return found if margin is None else verdict.non_inferior(found, margin)
    needed = verdict.seeds_to_decide(judged(3))
    assert judged(needed).verdict == decides and judged(needed - 1).verdict == CANNOT_TELL, needed


def test_seeds_to_decide_is_none_where_more_seeds_cannot_decide():
    below_floor = verdict.paired("gain", *pairs_with(0.002, 0.004, 3), measure="test accuracy",
                                 distinct_test_examples=1_000)
    assert below_floor.verdict == verdict.CANNOT_TELL and verdict.seeds_to_decide(below_floor) is None
    decided = verdict.paired("gain", *pairs_with(0.05, 0.001, 5), measure="test accuracy", distinct_test_examples=1_000)
    assert decided.verdict == verdict.WINS and verdict.seeds_to_decide(decided) is None
