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


# ----- exercise 2: gradient compression --------------------------------------------
def compressor_shrinks(compressor, min_ratio, shape=(784, 128)):
    """On a gradient-like tensor: the payload is >= min_ratio times smaller and decompresses sensibly."""
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
    assert float(tf.reduce_sum(rebuilt * gradient)) > 0, (
        "the decompressed gradient does not point the gradient's way: decompress(compress(g)) should "
        "put each kept value back at its own position.")
    tf.function(compressor.compress)(gradient)  # it must also work in graph mode, as in training


def compression_result(result, dense, min_ratio, max_accuracy_loss):
    """A training run with the compressor and error feedback: fewer bytes, nearly the same accuracy."""
    assert result.error_feedback, "this run has no error feedback: pass error_feedback=True to train_mnist."
    assert result.ratio >= min_ratio, (f"the workers pushed only {result.ratio:.1f}x fewer bytes than dense "
                                       f"gradients; the goal is {min_ratio}x.")
    lost = dense.test_accuracy - result.test_accuracy
    assert lost <= max_accuracy_loss, (
        f"test accuracy {result.test_accuracy:.3f} vs {dense.test_accuracy:.3f} uncompressed: "
        f"{lost * 100:.1f} points lost, more than {max_accuracy_loss * 100:.0f}. Is error feedback on, "
        "and does decompress() put the values back where they came from?")


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
