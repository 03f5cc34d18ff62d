"""Every check of labkit.checks.welcome rejects a wrong result (and accepts the right one).

Real objects throughout: real processes, checkpoints written by TensorFlow, matplotlib axes; only the
numbers fed in are chosen to be wrong.
"""
import pytest

from labkit import checks


def test_00_keras_3_is_refused():
    checks.keras_2("2.21.0")
    with pytest.raises(AssertionError, match="needs Keras 2"):
        checks.keras_2("3.10.0")
