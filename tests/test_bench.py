"""labkit.bench: statistics, the benchmark points, bad input through the CLI, and the files of a tiny real run:
the one notebook 08's smoke run measured and saved with the functions `labkit bench` runs (read just after it).

No test asserts a speed: timings are measurements (labkit bench prints ratios), not tests.
"""
import csv
import json
import subprocess
import sys

import pytest

from executed_notebooks import executed_copy
from labkit import bench
from labkit.meter import Meter
from smoke_notebooks import SMOKE_DIR, SMOKE_PARAMETERS

LABKIT = [sys.executable, "-m", "labkit.tools.cli"]
NOTEBOOK_08 = "08_performance_analysis.ipynb"


def labkit(*args, timeout=600):
    return subprocess.run([*LABKIT, *args], capture_output=True, text=True, timeout=timeout)


def test_intervals_hold_whole_closures_for_every_worker():
    point = bench.Point("mlp", "custom", workers=3, ps=1, steps_per_closure=10, batch_size=64)
    assert bench.interval_steps(point, 100) == 120
    baseline = bench.Point("mlp", "single-process", workers=0, ps=0, steps_per_closure=50, batch_size=64)
    assert bench.interval_steps(baseline, 100) == 100


def test_each_ratio_divides_by_the_baselines_measured_just_before_and_after_it():
    def row(loop, samples_per_s, beside, **more):
        return {"model": "mlp", "batch_size": 64, "loop": loop, "samples_per_s_median": samples_per_s,
                "beside_workers": beside, "beside_ps": 1, **more}
    rows = bench.add_ratios([row("single-process", 900.0, 1, baseline_slots=[1000.0, 600.0, 900.0]),
                             row("custom", 400.0, 1, baseline_slot=0), row("custom", 375.0, 1, baseline_slot=1),
                             row("single-process", 500.0, 2, baseline_slots=[500.0, 500.0]),
                             row("custom", 500.0, 2, baseline_slot=0)])
    assert [r["ratio_to_single_process"] for r in rows] == [1.0, 0.5, 0.5, 1.0, 1.0]
    assert [r["baseline_drift"] for r in rows] == [None, -0.4, 0.5, None, 0.0]


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
    curve = {(p.workers, p.steps_per_closure) for p in custom if p.model == "mlp" and p.ps == 1 and p.batch_size == 64}
    assert curve == {(w, k) for w in (1, 2, 4) for k in (1, 10)}
    # everything else at the base: 2 workers (closest to 2 cores), 1 ps, batch 64
    assert {(p.model, p.ps) for p in custom if p.workers == 2} == {("mlp", 1), ("mlp", 2), ("lm", 1), ("lm", 2)}
    assert {(p.model, p.workers, p.ps, p.steps_per_closure) for p in points if p.loop == "fit"} == \
        {("mlp", 2, 1, 1), ("mlp", 2, 1, 10)}  # model.fit: MNIST models only
    assert {p.batch_size for p in custom if p.batch_size != 64} == {256}
    baselines = {(p.model, p.batch_size, p.steps_per_closure) for p in points if p.loop == "single-process"}
    assert baselines == {("mlp", 64, 10), ("lm", 64, 10), ("mlp", 256, 10)}


