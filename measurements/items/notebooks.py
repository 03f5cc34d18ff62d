"""Every notebook and exercise solution at its defaults, with full MNIST and in the small-laptop setting.

Each run is `labkit sweep` without -p: its run time, peak memory, the results it records, how long its long cells took.
"""
import csv
import re

import nbformat

from labkit.tools import results
from measurements.items import LABKIT, SMALL_LAPTOP, Run
from measurements.records import ROOT, gigabytes, largest_tasks, measured_at, minutes, tasks

FOLDERS = ("notebooks", "solutions")
SMALL_LAPTOP_PREFIX = "small-laptop-"
SWEEP_COLUMNS = ("point", "status", "error", "seconds", "peak_pss_mb", "peak_rss_mb", "peak_alone_mb", "largest_tasks")
# A time note: the last line of the markdown cell right before a long code cell, which it times.
TIME_NOTE = re.compile(r"\*Next cell: [^*]+\*")
# Results that depend on what a model learnt: not shown for a run on the timing stand-in, whose accuracies mean nothing.
LEARNT = re.compile(r"accuracy|to_target|diverged|^verdict_")
STAND_IN = "timing-standin"
LONG_CELL_SECONDS = 20  # a code cell that runs longer says so first, in a time note


def table(first="notebook"):
    """The head of a table of runs, its first column called ``first``."""
    return [f"| {first} | status | run time | peak memory (PSS) | alone (estimate) | RSS sum | largest tasks (PSS, MB) "
            "| measured |", "|---|---|---|---|---|---|---|---|"]


def shipped():
    """(folder, path) of every notebook and exercise solution, in the order they are measured."""
    return [(folder, path) for folder in FOLDERS for path in sorted((ROOT / folder).glob("*.ipynb"))]


def labkit_sweep(path, *parameters):
    """The command of a run of ``path`` by `labkit sweep` (at its defaults, without ``parameters``)."""
    return lambda folder: [*LABKIT, "sweep", str(path), *parameters, "--out", str(folder)]


def runs():
    return ([Run(path.stem, labkit_sweep(path)) for _, path in shipped()]
            + [Run(SMALL_LAPTOP_PREFIX + path.stem, labkit_sweep(path), SMALL_LAPTOP) for _, path in shipped()])


def result(run, folder):
    """The run's one point (`labkit sweep` wrote results.csv): status, seconds, peak memory, largest processes, recorded results, long cells."""
    if not (folder / "results.csv").exists():
        return None
    with open(folder / "results.csv", newline="") as file:
        [row] = list(csv.DictReader(file))
    point = folder / row["point"]
    executed = sorted(point.glob("*.ipynb"))
    return {"status": row["status"], "seconds": float(row["seconds"]),
            **{key: int(row[key]) for key in ("peak_pss_mb", "peak_alone_mb", "peak_rss_mb")},
            "largest_tasks": largest_tasks(row["largest_tasks"]),
            "results": results.load(point) if (point / "results.json").exists() else {},
            "long_cells": long_cells(nbformat.read(executed[0], as_version=4)) if executed else []}


def timed_cells(notebook):
    """{code cell id: the markdown cell whose time note times it}: each note times the next code cell."""
    timed = {}
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown" and TIME_NOTE.search(cell.source):
            following = next(after for after in notebook.cells[index + 1:] if after.cell_type == "code")
            timed[following.get("id")] = cell
    return timed


def long_cells(executed):
    """Each code cell of an executed notebook that has a time note or ran longer than LONG_CELL_SECONDS (papermill's
    time): its id, its first line of code, its seconds, whether it had a time note."""
    timed, found = timed_cells(executed), []
    for cell in executed.cells:
        seconds = cell.metadata.get("papermill", {}).get("duration") or 0.0
        if cell.cell_type == "code" and (cell.get("id") in timed or seconds > LONG_CELL_SECONDS):
            first = next((line for line in cell.source.splitlines() if line and not line.startswith("#")), "")
            found.append({"id": cell.get("id"), "first_line": first, "seconds": seconds, "time_note": cell.get("id") in timed})
    return found


def run_cells(record):
    """A run's cells in a table row: status, run time, PSS, alone, RSS, largest processes, when measured."""
    run = record["result"]
    return (f"{run['status']} | {minutes(run['seconds'])} | {gigabytes(run['peak_pss_mb'])} | "
            f"{gigabytes(run['peak_alone_mb'])} | {gigabytes(run['peak_rss_mb'])} | {tasks(run['largest_tasks'])} | "
            f"{measured_at(record)}")


def row(name, stem, recorded):
    return f"| `{stem}` | {run_cells(recorded[name])} |" if name in recorded else f"| `{stem}` | not measured yet | | | | | | |"


def defaults_section(folder, title, recorded):
    paths = sorted((ROOT / folder).glob("*.ipynb"))
    stand_in = [path.stem for path in paths if recorded.get(path.stem, {}).get("log", {}).get("mnist_source") == STAND_IN]
    lines = [f"## {title}", "",
             "`labkit sweep NOTEBOOK` with no parameters: wall time of the whole notebook (papermill) and the",
             "results the notebook records; peak memory as explained under \"Memory\" below."
             + (" Runs on the timing stand-in leave out what depends on what the model learnt (accuracies, steps to "
                "a target accuracy, verdicts on them): the stand-in's accuracies mean nothing." if stand_in else ""),
             "", *table()]
    details = []
    for path in paths:
        lines.append(row(path.stem, path.stem, recorded))
        kept = {key: value for key, value in recorded.get(path.stem, {}).get("result", {}).get("results", {}).items()
                if value not in (None, "") and not (path.stem in stand_in and LEARNT.search(key))}
        if kept:
            details += [f"### `{path.stem}`", "", "| result | value |", "|---|---|"]
            details += [f"| `{key}` | {shown(value)} |" for key, value in kept.items() if key != results.VERDICTS]
            details += [f"| verdict `{found['name']}` | {verdict_cell(found)} |" for found in kept.get(results.VERDICTS, [])]
            details += [""]
    return lines + [""] + details


def shown(value):
    """A recorded value as the page shows it: a float to 4 significant digits, a list element by element."""
    if isinstance(value, list):
        return "[" + ", ".join(shown(element) for element in value) + "]"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def verdict_cell(found):
    """A recorded verdict in a cell: what it found, its effect and interval, on how many seeds or blocks."""
    kind = "ratio" if found.get("ratio") else "difference"
    interval = ", ".join(shown(bound) if bound is not None else "n/a" for bound in found["interval"])
    return (f"{found['verdict']}: {found['measure']}, {kind} {shown(found['effect'])} [{interval}] over "
            f"{found['seeds']} {found['unit']}")


def section(recorded):
    return (defaults_section("notebooks", "Notebooks at their learner defaults", recorded)
            + defaults_section("solutions", "Exercise solutions at their defaults", recorded)
            + ["## Notebooks and solutions in the small-laptop setting", "",
               "The same runs with the 5,000-image offline MNIST subset (`LABKIT_MNIST_SOURCE=offline-subset`, what",
               "`make lab-small` sets). `labkit doctor --workshop` compares a laptop that will use the subset with "
               "these.", "", *table()]
            + [row(SMALL_LAPTOP_PREFIX + path.stem, path.stem, recorded) for _, path in shipped()] + [""])
