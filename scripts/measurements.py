"""Measure everything the docs quote, then write docs/measurements.md from the recorded files.

    python scripts/measurements.py                # run what is not measured yet, then write the page (make measurements)
    python scripts/measurements.py --write-only   # only rewrite the page from runs/measurements/
    python scripts/measurements.py --only startup 06 ex2  # measure these (again), nothing else, then write

It runs, one after the other, each into its own folder of runs/measurements/:
``make test-fast`` and ``make test`` (as CI runs them: each tier's test time, tests/support/tier_times.py);
``labkit bench startup``; every notebook and every exercise solution at its defaults
(``labkit sweep`` without -p: wall time, peak memory, the results it records), and again in the
small-laptop setting (the offline MNIST subset of ``make lab-small``); the workshop day (the 3-hour
plan's notebooks in one JupyterLab, kernels left open as learners leave them, ``--workshop-day``)
with full-size MNIST and in the small-laptop setting; a class of 30 notebooks graded with
``labkit grade --jobs 2`` (``--grade-class``);
``labkit bench --report`` (notebook 08 over every point of the speed benchmark); and ``scripts/stress_faults.py``
(every kind of the fault matrix, STRESS_ROUNDS rounds each). It is resumable: an item
that finished is kept, one that failed or was interrupted is run again. Each item's start,
end, duration and load average are logged in runs/measurements/log.json; the page's heading
gives the total, so the page says how long a full run takes.
MNIST is full MNIST where it is cached, else the full-size timing stand-in (times and memory
hold; accuracies mean nothing). From the recorded files it writes docs/measurements.md,
labkit/tools/notebook_peaks.json (what `labkit doctor --workshop` compares with free memory), the
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
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # support.tier_times: the tiers and the files it writes
OUT = ROOT / "runs" / "measurements"
PAGE = ROOT / "docs" / "measurements.md"
PEAKS = ROOT / "labkit" / "tools" / "notebook_peaks.json"
LABKIT = [sys.executable, "-m", "labkit.tools.cli"]


# How memory grows away from the defaults: (name, notebook, its parameters, MNIST source, what it shows).
VARIANTS = [
    ("03-all-shipped", "03_custom_training_loop", ["-p", "shipped_examples", "60000"], None,
     "notebook 03 with all 60,000 training images shipped inside the graph (its default ships a slice)"),
]

# Notebook 08's cost model checked on cluster shapes its defaults never run: 3 workers, K = 5, a second PS.
COST_MODEL_SHAPES = "cost-model-shapes"
COST_MODEL_PARAMETERS = {"workers": "[1, 3]", "ps": "[1, 2]", "steps_per_closure": "[1, 5, 10]"}
COST_MODEL_GOAL = 0.25  # notebook 08's check: the median error over the points the model was not fitted on

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

# The MNIST source of the tests item: none set, as in CI (the tests pick theirs); its log says so.
AS_CI = "as-ci"
NO_MNIST_SOURCE = "none: each test picks its own, as in CI"
# The pytest calls of `make test-fast` and `make test`, by the file tests/support/tier_times.py writes for each.
TEST_CALLS = [("unit", "`make test-fast`"), ("all", "`make test`")]


def items():
    """(name, folder, command, MNIST source or None, the page's section) of every measurement, in the order they run."""
    found = [("tests", OUT / "tests", ["make", "test-fast", "test"], AS_CI, "tests")]
    found += [("install", OUT / "install", [sys.executable, str(ROOT / "scripts" / "first_install.py"), "--out",
                                            str(OUT / "install" / "install.json")], AS_CI, "install")]
    found += [("startup", OUT / "startup", [*LABKIT, "bench", "startup", "--out", str(OUT / "startup")], None, "startup")]
    found += [sweep_item(notebook.stem, OUT / directory, notebook, None, directory)
              for directory, notebook in shipped_notebooks()]
    for name, stem, parameters, source, _ in VARIANTS:
        folder = OUT / "variants" / name
        found.append((name, folder, [*LABKIT, "sweep", str(ROOT / "notebooks" / f"{stem}.ipynb"), *parameters,
                                     "--out", str(folder)], source, "variants"))
    found.append((COST_MODEL_SHAPES, OUT / COST_MODEL_SHAPES,
                  [*LABKIT, "sweep", str(ROOT / "notebooks" / "08_performance_analysis.ipynb"),
                   *[part for name, value in COST_MODEL_PARAMETERS.items() for part in ("-p", name, value)],
                   "--out", str(OUT / COST_MODEL_SHAPES)], None, "cost-model"))
    found += [sweep_item(f"{SMALL_LAPTOP_PREFIX}{notebook.stem}", OUT / "small-laptop" / directory, notebook, SMALL_LAPTOP,
                         "small-laptop") for directory, notebook in shipped_notebooks()]
    found += [(f"day-{setting}", OUT / "day" / setting,
               [sys.executable, str(Path(__file__).resolve()), "--workshop-day", str(OUT / "day" / setting / "day.json")],
               source, "day") for setting, source, _, _ in DAY_SETTINGS]
    found.append(("grading", OUT / "grading",
                  [sys.executable, str(Path(__file__).resolve()), "--grade-class", str(OUT / "grading" / "grading.json")],
                  None, "grading"))
    found.append(("bench-report", OUT / "bench-report",
                  [*LABKIT, "bench", "--report", "--out", str(OUT / "bench-report")], None, "bench-report"))
    found.append(("stress", OUT / "stress", [sys.executable, str(ROOT / "scripts" / "stress_faults.py"),
                                             "--rounds", str(STRESS_ROUNDS), "--json", str(OUT / "stress" / "stress.json")],
                  "offline-subset", "stress"))
    return found


def shipped_notebooks():
    """(folder, path) of every notebook and exercise solution, in the order they are measured."""
    return [(directory, notebook) for directory in ("notebooks", "solutions")
            for notebook in sorted((ROOT / directory).glob("*.ipynb"))]


def sweep_item(name, parent, notebook, source, section):
    """The item that runs ``notebook`` at its defaults (`labkit sweep`) into ``parent``/its stem."""
    folder = parent / notebook.stem
    return name, folder, [*LABKIT, "sweep", str(notebook), "--out", str(folder)], source, section


def finished(name, folder):
    """True if the item ran to the end: its result file exists and says it succeeded."""
    if name == "tests":
        calls = [read_json(folder / f"{call}.json") for call, _ in TEST_CALLS]
        return all(call and call["exit_status"] == 0 for call in calls)
    if name.startswith("day-"):
        return (folder / "day.json").exists()
    if name in ("startup", "bench-report", "stress", "grading", "install"):
        return (folder / {"startup": "startup.json", "bench-report": "results.json", "stress": "stress.json",
                          "grading": "grading.json", "install": "install.json"}[name]).exists()
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
    for name, folder, command, source, _ in items():
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
                 "mnist_source": item_env.get("LABKIT_MNIST_SOURCE", NO_MNIST_SOURCE)}
        if name == "tests":  # the machine's speed just then: this host's varies through the day
            from labkit.bench.startup import time_bare_import
            entry["import_tensorflow_s"] = round(statistics.median(time_bare_import() for _ in range(3)), 2)
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


