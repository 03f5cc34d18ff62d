"""`labkit sweep` runs a real papermill grid, goes on past a failing point and gathers results.csv and
verdicts.csv, and says which verdicts held in every run; `labkit.tools.results.record` and `record_verdicts`
are the one way a notebook records its results and its verdicts."""
import csv
import json

import nbformat
import numpy as np
import pytest

from labkit import verdict
from labkit.tools import cli, results, sweep


def write_notebook(path):
    """A tiny notebook with a parameters cell: it records a verdict, then fails for x == 2 and records 2 * x
    otherwise."""
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "pslab", "display_name": "pslab", "language": "python"}
    parameters = nbformat.v4.new_code_cell("x = 1\nlabel = 'a'\nresults_dir = None")
    parameters.metadata["tags"] = ["parameters"]
    notebook.cells = [
        nbformat.v4.new_code_cell("import labkit\nfrom labkit import verdict\nfrom labkit.tools import results"),
        parameters,
        nbformat.v4.new_code_cell("results.record_verdicts(results_dir, [verdict.paired(\n"
                                  "    'x_above_one', [x, x + 0.1, x + 0.2], [1.0, 1.0, 1.0], measure='x')])"),
        nbformat.v4.new_code_cell("assert x != 2, 'x must not be 2'"),
        nbformat.v4.new_code_cell("results.record(results_dir, doubled=2 * x, label=label)"),
    ]
    nbformat.write(notebook, path)
    return path


@pytest.mark.notebook
def test_a_grid_runs_every_point_goes_on_past_a_failure_and_gathers_one_csv(tmp_path, capsys):
    notebook = write_notebook(tmp_path / "tiny.ipynb")
    with pytest.raises(SystemExit) as exited:  # a failed point makes the command fail, after all points ran
        cli.main(["sweep", str(notebook), "-p", "x", "2", "3", "-p", "label", "b", "--out", str(tmp_path / "out")])
    assert exited.value.code == 1
    with open(tmp_path / "out" / "results.csv") as file:
        rows = list(csv.DictReader(file))
    assert [(row["x"], row["status"], row["doubled"]) for row in rows] == [("2", "failed", ""), ("3", "ok", "6")]
    assert all(row["label"] == "b" for row in rows)
    assert rows[0]["error"] == "AssertionError: x must not be 2"
    assert all(float(row["seconds"]) > 0 and 0 < int(row["peak_pss_mb"]) <= int(row["peak_rss_mb"]) for row in rows)
    assert all(row["largest_tasks"].startswith("kernel=") for row in rows)
    for row in rows:  # one executed notebook per point, the failed one included
        executed = nbformat.read(tmp_path / "out" / row["point"] / "tiny.ipynb", as_version=4)
        assert bool(executed.metadata.papermill.exception) == (row["status"] == "failed")
    with open(tmp_path / "out" / "verdicts.csv") as file:  # one row per run and verdict, the failed run's too
        verdicts = list(csv.DictReader(file))
    assert [(row["point"], row["status"], row["name"], row["verdict"]) for row in verdicts] == [
        (rows[0]["point"], "failed", "x_above_one", "wins"), (rows[1]["point"], "ok", "x_above_one", "wins")]
    assert float(verdicts[1]["effect"]) == pytest.approx(2.1) and float(verdicts[1]["interval_lo"]) > 0
    printed = capsys.readouterr().out
    assert "1 of 2 runs succeeded" in printed
    assert "verdicts held in all 1 successful runs: x_above_one (wins)" in printed


def test_an_unknown_parameter_is_refused_with_a_suggestion(tmp_path):
    notebook = write_notebook(tmp_path / "tiny.ipynb")
    with pytest.raises(ValueError, match="no parameter 'lable'. Did you mean 'label'"):
        sweep.run(notebook, {"lable": ["c"]}, tmp_path / "out")
    with pytest.raises(ValueError, match="set by the sweep itself"):
        sweep.run(notebook, {"results_dir": ["/tmp"]}, tmp_path / "out")
    with pytest.raises(ValueError, match="no notebook at"):
        sweep.run(tmp_path / "missing.ipynb", {}, tmp_path / "out")


def test_parameters_are_read_as_yaml_and_the_grid_is_their_product():
    grid = sweep.parse_parameters([["num_steps", "100", "200"], ["models", "[mlp, lm]"], ["rate", "0.5"]])
    assert grid == {"num_steps": [100, 200], "models": [["mlp", "lm"]], "rate": [0.5]}
    assert sweep.points(grid) == [{"num_steps": 100, "models": ["mlp", "lm"], "rate": 0.5},
                                  {"num_steps": 200, "models": ["mlp", "lm"], "rate": 0.5}]
    assert sweep.point_name(3, {"models": ["mlp", "lm"], "path": "a b/c"}) == "03-models=mlp,lm-path=a_b_c"
    with pytest.raises(ValueError, match="has no values"):
        sweep.parse_parameters([["num_steps"]])
    with pytest.raises(ValueError, match="given twice"):
        sweep.parse_parameters([["a", "1"], ["a", "2"]])


