"""Predict, then measure: notebook 08's cost model as controls and a plot, for JupyterLab (ipywidgets).

``CostModelExplorer(rows)`` fits ``labkit.bench.costmodel`` on the rows of the benchmark's points (``bench.measure_points``,
as notebook 08 does). Its controls choose a cluster (workers, parameter servers, steps per closure, batch
size, model size, link rate); the plot shows the predicted samples/s against workers, each point marked
with the resource that bounds it, redrawn as a control moves. "Measure this point" runs that cluster shape
on this machine: a child process (``python -m labkit.explorer``) runs ``bench.measure_points`` on a
``LocalCluster``, and a thread shows its progress; "Cancel" stops the child, whose tasks exit with it.
Each measurement stays on the plot beside its prediction, with its error.

What was not measured is assumed, and the explorer says so beside the plot: a model of another size
(``costmodel.scale_model``), an extra PS when the points measured one PS count, a number of steps per
closure outside those measured, a link (its rate only). It measures only what it can run here: the
points' model, over loopback, up to ``max_measured_workers`` workers.
"""
import argparse
import base64
import contextlib
import html
import io
import json
import os
import re
import shutil
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import ipywidgets as widgets
import psutil

from labkit.bench.costmodel import calibration, costs_for, predict, relative_error, scale_model, usable_cores
from labkit.runtime import children, processes

LINKS = {"loopback (this machine)": None, "10 Gbit/s": 1250e6, "1 Gbit/s": 125e6, "100 Mbit/s": 12.5e6}
LOOPBACK = next(iter(LINKS))
MODEL_SIZES = (0.25, 0.5, 1, 2, 4, 8, 16)
MARKERS = {"workers": "o", "coordinator": "s", "parameter servers": "^", "network": "D", "cores": "v"}
PROGRESS_LINE = re.compile(r"^bench: (\d+)/(\d+) points?")


@dataclass(frozen=True)
class Shape:
    """One cluster to predict (and maybe measure): what the controls chose."""

    workers: int
    ps: int
    steps_per_closure: int
    batch_size: int
    model_size: float = 1     # times the measured model's M
    link: str = LOOPBACK      # a key of LINKS

    def label(self):
        size = "" if self.model_size == 1 else f", model ×{self.model_size:g}"
        link = "" if self.link == LOOPBACK else f", {self.link} links"
        return f"{self.workers}w {self.ps}ps K={self.steps_per_closure} batch {self.batch_size}{size}{link}"


