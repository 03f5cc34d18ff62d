"""The tests as CI runs them: `make test-fast` and `make test`, each call's wall time and each tier's test time."""
import json
import tomllib

from measurements.items import AS_CI, Run
from measurements.records import ROOT, measured_at, minutes, titled

# The pytest calls, by the file tests/support/tier_times.py writes for each: (its name, how the page names it).
CALLS = [("unit", "`make test-fast`"), ("all", "`make test`")]
TIERS = [marker.split(":")[0]
         for marker in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]]


def runs():
    return [Run("tests", lambda folder: ["make", "test-fast", "test"], AS_CI)]


def result(run, folder):
    """Each call's wall time, workers and tiers (seconds and number of tests), if both calls passed."""
    calls = {name: json.loads((folder / f"{name}.json").read_text())
             for name, _ in CALLS if (folder / f"{name}.json").exists()}
    if len(calls) < len(CALLS) or any(call["exit_status"] != 0 for call in calls.values()):
        return None
    return {name: {"marker_expression": call["marker_expression"], "workers": call["workers"],
                   "wall_seconds": call["wall_seconds"],
                   "tiers": {tier: {"seconds": times["seconds"], "tests": sum(times["tests"].values())}
                             for tier, times in call["tiers"].items()}} for name, call in calls.items()}


def tier_cell(times):
    return f"{times['tests']} test{'s' if times['tests'] != 1 else ''}, {minutes(times['seconds'])}"


def section(recorded):
    return titled("Tests (`make test-fast`, `make test`)", recorded.get("tests"), test_times)


def test_times(record):
    calls = record["result"]
    lines = [f"As CI runs them ({measured_at(record)}). A tier's time is its tests' setup, call and teardown",
              "seconds added up over the pytest-xdist workers, so with 2 workers a call's tiers add up to about",
              "twice its wall time.", "",
              "| pytest call | wall time | " + " | ".join(TIERS) + " |", "|---|---|" + "---|" * len(TIERS)]
    for name, title in CALLS:
        call = calls[name]
        cells = [tier_cell(call["tiers"][tier]) if tier in call["tiers"] else "" for tier in TIERS]
        workers = "1 process" if call["workers"] == 1 else f"{call['workers']} workers"
        selected = "every tier" if call["marker_expression"] == "all" else f"`-m {call['marker_expression']}`"
        lines.append(f"| {title} ({selected}, {workers}) | {minutes(call['wall_seconds'])} | " + " | ".join(cells) + " |")
    return lines + [""]
