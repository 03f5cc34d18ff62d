"""Every check of labkit.checks.faults rejects a wrong result (and accepts the right one).

Real objects throughout: real processes, checkpoints written by TensorFlow, matplotlib axes; only the
numbers fed in are chosen to be wrong.
"""
import types

import pytest

from labkit import checks, faults, recovery
from labkit.cluster import Task

tf = pytest.importorskip("tensorflow")


def saved_steps(directory, steps):
    """Real checkpoints of an optimizer whose step counter is at each of ``steps``."""
    optimizer = tf.keras.optimizers.legacy.Adam()
    checkpoint = tf.train.Checkpoint(optimizer=optimizer)
    manager = tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=5)
    for step in steps:
        optimizer.iterations.assign(step)
        manager.save(checkpoint_number=step)
    return manager


def killed_ps(sleeper, tmp_path, killed_at, counter):
    """A KillAtStep that killed ps:0 at step ``killed_at``: its cluster has one task, ps:0, run by ``sleeper``."""
    task = Task("ps", 0, 2222, tmp_path / "ps-0.log", sleeper)
    failure = faults.KillAtStep(types.SimpleNamespace(task=lambda name: task), "ps:0", counter, killed_at + 10)
    failure.killed_at = killed_at
    return failure


def job_at(step):
    optimizer = tf.keras.optimizers.legacy.Adam()
    optimizer.iterations.assign(step)
    return recovery.TrainingJob(None, None, None, optimizer, None, None, 10, 1)


def report(final_step, steps_scheduled=0, recoveries=(), checkpoint_steps=()):
    recovered = recovery.RecoveryReport(timeline=recovery.Timeline(), recoveries=list(recoveries),
                                      steps_scheduled=steps_scheduled)
    for step in sorted({*checkpoint_steps, final_step}):  # a row per checkpoint; the last at the final step
        recovered.record(step, 0.0)
    return recovered


RECOVERY = {"failed_at_step": 250, "resumed_from_step": 200, "steps_lost": 50}


def test_ex3_the_latest_checkpoint_must_be_the_last_one_due(tmp_path):
    saved_steps(tmp_path / "right", [100, 200])
    checks.checkpoint_saved(str(tmp_path / "right"), 250, 100)
    saved_steps(tmp_path / "at-the-end", [100, 200, 250])
    with pytest.raises(AssertionError, match="should hold step 200"):
        checks.checkpoint_saved(str(tmp_path / "at-the-end"), 250, 100)
    with pytest.raises(AssertionError, match="no checkpoint"):
        checks.checkpoint_saved(str(tmp_path / "none"), 250, 100)


@pytest.mark.parametrize("restored, message", [
    (0, "starts at step 0, but the checkpoint of step 200"),
    (400, "at step 400, but the last checkpoint before the failure"),
])
def test_ex3_recovery_is_read_from_the_restored_job(sleeper, tmp_path, restored, message):
    old_job = job_at(250)
    failure = killed_ps(sleeper, tmp_path, 250, old_job.optimizer.iterations)
    assert checks.recovered(job_at(200), failure, 100) == 200
    with pytest.raises(checks.CheckFailed, match=message):
        checks.recovered(job_at(restored), failure, 100)
    with pytest.raises(checks.CheckFailed, match="still the job whose parameter server died"):
        checks.recovered(old_job, failure, 100)
    failure.killed_at = None
    with pytest.raises(checks.CheckFailed, match="never killed"):
        checks.recovered(job_at(200), failure, 100)


def test_ex3_a_dead_ps_must_be_restarted(sleeper, tmp_path):
    failure = killed_ps(sleeper, tmp_path, 250, job_at(250).optimizer.iterations)
    sleeper.kill()
    sleeper.wait()
    with pytest.raises(checks.CheckFailed, match="ps:0 is still dead"):
        checks.recovered(job_at(200), failure, 100)


def test_ex3_training_must_reach_num_steps():
    optimizer = tf.keras.optimizers.legacy.Adam()
    optimizer.iterations.assign(150)
    job = recovery.TrainingJob(None, None, None, optimizer, None, None, 10, 1)
    with pytest.raises(AssertionError, match="training ended at step 150, not 200"):
        checks.trained_to(job, 200, data=None, target_accuracy=0.9)


@pytest.mark.parametrize("wrong, message", [
    (report(600, 600, recoveries=[{}]), "needs none"),
    (report(590, 590), "before 600"),
    (report(600, 610), "only 600 ran"),
])
def test_07_a_worker_failure_must_lose_no_step(wrong, message):
    checks.at_least_once(report(606, 600), 600)
    with pytest.raises(AssertionError, match=message):
        checks.at_least_once(wrong, 600)


