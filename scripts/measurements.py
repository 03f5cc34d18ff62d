"""Measure everything the docs quote, then write docs/measurements.md from the recorded files.

    python scripts/measurements.py                # run what is not measured yet, then write the page (make measurements)
    python scripts/measurements.py --write-only   # only rewrite the page from runs/measurements/
    python scripts/measurements.py --only startup 06 ex2  # measure these (again), nothing else, then write

It runs, one after the other, each into its own folder of runs/measurements/:
``make test-fast`` and ``make test`` (as CI runs them: each tier's test time, tests/tier_times.py);
``labkit bench startup``; every notebook and every exercise solution at its defaults
(``labkit sweep`` without -p: wall time, peak memory, the results it records), and again in the
small-laptop setting (the offline MNIST subset of ``make lab-small``); the workshop day (the 3-hour
plan's notebooks in one JupyterLab, kernels left open as learners leave them, ``--workshop-day``)
with full-size MNIST and in the small-laptop setting;
``labkit bench --report`` (notebook 08 over the full speed sweep); and ``scripts/stress_faults.py``
(every kind of the fault matrix, STRESS_ROUNDS rounds each). It is resumable: an item
that finished is kept, one that failed or was interrupted is run again. Each item's start,
end, duration and load average are logged in runs/measurements/log.json; the page's heading
gives the total, so the page says how long a full run takes.
MNIST is full MNIST where it is cached, else the full-size timing stand-in (times and memory
hold; accuracies mean nothing). From the recorded files it writes docs/measurements.md,
labkit/tools/notebook_peaks.json (what `labkit doctor --workshop` compares with free memory),
tests/group_seconds.json (how `make test` splits its test files between its workers), the
"*Runs in ...*" sentence of each notebook's first cell, and each time note ("*Next cell: ...*", the
last line of the markdown cell before a long code cell) from that cell's measured time.
"""
import argparse
import csv
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # tier_times: the tiers and the files it writes
OUT = ROOT / "runs" / "measurements"
PAGE = ROOT / "docs" / "measurements.md"
PEAKS = ROOT / "labkit" / "tools" / "notebook_peaks.json"
GROUP_SECONDS = ROOT / "tests" / "group_seconds.json"  # how tests/conftest.py splits `make test` between its workers
LABKIT = [sys.executable, "-m", "labkit.tools.cli"]


# How memory grows away from the defaults: (name, notebook, its parameters, MNIST source, what it shows).
VARIANTS = [
    ("03-all-shipped", "03_custom_training_loop", ["-p", "shipped_examples", "60000"], None,
     "notebook 03 with all 60,000 training images shipped inside the graph (its default ships a slice)"),
]


# Rounds of each kind of scripts/stress_faults.py (the fault matrix); they train on the offline subset.
STRESS_ROUNDS = 20

# The small-laptop setting (`make lab-small`): every notebook and solution is measured in it too, as
# item "small-laptop-NAME", for `labkit doctor --workshop` on a laptop that will use the subset.
SMALL_LAPTOP = "offline-subset"
SMALL_LAPTOP_PREFIX = "small-laptop-"
# The workshop day is measured with each MNIST a laptop may use: (setting, its source or None for the
# full-size default, its title on the page, the GB of summed PSS the day must stay within).
DAY_SETTINGS = [("full-size", None, "Full-size MNIST", 5),
                ("small-laptop", SMALL_LAPTOP, "The small-laptop setting (`make lab-small`)", 3)]

# The MNIST source of the tests item: none set, as in CI (the tests pick theirs).
AS_CI = "as-ci"
# The pytest calls of `make test-fast` and `make test`, by the file tests/tier_times.py writes for each.
TEST_CALLS = [("unit", "`make test-fast`"), ("all", "`make test`")]


