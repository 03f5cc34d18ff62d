"""What the explorer predicts, from the benchmark's rows alone: a cluster shape's samples/s and what it assumes.

What was not measured is assumed, and said: a model of another size (``costmodel.scale_model``), an extra PS when
the points measured one PS count, a number of steps per closure outside those measured, a link (its rate only).
Only what runs here can be measured: the points' model, over loopback, up to ``max_measured_workers`` workers.
"""
import os
from dataclasses import asdict, dataclass

from labkit.bench.costmodel import calibration, costs_for, predict, scale_model, usable_cores

LINKS = {"loopback (this machine)": None, "10 Gbit/s": 1250e6, "1 Gbit/s": 125e6, "100 Mbit/s": 12.5e6}
LOOPBACK = next(iter(LINKS))
MODEL_SIZES = (0.25, 0.5, 1, 2, 4, 8, 16)


@dataclass(frozen=True)
class Shape:
    """One cluster to predict (and maybe measure)."""

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


class ExplorerModel:
    """The cost model fitted on the benchmark's ``rows`` (of their first model), and the points measured here.

    ``cores``: this machine's (default: all of them). ``predictor``: ``costmodel.predict`` or a function like it
    (notebook 08 passes its own). A point is measured here with up to ``max_measured_workers`` workers.
    """

    def __init__(self, rows, cores=None, max_measured_workers=4, predictor=predict):
        custom = [r for r in rows if r["loop"] == "custom"]
        if not custom:
            raise ValueError("no custom-loop row in these rows: give the rows of the benchmark's points "
                             "(bench.measure_points), with one worker at two numbers of steps per closure.")
        self.model, self.calibration_batch = custom[0]["model"], custom[0]["batch_size"]
        self._fitted_on = {id(r) for r in calibration(rows, self.model, self.calibration_batch)}
        self.batches = sorted({r["batch_size"] for r in rows if r["loop"] == "single-process" and r["model"] == self.model})
        self.costs = {batch: costs_for(rows, self.model, batch, self.calibration_batch) for batch in self.batches}
        self.cores = usable_cores(rows, self.model, self.calibration_batch, cores or os.cpu_count())
        self.points = [r for r in custom if r["model"] == self.model]
        self.measured_ps = sorted({r["ps"] for r in self.points})
        self.measured_k = sorted({r["steps_per_closure"] for r in self.points})
        self.checked_workers = max(r["workers"] for r in self.points)  # the model was checked up to here
        self.max_measured_workers, self.predictor = max_measured_workers, predictor
        self.measurements = []  # one dict per point measured here: its shape, measured and predicted samples/s

    def predict(self, shape):
        """The cost model's ``Prediction`` for ``shape`` on this machine (its usable cores shared)."""
        costs = scale_model(self.costs[shape.batch_size], shape.model_size)
        return self.predictor(costs, shape.workers, shape.ps, shape.steps_per_closure, cores=self.cores,
                              link_bytes_per_s=LINKS[shape.link])

    def samples_per_s(self, shape):
        return self.predict(shape).steps_per_s * shape.batch_size

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
        if shape.workers > self.checked_workers:
            said.append(f"{shape.workers} workers: the benchmark checked the model on up to {self.checked_workers}; "
                        "beyond, the curve is a prediction that no measurement has checked.")
        if shape.link != LOOPBACK:
            said.append(f"Links of {shape.link}: only the rate counts (no latency); every task still shares this machine's "
                        "cores, as <code>labkit bench link</code> emulates with network namespaces. The button measures "
                        "over loopback only.")
        return said

    def why_not_measurable(self, shape):
        """Why ``shape`` cannot be measured here, or None if it can."""
        if shape.model_size != 1 or shape.link != LOOPBACK:
            return (f"only the measured model ({self.model}, ×1) over loopback can be measured here; set model size ×1 "
                    "and links to loopback (over a rate-limited link: sudo labkit bench link).")
        if shape.workers > self.max_measured_workers:
            return (f"{shape.workers} workers are more than this machine measures ({self.max_measured_workers} at most: "
                    f"each worker is a TensorFlow process on its {os.cpu_count()} cores). Choose at most "
                    f"{self.max_measured_workers}; the prediction goes on beyond.")
        return None

    def point_of(self, row):
        """A benchmark row as a measured point beside its prediction."""
        shape = Shape(row["workers"], row["ps"], row["steps_per_closure"], row["batch_size"])
        return {"shape": asdict(shape), "measured": row["samples_per_s_median"], "fitted_on": id(row) in self._fitted_on,
                "predicted": self.samples_per_s(shape)}

    def add(self, shape, row):
        """Keep the measurement of ``shape`` (its custom-loop ``row``) beside its prediction; return the entry."""
        prediction = self.predict(shape)
        measured = {"shape": asdict(shape), "measured": row["samples_per_s_median"],
                    "predicted": prediction.steps_per_s * shape.batch_size, "bottleneck": prediction.bottleneck}
        self.measurements.append(measured)
        return measured


def error(measured):
    """A measured point's prediction error, signed: + where it predicted more than was measured."""
    if measured.get("fitted_on"):
        return "fitted on"
    rounded = round((measured["predicted"] - measured["measured"]) / measured["measured"], 2)
    return f"{rounded:+.0%}" if rounded else "0%"
