"""A cost model of asynchronous PS training: steps/s from costs measured on one worker.

Every step uses five resources, and the slowest one sets the pace:

- **workers**: one worker runs its closures one after another; a step costs it the time
  measured with one worker alone (its compute, its pull and push, the PS update, and
  1/K of a closure's dispatch), plus the time its pull and push take on its link;
- **coordinator**: one Python process dispatches every closure (CPU per step);
- **parameter servers**: each PS serves 1/p of every step's variables (CPU per step);
- **network**: each PS link carries 1/p of every pull out and of every push in. Links are
  full duplex, so pulls and pushes do not share a direction: the limit is the larger of them;
- **cores**: when every process shares one machine, the CPU all of them spend per step, against the
  cores they can keep busy together. That is not every core: processes wait on each other (a pull on the
  PS, the PS on a push) and TensorFlow's threads wait for theirs. ``usable_cores`` takes it from what was
  measured without a second worker: one process alone (the single-process baseline) and the one-worker points.

A cost per step is ``per_step + per_closure / K + per_extra_ps * (p - 1)`` (``Cost``), fitted by least squares
on every point measured with one worker (its numbers of steps per closure and PS counts). ``predict`` gives the
rate and which limit set it. ``measure_costs`` reads the costs from ``labkit.bench`` rows; ``scale_model`` gives
those of a model of another size, by assumption (nothing measures it).
"""
import math
import statistics
from dataclasses import dataclass, field, replace

LIMITS = ("workers", "coordinator", "parameter servers", "network", "cores")


@dataclass(frozen=True)
class Cost:
    """Seconds per step when K steps share a closure and p parameter servers share the variables."""

    per_step: float
    per_closure: float = 0.0
    per_extra_ps: float = 0.0

    def at(self, steps_per_closure, ps=1):
        return self.per_step + self.per_closure / steps_per_closure + self.per_extra_ps * (ps - 1)


@dataclass(frozen=True)
class Costs:
    """What a step of one model and batch size costs, measured with one worker."""

    one_worker_seconds: Cost   # wall time per step, one worker alone, on loopback
    coordinator_cpu: Cost      # CPU seconds per step of the coordinator
    worker_cpu: Cost           # CPU seconds per step, all workers together
    ps_cpu: Cost               # CPU seconds per step, all parameter servers together
    pull_bytes: float          # parameters read per step
    push_bytes: float          # gradients written per step
    bytes_source: str = "measured on the PS sockets"

    def __post_init__(self):
        for name in ("one_worker_seconds", "coordinator_cpu", "worker_cpu", "ps_cpu"):
            cost = getattr(self, name)
            if min(cost.per_step, cost.per_closure, cost.per_extra_ps) < 0 or not cost.at(1) > 0:
                raise ValueError(f"{name} must be a positive cost (no negative part), got {cost}; "
                                 "measure it again, or fit it with fit_cost, which keeps each part >= 0.")
        if not (self.pull_bytes >= 0 and self.push_bytes >= 0):
            raise ValueError(f"bytes per step must be >= 0, got pull {self.pull_bytes}, push {self.push_bytes}.")

    def with_compute(self, extra_seconds, extra_cpu_seconds):
        """The same costs with each step computing for longer (a bigger batch): wall and worker CPU grow."""
        return replace(self, one_worker_seconds=replace(self.one_worker_seconds,
                                                        per_step=self.one_worker_seconds.per_step + extra_seconds),
                       worker_cpu=replace(self.worker_cpu, per_step=self.worker_cpu.per_step + extra_cpu_seconds))


@dataclass(frozen=True)
class Prediction:
    steps_per_s: float
    bottleneck: str                              # the name of the smallest limit
    limits: dict = field(default_factory=dict)   # limit name -> steps/s it allows


def _whole(name, value, example):
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number >= 1, got {value!r}; e.g. {name}={example}.")


def check_inputs(workers, ps, steps_per_closure, cores=None, link_bytes_per_s=None):
    """Raise a ValueError saying which of ``predict``'s counts or rates is not valid, and how to give it."""
    _whole("workers", workers, 2)
    _whole("ps", ps, 1)
    _whole("steps_per_closure", steps_per_closure, 10)
    for name, value in (("cores", cores), ("link_bytes_per_s", link_bytes_per_s)):
        if value is not None and not value > 0:
            raise ValueError(f"{name} must be > 0 or None, got {value!r}; e.g. 125e6 bytes/s for 1 Gbit/s.")