# ----- grading a class -------------------------------------------------------------------
# A class as `labkit grade` meets it: 6 learners, each handing in the 5 exercises. Per learner, what each
# exercise (in the order of solutions/) is; GRADING_FLAGS are the options it is graded with.
GRADED_CLASS = {"learner1": ["solution"] * 5, "learner2": ["solution"] * 5, "learner3": ["solution"] * 5,
                "learner4": ["partial"] * 5, "learner5": ["partial"] * 5,
                "learner6": ["blank", "sleeper", "corrupt", "solution", "partial"]}
GRADING_JOBS = 2
GRADING_FLAGS = {"cell_timeout": 120.0, "timeout": 600.0}  # the sleeper's cell is stopped at the cell timeout
KINDS = {"solution": "the solution", "partial": "its first answer cell solved, the others as handed out",
         "blank": "the exercise as handed out", "sleeper": "the solution and a cell that sleeps forever",
         "corrupt": "a notebook file cut off halfway"}


def handed_in(kind, exercise_path):
    """The notebook text a learner hands in for the exercise at ``exercise_path``, being ``kind`` (KINDS)."""
    from labkit.tools import grade

    solution = ROOT / "solutions" / exercise_path.name
    if kind == "blank":
        return exercise_path.read_text()
    if kind == "corrupt":
        text = solution.read_text()
        return text[:len(text) // 2]
    if kind == "solution":
        return solution.read_text()
    if kind == "sleeper":
        notebook = nbformat.read(solution, as_version=4)
        notebook.cells.append(nbformat.v4.new_code_cell("import time\ntime.sleep(10 ** 6)"))
        return nbformat.writes(notebook)
    first_answer = grade.load_exercise(exercise_path).checks[0].covers[0]  # "partial": that cell from the solution
    answer = next(cell for cell in nbformat.read(solution, as_version=4).cells if cell.get("id") == first_answer)
    notebook = nbformat.read(exercise_path, as_version=4)
    notebook.cells = [answer if cell.get("id") == first_answer else cell for cell in notebook.cells]
    return nbformat.writes(notebook)


def grade_class(result_path):
    """Grade GRADED_CLASS, built from solutions/ and exercises/, with `labkit grade --jobs GRADING_JOBS`; write
    the wall time, the peak memory (summed PSS of every grader's worker, kernel and task) and each notebook's row."""
    import tempfile
    from labkit.tools import grade
    from labkit.tools.memory import PeakMemory

    exercise_paths = sorted((ROOT / "exercises").glob("*.ipynb"))
    with tempfile.TemporaryDirectory(prefix="pslab-grading-") as work:
        kinds = {}
        for learner, plan in GRADED_CLASS.items():
            (Path(work) / "class" / learner).mkdir(parents=True)
            for kind, exercise_path in zip(plan, exercise_paths, strict=True):
                (Path(work) / "class" / learner / exercise_path.name).write_text(handed_in(kind, exercise_path))
                kinds[learner, exercise_path.stem.split("_")[0]] = kind
        began = time.monotonic()
        with PeakMemory() as memory:
            _, rows = grade.grade(Path(work) / "class", Path(work) / "graded", jobs=GRADING_JOBS,
                                  settings=grade.Settings(**GRADING_FLAGS))
        seconds = round(time.monotonic() - began)
    notebooks = [{"learner": row["learner"], "kind": kinds[row["learner"], Path(row["file"]).stem.split("_")[0]],
                  **{key: row[key] for key in ("file", "status", "score", "max_score", "seconds")}} for row in rows]
    result_path.parent.mkdir(parents=True, exist_ok=True)
    result_path.write_text(json.dumps({"seconds": seconds, "jobs": GRADING_JOBS, "flags": GRADING_FLAGS,
                                       **memory.peaks(), "notebooks": notebooks}, indent=1))
    print(f"graded {len(notebooks)} notebooks with --jobs {GRADING_JOBS} in {seconds} s", flush=True)


def now():
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


# ----- the page -----------------------------------------------------------------------
INTRO = ["# Measurements", "",
         "Every number the kit's pages quote comes from here. This page is written by `make measurements`",
         "(`scripts/measurements.py`) from the results it recorded in `runs/measurements/`; do not edit it by hand.",
         "Timings depend on the machine and on what else runs on it: the load average (1 minute) at the start",
         "of each measurement is given beside it.", ""]


def page(log, startup):
    """docs/measurements.md's text, from what runs/measurements/ holds."""
    lines = INTRO + heading(log, startup) + [""]
    for render in SECTIONS.values():
        lines += render(log, startup)
    return "\n".join(lines).rstrip() + "\n"


def page_with_sections(keys, log, startup, old):
    """The page ``old`` with only the sections ``keys`` written from runs/measurements/ (in their place, added if
    new): every other section stays as it is, and the heading's dates, loads, MNIST and total widen to include
    the items of those sections. For a clone that holds some of the recorded files only."""
    intro, *blocks = re.split(r"(?m)^(?=## )", old)
    kept = {block.splitlines()[0]: block for block in blocks}
    text, widened_by = [], []
    for key, render in SECTIONS.items():
        new = "\n".join(render(log, startup)).rstrip("\n") + "\n\n"
        title = new.splitlines()[0]
        if key not in keys and title in kept:
            new = kept[title]
        elif key in keys and (title not in kept or "Not measured yet." in kept[title]):  # the old total left it out
            widened_by += [log[name] for name, *_, section in items() if section == key and name in log]
        text.append(new)
    return widened_heading(intro, [log[name] for name, *_, section in items() if section in keys and name in log],
                           widened_by) + "".join(text).rstrip() + "\n"


def heading(log, startup):
    if not log:
        return ["**Nothing measured yet**: run `make measurements`."]
    machine = startup["machine"] if startup else {}
    versions = machine.get("versions", {})
    entries = log.values()
    return [f"- **Machine**: {machine.get('cores', '?')} cores, {machine.get('memory_gib', '?')} GiB, "
            f"{machine.get('platform', platform.platform())}; Python {versions.get('python', platform.python_version())}, "
            f"TensorFlow {versions.get('tensorflow', '?')}, labkit {versions.get('labkit', '?')}",
            *heading_ranges(min(entry["started"] for entry in entries), max(entry["ended"] for entry in entries),
                            sum(entry["seconds"] for entry in entries),
                            [entry["load_average_before"][0] for entry in entries],
                            {entry["mnist_source"] for entry in entries if entry["mnist_source"] != NO_MNIST_SOURCE})]


def heading_ranges(first, last, seconds, loads, sources):
    """The heading's lines after the machine's: dates, total time, loads and MNIST sources."""
    return [f"- **Date**: {first} to {last}; the measurements below took {minutes(seconds)} in all",
            f"- **Load average** at the start of each measurement: {min(loads):.2f} to {max(loads):.2f}",
            f"- **MNIST**: {', '.join(sorted(sources))} "
            "(`timing-standin` is full MNIST's size, repeated from the offline subset: its accuracies mean nothing)"]


HEADING_RANGES = re.compile(r"- \*\*Date\*\*: (.+) to (.+); the measurements below took (.+) in all\n"
                            r"- \*\*Load average\*\* at the start of each measurement: ([\d.]+) to ([\d.]+)\n"
                            r"- \*\*MNIST\*\*: ([^(]+) \(.*\n")


def widened_heading(intro, entries, new_entries):
    """The page's ``intro`` with its dates, loads and MNIST sources widened to include the log ``entries``, and
    the seconds of ``new_entries`` (those its total did not count) added to its total."""
    found = HEADING_RANGES.search(intro)
    if not found:
        raise SystemExit(f"{PAGE.relative_to(ROOT)} has no heading to widen: run `make measurements` to write it whole")
    first, last, total, low, high, sources = found.groups()
    ranges = heading_ranges(min([first] + [entry["started"] for entry in entries]),
                            max([last] + [entry["ended"] for entry in entries]),
                            as_shown_seconds(total) + sum(entry["seconds"] for entry in new_entries),
                            [float(low), float(high)] + [entry["load_average_before"][0] for entry in entries],
                            set(sources.split(", ")) | {entry["mnist_source"] for entry in entries
                                                        if entry["mnist_source"] != NO_MNIST_SOURCE})
    return intro[:found.start()] + "\n".join(ranges) + "\n" + intro[found.end():]


def load_of(log, name):
    entry = log.get(name)
    if not entry:
        return "not measured yet"
    speed = (f"; a bare `import tensorflow` took {entry['import_tensorflow_s']:.2f} s just before, the machine's "
             "speed then" if "import_tensorflow_s" in entry else "")
    return f"{entry['started']}, load {entry['load_average_before'][0]:.2f}{speed}"


def test_calls():
    """{call: what tests/support/tier_times.py recorded} for make test-fast's and make test's call; None if one is missing."""
    calls = {call: read_json(OUT / "tests" / f"{call}.json") for call, _ in TEST_CALLS}
    return calls if all(calls.values()) else None


def tier_cell(times):
    tests = sum(times["tests"].values())
    return f"{tests} test{'s' if tests != 1 else ''}, {minutes(times['seconds'])}"


def tests_section(log):
    """Each pytest call's wall time and its tiers' test time, from the files tests/support/tier_times.py wrote."""
    from support.tier_times import TIERS

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
    stand_in = any(log.get(notebook.stem, {}).get("mnist_source") == "timing-standin"
                   for notebook in (ROOT / directory).glob("*.ipynb"))
    lines = [f"## {title}", "",
             "`labkit sweep NOTEBOOK` with no parameters: wall time of the whole notebook (papermill) and the",
             "results the notebook records; peak memory as explained under \"Memory\" below."
             + (" Runs on the timing stand-in leave out what depends on what the model learnt (accuracies, steps to "
                "a target accuracy, verdicts on them): the stand-in's accuracies mean nothing." if stand_in else ""), "",
             "| notebook | status | run time | peak memory (PSS) | alone (estimate) | RSS sum | largest tasks (PSS, MB) "
             "| measured |", "|---|---|---|---|---|---|---|---|"]
    details = []
    for notebook in sorted((ROOT / directory).glob("*.ipynb")):
        row = result_row(directory, notebook.stem)
        if not row:
            lines.append(f"| `{notebook.stem}` | not measured yet | | | | | | |")
            continue
        lines.append(f"| `{notebook.stem}` | {measured_cells(row, log, notebook.stem)} |")
        stand_in = log.get(notebook.stem, {}).get("mnist_source") == "timing-standin"
        recorded = {key: value for key, value in row.items() if key not in SWEEP_COLUMNS and value != ""
                    and not (stand_in and LEARNT.search(key))}
        if recorded:
            details += [f"### `{notebook.stem}`", "", "| result | value |", "|---|---|"]
            details += [f"| `{key}` | {value} |" for key, value in recorded.items()] + [""]
    return lines + [""] + details


def install_section(log):
    """A learner's first install (scripts/first_install.py): what it downloads, its size, how long it takes."""
    lines = ["## Installing (`make lab`, the first time)", ""]
    result = read_json(OUT / "install" / "install.json")
    if not result:
        return lines + ["Not measured yet.", ""]
    return lines + [
        f"The Ubuntu page's commands that need no sudo, run as written in a fresh home ({load_of(log, 'install')}): "
        f"the learner bundle ({result['bundle_mb']} MB, no wheelhouse) unpacked, `make lab` with an empty pip cache "
        f"and {result['python']}, then `make doctor` in a second terminal, then `make lab` once more. "
        f"Not run here: {'; '.join(f'`{command}`' for command in result['not_run_here'])} (this machine reaches the "
        "package registries only; its own Python stood in).", "",
        "| what | measured |", "|---|---|",
        f"| received over the network during the first `make lab` (the wheels, from the package index) | "
        f"{gigabytes(result['received_mb'])} |",
        f"| `.venv` on disk | {gigabytes(result['venv_mb'])} |",
        f"| first `make lab`, until JupyterLab prints its link | {minutes(result['first_lab_seconds'])} |",
        f"| `make doctor` beside it | {minutes(result['doctor_seconds'])}: {result['doctor_verdict']} |",
        f"| `make lab` again, once installed | {minutes(result['again_seconds'])} |", ""]


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
             "tasks (the browser is not counted). `labkit doctor --workshop` judges a laptop by this day's peak in",
             "the setting it will use, with room for the browser on top.", ""]
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


