"""Every check of labkit.checks.performance rejects a wrong result (and accepts the right one).

Real objects throughout: real processes, checkpoints written by TensorFlow, matplotlib axes; only the
numbers fed in are chosen to be wrong.
"""
import matplotlib
import pytest

from labkit import checks
from labkit.bench.costmodel import Prediction

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


RIGHT_TIMES = {1: [2.0, 2.2, 2.1], 2: [1.5, 1.2, 1.4]}


def errorbar_axis(xs, medians, low, high, label=True):
    figure, axis = plt.subplots()
    axis.errorbar(xs, medians, yerr=[[m - lo for m, lo in zip(medians, low)], [hi - m for m, hi in zip(medians, high)]])
    if label:
        axis.set_xlabel("workers")
        axis.set_ylabel("seconds")
    plt.close(figure)
    return axis


def _cost_model_rows():
    row = {"model": "mlp", "loop": "custom", "workers": 1, "ps": 1, "steps_per_closure": 1, "steps_per_s_median": 100.0}
    return [row, dict(row, workers=2, steps_per_s_median=150.0)]


@pytest.mark.parametrize("times, message", [
    ({1: [2.0, 2.2, 2.1]}, "time every worker count"),
    ({1: 2.1, 2: [1.5, 1.2, 1.4]}, "must return a list of 3"),
    ({1: [2.0, 2.2, 2.1], 2: [1.5, 1.5, 1.5]}, "do not copy one timing"),
    ({1: [2.0, 2.2, 2.1], 2: [1.5, 0.0, 1.4]}, "measure seconds as a float"),
])
def test_ex4_timings_must_be_separate_repeats(times, message):
    checks.timed_every_worker_count(RIGHT_TIMES, [1, 2], 3)
    with pytest.raises(AssertionError, match=message):
        checks.timed_every_worker_count(times, [1, 2], 3)


@pytest.mark.parametrize("answer, message", [
    ({(1, 2): False, (2, 3): False}, "1 vs 2 workers"),
    ({(1, 2): True, (2, 3): True}, "2 vs 3 workers"),
    ({2: True, 3: False}, "one per pair of consecutive worker counts"),
])
def test_ex4_differences_beyond_the_spread_are_those_whose_timings_do_not_overlap(answer, message):
    times = {**RIGHT_TIMES, 3: [1.3, 1.6, 1.45]}  # 1 vs 2 apart; 2 vs 3 overlap
    checks.beyond_spread({(1, 2): True, (2, 3): False}, times)
    with pytest.raises(checks.CheckFailed, match=message):
        checks.beyond_spread(answer, times)


def test_ex4_relative_spreads_must_come_from_the_timings():
    right = {1: (2.2 - 2.0) / 2.1, 2: (1.5 - 1.2) / 1.4}
    checks.relative_spread_is_range_over_median(right, RIGHT_TIMES)
    with pytest.raises(AssertionError, match="give \\(max - min\\) / median"):
        checks.relative_spread_is_range_over_median({1: right[1], 2: 0.3}, RIGHT_TIMES)


@pytest.mark.parametrize("make_axis, message", [
    (lambda: errorbar_axis([0, 1], [2.1, 1.4], [2.0, 1.2], [2.2, 1.5]), "not the worker counts"),
    (lambda: errorbar_axis([1, 2], [2.0, 1.2], [2.0, 1.2], [2.2, 1.5]), "not the median times"),
    (lambda: errorbar_axis([1, 2], [2.1, 1.4], [2.1, 1.4], [2.1, 1.4]), "not fastest to slowest"),
    (lambda: errorbar_axis([1, 2], [2.1, 1.4], [2.0, 1.2], [2.2, 1.5], label=False), "label both axes"),
])
def test_ex4_the_plot_must_show_medians_and_their_range(make_axis, message):
    checks.plot_shows(errorbar_axis([1, 2], [2.1, 1.4], [2.0, 1.2], [2.2, 1.5]), RIGHT_TIMES)
    with pytest.raises(AssertionError, match=message):
        checks.plot_shows(make_axis(), RIGHT_TIMES)


