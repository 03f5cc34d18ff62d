"""Run the items' runs one after the other, each into its own folder of runs/measurements/, and record each.

A record is what its item keeps of the run, and when, how long, under what load and with which MNIST it ran.
"""
import os
import shutil
import statistics
import subprocess
import sys
import time

from measurements import records
from measurements.order import ITEMS
from measurements.items import AS_CI
from measurements.records import NO_MNIST_SOURCE, RAW, ROOT


def now():
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def default_mnist():
    """Full MNIST where it is cached, else its full-size timing stand-in (times and memory hold, accuracies not)."""
    from labkit.data import KERAS_CACHE

    return os.environ.get("LABKIT_MNIST_SOURCE") or ("keras" if KERAS_CACHE.exists() else "timing-standin")


def measure(only=()):
    """Measure every run not recorded yet, or (``only``, name prefixes) those again."""
    recorded = records.read_all()
    for item in ITEMS:
        for run in item.runs():
            if only and not run.name.startswith(tuple(only)):
                continue
            if run.name in recorded and not only:
                print(f"{run.name}: measured {recorded[run.name]['log']['started']}, kept (--only {run.name} measures it "
                      "again)")
                continue
            measure_run(item, run)


def measure_run(item, run):
    folder = RAW / run.name
    shutil.rmtree(folder, ignore_errors=True)  # an interrupted or failed run starts afresh
    folder.mkdir(parents=True)
    env = dict(os.environ, LABKIT_MNIST_SOURCE=run.mnist or default_mnist(), LABKIT_TEST_TIMES_DIR=str(folder))
    if run.mnist == AS_CI:
        del env["LABKIT_MNIST_SOURCE"]
    log = {"started": now(), "load_average_before": [round(x, 2) for x in os.getloadavg()],
           "mnist_source": env.get("LABKIT_MNIST_SOURCE", NO_MNIST_SOURCE)}
    if run.name == "tests":  # the machine's speed just then: this host's varies through the day
        from labkit.bench.startup import time_bare_import
        log["import_tensorflow_s"] = round(statistics.median(time_bare_import() for _ in range(3)), 2)
    command = run.command(folder)
    print(f"{run.name}: running {' '.join(command[2:] if command[0] == sys.executable else command)}", flush=True)
    began = time.monotonic()
    done = subprocess.run(command, env=env, cwd=ROOT)
    log.update(ended=now(), seconds=round(time.monotonic() - began), returncode=done.returncode,
               load_average_after=[round(x, 2) for x in os.getloadavg()])
    result = item.result(run, folder)
    if result is None:
        print(f"{run.name}: failed (exit code {done.returncode}), nothing recorded; its files are in {folder}")
        return
    records.write(run.name, log, result)
