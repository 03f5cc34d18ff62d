"""A class on one server: N learners (real Unix users) run the 3-hour plan through the class hub at the same time.

    python -m measurements.items.class_on_one_server FOLDER [--learners 1 2 4]    # the run, as root: FOLDER/class.json

For each N a new hub (`python -m labkit.tools.hub`, as `make hub` runs it) serves N new learners. Each logs in,
then all of them at once open the plan's notebooks (labkit/tools/doctor.py's THREE_HOUR_PLAN; the exercise as
solved) one after the other, each in a kernel of its own, and run their code cells in order through the hub's
proxy, kernels left open except at the break (as in the workshop day). Every half second it samples each learner's
memory (the summed PSS of all their processes: server, kernels, tasks) and the hub's own (its proxy and services
with it). It writes, per N: each learner's peak and each notebook's run time, the peak of the learners together
and with the hub. The hub and its learners are driven by measurements/class_hub.py, as the hub tier drives them.
The page gives each round, then the sizing formula and its table of servers.
"""
import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

import nbformat
import psutil

from labkit.runtime import processes
from labkit.tools import memory
from labkit.tools.doctor import THREE_HOUR_PLAN
from measurements import class_hub
from measurements.items import Run
from measurements.items.workshop_day import BREAK_BEFORE, day_notebook
from measurements.records import ROOT, gigabytes, json_file, measured_at, minutes, titled

LEARNER_COUNTS = (1, 2, 4)
MB = 1e6
SIZING_SERVERS = [(16, 4), (32, 8), (64, 16), (128, 32)]  # (GB of memory, cores) of the servers the sizing shows
SYSTEM_GB = 1  # left to the operating system
SLOWDOWN_LIMIT = 2  # a slot of the plan leaves as long again for reading as for running (docs/instructor-guide.md)
# The hub's limits, out of the way of what is measured: no learner is stopped for memory, idleness or tasks.
HUB_OPTIONS = ["--mem-limit", "64G", "--max-user-tasks", "16", "--cull-idle", "86400"]


class ClassMemory(processes.Watcher):
    """While its ``with`` block runs, samples each learner's summed PSS and the hub's (root's processes of its tree)
    and keeps the peaks, in MB: each learner's, the learners' together, and with the hub."""

    def __init__(self, hub, learners, interval=0.5):
        super().__init__(interval)
        self.hub, self.learners = psutil.Process(hub.process.pid), {learner.uid: learner.name for learner in learners}
        self.peak_mb = {name: 0 for name in self.learners.values()}
        self.learners_mb = self.hub_mb = self.all_mb = 0

    def poll(self):
        used = {uid: sum(size for _, size in found.values()) / MB for uid, found in memory.by_user(self.learners).items()}
        hub = 0
        for process in [self.hub, *self.hub.children(recursive=True)]:
            try:
                if process.uids().real == 0:
                    hub += process.memory_full_info().pss / MB
            except psutil.Error:
                continue
        for uid, size in used.items():
            self.peak_mb[self.learners[uid]] = max(self.peak_mb[self.learners[uid]], round(size))
        self.learners_mb = max(self.learners_mb, round(sum(used.values())))
        self.hub_mb = max(self.hub_mb, round(hub))
        self.all_mb = max(self.all_mb, round(sum(used.values()) + hub))


def runs():
    return [Run("class", lambda folder: [sys.executable, "-m", __name__, str(folder)])]


def result(run, folder):
    return json_file(folder / "class.json")


def section(recorded):
    return titled("A class on one server: the 3-hour plan through the hub", recorded.get("class"), class_rounds)


def slowest(round_):
    """(seconds, notebook) of the slowest notebook any learner of ``round_`` ran."""
    return max((step["seconds"], step["notebook"]) for steps in round_["steps"] for step in steps)


