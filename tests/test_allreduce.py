"""labkit.allreduce: a setup refuses bad settings clearly and gives each seed its own stream; two real worker
processes train MNIST in lockstep, one phase per turn they are given; a failing all-reduce worker, or a
failure in what runs alongside them, leaves no process behind.

Both strategies side by side, both models, are notebook 10's smoke copy.
"""
import time

import pytest

from labkit import allreduce, models
from labkit.runtime import children, processes
from support.processes import processes_running


@pytest.mark.parametrize("settings, message", [
    ({"model": "resnet"}, "unknown model 'resnet'; use one of mlp, embedding"),
    ({"num_workers": 0}, "num_workers must be a whole number >= 1"),
    ({"batches_per_interval": 30}, r"batches_per_interval \(30\) must be a multiple of steps_per_closure x num_workers \(20\)"),
    ({"slow_batches": 50}, r"slow_batches \(50\) must be a multiple"),
    ({"slow_worker": 2}, r"slow_worker 2 is not a worker index \(0 to 1\)"),
])
def test_a_bad_setup_says_what_to_change(settings, message):
    with pytest.raises(ValueError, match=message):
        allreduce.Setup(**settings)


def test_more_workers_than_the_graders_task_limit_are_refused_before_any_process_starts(tmp_path, monkeypatch):
    monkeypatch.setenv(children.MAX_TASKS_VARIABLE, "4")
    with pytest.raises(children.TaskLimitError, match="16 all-reduce workers make 16 task processes, but at most 4"):
        allreduce.run_all_reduce(allreduce.Setup(num_workers=16, batches_per_interval=160), log_dir=tmp_path)
    assert list(tmp_path.iterdir()) == [], "no worker program written, no worker started"


def test_a_setup_takes_its_models_learning_rate_unless_given_one():
    assert allreduce.Setup().learning_rate == 1e-3 and allreduce.Setup(model="embedding").learning_rate == 0.1
    assert float(allreduce.Setup(learning_rate=2e-3).build()[1].learning_rate) == pytest.approx(2e-3)


def test_a_setup_has_the_slowed_phase_only_when_asked():
    assert [name for name, _, _, _, _ in allreduce.Setup().phases] == ["seed 0"]
    assert allreduce.Setup(slow_worker=1, slow_ms=50, slow_batches=200).phases[-1] == ("slowed", 1, 200, 1, None)


def test_a_setup_runs_its_even_phase_once_per_seed_and_the_embedding_only_one():
    phases = allreduce.Setup(seed=4, seeds=3, intervals=5, slow_worker=1, slow_ms=50, slow_batches=60).phases
    assert phases == [("seed 4", 5, 100, None, 4), ("seed 5", 5, 100, None, 5), ("seed 6", 5, 100, None, 6),
                      ("slowed", 1, 60, 1, None)]
    with pytest.raises(ValueError, match="seeds=3 needs the mlp model"):
        allreduce.Setup(model="embedding", seeds=3)


def test_a_restart_gives_the_seeds_initial_weights_and_a_fresh_optimizer():
    import numpy as np
    import tensorflow as tf

    setup = allreduce.Setup(seed=0)
    model, optimizer = setup.build()
    batch = tf.random.uniform((8, 784)), tf.zeros((8,), tf.int64)
    with tf.GradientTape() as tape:
        loss = models.mean_cross_entropy(batch[1], model(batch[0]))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    setup.restart(model, optimizer, seed=1)
    tf.keras.utils.set_random_seed(1)
    for restarted, fresh in zip(model.get_weights(), models.mnist_mlp().get_weights()):
        np.testing.assert_array_equal(restarted, fresh)
    assert [float(tf.reduce_max(tf.abs(variable))) for variable in optimizer.variables()] == [0.0] * 9  # step count; m, v of 4 variables
    tf.keras.utils.set_random_seed(0)
    assert not np.array_equal(model.get_weights()[0], models.mnist_mlp().get_weights()[0])  # seed 0 differs


def test_time_to_accuracy_is_the_first_evaluation_at_the_target():
    phase = allreduce.Phase(batch_size=10)
    for step, seconds, accuracy in ((10, 1.0, 0.5), (20, 2.0, 0.9), (30, 3.0, 0.8)):
        phase.record(step, seconds, evaluation={"accuracy": accuracy})
    assert phase.first_reaching(0.85, "seconds") == 2.0
    assert phase.first_reaching(0.85) == 20
    assert phase.first_reaching(0.95, "seconds") is None
    assert phase.samples == [100, 200, 300]
    assert phase.samples_per_second == 100


def test_the_samples_and_seconds_to_a_target_lie_on_the_line_between_the_evaluations_around_it():
    phase = allreduce.Phase(batch_size=10)
    for step, seconds, accuracy in ((10, 1.0, 0.80), (20, 3.0, 0.84), (30, 4.0, 0.88), (40, 5.0, 0.86)):
        phase.record(step, seconds, evaluation={"accuracy": accuracy})
    assert phase.reaching(0.87) == pytest.approx((275.0, 3.75))  # three quarters of the way from 0.84 to 0.88
    assert phase.reaching(0.80) == (100, 1.0), "reached at the first evaluation: that evaluation's own values"
    assert phase.reaching(0.89) is None


