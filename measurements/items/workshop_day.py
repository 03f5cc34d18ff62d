"""A workshop day: the 3-hour plan's notebooks in one JupyterLab, and each one's peak memory with the kernels open.

The kernels stay open as learners leave them; the day is run with full-size MNIST and in the small-laptop setting.

    python -m measurements.items.workshop_day FOLDER    # the run: writes FOLDER/day.json
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from measurements.items import SMALL_LAPTOP, Run
from measurements.records import json_file, ROOT, gigabytes, largest_tasks, measured_at, minutes, tasks

# docs/instructor-guide.md, "A three-hour workshop": at the break before notebook 03 everyone shuts down
# the kernels open until then; every other kernel stays open after its notebook, as learners leave them.
BREAK_BEFORE = "03"
KERNEL = "pslab"  # the kernel `make kernel` registers; the notebooks name it
# (setting, its MNIST source or None for the full-size default, its title on the page, the GB of summed PSS the
# day must stay within).
SETTINGS = [("full-size", None, "Full-size MNIST", 5),
            ("small-laptop", SMALL_LAPTOP, "The small-laptop setting (`make lab-small`)", 3)]


def runs():
    return [Run(f"day-{setting}", lambda folder: [sys.executable, "-m", __name__, str(folder)], source)
            for setting, source, _, _ in SETTINGS]


def result(run, folder):
    return json_file(folder / "day.json")


def section(recorded):
    from labkit.tools.doctor import THREE_HOUR_PLAN

    lines = ["## A workshop day: the 3-hour plan in one JupyterLab", "",
             f"The plan's notebooks ({', '.join(THREE_HOUR_PLAN)}; the exercise as solved) opened one after the other",
             "in one `jupyter lab --no-browser` server on 127.0.0.1, as `make lab` serves them: each opened with its",
             "own kernel, its code cells run in order. Every kernel stays open after its notebook, as learners leave",
             f"them, except at the break before {BREAK_BEFORE}, when the instructor guide has everyone shut down the",
             "kernels open until then. The memory is the summed PSS of the server, every open kernel and their",
             "tasks (the browser is not counted). `labkit doctor --workshop` judges a laptop by this day's peak in",
             "the setting it will use, with room for the browser on top.", ""]
    for setting, _, title, limit_gb in SETTINGS:
        lines += [f"### {title}", ""]
        record = recorded.get(f"day-{setting}")
        if not record:
            lines += ["Not measured yet.", ""]
            continue
        day = record["result"]
        verdict = "within" if max(day["peak_pss_mb"], day["peak_alone_mb"]) <= limit_gb * 1000 else "OVER"  # as the doctor judges
        lines += [f"The day's peak: **{gigabytes(day['peak_pss_mb'])}** (PSS), {gigabytes(day['peak_alone_mb'])} alone, "
                  f"{verdict} the {limit_gb} GB the kit aims at ({measured_at(record)}).", "",
                  "| notebook | kernels open | run time | peak memory (PSS) | alone (estimate) | RSS sum | largest (PSS, MB) |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| `{step['notebook']}` | {step['open_kernels']} | {minutes(step['seconds'])} | "
                  f"{gigabytes(step['peak_pss_mb'])} | {gigabytes(step['peak_alone_mb'])} | {gigabytes(step['peak_rss_mb'])} | "
                  f"{tasks(step['largest_tasks'])} |" for step in day["steps"]] + [""]
    return lines


def workshop_day(folder):
    """Run the 3-hour plan the way learners do: one JupyterLab server on 127.0.0.1 (its token on) serving
    a work folder as `make lab` fills it (the exercise as solved), each notebook opened as a session and
    its code cells run in order in that session's kernel, kernels left open except at the break. Writes
    each notebook's peak (summed over the server, every open kernel and their tasks) and the day's."""
    from labkit.tools import workfolder
    from labkit.tools.doctor import THREE_HOUR_PLAN

    with tempfile.TemporaryDirectory(prefix="pslab-day-") as work:
        workfolder.copy_missing(work)
        plan = [day_notebook(Path(work), prefix) for prefix in THREE_HOUR_PLAN]
        with JupyterServer(Path(work)) as server:
            steps = [day_step(server, notebook) for notebook in plan]
    day = {key: max(step[key] for step in steps) for key in ("peak_pss_mb", "peak_alone_mb", "peak_rss_mb")}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "day.json").write_text(json.dumps({**day, "steps": steps}, indent=1))


def day_notebook(work, prefix):
    """The work folder's notebook that ``prefix`` names; an exercise is replaced by its solution first."""
    found = sorted((work / "notebooks").glob(f"{prefix}*.ipynb")) + sorted((work / "exercises").glob(f"{prefix}*.ipynb"))
    if found[0].parent.name == "exercises":
        shutil.copy(ROOT / "solutions" / found[0].name, found[0])
    return found[0].relative_to(work)


def day_step(server, notebook):
    """Open ``notebook`` in ``server`` (after the break's shutdowns, if it comes first) and run it; its row."""
    from labkit.tools.memory import PeakMemory

    if notebook.stem.startswith(BREAK_BEFORE):
        server.shut_down_all()
    began = time.monotonic()
    with PeakMemory() as memory:
        server.run(notebook)
    seconds = round(time.monotonic() - began)
    print(f"workshop day: {notebook} ran in {seconds} s, {memory.peak_mb} MB at its peak with "
          f"{len(server.sessions)} kernels open", flush=True)
    peaks = memory.peaks()
    return {"notebook": notebook.stem, "seconds": seconds, "open_kernels": len(server.sessions), **peaks,
            "largest_tasks": largest_tasks(peaks["largest_tasks"])}


class JupyterServer:
    """`jupyter lab --no-browser` on 127.0.0.1 with a token, serving ``root``, as `make lab` starts it."""

    def __init__(self, root):
        import secrets
        from labkit.cluster import pick_port

        self.root, self.port, self.token = root, pick_port(), secrets.token_hex(16)
        self.runtime = root / ".runtime"  # the kernels' connection files
        self.sessions = {}  # notebook -> session id

    def __enter__(self):
        from labkit.tools import lab

        env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(self.runtime))
        command = lab.command(self.root, self.port, self.token, open_browser=False)
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
                                                         "type": "notebook", "kernel": {"name": KERNEL}})
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


if __name__ == "__main__":
    workshop_day(Path(sys.argv[1]))
