"""The tests as CI runs them: `make test-fast` and `make test`, each call's wall time and each tier's test time and CPU.

Also the test files of `make test` that used the most CPU."""
import json
import os
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
                   "wall_seconds": call["wall_seconds"], "cores": os.cpu_count(),
                   "tiers": {tier: {"seconds": times["seconds"], "cpu_seconds": times.get("cpu_seconds"),
                                    "tests": sum(times["tests"].values())}
                             for tier, times in call["tiers"].items()},
                   "heaviest_files": call.get("heaviest_files", [])} for name, call in calls.items()}


def tier_cell(times):
    cpu = f" (CPU {minutes(times['cpu_seconds'])})" if times.get("cpu_seconds") is not None else ""
    return f"{times['tests']} test{'s' if times['tests'] != 1 else ''}, {minutes(times['seconds'])}{cpu}"


def section(recorded):
    return titled("Tests (`make test-fast`, `make test`)", recorded.get("tests"), test_times)


def test_times(record):
    calls = record["result"]
    lines = [f"As CI runs them ({measured_at(record)}). A tier's time is its tests' setup, call and teardown",
              "seconds added up over the pytest-xdist workers, so a call's tiers add up to about its wall time",
              "times its workers.", "",
              "| pytest call | wall time | " + " | ".join(TIERS) + " |", "|---|---|" + "---|" * len(TIERS)]
    for name, title in CALLS:
        call = calls[name]
        cells = [tier_cell(call["tiers"][tier]) if tier in call["tiers"] else "" for tier in TIERS]
        workers = "1 process" if call["workers"] == 1 else f"{call['workers']} workers"
        selected = "every tier" if call["marker_expression"] == "all" else f"`-m {call['marker_expression']}`"
        lines.append(f"| {title} ({selected}, {workers}) | {minutes(call['wall_seconds'])} | " + " | ".join(cells) + " |")
    return lines + [""] + cpu_lines(calls["all"])


def cpu_lines(call):
    """Where `make test`'s CPU went: its share of the cores' time, and the test files that used the most."""
    if not call.get("heaviest_files"):
        return []
    cpu = sum(times["cpu_seconds"] for times in call["tiers"].values())
    busy = cpu / (call["wall_seconds"] * call["cores"])
    lines = [f"A test's CPU is what its phases used in the pytest process that ran them and in every process they "
             f"started (kernels, tasks, programs), counted once each ended and was waited for (a process left to the "
             f"system, such as a detached one, is not). `make test`'s tests used {minutes(cpu)} "
             f"of CPU in {minutes(call['wall_seconds'])} on {call['cores']} cores, which were {busy:.0%} busy"
             + (": the run lasts as long as the CPU its tests need." if busy >= 0.8 else
                ": waiting, not CPU, sets part of the run's length.") + " The test files that used the most:", "",
             "| test file | test time | CPU |", "|---|---|---|"]
    lines += [f"| `{row['file']}` | {minutes(row['seconds'])} | {minutes(row['cpu_seconds'])} |"
              for row in call["heaviest_files"]]
    return lines + [""]
