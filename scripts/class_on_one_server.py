"""A class on one server: N learners (real Unix users) run the 3-hour plan through the class hub at the same time.

    python scripts/class_on_one_server.py RESULT.json [--learners 1 2 4]    (as root; `make measurements` runs it)

For each N a new hub (`python -m labkit.tools.hub`, as `make hub` runs it) serves N new learners. Each logs in,
then all of them at once open the plan's notebooks (labkit/tools/doctor.py's THREE_HOUR_PLAN; the exercise as
solved) one after the other, each in a kernel of its own, and run their code cells in order through the hub's
proxy, kernels left open except at the break (as in the workshop day of scripts/measurements.py). Every half
second it samples each learner's memory (the summed PSS of all their processes: server, kernels, tasks) and the
hub's own (its proxy and services with it). It writes, per N: each learner's peak and each notebook's run time,
the peak of the learners together and with the hub.
"""
import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import hub_support  # noqa: E402  (the hub, its learners and their code, as tests/test_hub.py drives them)

from labkit.runtime import processes  # noqa: E402
from labkit.tools import memory  # noqa: E402
from labkit.tools.doctor import THREE_HOUR_PLAN  # noqa: E402

LEARNER_COUNTS = (1, 2, 4)
BREAK_BEFORE = "03"  # docs/instructor-guide.md: at the break everyone shuts down the kernels open until then
MB = 1e6
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


def plan_notebooks(learner):
    """The plan's notebooks in ``learner``'s work folder, as paths in it; the exercise replaced by its solution."""
    work = learner.home / "work"
    found = []
    for prefix in THREE_HOUR_PLAN:
        path = sorted(work.glob(f"notebooks/{prefix}*.ipynb")) + sorted(work.glob(f"exercises/{prefix}*.ipynb"))
        if path[0].parent.name == "exercises":
            shutil.copy(ROOT / "solutions" / path[0].name, path[0])
            os.chown(path[0], learner.uid, -1)
        found.append(path[0].relative_to(work))
    return found


async def run_the_plan(learner, notebooks):
    """Open each notebook and run its code cells, kernels left open but at the break: [{notebook, seconds, failed}].
    A notebook stops at a cell that fails (``failed`` says which and how), and the learner goes on to the next."""
    import nbformat

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
    with hub_support.class_users(count) as (group, users), \
            hub_support.Hub(python, group, folder / f"hub-{count}", *HUB_OPTIONS) as hub:
        learners = [hub_support.Learner(hub, name, password) for name, password in users.items()]
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


def measure(result_path, counts=LEARNER_COUNTS):
    """Every round of ``counts`` learners, written to ``result_path`` as JSON."""
    if os.geteuid() != 0:
        sys.exit("class on one server: run it as root: it makes the learners' Unix users and runs the hub")
    folder = hub_support.world_readable_folder("pslab-class-")
    try:
        python = hub_support.learners_python(folder / "python")
        rounds = [one_class(python, folder, count) for count in counts]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result_path.parent.mkdir(parents=True, exist_ok=True)
    result_path.write_text(json.dumps({"plan": list(THREE_HOUR_PLAN), "cores": os.cpu_count(),
                                       "memory_gb": round(psutil.virtual_memory().total / 1e9, 1),
                                       "rounds": rounds}, indent=1))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", type=Path, help="the JSON file to write")
    parser.add_argument("--learners", type=int, nargs="+", default=list(LEARNER_COUNTS), metavar="N",
                        help="how many learners at once, one round each (default: %(default)s)")
    args = parser.parse_args(argv)
    measure(args.result, args.learners)


if __name__ == "__main__":
    main()
