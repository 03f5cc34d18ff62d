"""labkit.bench: statistics, the benchmark points, bad input through the CLI, a baseline's meter, the figure's titles
(tests/test_notebook_08_performance_analysis.py reads the files of a tiny real run: notebook 08's smoke run).

No test asserts a speed: timings are measurements (labkit bench prints ratios), not tests.
"""
import subprocess
import sys

import pytest

from labkit import bench
from labkit.meter import Meter

LABKIT = [sys.executable, "-m", "labkit.tools.cli"]


def labkit(*args, timeout=600):
    return subprocess.run([*LABKIT, *args], capture_output=True, text=True, timeout=timeout)


def test_intervals_hold_whole_closures_for_every_worker():
    point = bench.Point("mlp", "custom", workers=3, ps=1, steps_per_closure=10, batch_size=64)
    assert bench.interval_steps(point, 100) == 120
    baseline = bench.Point("mlp", "single-process", workers=0, ps=0, steps_per_closure=50, batch_size=64)
    assert bench.interval_steps(baseline, 100) == 100


def test_each_ratio_compares_a_point_with_its_baseline_round_by_round_so_a_drift_divides_out():
    def row(loop, intervals, beside):
        return {"model": "mlp", "batch_size": 64, "loop": loop, "samples_per_s_median": sorted(intervals)[1],
                "samples_per_s_intervals": intervals, "beside_workers": beside, "beside_ps": 1}
    # the machine slows 1000 -> 600 -> 900 across the rounds; the point runs at half the baseline in every round
    rows = bench.add_ratios([row("single-process", [1000.0, 600.0, 900.0], 1), row("custom", [500.0, 300.0, 450.0], 1),
                             row("single-process", [500.0, 500.0, 500.0], 2), row("custom", [500.0, 500.0, 500.0], 2)])
    assert [r["ratio_to_single_process"] for r in rows] == pytest.approx([1.0, 0.5, 1.0, 1.0])
    assert rows[1]["ratio_to_single_process_interval"] == pytest.approx([0.5, 0.5])
    # medians alone would give 450 / 900: the same here, but only because the point's rounds moved with the baseline's
    assert rows[1]["baseline_samples_per_s"] == 900.0


@pytest.mark.parametrize("steps_to_target, final_accuracy, outcome", [
    (160, 0.91, "reached"), (None, 0.88, "not reached"), (None, 0.892, "cannot tell"), (None, 0.8906, "cannot tell")])
def test_one_run_short_of_its_target_by_less_than_the_test_set_resolves_cannot_tell(steps_to_target, final_accuracy,
                                                                                   outcome):
    # 1,000 distinct test images at 0.9: one binomial standard error is 0.0095
    row = {"steps_to_target": steps_to_target, "final_accuracy": final_accuracy}
    assert bench.target_outcome(row, 0.9, distinct_test_examples=1000) == outcome
    assert bench.target_outcome(row, 0.9, distinct_test_examples=100_000) == ("reached" if steps_to_target else
                                                                           "not reached"), "a larger test set resolves it"


@pytest.mark.cluster
def test_one_cli_runs_both_benchmarks():
    done = labkit("bench", "--help")
    assert done.returncode == 0 and "startup" in done.stdout
    assert "start-to-ready" in labkit("bench", "startup", "--help").stdout