def grading_section(log):
    """The class graded by ``grade_class``: its wall time and memory, and what each kind of hand-in took."""
    from statistics import median

    lines = ["## Grading a class", ""]
    result = read_json(OUT / "grading" / "grading.json")
    if not result:
        return lines + ["Not measured yet.", ""]
    notebooks = result["notebooks"]
    flags = " ".join(f"--{name.replace('_', '-')} {value:g}" for name, value in result["flags"].items())
    lines += [f"`labkit grade --jobs {result['jobs']} {flags}` over a class of {len(notebooks)} notebooks: "
              f"{len({row['learner'] for row in notebooks})} learners,",
              "each handing in every exercise, built by `scripts/measurements.py` from `solutions/` and `exercises/`",
              f"as the first column says; every exercise at its defaults ({load_of(log, 'grading')}).", "",
              f"**{minutes(result['seconds'])}** for the class; at its peak {gigabytes(result['peak_pss_mb'])} of memory "
              f"(PSS of every grader worker, kernel and task; {gigabytes(result['peak_alone_mb'])} alone).", "",
              "| handed in | notebooks | status | checks passed | seconds each (median, longest) |",
              "|---|---|---|---|---|"]
    for kind, what in KINDS.items():
        mine = [row for row in notebooks if row["kind"] == kind]
        if not mine:
            continue
        statuses = Counter(row["status"] for row in mine)
        seconds = [float(row["seconds"]) for row in mine]
        lines.append(f"| {what} | {len(mine)} | {', '.join(f'{status} ({count})' for status, count in statuses.items())} "
                     f"| {checks_passed(mine)} "
                     f"| {median(seconds):.0f}, {max(seconds):.0f} |")
    return lines + [""]


