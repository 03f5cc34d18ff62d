"""Every check of labkit.checks.staleness rejects a wrong result (and accepts the right one).

Real objects throughout: real processes, checkpoints written by TensorFlow, matplotlib axes; only the
numbers fed in are chosen to be wrong.
"""
import numpy as np
import pytest

from labkit import checks, staleness

tf = pytest.importorskip("tensorflow")


class MyFilter(staleness.StalenessFilter):
    """A learner's filter: a name of its own and its own scale()."""

    def __init__(self, max_tau):
        super().__init__(max_tau)
        self.name = f"my filter τ≤{max_tau}"

    def scale(self, tau):
        return tf.cast(tau <= self.max_tau, tf.float32)


def test_ex5_the_run_must_use_the_learners_filter():
    checks.used_own_filter(staleness.Run(rule="my filter τ≤0", delay="none", learning_rate=0.1), MyFilter, 0)
    with pytest.raises(checks.CheckFailed, match="not your filter"):
        checks.used_own_filter(staleness.Run(rule="drop τ>0", delay="none", learning_rate=0.1), MyFilter, 0)
    with pytest.raises(checks.CheckFailed, match="takes scale\\(\\) from labkit's StalenessFilter"):
        checks.used_own_filter(staleness.Run(rule="drop τ>0", delay="none", learning_rate=0.1),
                               staleness.StalenessFilter, 0)


def test_ex5_the_dropped_share_is_read_from_the_histogram():
    run = staleness.Run(rule="my filter τ≤0", delay="none", learning_rate=0.1, counts=np.array([[6, 3], [10, 1]]),
                        dropped=4)
    checks.dropped_share_read(0.2, run)
    with pytest.raises(checks.CheckFailed, match="dropped 4 of the 20 updates"):
        checks.dropped_share_read(0.8, run)