def test_each_seed_streams_its_own_batches_and_a_seed_streams_the_same_ones_again():
    from labkit.data import load_mnist

    data, setup = load_mnist("offline-subset"), allreduce.Setup(batch_size=8, seed=0)

    def first_labels(seed):
        return next(iter(setup.dataset_fn(data, seed=seed)()))[1].numpy().tolist()
    assert first_labels(3) == first_labels(3) != first_labels(4)
    assert first_labels(None) == first_labels(0), "no seed: the setup's own"


def test_updates_per_batch_are_counted_between_the_first_and_last_evaluation():
    phase = allreduce.Phase(batch_size=10)
    for step, updates in ((20, 30), (40, 40), (60, 50)):  # 20 updates of warm-up before the first interval
        phase.record(step, step / 10, evaluation={"accuracy": 0.5, "updates": updates})
    assert phase.updates_per_batch == 0.5


def test_the_progress_shown_is_the_last_whole_count_in_the_workers_log(tmp_path):
    log = tmp_path / "worker-0.log"
    assert allreduce._samples_done(log) == 0, "no log yet: nothing trained"
    log.write_text("samples done: 1280\nsome TensorFlow line\nsamples done:")  # the count not written yet
    assert allreduce._samples_done(log) == 1280
    log.write_text("samples done: 1280\nsamples done: 2560\n")
    assert allreduce._samples_done(log) == 2560


@pytest.mark.cluster
def test_a_failing_worker_stops_them_all_with_its_log(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_MNIST_SOURCE", "no-such-source")  # each worker fails after starting TensorFlow
    setup = allreduce.Setup(intervals=1, batches_per_interval=20)
    with pytest.raises(allreduce.AllReduceError, match=r"exited with code 1(.|\n)*unknown MNIST source"):
        allreduce.run_all_reduce(setup, timeout=120, log_dir=tmp_path)
    assert processes_running("labkit.allreduce") == []


@pytest.mark.cluster
def test_a_failure_alongside_the_workers_stops_them(tmp_path):
    def alongside(turns):
        raise KeyboardInterrupt  # as a learner's Ctrl-C in the kernel's own training would

    with pytest.raises(KeyboardInterrupt):
        allreduce.run_all_reduce(allreduce.Setup(intervals=1, batches_per_interval=20), timeout=60, log_dir=tmp_path,
                                 alongside=alongside)
    assert processes_running("labkit.allreduce") == []


def marked_worker(setups, progress):
    """The kit's worker program, its reports marked: run_all_reduce ships this source to the workers."""
    return [report | {"rss_bytes": -1} for report in all_reduce_worker(setups, progress)]  # noqa: F821 (the worker's name)


def samples_trained(log_dir):
    return allreduce._samples_done(log_dir / "worker-0.log")


@pytest.mark.cluster
def test_two_worker_processes_run_the_program_they_are_given_in_lockstep_one_phase_per_turn(tmp_path):
    setup = allreduce.Setup(intervals=3, batches_per_interval=40, steps_per_closure=10, seed=1, seeds=2)
    seen = {}

    def alongside(turns):  # the first seed in a turn of its own; the second once the turns are over
        turns.until_waiting()
        cpu = [processes.cpu_seconds(pid) for pid in turns.pids]
        time.sleep(1.0)
        seen["idle cpu"] = max(processes.cpu_seconds(pid) - before for pid, before in zip(turns.pids, cpu))
        seen["before"] = samples_trained(tmp_path)
        turns.take()
        seen["after the turn"] = samples_trained(tmp_path)
        time.sleep(1.0)
        seen["a second later"] = samples_trained(tmp_path)

    [run] = allreduce.run_all_reduce(setup, program=marked_worker, timeout=300, log_dir=tmp_path, alongside=alongside)
    assert seen["before"] == 0 and seen["idle cpu"] < 0.2, "waiting for their first turn, the workers trained nothing"
    assert seen["after the turn"] == seen["a second later"] == 120 * 64, "one turn: the first seed's 120 batches"
    assert set(run) >= {"seed 1", "seed 2"}, "the second seed trained once the turns were over"
    assert run["rss_bytes"] == [-1, -1], "each worker ran the program it was sent"
    phase = run["seed 1"]
    assert phase.step == [40, 80, 120], "each interval: 40 batches, summed over both workers"
    assert phase.batches == 120, "the batches each worker's meter counted add up to all 120"
    assert phase.cpu_seconds["workers"] > 0
    assert phase.updates_per_batch == 0.5, "one synchronous update per call of 2 workers' batches"
    assert len(set(run["held_bytes"])) == 1, "every worker holds a whole copy of the model and optimizer"
    assert len(set(run["weights_digest"])) == 1, "and ends with the same weights, bit for bit"
    assert phase.evaluation["accuracy"][-1] > 0.75
    assert phase.loss[-1] < phase.loss[0]
    assert processes_running("labkit.allreduce") == []
