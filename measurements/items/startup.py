"""Cluster start-up against a bare `import tensorflow` (`labkit bench startup`); its record names the machine too."""
import json

from measurements.items import LABKIT, Run
from measurements.records import measured_at


def runs():
    return [Run("startup", lambda folder: [*LABKIT, "bench", "startup", "--out", str(folder)])]


def result(run, folder):
    path = folder / "startup.json"
    return json.loads(path.read_text()) if path.exists() else None


def section(recorded):
    lines = ["## Cluster start-up (`labkit bench startup`)", ""]
    if "startup" not in recorded:
        return lines + ["Not measured yet.", ""]
    startup = recorded["startup"]["result"]
    shape = f"{startup['num_workers']} workers + {startup['num_ps']} ps, started in parallel"
    return lines + [f"Median of {startup['repeats']} rounds, the two timings alternating "
                    f"({measured_at(recorded['startup'])}).", "",
                    "| what | seconds |", "|---|---|",
                    f"| bare `python -c \"import tensorflow\"` | {startup['import_tensorflow_s']:.2f} |",
                    f"| cluster start-to-ready, {shape} | {startup['cluster_ready_s']:.2f} |",
                    f"| ratio, start-to-ready ÷ bare import | {startup['ratio']:.2f} |", ""]