def checks_passed(rows):
    """"N of M" checks passed over graded notebooks' ``rows``; "none graded" if none had a check (unreadable files)."""
    possible = sum(row["max_score"] for row in rows)
    return f"{sum(row['score'] for row in rows)} of {possible}" if possible else "none graded"


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


def cost_model_section(log):
    """Notebook 08's cost model on shapes its defaults never run: its median error on the points it was not fitted on."""
    shapes = ", ".join(f"`{name} = {value}`" for name, value in COST_MODEL_PARAMETERS.items())
    lines = ["## The cost model on cluster shapes notebook 08's defaults never run", "",
             f"Notebook 08 with {shapes}: the model is fitted on its one-worker points and predicts the others",
             "(3 workers, 5 steps per closure, a second parameter server).", ""]
    rows = read_csv(OUT / COST_MODEL_SHAPES / "results.csv")
    if not rows:
        return lines + ["Not measured yet.", ""]
    row = rows[0]
    if row["status"] != "ok" or not row.get("cost_model_unfitted_median_error"):
        return lines + [f"The run did not record the model's error (status {row['status']}).", ""]
    error = float(row["cost_model_unfitted_median_error"])
    return lines + [f"Median error **{error:.0%}** over the {row['cost_model_unfitted_points']} points it was not fitted on, "
                    f"{'within' if error <= COST_MODEL_GOAL else 'OVER'} the notebook's {COST_MODEL_GOAL:.0%} "
                    f"({load_of(log, COST_MODEL_SHAPES)}).", ""]


