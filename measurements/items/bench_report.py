"""The speed benchmark through notebook 08 (`labkit bench --report`): every point's medians, as a table."""
import json

from measurements.items import LABKIT, Run
from measurements.records import measured_at


def runs():
    return [Run("bench-report", lambda folder: [*LABKIT, "bench", "--report", "--out", str(folder)])]


def result(run, folder):
    path = folder / "results.json"
    return json.loads(path.read_text()) if path.exists() else None


def section(recorded):
    lines = ["## Speed benchmark (`labkit bench --report`, notebook 08)", ""]
    if "bench-report" not in recorded:
        return lines + ["Not measured yet.", ""]
    from labkit.bench.files import format_table

    document = recorded["bench-report"]["result"]
    settings = ", ".join(f"{key} {value}" for key, value in document["settings"].items())
    return lines + [f"Settings: {settings} ({measured_at(recorded['bench-report'])}). Medians of the timed intervals;",
                    "`runs/measurements/bench-report/results.csv` has every column.", "",
                    "```", format_table(document["results"]), "```", ""]
