"""What the benchmark measures: its points, the cluster shapes they run on, the base point, its settings and their checks."""
import itertools
import math
import os
from dataclasses import dataclass

from labkit.bench.workloads import MNIST_MODELS, MODELS


@dataclass(frozen=True)
class Point:
    """One measurement: a model trained by a loop on a cluster shape, with a number of steps per closure and a batch size.

    ``loop`` is "custom" (labkit.train), "fit" (tf_keras model.fit) or "single-process"
    (plain Keras model.fit, no cluster: workers = ps = 0). ``ps`` is how many parameter servers hold the
    model's variables; the cluster it runs on has the most PS of the benchmark (``shape``), and with fewer
    the others hold none of its variables.
    """

    model: str
    loop: str
    workers: int
    ps: int
    steps_per_closure: int
    batch_size: int


def _check_counts(name, values, flag, minimum=1, example="1 2 4"):
    if not values or any(not isinstance(v, int) or v < minimum for v in values):
        raise ValueError(f"{name} must be whole numbers >= {minimum}, got {list(values)}. "
                         f"Give e.g. {flag} {example}.")


def _check_ps(ps):
    _check_counts("parameter server counts", ps, "--ps", example="1 2")
    if len(set(ps)) > 2 or (len(set(ps)) == 2 and min(ps) != 1):
        raise ValueError(f"parameter server counts {list(ps)}: give one count, or 1 and one more (e.g. --ps 1 2). "
                         "Every point runs on a cluster with the most PS; a point with 1 PS keeps all its variables "
                         "on one of them, so that it is measured beside the points that spread them over all.")


def points(workers, ps, steps_per_closure, models, batch_sizes, cores=None):
    """The points the benchmark measures, on one cluster shape per worker count (``shape``).

    The first model at the first batch size runs at every worker count, PS count and steps per closure (the
    throughput curve, the PS question, packing); every other model at every worker count and PS count with the
    most steps per closure; every model on one worker at every PS count and steps per closure (the cost model's
    inputs, fitted there and checked on the other worker counts). At the *base point* (the worker count closest to the
    cores, the first PS count and batch size): model.fit at every steps per closure for the MNIST models,
    and the first model at every other batch size. Each (model, batch size) also gets a single-process
    baseline, measured beside the points of every shape it has one in.
    """
    _check_counts("worker counts", workers, "--workers", example="1 2 3 4")
    _check_ps(ps)
    _check_counts("steps per closure", steps_per_closure, "--steps-per-closure", example="1 10 50")
    _check_counts("batch sizes", batch_sizes, "--batch-sizes", example="64 256")
    unknown = [name for name in models if name not in MODELS] or ([] if models else ["(none)"])
    if unknown:
        raise ValueError(f"unknown model {unknown[0]!r}: choose from {', '.join(MODELS)}, "
                         f"e.g. --models mlp lm.")
    base_workers, num_ps, batch = base_point(workers, ps, batch_sizes, cores)
    first, most = models[0], max(steps_per_closure)
    grid = [Point(first, "custom", w, p, k, batch) for w, p, k in itertools.product(workers, ps, steps_per_closure)]
    grid += [Point(model, "custom", w, p, most, batch) for model in models[1:] for w, p in itertools.product(workers, ps)]
    # the cost model's inputs (labkit.bench.costmodel): every model on one worker at every PS count and packing
    grid += [Point(model, "custom", 1, p, k, batch) for model in models for p, k in itertools.product(ps, steps_per_closure)]
    grid += [Point(m, "fit", base_workers, num_ps, k, batch)
             for m, k in itertools.product(models, steps_per_closure) if m in MNIST_MODELS]
    grid += [Point(first, "custom", base_workers, num_ps, k, b) for b, k in itertools.product(batch_sizes, steps_per_closure)]
    baselines = [Point(p.model, "single-process", 0, 0, most, p.batch_size) for p in grid]
    return list(dict.fromkeys(baselines + grid))  # in order, without repeats


def shape(point, ps):
    """(workers, parameter servers) of the cluster ``point`` runs on: its workers, and the most of ``ps``."""
    return point.workers, max(ps)


def base_point(workers, ps, batch_sizes, cores=None):
    """(workers, ps, batch size) of the base point: the worker count closest to the cores, the first of the others."""
    cores = cores or os.cpu_count()
    return min(workers, key=lambda count: (abs(count - cores), count)), ps[0], batch_sizes[0]


def interval_steps(point, min_steps):
    """Steps per interval: at least ``min_steps``, and whole closures for every worker."""
    unit = point.steps_per_closure * max(1, point.workers)
    return unit * math.ceil(min_steps / unit)


DEFAULTS = {"workers": [1, 2, 3, 4], "ps": [1, 2], "steps_per_closure": [1, 10, 50], "models": list(MODELS),
            "batch_sizes": [64, 256], "repeats": 6, "min_steps": 50, "target_accuracy": 0.9}


def check(settings):
    """Raise a ValueError saying what is wrong with the benchmark's settings (see DEFAULTS), and return its points."""
    unknown = set(settings) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown setting(s) {sorted(unknown)}; the settings are {', '.join(DEFAULTS)}.")
    settings = {**DEFAULTS, **settings}
    if not isinstance(settings["repeats"], int) or settings["repeats"] < 3:
        raise ValueError(f"repeats must be a whole number >= 3 (the rounds each point is timed in; a verdict needs "
                         f"3 or more), got {settings['repeats']!r}; e.g. --repeats 6.")
    if not isinstance(settings["min_steps"], int) or settings["min_steps"] < 1:
        raise ValueError(f"min_steps must be a whole number >= 1, got {settings['min_steps']!r}; e.g. --min-steps 100.")
    if not 0 < settings["target_accuracy"] <= 1:
        raise ValueError(f"target_accuracy must be in (0, 1], got {settings['target_accuracy']!r}; "
                         "e.g. --target-accuracy 0.85.")
    return points(*(settings[name] for name in ("workers", "ps", "steps_per_closure", "models", "batch_sizes")))
