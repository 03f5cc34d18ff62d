"""The points' results as files: CSV and JSON with the machine they were measured on, and a text table."""
import csv
import json
import os
import platform
from pathlib import Path

import psutil

import labkit
from labkit.bench.workloads import MODELS


def machine():
    """What the numbers were measured on: cores, memory, load, versions."""
    return {"cores": os.cpu_count(), "physical_cores": psutil.cpu_count(logical=False),
            "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "load_average_1_5_15_min": [round(x, 2) for x in os.getloadavg()],
            "platform": platform.platform(), "versions": labkit.versions()}


def save(rows, out_dir, settings):
    """Write results.csv and results.json (with the machine description and settings); return the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    columns = [name for name in rows[0] if not isinstance(rows[0][name], (dict, list))]  # lists and dicts: JSON only
    with open(out_dir / "results.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    document = {"machine": machine(), "settings": settings, "models": MODELS, "results": rows}
    (out_dir / "results.json").write_text(json.dumps(document, indent=1))
    return out_dir / "results.csv", out_dir / "results.json"


def format_table(rows):
    """A text table: samples/s (median, quartiles), ratio to one process (timed in the same rounds) with its
    interval, time to target, CPU, bytes."""
    def number(value, form, scale=1):
        return "-" if value is None else format(value / scale, form)

    lines = [f"{'model':<9}{'loop':<15}{'w':>2}{'ps':>3}{'K':>4}{'batch':>6}{'samples/s':>10}{'q1–q3':>14}"
             f"{'÷1 proc':>8}{'interval':>11}{'to target s':>12}{'CPU coord/work/ps':>19}{'pull/push KB/step':>19}"]
    for r in rows:
        quartiles = f"{r['samples_per_s_q1']:,.0f}–{r['samples_per_s_q3']:,.0f}"
        low, high = r["ratio_to_single_process_interval"]
        interval = "-" if r["loop"] == "single-process" or low is None else f"{low:.2f}–{high:.2f}"
        cpu = f"{r['cpu_coordinator']:.2f}/{r['cpu_workers']:.2f}/{r['cpu_ps']:.2f}"
        kilobytes = [number(r[f"measured_{d}_bytes_per_step"], ",.0f", 1e3) for d in ("pull", "push")]
        lines.append(f"{r['model']:<9}{r['loop']:<15}{r['workers']:>2}{r['ps']:>3}{r['steps_per_closure']:>4}{r['batch_size']:>6}"
                     f"{r['samples_per_s_median']:>10,.0f}{quartiles:>14}{number(r['ratio_to_single_process'], '.2f'):>8}"
                     f"{interval:>11}"
                     f"{number(r['seconds_to_target'], '.1f'):>12}{cpu:>19}{'/'.join(kilobytes):>19}")
    return "\n".join(lines)


def load(out_dir):
    """The document saved by ``save``: machine, settings, models and result rows."""
    return json.loads((Path(out_dir) / "results.json").read_text())