def predict(costs, workers, ps, steps_per_closure, cores=None, link_bytes_per_s=None):
    """Steps/s of ``workers`` workers and ``ps`` parameter servers running ``steps_per_closure`` steps per closure.

    ``cores``: the cores all processes can keep busy on their one machine (``usable_cores``), or None for a machine per task.
    ``link_bytes_per_s``: each machine's link rate in each direction, or None for loopback (free).
    """
    check_inputs(workers, ps, steps_per_closure, cores, link_bytes_per_s)
    wire_seconds = (costs.pull_bytes + costs.push_bytes) / link_bytes_per_s if link_bytes_per_s else 0.0
    coordinator, worker, server = (cost.at(steps_per_closure, ps) for cost in
                                   (costs.coordinator_cpu, costs.worker_cpu, costs.ps_cpu))
    limits = {"workers": workers / (costs.one_worker_seconds.at(steps_per_closure, ps) + wire_seconds),
              "coordinator": 1 / coordinator if coordinator else math.inf,
              "parameter servers": ps / server if server else math.inf}
    busiest_direction = max(costs.pull_bytes, costs.push_bytes)
    if link_bytes_per_s and busiest_direction:
        limits["network"] = ps * link_bytes_per_s / busiest_direction
    if cores:
        limits["cores"] = cores / (coordinator + worker + server)
    bottleneck = min(limits, key=limits.get)
    return Prediction(limits[bottleneck], bottleneck, limits)


def fit_cost(measurements):
    """A ``Cost`` fitted to ``measurements`` ``(steps_per_closure, ps, seconds)`` by least squares, each part kept
    >= 0 (scipy's ``nnls``: noise can pull a part below 0, which no cost is). A part needs its axis to vary:
    ``per_closure`` two numbers of steps per closure, ``per_extra_ps`` two PS counts (else it is 0). With more
    measurements than parts the fit has a residual (``spare_points``)."""
    import numpy as np
    from scipy.optimize import nnls

    if len({(k, ps) for k, ps, _ in measurements}) < len(measurements):
        raise ValueError(f"fit_cost takes one measurement per (steps per closure, PS count), got {measurements}.")
    columns = _varied_parts(measurements)
    design = np.array([[1.0, 1 / k, ps - 1] for k, ps, _ in measurements])[:, columns]
    parts = np.zeros(3)
    parts[columns] = nnls(design, np.array([seconds for _, _, seconds in measurements], dtype=float))[0]
    return Cost(*map(float, parts))


def _varied_parts(measurements):
    """The parts of a ``Cost`` that ``measurements`` can tell apart: per step always, per closure and per extra PS
    where their axis varies."""
    return [0] + [column for column, axis in ((1, 0), (2, 1)) if len({m[axis] for m in measurements}) > 1]


def spare_points(rows, model, batch_size):
    """How many more points the costs of ``model`` at ``batch_size`` are fitted on than they have parts: with none,
    the fit passes through every point and has no residual to show how well it fits."""
    measurements = [(r["steps_per_closure"], r["ps"], 0.0) for r in calibration(rows, model, batch_size)]
    return len(measurements) - len(_varied_parts(measurements))


def _seconds_per_step(row):
    return 1 / row["steps_per_s_median"]


def _cpu_per_step(kind):
    return lambda row: row[f"cpu_{kind}"] / row["steps_per_s_median"]  # cores busy / steps per second


def calibration(rows, model, batch_size):
    """The rows the costs of ``model`` at ``batch_size`` are fitted on: every one-worker custom-loop row (each
    number of steps per closure and PS count measured with one worker)."""
    one = [r for r in rows if r["loop"] == "custom" and r["model"] == model and r["workers"] == 1
           and r["batch_size"] == batch_size]
    if not one:
        raise ValueError(f"no one-worker custom-loop row of {model} at batch {batch_size}: the cost model "
                         "is fitted on one worker; measure it (bench.points adds those points).")
    return one


def measure_costs(rows, model, batch_size):
    """``Costs`` of ``model`` at ``batch_size`` from the benchmark's rows (``labkit.bench.measure``)."""
    calibrated = calibration(rows, model, batch_size)

    def cost(value):
        return fit_cost([(r["steps_per_closure"], r["ps"], value(r)) for r in calibrated])

    times = cost(_seconds_per_step), cost(_cpu_per_step("coordinator")), cost(_cpu_per_step("workers")), cost(_cpu_per_step("ps"))
    # the bytes of the most packed point at the fewest PS (per step, they hardly depend on either)
    bytes_row = min(calibrated, key=lambda r: (r["ps"], -r["steps_per_closure"]))
    if bytes_row["measured_pull_bytes_per_step"] is None:  # no `ss` (macOS): a dense step pulls and pushes M
        return Costs(*times, bytes_row["model_bytes"], bytes_row["model_bytes"],
                     bytes_source="M each way: not measured without `ss`, right for dense models")
    return Costs(*times, bytes_row["measured_pull_bytes_per_step"], bytes_row["measured_push_bytes_per_step"])


