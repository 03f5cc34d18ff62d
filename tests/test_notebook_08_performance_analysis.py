"""Notebook 08 (performance analysis) at its smoke parameters, with `ss`: every cell runs and asserts, a learner sees
every figure and no unexplained red, it records the results it declares (tests/support/smoke.py), JupyterLab shows its
executed copy with its figures and no red; and the files of the points it measured and saved with the functions
`labkit bench` runs hold what they should (read here instead of measuring a second time)."""
import csv
import json

import pytest

from support.browser import browser_page, lab, look_at_figures_and_stderr, needs_chromium  # noqa: F401  (fixtures)
from support.smoke import DECLARATIONS, SmokeNotebook


def tiny_bench(executed):
    """The out_dir of the points the smoke run measured and saved, and its smoke parameters."""
    settings = DECLARATIONS[executed.name].smoke_parameters
    executed.to_the_end()
    return (executed.path.parent / settings["out_dir"]).resolve(), settings


class TestSmokeRun(SmokeNotebook):
    notebook = "08_performance_analysis.ipynb"
    keeps_ss = True  # dense_traffic_is_model_size, and the benchmark files read below, count the bytes on the sockets

    @pytest.mark.browser
    @needs_chromium
    def test_jupyterlab_shows_its_figures_and_no_red(self, executed, lab, browser_page):
        look_at_figures_and_stderr(browser_page, lab, executed.path)

    @pytest.mark.notebook
    def test_tiny_bench_writes_well_formed_csv_and_json(self, executed):
        out, settings = tiny_bench(executed)
        with open(out / "results.csv") as file:
            rows = list(csv.DictReader(file))
        document = json.loads((out / "results.json").read_text())
        # 1 single-process baseline + the custom loop at each packing with 1 and 2 PS + model.fit at each packing
        packings = settings["steps_per_closure"]
        assert sorted((r["loop"], int(r["ps"]), int(r["steps_per_closure"])) for r in rows) == sorted(
            [("custom", ps, k) for ps in (1, 2) for k in packings] + [("fit", 1, k) for k in packings]
            + [("single-process", 0, max(packings))])
        assert len(document["results"]) == len(rows)
        for row, saved in zip(rows, document["results"]):
            assert float(row["samples_per_s_median"]) > 0
            assert float(row["samples_per_s_q1"]) <= float(row["samples_per_s_median"]) <= float(row["samples_per_s_q3"])
            assert float(row["samples_per_s_median"]) == pytest.approx(64 * float(row["steps_per_s_median"]))
            assert int(row["intervals"]) == settings["repeats"] == len(saved["samples_per_s_intervals"]), "one per round"
            assert (int(row["beside_workers"]), int(row["beside_ps"])) == (1, 2), "all timed on the one shape, with 2 PS"
            low, high = saved["ratio_to_single_process_interval"]
            assert low <= float(row["ratio_to_single_process"]) <= high and float(row["ratio_to_single_process"]) > 0
        assert document["settings"]["steps_per_closure"] == packings

    @pytest.mark.notebook
    def test_a_point_with_one_ps_keeps_every_variable_on_one_of_the_two(self, executed):
        out, _ = tiny_bench(executed)
        for row in json.loads((out / "results.json").read_text())["results"]:
            if row["loop"] == "single-process":
                continue
            held = {task: size for task, size in row["bytes_per_ps"].items() if size}
            if row["ps"] == 1:
                assert len(held) == 1, held
            else:  # the first kernel (401 KB) is split over both
                assert set(held) == {"ps:0", "ps:1"} and min(held.values()) > 150_000, held

    @pytest.mark.notebook
    def test_tiny_bench_describes_the_machine_and_measures_cpu_and_bytes(self, executed):
        out, _ = tiny_bench(executed)
        document = json.loads((out / "results.json").read_text())
        machine = document["machine"]
        assert machine["cores"] >= 1 and machine["memory_gib"] > 0
        assert machine["versions"]["tensorflow"].startswith("2.21")
        on_cluster = [r for r in document["results"] if r["loop"] != "single-process"]
        for row in on_cluster:
            assert set(row["cpu_per_task"]) == {"coordinator", "ps:0", "ps:1", "worker:0"}
            assert row["cpu_workers"] > 0 and row["cpu_ps"] > 0
            assert sum(row["bytes_per_ps"].values()) >= row["model_bytes"]  # the optimizer's and metrics' too
            assert row["analytic_bytes_per_step"] == 2 * row["model_bytes"]
            if row["measured_pull_bytes_per_step"] is not None:  # `ss` available: the sockets saw ~M each way
                assert 0.8 < row["measured_pull_bytes_per_step"] / row["model_bytes"] < 1.5
                assert 0.8 < row["measured_push_bytes_per_step"] / row["model_bytes"] < 1.5

    @pytest.mark.notebook
    def test_tiny_bench_plots_a_png(self, executed):
        out, _ = tiny_bench(executed)
        png = (out / "throughput.png").read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 20_000