def items():
    """(name, folder, command, MNIST source or None) of every measurement, in the order they run."""
    found = [("tests", OUT / "tests", ["make", "test-fast", "test"], AS_CI)]
    found += [("startup", OUT / "startup", [*LABKIT, "bench", "startup", "--out", str(OUT / "startup")], None)]
    found += [sweep_item(notebook.stem, OUT / directory, notebook, None) for directory, notebook in shipped_notebooks()]
    for name, stem, parameters, source, _ in VARIANTS:
        folder = OUT / "variants" / name
        found.append((name, folder, [*LABKIT, "sweep", str(ROOT / "notebooks" / f"{stem}.ipynb"), *parameters,
                                     "--out", str(folder)], source))
    found += [sweep_item(f"{SMALL_LAPTOP_PREFIX}{notebook.stem}", OUT / "small-laptop" / directory, notebook, SMALL_LAPTOP)
              for directory, notebook in shipped_notebooks()]
    found += [(f"day-{setting}", OUT / "day" / setting,
               [sys.executable, str(Path(__file__).resolve()), "--workshop-day", str(OUT / "day" / setting / "day.json")],
               source) for setting, source, _, _ in DAY_SETTINGS]
    found.append(("bench-report", OUT / "bench-report",
                  [*LABKIT, "bench", "--report", "--out", str(OUT / "bench-report")], None))
    found.append(("stress", OUT / "stress", [sys.executable, str(ROOT / "scripts" / "stress_faults.py"),
                                             "--rounds", str(STRESS_ROUNDS), "--json", str(OUT / "stress" / "stress.json")],
                  "offline-subset"))
    return found


def shipped_notebooks():
    """(folder, path) of every notebook and exercise solution, in the order they are measured."""
    return [(directory, notebook) for directory in ("notebooks", "solutions")
            for notebook in sorted((ROOT / directory).glob("*.ipynb"))]


def sweep_item(name, parent, notebook, source):
    """The item that runs ``notebook`` at its defaults (`labkit sweep`) into ``parent``/its stem."""
    folder = parent / notebook.stem
    return name, folder, [*LABKIT, "sweep", str(notebook), "--out", str(folder)], source


def finished(name, folder):
    """True if the item ran to the end: its result file exists and says it succeeded."""
    if name == "tests":
        calls = [read_json(folder / f"{call}.json") for call, _ in TEST_CALLS]
        return all(call and call["exit_status"] == 0 for call in calls)
    if name.startswith("day-"):
        return (folder / "day.json").exists()
    if name in ("startup", "bench-report", "stress"):
        return (folder / {"startup": "startup.json", "bench-report": "results.json", "stress": "stress.json"}[name]).exists()
    rows = read_csv(folder / "results.csv")
    return bool(rows) and all(row["status"] == "ok" for row in rows)


def read_json(path):
    return json.loads(path.read_text()) if path.exists() else None


def read_csv(path):
    if not path.exists():
        return []
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def run(only, env):
    log_path = OUT / "log.json"
    log = json.loads(log_path.read_text()) if log_path.exists() else {}
    for name, folder, command, source in items():
        item_env = dict(env, LABKIT_MNIST_SOURCE=source or env["LABKIT_MNIST_SOURCE"], LABKIT_TEST_TIMES_DIR=str(folder))
        if source == AS_CI:
            del item_env["LABKIT_MNIST_SOURCE"]
        if only and not name.startswith(tuple(only)):
            continue
        if finished(name, folder) and not only:
            print(f"{name}: measured {log.get(name, {}).get('ended', 'before')}, kept (--only {name} measures it again)")
            continue
        shutil.rmtree(folder, ignore_errors=True)  # an interrupted or failed run starts afresh
        folder.parent.mkdir(parents=True, exist_ok=True)
        entry = {"started": now(), "load_average_before": [round(x, 2) for x in os.getloadavg()],
                 "mnist_source": item_env.get("LABKIT_MNIST_SOURCE", "none: each test picks its own, as in CI")}
        print(f"{name}: running {' '.join(command[2:] if command[0] == sys.executable else command)}", flush=True)
        began = time.monotonic()
        done = subprocess.run(command, env=item_env, cwd=ROOT)
        entry.update(ended=now(), seconds=round(time.monotonic() - began), returncode=done.returncode,
                     load_average_after=[round(x, 2) for x in os.getloadavg()])
        log[name] = entry
        log_path.write_text(json.dumps(log, indent=1))


# ----- the workshop day -----------------------------------------------------------------
# docs/instructor-guide.md, "A three-hour workshop": at the break before notebook 03 everyone shuts down
# the kernels open until then; every other kernel stays open after its notebook, as learners leave them.
DAY_BREAK_BEFORE = "03"
DAY_KERNEL = "pslab"  # the kernel `make kernel` registers; the notebooks name it


