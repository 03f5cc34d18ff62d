"""The explorer's widgets and figures: controls, the predicted curve, the points measured here, and "Measure"."""
import base64
import html
import io
import re
from dataclasses import asdict

import ipywidgets as widgets

from labkit.explorer.measurement import Measurement
from labkit.explorer.model import LINKS, LOOPBACK, MODEL_SIZES, ExplorerModel, Shape, error
from labkit.bench.costmodel import predict, relative_error

MARKERS = {"workers": "o", "coordinator": "s", "parameter servers": "^", "network": "D", "cores": "v"}


class CostModelExplorer:
    """Controls, a predicted curve and measured points for the benchmark's ``rows`` (of their first model).

    ``cores``: this machine's (default: all of them). Predictions go up to ``max_workers`` workers;
    "Measure this point" runs up to ``max_measured_workers`` with ``repeats`` timed intervals of at least
    ``min_steps`` steps. ``predictor``: ``costmodel.predict`` or a function like it (notebook 08 passes its own).
    """

    def __init__(self, rows, cores=None, max_workers=16, max_measured_workers=4, repeats=3, min_steps=40,
                 predictor=predict):
        self.model = ExplorerModel(rows, cores, max_measured_workers, predictor)
        self.repeats, self.min_steps, self.measurement = repeats, min_steps, None
        start = self.model.points[-1]
        self.controls = {
            "workers": widgets.IntSlider(start["workers"], min=1, max=max_workers, description="workers"),
            "ps": widgets.IntSlider(start["ps"], min=1, max=8, description="param. servers"),
            "steps_per_closure": widgets.IntSlider(max(self.model.measured_k), min=1, max=100,
                                                   description="steps/closure"),
            "batch_size": widgets.Dropdown(options=self.model.batches, value=self.model.calibration_batch,
                                           description="batch size"),
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

    def shape(self):
        """The cluster the controls show now."""
        return Shape(**{name: control.value for name, control in self.controls.items()})

    # ----- drawing ----------------------------------------------------------------------
    def figure(self, shape=None):
        """Predicted samples/s against workers for ``shape`` (the controls' by default), the measured points beside."""
        from matplotlib.figure import Figure

        shape = shape or self.shape()
        figure = Figure(figsize=(6.4, 4.2))
        axis = figure.subplots()
        most = max(self.model.checked_workers, shape.workers)  # beyond the points checked only if asked for
        self._draw_curve(axis, shape, most, "C0", "predicted")
        now = self.model.predict(shape)
        axis.scatter([shape.workers], [now.steps_per_s * shape.batch_size], s=220, facecolors="none", edgecolors="C3",
                     linewidths=2, label=f"this point: {now.bottleneck}", zorder=3)
        _draw_measured(axis, [m for m in self.model.measurements
                              if m["shape"] == {**asdict(shape), "workers": m["shape"]["workers"]}])
        axis.set(xlabel="workers", ylabel="samples/s", ylim=(0, None), xlim=(0.5, most + 0.5),
                 title=f"{self.model.model}: {shape.ps} ps, K={shape.steps_per_closure}, batch {shape.batch_size}"
                       + ("" if shape.model_size == 1 else f", model ×{shape.model_size:g}")
                       + ("" if shape.link == LOOPBACK else f", {shape.link}"))
        axis.legend(fontsize=7, loc="lower right", title="marker: the bound", title_fontsize=7)
        figure.tight_layout()
        return figure

    def default_grid(self):
        """The figure a saved copy keeps: for each K the points measured, at their PS count and batch, the predicted
        curve against workers up to the most workers measured, and the measured points with their errors."""
        from matplotlib.figure import Figure

        model, figure = self.model, Figure(figsize=(6.4, 4.2))
        axis = figure.subplots()
        ps, batch = model.points[-1]["ps"], model.calibration_batch
        most = model.checked_workers  # drawn only where the benchmark checked it
        for color, k in zip(("C0", "C1", "C2", "C4"), model.measured_k):
            self._draw_curve(axis, Shape(1, ps, k, batch), most, color, f"K={k} predicted")
            _draw_measured(axis, [model.point_of(r) for r in model.points
                                  if (r["ps"], r["steps_per_closure"], r["batch_size"]) == (ps, k, batch)],
                           color=color, label=f"K={k} measured")
        axis.set(xlabel="workers", ylabel="samples/s", ylim=(0, None), xlim=(0.5, most + 0.5),
                 title=f"{model.model}, {ps} ps, batch {batch}: predicted and measured")
        axis.legend(fontsize=7, loc="lower right", title="marker: the bound", title_fontsize=7)
        figure.tight_layout()
        return figure

    def _draw_curve(self, axis, shape, most, color, label):
        counts = range(1, most + 1)
        predicted = [self.model.predict(Shape(**{**asdict(shape), "workers": n})) for n in counts]
        axis.plot(counts, [p.steps_per_s * shape.batch_size for p in predicted], color=color, label=label)
        for limit, marker in MARKERS.items():
            bound = [(n, p.steps_per_s * shape.batch_size) for n, p in zip(counts, predicted) if p.bottleneck == limit]
            if bound:
                known = limit in axis.get_legend_handles_labels()[1]  # one legend entry per limit, in grey
                axis.scatter(*zip(*bound), marker=marker, color=color, s=30)
                if not known:
                    axis.scatter([], [], marker=marker, color="grey", label=limit)

    def redraw(self):
        """Predict the controls' shape again and show it (every control calls this when it moves)."""
        shape = self.shape()
        prediction = self.model.predict(shape)
        limits = " · ".join(f"{name} {rate * shape.batch_size:,.0f}" for name, rate in prediction.limits.items())
        self.prediction.value = (f"<b>{shape.label()}</b>: predicted <b>{prediction.steps_per_s * shape.batch_size:,.0f} "
                                 f"samples/s</b>, bounded by <b>{prediction.bottleneck}</b> "
                                 f"(each limit in samples/s: {limits}; the tasks can keep {self.model.cores:.2f} cores busy)")
        said = self.model.assumptions(shape)
        self.assumed.value = ("<b>Assumed, not measured:</b><ul>" + "".join(f"<li>{s}</li>" for s in said) + "</ul>"
                              if said else "Every input of this prediction was measured in the points.")
        buffer = io.BytesIO()
        self.figure(shape).savefig(buffer, format="png", dpi=90)
        self.image.value = buffer.getvalue()
        self.table.value = self._table()

    def _table(self):
        if not self.model.measurements:
            return "No point measured here yet."
        rows = "".join(f"<tr><td>{Shape(**m['shape']).label()}</td><td>{m['measured']:,.0f}</td><td>{m['predicted']:,.0f}"
                       f"</td><td>{error(m)}</td><td>{m['bottleneck']}</td></tr>"
                       for m in self.model.measurements)
        return ("<table><tr><th>measured here</th><th>samples/s</th><th>predicted</th><th>error</th><th>bounded by</th>"
                f"</tr>{rows}</table>")

    # ----- measuring -------------------------------------------------------------------
    @property
    def measuring(self):
        """True while a measurement runs."""
        return self.measurement is not None and self.measurement.running

    def measure(self):
        """Measure the controls' shape in the background (a child process, watched by a thread)."""
        shape = self.shape()
        reason = ("a measurement is running: wait for it, or cancel it." if self.measuring
                  else self.model.why_not_measurable(shape))
        if reason:
            self.status.value = f"Not measured: {html.escape(reason)}"
            return
        self.progress.value, self.progress.layout.visibility = 0, "visible"
        self.measure_button.disabled, self.cancel_button.disabled = True, False
        self.status.value = f"Measuring {shape.label()}: starting TensorFlow and a cluster&hellip;"
        self.measurement = Measurement(shape, self.model.model, self.repeats, self.min_steps,
                                       on_progress=lambda done, total, line: self._progressed(shape, done, total, line),
                                       on_end=lambda rows, failure: self._ended(shape, rows, failure))

    def _progressed(self, shape, done, total, line):
        self.progress.max, self.progress.value = total, done
        self.status.value = f"Measuring {shape.label()}: {html.escape(line)}"

    def _ended(self, shape, rows, failure):
        if rows:
            row = next(r for r in rows if r["loop"] == "custom")
            added = self.model.add(shape, row)
            self.status.value = (f"Measured {shape.label()}: {added['measured']:,.0f} samples/s (quartiles "
                                 f"{row['samples_per_s_q1']:,.0f}–{row['samples_per_s_q3']:,.0f}); predicted "
                                 f"{added['predicted']:,.0f}, error {relative_error(added['predicted'], added['measured']):.0%}.")
            self.redraw()
        elif failure:
            self.status.value = f"<pre>{html.escape(failure)}</pre>"
        else:
            self.status.value = f"Cancelled: {shape.label()} was not measured; its processes are stopped."
        self.progress.layout.visibility = "hidden"
        self.measure_button.disabled, self.cancel_button.disabled = False, True

    def cancel(self):
        """Stop the running measurement and every task it started; return once they are gone."""
        if self.measurement is not None:
            self.measurement.cancel()

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


def _draw_measured(axis, measured, color="black", label="measured here"):
    if not measured:
        return
    axis.scatter([m["shape"]["workers"] for m in measured], [m["measured"] for m in measured], marker="*", s=160,
                 color=color, edgecolors="black", label=label, zorder=4)
    for m in measured:
        axis.annotate(error(m), (m["shape"]["workers"], m["measured"]), textcoords="offset points", xytext=(6, -12),
                      fontsize=8)
