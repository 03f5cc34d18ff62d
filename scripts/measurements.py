"""Measure everything the docs quote, then write docs/measurements.md from the recorded files.

    python scripts/measurements.py                # run what is not measured yet, then write the page (make measurements)
    python scripts/measurements.py --write-only   # only rewrite the page from runs/measurements/
    python scripts/measurements.py --only startup 06 ex2  # measure these (again), nothing else, then write

It runs, one after the other, each into its own folder of runs/measurements/:
``labkit bench startup``; every notebook and every exercise solution at its defaults
(``labkit sweep`` without -p: wall time, peak memory, the results it records); and
``labkit bench --report`` (notebook 08 over the full speed sweep). It is resumable: an item
that finished is kept, one that failed or was interrupted is run again. Each item's start,
end and load average are logged in runs/measurements/log.json. On the kit's 2-core machine
the whole run takes about as long as the notebooks' and the sweep's run times on the page added up.
MNIST is full MNIST where it is cached, else the full-size timing stand-in (times and memory
hold; accuracies mean nothing), as scripts/time_notebooks.py chooses.
"""
import argparse
import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "runs" / "measurements"
PAGE = ROOT / "docs" / "measurements.md"
LABKIT = [sys.executable, "-m", "labkit.tools.cli"]


def items():
    """(name, folder, command) of every measurement, in the order they run."""
    found = [("startup", OUT / "startup", [*LABKIT, "bench", "startup", "--out", str(OUT / "startup")])]
    for directory in ("notebooks", "solutions"):
        for notebook in sorted((ROOT / directory).glob("*.ipynb")):
            folder = OUT / directory / notebook.stem
            found.append((notebook.stem, folder, [*LABKIT, "sweep", str(notebook), "--out", str(folder)]))
    found.append(("bench-report", OUT / "bench-report", [*LABKIT, "bench", "--report", "--out", str(OUT / "bench-report")]))
    return found


def finished(name, folder):
    """True if the item ran to the end: its result file exists and says it succeeded."""
    if name in ("startup", "bench-report"):
        return (folder / ("startup.json" if name == "startup" else "results.json")).exists()
    rows = read_csv(folder / "results.csv")
    return bool(rows) and all(row["status"] == "ok" for row in rows)


def read_csv(path):
    if not path.exists():
        return []
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def run(only, env):
    log_path = OUT / "log.json"
    log = json.loads(log_path.read_text()) if log_path.exists() else {}
    for name, folder, command in items():
        if only and not name.startswith(tuple(only)):
            continue
        if finished(name, folder) and not only:
            print(f"{name}: measured {log.get(name, {}).get('ended', 'before')}, kept (--only {name} measures it again)")
            continue
        shutil.rmtree(folder, ignore_errors=True)  # an interrupted or failed run starts afresh
        folder.parent.mkdir(parents=True, exist_ok=True)
        entry = {"started": now(), "load_average_before": [round(x, 2) for x in os.getloadavg()],
                 "mnist_source": env["LABKIT_MNIST_SOURCE"]}
        print(f"{name}: running {' '.join(command[2:])}", flush=True)
        done = subprocess.run(command, env=env, cwd=ROOT)
        entry.update(ended=now(), returncode=done.returncode, load_average_after=[round(x, 2) for x in os.getloadavg()])
        log[name] = entry
        log_path.write_text(json.dumps(log, indent=1))


def now():
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


# ----- the page -----------------------------------------------------------------------
def page():
    """docs/measurements.md's text, from what runs/measurements/ holds."""
    log = json.loads((OUT / "log.json").read_text()) if (OUT / "log.json").exists() else {}
    startup = json.loads((OUT / "startup" / "startup.json").read_text()) if (OUT / "startup" / "startup.json").exists() else None
    lines = ["# Measurements", "",
             "Every number the kit's pages quote comes from here. This page is written by `make measurements`",
             "(`scripts/measurements.py`) from the results it recorded in `runs/measurements/`; do not edit it by hand.",
             "Timings depend on the machine and on what else runs on it: the load average (1 minute) at the start",
             "of each measurement is given beside it.", ""]
    lines += heading(log, startup) + [""]
    lines += startup_section(startup, log)
    lines += notebooks_section("notebooks", "Notebooks at their learner defaults", log)
    lines += notebooks_section("solutions", "Exercise solutions at their defaults", log)
    lines += bench_section(log)
    return "\n".join(lines).rstrip() + "\n"


