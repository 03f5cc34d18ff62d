"""Checks of notebook 08 and exercise 4 (performance analysis)."""
import contextlib
import math
import statistics
import time

from matplotlib.container import ErrorbarContainer
import tensorflow as tf

from labkit import verdict
from labkit.checks.core import require


def timed_every_worker_count(seconds_by_workers, worker_counts, repeats):
    """``repeats`` separate positive timings for each worker count."""
    require(sorted(seconds_by_workers) == sorted(worker_counts),
        f"you have times for {sorted(seconds_by_workers)} worker(s) but worker_counts is {list(worker_counts)}: "
        "time every worker count.")
    for workers, seconds in seconds_by_workers.items():
        require(isinstance(seconds, (list, tuple)) and len(seconds) == repeats,
            f"the times for {workers} worker(s) are {seconds!r}: time_training must return a list of "
            f"{repeats} timings (repeats = {repeats}), one per timed block.")
        for one in seconds:
            require(isinstance(one, float) and 0 < one < math.inf,
                f"a time for {workers} worker(s) is {one!r}: measure seconds as a float with "
                "time.perf_counter() before and after the timed steps.")
        require(repeats < 2 or len(set(seconds)) > 1,
            f"the {repeats} times for {workers} worker(s) are all {seconds[0]!r}: two real timings are never "
            "exactly equal. Time each repeat separately, do not copy one timing.")


def timed_the_cluster(time_training, num_workers, seconds_by_workers, timed_steps, steps_per_closure, repeats):
    """Runs ``time_training(num_workers)`` itself, watching the coordinator: one untimed warm-up block, then
    ``repeats`` blocks of ``timed_steps`` steps, each timed from its first ``schedule`` to the end of its
    ``join``; the returned seconds are those blocks', and ``seconds_by_workers`` holds times like them."""
    with _coordinator_calls() as calls:
        returned = time_training(num_workers)
    require(calls, "time_training scheduled nothing on the cluster: time the steps the workers run, "
                   "coordinator.schedule(...) and then coordinator.join().")
    blocks = _joined_blocks(calls)
    require(len(blocks) in (repeats, repeats + 1) and blocks[-1][2] is not None,
            f"time_training ran {len(blocks)} block(s) of scheduled steps, each ended by join(); expected "
            f"{repeats + 1}: one warm-up block, then {repeats} timed ones, each ended by join().")
    require(len(blocks) == repeats + 1, "time_training has no warm-up: run one closure and join() before the "
                                        "first timed block. The first call traces the function, which is not "
                                        "what you want to time.")
    wanted = timed_steps // steps_per_closure
    closures = [count for count, _, _ in blocks[1:]]
    require(all(count == wanted for count in closures),
            f"the timed blocks scheduled {closures} closures; {timed_steps} steps at {steps_per_closure} steps "
            f"per closure are {wanted} per block.")
    require(isinstance(returned, (list, tuple)) and len(returned) == repeats,
            f"time_training returned {returned!r}: return the list of the {repeats} timed blocks' seconds.")
    observed = [ended - began for _, began, ended in blocks[1:]]
    for got, took in zip(returned, observed):
        require(isinstance(got, float) and abs(got - took) <= 0.1 * took + 0.1,
                f"time_training returned {got!r} s for a block that took {took:.3f} s from its first schedule() "
                "to the end of its join(): start the clock right before the first schedule() of each timed "
                "block, and stop it right after its join().")
    mine, yours = statistics.median(observed), statistics.median(seconds_by_workers[num_workers])
    require(mine / 3 <= yours <= 3 * mine,
            f"seconds_by_workers[{num_workers}] has median {yours:.3f} s, but time_training({num_workers}) takes "
            f"{mine:.3f} s now: fill seconds_by_workers with what time_training returns.")


@contextlib.contextmanager
def _coordinator_calls():
    """Records ("schedule" | "join", perf_counter at return) for every ClusterCoordinator call in the block."""
    coordinator_class = tf.distribute.coordinator.ClusterCoordinator
    calls, originals = [], {name: getattr(coordinator_class, name) for name in ("schedule", "join")}

    def recorded(name):
        def call(self, *args, **kwargs):
            began = time.perf_counter()
            result = originals[name](self, *args, **kwargs)
            calls.append((name, began, time.perf_counter()))
            return result
        return call

    for name in originals:
        setattr(coordinator_class, name, recorded(name))
    try:
        yield calls
    finally:
        for name, original in originals.items():
            setattr(coordinator_class, name, original)


def _joined_blocks(calls):
    """(closures, first schedule's start, its join's end or None) for each run of schedules ended by a join."""
    blocks, count, began = [], 0, None
    for name, start, end in calls:
        if name == "schedule":
            count, began = count + 1, start if began is None else began
        elif count:
            blocks.append((count, began, end))
            count, began = 0, None
    return blocks + ([(count, began, None)] if count else [])


def beyond_spread(answer, seconds_by_workers):
    """``answer`` maps each pair of consecutive worker counts (fewer, more) to whether their timings do not
    overlap (every timing of one below every timing of the other): a difference beyond the spread
    (``labkit.verdict.spreads_apart``)."""
    counts = sorted(seconds_by_workers)
    pairs = list(zip(counts, counts[1:]))
    require(isinstance(answer, dict) and sorted(answer) == pairs,
            f"beyond_spread has keys {sorted(answer) if isinstance(answer, dict) else answer!r}; it needs one "
            f"per pair of consecutive worker counts: {pairs}.")
    for fewer, more in pairs:
        a, b = seconds_by_workers[fewer], seconds_by_workers[more]
        apart = verdict.spreads_apart(a, b) != 0
        require(answer[(fewer, more)] == apart,
                f"{fewer} vs {more} workers: times {sorted(a)} and {sorted(b)}; beyond_spread says "
                f"{answer[(fewer, more)]}. A difference is beyond the spread only if the two sets of timings do "
                "not overlap at all.")