SWEEP_COLUMNS = ("point", "status", "error", "seconds", "peak_pss_mb", "peak_rss_mb", "peak_alone_mb", "largest_tasks")
# Results that depend on what a model learnt: left out of a run on the timing stand-in, whose accuracies mean nothing.
LEARNT = re.compile(r"accuracy|to_target|diverged|^verdict_")
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
    return as_shown_seconds(minutes(seconds))


def as_shown_seconds(shown):
    """The seconds that ``minutes()`` showed as ``shown`` ("42 s", "1.5 min")."""
    value, unit = shown.split()
    return float(value) * (60 if unit == "min" else 1)


def bench_section(log):
    lines = ["## Speed benchmark (`labkit bench --report`, notebook 08)", ""]
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


# The page's sections in their order, by the key of `--sections` and of each item's section (items()).
SECTIONS = {"tests": lambda log, startup: tests_section(log), "install": lambda log, startup: install_section(log),
            "startup": lambda log, startup: startup_section(startup, log),
            "notebooks": lambda log, startup: notebooks_section("notebooks", "Notebooks at their learner defaults", log),
            "solutions": lambda log, startup: notebooks_section("solutions", "Exercise solutions at their defaults", log),
            "small-laptop": lambda log, startup: small_laptop_section(log),
            "day": lambda log, startup: day_section(log), "grading": lambda log, startup: grading_section(log),
            "variants": lambda log, startup: variants_section(log), "cost-model": lambda log, startup: cost_model_section(log),
            "long-cells": lambda log, startup: long_cells_section(),
            "bench-report": lambda log, startup: bench_section(log), "stress": lambda log, startup: stress_section(log),
            "memory": lambda log, startup: [MEMORY]}


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


