"""The measurements (measurements/): docs/measurements.md and every file that quotes a figure are what the records
render; each item keeps what its run's own files say; a run that leaves nothing is not recorded; the verdicts the
page prints (within or OVER a goal) can go either way."""
import json
import os
import sys
import types

import nbformat
import pytest

from labkit import verdict
from labkit.tools import doctor
from measurements import page, publish, records, runner
from measurements.items import Run, class_on_one_server, grading, notebooks, tests, workshop_day


def test_the_page_and_every_quoted_figure_are_what_the_records_render():
    recorded = records.read_all()
    assert page.PAGE.read_text() == page.render(recorded), "run `python -m measurements --render`"
    assert publish.publish(recorded, write=False) == [], "run `python -m measurements --render`"


def test_no_long_cell_lacks_a_time_note():
    recorded = records.read_all()
    missing = []
    for path in sorted((records.ROOT / "notebooks").glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        cells, timed = {cell.get("id") for cell in notebook.cells}, notebooks.timed_cells(notebook)
        missing += [f"{path.stem}: {cell['id']}" for cell in recorded.get(path.stem, {}).get("result", {}).get("long_cells", [])
                    if cell["seconds"] > notebooks.LONG_CELL_SECONDS and cell["id"] in cells and cell["id"] not in timed]
    assert missing == [], "a cell that runs longer than 20 s needs a time note ('*Next cell: ...*') in the markdown cell before it"


LOG = {"started": "2026-12-01 08:00 UTC", "ended": "2026-12-01 08:01 UTC", "seconds": 40, "load_average_before": [0.5],
       "mnist_source": "timing-standin"}


def test_the_test_times_come_from_what_each_pytest_call_recorded(tmp_path):
    for call, wall, tiers in [("unit", 50.0, {"unit": [95.0, 548]}),
                              ("all", 670.0, {"unit": [40.0, 548], "cluster": [500.0, 90], "notebook": [640.0, 230],
                                              "browser": [45.0, 9]})]:
        (tmp_path / f"{call}.json").write_text(json.dumps(
            {"marker_expression": call, "workers": 2, "wall_seconds": wall, "exit_status": 0,
             "tiers": {tier: {"seconds": seconds, "tests": {"passed": count - 1, "skipped": 1}}
                       for tier, (seconds, count) in tiers.items()}}))
    recorded = {"tests": {"log": LOG | {"import_tensorflow_s": 4.04}, "result": tests.result(None, tmp_path)}}
    lines = tests.section(recorded)
    assert any("load 0.50; a bare `import tensorflow` took 4.04 s just before" in line for line in lines), \
        "the machine's speed when the tests ran"
    assert "| `make test` (every tier, 2 workers) | 11.2 min | 548 tests, 40 s | 90 tests, 8.3 min | 230 tests, " \
           "10.7 min | 9 tests, 45 s |  |  |" in lines
    assert "| `make test-fast` (`-m unit`, 2 workers) | 50 s | 548 tests, 1.6 min |  |  |  |  |  |" in lines
    readme = ("*`make test` takes (not measured yet).*\n\n| `cluster` | start processes | |\n| `hub` | the class hub | 9 s |\n"
              "| `other` | a table | x |\n")
    assert publish.readme(readme, recorded) == ("*`make test` takes 11.2 min; `make test-fast` 50 s (a bare "
                                                "`import tensorflow` took 4.0 s there then).*"
                                                "\n\n| `cluster` | start processes | 8.3 min |\n| `hub` | the class hub | not measured yet |"
                                                "\n| `other` | a table | x |\n")
    assert not any("CPU" in line for line in lines), "a record without CPU seconds shows none"
    with_cpu = json.loads((tmp_path / "all.json").read_text())
    for tier, cpu in (("unit", 30.0), ("cluster", 420.0), ("notebook", 560.0), ("browser", 40.0)):
        with_cpu["tiers"][tier]["cpu_seconds"] = cpu
    with_cpu["heaviest_files"] = [{"file": "tests/test_notebook_11_embedding_tables.py", "seconds": 120.0,
                                   "cpu_seconds": 140.0}]
    (tmp_path / "all.json").write_text(json.dumps(with_cpu))
    cores = os.cpu_count()
    lines = tests.section({"tests": {"log": LOG, "result": tests.result(None, tmp_path)}})
    assert "| `make test` (every tier, 2 workers) | 11.2 min | 548 tests, 40 s (CPU 30 s) | 90 tests, 8.3 min (CPU 7.0 min) " \
           "| 230 tests, 10.7 min (CPU 9.3 min) | 9 tests, 45 s (CPU 40 s) |  |  |" in lines
    assert any(f"used 17.5 min of CPU in 11.2 min on {cores} cores, which were {1050 / (670 * cores):.0%} busy" in line
               for line in lines)
    assert "| `tests/test_notebook_11_embedding_tables.py` | 2.0 min | 2.3 min |" in lines
    (tmp_path / "all.json").write_text((tmp_path / "all.json").read_text().replace('"exit_status": 0', '"exit_status": 1'))
    assert tests.result(None, tmp_path) is None, "a failed call is not a measurement"


def sweep_folder(folder, row, results=None, durations=()):
    """``folder`` as `labkit sweep` leaves it after one point: results.csv, and the point's results and notebook."""
    (folder / "00").mkdir(parents=True)
    (folder / "results.csv").write_text(
        "point,status,error,seconds,peak_pss_mb,peak_rss_mb,peak_alone_mb,largest_tasks,accuracy\n" + row + "\n")
    if results is not None:
        (folder / "00" / "results.json").write_text(json.dumps(results))
    cells = [nbformat.v4.new_markdown_cell("Long.\n\n*Next cell: about 9 s with the defaults on a 2-core machine.*"),
             nbformat.v4.new_code_cell("# a comment\ntrain()"), nbformat.v4.new_code_cell("wait()")]
    for cell, seconds in zip(cells[1:], durations):
        cell.metadata["papermill"] = {"duration": seconds}
    nbformat.write(nbformat.v4.new_notebook(cells=cells), folder / "00" / "lab.ipynb")
    return folder


def test_a_notebook_run_is_kept_from_its_sweep_and_quoted_where_it_is_read(tmp_path):
    folder = sweep_folder(tmp_path, "00,ok,,108.4,4612,6000,4700,kernel=700 all-reduce worker:0=119,0.9",
                          {"accuracy": 0.9, "diverged": False}, durations=[3.0, 25.5])
    run = notebooks.result(Run("02_x", None), folder)
    assert run["largest_tasks"] == [["kernel", 700], ["all-reduce worker:0", 119]]
    assert run["results"] == {"accuracy": 0.9, "diverged": False}, "the values as recorded, not as CSV text"
    assert [(cell["first_line"], cell["seconds"], cell["time_note"]) for cell in run["long_cells"]] == [
        ("train()", 3.0, True), ("wait()", 25.5, False)]
    record = {"log": LOG, "result": run}
    assert notebooks.row("02_x", "02_x", {"02_x": record}) == (
        "| `02_x` | ok | 1.8 min | 4.6 GB | 4.7 GB | 6.0 GB | kernel 700 all-reduce worker:0 119 | "
        "2026-12-01 08:00 UTC, load 0.50 |")
    lab = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Lab\n\n*Runs in (to be measured).*"), nbformat.v4.new_code_cell("mnist()"),
        nbformat.v4.new_markdown_cell("*Next cell: about 1 s with the defaults on a 2-core machine.*"),
        nbformat.v4.new_code_cell("wait()")])
    lab.cells[3].id = run["long_cells"][1]["id"]
    published = publish.notebook_with(lab, run)
    assert "*Runs in about 1.8 minutes with its defaults on a 2-core machine, with full-size MNIST; 4.6 GB of memory" \
           in published.cells[0].source
    assert published.cells[2].source == "*Next cell: about 26 s with the defaults on a 2-core machine.*"
    lab.cells[0].source = "# Lab"
    with pytest.raises(ValueError, match="no '\\*Runs in ...\\*' sentence"):
        publish.notebook_with(lab, run)
    assert notebooks.result(Run("02_x", None), tmp_path / "nothing") is None