def test_07_accuracy_and_restarted_worker_checks():
    checks.close_accuracy(0.90, 0.91, 0.03)
    with pytest.raises(AssertionError, match="more than 0.03 apart"):
        checks.close_accuracy(0.80, 0.91, 0.03)
    checks.worked_after_restart({"worker:0": 9, "worker:1": 3}, "worker:1")
    with pytest.raises(AssertionError, match="ran no closure after its restart, while the others ran 12"):
        checks.worked_after_restart({"worker:0": 12, "worker:1": 0}, "worker:1")


@pytest.mark.parametrize("wrong, message", [
    (report(400, recoveries=[RECOVERY, dict(RECOVERY, failed_at_step=200, steps_lost=0)],
            checkpoint_steps=[100, 200, 300, 400]), "gave 2 recoveries"),
    (report(400, recoveries=[dict(RECOVERY, resumed_from_step=100, steps_lost=150)],
            checkpoint_steps=[100, 200, 300, 400]), "last checkpoint before the failure"),
    (report(400, recoveries=[dict(RECOVERY, steps_lost=250)], checkpoint_steps=[100, 200, 300, 400]), "250"),
    (report(300, recoveries=[RECOVERY], checkpoint_steps=[100, 200, 300]), "before 400"),
])
def test_07_one_ps_failure_must_give_one_recovery_from_the_checkpoint_before_it(wrong, message):
    checks.one_recovery_per_failure(report(400, recoveries=[RECOVERY], checkpoint_steps=[100, 200, 300, 400]), 1, 400)
    with pytest.raises(AssertionError, match=message):
        checks.one_recovery_per_failure(wrong, 1, 400)


def test_07_a_failure_at_a_checkpoints_step_resumes_from_the_one_before_or_from_that_one():
    # The kill landed once every closure of the interval had run: the save of step 300 never happened,
    # and the run saved step 300 again after the recovery.
    failed_at_300 = {"failed_at_step": 300, "resumed_from_step": 200, "steps_lost": 100}
    checks.one_recovery_per_failure(report(400, recoveries=[failed_at_300], checkpoint_steps=[100, 200, 300, 400]), 1, 400)
    saved_first = {"failed_at_step": 300, "resumed_from_step": 300, "steps_lost": 0}
    checks.one_recovery_per_failure(report(400, recoveries=[saved_first], checkpoint_steps=[100, 200, 300, 400]), 1, 400)
    with pytest.raises(AssertionError, match="last checkpoint before the failure at step 300 was at step 200"):
        checks.one_recovery_per_failure(report(400, recoveries=[dict(failed_at_300, resumed_from_step=100, steps_lost=200)],
                                               checkpoint_steps=[100, 200, 300, 400]), 1, 400)


def test_07_latest_checkpoint_must_be_a_completed_one(tmp_path):
    manager = saved_steps(tmp_path, [100, 200])
    checks.latest_checkpoint_complete(manager.latest_checkpoint, [100, 200])
    with pytest.raises(AssertionError, match="points to step 200, whose write did not finish"):
        checks.latest_checkpoint_complete(manager.latest_checkpoint, [100])
    with pytest.raises(AssertionError, match="no checkpoint at all"):
        checks.latest_checkpoint_complete(None, [100])


@pytest.mark.parametrize("lines, message", [
    (["   1.0 s  step   100  resumed from checkpoint at step 100", "finished at step 600 with test accuracy 0.9"],
     "before the checkpoint at step 300"),
    (["   1.0 s  step     0  started", "finished at step 600 with test accuracy 0.9"], "printed 0 'resumed' lines"),
    (["   1.0 s  step   300  resumed from checkpoint at step 300", "finished at step 500 with test accuracy 0.9"],
     "did not finish at step 600"),
])
def test_07_a_restarted_coordinator_must_resume_and_finish(lines, message):
    checks.coordinator_resumed(["   1.0 s  step   300  resumed from checkpoint at step 300",
                                "finished at step 600 with test accuracy 0.9"], 300, 600)
    with pytest.raises(AssertionError, match=message):
        checks.coordinator_resumed(lines, 300, 600)


@pytest.mark.parametrize("lines, began_with", [(["epoch 1 started", "epoch 1 finished, loss 0.9"], "epoch 1,"),
                                               (["loading MNIST", "finished with test accuracy 0.9"], "epoch none,")])
def test_07_a_restarted_fit_must_skip_the_finished_epochs(lines, began_with):
    checks.fit_skipped_epochs(["loading MNIST", "epoch 3 started", "epoch 3 finished, loss 0.5", "epoch 4 started",
                               "finished with test accuracy 0.9"], 2)
    with pytest.raises(AssertionError, match=f"began with {began_with} not epoch 3: it should skip the 2 finished"):
        checks.fit_skipped_epochs(lines, 2)


@pytest.mark.parametrize("killed_at", [None, 150, 170])
def test_07_a_kill_must_come_while_training_runs(killed_at):
    with pytest.raises(checks.CheckFailed, match=f"the kill came at step {killed_at} of 150: not during training"):
        checks.killed_during(killed_at, 150)
    checks.killed_during(60, 150)
