"""labkit.allreduce: a plan refuses bad settings clearly; a failing all-reduce worker leaves no process behind.

The successful run (both strategies, both models) is notebook 10's smoke copy.
"""
import pytest

from labkit import allreduce
from support import processes_running


@pytest.mark.parametrize("settings, message", [
    ({"model": "resnet"}, "unknown model 'resnet'; use one of mlp, embedding"),
    ({"num_workers": 0}, "num_workers must be a whole number >= 1"),
    ({"batches_per_interval": 30}, r"multiple of steps_per_closure x num_workers \(20\)"),
    ({"slow_worker": 2}, r"slow_worker 2 is not a worker index \(0 to 1\)"),
])
def test_a_bad_plan_says_what_to_change(settings, message):
    with pytest.raises(ValueError, match=message):
        allreduce.Plan(**settings)


def test_a_plan_has_the_slowed_phase_only_when_asked():
    assert [name for name, _, _ in allreduce.Plan().phases] == ["even"]
    assert allreduce.Plan(slow_worker=1, slow_ms=50, slow_intervals=2).phases[-1] == ("slowed", 2, 1)


def test_time_to_accuracy_is_the_first_evaluation_at_the_target():
    phase = allreduce.Phase(batch_size=10)
    for step, seconds, accuracy in ((10, 1.0, 0.5), (20, 2.0, 0.9), (30, 3.0, 0.8)):
        phase.record(step, seconds, evaluation={"accuracy": accuracy})
    assert phase.first_reaching(0.85, "seconds") == 2.0
    assert phase.first_reaching(0.85) == 20
    assert phase.first_reaching(0.95, "seconds") is None
    assert phase.samples == [100, 200, 300]
    assert phase.samples_per_second == 100


@pytest.mark.cluster
def test_a_failing_worker_stops_them_all_with_its_log(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_MNIST_SOURCE", "no-such-source")  # each worker fails after starting TensorFlow
    plan = allreduce.Plan(intervals=1, batches_per_interval=20)
    with pytest.raises(allreduce.AllReduceError, match=r"exited with code 1(.|\n)*unknown MNIST source"):
        allreduce.run_all_reduce(plan, timeout=120, log_dir=tmp_path)
    assert processes_running("labkit.allreduce") == []