def workshop_day(result_path):
    """Run the 3-hour plan the way learners do: one JupyterLab server on 127.0.0.1 (its token on) serving
    a work folder as `make lab` fills it (the exercise as solved), each notebook opened as a session and
    its code cells run in order in that session's kernel, kernels left open except at the break. Writes
    each notebook's peak (summed over the server, every open kernel and their tasks) and the day's."""
    import tempfile
    from labkit.tools import workfolder
    from labkit.tools.doctor import THREE_HOUR_PLAN

    with tempfile.TemporaryDirectory(prefix="pslab-day-") as work:
        workfolder.copy_missing(work)
        plan = [day_notebook(Path(work), prefix) for prefix in THREE_HOUR_PLAN]
        with JupyterServer(Path(work)) as server:
            steps = [day_step(server, notebook) for notebook in plan]
    day = {key: max(step[key] for step in steps) for key in ("peak_pss_mb", "peak_alone_mb", "peak_rss_mb")}
    result_path.parent.mkdir(parents=True, exist_ok=True)
    result_path.write_text(json.dumps({**day, "steps": steps}, indent=1))


def day_notebook(work, prefix):
    """The work folder's notebook that ``prefix`` names; an exercise is replaced by its solution first."""
    found = sorted((work / "notebooks").glob(f"{prefix}*.ipynb")) + sorted((work / "exercises").glob(f"{prefix}*.ipynb"))
    if found[0].parent.name == "exercises":
        shutil.copy(ROOT / "solutions" / found[0].name, found[0])
    return found[0].relative_to(work)


def day_step(server, notebook):
    """Open ``notebook`` in ``server`` (after the break's shutdowns, if it comes first) and run it; its row."""
    from labkit.tools.memory import PeakMemory

    if notebook.stem.startswith(DAY_BREAK_BEFORE):
        server.shut_down_all()
    began = time.monotonic()
    with PeakMemory() as memory:
        server.run(notebook)
    seconds = round(time.monotonic() - began)
    print(f"workshop day: {notebook} ran in {seconds} s, {memory.peak_mb} MB at its peak with "
          f"{len(server.sessions)} kernels open", flush=True)
    return {"notebook": notebook.stem, "seconds": seconds, "open_kernels": len(server.sessions), **memory.peaks()}


class JupyterServer:
    """`jupyter lab --no-browser` on 127.0.0.1 with a token, serving ``root``, as `make lab` starts it."""

    def __init__(self, root):
        import secrets
        from labkit.cluster import pick_port

        self.root, self.port, self.token = root, pick_port(), secrets.token_hex(16)
        self.runtime = root / ".runtime"  # the kernels' connection files
        self.sessions = {}  # notebook -> session id

    def __enter__(self):
        env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(self.runtime))
        command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
                   f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
                   *(["--allow-root"] if os.getuid() == 0 else [])]
        self.log = open(self.root / "jupyter.log", "w")
        self.process = subprocess.Popen(command, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab did not start: {(self.root / 'jupyter.log').read_text()[-2000:]}")
            time.sleep(0.5)
        return self

    def __exit__(self, *error):
        self.shut_down_all()
        self.process.terminate()
        self.process.wait(timeout=60)
        self.log.close()

    def request(self, method, path, body=None):
        import urllib.request

        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=120) as response:
            text = response.read()
        return json.loads(text) if text else None

    def answers(self):
        try:
            return self.request("GET", "/api/status") is not None
        except OSError:
            return False

    def run(self, notebook):
        """Open ``notebook`` as JupyterLab does (a session with its kernel) and run its code cells in order;
        RuntimeError on the first cell that fails. The kernel stays open."""
        from jupyter_client import BlockingKernelClient

        session = self.request("POST", "/api/sessions", {"path": str(notebook), "name": notebook.name,
                                                         "type": "notebook", "kernel": {"name": DAY_KERNEL}})
        self.sessions[notebook] = session["id"]
        client = BlockingKernelClient()
        client.load_connection_file(self.runtime / f"kernel-{session['kernel']['id']}.json")
        client.start_channels()
        try:
            client.wait_for_ready(timeout=120)
            for cell in nbformat.read(self.root / notebook, as_version=4).cells:
                if cell.cell_type == "code":
                    reply = client.execute_interactive(cell.source, timeout=900, output_hook=lambda message: None)
                    if reply["content"]["status"] != "ok":
                        raise RuntimeError(f"{notebook}: a cell failed: {reply['content'].get('evalue')}\n{cell.source[:300]}")
        finally:
            client.stop_channels()

    def shut_down_all(self):
        """Shut down every open kernel, as Kernel > Shut Down All Kernels does."""
        for notebook, session in list(self.sessions.items()):
            self.request("DELETE", f"/api/sessions/{session}")
            del self.sessions[notebook]