class CostModelExplorer:
    """Controls, a predicted curve and measured points for the benchmark's ``rows`` (of its first model).

    ``cores``: this machine's (default: all of them). Predictions go up to ``max_workers`` workers;
    "Measure this point" runs up to ``max_measured_workers`` with ``repeats`` timed intervals of at least
    ``min_steps`` steps. ``predictor``: ``costmodel.predict`` or a function like it (notebook 08 passes its own).
    """

    def __init__(self, rows, cores=None, max_workers=16, max_measured_workers=4, repeats=3, min_steps=40,
                 predictor=predict):
        custom = [r for r in rows if r["loop"] == "custom"]
        if not custom:
            raise ValueError("no custom-loop row in these rows: give the rows of the benchmark's points (bench.measure_points), "
                             "with one worker at two numbers of steps per closure.")
        self.model, self.calibration_batch = custom[0]["model"], custom[0]["batch_size"]
        self._fitted_on = {id(r) for r in calibration(rows, self.model, self.calibration_batch) if r}
        batches = sorted({r["batch_size"] for r in rows if r["loop"] == "single-process" and r["model"] == self.model})
        self.costs = {batch: costs_for(rows, self.model, batch, self.calibration_batch) for batch in batches}
        self.cores = usable_cores(rows, self.model, self.calibration_batch, cores or os.cpu_count())
        self.points = [r for r in custom if r["model"] == self.model]
        self.measured_ps = sorted({r["ps"] for r in self.points})
        self.measured_k = sorted({r["steps_per_closure"] for r in self.points})
        self.max_workers, self.max_measured_workers = max_workers, max_measured_workers
        self.repeats, self.min_steps, self.predictor = repeats, min_steps, predictor
        self.measurements = []  # one dict per point measured here: its shape, measured and predicted samples/s
        self._process, self._thread, self._cancelled, self._folder = None, None, False, None

        start = custom[-1]
        self.controls = {
            "workers": widgets.IntSlider(start["workers"], min=1, max=max_workers, description="workers"),
            "ps": widgets.IntSlider(start["ps"], min=1, max=8, description="param. servers"),
            "steps_per_closure": widgets.IntSlider(max(self.measured_k), min=1, max=100, description="steps/closure"),
            "batch_size": widgets.Dropdown(options=batches, value=self.calibration_batch, description="batch size"),
            "model_size": widgets.SelectionSlider(options=[(f"×{s:g}", s) for s in MODEL_SIZES], value=1,
                                                  description="model size"),
            "link": widgets.Dropdown(options=list(LINKS), value=LOOPBACK, description="links"),
        }
        for name, control in self.controls.items():
            control.add_class(f"labkit-explorer-{name.replace('_', '-')}")
            control.style.description_width = "110px"
            control.observe(lambda _: self.redraw(), names="value")
        self.image = widgets.Image(format="png", layout=widgets.Layout(width="640px"))
        self.prediction, self.assumed, self.status, self.table = (widgets.HTML() for _ in range(4))
        for name, output in (("prediction", self.prediction), ("status", self.status), ("table", self.table)):
            output.add_class(f"labkit-explorer-{name}")
        self.progress = widgets.IntProgress(value=0, min=0, max=1, description="progress",
                                            layout=widgets.Layout(visibility="hidden"))
        self.measure_button = widgets.Button(description="Measure this point", button_style="primary")
        self.cancel_button = widgets.Button(description="Cancel", button_style="warning", disabled=True)
        self.measure_button.add_class("labkit-explorer-measure")
        self.cancel_button.add_class("labkit-explorer-cancel")
        self.measure_button.on_click(lambda _: self.measure())
        self.cancel_button.on_click(lambda _: self.cancel())
        controls = widgets.VBox([*self.controls.values(), widgets.HBox([self.measure_button, self.cancel_button]),
                                 self.progress, self.status])
        self.view = widgets.VBox([widgets.HBox([controls, self.image]), self.prediction, self.assumed, self.table])
        self.view.add_class("labkit-explorer")
        self.redraw()

    # ----- what the model predicts ---------------------------------------------------
    def shape(self):
        """The cluster the controls show now."""
        return Shape(**{name: control.value for name, control in self.controls.items()})

    def predict(self, shape):
        """The cost model's ``Prediction`` for ``shape`` on this machine (its usable cores shared)."""
        costs = scale_model(self.costs[shape.batch_size], shape.model_size)
        return self.predictor(costs, shape.workers, shape.ps, shape.steps_per_closure, cores=self.cores,
                              link_bytes_per_s=LINKS[shape.link])

    def assumptions(self, shape):
        """What the prediction of ``shape`` assumes because nothing measured it (sentences; none if measured)."""
        said = []
        if shape.model_size != 1:
            said.append(f"A model ×{shape.model_size:g} the size of {self.model} was not measured: its bytes per step, each "
                        "step's time and the workers' and PS's CPU per step are assumed to grow with M (a wider "
                        "dense model); a closure's dispatch and the coordinator's CPU per step are not.")
        if shape.ps not in self.measured_ps and len(self.measured_ps) == 1:
            said.append(f"The points measured {self.measured_ps[0]} PS only, so not what another PS costs: each PS is "
                        "assumed to serve 1/p of every step at no cost of its own (measure ps = [1, 2] to know).")
        if not min(self.measured_k) <= shape.steps_per_closure <= max(self.measured_k):
            said.append(f"{shape.steps_per_closure} steps per closure lies outside those measured "
                        f"({min(self.measured_k)}–{max(self.measured_k)}): the fit a + b/K is extrapolated.")
        if shape.link != LOOPBACK:
            said.append(f"Links of {shape.link}: only the rate counts (no latency); every task still shares this machine's "
                        "cores, as <code>labkit bench link</code> emulates with network namespaces. The button measures "
                        "over loopback only.")
        return said

    def why_not_measurable(self, shape):
        """Why "Measure this point" cannot run ``shape`` here, or None if it can."""
        if self._process is not None:
            return "a measurement is running: wait for it, or cancel it."
        if shape.model_size != 1 or shape.link != LOOPBACK:
            return (f"only the measured model ({self.model}, ×1) over loopback can be measured here; set model size ×1 "
                    "and links to loopback (over a rate-limited link: sudo labkit bench link).")
        if shape.workers > self.max_measured_workers:
            return (f"{shape.workers} workers are more than this machine measures ({self.max_measured_workers} at most: "
                    f"each worker is a TensorFlow process on its {os.cpu_count()} cores). Choose at most "
                    f"{self.max_measured_workers}; the prediction goes on beyond.")
        return None

    # ----- drawing ----------------------------------------------------------------------
    def figure(self, shape=None):
        """Predicted samples/s against workers for ``shape`` (the controls' by default), the measured points beside."""
        from matplotlib.figure import Figure

        shape = shape or self.shape()
        figure = Figure(figsize=(6.4, 4.2))
        axis = figure.subplots()
        most = max(8, shape.workers)
        self._draw_curve(axis, shape, most, "C0", "predicted")
        now = self.predict(shape)
        axis.scatter([shape.workers], [now.steps_per_s * shape.batch_size], s=220, facecolors="none", edgecolors="C3",
                     linewidths=2, label=f"this point: {now.bottleneck}", zorder=3)
        self._draw_measured(axis, [m for m in self.measurements if m["shape"] == {**asdict(shape), "workers": m["shape"]["workers"]}])
        axis.set(xlabel="workers", ylabel="samples/s", ylim=(0, None), xlim=(0.5, most + 0.5),
                 title=f"{self.model}: {shape.ps} ps, K={shape.steps_per_closure}, batch {shape.batch_size}"
                       + ("" if shape.model_size == 1 else f", model ×{shape.model_size:g}")
                       + ("" if shape.link == LOOPBACK else f", {shape.link}"))
        axis.legend(fontsize=7, loc="lower right", title="marker: the bound", title_fontsize=7)
        figure.tight_layout()
        return figure

    def default_grid(self):
        """The figure a saved copy keeps: for each K the points measured, at their PS count and batch, the predicted
        curve against workers, and the measured points with their errors."""
        from matplotlib.figure import Figure

        figure = Figure(figsize=(6.4, 4.2))
        axis = figure.subplots()
        ps = self.points[-1]["ps"]
        most = max(8, max(r["workers"] for r in self.points))
        for color, k in zip(("C0", "C1", "C2", "C4"), self.measured_k):
            shape = Shape(1, ps, k, self.calibration_batch)
            self._draw_curve(axis, shape, most, color, f"K={k} predicted")
            self._draw_measured(axis, [self._point_of(r) for r in self.points if
                                       (r["ps"], r["steps_per_closure"], r["batch_size"]) == (ps, k, self.calibration_batch)],
                                color=color, label=f"K={k} measured")
        axis.set(xlabel="workers", ylabel="samples/s", ylim=(0, None), xlim=(0.5, most + 0.5),
                 title=f"{self.model}, {ps} ps, batch {self.calibration_batch}: predicted and measured")
        axis.legend(fontsize=7, loc="lower right", title="marker: the bound", title_fontsize=7)
        figure.tight_layout()
        return figure

    def _point_of(self, row):
        shape = Shape(row["workers"], row["ps"], row["steps_per_closure"], row["batch_size"])
        return {"shape": asdict(shape), "measured": row["samples_per_s_median"], "fitted_on": id(row) in self._fitted_on,
                "predicted": self.predict(shape).steps_per_s * row["batch_size"]}

    def _draw_curve(self, axis, shape, most, color, label):
        counts = range(1, most + 1)
        predicted = [self.predict(Shape(**{**asdict(shape), "workers": n})) for n in counts]
        axis.plot(counts, [p.steps_per_s * shape.batch_size for p in predicted], color=color, label=label)
        for limit, marker in MARKERS.items():
            bound = [(n, p.steps_per_s * shape.batch_size) for n, p in zip(counts, predicted) if p.bottleneck == limit]
            if bound:
                known = limit in axis.get_legend_handles_labels()[1]  # one legend entry per limit, in grey
                axis.scatter(*zip(*bound), marker=marker, color=color, s=30)
                if not known:
                    axis.scatter([], [], marker=marker, color="grey", label=limit)

    @staticmethod
    def _draw_measured(axis, measured, color="black", label="measured here"):
        if not measured:
            return
        axis.scatter([m["shape"]["workers"] for m in measured], [m["measured"] for m in measured], marker="*", s=160,
                     color=color, edgecolors="black", label=label, zorder=4)
        for m in measured:
            axis.annotate(_error(m), (m["shape"]["workers"], m["measured"]),
                          textcoords="offset points", xytext=(6, -12), fontsize=8)

    def redraw(self):
        """Predict the controls' shape again and show it (every control calls this when it moves)."""
        shape = self.shape()
        prediction = self.predict(shape)
        limits = " · ".join(f"{name} {rate * shape.batch_size:,.0f}" for name, rate in prediction.limits.items())
        self.prediction.value = (f"<b>{shape.label()}</b>: predicted <b>{prediction.steps_per_s * shape.batch_size:,.0f} "
                                 f"samples/s</b>, bounded by <b>{prediction.bottleneck}</b> "
                                 f"(each limit in samples/s: {limits}; the tasks can keep {self.cores:.2f} cores busy)")
        said = self.assumptions(shape)
        self.assumed.value = ("<b>Assumed, not measured:</b><ul>" + "".join(f"<li>{s}</li>" for s in said) + "</ul>"
                              if said else "Every input of this prediction was measured in the points.")
        buffer = io.BytesIO()
        self.figure(shape).savefig(buffer, format="png", dpi=90)
        self.image.value = buffer.getvalue()
        self.table.value = self._table()

    def _table(self):
        if not self.measurements:
            return "No point measured here yet."
        rows = "".join(f"<tr><td>{Shape(**m['shape']).label()}</td><td>{m['measured']:,.0f}</td><td>{m['predicted']:,.0f}"
                       f"</td><td>{_error(m)}</td><td>{m['bottleneck']}</td></tr>"
                       for m in self.measurements)
        return ("<table><tr><th>measured here</th><th>samples/s</th><th>predicted</th><th>error</th><th>bounded by</th>"
                f"</tr>{rows}</table>")

    # ----- measuring -------------------------------------------------------------------
    def measure(self):
        """Measure the controls' shape in the background (a child process, watched by a thread)."""
        shape = self.shape()
        reason = self.why_not_measurable(shape)
        if reason:
            self.status.value = f"Not measured: {html.escape(reason)}"
            return
        self._folder = Path(tempfile.mkdtemp(prefix="labkit-explorer-"))
        arguments = [f"--{name.replace('_', '-')}={getattr(shape, name)}" for name in ("workers", "ps", "steps_per_closure", "batch_size")]
        self._cancelled = False
        self._process = children.start_program(
            "labkit.explorer", *arguments, f"--model={self.model}", f"--repeats={self.repeats}", f"--min-steps={self.min_steps}",
            f"--out={self._folder / 'rows.json'}", log_path=self._folder / "measure.log", read_stdout=True)
        self.progress.value, self.progress.layout.visibility = 0, "visible"
        self.measure_button.disabled, self.cancel_button.disabled = True, False
        self.status.value = f"Measuring {shape.label()}: starting TensorFlow and a cluster&hellip;"
        self._thread = threading.Thread(target=self._watch, args=(self._process, shape), name="labkit-explorer", daemon=True)
        self._thread.start()

    def _watch(self, process, shape):
        """In the thread: show the child's progress lines; when it ends, add its measurement (or say why not)."""
        for line in process.stdout:
            found = PROGRESS_LINE.match(line)
            if found:
                self.progress.max, self.progress.value = int(found.group(2)), int(found.group(1))
                self.status.value = f"Measuring {shape.label()}: {html.escape(line.strip())}"
        process.wait()
        log, out = self._folder / "measure.log", self._folder / "rows.json"
        if self._cancelled:
            self.status.value = f"Cancelled: {shape.label()} was not measured; its processes are stopped."
        elif process.returncode != 0 or not out.exists():
            self.status.value = (f"The measurement failed (exit code {process.returncode}); the end of its log:"
                                 f"<pre>{html.escape(processes.log_tail(log, 8))}</pre>")
        else:
            self._add(shape, json.loads(out.read_text()))
        shutil.rmtree(self._folder, ignore_errors=True)
        self._process = None
        self.progress.layout.visibility = "hidden"
        self.measure_button.disabled, self.cancel_button.disabled = False, True

    def _add(self, shape, rows):
        row = next(r for r in rows if r["loop"] == "custom")
        prediction = self.predict(shape)
        measured, predicted = row["samples_per_s_median"], prediction.steps_per_s * shape.batch_size
        self.measurements.append({"shape": asdict(shape), "measured": measured, "predicted": predicted,
                                  "bottleneck": prediction.bottleneck})
        self.status.value = (f"Measured {shape.label()}: {measured:,.0f} samples/s (quartiles "
                             f"{row['samples_per_s_q1']:,.0f}–{row['samples_per_s_q3']:,.0f}); predicted {predicted:,.0f}, "
                             f"error {relative_error(predicted, measured):.0%}.")
        self.redraw()

    @property
    def measuring(self):
        """True while a measurement runs."""
        return self._thread is not None and self._thread.is_alive()

    def cancel(self):
        """Stop the running measurement and every task it started; return once they are gone."""
        process = self._process
        if process is None:
            return
        self._cancelled, tasks = True, []
        with contextlib.suppress(psutil.NoSuchProcess):  # it may have just finished
            tasks = [child.pid for child in process.children(recursive=True)]  # its cluster's tasks
        processes.stop([process])
        processes.wait_until_gone(tasks, timeout=30)
        self._thread.join()

    def close(self):
        """Cancel a running measurement and remove the widgets."""
        self.cancel()
        for widget in (*self.controls.values(), self.image, self.prediction, self.assumed, self.status, self.table,
                       self.progress, self.measure_button, self.cancel_button, self.view):
            widget.close()

    def _repr_mimebundle_(self, **kwargs):
        """The live widget where a widget frontend runs; the prediction as text and the plot as an image elsewhere."""
        text = f"{self.prediction.value}\n(the cost-model explorer: interactive in JupyterLab)"
        return {**self.view._repr_mimebundle_(**kwargs), "text/plain": re.sub("<[^>]+>", "", text),
                "image/png": base64.b64encode(self.image.value).decode("ascii")}


def _error(measurement):
    """The prediction's error, signed: + where it predicted more than was measured."""
    if measurement.get("fitted_on"):
        return "fitted on"
    error = round((measurement["predicted"] - measurement["measured"]) / measurement["measured"], 2)
    return f"{error:+.0%}" if error else "0%"


def main(argv=None):
    """``python -m labkit.explorer``: measure one cluster shape and its single-process baseline; write the rows."""
    parser = argparse.ArgumentParser(prog="python -m labkit.explorer", description=main.__doc__)
    for flag in ("--workers", "--ps", "--steps-per-closure", "--batch-size", "--repeats", "--min-steps"):
        parser.add_argument(flag, type=int, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    children.exit_with_parent_if_started_by_one()
    from labkit.bench import Point, measure_points

    points = [Point(args.model, "single-process", 0, 0, args.steps_per_closure, args.batch_size),
              Point(args.model, "custom", args.workers, args.ps, args.steps_per_closure, args.batch_size)]
    rows = measure_points(points, args.repeats, args.min_steps, target_accuracy=1.0)
    Path(args.out).write_text(json.dumps(rows))


if __name__ == "__main__":
    main()