def test_the_small_laptop_runs_and_the_workshop_day_reach_the_page_and_the_peaks_table(tmp_path):
    def notebook_record(mnist, row):
        return {"log": LOG | {"mnist_source": mnist},
                "result": notebooks.result(None, sweep_folder(tmp_path / mnist, row, {}))}

    step = {"notebook": "00_welcome", "open_kernels": 1, "seconds": 5, "peak_pss_mb": 3100, "peak_alone_mb": 3200,
            "peak_rss_mb": 3500, "largest_tasks": [["kernel", 700], ["jupyter server", 60]]}
    recorded = {"00_welcome": notebook_record("timing-standin", "00,ok,,11.2,819,1500,900,kernel=700,"),
                "small-laptop-00_welcome": notebook_record("offline-subset", "00,ok,,9.0,650,1400,700,kernel=600,"),
                **{f"day-{setting}": {"log": LOG | {"mnist_source": "offline-subset"},
                                      "result": {"peak_pss_mb": pss, "peak_alone_mb": alone, "peak_rss_mb": 6000,
                                                 "steps": [step]}}
                   for setting, pss, alone in (("full-size", 4900, 5100), ("small-laptop", 2900, 2940))}}  # alone counts
    text = "\n".join(notebooks.section(recorded) + workshop_day.section(recorded))
    assert "| `00_welcome` | ok | 9 s | 0.7 GB | 0.7 GB | 1.4 GB | kernel 600 |" in text
    assert "| `ex1_basic_cluster` | not measured yet |" in text
    assert "The day's peak: **4.9 GB** (PSS), 5.1 GB alone, OVER the 5 GB the kit aims at" in text
    assert "The day's peak: **2.9 GB** (PSS), 2.9 GB alone, within the 3 GB the kit aims at" in text
    assert "| `00_welcome` | 1 | 5 s | 3.1 GB | 3.2 GB | 3.5 GB | kernel 700 jupyter server 60 |" in text
    table = publish.peaks(recorded)
    assert table["notebooks"]["00_welcome"] == {
        "peak_pss_mb": 819, "peak_alone_mb": 900, "peak_rss_mb": 1500, "minutes": 0.2, "ok": True,
        "measured": "2026-12-01 08:00 UTC", "mnist_source": "timing-standin", "load_average": 0.5,
        "small_laptop": {"peak_pss_mb": 650, "peak_alone_mb": 700, "peak_rss_mb": 1400, "minutes": 0.1, "ok": True,
                         "measured": "2026-12-01 08:00 UTC", "mnist_source": "offline-subset", "load_average": 0.5}}
    day = table["workshop_day"]  # what `labkit doctor --workshop` judges the 3-hour plan by, in the doctor's names
    assert day["plan"] == list(doctor.THREE_HOUR_PLAN)
    assert (day["full_size"]["peak_alone_mb"], day["small_laptop"]["peak_pss_mb"]) == (5100, 2900)
    assert doctor.day_peak(doctor.THREE_HOUR_PLAN, day, doctor.SMALL_LAPTOP) == 2940


