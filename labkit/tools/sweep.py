"""``labkit sweep``: run a notebook over a grid of parameters with papermill, and gather the results.

    labkit sweep notebooks/03_custom_training_loop.ipynb -p num_workers 1 2 -p num_steps 200 400 --out runs/s

runs every combination (here 4 points), each as its own executed notebook in
``<out>/<point>/``. Each run gets ``results_dir`` = its point's directory, where the
notebook's ``labkit.tools.results.record(...)`` calls write ``results.json``. A point that fails is
reported and the sweep goes on. After every point ``<out>/results.csv`` is rewritten: one row
per point with its parameters, status, wall time, peak memory (labkit.tools.memory) and recorded results;
and ``<out>/verdicts.csv``: one row per point and verdict (``results.record_verdicts``). At the end the
sweep says which verdicts held (the same in every run that succeeded) and which did not.
With no ``-p`` at all it runs the notebook once with its defaults (a timing run).
"""
import collections
import csv
import difflib
import itertools
import json
import re
import time
from pathlib import Path

import papermill
import yaml
from tqdm.auto import tqdm

from labkit.tools import results
from labkit.tools.memory import PeakMemory

RESULTS_PARAMETER = "results_dir"


def parse_parameters(groups) -> dict[str, list]:
    """``[["num_steps", "100", "200"], ...]`` (from ``-p``) -> {"num_steps": [100, 200]}; values read as YAML."""
    grid = {}
    for group in groups:
        name, *values = group
        if not values:
            raise ValueError(f"-p {name} has no values. Give at least one, e.g. -p {name} 1 2.")
        if name in grid:
            raise ValueError(f"-p {name} is given twice. Put all its values after one -p.")
        grid[name] = [yaml.safe_load(value) for value in values]
    return grid


def points(grid: dict[str, list]) -> list[dict]:
    """Every combination of the grid's values, the first parameter varying slowest."""
    return [dict(zip(grid, values)) for values in itertools.product(*grid.values())]


def point_name(index, point):
    """A directory name for a point, e.g. ``02-num_workers=2-num_steps=400``."""
    def text(value):
        return ",".join(map(str, value)) if isinstance(value, list) else str(value)
    parts = [f"{index:02d}"] + [f"{name}={text(value)}" for name, value in point.items()]
    return re.sub(r"[^A-Za-z0-9_.=,+-]", "_", "-".join(parts))


def check(notebook, grid):
    """Refuse a missing notebook or an unknown parameter; say whether the notebook records results."""
    notebook = Path(notebook)
    if not notebook.is_file():
        raise ValueError(f"no notebook at {notebook}. Give the path of an .ipynb file, e.g. "
                         "notebooks/01_tf_config_and_cluster.ipynb.")
    known = papermill.inspect_notebook(str(notebook))
    for name in grid:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"{notebook.name} has no parameter {name!r}.{hint} "
                             f"Its parameters: {', '.join(known) or 'none (no cell tagged parameters)'}.")
    if RESULTS_PARAMETER in grid:
        raise ValueError(f"{RESULTS_PARAMETER} is set by the sweep itself (one directory per point); "
                         "do not pass it.")
    return RESULTS_PARAMETER in known


def run_point(notebook, point, directory, kernel_name="pslab", records_results=True) -> dict:
    """Execute the notebook at one point into ``directory``; return its row for results.csv."""
    directory.mkdir(parents=True)
    parameters = dict(point, **({RESULTS_PARAMETER: str(directory)} if records_results else {}))
    began, row = time.monotonic(), {"point": directory.name, **point}
    with PeakMemory() as memory:
        try:
            papermill.execute_notebook(str(notebook), str(directory / notebook.name), parameters=parameters,
                                       kernel_name=kernel_name, cwd=str(notebook.parent),
                                       progress_bar=False)
            row.update(status="ok", error="")
        except Exception as error:  # a failed point is reported; the sweep goes on
            row.update(status="failed", error=describe(error))
    row.update(seconds=round(time.monotonic() - began, 1), **memory.peaks())
    return row | results.without_verdicts(results.load(directory))


def verdict_rows(row, directory) -> list[dict]:
    """One row per verdict the run in ``directory`` recorded: its point (whose parameters are in results.csv's
    row of that point, and in its name) and status, then the verdict."""
    found = results.load(directory).get(results.VERDICTS, [])
    return [{"point": row["point"], "status": row["status"], **flat_verdict(record)} for record in found]