def relative_spread_is_range_over_median(relative_spread_by_workers, seconds_by_workers):
    """Each relative spread is (slowest - fastest) / median of that worker count's timings."""
    require(sorted(relative_spread_by_workers) == sorted(seconds_by_workers),
        f"relative_spread_by_workers has {sorted(relative_spread_by_workers)}, not the worker counts "
        f"{sorted(seconds_by_workers)}.")
    for workers, seconds in seconds_by_workers.items():
        expected = (max(seconds) - min(seconds)) / statistics.median(seconds)
        require(math.isclose(relative_spread_by_workers[workers], expected, rel_tol=1e-6),
            f"the relative spread for {workers} worker(s) is {relative_spread_by_workers[workers]!r}, but its "
            f"times {seconds} give (max - min) / median = {expected:.3f}.")


def plot_shows(axis, seconds_by_workers):
    """The axes show each worker count's median time, with an error bar from the fastest to the slowest."""
    counts = sorted(seconds_by_workers)
    medians = [statistics.median(seconds_by_workers[n]) for n in counts]
    lines = [(list(line.get_xdata()), list(line.get_ydata())) for line in axis.get_lines()]
    require(lines, "the axes have no line: plot the medians with axis.errorbar(...).")
    xs, ys = lines[0]
    require(xs == counts, f"the plot's x values are {xs}, not the worker counts {counts}: "
                          "pass the worker counts as x, axis.errorbar(workers, medians, ...).")
    require(ys == medians, f"the plot's y values are {ys}, not the median times {medians}.")
    bars = [container for container in axis.containers if isinstance(container, ErrorbarContainer)]
    require(bars and bars[0].has_yerr, "the plot has no vertical error bars: pass yerr= to axis.errorbar, "
                                       "from each median down to the fastest and up to the slowest time.")
    extents = [tuple(sorted(segment[:, 1])) for segment in bars[0].lines[2][0].get_segments()]
    wanted = [(min(seconds_by_workers[n]), max(seconds_by_workers[n])) for n in counts]
    require(all(math.isclose(a, b, rel_tol=1e-6) for got, want in zip(extents, wanted) for a, b in zip(got, want)) \
        and len(extents) == len(wanted), f"the error bars span {extents}, not fastest to slowest {wanted}: "
                                          "yerr=[medians - fastest, slowest - medians].")
    require(axis.get_xlabel() and axis.get_ylabel(), "label both axes (axis.set_xlabel, axis.set_ylabel).")


def results_saved(table, points, saved):
    """The CSV and JSON results hold every planned point (baselines once per cluster shape they were measured
    beside), the same rows in both, positive speeds, and the machine."""
    require(len(table) == len(saved["results"]),
        f"{len(table)} CSV rows but {len(saved['results'])} JSON results: the files disagree.")
    fields = ("model", "loop", "workers", "ps", "steps_per_closure", "batch_size")
    measured = {tuple(str(row[name]) for name in fields) for row in table}
    planned = {tuple(str(getattr(point, name)) for name in fields) for point in points}
    require(measured == planned, f"planned points missing from the CSV: {sorted(planned - measured)}; "
                                 f"rows that were not planned: {sorted(measured - planned)}")
    slow = [row for row in table if not float(row["samples_per_s_median"]) > 0]
    require(not slow, f"rows without a positive median speed: {slow}")
    missing = {"cores", "memory_gib", "versions"} - set(saved["machine"])
    require(not missing, f"the JSON does not describe the machine's {sorted(missing)}.")


def pulls_and_pushes_are_model_size(pull_bytes, push_bytes, model_bytes, low=0.8, high=1.5, where=""):
    """A dense model's step pulls and pushes about its ``model_bytes`` M (bytes per step on the PS sockets)."""
    for direction, moved in (("pull", pull_bytes), ("push", push_bytes)):
        ratio = moved / model_bytes
        require(low <= ratio <= high, f"{where}{direction} {ratio:.2f} M per step, outside {low}-{high} M "
                                      f"(M = {model_bytes:,} bytes).")


def dense_traffic_is_model_size(row, low=0.8, high=1.5):
    """A dense model pulls and pushes about its ``model_bytes`` M per step (``row``: one bench result)."""
    pulls_and_pushes_are_model_size(
        row["measured_pull_bytes_per_step"], row["measured_push_bytes_per_step"], row["model_bytes"], low, high,
        where=f"{row['model']} {row['loop']} {row['workers']}w {row['ps']}ps K={row['steps_per_closure']}: ")


def clusters_stopped(leftover):
    """``leftover``, the clusters this process still runs (``labkit.registry.running_clusters``), is empty."""
    require(leftover == [], f"clusters still running: {leftover}")


def predicted_every_point(predicted, rows):
    """Every custom-loop row has one prediction, a positive finite number of steps/s.

    ``predicted``: (row, Prediction, fitted on it) from ``bench.costmodel.predict_rows``.
    """
    custom = [row for row in rows if row["loop"] == "custom"]
    require(len(predicted) == len(custom), f"{len(custom)} custom-loop points measured, but {len(predicted)} predicted.")
    bad = [(row["model"], row["workers"], row["ps"], row["steps_per_closure"], prediction.steps_per_s)
           for row, prediction, _ in predicted if not (math.isfinite(prediction.steps_per_s) and prediction.steps_per_s > 0)]
    require(not bad, f"predictions that are not a positive number of steps/s (model, workers, ps, K, steps/s): {bad}")