@pytest.mark.parametrize("flags, message", [
    (["--workers", "0"], "worker counts must be whole numbers >= 1, got [0]. Give e.g. --workers 1 2 3 4"),
    (["--ps", "0", "1"], "parameter server counts must be whole numbers >= 1"),
    (["--steps-per-closure", "0"], "--steps-per-closure 1 10 50"),
    (["--models", "resnet"], "unknown model 'resnet': choose from mlp, wide-mlp, lm"),
    (["--repeats", "1"], "repeats must be a whole number >= 2"),
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


@pytest.fixture(scope="module")
def tiny_bench():
    """The out_dir of the points notebook 08's smoke run measured and saved (bench.measure_points, save, plot):
    ``labkit bench`` runs the same functions, so the files are read here instead of measuring a second time."""
    executed_copy(NOTEBOOK_08)  # skips unless this pytest call executed notebook 08's smoke copy
    return (SMOKE_DIR / SMOKE_PARAMETERS[NOTEBOOK_08]["out_dir"]).resolve(), SMOKE_PARAMETERS[NOTEBOOK_08]


@pytest.mark.notebook
@pytest.mark.reads(NOTEBOOK_08)
def test_tiny_bench_writes_well_formed_csv_and_json(tiny_bench):
    out, settings = tiny_bench
    with open(out / "results.csv") as file:
        rows = list(csv.DictReader(file))
    document = json.loads((out / "results.json").read_text())
    # 1 single-process baseline + custom loop and model.fit at each packing, on one cluster shape
    packings = settings["steps_per_closure"]
    assert sorted((r["loop"], int(r["steps_per_closure"])) for r in rows) == sorted(
        [("custom", k) for k in packings] + [("fit", k) for k in packings] + [("single-process", max(packings))])
    assert len(document["results"]) == len(rows)
    for row in rows:
        assert float(row["samples_per_s_median"]) > 0
        assert float(row["samples_per_s_q1"]) <= float(row["samples_per_s_median"]) <= float(row["samples_per_s_q3"])
        assert float(row["samples_per_s_median"]) == pytest.approx(64 * float(row["steps_per_s_median"]))
        assert float(row["ratio_to_single_process"]) > 0
        # a baseline row pools its measurements: one before each point of its shape and one after the last
        measurements = len(rows) if row["loop"] == "single-process" else 1
        assert int(row["intervals"]) == settings["repeats"] * measurements
        assert (int(row["beside_workers"]), int(row["beside_ps"])) == (1, 1), "all measured beside the one shape"
        assert float(row["baseline_samples_per_s"]) > 0
    assert document["settings"]["steps_per_closure"] == packings


@pytest.mark.notebook
@pytest.mark.reads(NOTEBOOK_08)
def test_tiny_bench_describes_the_machine_and_measures_cpu_and_bytes(tiny_bench):
    out, _ = tiny_bench
    document = json.loads((out / "results.json").read_text())
    machine = document["machine"]
    assert machine["cores"] >= 1 and machine["memory_gib"] > 0
    assert machine["versions"]["tensorflow"].startswith("2.21")
    on_cluster = [r for r in document["results"] if r["loop"] != "single-process"]
    for row in on_cluster:
        assert set(row["cpu_per_task"]) == {"coordinator", "ps:0", "worker:0"}
        assert row["cpu_workers"] > 0 and row["cpu_ps"] > 0
        assert row["analytic_bytes_per_step"] == 2 * row["model_bytes"]
        if row["measured_pull_bytes_per_step"] is not None:  # `ss` available: the sockets saw ~M each way
            assert 0.8 < row["measured_pull_bytes_per_step"] / row["model_bytes"] < 1.5
            assert 0.8 < row["measured_push_bytes_per_step"] / row["model_bytes"] < 1.5


@pytest.mark.notebook
@pytest.mark.reads(NOTEBOOK_08)
def test_tiny_bench_plots_a_png(tiny_bench):
    out, _ = tiny_bench
    png = (out / "throughput.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 20_000


def test_a_baseline_times_with_the_meter_it_is_given_and_measured_again_pools_its_intervals():
    made = []

    class RecordedMeter(Meter):
        def __init__(self, cpu_pids, socket_pids=(), counters=None):
            super().__init__(cpu_pids, socket_pids, counters)
            made.append(self)

    point = bench.Point("mlp", "single-process", 0, 0, 1, 64)
    baseline = bench.Baseline(point, bench.Data(["mlp"]), repeats=2, min_steps=5, meter=RecordedMeter)
    first, second = baseline.measure(), baseline.measure()
    row = baseline.row(0.5)
    assert len(made) == 1 and len(made[0].seconds) == row["intervals"] == 4, \
        "one meter timed both measurements' intervals, pooled in one row"
    assert baseline.slots == [first, second] and first > 0 and second > 0
    assert set(made[0].counts) == {"machine"} and row["cpu_machine"] is not None, "every program's CPU, counted"


def test_the_ps_panel_says_when_it_shows_one_ps_count_only():
    assert bench.plots.ps_panel_title([1, 2], 2, 10) == "samples/s against parameter servers (2 workers, 10 steps/closure)"
    lone = bench.plots.ps_panel_title([1], 2, 10)
    assert lone.startswith("samples/s with 1 parameter server (2 workers") and "the only PS count measured" in lone
