"""What the benchmark measures: its points, the base point, its settings and their checks."""
import itertools
import math
import os
from dataclasses import dataclass

from labkit.bench.workloads import MNIST_MODELS, MODELS


@dataclass(frozen=True)
class Point:
    """One measurement: a model trained by a loop on a cluster shape, with a number of steps per closure and a batch size.

    ``loop`` is "custom" (labkit.train), "fit" (tf_keras model.fit) or "single-process"
    (plain Keras model.fit, no cluster: workers = ps = 0).
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


def points(workers, ps, steps_per_closure, models, batch_sizes, cores=None):
    """The points the benchmark measures: a curve over workers x steps per closure, every other axis varied around a base point.

    The base point uses the first model, PS count and batch size, and the worker count
    closest to the number of cores. At the base: every model x PS count x steps per closure, model.fit
    against the custom loop for the MNIST models, and every batch size. Every model also runs on one
    worker (the inputs of the cost model, labkit.bench.costmodel). Each (model, batch
    size) also gets a single-process baseline at the most steps per closure, which ``measure_points``
    measures just before and just after each point of that model and batch size.
    """
    _check_counts("worker counts", workers, "--workers", example="1 2 3 4")
    _check_counts("parameter server counts", ps, "--ps", example="1 2")
    _check_counts("steps per closure", steps_per_closure, "--steps-per-closure", example="1 10 50")
    _check_counts("batch sizes", batch_sizes, "--batch-sizes", example="64 256")
    unknown = [name for name in models if name not in MODELS] or ([] if models else ["(none)"])
    if unknown:
        raise ValueError(f"unknown model {unknown[0]!r}: choose from {', '.join(MODELS)}, "
                         f"e.g. --models mlp lm.")
    base_workers, num_ps, batch = base_point(workers, ps, batch_sizes, cores)
    model = models[0]
    grid = [Point(model, "custom", w, num_ps, k, batch) for w, k in itertools.product(workers, steps_per_closure)]
    grid += [Point(m, "custom", base_workers, p, k, batch) for m, p, k in itertools.product(models, ps, steps_per_closure)]
    grid += [Point(m, "fit", base_workers, num_ps, k, batch)
               for m, k in itertools.product(models, steps_per_closure) if m in MNIST_MODELS]
    grid += [Point(model, "custom", base_workers, num_ps, k, b) for b, k in itertools.product(batch_sizes, steps_per_closure)]
    # the cost model's inputs (labkit.bench.costmodel): each model on one worker, at the smallest and largest
    # packing with the fewest PS, and at the largest packing with the most PS
    grid += [Point(m, "custom", 1, p, k, batch) for m in models
               for p, k in ((min(ps), min(steps_per_closure)), (min(ps), max(steps_per_closure)), (max(ps), max(steps_per_closure)))]
    baselines = [Point(p.model, "single-process", 0, 0, max(steps_per_closure), p.batch_size) for p in grid]
    return list(dict.fromkeys(baselines + grid))  # in order, without repeats


def base_point(workers, ps, batch_sizes, cores=None):
    """(workers, ps, batch size) of the base point: the worker count closest to the cores, the first of the others."""
    cores = cores or os.cpu_count()
    return min(workers, key=lambda count: (abs(count - cores), count)), ps[0], batch_sizes[0]


def interval_steps(point, min_steps):
    """Steps per interval: at least ``min_steps``, and whole closures for every worker."""
    unit = point.steps_per_closure * max(1, point.workers)
    return unit * math.ceil(min_steps / unit)


DEFAULTS = {"workers": [1, 2, 3, 4], "ps": [1, 2], "steps_per_closure": [1, 10, 50], "models": list(MODELS),
            "batch_sizes": [64, 256], "repeats": 5, "min_steps": 50, "target_accuracy": 0.9}


def check(settings):
    """Raise a ValueError saying what is wrong with the benchmark's settings (see DEFAULTS), and return its points."""
    unknown = set(settings) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown setting(s) {sorted(unknown)}; the settings are {', '.join(DEFAULTS)}.")
    settings = {**DEFAULTS, **settings}
    if not isinstance(settings["repeats"], int) or settings["repeats"] < 2:
        raise ValueError(f"repeats must be a whole number >= 2 to show a spread, got {settings['repeats']!r}; "
                         "e.g. --repeats 5.")
    if not isinstance(settings["min_steps"], int) or settings["min_steps"] < 1:
        raise ValueError(f"min_steps must be a whole number >= 1, got {settings['min_steps']!r}; e.g. --min-steps 100.")
    if not 0 < settings["target_accuracy"] <= 1:
        raise ValueError(f"target_accuracy must be in (0, 1], got {settings['target_accuracy']!r}; "
                         "e.g. --target-accuracy 0.85.")
    return points(*(settings[name] for name in ("workers", "ps", "steps_per_closure", "models", "batch_sizes")))
