"""Checks for the exercise and lesson notebooks: each failure says what is wrong and how to fix it.

Every check looks at a real outcome (a server that answers, a model that learned,
bytes that shrank, a checkpoint on disk) and fails with an ``AssertionError``; newer
checks fail through ``require``, whose ``CheckFailed`` (an AssertionError) is raised
under ``python -O`` too. The exercise checks observe the learner's work themselves
(they re-run the learner's function, read restored variables): ``labkit grade`` re-runs
the same check cells and trusts nothing a learner's code can set by hand.
"""
import contextlib
import json
import math
import os
import statistics
import time
from pathlib import Path

import numpy as np
from matplotlib.container import ErrorbarContainer
import psutil
import tensorflow as tf

from labkit import compression, models, tfconfig
from labkit.processes import serving, wait_until

LOOPBACK_HOSTS = ("localhost", "127.0.0.1")


class CheckFailed(AssertionError):
    """A check's verdict on the learner's work: what is wrong and how to fix it."""


def require(condition, message):
    """Fail the check with ``message`` unless ``condition`` holds (unlike ``assert``, also under ``python -O``)."""
    if not condition:
        raise CheckFailed(message)


class Checklist:
    """The checks of one exercise notebook, ticked off as their cells pass.

    It only tells the learner where they are: ``labkit grade`` ignores it and runs the check cells itself.
    """

    def __init__(self, exercise, checks):
        self.exercise, self.checks, self.done = exercise, list(checks), []

    def passed(self, check):
        if check not in self.checks:
            raise ValueError(f"{check!r} is not a check of {self.exercise}; they are {self.checks}.")
        self.done.append(check)
        print(f"✅ {check}")

    def summary(self):
        missing = [check for check in self.checks if check not in self.done]
        assert not missing, f"{self.exercise}: not passed yet: {', '.join(missing)}. Run their check cells."
        print(f"✅ {self.exercise}: all {len(self.checks)} checks passed.")


def learned(model, data, target_accuracy):
    """The model's test accuracy (returned) is at least ``target_accuracy``."""
    return accuracy_reached(models.accuracy(model, data.x_test, data.y_test), target_accuracy)


def accuracy_reached(accuracy, target_accuracy):
    """``accuracy`` (returned) is at least ``target_accuracy``."""
    assert accuracy >= target_accuracy, (f"test accuracy {accuracy:.3f} is below {target_accuracy}: "
                                         "train for more steps, or check the learning rate.")
    return accuracy


# ----- exercise 1: a cluster by hand ------------------------------------------------
def tf_configs(configs, num_workers):
    """``configs`` maps "ps:0", "worker:0", ..., "chief:0" to one valid TF_CONFIG dict each."""
    wanted = {"ps:0", "chief:0", *(f"worker:{i}" for i in range(num_workers))}
    assert set(configs) == wanted, (f"tf_configs has entries for {sorted(configs)}, but the cluster has "
                                    f"{sorted(wanted)}: one TF_CONFIG per process, keyed like 'worker:1'.")
    cluster = configs["ps:0"].get("cluster", {})
    ports = {}
    for name, config in configs.items():
        assert config.get("cluster") == cluster, (f"{name}'s cluster differs from ps:0's: every process "
                                                  "gets the same 'cluster' part; only 'task' changes.")
        job, index = tfconfig.parse_task(name)
        assert config.get("task") == {"type": job, "index": index}, (
            f"the TF_CONFIG under {name!r} has task {config.get('task')}: its 'task' must name that "
            f"process, {{'type': {job!r}, 'index': {index}}}.")
        address = _address(cluster, name)
        assert address, f"the cluster lists no address for {name}: give it one, e.g. 'localhost:2223'."
        host, _, port = address.rpartition(":")
        assert host in LOOPBACK_HOSTS, (f"{name} is at {address}: use 'localhost' for every task, since they "
                                        "all run on this machine. (That tells the others where to connect; it "
                                        "does not keep a server private: a TF server listens on every interface "
                                        "whatever host its TF_CONFIG names.)")
        assert port not in ports, (f"{name} has port {port}, like {ports.get(port)}: only one server can "
                                   f"listen there, so {name} would not be reachable. Did you give it a port "
                                   f"different from {ports.get(port)}?")
        ports[port] = name
    for name, config in configs.items():
        try:
            tfconfig.validate(config)
        except tfconfig.TFConfigError as error:
            raise AssertionError(f"{name}: {error}") from None


def _address(cluster, name):
    job, index = tfconfig.parse_task(name)
    addresses = cluster.get(job, [])
    return addresses[index] if index < len(addresses) else None


def servers_serving(processes, configs, timeout=60.0):
    """Every ps and worker process is alive and accepts connections on its own port."""
    servers = sorted(name for name in configs if not name.startswith("chief"))
    assert "chief:0" not in processes, ("do not start a server for chief:0: the chief is this notebook; "
                                        "it joins the cluster when it creates the strategy.")
    assert sorted(processes) == servers, f"processes has {sorted(processes)}; start one process for each of {servers}."
    ports = {name: int(_address(configs[name]["cluster"], name).rpartition(":")[2]) for name in servers}
    waiting = list(servers)

    def every_server_serves():
        while waiting:
            name = waiting[0]
            if not serving(processes[name].pid, ports[name]):
                code = processes[name].poll()
                assert code is None, (f"{name}'s process exited with code {code} before serving: read its log. "
                                      "Did you pass TF_CONFIG in its environment (env=...)?")
                return False
            waiting.pop(0)
        return True

    wait_until(every_server_serves, timeout, "every server to serve", interval=0.1, error=lambda _: AssertionError(
        f"{waiting[0]} is not reachable on port {ports[waiting[0]]} after {timeout:.0f} s: "
        "did its server start with its own TF_CONFIG?"))


def cluster_trained(configs, model, data, target_accuracy):
    """This process joined the learner's cluster as its chief, the model lives on the ps, and it learned MNIST."""
    address = _address(configs["chief:0"]["cluster"], "chief:0")
    assert serving(os.getpid(), int(address.rpartition(":")[2])), (
        f"this notebook does not serve at {address}, chief:0's address: build the strategy's resolver from "
        "your cluster, with task_type='chief' and task_id=0.")
    devices = {variable.device for variable in model.variables}
    assert all("/job:ps" in device for device in devices), (
        f"the model's variables live on {sorted(devices)}, not on the parameter server: "
        "create the model inside `with strategy.scope():`.")
    return learned(model, data, target_accuracy)


