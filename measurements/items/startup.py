"""Cluster start-up against a bare `import tensorflow` (`labkit bench startup`); its record names the machine too."""

from measurements.items import LABKIT, Run
from measurements.records import json_file, measured_at, titled


def runs():
    return [Run("startup", lambda folder: [*LABKIT, "bench", "startup", "--out", str(folder)])]


def result(run, folder):
    return json_file(folder / "startup.json")


def section(recorded):
    return titled("Cluster start-up (`labkit bench startup`)", recorded.get("startup"), timings)


def timings(record):
    startup = record["result"]
    shape = f"{startup['num_workers']} workers + {startup['num_ps']} ps, started in parallel"
    return [f"Median of {startup['repeats']} rounds, the two timings alternating ({measured_at(record)}).", "",
            "| what | seconds |", "|---|---|",
            f"| bare `python -c \"import tensorflow\"` | {startup['import_tensorflow_s']:.2f} |",
            f"| cluster start-to-ready, {shape} | {startup['cluster_ready_s']:.2f} |",
            f"| ratio, start-to-ready ÷ bare import | {startup['ratio']:.2f} |", ""]