def flat_verdict(record) -> dict:
    """A verdict record with its interval as two columns, interval_lo and interval_hi."""
    flat = {}
    for key, value in record.items():
        if key == "interval":
            flat["interval_lo"], flat["interval_hi"] = value
        else:
            flat[key] = value
    return flat


def verdicts_across_runs(rows, runs) -> dict[str, dict]:
    """For each verdict name in ``rows`` (``verdict_rows``), over the ``runs`` that succeeded: how many gave each
    verdict ({"wins": 2, ...}). One held if every run recorded it, and the same: ``held(counts, runs)``."""
    counts = collections.defaultdict(collections.Counter)
    for row in rows:
        if row["status"] == "ok":
            counts[row["name"]][row["verdict"]] += 1
    return {name: dict(found) for name, found in counts.items()}


def held(counts, runs) -> bool:
    """Whether one verdict name's ``counts`` (from ``verdicts_across_runs``) came out the same in all ``runs``."""
    return list(counts.values()) == [runs]


def say_verdicts(across, runs) -> str:
    """Which verdicts held over ``runs`` successful runs and which did not, in two lines."""
    def counted(counts):
        missing = runs - sum(counts.values())
        said = ", ".join(f"{found} {count}" for found, count in counts.items())
        return said + (f", not recorded {missing}" if missing else "")
    kept = [f"{name} ({next(iter(counts))})" for name, counts in across.items() if held(counts, runs)]
    varied = [f"{name} ({counted(counts)})" for name, counts in across.items() if not held(counts, runs)]
    return (f"verdicts held in all {runs} successful runs: {', '.join(kept) or 'none'}\n"
            f"verdicts that did not: {', '.join(varied) or 'none'}")


def describe(error):
    """One line for results.csv: the notebook's exception and the first line of its message."""
    name, message = getattr(error, "ename", type(error).__name__), getattr(error, "evalue", str(error))
    return f"{name}: {(message.strip().splitlines() or [''])[0]}"[:300]


def run(notebook, grid, out_dir, kernel_name="pslab") -> list[dict]:
    """Run every point of the grid; write ``results.csv`` and ``verdicts.csv`` after each; return the rows."""
    notebook, out_dir = Path(notebook).resolve(), Path(out_dir).resolve()
    records_results = check(notebook, grid)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ValueError(f"{out_dir} is not empty (an earlier sweep?). Choose a new --out directory.")
    if not records_results:
        print(f"note: {notebook.name} has no {RESULTS_PARAMETER!r} parameter, so results.csv gets only "
              "status, time and memory. See labkit/tools/results.py to make it record its results.")
    rows, verdicts = [], []
    grid_points = points(grid)
    with tqdm(grid_points, desc=f"sweep {notebook.stem}", unit="run") as progress:
        for index, point in enumerate(progress):
            name = point_name(index, point)
            progress.set_postfix_str(name)
            row = run_point(notebook, point, out_dir / name, kernel_name, records_results)
            rows.append(row)
            write_csv(rows, out_dir / "results.csv")
            verdicts += verdict_rows(row, out_dir / name)
            if verdicts:
                write_csv(verdicts, out_dir / "verdicts.csv")
            tqdm.write(f"{name}: {row['status']} in {row['seconds']} s"
                       + (f" ({row['error']})" if row["error"] else ""))
    failed = [row["point"] for row in rows if row["status"] != "ok"]
    print(f"{len(rows) - len(failed)} of {len(rows)} runs succeeded; results in {out_dir / 'results.csv'}"
          + (f"; failed: {', '.join(failed)} (their executed notebooks show the error)" if failed else ""))
    if verdicts:
        succeeded = len(rows) - len(failed)
        print(f"{say_verdicts(verdicts_across_runs(verdicts, succeeded), succeeded)}\n"
              f"each run's verdicts are in {out_dir / 'verdicts.csv'}")
    return rows


def write_csv(rows, path):
    """Rows with possibly different keys as one CSV: the union of the columns, in first-seen order; a list as its JSON text."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=columns)
        writer.writeheader()
        writer.writerows({key: json.dumps(value) if isinstance(value, list) else value for key, value in row.items()}
                         for row in rows)
