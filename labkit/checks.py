"""Checks for the exercise notebooks (``exercises/``): each failure says what is wrong and how to fix it.

Every check looks at a real outcome (a server that answers, a model that learned,
bytes that shrank, a checkpoint on disk) and fails with an ``AssertionError``.
"""
import math
import os
import socket
import time

import numpy as np
import psutil
import tensorflow as tf

from labkit import compression, fit, tfconfig

LOOPBACK_HOSTS = ("localhost", "127.0.0.1")


class Checklist:
    """The checks of one exercise notebook, ticked off as their cells pass."""

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
    accuracy = fit.accuracy(model, data.x_test, data.y_test)
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
        assert host in LOOPBACK_HOSTS, (f"{name} is at {address}: use 'localhost' for every task. The "
                                        "servers accept anyone who reaches them; keep them on loopback.")
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
    deadline = time.monotonic() + timeout
    for name in servers:
        process, port = processes[name], int(_address(configs[name]["cluster"], name).rpartition(":")[2])
        while not _listens(process.pid, port):
            code = process.poll()
            assert code is None, (f"{name}'s process exited with code {code} before serving: read its log. "
                                  "Did you pass TF_CONFIG in its environment (env=...)?")
            assert time.monotonic() < deadline, (f"{name} is not reachable on port {port} after {timeout:.0f} s: "
                                                 "did its server start with its own TF_CONFIG?")
            time.sleep(0.1)


def _listens(pid, port):
    try:
        listening = any(c.status == psutil.CONN_LISTEN and c.laddr.port == port
                        for c in psutil.Process(pid).net_connections(kind="tcp"))
    except psutil.NoSuchProcess:
        return False
    if not listening:
        return False
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def cluster_trained(configs, model, data, target_accuracy):
    """This process joined the learner's cluster as its chief, the model lives on the ps, and it learned MNIST."""
    address = _address(configs["chief:0"]["cluster"], "chief:0")
    assert _listens(os.getpid(), int(address.rpartition(":")[2])), (
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
    lost = dense.test_accuracy - result.test_accuracy
    assert lost <= max_accuracy_loss, (
        f"test accuracy {result.test_accuracy:.3f} vs {dense.test_accuracy:.3f} uncompressed: "
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
    lost = np.mean([r.test_accuracy for r in dense_runs]) - np.mean([r.test_accuracy for r in compressed_runs])
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
        return float(np.mean([r.test_accuracy for r in runs]))
    assert mean(dgc_runs) >= mean(naive_runs) + min_gain, (
        f"DGC reached {mean(dgc_runs):.3f}, naive top-k with momentum on the PS {mean(naive_runs):.3f} "
        f"(uncompressed {mean(dense_runs):.3f}): DGC should win by at least {min_gain * 100:g} points.")


# ----- exercise 3: checkpoints and recovery ----------------------------------------
def checkpoint_saved(checkpoint_dir, step):
    """The latest checkpoint in ``checkpoint_dir`` holds the optimizer at ``step``."""
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    assert latest, (f"no checkpoint in {checkpoint_dir}: did train_until call manager.save() every "
                    "checkpoint_every steps?")
    reader = tf.train.load_checkpoint(latest)
    names = [name for name in reader.get_variable_to_shape_map() if name.startswith("optimizer/iter/")]
    assert names, ("the checkpoint has no optimizer step counter: create it as "
                   "tf.train.Checkpoint(model=job.model, optimizer=job.optimizer).")
    saved = int(reader.get_tensor(names[0]))
    assert saved == step, (f"the latest checkpoint holds step {saved}, not {step}: save after every "
                           "checkpoint_every steps, the last ones too.")


def resumed(resumed_at, checkpoint_step, job, num_steps, data, target_accuracy):
    """Training restarted from the checkpoint (not from 0), ran to ``num_steps`` and learned; returns the accuracy."""
    assert resumed_at != 0, (f"training started again from step 0, not from the checkpoint at step "
                             f"{checkpoint_step}: did restore_latest call checkpoint.restore(manager.latest_checkpoint)?")
    assert resumed_at == checkpoint_step, (f"training resumed at step {resumed_at}, but the last checkpoint "
                                           f"before the kill was at step {checkpoint_step}: restore the latest one.")
    final = int(job.optimizer.iterations.numpy())
    assert final == num_steps, f"training ended at step {final}, not {num_steps}: train until num_steps."
    return learned(job.model, data, target_accuracy)


# ----- exercise 4: time vs number of workers ---------------------------------------
def timings(seconds_by_workers, worker_counts):
    """One positive time for each worker count."""
    assert sorted(seconds_by_workers) == sorted(worker_counts), (
        f"you have times for {sorted(seconds_by_workers)} worker(s) but worker_counts is {list(worker_counts)}: "
        "time every worker count.")
    for workers, seconds in seconds_by_workers.items():
        assert isinstance(seconds, float) and 0 < seconds < math.inf, (
            f"the time for {workers} worker(s) is {seconds!r}: measure seconds as a float with "
            "time.perf_counter() before and after the timed steps.")


def plot_shows(axis, seconds_by_workers):
    """The axes have a line with one point per worker count, at the measured times."""
    counts = sorted(seconds_by_workers)
    lines = [(list(line.get_xdata()), list(line.get_ydata())) for line in axis.get_lines()]
    assert lines, "the axes have no line: plot the times with axis.plot(...)."
    xs, ys = lines[0]
    assert xs == counts, (f"the plot's x values are {xs}, not the worker counts {counts}: "
                          "pass the worker counts as x, axis.plot(workers, seconds).")
    assert ys == [seconds_by_workers[n] for n in counts], "the plot's y values are not the measured seconds."
    assert axis.get_xlabel() and axis.get_ylabel(), "label both axes (axis.set_xlabel, axis.set_ylabel)."


# ----- exercise 5: bounded staleness -----------------------------------------------
def bounded_rule(rule_class, bound=3):
    """``rule_class(bound).scale(tau)`` is 1 for tau <= bound and 0 beyond, in eager and graph mode."""
    rule = rule_class(bound)
    taus = tf.constant([0, 1, bound - 1, bound, bound + 1, bound + 2, 64], tf.int64)
    expected = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    for mode, scale in (("eagerly", rule.scale), ("in a tf.function", tf.function(rule.scale))):
        got = scale(taus)
        assert got.dtype == tf.float32, f"scale() returned {got.dtype.name}; return float32 (tf.cast it)."
        got = got.numpy().tolist()
        assert got[3] == 1.0, (f"scale({bound}) with bound {bound} is {got[3]}: an update exactly {bound} "
                               "steps stale is still allowed. Compare with tau <= bound.")
        assert got[4:] == [0.0] * 3, (f"scale(tau) beyond the bound gave {got[4:]}: updates more than "
                                      f"{bound} steps stale must be rejected (scale 0), not only damped.")
        assert got == expected, f"run {mode}, scale({taus.numpy().tolist()}) = {got}, expected {expected}."


def rejects_beyond_bound(run, bound, delay, num_steps):
    """A one-worker run with a delay buffer: exactly the updates more than ``bound`` stale were dropped."""
    taus = [min(arrival, delay) for arrival in range(num_steps - delay)]  # staleness of each applied update
    expected = sum(tau > bound for tau in taus)
    assert run.dropped == expected, (f"the PS rejected {run.dropped} updates; with delay {delay} and bound "
                                     f"{bound}, {expected} of them were more than {bound} steps stale.")
    beyond = int(run.counts[:, bound + 1:].sum())
    assert beyond == run.dropped, (f"the histogram has {beyond} updates beyond the bound, "
                                   f"but {run.dropped} were dropped.")
