"""A gradient to compress: what the compressors' tests and their checks' tests share."""
import pytest

GRADIENT_SHAPE = (40, 25)


@pytest.fixture
def gradient():
    """A fixed random tensor of GRADIENT_SHAPE: what the compressors' tests compress."""
    import tensorflow as tf

    return tf.random.stateless_normal(GRADIENT_SHAPE, seed=[1, 2])
