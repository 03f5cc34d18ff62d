"""The six exercises as their tests run them: small parameters, and wrong answers their checks must reject.

tests/test_exercises.py runs them, tests/test_grade.py grades them.
"""
from dataclasses import dataclass
from pathlib import Path

import pytest

from labkit.tools import exercises

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS, EXERCISES = ROOT / "solutions", ROOT / "exercises"
if not SOLUTIONS.is_dir():
    pytest.skip("no solutions/ here (a learner bundle): these tests run the solutions", allow_module_level=True)
CELL_TIMEOUT = 300

SMOKE_PARAMETERS = {
    "ex1_basic_cluster.ipynb": {"epochs": 2, "steps_per_epoch": 60, "target_accuracy": 0.75},
    "ex2_gradient_compression.ipynb": {"num_workers": 1, "num_steps": 100, "max_accuracy_loss": 0.05},
    "ex3_fault_tolerance.ipynb": {"num_workers": 1, "num_steps": 200, "checkpoint_every": 50, "kill_step": 80,
                                  "target_accuracy": 0.75},
    "ex4_performance_analysis.ipynb": {"worker_counts": [1, 2], "timed_steps": 100, "repeats": 2},
    "ex5_staleness_checks.ipynb": {"num_steps": 60},
    "ex6_hot_keys.ipynb": {"steps": 40},
}


@dataclass(frozen=True)
class WrongAnswer:
    """``answer`` put into the solution region of the cell containing ``cell``; the next cell
    containing ``check`` must then fail with an AssertionError (or CheckFailed) whose message contains ``hint``.
    The cells between run too, unless ``skip_between`` (where the check calls the answer itself)."""

    cell: str
    answer: str
    check: str
    hint: str
    skip_between: bool = False


# ex3's recovery with the numbers typed in and nothing restored (the check reads the restored job itself)
HARD_CODED_RECOVERY = """
    try:
        train_until(job, manager, num_steps)
    except recovery.PS_FAILURES:
        cluster.restart("ps:0")
        job = make_job()
        manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=job.model, optimizer=job.optimizer),
                                             checkpoint_dir, max_to_keep=2)
        resumed_at, steps_lost = 200, 50
"""