def test_ex4_a_plain_line_without_error_bars_is_refused():
    figure, axis = plt.subplots()
    axis.plot([1, 2], [2.1, 1.4])
    axis.set_xlabel("workers")
    axis.set_ylabel("seconds")
    plt.close(figure)
    with pytest.raises(AssertionError, match="no vertical error bars"):
        checks.plot_shows(axis, RIGHT_TIMES)


def test_08_saved_results_must_match_the_points():
    from labkit.bench import Point

    points = [Point("mlp", "single-process", 0, 0, 10, 64), Point("mlp", "custom", 1, 1, 10, 64),
              Point("mlp", "custom", 2, 1, 10, 64)]
    table = [{**{k: str(v) for k, v in vars(p).items()}, "samples_per_s_median": "120.5"} for p in points]
    table.append(dict(table[0]))  # the baseline, measured again beside the second cluster shape
    saved = {"results": table, "machine": {"cores": 2, "memory_gib": 24, "versions": {}}}
    checks.results_saved(table, points, saved)
    with pytest.raises(AssertionError, match="4 CSV rows but 3 JSON results"):
        checks.results_saved(table, points, dict(saved, results=table[:3]))
    with pytest.raises(AssertionError, match=r"missing from the CSV: \[\('mlp', 'custom', '2'"):
        checks.results_saved(table[:2], points, dict(saved, results=table[:2]))
    with pytest.raises(AssertionError, match="without a positive median speed"):
        slow = [*table[:3], dict(table[0], samples_per_s_median="0")]
        checks.results_saved(slow, points, dict(saved, results=slow))
    with pytest.raises(AssertionError, match="memory_gib"):
        checks.results_saved(table, points, dict(saved, machine={"cores": 2, "versions": {}}))


def test_08_dense_traffic_must_be_about_the_model_size():
    row = {"model": "mlp", "loop": "custom", "workers": 1, "ps": 1, "steps_per_closure": 1, "model_bytes": 1000,
           "measured_pull_bytes_per_step": 1100, "measured_push_bytes_per_step": 1050}
    checks.dense_traffic_is_model_size(row)
    with pytest.raises(AssertionError, match="push 0.10 M per step"):
        checks.dense_traffic_is_model_size(dict(row, measured_push_bytes_per_step=100))
    with pytest.raises(AssertionError, match="pull 3.00 M per step"):
        checks.dense_traffic_is_model_size(dict(row, measured_pull_bytes_per_step=3000))


def test_09_the_ps_must_pull_and_push_about_the_model_each_step():
    checks.pulls_and_pushes_are_model_size(410_000, 405_000, 407_080)
    with pytest.raises(AssertionError, match=r"the PS: pull 0.49 M per step, outside 0.8-1.5 M \(M = 407,080 bytes\)"):
        checks.pulls_and_pushes_are_model_size(200_000, 405_000, 407_080, where="the PS: ")
    with pytest.raises(AssertionError, match="push 0.00 M per step"):
        checks.pulls_and_pushes_are_model_size(410_000, 0, 407_080)


def test_08_a_running_cluster_is_named():
    checks.clusters_stopped([])
    with pytest.raises(AssertionError, match="clusters still running"):
        checks.clusters_stopped([{"name": "bench", "owner_pid": 1}])


def test_08_every_custom_point_must_have_a_positive_prediction():
    rows = _cost_model_rows()
    good = [(rows[0], Prediction(100.0, "workers"), True), (rows[1], Prediction(200.0, "workers"), False)]
    checks.predicted_every_point(good, rows + [dict(rows[0], loop="single-process")])
    with pytest.raises(AssertionError, match="2 custom-loop points measured, but 1 predicted"):
        checks.predicted_every_point(good[:1], rows)
    with pytest.raises(AssertionError, match="not a positive number of steps/s"):
        checks.predicted_every_point([good[0], (rows[1], Prediction(float("inf"), "coordinator"), False)], rows)