def write_test_times(log):
    """The README's Tests section: the two commands' wall times (with the machine's speed from the ``log``) and
    each tier's test time in `make test`."""
    calls = test_calls()
    if not calls:
        return False
    text = README.read_text()
    new = TEST_TIMES_LINE.sub(test_times_line(calls, log), text)
    tiers = calls["all"]["tiers"]
    new = TIER_ROW.sub(lambda row: f"{row.group(1)} {minutes(tiers.get(row.group(2), {'seconds': 0})['seconds'])} |", new)
    README.write_text(new)
    return new != text


def test_times_line(calls, log):
    speed = log.get("tests", {}).get("import_tensorflow_s")
    at_speed = f" (a bare `import tensorflow` took {speed:.1f} s there then)" if speed else ""
    return (f"*`make test` takes {minutes(calls['all']['wall_seconds'])}; `make test-fast` "
            f"{minutes(calls['unit']['wall_seconds'])}{at_speed}.*")


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
                     "MNIST and (small_laptop) with the offline subset of `make lab-small`; and of the workshop day "
                     "(the 3-hour plan in one JupyterLab) in both settings. Written by `make measurements` "
                     "(scripts/measurements.py) with docs/measurements.md: never edit.",
            "notebooks": measured, "workshop_day": day_table(log)}