WRONG_ANSWERS = {
    "ex1_basic_cluster.ipynb": [
        WrongAnswer("ports = [portpicker", """
cluster = {"ps": [f"localhost:{ports[0]}"], "worker": [f"localhost:{ports[1]}"] * num_workers,
           "chief": [f"localhost:{ports[-1]}"]}
tf_configs = {f"{task_type}:{index}": {"cluster": cluster, "task": {"type": task_type, "index": index}}
              for task_type, addresses in cluster.items() for index in range(len(addresses))}
""", "checks.tf_configs_valid(", "Did you give it a port different from worker:0?"),
        WrongAnswer("process.terminate()", """
for name, process in processes.items():
    if name.startswith("worker"):
        process.terminate()
        process.wait()
""", "checks.processes_stopped(", "still running: ps:0"),
    ],
    "ex2_gradient_compression.ipynb": [
        WrongAnswer("class TopK", """
    def compress(self, gradient):
        return {"gradient": tf.where(tf.abs(gradient) < 0.01, 0.0, gradient)}
""", "checks.compressor_shrinks(", "zeros still take 4 bytes each"),
        WrongAnswer("class TopK", """
    def compress(self, gradient):
        flat = tf.reshape(gradient, [-1])
        positions = tf.math.top_k(tf.abs(flat), k=math.ceil(self.ratio * flat.shape[0])).indices
        return {"values": tf.gather(flat, positions), "positions": positions}

    def decompress(self, payload, shape):  # wrong: the values land one position further on
        positions = (payload["positions"] + 1) % math.prod(shape)
        return tf.reshape(tf.scatter_nd(positions[:, None], payload["values"], [math.prod(shape)]), shape)

    def bytes_per_step(self, shape):
        return 8 * math.ceil(self.ratio * math.prod(shape))
""", "checks.compressor_shrinks(", "exact values at the positions they came from"),
    ],
    "ex3_fault_tolerance.ipynb": [
        WrongAnswer("def train_until", """
    step = int(job.optimizer.iterations.numpy())
    while step < num_steps:  # saves after every closure, not at the multiples of checkpoint_every
        job.coordinator.schedule(job.train_steps, args=(job.iterator,))
        job.coordinator.join()
        step = int(job.optimizer.iterations.numpy())
        manager.save(checkpoint_number=step)
""", "checks.checkpoint_saved(", "it should hold step"),
        WrongAnswer("faults.KillAtStep(", HARD_CODED_RECOVERY, "checks.recovered(", "the new job starts at step 0"),
    ],
    "ex4_performance_analysis.ipynb": [
        WrongAnswer("seconds_by_workers = {num_workers: time_training", """
seconds_by_workers = {num_workers: [1.5] * repeats for num_workers in worker_counts}
relative_spread_by_workers = {num_workers: 0.0 for num_workers in worker_counts}
""", "checks.timed_every_worker_count(", "do not copy one timing"),
        WrongAnswer("def time_training", """
    return [1.0 + repeat / 10 for repeat in range(repeats)]  # made-up timings, no cluster
""", "checks.timed_the_cluster(", "scheduled nothing on the cluster"),
        WrongAnswer("def time_training", """
    with labkit.LocalCluster(num_workers=num_workers, num_ps=num_ps, name="exercise-4") as cluster:
        strategy = cluster.strategy()
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        with strategy.scope():
            model = models.mnist_mlp()
            optimizer = tf.keras.optimizers.legacy.SGD(0.1)
        train_steps = train.make_train_steps(strategy, model, optimizer, models.mean_cross_entropy,
                                             steps_per_closure)
        batches = train.per_worker_iterator(coordinator, dataset_fn)
        seconds = []
        for _ in range(repeats):  # no warm-up: the first block also traces the function
            began = time.perf_counter()
            for _ in range(timed_steps // steps_per_closure):
                coordinator.schedule(train_steps, args=(batches,))
            coordinator.join()
            seconds.append(time.perf_counter() - began)
        return seconds
""", "checks.timed_the_cluster(", "has no warm-up", skip_between=True),
        WrongAnswer("beyond_spread = {}", """
counts = sorted(seconds_by_workers)
beyond_spread = {}
for fewer, more in zip(counts, counts[1:]):  # keyed (more, fewer)
    a, b = seconds_by_workers[fewer], seconds_by_workers[more]
    beyond_spread[(more, fewer)] = max(a) < min(b) or max(b) < min(a)
""", "checks.beyond_spread(", "one per pair of consecutive worker counts"),
        WrongAnswer("figure, axis = plt.subplots", """
axis.plot(list(seconds_by_workers.values()), marker="o")
axis.set_xlabel("workers")
axis.set_ylabel("seconds")
""", "checks.plot_shows(", "not the worker counts"),
    ],
    "ex5_staleness_checks.ipynb": [
        WrongAnswer("class StalenessSGD", """
        tau = self.version.assign_add(1) - 1 - read_version
        for variable, gradient in zip(self.variables, gradients):
            variable.assign_sub(self.learning_rate * gradient)
        return tau
""", "checks.claims_after_update(", "claimed without waiting for the update"),
        WrongAnswer("class StalenessFilter", """
        return tf.cast(tau < self.max_tau, tf.float32)
""", "checks.filter_rule(", "steps stale is still allowed"),
        WrongAnswer("filtered = staleness.train_mnist", """
filtered = staleness.train_mnist(strategy, coordinator, data,
                                 staleness.Update(staleness.StalenessFilter(max_tau), learning_rate),
                                 staleness.Schedule(num_steps, evaluate_every=num_steps, steps_per_closure=1),
                                 batches=staleness.Batches(slow_worker=0, slow_ms=slow_ms))
""", "checks.used_own_filter(", "not your filter"),
        WrongAnswer("updates_by_tau = ", """
updates_by_tau = filtered.counts.sum(axis=0)
dropped_share = updates_by_tau[:max_tau + 1].sum() / updates_by_tau.sum()  # the kept ones
""", "checks.dropped_share_read(", "count the updates in the histogram's columns beyond max_tau"),
    ],
    "ex6_hot_keys.ipynb": [
        WrongAnswer("def my_spread", """
    return tf.math.floormod(ids, num_ps)  # each id to a server, not to a row of its own
""", "checks.spread_is_a_permutation(", "is not a permutation"),
        WrongAnswer("def my_spread", """
    return tf.math.floormod(ids + 1, rows)  # a permutation, but the popular ids stay in the first range
""", "checks.hot_share_within(", "the popular ids still land together"),
        WrongAnswer("spread = load.build(", """
spread = load.build(coordinator.strategy, spread_ids=embeddings.spread, steps_per_closure=10)  # the kit's, not yours
spread_load = embeddings.measure_load(coordinator, spread, servers, steps, 10)
""", "checks.used_own_spread(", "not with my_spread"),
    ],
}
NAMES = sorted(SMOKE_PARAMETERS)


def with_answer(source, answer):
    """``source`` with the body of its solution region replaced by ``answer``."""
    begin, end = source.index(exercises.BEGIN), source.index(exercises.END)
    start = source.index("\n", begin) + 1
    return source[:start] + answer.strip("\n") + "\n" + source[source.rindex("\n", 0, end) + 1:]