def now():
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


# ----- the page -----------------------------------------------------------------------
def page():
    """docs/measurements.md's text, from what runs/measurements/ holds (of the items measured now)."""
    logged = json.loads((OUT / "log.json").read_text()) if (OUT / "log.json").exists() else {}
    log = {name: entry for name, entry in logged.items() if name in {item[0] for item in items()}}
    startup = json.loads((OUT / "startup" / "startup.json").read_text()) if (OUT / "startup" / "startup.json").exists() else None
    lines = ["# Measurements", "",
             "Every number the kit's pages quote comes from here. This page is written by `make measurements`",
             "(`scripts/measurements.py`) from the results it recorded in `runs/measurements/`; do not edit it by hand.",
             "Timings depend on the machine and on what else runs on it: the load average (1 minute) at the start",
             "of each measurement is given beside it.", ""]
    lines += heading(log, startup) + [""]
    lines += tests_section(log)
    lines += startup_section(startup, log)
    lines += notebooks_section("notebooks", "Notebooks at their learner defaults", log)
    lines += notebooks_section("solutions", "Exercise solutions at their defaults", log)
    lines += small_laptop_section(log)
    lines += day_section(log)
    lines += variants_section(log)
    lines += long_cells_section()
    lines += bench_section(log)
    lines += stress_section(log)
    lines += [MEMORY]
    return "\n".join(lines).rstrip() + "\n"


def heading(log, startup):
    if not log:
        return ["**Nothing measured yet**: run `make measurements`."]
    machine = startup["machine"] if startup else {}
    loads = [entry["load_average_before"][0] for entry in log.values()]
    starts, ends = sorted(entry["started"] for entry in log.values()), sorted(entry["ended"] for entry in log.values())
    versions = machine.get("versions", {})
    sources = ", ".join(sorted({entry["mnist_source"] for name, entry in log.items() if name != "tests"}))
    return [f"- **Machine**: {machine.get('cores', '?')} cores, {machine.get('memory_gib', '?')} GiB, "
            f"{machine.get('platform', platform.platform())}; Python {versions.get('python', platform.python_version())}, "
            f"TensorFlow {versions.get('tensorflow', '?')}, labkit {versions.get('labkit', '?')}",
            f"- **Date**: {starts[0]} to {ends[-1]}; the measurements "
            f"below took {minutes(sum(entry['seconds'] for entry in log.values()))} in all",
            f"- **Load average** at the start of each measurement: {min(loads):.2f} to {max(loads):.2f}",
            f"- **MNIST**: {sources} "
            "(`timing-standin` is full MNIST's size, repeated from the offline subset: its accuracies mean nothing)"]


def load_of(log, name):
    entry = log.get(name)
    return f"{entry['started']}, load {entry['load_average_before'][0]:.2f}" if entry else "not measured yet"


def test_calls():
    """{call: what tests/tier_times.py recorded} for make test-fast's and make test's call; None if one is missing."""
    calls = {call: read_json(OUT / "tests" / f"{call}.json") for call, _ in TEST_CALLS}
    return calls if all(calls.values()) else None


def tier_cell(times):
    tests = sum(times["tests"].values())
    return f"{tests} test{'s' if tests != 1 else ''}, {minutes(times['seconds'])}"


