"""The speed benchmark through notebook 08 (`labkit bench --report`): every point's medians, as a table."""

from measurements.items import LABKIT, Run
from measurements.records import json_file, measured_at, titled


def runs():
    return [Run("bench-report", lambda folder: [*LABKIT, "bench", "--report", "--out", str(folder)])]


def result(run, folder):
    return json_file(folder / "results.json")


def section(recorded):
    return titled("Speed benchmark (`labkit bench --report`, notebook 08)", recorded.get("bench-report"), points)


def points(record):
    from labkit.bench.files import format_table

    settings = ", ".join(f"{key} {value}" for key, value in record["result"]["settings"].items())
    return [f"Settings: {settings} ({measured_at(record)}). Medians of the timed intervals;",
            "`runs/measurements/bench-report/results.csv` has every column.", "",
            "```", format_table(record["result"]["results"]), "```", ""]
