"""Checks of notebook 06 and exercise 5 (stale gradients)."""
import math

import numpy as np
import tensorflow as tf

from labkit.checks.core import require


def filter_rule(rule_class, max_tau=3):
    """``rule_class(max_tau).scale(tau)`` is 1 for tau <= max_tau and 0 beyond, in eager and graph mode."""
    rule = rule_class(max_tau)
    taus = tf.constant([0, 1, max_tau - 1, max_tau, max_tau + 1, max_tau + 2, 64], tf.int64)
    expected = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    for mode, scale in (("eagerly", rule.scale), ("in a tf.function", tf.function(rule.scale))):
        got = scale(taus)
        require(got.dtype == tf.float32, f"scale() returned {got.dtype.name}; return float32 (tf.cast it).")
        got = got.numpy().tolist()
        require(got[3] == 1.0, f"scale({max_tau}) with max_tau {max_tau} is {got[3]}: an update exactly "
                               f"{max_tau} steps stale is still allowed. Compare with tau <= max_tau.")
        require(got[4:] == [0.0] * 3, f"scale(tau) beyond max_tau gave {got[4:]}: updates more than "
                                      f"{max_tau} steps stale must be dropped (scale 0), not only damped.")
        require(got == expected, f"run {mode}, scale({taus.numpy().tolist()}) = {got}, expected {expected}.")


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
        require(int(fresh) == 0, f"an update read right before it was applied got tau {int(fresh)}, expected 0.")
    tau = int(counter.apply([tf.constant([1.0, 1.0])], early_read))
    require(tau == 2, f"two updates landed between the read and this update, but apply() returned tau {tau}.")
    require(int(counter.version.numpy()) == 3, f"after 3 applied updates the version is {int(counter.version.numpy())}: "
                                               "claim one version per applied update.")
    require(variable.numpy().tolist() != [0.0, 0.0], "apply() did not change the variable: assign_sub the update.")
    graph = tf.function(counter.apply).get_concrete_function(
        [tf.TensorSpec([2], tf.float32)], tf.TensorSpec([], tf.int64)).graph
    handles = {id(outer): inner for outer, inner in graph.captures}
    version, weights = handles[id(counter.version.handle)], handles[id(variable.handle)]
    claims = [op for op in graph.get_operations() if op.type == "AssignAddVariableOp" and op.inputs[0] is version]
    writes = [op for op in graph.get_operations()
              if any(tensor is weights for tensor in op.inputs) and op.type != "ReadVariableOp"]
    require(claims, "apply() never adds to the version: claim it with self.version.assign_add(...).")
    for claim in claims:
        missing = [write.type for write in writes if write not in _ancestors(claim)]
        require(not missing, "the version is claimed without waiting for the update "
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
    require(taus.sum() > 0, "the one-worker run counted no updates at all.")
    require(taus[1:].sum() == 0, f"one worker alone measured tau > 0 for {taus[1:].sum()} of {taus.sum()} "
                                 "updates, but nothing else can land between its read and its update.")
    workers = len(together.clocks)
    require(together.stale_share >= min_stale_share,
        f"with {workers} workers only {together.stale_share:.0%} of the updates measured tau > 0 (expected at "
        f"least {min_stale_share:.0%}). A counter that claims its version before the update measures tau = 0 "
        "whatever happens: claim after the update's assign_sub ops.")


def dropped_exactly_the_stale(run, max_tau):
    """A staleness-filter run: exactly the updates more than ``max_tau`` stale were dropped, and
    the version counts the applied updates only."""
    idle = [worker for worker, clock in enumerate(run.clocks) if clock == 0]
    require(not idle, f"worker(s) {idle} applied no update: did they fail? (see the cluster's logs) Run it again.")
    require(run.taus[1:].sum() > 0, "no update measured tau > 0, so there was nothing to filter. With several "
                                    "workers and a slowed one, look for a version claimed before the update.")
    beyond = int(run.counts[:, max_tau + 1:].sum())
    require(run.dropped == beyond, f"the PS dropped {run.dropped} updates, but the histogram has {beyond} "
                                   f"with tau > {max_tau}: drop exactly those.")
    applied = int(run.counts.sum()) - run.dropped
    require(run.updates[-1] == applied, f"the version is {run.updates[-1]}, but {applied} updates were applied: "
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
    """An SSP run dropped nothing, waited (if the run without SSP drifted beyond the bound), and no worker
    began a step more than ``bound`` clocks ahead of the slowest that could still run one, unless a wait
    timed out (the run then reports its bound broken)."""
    require(ssp.dropped == 0, f"SSP dropped {ssp.dropped} updates: SSP makes fast workers wait, it drops nothing.")
    drift = max(unbounded.clocks) - min(unbounded.clocks)
    if drift > bound + 1:
        require(ssp.waited_seconds > 0, f"without SSP the workers' clocks drifted {drift} apart, yet under SSP "
                                        f"(bound {bound}) no worker waited: the wait never ran.")
    require(ssp.max_lead <= bound or ssp.timeouts > 0,
            f"under SSP with bound {bound} a worker began a step {ssp.max_lead} clocks ahead of the slowest, "
            "and no wait timed out: a worker ran ahead without waiting.")


def staleness_aware_won_back(fresh, plain, aware, min_gap):
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
    require(gap >= margin, f"plain async lost only {gap:.3f} against tau = 0 (needed {margin:.3f}: "
                           f"min_accuracy_gap or 3 standard errors over seeds): raise the learning rate or the delay.")
    won = aware.mean() - plain.mean()
    needed = max(gap / 2, 3 * standard_error(aware, plain))
    require(won >= needed, f"the staleness-aware rule won back {won:.3f} of the {gap:.3f} plain async lost "
                           f"(needed {needed:.3f}: half of it, and 3 standard errors over seeds).")