def class_sizing(result):
    """The sizing formula's inputs from the recorded rounds: (GB per learner, GB for the hub, learners per core)."""
    rounds = result["rounds"]
    per_learner = max(max(round_["learner_peak_mb"]) for round_ in rounds) / 1000
    hub = max(round_["hub_peak_mb"] for round_ in rounds) / 1000
    alone = slowest(min(rounds, key=lambda round_: round_["learners"]))[0]
    clean = [round_ for round_ in rounds if slowest(round_)[0] <= SLOWDOWN_LIMIT * alone
             and not any(step["failed"] for steps in round_["steps"] for step in steps)]
    per_core = max((round_["learners"] / result["cores"] for round_ in clean), default=0)
    return per_learner, hub, per_core


def learners_for(memory_gb, cores, per_learner, hub, per_core):
    """How many learners a server of ``memory_gb`` and ``cores`` holds for the plan, by the page's formula."""
    return min(int((memory_gb - SYSTEM_GB - hub) // per_learner), int(per_core * cores))


def class_rounds(record):
    """Each round's memory and times, then the sizing formula and its table."""
    result = record["result"]
    per_learner, hub, per_core = class_sizing(result)
    lines = [f"N learners, real Unix users, log in to the class hub (`make hub`: `python -m labkit.tools.hub`) and, all at",
             f"once, run the 3-hour plan ({', '.join(result['plan'])}; the exercise as solved) through it: each notebook",
             "opened with its own kernel in their JupyterLab, its code cells run in order, kernels left open except at",
             f"the break before {BREAK_BEFORE} (`measurements/items/class_on_one_server.py`; {measured_at(record)}).",
             "Memory is the summed PSS of all of a learner's processes (server, kernels, tasks); the hub's is its own,",
             f"proxy and services included. On {result['cores']} cores and {result['memory_gb']:.0f} GB.", "",
             "| learners at once | peak per learner (PSS, the largest) | learners together | with the hub "
             "| slowest notebook | the plan, slowest learner | cells that failed |", "|---|---|---|---|---|---|---|"]
    for round_ in result["rounds"]:
        seconds, notebook = slowest(round_)
        failed = Counter(f"`{step['notebook']}` {step['failed']}" for steps in round_["steps"] for step in steps
                         if step["failed"])
        plan_seconds = max(sum(step["seconds"] for step in steps) for steps in round_["steps"])
        lines.append(f"| {round_['learners']} | {gigabytes(max(round_['learner_peak_mb']))} | "
                     f"{gigabytes(round_['learners_peak_mb'])} | {gigabytes(round_['all_peak_mb'])} | "
                     f"`{notebook}`, {minutes(seconds)} | {minutes(plan_seconds)} | "
                     f"{'; '.join(f'{text} ({count} learners)' if count > 1 else text for text, count in failed.items()) or 'none'} |")
    if not per_core:
        return lines + ["", "Every round had a cell fail, so the page gives no sizing.", ""]
    lines += ["", "### Sizing a server", "",
              f"With m = {per_learner:.1f} GB per learner (the largest learner's peak above), h = {hub:.1f} GB for the hub, "
              f"{SYSTEM_GB} GB for the system, and k = {per_core:g} learners per core (the most learners per core whose slowest",
              f"notebook took at most {SLOWDOWN_LIMIT} times as long as with one learner, and no cell failed: a slot of the plan",
              "leaves as long again for reading as for running), a server with R GB and C cores holds about",
              f"L = min(⌊(R − {SYSTEM_GB} − h) / m⌋, ⌊k × C⌋) learners running the plan at the same moment. Learners who",
              "do not all run the same cell at once (they seldom do) leave more room. `make hub` gives each learner",
              "a memory limit of the workshop day's peak and half again (`--mem-limit`).", "",
              "| server memory | cores | learners (L) |", "|---|---|---|"]
    lines += [f"| {memory_gb} GB | {cores} | {learners_for(memory_gb, cores, per_learner, hub, per_core)} |"
              for memory_gb, cores in SIZING_SERVERS]
    return lines + [""]


def plan_notebooks(learner):
    """The plan's notebooks in ``learner``'s work folder, as paths in it; the exercise replaced by its solution."""
    found = [day_notebook(learner.home / "work", prefix) for prefix in THREE_HOUR_PLAN]
    for path in found:
        os.chown(learner.home / "work" / path, learner.uid, -1)  # the solution copied over their exercise stays theirs
    return found


async def run_the_plan(learner, notebooks):
    """Open each notebook and run its code cells, kernels left open but at the break: [{notebook, seconds, failed}].
    A notebook stops at a cell that fails (``failed`` says which and how), and the learner goes on to the next."""
    sessions, steps = [], []
    for notebook in notebooks:
        if notebook.stem.startswith(BREAK_BEFORE):
            for session in sessions:
                await asyncio.to_thread(learner.shut_down, session)
            sessions = []
        began, failed = time.monotonic(), None
        session, kernel = await asyncio.to_thread(learner.open_notebook, notebook)
        sessions.append(session)
        cells = [cell for cell in nbformat.read(learner.home / "work" / notebook, as_version=4).cells
                 if cell.cell_type == "code"]
        for number, cell in enumerate(cells, 1):
            status, output = await learner.execute(kernel, cell.source, timeout=900)
            if status != "ok":
                error = next((line for line in reversed(output.splitlines()) if "Error" in line), status)
                failed = f"code cell {number}: {status}, {error[:200]}"
                break
        steps.append({"notebook": notebook.stem, "seconds": round(time.monotonic() - began), "failed": failed})
        print(f"class on one server: {learner.name} ran {notebook.stem} in {steps[-1]['seconds']} s"
              + (f", stopped at {failed}" if failed else ""), flush=True)
    return steps


def one_class(python, folder, count):
    """``count`` learners run the plan at once through a hub of their own: that round's record."""
    with class_hub.class_users(count) as (group, users), \
            class_hub.Hub(python, group, folder / f"hub-{count}", *HUB_OPTIONS) as hub:
        learners = [class_hub.Learner(hub, name, password) for name, password in users.items()]
        for learner in learners:
            learner.start_server()
        notebooks = {learner: plan_notebooks(learner) for learner in learners}

        async def everyone():
            return await asyncio.gather(*(run_the_plan(learner, notebooks[learner]) for learner in learners))

        began = time.monotonic()
        with ClassMemory(hub, learners) as sampled:
            steps = asyncio.run(everyone())
    return {"learners": count, "seconds": round(time.monotonic() - began),
            "learner_peak_mb": list(sampled.peak_mb.values()), "learners_peak_mb": sampled.learners_mb,
            "hub_peak_mb": sampled.hub_mb, "all_peak_mb": sampled.all_mb, "steps": steps}


def measure(out, counts=LEARNER_COUNTS):
    """Every round of ``counts`` learners, written to ``out``/class.json."""
    if os.geteuid() != 0:
        sys.exit("class on one server: run it as root: it makes the learners' Unix users and runs the hub")
    folder = class_hub.world_readable_folder("pslab-class-")
    try:
        python = class_hub.learners_python(folder / "python")
        rounds = [one_class(python, folder, count) for count in counts]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "class.json").write_text(json.dumps({"plan": list(THREE_HOUR_PLAN), "cores": os.cpu_count(),
                                       "memory_gb": round(psutil.virtual_memory().total / 1e9, 1),
                                       "rounds": rounds}, indent=1))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m measurements.items.class_on_one_server",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="where to write class.json")
    parser.add_argument("--learners", type=int, nargs="+", default=list(LEARNER_COUNTS), metavar="N",
                        help="how many learners at once, one round each (default: %(default)s)")
    args = parser.parse_args(argv)
    measure(args.folder, args.learners)


if __name__ == "__main__":
    main()
