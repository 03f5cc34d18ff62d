"""A live dashboard of a LocalCluster for JupyterLab, made of ipywidgets.

One row per task: its name, address, pid, alive or dead, CPU %, memory (PSS, as every memory figure
of the kit; USS where the system has no PSS), uptime and the
last log line, with buttons that kill and restart the task. Below the rows, a training
panel shows what ``labkit.train.run(..., recording=Recording(on_progress=dashboard.show_training))`` reports.

A background thread refreshes the rows every ``interval`` seconds. It only changes
widget values (it never prints) and stops when the cluster stops or the dashboard is
closed. Where no widget can be drawn (nbconvert, a terminal), displaying the dashboard
shows the cluster's HTML (or text) status table instead.

The buttons run in the kernel: while a cell is busy (training, say), a click waits until
that cell finishes. The rows keep refreshing meanwhile.
"""
import html
import threading
import time

import ipywidgets as widgets
import psutil

from labkit.runtime import processes

# key: (heading, width) of each column; the key also names its cells' CSS class ("labkit-state").
COLUMNS = {"task": ("task", "70px"), "address": ("address", "140px"), "pid": ("pid", "65px"),
           "state": ("state", "70px"), "cpu": ("CPU", "55px"), "memory": ("memory", "75px"),
           "uptime": ("uptime", "65px"), "log": ("last log line", "260px")}
ALIVE = '<span style="color:#1a7f37">&#9679; alive</span>'
DEAD = '<span style="color:#cf222e">&#9679; dead</span>'


class ClusterDashboard:
    """A live view of ``cluster``: display it in a notebook cell; ``close()`` stops it."""

    def __init__(self, cluster, interval=1.0):
        self.cluster, self.interval = cluster, interval
        self._processes = {}  # pid -> psutil.Process: cpu_percent() measures since the previous call
        self._lock = threading.Lock()  # the thread and the buttons both refresh
        self._closed = threading.Event()
        self._thread = None
        self.memory_measure = processes.memory_measure()
        self.cells = {}  # task name -> column key -> the HTML widget showing it
        self.buttons = {}  # task name -> "kill" / "restart" -> its Button
        self.headings = {key: widgets.HTML(f"<b>{heading}</b>") for key, (heading, _) in COLUMNS.items()}
        self.headings["memory"].value = f"<b>memory ({self.memory_measure.upper()})</b>"
        rows = [_row(self.headings, {}, "heading")] + [self._task_row(task) for task in cluster.tasks]
        self.training = widgets.HTML("<b>training</b>: no progress reported yet")
        self.message = widgets.HTML()
        self.view = widgets.VBox([*rows, self.training, self.message])
        self.view.add_class("labkit-dashboard")
        self.refresh()
        self.start()

    # ----- what the dashboard shows ----------------------------------------
    def refresh(self):
        """Read every task's state and show it (the thread calls this; so can you)."""
        with self._lock:
            for row in self.cluster.status():
                cells = self.cells[row["task"]]
                usage = self._usage(row["pid"]) if row["alive"] else None
                cells["pid"].value = str(row["pid"])
                cells["state"].value = ALIVE if row["alive"] else DEAD
                cells["cpu"].value = f"{usage[0]:.0f} %" if usage else "&ndash;"
                cells["memory"].value = f"{usage[1]:.0f} MB" if usage else "&ndash;"
                cells["uptime"].value = f"{row['uptime_seconds']:.0f} s" if row["alive"] else "&ndash;"
                line = html.escape(row["last_log_line"][-200:])
                cells["log"].value = f'<code title="{line}" style="white-space:nowrap">{line}</code>'

    def show_training(self, training_log):
        """Show the latest interval of a ``labkit.train.TrainingLog`` (pass as ``on_progress``)."""
        self.training.value = (f"<b>training</b>: step {training_log.step[-1]} &middot; "
                               f"loss {training_log.loss[-1]:.4f} (first {training_log.loss[0]:.4f}) &middot; "
                               f"{training_log.steps_per_second[-1]:.1f} steps/s")

    def _usage(self, pid):
        """CPU % since the previous refresh and memory in MB (``memory_measure``), or None if the process is gone."""
        try:
            if pid not in self._processes:
                self._processes[pid] = psutil.Process(pid)
            cpu_percent = self._processes[pid].cpu_percent()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None
        memory = processes.memory_bytes(pid, self.memory_measure)
        return None if memory is None else (cpu_percent, memory / 1e6)

    # ----- refreshing -------------------------------------------------------
    @property
    def refreshing(self):
        """True while the background thread refreshes the rows."""
        return self._thread is not None and self._thread.is_alive()

    def start(self):
        """Refresh every ``interval`` seconds in a background thread (the constructor calls this)."""
        if not self._closed.is_set() and not self.refreshing:
            self._thread = threading.Thread(target=self._refresh_while_running, name="labkit-dashboard",
                                            daemon=True)
            self._thread.start()

    def _refresh_while_running(self):
        while not self._closed.wait(self.interval):
            self.refresh()
            if not self.cluster.running:
                return

    def close(self):
        """Stop refreshing and remove the dashboard's widgets from the page."""
        self._closed.set()
        if self._thread is not None:
            self._thread.join()
        _close_all(self.view)

    def _repr_mimebundle_(self, **kwargs):
        """The live widget where a widget frontend runs; the status table everywhere else."""
        tables = {"text/plain": repr(self.cluster), "text/html": self.cluster._repr_html_()}
        return tables if self._closed.is_set() else {**self.view._repr_mimebundle_(**kwargs), **tables}

    # ----- the rows and their buttons -----------------------------------------
    def _task_row(self, task):
        cells = self.cells[task.name] = {key: widgets.HTML() for key in COLUMNS}
        cells["task"].value, cells["address"].value = task.name, task.address
        self.buttons[task.name] = {"kill": self._button("kill", "danger", self.cluster.kill, task.name),
                                   "restart": self._button("restart", "warning", self.cluster.restart, task.name)}
        return _row(cells, self.buttons[task.name], "task-" + task.name.replace(":", "-"))

    def _button(self, label, style, action, task):
        button = widgets.Button(description=label, button_style=style, layout=widgets.Layout(width="80px"))
        button.add_class(f"labkit-{label}")
        button.on_click(lambda _: self._act(action, label, task))
        return button

    def _act(self, action, label, task):
        """Run ``cluster.kill`` or ``cluster.restart`` for a button; say how it went in the dashboard."""
        self.message.value = f"{label} {task}&hellip;"
        began = time.monotonic()
        try:
            action(task)
            self.message.value = f"{label} {task}: done in {time.monotonic() - began:.1f} s"
        except Exception as error:  # a button callback has no cell to show its error in
            self.message.value = f"{label} {task} failed: {html.escape(str(error))}"
        self.refresh()
        self.start()  # restarting a task of a cluster whose tasks were all dead: watch it again


def _row(cells, buttons, name):
    """One line of the table: its cells at their column widths, then its buttons."""
    for key, cell in cells.items():
        cell.add_class(f"labkit-{key}")
        cell.layout.width, cell.layout.overflow = COLUMNS[key][1], "hidden"
    row = widgets.HBox([*cells.values(), *buttons.values()])
    row.add_class(f"labkit-{name}")
    return row


def _close_all(widget):
    """Close a widget and everything inside it."""
    for child in getattr(widget, "children", ()):
        _close_all(child)
    widget.close()


__all__ = ["ClusterDashboard"]
