"""The figures other files quote, written from the records: the README, the notebooks, notebook_peaks.json.

The README's test times, each notebook's "*Runs in ...*" sentence and time notes, and
labkit/tools/notebook_peaks.json (what `labkit doctor --workshop` compares with free memory). Each file is
rewritten only where a record says something else.
"""
import json
import re

import nbformat

from labkit.tools.doctor import THREE_HOUR_PLAN
from measurements.items import tests, workshop_day
from measurements.items.notebooks import SMALL_LAPTOP_PREFIX, TIME_NOTE, shipped, timed_cells
from measurements.records import ROOT, as_shown, gigabytes, minutes

README = ROOT / "README.md"
PEAKS = ROOT / "labkit" / "tools" / "notebook_peaks.json"
# What the README's Tests section quotes: the two commands' wall times, and each tier's test time in `make test`.
TEST_TIMES_LINE = re.compile(r"\*`make test` takes [^*]+\*")
TIER_ROW = re.compile(r"^(\| `(\w+)` \|[^|]+\|)[^|\n]*\|$", re.MULTILINE)
FIRST_LINE = re.compile(r"\*Runs in [^*]+\*")


def readme(text, recorded):
    """The README's ``text`` with the test times of the tests' record."""
    if "tests" not in recorded:
        return text
    calls, log = recorded["tests"]["result"], recorded["tests"]["log"]
    speed = log.get("import_tensorflow_s")
    at_speed = f" (a bare `import tensorflow` took {speed:.1f} s there then)" if speed else ""
    line = (f"*`make test` takes {minutes(calls['all']['wall_seconds'])}; `make test-fast` "
            f"{minutes(calls['unit']['wall_seconds'])}{at_speed}.*")
    tiers = calls["all"]["tiers"]
    text = TEST_TIMES_LINE.sub(line, text)
    def tier_time(tier):
        return minutes(tiers[tier]["seconds"]) if tier in tiers else "not measured yet"

    return TIER_ROW.sub(lambda row: f"{row[1]} {tier_time(row[2])} |" if row[2] in tests.TIERS else row[0], text)


def first_line(seconds, pss_gb, uses_mnist):
    """The sentence a notebook's first cell states about its run at the defaults."""
    run_time = "under 1 minute" if seconds < 60 else f"about {seconds / 60:.1f} minutes"
    data = ", with full-size MNIST" if uses_mnist else ""
    return (f"*Runs in {run_time} with its defaults on a 2-core machine{data}; {pss_gb} of memory at its peak "
            "(all its processes, PSS; [docs/measurements.md](../docs/measurements.md)).*")


def time_note(seconds):
    return f"*Next cell: about {minutes(seconds)} with the defaults on a 2-core machine.*"


def uses_mnist(notebook):
    return any("mnist" in cell.source.lower() for cell in notebook.cells if cell.cell_type == "code")


def notebook_with(notebook, run):
    """``notebook`` with the run time and memory of its ``run`` (a record's result) in its first cell's "*Runs in
    ...*" sentence, and each time note with the seconds of the cell it times."""
    if run["status"] == "ok":
        stated = FIRST_LINE.search(notebook.cells[0].source)
        if not stated:
            raise ValueError("its first cell has no '*Runs in ...*' sentence to replace: add one")
        line = first_line(as_shown(run["seconds"]), gigabytes(run["peak_pss_mb"]), uses_mnist(notebook))
        notebook.cells[0].source = FIRST_LINE.sub(lambda _: line, notebook.cells[0].source, count=1)
    seconds = {cell["id"]: cell["seconds"] for cell in run.get("long_cells", [])}
    for cell_id, note_cell in timed_cells(notebook).items():
        if cell_id in seconds:
            note_cell.source = TIME_NOTE.sub(lambda _: time_note(seconds[cell_id]), note_cell.source, count=1)
    return notebook


PEAKS_KEYS = ("peak_pss_mb", "peak_alone_mb", "peak_rss_mb")


def when(log):
    """A peak's when, with which MNIST and under what load."""
    return {"measured": log["started"], "mnist_source": log["mnist_source"], "load_average": log["load_average_before"][0]}


def peak_entry(record):
    """A notebook run's entry in the peaks table."""
    run = record["result"]
    return {**{key: run[key] for key in PEAKS_KEYS}, "minutes": round(run["seconds"] / 60, 1), "ok": run["status"] == "ok",
            **when(record["log"])}


def peaks(recorded):
    """labkit/tools/notebook_peaks.json: each notebook's and solution's peaks at its defaults (full-size MNIST and,
    under "small_laptop", the offline subset), and the workshop day's, by the doctor's names of the settings."""
    measured = {}
    for _, path in shipped():
        if path.stem in recorded:
            measured[path.stem] = peak_entry(recorded[path.stem])
            if SMALL_LAPTOP_PREFIX + path.stem in recorded:
                measured[path.stem]["small_laptop"] = peak_entry(recorded[SMALL_LAPTOP_PREFIX + path.stem])
    day = {"plan": list(THREE_HOUR_PLAN)}
    for setting, *_ in workshop_day.SETTINGS:
        record = recorded.get(f"day-{setting}")
        if record:
            day[setting.replace("-", "_")] = {**{key: record["result"][key] for key in PEAKS_KEYS}, **when(record["log"])}
    return {"about": "Peak memory (MB) and run time of each notebook and solution at its defaults, with full-size "
                     "MNIST and (small_laptop) with the offline subset of `make lab-small`; and of the workshop day "
                     "(the 3-hour plan in one JupyterLab) in both settings. Written by `make measurements` "
                     "(measurements/publish.py) with docs/measurements.md: never edit.",
            "notebooks": measured, "workshop_day": day}


def publish(recorded, write=True):
    """Write the figures of ``recorded`` into the files that quote them (only if ``write``); return the files
    that differed."""
    wanted = {README: readme(README.read_text(), recorded), PEAKS: json.dumps(peaks(recorded), indent=1) + "\n"}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        if path.stem in recorded:
            try:
                notebook = notebook_with(nbformat.read(path, as_version=4), recorded[path.stem]["result"])
            except ValueError as error:
                raise ValueError(f"{path.name}: {error}") from None
            wanted[path] = nbformat.writes(notebook) + "\n"
    differing = [path for path, text in wanted.items() if path.read_text() != text]
    if write:
        for path in differing:
            path.write_text(wanted[path])
    return [path.relative_to(ROOT).as_posix() for path in differing]