def tests_section(log):
    """Each pytest call's wall time and its tiers' test time, from the files tests/tier_times.py wrote."""
    from tier_times import TIERS

    lines = ["## Tests (`make test-fast`, `make test`)", ""]
    calls = test_calls()
    if not calls:
        return lines + ["Not measured yet.", ""]
    lines += [f"As CI runs them ({load_of(log, 'tests')}). A tier's time is its tests' setup, call and teardown",
              "seconds added up over the pytest-xdist workers, so with 2 workers a call's tiers add up to about",
              "twice its wall time.", "",
              "| pytest call | wall time | " + " | ".join(TIERS) + " |", "|---|---|" + "---|" * len(TIERS)]
    for name, title in TEST_CALLS:
        call = calls[name]
        cells = [tier_cell(call["tiers"][tier]) if tier in call["tiers"] else "" for tier in TIERS]
        workers = "1 process" if call["workers"] == 1 else f"{call['workers']} workers"
        selected = "every tier" if call["marker_expression"] == "all" else f"`-m {call['marker_expression']}`"
        how = f" ({selected}, {workers})"
        lines.append(f"| {title}{how} | {minutes(call['wall_seconds'])} | " + " | ".join(cells) + " |")
    return lines + [""]


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
             "`labkit sweep NOTEBOOK` with no parameters: wall time of the whole notebook (papermill) and the",
             "results the notebook records; peak memory as explained under \"Memory\" below.", "",
             "| notebook | status | run time | peak memory (PSS) | alone (estimate) | RSS sum | largest tasks (PSS, MB) "
             "| measured |", "|---|---|---|---|---|---|---|---|"]
    details = []
    for notebook in sorted((ROOT / directory).glob("*.ipynb")):
        row = result_row(directory, notebook.stem)
        if not row:
            lines.append(f"| `{notebook.stem}` | not measured yet | | | | | | |")
            continue
        lines.append(f"| `{notebook.stem}` | {measured_cells(row, log, notebook.stem)} |")
        recorded = {key: value for key, value in row.items() if key not in SWEEP_COLUMNS and value != ""}
        if recorded:
            details += [f"### `{notebook.stem}`", "", "| result | value |", "|---|---|"]
            details += [f"| `{key}` | {value} |" for key, value in recorded.items()] + [""]
    return lines + [""] + details


def small_laptop_section(log):
    lines = ["## Notebooks and solutions in the small-laptop setting", "",
             "The same runs with the 5,000-image offline MNIST subset (`LABKIT_MNIST_SOURCE=offline-subset`, what",
             "`make lab-small` sets). `labkit doctor --workshop` compares a laptop that will use the subset with these.", "",
             "| notebook | status | run time | peak memory (PSS) | alone (estimate) | RSS sum | largest tasks (PSS, MB) "
             "| measured |", "|---|---|---|---|---|---|---|---|"]
    for directory, notebook in shipped_notebooks():
        name, row = f"{SMALL_LAPTOP_PREFIX}{notebook.stem}", result_row(f"small-laptop/{directory}", notebook.stem)
        lines.append(f"| `{notebook.stem}` | {measured_cells(row, log, name) if row else 'not measured yet | | | | | |'} |")
    return lines + [""]


def day_section(log):
    """The 3-hour plan in one JupyterLab (``workshop_day``): each notebook's peak with the kernels open then."""
    from labkit.tools.doctor import THREE_HOUR_PLAN

    lines = ["## A workshop day: the 3-hour plan in one JupyterLab", "",
             f"The plan's notebooks ({', '.join(THREE_HOUR_PLAN)}; the exercise as solved) opened one after the other",
             "in one `jupyter lab --no-browser` server on 127.0.0.1, as `make lab` serves them: each opened with its",
             "own kernel, its code cells run in order. Every kernel stays open after its notebook, as learners leave",
             f"them, except at the break before {DAY_BREAK_BEFORE}, when the instructor guide has everyone shut down the",
             "kernels open until then. The memory is the summed PSS of the server, every open kernel and their",
             "tasks (the browser is not counted: `labkit doctor --workshop` adds room for it).", ""]
    for setting, _, title, limit_gb in DAY_SETTINGS:
        day = read_json(OUT / "day" / setting / "day.json")
        lines += [f"### {title}", ""]
        if not day:
            lines += ["Not measured yet.", ""]
            continue
        verdict = "within" if max(day["peak_pss_mb"], day["peak_alone_mb"]) <= limit_gb * 1000 else "OVER"  # as the doctor judges
        lines += [f"The day's peak: **{gigabytes(day['peak_pss_mb'])}** (PSS), {gigabytes(day['peak_alone_mb'])} alone, "
                  f"{verdict} the {limit_gb} GB the kit aims at ({load_of(log, f'day-{setting}')}).", "",
                  "| notebook | kernels open | run time | peak memory (PSS) | alone (estimate) | RSS sum | largest (PSS, MB) |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| `{step['notebook']}` | {step['open_kernels']} | {minutes(step['seconds'])} | "
                  f"{gigabytes(step['peak_pss_mb'])} | {gigabytes(step['peak_alone_mb'])} | {gigabytes(step['peak_rss_mb'])} | "
                  f"{step['largest_tasks'].replace('=', ' ')} |" for step in day["steps"]] + [""]
    return lines