def day_table(log):
    """The workshop day's peaks in the peaks table: its plan, and its peak in each setting measured, under the
    doctor's names of the settings ("full_size", "small_laptop")."""
    from labkit.tools.doctor import THREE_HOUR_PLAN

    table = {"plan": list(THREE_HOUR_PLAN)}
    for setting, _, _, _ in DAY_SETTINGS:
        day = read_json(OUT / "day" / setting / "day.json")
        if day:
            logged = log[f"day-{setting}"]
            table[setting.replace("-", "_")] = {
                **{key: day[key] for key in ("peak_pss_mb", "peak_alone_mb", "peak_rss_mb")},
                "measured": logged["started"], "mnist_source": logged["mnist_source"],
                "load_average": logged["load_average_before"][0]}
    return table


def peak_entry(row, logged):
    """One run's entry in the peaks table, from its results.csv row and its log entry."""
    return {"peak_pss_mb": int(row["peak_pss_mb"]), "peak_alone_mb": int(row["peak_alone_mb"]),
            "peak_rss_mb": int(row["peak_rss_mb"]), "minutes": round(float(row["seconds"]) / 60, 1),
            "ok": row["status"] == "ok", "measured": logged["started"], "mnist_source": logged["mnist_source"],
            "load_average": logged["load_average_before"][0]}


def mnist_source():
    from labkit.data import KERAS_CACHE

    return "keras" if KERAS_CACHE.exists() else "timing-standin"


def recorded():
    """What runs/measurements/ holds: the log of the items measured now, and the startup result (or None)."""
    logged = read_json(OUT / "log.json") or {}
    return ({name: entry for name, entry in logged.items() if name in {item[0] for item in items()}},
            read_json(OUT / "startup" / "startup.json"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-only", action="store_true", help="measure nothing; rewrite the page from what is recorded")
    parser.add_argument("--only", nargs="+", default=[], metavar="NAME",
                        help="measure only these, again if measured (name prefixes: startup, 06, ex2, bench-report, grading)")
    parser.add_argument("--sections", nargs="+", choices=list(SECTIONS), metavar="SECTION",
                        help="write only these sections of the page from what is recorded, keeping the others as the "
                             "page has them (a clone that holds some of the recorded files only); the other files "
                             f"are left as they are. Sections: {', '.join(SECTIONS)}")
    parser.add_argument("--workshop-day", type=Path, metavar="JSON",
                        help="run the 3-hour plan in one JupyterLab and write its memory to JSON (the day-* items run this)")
    parser.add_argument("--grade-class", type=Path, metavar="JSON",
                        help="grade a class of 30 notebooks with labkit grade and write the time it took to JSON "
                             "(the grading item runs this)")
    args = parser.parse_args(argv)
    if args.workshop_day:
        return workshop_day(args.workshop_day)
    if args.grade_class:
        return grade_class(args.grade_class)
    if args.write_only and not (OUT / "log.json").exists():
        parser.error(f"nothing is recorded in {OUT.relative_to(ROOT)}: run `make measurements` first")
    if not args.write_only:
        env = dict(os.environ, LABKIT_MNIST_SOURCE=os.environ.get("LABKIT_MNIST_SOURCE") or mnist_source())
        run(args.only, env)
    log, startup = recorded()
    if args.sections:
        PAGE.write_text(page_with_sections(args.sections, log, startup, PAGE.read_text()))
        print(f"wrote the sections {', '.join(args.sections)} of {PAGE.relative_to(ROOT)}")
        return
    PAGE.write_text(page(log, startup))
    PEAKS.write_text(json.dumps(peaks_table(log), indent=1) + "\n")
    changed = write_first_lines() + (["README.md's test times"] if write_test_times(log) else [])
    noted = write_time_notes()
    print(f"wrote {PAGE.relative_to(ROOT)}, {PEAKS.relative_to(ROOT)}, the first line of "
          f"{', '.join(changed) or 'no notebook (all agreed)'} and the time notes of {', '.join(noted) or 'none'}")


if __name__ == "__main__":
    main()
