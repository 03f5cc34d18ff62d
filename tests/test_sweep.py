"""`labkit sweep` runs a real papermill grid, goes on past a failing point and gathers results.csv;
`labkit.tools.results.record` is the one way a notebook records its results."""
import csv
import json

import nbformat
import numpy as np
import pytest

from labkit.tools import cli, results, sweep


def write_notebook(path):
    """A tiny notebook with a parameters cell: it fails for x == 2 and records 2 * x otherwise."""
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "pslab", "display_name": "pslab", "language": "python"}
    parameters = nbformat.v4.new_code_cell("x = 1\nlabel = 'a'\nresults_dir = None")
    parameters.metadata["tags"] = ["parameters"]
    notebook.cells = [
        nbformat.v4.new_code_cell("import labkit\nfrom labkit.tools import results"),
        parameters,
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
    assert "1 of 2 runs succeeded" in capsys.readouterr().out


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


@pytest.mark.parametrize("values, error", [({"accuracy": [0.5, 0.6]}, TypeError),
                                           ({"accuracy": {"a": 1}}, TypeError),
                                           ({"bad name": 1}, ValueError)])
def test_record_refuses_what_one_csv_column_cannot_hold(tmp_path, values, error):
    with pytest.raises(error):
        results.record(tmp_path, **values)
    assert not (tmp_path / results.FILE_NAME).exists()