def processes_stopped(processes):
    """Every process the learner started has exited."""
    running = [f"{name} (pid {process.pid})" for name, process in processes.items() if process.poll() is None]
    assert not running, (f"still running: {', '.join(running)}. Call terminate() and then wait() "
                         "on every process you started.")


# ----- exercise 2 and notebook 05: gradient compression -------------------------------
def compressor_shrinks(compressor, min_ratio, shape=(784, 128)):
    """A learner's compressor on a gradient-like tensor: its own code, >= min_ratio times smaller,
    the exact values back at their own positions, and the contraction property of top-k."""
    for method in ("compress", "decompress"):
        owner = next(cls for cls in type(compressor).__mro__ if method in vars(cls))
        assert owner is compression.Compressor or owner.__module__ != compression.__name__, (
            f"{method}() comes from labkit's {owner.__name__}: write compress() and decompress() in your own "
            "class (derive it from compression.Compressor only).")
    gradient = tf.random.stateless_normal(shape, seed=[0, 1]) * 0.01
    payload = compressor.compress(gradient)
    assert isinstance(payload, dict) and all(tf.is_tensor(t) for t in payload.values()), (
        f"compress() returned {type(payload).__name__}; it must return the payload: a dict of tensors.")
    sent, dense = compression.payload_bytes(payload), 4 * math.prod(shape)
    assert sent < dense, (f"the payload is {sent:,} bytes, as many as the dense gradient ({dense:,}): zeros "
                          "still take 4 bytes each. Send only the values you keep and their positions.")
    assert dense / sent >= min_ratio, (f"the payload is only {dense / sent:.1f}x smaller than the dense "
                                       f"gradient; the goal is {min_ratio}x. Keep fewer entries.")
    announced = compressor.bytes_per_step(shape)
    assert announced in (None, sent), (f"bytes_per_step{shape} says {announced:,} but the payload has "
                                       f"{sent:,} bytes: make it count what compress() returns.")
    rebuilt = compressor.decompress(payload, gradient.shape)
    assert tuple(rebuilt.shape) == shape, (f"decompress() returned shape {tuple(rebuilt.shape)}, not the "
                                           f"gradient's {shape}: reshape it.")
    rebuilt, gradient = rebuilt.numpy(), gradient.numpy()
    kept = rebuilt != 0
    wrong = int(np.sum(rebuilt[kept] != gradient[kept]))
    assert kept.any() and wrong == 0, (
        f"decompress(compress(g)) must give the exact values at the positions they came from (zeros "
        f"elsewhere): {wrong} of its {int(kept.sum())} nonzero entries differ from g there.")
    contracts(gradient, rebuilt, int(kept.sum()))
    tf.function(compressor.compress)(tf.constant(gradient))  # it must also work in graph mode, as in training


def contracts(gradient, rebuilt, kept):
    """The contraction property of top-k with k = ``kept``: ||C(x) − x||² <= (1 − k/n)·||x||²."""
    x = np.asarray(gradient, dtype=np.float64)
    error = float(np.sum((np.asarray(rebuilt, dtype=np.float64) - x) ** 2))
    bound = (1 - kept / x.size) * float(np.sum(x ** 2))
    assert error <= bound * (1 + 1e-6), (
        f"the contraction property fails: ||C(x) − x||² = {error:.4g} > (1 − k/n)·||x||² = {bound:.4g} "
        f"(k = {kept} of n = {x.size}): keep the k entries of LARGEST magnitude.")


def compression_result(result, dense, min_ratio, max_accuracy_loss):
    """A training run with the compressor and error feedback: fewer bytes, nearly the same accuracy."""
    assert result.error_feedback, "this run has no error feedback: pass error_feedback=True to train_mnist."
    assert result.push_ratio >= min_ratio, (f"the workers pushed only {result.push_ratio:.1f}x fewer bytes than "
                                            f"dense gradients; the goal is {min_ratio}x.")
    lost = dense.final_accuracy - result.final_accuracy
    assert lost <= max_accuracy_loss, (
        f"test accuracy {result.final_accuracy:.3f} vs {dense.final_accuracy:.3f} uncompressed: "
        f"{lost * 100:.1f} points lost, more than {max_accuracy_loss * 100:.0f}. Is error feedback on, "
        "and does decompress() put the values back where they came from?")


def fewer_total_bytes(dense_runs, compressed_runs, min_ratio, max_accuracy_loss):
    """Same seeds; the mean total (push + pull) bytes on the PS sockets >= min_ratio times fewer; mean
    accuracy at most ``max_accuracy_loss`` below. Returns (ratio, accuracy loss)."""
    seeds = sorted(r.seed for r in dense_runs)
    assert seeds and seeds == sorted(r.seed for r in compressed_runs), (
        f"compare runs with the same seeds: {seeds} vs {sorted(r.seed for r in compressed_runs)}.")
    assert all(r.measured for r in dense_runs + compressed_runs), (
        "the runs have no bytes measured on the PS sockets: pass ps_pids=traffic.ps_pids(cluster) (needs ss).")
    ratio = np.mean([r.measured_total for r in dense_runs]) / np.mean([r.measured_total for r in compressed_runs])
    lost = np.mean([r.final_accuracy for r in dense_runs]) - np.mean([r.final_accuracy for r in compressed_runs])
    assert ratio >= min_ratio, f"{ratio:.1f}x fewer total bytes (push + pull) on the PS sockets; the goal is {min_ratio}x."
    assert lost <= max_accuracy_loss, (f"{lost * 100:.2f} points of mean accuracy lost over seeds {seeds}, "
                                       f"more than {max_accuracy_loss * 100:g}.")
    return ratio, lost


def within_variance_bound(variance, bound):
    """A measured E||Q(v) − v||² / ||v||² is at most the paper's bound."""
    assert variance <= bound, f"measured variance {variance:.4g} ||v||² is above the bound {bound:.4g} ||v||²."