def test_record_writes_plain_values_and_adds_to_earlier_ones(tmp_path):
    results.record(tmp_path, accuracy=np.float32(0.5), steps=np.int64(300), ok=np.bool_(True))
    results.record(tmp_path, model="mlp", accuracy=0.75)
    assert json.loads((tmp_path / results.FILE_NAME).read_text()) == \
        {"accuracy": 0.75, "steps": 300, "ok": True, "model": "mlp"}
    assert results.record(None, accuracy=0.5) == {"accuracy": 0.5}  # a learner's run writes nothing


def test_record_keeps_a_list_of_plain_values_one_per_task(tmp_path):
    results.record(tmp_path, pss_mb=[np.float64(510.5), 498, None])
    assert json.loads((tmp_path / results.FILE_NAME).read_text()) == {"pss_mb": [510.5, 498, None]}


@pytest.mark.parametrize("values, error", [({"accuracy": [[0.5], [0.6]]}, TypeError),
                                           ({"accuracy": {"a": 1}}, TypeError),
                                           ({"bad name": 1}, ValueError)])
def test_record_refuses_what_one_csv_column_cannot_hold(tmp_path, values, error):
    with pytest.raises(error):
        results.record(tmp_path, **values)
    assert not (tmp_path / results.FILE_NAME).exists()


def wins_by(gain, name="gain", comparisons=2):
    return verdict.paired(name, [0.9 + gain] * 3, [0.9] * 3, measure="test accuracy", distinct_test_examples=10_000,
                          comparisons=comparisons)


def test_record_verdicts_keeps_one_entry_per_name_beside_the_values(tmp_path):
    results.record(tmp_path, accuracy=0.9)
    results.record_verdicts(tmp_path, [wins_by(0.02), wins_by(-0.02, "other")])
    records = results.record_verdicts(tmp_path, [wins_by(0.0001)])  # the same name again: it replaces the first
    recorded = results.load(tmp_path)
    assert [(found["name"], found["verdict"]) for found in recorded["verdicts"]] == [("other", "loses"),
                                                                                   ("gain", "cannot tell")]
    assert records == [wins_by(0.0001).record()] and recorded["accuracy"] == 0.9
    assert results.without_verdicts(recorded) == {"accuracy": 0.9}
    assert results.record_verdicts(None, [wins_by(0.02)])[0]["verdict"] == "wins"  # a learner's run writes nothing
    with pytest.raises(ValueError, match="3 verdicts are recorded, but other, gain are corrected for fewer"):
        results.record_verdicts(tmp_path, [wins_by(0.02, "third", comparisons=3)])  # three in all now


@pytest.mark.parametrize("verdicts, match", [
    ([wins_by(0.02), wins_by(0.03)], "share a name"),
    ([wins_by(0.02).record() | {"effect": 0.0001}], "below the resolution floor"),  # a typed, wrong verdict
    ([wins_by(0.02, comparisons=1), wins_by(0.02, "other")], "gain is corrected for fewer comparisons"),
])
def test_record_verdicts_refuses_two_of_one_name_and_a_verdict_its_numbers_do_not_allow(tmp_path, verdicts, match):
    with pytest.raises(ValueError, match=match):
        results.record_verdicts(tmp_path, verdicts)
    with pytest.raises(ValueError, match="record_verdicts"):
        results.record(tmp_path, verdicts="wins")
    assert not (tmp_path / results.FILE_NAME).exists()


def test_a_sweep_says_which_verdicts_held_in_every_successful_run():
    def row(run, name, found, status="ok"):
        return {"point": run, "status": status, "name": name, "verdict": found}
    rows = [row("00", "speed", "wins"), row("01", "speed", "wins"), row("02", "speed", "loses", "failed"),
            row("00", "accuracy", "wins"), row("01", "accuracy", "cannot tell"), row("00", "bytes", "wins")]
    across = sweep.verdicts_across_runs(rows, 2)
    assert across == {"speed": {"wins": 2}, "accuracy": {"wins": 1, "cannot tell": 1}, "bytes": {"wins": 1}}
    assert [name for name, counts in across.items() if sweep.held(counts, 2)] == ["speed"]
    assert sweep.say_verdicts(across, 2) == ("verdicts held in all 2 successful runs: speed (wins)\n"
                                             "verdicts that did not: accuracy (wins 1, cannot tell 1), "
                                             "bytes (wins 1, not recorded 1)")