def test_plan_varies_each_axis_around_the_base_point():
    points = bench.points(workers=[1, 2, 4], ps=[1, 2], steps_per_closure=[1, 10], models=["mlp", "lm"],
                        batch_sizes=[64, 256], cores=2)
    assert len(points) == len(set(points))
    custom = [p for p in points if p.loop == "custom"]
    curve = {(p.workers, p.ps, p.steps_per_closure) for p in custom if p.model == "mlp" and p.batch_size == 64}
    assert curve == {(w, ps, k) for w in (1, 2, 4) for ps in (1, 2) for k in (1, 10)}
    # the other model at every worker and PS count with the most packing, and on one worker at every packing
    assert {(p.workers, p.ps, p.steps_per_closure) for p in custom if p.model == "lm"} == \
        {(w, ps, 10) for w in (1, 2, 4) for ps in (1, 2)} | {(1, ps, k) for ps in (1, 2) for k in (1, 10)}
    # model.fit and the other batch size at the base: 2 workers (closest to 2 cores), 1 ps, batch 64
    assert {(p.model, p.workers, p.ps, p.steps_per_closure) for p in points if p.loop == "fit"} == \
        {("mlp", 2, 1, 1), ("mlp", 2, 1, 10)}  # model.fit: MNIST models only
    assert {(p.workers, p.ps, p.batch_size) for p in custom if p.batch_size != 64} == {(2, 1, 256)}
    baselines = {(p.model, p.batch_size, p.steps_per_closure) for p in points if p.loop == "single-process"}
    assert baselines == {("mlp", 64, 10), ("lm", 64, 10), ("mlp", 256, 10)}
    assert {bench.shape(p, [1, 2]) for p in custom} == {(1, 2), (2, 2), (4, 2)}, "a cluster per worker count, with both PS"
    with pytest.raises(ValueError, match="give one count, or 1 and one more"):
        bench.points([1], [2, 3], [1], ["mlp"], [64])


@pytest.mark.parametrize("flags, message", [
    (["--workers", "0"], "worker counts must be whole numbers >= 1, got [0]. Give e.g. --workers 1 2 3 4"),
    (["--ps", "0", "1"], "parameter server counts must be whole numbers >= 1"),
    (["--steps-per-closure", "0"], "--steps-per-closure 1 10 50"),
    (["--models", "resnet"], "unknown model 'resnet': choose from mlp, wide-mlp, lm"),
    (["--repeats", "2"], "repeats must be a whole number >= 3"),
    (["--target-accuracy", "85"], "target_accuracy must be in (0, 1]"),
])
@pytest.mark.cluster
def test_bad_input_says_what_is_wrong_and_how_to_fix_it(flags, message):
    done = labkit("bench", *flags)
    assert done.returncode != 0
    assert message in done.stderr and done.stderr.startswith("labkit bench: ")


def test_report_checks_its_settings_before_running_the_notebook(tmp_path):
    with pytest.raises(ValueError, match="unknown model 'gpt'"):
        bench.report(tmp_path, models=["gpt"])
    assert not (tmp_path / bench.NOTEBOOK.name).exists()


def test_a_baseline_times_with_the_meter_it_is_given_one_interval_per_round():
    made = []

    class RecordedMeter(Meter):
        def __init__(self, cpu_pids, socket_pids=(), counters=None):
            super().__init__(cpu_pids, socket_pids, counters)
            made.append(self)

    point = bench.Point("mlp", "single-process", 0, 0, 1, 64)
    baseline = bench.baseline(point, bench.Data(["mlp"]), min_steps=5, meter=RecordedMeter)
    assert len(made) == 1 and made[0].seconds == [], "the warm-up is not timed by the meter"
    first, second = baseline.measure(), baseline.measure()
    row = baseline.row(0.5)
    assert len(made[0].seconds) == row["intervals"] == 2 and row["samples_per_s_intervals"] == [first, second]
    # The warm-up trains one interval of min_steps; each round then trains enough whole intervals to last
    # MIN_BASELINE_SECONDS, as many as the warm-up's speed says (1 or more, whatever the machine's load).
    warm_up, steps = bench.interval_steps(point, 5), baseline.steps
    assert steps >= warm_up and steps % warm_up == 0
    trained_so_far = [warm_up, warm_up + steps, warm_up + 2 * steps]
    assert [trained for trained, _ in baseline.evaluations] == trained_so_far, \
        "the accuracy after the warm-up and after each round, with the steps trained so far"
    assert row["steps_trained"] == trained_so_far[-1] and row["steps_to_target"] in (*trained_so_far, None)
    assert set(made[0].counts) == {"machine"} and row["cpu_machine"] is not None, "every program's CPU, counted"


def test_the_ps_panel_says_when_it_shows_one_ps_count_only():
    assert bench.plots.ps_panel_title([1, 2], 2, 10) == "samples/s against parameter servers (2 workers, 10 steps/closure)"
    lone = bench.plots.ps_panel_title([1], 2, 10)
    assert lone.startswith("samples/s with 1 parameter server (2 workers") and "the only PS count measured" in lone