def dgc_beats_naive(dense_runs, dgc_runs, naive_runs, min_gain):
    """DGC's mean accuracy is at least ``min_gain`` above naive top-k with momentum on the PS."""
    def mean(runs):
        return float(np.mean([r.final_accuracy for r in runs]))
    assert mean(dgc_runs) >= mean(naive_runs) + min_gain, (
        f"DGC reached {mean(dgc_runs):.3f}, naive top-k with momentum on the PS {mean(naive_runs):.3f} "
        f"(uncompressed {mean(dense_runs):.3f}): DGC should win by at least {min_gain * 100:g} points.")


# ----- exercise 3: checkpoints and recovery ----------------------------------------
def checkpoint_saved(checkpoint_dir, step, checkpoint_every):
    """The latest checkpoint in ``checkpoint_dir`` is the last one due at or before ``step``."""
    require(step is not None, "the parameter server was never killed: train_until must train past kill_step.")
    due = step // checkpoint_every * checkpoint_every
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    require(latest, f"no checkpoint in {checkpoint_dir}: did train_until call manager.save() every "
                    "checkpoint_every steps?")
    saved = _checkpoint_step(latest)
    require(saved is not None, "the checkpoint has no optimizer step counter: checkpoint the job's model "
                               "and optimizer, tf.train.Checkpoint(model=..., optimizer=...).")
    require(saved == due, f"training reached step {step} and the latest checkpoint holds step {saved}; with "
                          f"checkpoint_every = {checkpoint_every} it should hold step {due}: save each time the "
                          f"step reaches a multiple of checkpoint_every, and only then.")


def _checkpoint_step(path):
    """The optimizer step counter stored in the checkpoint at ``path``, or None if it has none."""
    reader = tf.train.load_checkpoint(path)
    names = [name for name in reader.get_variable_to_shape_map() if name.startswith("optimizer/iter/")]
    return int(reader.get_tensor(names[0])) if names else None


def recovered(job, failure, checkpoint_every):
    """After the parameter server died under training (``failure``: a ``faults.KillAtStep``): it serves
    again, ``job`` is a new job, and its step counter, read from the restored variables on the new
    parameter server, is the last checkpoint before the failure. Returns that step."""
    require(failure.killed_at is not None, "the parameter server was never killed: train with train_until "
                                           "inside the `with` block, up to num_steps.")
    require(failure.cluster.task(failure.task).alive(),
            f"{failure.task} is still dead: restart it on its port before building the new job.")
    require(not failure.watched(job.optimizer.iterations),
            "job is still the job whose parameter server died: its strategy, coordinator and variables "
            "belong to the dead process. Build a new job with make_job() after the restart.")
    try:
        restored = int(job.optimizer.iterations.numpy())
    except tf.errors.OpError as error:
        raise CheckFailed(f"the new job's step counter cannot be read from the parameter server "
                          f"({type(error).__name__}): build the job after restarting {failure.task}.") from None
    due = failure.killed_at // checkpoint_every * checkpoint_every
    require(restored != 0 or due == 0,
            f"the new job starts at step 0, but the checkpoint of step {due} was saved before the failure: "
            "restore your latest checkpoint into the new job.")
    require(restored == due, f"the new job is at step {restored}, but the last checkpoint before the failure "
                             f"(at step {failure.killed_at}) holds step {due}: restore the latest checkpoint, "
                             "and only that: the next cell trains on.")
    return restored


def trained_to(job, num_steps, data, target_accuracy):
    """The job's optimizer reached ``num_steps`` and the model learned; returns the test accuracy."""
    final = int(job.optimizer.iterations.numpy())
    require(final == num_steps, f"training ended at step {final}, not {num_steps}: train until num_steps.")
    return learned(job.model, data, target_accuracy)