def single_process_step(rows, model, batch_size):
    """(wall seconds, CPU seconds) per step of the single-process baseline: the median over its measurements."""
    baselines = [r for r in rows if r["loop"] == "single-process" and r["model"] == model
                 and r["batch_size"] == batch_size]
    if not baselines:
        raise ValueError(f"no single-process row of {model} at batch {batch_size}.")
    return (statistics.median(_seconds_per_step(r) for r in baselines),
            statistics.median(_cpu_per_step("coordinator")(r) for r in baselines))


def costs_for(rows, model, batch_size, calibration_batch):
    """``Costs`` at any batch size: those fitted at ``calibration_batch``, plus the extra compute per step
    that the single-process baselines measured between the two batch sizes."""
    costs = measure_costs(rows, model, calibration_batch)
    if batch_size == calibration_batch:
        return costs
    (wall, cpu), (base_wall, base_cpu) = (single_process_step(rows, model, b) for b in (batch_size, calibration_batch))
    return costs.with_compute(max(-costs.one_worker_seconds.per_step, wall - base_wall),
                              max(-costs.worker_cpu.per_step, cpu - base_cpu))


def scale_model(costs, factor):
    """The costs of a model ``factor`` times as large, assumed, not measured: the bytes per step, each step's
    wall time and the CPU per step of workers and parameter servers grow with M; what a closure costs, the
    coordinator's CPU per step and the cost of an extra PS do not. Right for a dense model on the same data
    (an MLP with wider layers); the way to know is to measure it."""
    def grown(cost):
        return replace(cost, per_step=cost.per_step * factor)

    if not factor > 0:
        raise ValueError(f"the model size factor must be > 0, got {factor!r}; e.g. 2 for a model twice as large.")
    return replace(costs, one_worker_seconds=grown(costs.one_worker_seconds), worker_cpu=grown(costs.worker_cpu),
                   ps_cpu=grown(costs.ps_cpu), pull_bytes=costs.pull_bytes * factor, push_bytes=costs.push_bytes * factor)


def cores_busy(row):
    """How many cores all the tasks kept busy: their CPU seconds over the wall seconds."""
    return row["cpu_coordinator"] + row["cpu_workers"] + row["cpu_ps"]


def usable_cores(rows, model, batch_size, cores):
    """The cores the tasks of ``model`` can keep busy together on this machine, from what ran without a second
    worker: the most that one process alone (the single-process baseline beside the one-worker points) or
    the tasks of a one-worker point kept busy, and at most ``cores``."""
    calibrated = calibration(rows, model, batch_size)
    beside = {(r["beside_workers"], r["beside_ps"]) for r in calibrated}
    alone = [r for r in rows if r["loop"] == "single-process" and r["model"] == model and r["batch_size"] == batch_size
             and (r["beside_workers"], r["beside_ps"]) in beside]
    return min(cores, max(cores_busy(r) for r in alone + calibrated))


def predict_rows(rows, calibration_batch, cores, predictor=predict):
    """A prediction for every custom-loop row, on this machine (``cores``, of which the tasks use ``usable_cores``;
    loopback): a list of (row, Prediction, was it a calibration row). ``predictor``: ``predict`` or a function
    like it (notebook 08 passes its own copy)."""
    calibrating = {id(r) for model in {r["model"] for r in rows if r["loop"] == "custom"}
                   for r in calibration(rows, model, calibration_batch)}
    costs, usable, predicted = {}, {}, []
    for row in rows:
        if row["loop"] != "custom":
            continue
        key = (row["model"], row["batch_size"])
        if key not in costs:
            costs[key] = costs_for(rows, row["model"], row["batch_size"], calibration_batch)
        if row["model"] not in usable:
            usable[row["model"]] = usable_cores(rows, row["model"], calibration_batch, cores)
        prediction = predictor(costs[key], row["workers"], row["ps"], row["steps_per_closure"], cores=usable[row["model"]])
        predicted.append((row, prediction, id(row) in calibrating))
    return predicted


def relative_error(predicted, measured):
    """|predicted - measured| / measured."""
    return abs(predicted - measured) / measured