def variants_section(log):
    lines = ["## Memory away from the defaults", "",
             "| run | status | run time | peak memory (PSS) | alone (estimate) | RSS sum | largest tasks (PSS, MB) "
             "| measured |", "|---|---|---|---|---|---|---|---|"]
    for name, _, _, _, what in VARIANTS:
        row = result_row("variants", name)
        if not row:
            lines.append(f"| {what} | not measured yet | | | | | | |")
            continue
        lines.append(f"| {what} | {measured_cells(row, log, name)} |")
    return lines + [""]


SWEEP_COLUMNS = ("point", "status", "error", "seconds", "peak_pss_mb", "peak_rss_mb", "peak_alone_mb", "largest_tasks")
MEMORY = """## Memory

Memory is the peak, sampled twice a second, of the summed *proportional set size* (PSS) of the
kernel and every process it starts (task servers, coordinator, evaluator): each page shared by
several processes (TensorFlow's libraries, mapped by every task) is divided among them, so the sum
is what the run really takes. The summed resident size (RSS) is given beside it only for
comparison: it counts each shared library once per process and so overstates the sum. PSS also
divides a page with other programs that map it, so "alone" estimates what a laptop running nothing
else needs: the processes' private memory plus the largest shared part of any one of them.
`labkit doctor --workshop` compares free memory with the larger of PSS and alone
(`labkit/tools/notebook_peaks.json`, written with this page).
"""


def measured_cells(row, log, name):
    """A measured run's cells of a table row: status, run time, PSS, alone, RSS, largest tasks, when."""
    return (f"{row['status']} | {minutes(float(row['seconds']))} | {gigabytes(row['peak_pss_mb'])} | "
            f"{gigabytes(row['peak_alone_mb'])} | {gigabytes(row['peak_rss_mb'])} | "
            f"{row['largest_tasks'].replace('=', ' ')} | {load_of(log, name)}")


def result_row(directory, stem):
    rows = read_csv(OUT / directory / stem / "results.csv")
    return rows[0] if rows else None


def gigabytes(megabytes):
    return f"{float(megabytes) / 1000:.1f} GB"


def minutes(seconds):
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def as_shown(seconds):
    """``seconds`` as ``minutes()`` shows them, read back: a sentence computed from the page then agrees."""
    value, unit = minutes(seconds).split()
    return float(value) * (60 if unit == "min" else 1)


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


def stress_section(log):
    lines = ["## Fault matrix (`scripts/stress_faults.py`)", ""]
    path = OUT / "stress" / "stress.json"
    if not path.exists():
        return lines + ["Not measured yet.", ""]
    counts = json.loads(path.read_text())
    return lines + [f"Each kind of failure {counts['rounds']} times, each round on a cluster of 2 workers and 1 PS "
                    f"({load_of(log, 'stress')}); a round fails if it raises, its process dies, or it does not",
                    "finish its steps with one recovery per PS failure from the checkpoint before it and every task alive.", "",
                    "| kind | failed rounds |", "|---|---|",
                    *[f"| {kind} | {failed} of {counts['rounds']} |" for kind, failed in counts["failed"].items()], ""]


# ----- what the other pages and the package take from the measurements -----------------
FIRST_LINE = re.compile(r"\*Runs in [^*]+\*")


def first_line(seconds, pss_gb, uses_mnist):
    """The sentence a notebook's first cell states about its run at the defaults."""
    run_time = "under 1 minute" if seconds < 60 else f"about {seconds / 60:.1f} minutes"
    data = ", with full-size MNIST" if uses_mnist else ""
    return (f"*Runs in {run_time} with its defaults on a 2-core machine{data}; {pss_gb} of memory at its peak "
            "(all its processes, PSS; [docs/measurements.md](../docs/measurements.md)).*")


# A time note: the last line of the markdown cell right before a long code cell, which it times.
TIME_NOTE = re.compile(r"\*Next cell: [^*]+\*")
LONG_CELL_SECONDS = 20  # a code cell that runs longer says so first, in a time note