# ----- exercise 4: time vs number of workers ---------------------------------------
def timings(seconds_by_workers, worker_counts, repeats):
    """``repeats`` separate positive timings for each worker count."""
    assert sorted(seconds_by_workers) == sorted(worker_counts), (
        f"you have times for {sorted(seconds_by_workers)} worker(s) but worker_counts is {list(worker_counts)}: "
        "time every worker count.")
    for workers, seconds in seconds_by_workers.items():
        assert isinstance(seconds, (list, tuple)) and len(seconds) == repeats, (
            f"the times for {workers} worker(s) are {seconds!r}: time_training must return a list of "
            f"{repeats} timings (repeats = {repeats}), one per timed block.")
        for one in seconds:
            assert isinstance(one, float) and 0 < one < math.inf, (
                f"a time for {workers} worker(s) is {one!r}: measure seconds as a float with "
                "time.perf_counter() before and after the timed steps.")
        assert repeats < 2 or len(set(seconds)) > 1, (
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
        require(isinstance(got, float) and abs(got - took) <= 0.1 * took + 0.05,
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
    overlap (every timing of one below every timing of the other): a difference beyond the spread."""
    counts = sorted(seconds_by_workers)
    pairs = list(zip(counts, counts[1:]))
    require(isinstance(answer, dict) and sorted(answer) == pairs,
            f"beyond_spread has keys {sorted(answer) if isinstance(answer, dict) else answer!r}; it needs one "
            f"per pair of consecutive worker counts: {pairs}.")
    for fewer, more in pairs:
        a, b = seconds_by_workers[fewer], seconds_by_workers[more]
        apart = max(a) < min(b) or max(b) < min(a)
        require(answer[(fewer, more)] == apart,
                f"{fewer} vs {more} workers: times {sorted(a)} and {sorted(b)}; beyond_spread says "
                f"{answer[(fewer, more)]}. A difference is beyond the spread only if the two sets of timings do "
                "not overlap at all.")


def spreads(spread_by_workers, seconds_by_workers):
    """Each spread is (slowest - fastest) / median of that worker count's timings."""
    assert sorted(spread_by_workers) == sorted(seconds_by_workers), (
        f"spread_by_workers has {sorted(spread_by_workers)}, not the worker counts {sorted(seconds_by_workers)}.")
    for workers, seconds in seconds_by_workers.items():
        expected = (max(seconds) - min(seconds)) / statistics.median(seconds)
        assert math.isclose(spread_by_workers[workers], expected, rel_tol=1e-6), (
            f"the spread for {workers} worker(s) is {spread_by_workers[workers]!r}, but its times {seconds} give "
            f"(max - min) / median = {expected:.3f}.")


def plot_shows(axis, seconds_by_workers):
    """The axes show each worker count's median time, with an error bar from the fastest to the slowest."""
    counts = sorted(seconds_by_workers)
    medians = [statistics.median(seconds_by_workers[n]) for n in counts]
    lines = [(list(line.get_xdata()), list(line.get_ydata())) for line in axis.get_lines()]
    assert lines, "the axes have no line: plot the medians with axis.errorbar(...)."
    xs, ys = lines[0]
    assert xs == counts, (f"the plot's x values are {xs}, not the worker counts {counts}: "
                          "pass the worker counts as x, axis.errorbar(workers, medians, ...).")
    assert ys == medians, f"the plot's y values are {ys}, not the median times {medians}."
    bars = [container for container in axis.containers if isinstance(container, ErrorbarContainer)]
    assert bars and bars[0].has_yerr, ("the plot has no vertical error bars: pass yerr= to axis.errorbar, "
                                       "from each median down to the fastest and up to the slowest time.")
    extents = [tuple(sorted(segment[:, 1])) for segment in bars[0].lines[2][0].get_segments()]
    wanted = [(min(seconds_by_workers[n]), max(seconds_by_workers[n])) for n in counts]
    assert all(math.isclose(a, b, rel_tol=1e-6) for got, want in zip(extents, wanted) for a, b in zip(got, want)) \
        and len(extents) == len(wanted), (f"the error bars span {extents}, not fastest to slowest {wanted}: "
                                          "yerr=[medians - fastest, slowest - medians].")
    assert axis.get_xlabel() and axis.get_ylabel(), "label both axes (axis.set_xlabel, axis.set_ylabel)."


# ----- exercise 5 and notebook 06: staleness ----------------------------------------
def filter_rule(rule_class, max_tau=3):
    """``rule_class(max_tau).scale(tau)`` is 1 for tau <= max_tau and 0 beyond, in eager and graph mode."""
    rule = rule_class(max_tau)
    taus = tf.constant([0, 1, max_tau - 1, max_tau, max_tau + 1, max_tau + 2, 64], tf.int64)
    expected = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    for mode, scale in (("eagerly", rule.scale), ("in a tf.function", tf.function(rule.scale))):
        got = scale(taus)
        assert got.dtype == tf.float32, f"scale() returned {got.dtype.name}; return float32 (tf.cast it)."
        got = got.numpy().tolist()
        assert got[3] == 1.0, (f"scale({max_tau}) with max_tau {max_tau} is {got[3]}: an update exactly "
                               f"{max_tau} steps stale is still allowed. Compare with tau <= max_tau.")
        assert got[4:] == [0.0] * 3, (f"scale(tau) beyond max_tau gave {got[4:]}: updates more than "
                                      f"{max_tau} steps stale must be dropped (scale 0), not only damped.")
        assert got == expected, f"run {mode}, scale({taus.numpy().tolist()}) = {got}, expected {expected}."


def claims_after_update(make_counter):
    """``make_counter(variables)`` has ``version`` and ``apply(gradients, read_version)`` returning tau:
    tau counts the updates applied since the read, and the version is claimed *after* the update.

    The order is checked in the traced graph: in a ``tf.function`` only data and control
    dependencies order ops on different variables, so a claim that does not depend on the
    update's writes may run first, at the start of the step, and then measures tau = 0.
    """
    variable = tf.Variable([0.0, 0.0])
    counter = make_counter([variable])
    early_read = counter.version.read_value()
    for _ in range(2):
        fresh = counter.apply([tf.constant([1.0, 1.0])], counter.version.read_value())
        assert int(fresh) == 0, f"an update read right before it was applied got tau {int(fresh)}, expected 0."
    tau = int(counter.apply([tf.constant([1.0, 1.0])], early_read))
    assert tau == 2, f"two updates landed between the read and this update, but apply() returned tau {tau}."
    assert int(counter.version.numpy()) == 3, (f"after 3 applied updates the version is {int(counter.version.numpy())}: "
                                               "claim one version per applied update.")
    assert variable.numpy().tolist() != [0.0, 0.0], "apply() did not change the variable: assign_sub the update."
    graph = tf.function(counter.apply).get_concrete_function(
        [tf.TensorSpec([2], tf.float32)], tf.TensorSpec([], tf.int64)).graph
    handles = {id(outer): inner for outer, inner in graph.captures}
    version, weights = handles[id(counter.version.handle)], handles[id(variable.handle)]
    claims = [op for op in graph.get_operations() if op.type == "AssignAddVariableOp" and op.inputs[0] is version]
    writes = [op for op in graph.get_operations()
              if any(tensor is weights for tensor in op.inputs) and op.type != "ReadVariableOp"]
    assert claims, "apply() never adds to the version: claim it with self.version.assign_add(...)."
    for claim in claims:
        missing = [write.type for write in writes if write not in _ancestors(claim)]
        assert not missing, ("the version is claimed without waiting for the update "
                             f"({', '.join(missing)}): in the cluster the claim then runs at the start of the "
                             "step and tau is always 0. Put the claim under tf.control_dependencies(updates), "
                             "where updates are the assign_sub ops.")


def _ancestors(op):
    """Every op that ``op`` waits for, through data and control edges."""
    seen, stack = set(), list(op.control_inputs) + [tensor.op for tensor in op.inputs]
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack.extend(list(current.control_inputs) + [tensor.op for tensor in current.inputs])
    return seen


def measured_staleness(alone, together, min_stale_share=0.1):
    """Runs on real clusters: one worker alone is never stale; several workers with a slowed
    read→update window measure tau > 0 for at least ``min_stale_share`` of the updates."""
    taus = alone.taus
    assert taus.sum() > 0, "the one-worker run counted no updates at all."
    assert taus[1:].sum() == 0, (f"one worker alone measured tau > 0 for {taus[1:].sum()} of {taus.sum()} "
                                 "updates, but nothing else can land between its read and its update.")
    workers = len(together.clocks)
    assert together.stale_share >= min_stale_share, (
        f"with {workers} workers only {together.stale_share:.0%} of the updates measured tau > 0 (expected at "
        f"least {min_stale_share:.0%}). A counter that claims its version before the update measures tau = 0 "
        "whatever happens: claim after the update's assign_sub ops.")


def filtered(run, max_tau):
    """A staleness-filter run: exactly the updates more than ``max_tau`` stale were dropped, and
    the version counts the applied updates only."""
    idle = [worker for worker, clock in enumerate(run.clocks) if clock == 0]
    assert not idle, f"worker(s) {idle} applied no update: did they fail? (see the cluster's logs) Run it again."
    assert run.taus[1:].sum() > 0, ("no update measured tau > 0, so there was nothing to filter. With several "
                                    "workers and a slowed one, look for a version claimed before the update.")
    beyond = int(run.counts[:, max_tau + 1:].sum())
    assert run.dropped == beyond, (f"the PS dropped {run.dropped} updates, but the histogram has {beyond} "
                                   f"with tau > {max_tau}: drop exactly those.")
    applied = int(run.counts.sum()) - run.dropped
    assert run.updates[-1] == applied, (f"the version is {run.updates[-1]}, but {applied} updates were applied: "
                                        "a dropped update must not claim a version.")


def used_own_filter(run, rule_class, max_tau):
    """``run`` trained with the learner's own ``rule_class(max_tau)``, not labkit's filter."""
    from labkit import staleness

    owner = next(cls for cls in rule_class.__mro__ if "scale" in vars(cls))
    require(owner.__module__ != staleness.__name__,
            f"your StalenessFilter takes scale() from labkit's {owner.__name__}: write scale() yourself.")
    mine = rule_class(max_tau).name
    require(run.rule == mine, f"this run trained with the rule {run.rule!r}, not your filter ({mine!r}): pass "
                              f"StalenessFilter(max_tau), your class, as the rule.")


def dropped_share_read(dropped_share, run):
    """``dropped_share`` is the share of the run's updates that the PS dropped, read from its histogram."""
    share = run.dropped / run.counts.sum()
    require(np.isclose(dropped_share, share),
            f"dropped_share is {dropped_share!r}, but the PS dropped {run.dropped} of the {run.counts.sum()} "
            "updates that reached it: count the updates in the histogram's columns beyond max_tau, over all "
            "workers, and divide by all of them.")


def ssp_waited(ssp, unbounded, bound):
    """An SSP run dropped nothing, waited (if the run without SSP drifted beyond the bound), and kept
    the workers' clocks within bound + 1 of each other (one more per wait that timed out)."""
    assert ssp.dropped == 0, f"SSP dropped {ssp.dropped} updates: SSP makes fast workers wait, it drops nothing."
    drift = max(unbounded.clocks) - min(unbounded.clocks)
    if drift > bound + 1:
        assert ssp.waited_seconds > 0, (f"without SSP the workers' clocks drifted {drift} apart, yet under SSP "
                                        f"(bound {bound}) no worker waited: the wait never ran.")
    spread = max(ssp.clocks) - min(ssp.clocks)
    assert spread <= bound + 1 + ssp.timeouts, (f"under SSP with bound {bound} the clocks ended {spread} apart "
                                                f"({ssp.clocks}) with {ssp.timeouts} timeouts: a worker ran ahead "
                                                "without waiting.")


def stale_sgd_comparison(fresh, plain, aware, min_gap):
    """Final accuracies over seeds: plain async at an injected delay loses at least ``min_gap`` and
    three standard errors against tau = 0; the staleness-aware rule wins back at least half of
    that, also by more than three standard errors."""
    fresh, plain, aware = (np.asarray(a, float) for a in (fresh, plain, aware))
    if min(len(fresh), len(plain), len(aware)) < 2:
        raise ValueError("compare accuracies over at least 2 seeds (3 or more for a usable spread).")

    def standard_error(a, b):
        return math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    gap = fresh.mean() - plain.mean()
    margin = max(min_gap, 3 * standard_error(fresh, plain))
    assert gap >= margin, (f"plain async lost only {gap:.3f} against tau = 0 (needed {margin:.3f}: "
                           f"min_accuracy_gap or 3 standard errors over seeds): raise the learning rate or the delay.")
    won = aware.mean() - plain.mean()
    needed = max(gap / 2, 3 * standard_error(aware, plain))
    assert won >= needed, (f"the staleness-aware rule won back {won:.3f} of the {gap:.3f} plain async lost "
                           f"(needed {needed:.3f}: half of it, and 3 standard errors over seeds).")


# ----- notebooks 02-04: each worker its own data, honest baselines ------------------
def workers_see_different_batches(first_batches):
    """``first_batches`` ({worker: labels}, from ``train.first_batches``) differ between every two workers."""
    workers = sorted(first_batches)
    if len(workers) < 2:
        raise AssertionError(f"need the first batches of at least 2 workers, got workers {workers}.")
    for index, first in enumerate(workers):
        for second in workers[index + 1:]:
            if np.array_equal(first_batches[first], first_batches[second]):
                raise AssertionError(
                    f"workers {first} and {second} read the same first batch {list(first_batches[first])}: "
                    "the dataset_fn gives every worker the same stream. Fold the worker index into "
                    "the shuffle seed (labkit.data.shuffled_batches) or give each worker its own shard.")


def every_worker_ran(closures_per_worker, num_workers):
    """``closures_per_worker`` ({worker: count}) shows each of the ``num_workers`` workers ran something."""
    idle = [worker for worker in range(num_workers) if closures_per_worker.get(worker, 0) == 0]
    if idle:
        raise AssertionError(f"workers {idle} ran no scheduled function ({dict(closures_per_worker)}): "
                             "are they alive and in the cluster the strategy was built from?")


def arrays_shipped_to_every_task(sent_by_task, data_bytes):
    """The graph-constant route: the coordinator sent at least the arrays' bytes to every task."""
    short = {task: sent for task, sent in sent_by_task.items() if sent < 0.9 * data_bytes}
    if short:
        raise AssertionError(f"tasks {sorted(short)} received less than the {data_bytes:,} bytes of the "
                             f"arrays ({short}): were the arrays really captured by the dataset_fn?")


def files_route_ships_no_data(sent_by_task, data_bytes, max_fraction=0.05):
    """The files route: no task received more than ``max_fraction`` of the data's bytes from the coordinator."""
    heavy = {task: sent for task, sent in sent_by_task.items() if sent > max_fraction * data_bytes}
    if heavy:
        raise AssertionError(f"tasks {sorted(heavy)} received more than {max_fraction:.0%} of the "
                             f"{data_bytes:,} data bytes ({heavy}): the dataset_fn still captures arrays.")


def split_into_shards(variable, num_ps):
    """``variable`` is split into ``num_ps`` shards, each on a different parameter server."""
    from labkit import sharding

    rows = sharding.placement([variable])
    tasks = {row["task"] for row in rows}
    if len(rows) != num_ps or len(tasks) != num_ps:
        raise AssertionError(f"{variable.name} is in {len(rows)} shard(s) on {sorted(tasks)}, expected "
                             f"{num_ps} shards on {num_ps} parameter servers: is the strategy's "
                             "variable_partitioner set, and is the variable above its min_shard_bytes?")


def static_split(closures_per_worker, num_workers):
    """A static split: every worker ran exactly one of the ``num_workers`` long closures."""
    if sorted(closures_per_worker.items()) != [(worker, 1) for worker in range(num_workers)]:
        raise AssertionError(f"expected one long closure on each of {num_workers} workers, got "
                             f"{dict(closures_per_worker)}: schedule exactly num_workers closures at once.")


def free_workers_took_more(closures_per_worker, slow_worker):
    """Dynamic scheduling: the slow worker ran fewer closures than every other worker."""
    slow = closures_per_worker.get(slow_worker, 0)
    others = {worker: count for worker, count in closures_per_worker.items() if worker != slow_worker}
    if not others or min(others.values()) <= slow:
        raise AssertionError(f"the slow worker {slow_worker} ran {slow} closures, the others {others}: "
                             "schedule() should have given most closures to the free, faster workers.")


# ===== lesson notebooks 00, 01, 07, 08, 09 ==================================

# Each notebook assertion is one of these; tests/test_checks.py feeds each a wrong result.
ALL_INTERFACES = {"0.0.0.0": "every IPv4 interface", "::": "every interface (IPv6, and IPv4 too on Linux)"}


# ----- 00 welcome --------------------------------------------------------------------
def keras_2(keras_version):
    """tf.keras is Keras 2 (tf_keras), which parameter-server training needs."""
    assert keras_version.startswith("2"), (
        f"tf.keras is Keras {keras_version}, but parameter-server training needs Keras 2. "
        "Restart the kernel (Kernel > Restart Kernel), then run the setup cell first: "
        "`import labkit` must come before anything imports TensorFlow.")


# ----- 01 TF_CONFIG and the cluster (and 09) -------------------------------------------
def same_cluster_everywhere(configs, cluster):
    """Every TF_CONFIG in ``configs`` (task name -> dict) has exactly ``cluster`` as its cluster part."""
    differ = sorted(name for name, config in configs.items() if config.get("cluster") != cluster)
    assert configs and not differ, (f"the cluster part of {', '.join(differ) or 'no task'} differs from "
                                    f"{cluster}: every process must get the same cluster; only 'task' changes.")


def received_its_tf_config(name, received, expected):
    """The TF_CONFIG a task process really has in its environment is the one it was given."""
    assert received == expected, f"{name} got TF_CONFIG {received}, not {expected}."


def listens_on_every_interface(name, port, sockets):
    """A TF server listens on its own port, on every interface (``sockets``: its listening (ip, port) pairs)."""
    assert port in [listening for _, listening in sockets], (
        f"{name} does not listen on its port {port}; it listens on {sockets}.")
    narrow = [ip for ip, _ in sockets if ip not in ALL_INTERFACES]
    assert not narrow, f"{name} listens on {narrow} only, not on every interface: {sockets}."


def task_dead(task):
    """The killed task's process has exited."""
    assert not task.alive(), f"{task.name} (pid {task.pid}) is still alive after the kill."


def restarted_in_place(task, old_pid, old_port):
    """A restarted task is a new, live process on its old port."""
    assert task.alive(), f"{task.name} is not alive after the restart; read its log, {task.log_path}."
    assert task.pid != old_pid, f"{task.name} still has pid {old_pid}: a restart starts a new process."
    assert task.port == old_port, (f"{task.name} moved from port {old_port} to {task.port}: the others "
                                   "only know its old address, so a restart must keep the port.")


def pids_gone(pids_by_name):
    """No process of ``pids_by_name`` (name -> pid) still runs (a zombie counts as gone)."""
    running = [f"{name} (pid {pid})" for name, pid in pids_by_name.items() if _running(pid)]
    assert not running, f"still running: {', '.join(running)}."


def _running(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# ----- 07 fault tolerance ------------------------------------------------------------
def at_least_once(report, num_steps):
    """A run with worker failures only: no recovery was needed, and every scheduled step ran at least once."""
    assert not report.recoveries, f"a worker failure needed {len(report.recoveries)} recoveries; it needs none."
    assert report.final_step >= num_steps, f"training stopped at step {report.final_step}, before {num_steps}."
    assert report.final_step >= report.steps_scheduled, (
        f"{report.steps_scheduled} steps were scheduled but only {report.final_step} ran: "
        "a worker failure lost steps, against at-least-once execution.")


def close_accuracy(accuracy, reference, max_gap):
    """``accuracy`` is within ``max_gap`` of ``reference``."""
    assert abs(accuracy - reference) <= max_gap, (
        f"test accuracy {accuracy:.3f} vs {reference:.3f} undisturbed: more than {max_gap} apart.")


def worked_after_restart(cpu_at_restart, cpu_at_end, min_cpu_seconds=0.2):
    """A restarted task used CPU after its restart: it was given work again."""
    assert cpu_at_end - cpu_at_restart >= min_cpu_seconds, (
        f"the restarted task used {cpu_at_end - cpu_at_restart:.2f} CPU seconds after its restart: "
        "it was not given any work.")


def one_recovery_per_failure(report, failures, num_steps):
    """``failures`` PS failures gave exactly that many recoveries, each from the checkpoint before it."""
    assert len(report.recoveries) == failures, (
        f"{failures} parameter-server failure(s) gave {len(report.recoveries)} recoveries: "
        f"{report.recoveries}.")
    checkpoints = [0] + report.step
    for recovery in report.recoveries:
        before = max(step for step in checkpoints if step <= recovery["failed_at_step"])
        assert recovery["resumed_from_step"] == before, (
            f"resumed from step {recovery['resumed_from_step']}, but the last checkpoint before the failure "
            f"at step {recovery['failed_at_step']} was at step {before}.")
        assert recovery["steps_lost"] == recovery["failed_at_step"] - before, recovery
    assert report.final_step >= num_steps, f"training stopped at step {report.final_step}, before {num_steps}."


def latest_checkpoint_complete(latest, completed_steps):
    """``tf.train.latest_checkpoint`` names a checkpoint whose files were all written."""
    assert latest is not None, "no checkpoint at all: the earlier, completed ones should still be there."
    step = int(latest.rpartition("-")[2])
    assert step in completed_steps, (f"latest_checkpoint points to step {step}, whose write did not "
                                     f"finish; the completed checkpoints are at steps {completed_steps}.")
    assert tf.train.load_checkpoint(latest) is not None


def coordinator_resumed(lines, checkpoint_step, num_steps):
    """A restarted coordinator's output: it resumed from ``checkpoint_step`` or later and finished."""
    resumed = [line for line in lines if "resumed from checkpoint" in line]
    assert len(resumed) == 1, f"the restarted coordinator printed {len(resumed)} 'resumed' lines: {lines}"
    step = int(resumed[0].rpartition(" ")[2])
    assert step >= checkpoint_step, (f"the restarted coordinator resumed at step {step}, before the "
                                     f"checkpoint at step {checkpoint_step} that the first one had saved.")
    assert f"finished at step {num_steps}" in lines[-1], f"it did not finish at step {num_steps}: {lines[-1]}"


def fit_skipped_epochs(epochs_started, finished_epochs):
    """A restarted ``model.fit`` with BackupAndRestore starts after the epochs already finished."""
    assert epochs_started and epochs_started[0] == f"epoch {finished_epochs + 1} started", (
        f"the restarted fit began with {epochs_started[:1]}, not 'epoch {finished_epochs + 1} started': "
        f"it should skip the {finished_epochs} finished epochs.")


# ----- 08 performance analysis --------------------------------------------------------
def results_saved(table, points, saved):
    """The CSV and JSON results hold every planned point (baselines once per cluster shape they were measured
    beside), the same rows in both, positive speeds, and the machine."""
    assert len(table) == len(saved["results"]), (
        f"{len(table)} CSV rows but {len(saved['results'])} JSON results: the files disagree.")
    fields = ("model", "loop", "workers", "ps", "steps_per_closure", "batch_size")
    measured = {tuple(str(row[name]) for name in fields) for row in table}
    planned = {tuple(str(getattr(point, name)) for name in fields) for point in points}
    assert measured == planned, (f"planned points missing from the CSV: {sorted(planned - measured)}; "
                                 f"rows that were not planned: {sorted(measured - planned)}")
    slow = [row for row in table if not float(row["samples_per_s_median"]) > 0]
    assert not slow, f"rows without a positive median speed: {slow}"
    missing = {"cores", "memory_gib", "versions"} - set(saved["machine"])
    assert not missing, f"the JSON does not describe the machine's {sorted(missing)}."


def dense_traffic_is_model_size(row, low=0.8, high=1.5):
    """A dense model pulls and pushes about its parameter bytes M per step (``row``: one bench result)."""
    size = row["parameter_bytes"]
    for direction in ("pull", "push"):
        ratio = row[f"measured_{direction}_bytes_per_step"] / size
        assert low <= ratio <= high, (f"{row['model']} {row['loop']} {row['workers']}w {row['ps']}ps "
                                      f"K={row['steps_per_closure']}: {direction} {ratio:.2f} M per step, "
                                      f"outside {low}-{high} M.")


def clusters_stopped(leftover):
    """``leftover``, the clusters this process still runs (``labkit.cluster.running_clusters``), is empty."""
    assert leftover == [], f"clusters still running: {leftover}"


# ----- 08 the cost model (labkit.bench.costmodel) ------------------------------------------
def predicted_every_point(predicted, rows):
    """Every custom-loop row has one prediction, a positive finite number of steps/s.

    ``predicted``: (row, Prediction, fitted on it) from ``bench.costmodel.predict_rows``.
    """
    custom = [row for row in rows if row["loop"] == "custom"]
    assert len(predicted) == len(custom), f"{len(custom)} custom-loop points measured, but {len(predicted)} predicted."
    bad = [(row["model"], row["workers"], row["ps"], row["steps_per_closure"], prediction.steps_per_s)
           for row, prediction, _ in predicted if not (math.isfinite(prediction.steps_per_s) and prediction.steps_per_s > 0)]
    assert not bad, f"predictions that are not a positive number of steps/s (model, workers, ps, K, steps/s): {bad}"


# ----- 09 laptop to cluster ------------------------------------------------------------
def runs_with_its_files(process, directory):
    """A task process runs in its exported directory, with the TF_CONFIG of that directory's file."""
    wanted = json.loads((Path(directory) / "tf_config.json").read_text())
    assert json.loads(process.environ().get("TF_CONFIG", "null")) == wanted, (
        f"pid {process.pid} does not have the TF_CONFIG of {directory}/tf_config.json.")
    assert Path(process.cwd()).resolve() == Path(directory).resolve(), (
        f"pid {process.pid} runs in {process.cwd()}, not in {directory}.")


# ----- Notebook 09: the Kubernetes export (labkit.kubernetes) --------------------------

def kubernetes_names_consistent(objects):
    """Every container's TF_CONFIG names the same cluster, whose every address is a Service's name and port
    and whose every task runs in exactly one Pod or Job; return the number of tasks."""
    from labkit import kubernetes

    configs = kubernetes.tf_configs(objects)
    services = {item["metadata"]["name"]: item["spec"]["ports"][0]["port"]
                for item in objects if item["kind"] == "Service"}
    clusters = {json.dumps(config["cluster"], sort_keys=True) for config in configs.values()}
    assert len(clusters) == 1, f"the containers' TF_CONFIGs describe {len(clusters)} different clusters; expected one."
    cluster = configs[next(iter(configs))]["cluster"]
    tasks = {f"{job}:{index}": address for job, addresses in cluster.items() for index, address in enumerate(addresses)}
    assert set(configs) == set(tasks), (f"tasks in the cluster {sorted(tasks)} but containers for {sorted(configs)}: "
                                        "every task needs exactly one container.")
    for task, address in tasks.items():
        host, port = address.rsplit(":", 1)
        assert services.get(host) == int(port), (
            f"{task}'s address {address} is not a Service's DNS name and port (Services: {services}).")
    return len(tasks)

def beats_baseline(perplexity, baselines, baseline):
    """The model's ``perplexity`` is below the ``baseline`` entry of ``baselines`` (e.g. "bigram")."""
    if baseline not in baselines:
        raise ValueError(f"unknown baseline {baseline!r}; use one of {', '.join(baselines)}.")
    if not perplexity < baselines[baseline]:
        raise AssertionError(f"validation perplexity {perplexity:.2f} does not beat the {baseline} baseline "
                             f"({baselines[baseline]:.2f}): train for more steps.")


def lookup_sends_rows(lookup_bytes, rows_bytes):
    """An embedding lookup's bytes are those of one row per token (within RPC overhead), not fewer."""
    if not 0.9 * rows_bytes <= lookup_bytes <= 1.5 * rows_bytes:
        raise AssertionError(f"a lookup sent {lookup_bytes:,.0f} bytes, expected about {rows_bytes:,} "
                             "(one row per token of the batch): did the lookup run on the parameter servers?")


def fit_ran_every_input(steps_by_input, steps_per_epoch):
    """``model.fit`` ran ``steps_per_epoch`` steps for every kind of input in ``steps_by_input``."""
    wrong = {kind: steps for kind, steps in steps_by_input.items() if steps != steps_per_epoch}
    if wrong:
        raise AssertionError(f"expected {steps_per_epoch} steps for every input, got {wrong}.")


def waited_in_the_strategy(result):
    """A snippet program (``snippets.run_program``) reached the strategy's constructor and waited there."""
    output = result.output
    if "creating the strategy" not in output:
        raise AssertionError(f"the program never reached the strategy ({result}): it failed or was "
                             "stopped earlier, e.g. while importing TensorFlow; give it more time.")
    if "connected" in output or "still creating the strategy" not in output:
        raise AssertionError(f"the program did not wait in ParameterServerStrategy(...): {result}")


# ----- 10 PS vs all-reduce ------------------------------------------------------------
def both_reached(accuracy_by_strategy, target_accuracy):
    """Every strategy's final test accuracy (``{"PS": 0.9, ...}``) is at least ``target_accuracy``."""
    short = {name: round(accuracy, 3) for name, accuracy in accuracy_by_strategy.items() if accuracy < target_accuracy}
    assert not short, (f"final test accuracy below {target_accuracy} for {short}: the time to that accuracy "
                       "cannot be compared. Train more intervals, or lower target_accuracy.")


def lockstep_limit(num_workers, batch_size, slow_ms):
    """Samples/s a synchronous step can reach at most when one worker pauses ``slow_ms`` per batch."""
    return num_workers * batch_size / (slow_ms / 1000)


def sync_waited(samples_per_second, num_workers, batch_size, slow_ms):
    """All-reduce with a worker pausing ``slow_ms`` per batch ran no faster than that pause allows."""
    limit = lockstep_limit(num_workers, batch_size, slow_ms)
    assert samples_per_second <= 1.05 * limit, (
        f"all-reduce ran {samples_per_second:,.0f} samples/s with a worker pausing {slow_ms} ms per batch, "
        f"above the lockstep limit {limit:,.0f}: was that worker really slowed?")


def async_did_not_wait(samples_per_second, num_workers, batch_size, slow_ms):
    """Asynchronous PS training with a slowed worker beat the lockstep limit: the others did not wait."""
    limit = lockstep_limit(num_workers, batch_size, slow_ms)
    assert samples_per_second > limit, (
        f"PS training ran {samples_per_second:,.0f} samples/s, not above the lockstep limit {limit:,.0f} of a "
        f"{slow_ms} ms pause: did the fast workers wait for the slow one?")


def link_bytes_near(measured, expected, what, low=0.8, high=1.5):
    """A measured byte count per step is within ``low``-``high`` times the ``expected`` payload."""
    assert low * expected <= measured <= high * expected, (
        f"{what}: {measured:,.0f} bytes per step, expected {low}-{high} x {expected:,.0f}.")


def moved_rows_not_table(bytes_per_step, rows_bytes, table_bytes):
    """A sparse step moved at least the touched rows' bytes, and under 1% of the whole table."""
    assert rows_bytes <= bytes_per_step < 0.01 * table_bytes, (
        f"{bytes_per_step:,.0f} bytes per step; expected at least the touched rows ({rows_bytes:,}) and under "
        f"1% of the table ({table_bytes:,}): a dense table gradient would move all of it.")


def sharded_over_ps(held_by_task, num_ps):
    """The variables live on the ``num_ps`` parameter servers, none holding over 1.2 x an equal share."""
    on_workers = {task: held for task, held in held_by_task.items() if not task.startswith("ps")}
    assert not on_workers, f"variables held outside the parameter servers: {on_workers}"
    total, largest = sum(held_by_task.values()), max(held_by_task.values())
    assert len(held_by_task) == num_ps and largest <= 1.2 * total / num_ps, (
        f"{held_by_task}: expected the table spread over {num_ps} parameter servers (use a variable_partitioner).")


def replicated(held_by_worker, table_bytes):
    """Every all-reduce worker holds at least a full copy of the table."""
    short = [held for held in held_by_worker if held < table_bytes]
    assert not short, f"workers hold {held_by_worker} bytes, some less than the table's {table_bytes:,}."
