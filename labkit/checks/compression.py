"""Checks of notebook 05 and exercise 2 (gradient compression)."""
import math

import numpy as np
import tensorflow as tf

from labkit import compression, verdict
from labkit.checks.core import require


def compressor_shrinks(compressor, min_ratio, shape=(784, 128)):
    """A learner's compressor on a gradient-like tensor: its own code, >= min_ratio times smaller,
    the exact values back at their own positions, and the contraction property of top-k."""
    for method in ("compress", "decompress"):
        owner = next(cls for cls in type(compressor).__mro__ if method in vars(cls))
        require(owner is compression.Compressor or owner.__module__ != compression.__name__,
            f"{method}() comes from labkit's {owner.__name__}: write compress() and decompress() in your own "
            "class (derive it from compression.Compressor only).")
    gradient = tf.random.stateless_normal(shape, seed=[0, 1]) * 0.01
    payload = compressor.compress(gradient)
    require(isinstance(payload, dict) and all(tf.is_tensor(t) for t in payload.values()),
        f"compress() returned {type(payload).__name__}; it must return the payload: a dict of tensors.")
    sent, dense = compression.payload_bytes(payload), 4 * math.prod(shape)
    require(sent < dense, f"the payload is {sent:,} bytes, as many as the dense gradient ({dense:,}): zeros "
                          "still take 4 bytes each. Send only the values you keep and their positions.")
    require(dense / sent >= min_ratio, f"the payload is only {dense / sent:.1f}x smaller than the dense "
                                       f"gradient; the goal is {min_ratio}x. Keep fewer entries.")
    announced = compressor.bytes_per_step(shape)
    require(announced in (None, sent), f"bytes_per_step{shape} says {announced:,} but the payload has "
                                       f"{sent:,} bytes: make it count what compress() returns.")
    rebuilt = compressor.decompress(payload, gradient.shape)
    require(tuple(rebuilt.shape) == shape, f"decompress() returned shape {tuple(rebuilt.shape)}, not the "
                                           f"gradient's {shape}: reshape it.")
    rebuilt, gradient = rebuilt.numpy(), gradient.numpy()
    kept = rebuilt != 0
    wrong = int(np.sum(rebuilt[kept] != gradient[kept]))
    require(kept.any() and wrong == 0,
        f"decompress(compress(g)) must give the exact values at the positions they came from (zeros "
        f"elsewhere): {wrong} of its {int(kept.sum())} nonzero entries differ from g there.")
    contracts(gradient, rebuilt, int(kept.sum()))
    tf.function(compressor.compress)(tf.constant(gradient))  # it must also work in graph mode, as in training


def contracts(gradient, rebuilt, kept):
    """The contraction property of top-k with k = ``kept``: ||C(x) − x||² <= (1 − k/n)·||x||²."""
    x = np.asarray(gradient, dtype=np.float64)
    error = float(np.sum((np.asarray(rebuilt, dtype=np.float64) - x) ** 2))
    bound = (1 - kept / x.size) * float(np.sum(x ** 2))
    require(error <= bound * (1 + 1e-6),
        f"the contraction property fails: ||C(x) − x||² = {error:.4g} > (1 − k/n)·||x||² = {bound:.4g} "
        f"(k = {kept} of n = {x.size}): keep the k entries of LARGEST magnitude.")


def compression_paid_off(result, dense, min_ratio, max_accuracy_loss):
    """A training run with the compressor and error feedback: fewer bytes, nearly the same accuracy."""
    require(result.error_feedback, "this run has no error feedback: give train_mnist a "
                                   "compression.Setting(compressor=..., push=compression.Push(error_feedback=True)).")
    require(result.push_ratio >= min_ratio, f"the workers pushed only {result.push_ratio:.1f}x fewer bytes than "
                                            f"dense gradients; the goal is {min_ratio}x.")
    lost = dense.final_accuracy - result.final_accuracy
    require(lost <= max_accuracy_loss,
        f"test accuracy {result.final_accuracy:.3f} vs {dense.final_accuracy:.3f} uncompressed: "
        f"{lost * 100:.1f} points lost, more than {max_accuracy_loss * 100:.0f}. Is error feedback on, "
        "and does decompress() put the values back where they came from?")


def fewer_total_bytes(dense_runs, compressed_runs, min_ratio):
    """Same seeds; the mean total (push + pull) bytes on the PS sockets >= min_ratio times fewer. Returns the ratio.
    (Whether accuracy was kept is ``accuracy_within_margin``'s.)"""
    seeds = sorted(r.seed for r in dense_runs)
    require(seeds and seeds == sorted(r.seed for r in compressed_runs),
        f"compare runs with the same seeds: {seeds} vs {sorted(r.seed for r in compressed_runs)}.")
    require(all(r.measured for r in dense_runs + compressed_runs),
        "the runs have no bytes measured on the PS sockets: give train_mnist "
        "shared=compression.Shared(ps_pids=traffic.ps_pids(cluster)) (needs ss).")
    ratio = np.mean([r.measured_total for r in dense_runs]) / np.mean([r.measured_total for r in compressed_runs])
    require(ratio >= min_ratio, f"{ratio:.1f}x fewer total bytes (push + pull) on the PS sockets; the goal is {min_ratio}x.")
    return ratio


def accuracy_within_margin(found):
    """The mean accuracy loss of a non-inferiority verdict (``labkit.verdict.non_inferior``) within its margin.
    That is less than non-inferior (the interval's worse end inside the margin): its sentence says which."""
    require(isinstance(found, verdict.Verdict) and found.margin is not None,
        f"accuracy_within_margin takes the verdict of labkit.verdict.non_inferior, not {found!r}.")
    loss = -found.effect if found.higher_is_better else found.effect
    require(loss <= found.margin,
        f"{loss * 100:.2f} points of mean accuracy lost, more than the margin of {found.margin * 100:g}: "
        + found.sentence("compressed", "uncompressed"))


def within_variance_bound(variance, bound):
    """A measured E||Q(v) − v||² / ||v||² is at most the paper's bound."""
    require(variance <= bound, f"measured variance {variance:.4g} ||v||² is above the bound {bound:.4g} ||v||².")


def same_payload(runs):
    """Like for like: every run pushed the same payload bytes per step (the same compressor, ratio and warm-up)."""
    pushed = [r.push_payload for r in runs]
    require(max(pushed) <= min(pushed) * 1.001,
        "the runs compared pushed different payloads per step: "
        + ", ".join(f"{r.name} (seed {r.seed}) {r.push_payload:,.0f} bytes" for r in runs)
        + ". Give them the same top-k ratio and the same warm-up.")


def _paired_by_seed(runs, others):
    seeds = [r.seed for r in runs]
    require(seeds and seeds == [r.seed for r in others],
        f"compare runs pair by pair, the same seeds in the same order: {seeds} vs {[r.seed for r in others]}.")


def steps_at_least_as_large(control_runs, runs):
    """A rate-matched control: over the same seeds, its steps moved the parameters at least as far (mean
    ``applied_step``) as those of the runs it controls, so that a win over it is not a win of larger steps.
    Returns the ratio, control / runs."""
    _paired_by_seed(control_runs, runs)
    control, treated = (float(np.mean([r.applied_step for r in group])) for group in (control_runs, runs))
    require(control >= treated,
        f"the steps of {control_runs[0].name} are {control / treated:.2f}× as large as those of {runs[0].name}, not "
        "at least as large: it is not rate-matched. Raise its learning rate (compression.rate_matched).")
    return control / treated