def test_the_graded_class_hands_in_every_exercise_and_every_kind_of_hand_in():
    exercise_paths = sorted((records.ROOT / "exercises").glob("*.ipynb"))
    hand_ins = grading.hand_ins(exercise_paths)
    assert len(hand_ins) == len(grading.GRADED_CLASS) * len(exercise_paths)
    assert {path for _, path in hand_ins} == set(exercise_paths)
    assert set(hand_ins.values()) == set(grading.KINDS)


def test_a_graded_class_is_summed_up_by_kind_of_hand_in(tmp_path):
    rows = [{"learner": "learner1", "kind": "solution", "file": "ex1.ipynb", "status": "ok", "score": 4, "max_score": 4,
             "seconds": 20.5},
            {"learner": "learner2", "kind": "solution", "file": "ex1.ipynb", "status": "ok", "score": 3, "max_score": 4,
             "seconds": 40.0},
            {"learner": "learner6", "kind": "corrupt", "file": "ex3.ipynb", "status": "error", "score": 0,
             "max_score": 0, "seconds": 0.0}]
    (tmp_path / "grading.json").write_text(json.dumps(
        {"seconds": 290, "jobs": 2, "flags": {"cell_timeout": 120.0, "timeout": 600.0}, "peak_pss_mb": 3500,
         "peak_rss_mb": 5000, "peak_alone_mb": 3600, "largest_tasks": "kernel=900", "notebooks": rows}))
    text = "\n".join(grading.section({"grading": {"log": LOG, "result": grading.result(None, tmp_path)}}))
    assert "`labkit grade --jobs 2 --cell-timeout 120 --timeout 600` over a class of 3 notebooks: 3 learners," in text
    assert "**4.8 min** for the class; at its peak 3.5 GB of memory" in text
    assert "| the solution | 2 | ok (2) | 7 of 8 | 30, 40 |" in text
    assert "| a notebook file cut off halfway | 1 | error (1) | none graded | 0, 0 |" in text


def test_the_heading_spans_every_record_and_gives_the_total_only_when_every_run_was_timed():
    recorded = {"startup": {"log": LOG | {"load_average_before": [2.5]}, "result": {"machine": {"cores": 2}}},
                "stress": {"log": LOG | {"started": "2026-12-02 09:00 UTC", "ended": "2026-12-02 10:00 UTC",
                                         "seconds": 3600, "mnist_source": "offline-subset"}, "result": {}}}
    assert page.heading(recorded)[1:3] == [
        "- **Date**: 2026-12-01 08:00 UTC to 2026-12-02 10:00 UTC; the measurements below took 60.7 min in all",
        "- **Load average** at the start of each measurement: 0.50 to 2.50"]
    recorded["stress"]["log"]["seconds"] = None  # a run whose own time was not kept
    assert page.heading(recorded)[1] == "- **Date**: 2026-12-01 08:00 UTC to 2026-12-02 10:00 UTC"
    assert page.render({}).splitlines()[7] == "**Nothing measured yet**: run `make measurements`."