def time_note(seconds):
    return f"*Next cell: about {minutes(seconds)} with the defaults on a 2-core machine.*"


def cell_seconds(stem):
    """{cell id: seconds} of each code cell of the executed copy `make measurements` made of notebook ``stem``."""
    copies = sorted((OUT / "notebooks" / stem).glob(f"*/{stem}.ipynb"))
    if not copies:
        return {}
    executed = nbformat.read(copies[0], as_version=4)
    return {cell.get("id"): cell.metadata.get("papermill", {}).get("duration") or 0.0
            for cell in executed.cells if cell.cell_type == "code"}


def timed_cells(notebook):
    """{code cell id: the markdown cell whose time note times it}: each note times the next code cell."""
    timed = {}
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown" and TIME_NOTE.search(cell.source):
            following = next(after for after in notebook.cells[index + 1:] if after.cell_type == "code")
            timed[following.get("id")] = cell
    return timed


def long_cells():
    """(notebook stem, cell id, first line, seconds, has a time note) of every measured code cell that
    has a time note or runs longer than LONG_CELL_SECONDS."""
    found = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        notebook, seconds = nbformat.read(path, as_version=4), cell_seconds(path.stem)
        timed = timed_cells(notebook)
        for cell in notebook.cells:
            measured = seconds.get(cell.get("id"))
            if cell.cell_type == "code" and measured is not None and (cell.get("id") in timed
                                                                     or measured > LONG_CELL_SECONDS):
                first = next((line for line in cell.source.splitlines() if line and not line.startswith("#")), "")
                found.append((path.stem, cell.get("id"), first, measured, cell.get("id") in timed))
    return found


def write_time_notes():
    """Put each timed cell's measured seconds into its time note; the names of the notebooks changed."""
    changed = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        notebook, seconds = nbformat.read(path, as_version=4), cell_seconds(path.stem)
        edited = False
        for cell_id, note_cell in timed_cells(notebook).items():
            if cell_id in seconds and TIME_NOTE.search(note_cell.source).group(0) != time_note(seconds[cell_id]):
                note_cell.source = TIME_NOTE.sub(lambda _: time_note(seconds[cell_id]), note_cell.source, count=1)
                edited = True
        if edited:
            nbformat.write(notebook, path)
            changed.append(path.name)
    return changed


def long_cells_section():
    lines = ["## Long cells", "",
             f"Every code cell of a notebook that has a time note before it, or that ran longer than {LONG_CELL_SECONDS} s,",
             "in the runs above (papermill's time for the cell). `make measurements` writes each time note from here.", "",
             "| notebook | cell | its first line | run time | time note |", "|---|---|---|---|---|"]
    found = long_cells()
    if not found:
        return lines[:2] + ["Not measured yet.", ""]
    return lines + [f"| `{stem}` | `{cell_id}` | `{first[:60]}` | {minutes(seconds)} | {'yes' if noted else 'missing'} |"
                    for stem, cell_id, first, seconds, noted in found] + [""]


README = ROOT / "README.md"
TEST_TIMES_LINE = re.compile(r"\*`make test` takes [^*]+\*")
TIER_ROW = re.compile(r"^(\| `(\w+)` \|[^|]+\|)[^|\n]*\|$", re.MULTILINE)


def write_test_times():
    """The README's Tests section: the two commands' wall times and each tier's test time in `make test`."""
    calls = test_calls()
    if not calls:
        return False
    text = README.read_text()
    new = TEST_TIMES_LINE.sub(test_times_line(calls), text)
    tiers = calls["all"]["tiers"]
    new = TIER_ROW.sub(lambda row: f"{row.group(1)} {minutes(tiers.get(row.group(2), {'seconds': 0})['seconds'])} |", new)
    README.write_text(new)
    return new != text


def write_group_seconds():
    """tests/group_seconds.json: each group's test seconds in `make test`'s call, how tests/conftest.py splits
    the groups between the workers. False if the call is not recorded."""
    calls = test_calls()
    if not calls:
        return False
    GROUP_SECONDS.write_text(json.dumps({
        "about": "Each group's test seconds (setup, call and teardown) in `make test`: tests/conftest.py gives "
                 "each worker its share, longest first. Written by `make measurements` (scripts/measurements.py) "
                 "from what tests/tier_times.py recorded: never edit.",
        "seconds": calls["all"]["groups"]}, indent=1) + "\n")
    return True


