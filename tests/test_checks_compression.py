"""The checks of notebook 05 and exercise 2 pass right results and reject wrong ones: a learner's
compressor, fewer bytes, accuracy within a non-inferiority margin, like-for-like payloads, a rate-matched
control."""
import math

import numpy as np
import pytest
import tensorflow as tf

import labkit
from labkit import checks, compression, verdict

from support.gradients import GRADIENT_SHAPE as SHAPE, gradient  # noqa: F401  (a fixture)


class LearnerTopK(compression.Compressor):
    """A correct learner's top-k (what the exercise asks for)."""

    def __init__(self, ratio=0.01):
        self.ratio, self.name = ratio, "learner top-k"

    def k(self, size):
        return max(1, math.ceil(self.ratio * size))

    def compress(self, gradient):
        flat = tf.reshape(gradient, [-1])
        positions = tf.math.top_k(tf.abs(flat), k=self.k(flat.shape[0]), sorted=False).indices
        return {"values": tf.gather(flat, positions), "positions": positions}

    def decompress(self, payload, shape):
        return tf.reshape(tf.scatter_nd(payload["positions"][:, None], payload["values"], [math.prod(shape)]), shape)

    def bytes_per_step(self, shape):
        return 8 * self.k(math.prod(shape))


class ShiftedPositions(LearnerTopK):
    def decompress(self, payload, shape):
        return super().decompress({"values": payload["values"], "positions": (payload["positions"] + 1) % 3},
                                  shape)


class ReversedValues(LearnerTopK):
    def decompress(self, payload, shape):
        return super().decompress({"values": payload["values"][::-1], "positions": payload["positions"]}, shape)


class ScaledUp(LearnerTopK):
    def decompress(self, payload, shape):
        return 2 * super().decompress(payload, shape)


class SmallestK(LearnerTopK):
    def compress(self, gradient):
        flat = tf.reshape(gradient, [-1])
        positions = tf.math.top_k(-tf.abs(flat), k=self.k(flat.shape[0])).indices
        return {"values": tf.gather(flat, positions), "positions": positions}


def test_a_correct_learner_compressor_passes_the_exercise_check():
    checks.compressor_shrinks(LearnerTopK(0.01), min_ratio=40)


@pytest.mark.parametrize("compressor, hint", [
    (ShiftedPositions(), "exact values at the positions"),
    (ReversedValues(), "exact values at the positions"),
    (ScaledUp(), "exact values at the positions"),
    (SmallestK(), "contraction"),
    (compression.TopK(0.01), "your own class"),
    (type("Copied", (compression.TopK,), {})(0.01), "your own class"),
], ids=["shifted", "reversed", "scaled", "smallest", "library", "subclass"])
def test_the_exercise_check_rejects_wrong_compressors(compressor, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.compressor_shrinks(compressor, min_ratio=40)


def test_contraction_check_rejects_a_compressor_that_keeps_too_little(gradient):
    kept_small = np.where(np.abs(gradient.numpy()) < 0.1, gradient.numpy(), 0)
    with pytest.raises(AssertionError, match="contraction"):
        checks.contracts(gradient, kept_small, int((kept_small != 0).sum()))


def result(name, accuracy, total, seed=0, applied_step=0.05):
    measured = labkit.traffic.Traffic(received=total / 2, sent=total / 2)
    run = compression.Result(name=name, seed=seed, error_feedback=True, push_payload=total / 4,
                             pull_payload=total / 4, model_bytes=407_080, measured=measured, applied_step=applied_step)
    run.record(600, 60.0, steps_per_second=10.0, evaluation={"accuracy": accuracy})
    return run


def test_both_ways_check_passes_enough_bytes_saved_and_rejects_too_many():
    dense = [result("dense", a, 830_000, seed) for seed, a in enumerate((0.90, 0.91, 0.89))]
    compressed = [result("top-k", a, 30_000, seed) for seed, a in enumerate((0.90, 0.90, 0.89))]
    assert checks.fewer_total_bytes(dense, compressed, min_ratio=20) == pytest.approx(830 / 30)
    too_many = [result("top-k", a, 50_000, seed) for seed, a in enumerate((0.90, 0.90, 0.89))]
    with pytest.raises(AssertionError, match="fewer total bytes"):
        checks.fewer_total_bytes(dense, too_many, min_ratio=20)


def test_both_ways_check_needs_the_same_seeds_and_measured_bytes():
    dense = [result("dense", 0.9, 830_000, seed=0)]
    with pytest.raises(AssertionError, match="same seeds"):
        checks.fewer_total_bytes(dense, [result("top-k", 0.9, 30_000, seed=1)], 20)
    unmeasured = result("top-k", 0.9, 30_000)
    unmeasured.measured = None
    with pytest.raises(AssertionError, match="no bytes measured"):
        checks.fewer_total_bytes(dense, [unmeasured], 20)


def test_variance_bound_check_rejects_a_variance_above_the_bound():
    checks.within_variance_bound(0.5, 1.0)
    with pytest.raises(AssertionError, match="above the bound"):
        checks.within_variance_bound(1.2, 1.0)


def kept(accuracies, margin=0.01):
    return verdict.non_inferior(verdict.paired("top_k_vs_dense_accuracy", accuracies, [0.90, 0.91, 0.89],
                                               measure="test accuracy"), margin)  # paired by seed


def test_the_accuracy_check_allows_a_mean_loss_within_the_margin_and_no_more():
    close = kept([0.895, 0.905, 0.885])   # half a point lost in every seed
    checks.accuracy_within_margin(close)
    assert close.verdict == verdict.NON_INFERIOR
    noisy = kept([0.91, 0.87, 0.90])      # 0.67 points lost on average, seeds spread: within, but not shown
    checks.accuracy_within_margin(noisy)
    assert noisy.verdict == verdict.CANNOT_TELL
    steady = kept([0.875, 0.885, 0.865])  # 2.5 points lost in every seed
    assert steady.verdict == verdict.INFERIOR
    with pytest.raises(AssertionError, match="2.50 points of mean accuracy lost, more than the margin of 1: "
                                             "Compressed is inferior to uncompressed"):
        checks.accuracy_within_margin(steady)
    with pytest.raises(AssertionError, match="the verdict of labkit.verdict.non_inferior"):
        checks.accuracy_within_margin(verdict.unpaired("x", [0.9] * 3, [0.9] * 3, measure="test accuracy"))


def test_same_payload_check_rejects_runs_with_different_warm_up():
    same = [result("naive", 0.85, 1), result("dgc", 0.91, 1)]
    checks.same_payload(same)
    with pytest.raises(AssertionError, match="different payloads per step"):
        checks.same_payload([result("naive", 0.85, 1), result("dgc with a longer warm-up", 0.91, 1.2)])


def test_rate_matched_check_needs_the_control_to_take_steps_at_least_as_large():
    with_feedback = [result("top-k +EF", 0.88, 1, seed, applied_step=0.3) for seed in (0, 1)]
    larger = [result("no EF, 10× rate", 0.8, 1, seed, applied_step=step) for seed, step in enumerate((0.35, 0.3))]
    assert checks.steps_at_least_as_large(larger, with_feedback) == pytest.approx(0.325 / 0.3)
    smaller = [result("no EF", 0.8, 1, seed, applied_step=step) for seed, step in enumerate((0.35, 0.2))]
    with pytest.raises(AssertionError, match="0.92× as large as those of top-k \\+EF, not at least as large"):
        checks.steps_at_least_as_large(smaller, with_feedback)