def heading(log, startup):
    if not log:
        return ["**Nothing measured yet**: run `make measurements`."]
    machine = startup["machine"] if startup else {}
    loads = [entry["load_average_before"][0] for entry in log.values()]
    starts, ends = sorted(entry["started"] for entry in log.values()), sorted(entry["ended"] for entry in log.values())
    versions = machine.get("versions", {})
    sources = ", ".join(sorted({entry["mnist_source"] for entry in log.values()}))
    return [f"- **Machine**: {machine.get('cores', '?')} cores, {machine.get('memory_gib', '?')} GiB, "
            f"{machine.get('platform', platform.platform())}; Python {versions.get('python', platform.python_version())}, "
            f"TensorFlow {versions.get('tensorflow', '?')}, labkit {versions.get('labkit', '?')}",
            f"- **Date**: {starts[0]} to {ends[-1]}",
            f"- **Load average** at the start of each measurement: {min(loads):.2f} to {max(loads):.2f}",
            f"- **MNIST**: {sources} "
            "(timing-standin: full MNIST's size repeated from the offline subset; its accuracies mean nothing)"]


def load_of(log, name):
    entry = log.get(name)
    return f"{entry['started']}, load {entry['load_average_before'][0]:.2f}" if entry else "not measured yet"


def startup_section(startup, log):
    lines = ["## Cluster start-up (`labkit bench startup`)", ""]
    if not startup:
        return lines + ["Not measured yet.", ""]
    shape = f"{startup['num_workers']} workers + {startup['num_ps']} ps, started in parallel"
    return lines + [f"Median of {startup['repeats']} rounds, the two timings alternating ({load_of(log, 'startup')}).", "",
                    "| what | seconds |", "|---|---|",
                    f"| bare `python -c \"import tensorflow\"` | {startup['import_tensorflow_s']:.2f} |",
                    f"| cluster start-to-ready, {shape} | {startup['cluster_ready_s']:.2f} |",
                    f"| ratio, start-to-ready ÷ bare import | {startup['ratio']:.2f} |", ""]


def notebooks_section(directory, title, log):
    lines = [f"## {title}", "",
             "`labkit sweep NOTEBOOK` with no parameters: wall time of the whole notebook (papermill), peak memory",
             "of the kernel and every process it started (summed), and the results the notebook records.", "",
             "| notebook | status | run time | peak memory | measured |", "|---|---|---|---|---|"]
    details = []
    for notebook in sorted((ROOT / directory).glob("*.ipynb")):
        rows = read_csv(OUT / directory / notebook.stem / "results.csv")
        if not rows:
            lines.append(f"| `{notebook.stem}` | not measured yet | | | |")
            continue
        row = rows[0]
        lines.append(f"| `{notebook.stem}` | {row['status']} | {minutes(float(row['seconds']))} | "
                     f"{float(row['peak_memory_mb']) / 1024:.1f} GB | {load_of(log, notebook.stem)} |")
        recorded = {key: value for key, value in row.items()
                    if key not in ("point", "status", "error", "seconds", "peak_memory_mb") and value != ""}
        if recorded:
            details += [f"### `{notebook.stem}`", "", "| result | value |", "|---|---|"]
            details += [f"| `{key}` | {value} |" for key, value in recorded.items()] + [""]
    return lines + [""] + details


def minutes(seconds):
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def bench_section(log):
    lines = ["## Speed sweep (`labkit bench --report`, notebook 08)", ""]
    path = OUT / "bench-report" / "results.json"
    if not path.exists():
        return lines + ["Not measured yet.", ""]
    from labkit.bench.files import format_table

    document = json.loads(path.read_text())
    settings = ", ".join(f"{key} {value}" for key, value in document["settings"].items())
    return lines + [f"Settings: {settings} ({load_of(log, 'bench-report')}). Medians of the timed intervals;",
                    "`runs/measurements/bench-report/results.csv` has every column.", "",
                    "```", format_table(document["results"]), "```", ""]


def mnist_source():
    from labkit.data import KERAS_CACHE

    return "keras" if KERAS_CACHE.exists() else "timing-standin"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-only", action="store_true", help="measure nothing; rewrite the page from what is recorded")
    parser.add_argument("--only", nargs="+", default=[], metavar="NAME",
                        help="measure only these, again if measured (name prefixes: startup, 06, ex2, bench-report)")
    args = parser.parse_args(argv)
    if not args.write_only:
        env = dict(os.environ, LABKIT_MNIST_SOURCE=os.environ.get("LABKIT_MNIST_SOURCE") or mnist_source())
        run(args.only, env)
    PAGE.write_text(page())
    print(f"wrote {PAGE}")


if __name__ == "__main__":
    main()