def test_times_line(calls):
    return (f"*`make test` takes {minutes(calls['all']['wall_seconds'])}; `make test-fast` "
            f"{minutes(calls['unit']['wall_seconds'])}.*")


def uses_mnist(notebook):
    return any("mnist" in cell.source.lower() for cell in notebook.cells if cell.cell_type == "code")


def write_first_lines():
    """Put each measured notebook's run time and memory into its first cell; the names of those changed."""
    changed = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        row = result_row("notebooks", path.stem)
        if not row or row["status"] != "ok":
            continue
        notebook = nbformat.read(path, as_version=4)
        line = first_line(as_shown(float(row["seconds"])), gigabytes(row["peak_pss_mb"]), uses_mnist(notebook))
        cell = notebook.cells[0]
        stated = FIRST_LINE.search(cell.source)
        if not stated:
            raise SystemExit(f"{path.name}'s first cell has no '*Runs in ...*' sentence to replace: add one")
        if stated.group(0) != line:
            cell.source = FIRST_LINE.sub(lambda _: line, cell.source, count=1)
            nbformat.write(notebook, path)
            changed.append(path.name)
    return changed


def peaks_table(log):
    """labkit/tools/notebook_peaks.json: the measured peaks `labkit doctor --workshop` compares with free memory,
    at the defaults (full-size MNIST) and, under "small_laptop", in the small-laptop setting."""
    measured = {}
    for directory, path in shipped_notebooks():
        row = result_row(directory, path.stem)
        if row:
            measured[path.stem] = peak_entry(row, log[path.stem])
            small = result_row(f"small-laptop/{directory}", path.stem)
            if small:
                measured[path.stem]["small_laptop"] = peak_entry(small, log[f"{SMALL_LAPTOP_PREFIX}{path.stem}"])
    return {"about": "Peak memory (MB) and run time of each notebook and solution at its defaults, with full-size "
                     "MNIST and (small_laptop) with the offline subset of `make lab-small`. Written by "
                     "`make measurements` (scripts/measurements.py) with docs/measurements.md: never edit.",
            "notebooks": measured}


def peak_entry(row, logged):
    """One run's entry in the peaks table, from its results.csv row and its log entry."""
    return {"peak_pss_mb": int(row["peak_pss_mb"]), "peak_alone_mb": int(row["peak_alone_mb"]),
            "peak_rss_mb": int(row["peak_rss_mb"]), "minutes": round(float(row["seconds"]) / 60, 1),
            "ok": row["status"] == "ok", "measured": logged["started"], "mnist_source": logged["mnist_source"],
            "load_average": logged["load_average_before"][0]}


def mnist_source():
    from labkit.data import KERAS_CACHE

    return "keras" if KERAS_CACHE.exists() else "timing-standin"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-only", action="store_true", help="measure nothing; rewrite the page from what is recorded")
    parser.add_argument("--only", nargs="+", default=[], metavar="NAME",
                        help="measure only these, again if measured (name prefixes: startup, 06, ex2, bench-report)")
    parser.add_argument("--workshop-day", type=Path, metavar="JSON",
                        help="run the 3-hour plan in one JupyterLab and write its memory to JSON (the day-* items run this)")
    args = parser.parse_args(argv)
    if args.workshop_day:
        return workshop_day(args.workshop_day)
    if args.write_only and not (OUT / "log.json").exists():
        parser.error(f"nothing is recorded in {OUT.relative_to(ROOT)}: run `make measurements` first")
    if not args.write_only:
        env = dict(os.environ, LABKIT_MNIST_SOURCE=os.environ.get("LABKIT_MNIST_SOURCE") or mnist_source())
        run(args.only, env)
    PAGE.write_text(page())
    log = json.loads((OUT / "log.json").read_text())
    PEAKS.write_text(json.dumps(peaks_table(log), indent=1) + "\n")
    changed = write_first_lines() + (["README.md's test times"] if write_test_times() else [])
    changed += [GROUP_SECONDS.name] if write_group_seconds() else []
    noted = write_time_notes()
    print(f"wrote {PAGE.relative_to(ROOT)}, {PEAKS.relative_to(ROOT)}, the first line of "
          f"{', '.join(changed) or 'no notebook (all agreed)'} and the time notes of {', '.join(noted) or 'none'}")


if __name__ == "__main__":
    main()