def test_a_run_is_recorded_with_its_log_and_one_that_leaves_nothing_is_not(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "RECORDED", tmp_path / "recorded")
    monkeypatch.setattr(runner, "RAW", tmp_path / "raw")
    item = types.SimpleNamespace(result=lambda run, folder: json.loads((folder / "out.json").read_text())
                                 if (folder / "out.json").exists() else None)
    writes = [sys.executable, "-c", "import json, os, sys; json.dump(os.environ['LABKIT_MNIST_SOURCE'], "
                                    "open(sys.argv[1] + '/out.json', 'w'))"]
    runner.measure_run(item, Run("writes", lambda folder: [*writes, str(folder)], "offline-subset"))
    runner.measure_run(item, Run("fails", lambda folder: [sys.executable, "-c", "raise SystemExit(3)"]))
    recorded = records.read_all()
    assert list(recorded) == ["writes"] and recorded["writes"]["result"] == "offline-subset"
    log = recorded["writes"]["log"]
    assert log["mnist_source"] == "offline-subset" and log["returncode"] == 0 and log["seconds"] >= 0
    assert set(log) >= {"started", "ended", "load_average_before", "load_average_after"}
    assert (tmp_path / "raw" / "fails").is_dir(), "a failed run's files stay for a look"


def test_a_notebooks_verdicts_are_rows_of_their_own_and_floats_are_rounded():
    record = verdict.interleaved("spread_vs_row_ranges", [0.34, 0.33, 0.35], [0.88, 0.87, 0.89],
                                 measure="the busiest server's share", higher_is_better=False).record()
    run = {"status": "ok", "seconds": 100.0, "peak_pss_mb": 3000, "peak_alone_mb": 3000, "peak_rss_mb": 4000,
           "largest_tasks": [["kernel", 800]], "long_cells": [],
           "results": {"hot_share": 0.8809268848497313, "pss_mb": [505.554944, 503.786496], "verdicts": [record]}}
    log = {"started": "2026-12-05 01:36 UTC", "load_average_before": [1.0, 1.0, 1.0]}
    text = "\n".join(notebooks.defaults_section("notebooks", "Notebooks",
                                                {"11_embedding_tables": {"log": log, "result": run}}))
    assert "| `hot_share` | 0.8809 |" in text and "| `pss_mb` | [505.6, 503.8] |" in text
    assert "| verdict `spread_vs_row_ranges` | wins: the busiest server's share, ratio 0.3" in text
    assert "over 3 blocks |" in text and "'verdict'" not in text


def class_round(learners, seconds, failed=None, peak_mb=3000):
    return {"learners": learners, "learner_peak_mb": [peak_mb] * learners, "hub_peak_mb": 150,
            "learners_peak_mb": peak_mb * learners, "all_peak_mb": peak_mb * learners + 150,
            "steps": [[{"notebook": "02_strategy_and_mnist", "seconds": seconds, "failed": failed}]] * learners}


def test_the_class_sizing_counts_only_rounds_within_twice_the_time_alone_and_with_no_failed_cell():
    result = {"cores": 2, "rounds": [class_round(1, 50, peak_mb=3500), class_round(2, 90), class_round(4, 100)]}
    assert class_on_one_server.class_sizing(result) == (3.5, 0.15, 2.0), "every round within twice the time alone"
    result["rounds"][2] = class_round(4, 101)
    assert class_on_one_server.class_sizing(result)[2] == 1.0, "4 learners took more than twice as long: 1 per core"
    result["rounds"][2] = class_round(4, 60, failed="code cell 30: error, CancelledError")
    assert class_on_one_server.class_sizing(result)[2] == 1.0, "a round with a failed cell sizes nothing"
    assert class_on_one_server.learners_for(32, 8, 3.5, 0.15, 1.0) == 8  # min(⌊(32 − 1 − 0.15) / 3.5⌋, 8)
    assert class_on_one_server.learners_for(16, 8, 3.5, 0.15, 1.0) == 4  # memory decides
    record = {"log": LOG, "result": {**result, "plan": ["00"], "memory_gb": 25.3}}
    text = "\n".join(class_on_one_server.section({"class": record}))
    assert "| 4 | 3.0 GB | 12.0 GB | 12.2 GB | `02_strategy_and_mnist`, 60 s | 60 s | `02_strategy_and_mnist` code " \
           "cell 30: error, CancelledError (4 learners) |" in text, "a failure shared by learners is listed once, counted"
    assert "| 128 GB | 32 | 32 |" in text, "k = 1 learner per core (the failed round of 4 counts not): 32, not 36"
    for round_ in result["rounds"][1:]:
        round_["steps"][0][0]["failed"] = "code cell 1: error"
    result["rounds"][0]["steps"] = [[{"notebook": "00_welcome", "seconds": 5, "failed": "code cell 1: error"}]]
    assert "Every round had a cell fail, so the page gives no sizing." in class_on_one_server.section({"class": record})
