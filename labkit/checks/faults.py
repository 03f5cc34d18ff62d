"""Checks of notebook 07 and exercise 3 (fault tolerance)."""
import tensorflow as tf

from labkit.checks.core import CheckFailed, learned, require
from labkit.runtime import loglines


def checkpoint_saved(checkpoint_dir, step, checkpoint_every):
    """The latest checkpoint in ``checkpoint_dir`` is the last one due at or before ``step``."""
    require(step is not None, "the parameter server was never killed: train_until must train past kill_step.")
    due = step // checkpoint_every * checkpoint_every
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    require(latest, f"no checkpoint in {checkpoint_dir}: did train_until call manager.save() every "
                    "checkpoint_every steps?")
    saved = _checkpoint_step(latest)
    require(saved is not None, "the checkpoint has no optimizer step counter: checkpoint the job's model "
                               "and optimizer, tf.train.Checkpoint(model=..., optimizer=...).")
    require(saved == due, f"training reached step {step} and the latest checkpoint holds step {saved}; with "
                          f"checkpoint_every = {checkpoint_every} it should hold step {due}: save each time the "
                          f"step reaches a multiple of checkpoint_every, and only then.")


def _checkpoint_step(path):
    """The optimizer step counter stored in the checkpoint at ``path``, or None if it has none."""
    reader = tf.train.load_checkpoint(path)
    names = [name for name in reader.get_variable_to_shape_map() if name.startswith("optimizer/iter/")]
    return int(reader.get_tensor(names[0])) if names else None


def recovered(job, failure, checkpoint_every):
    """After the parameter server died under training (``failure``: a ``faults.KillAtStep``): it serves
    again, ``job`` is a new job, and its step counter, read from the restored variables on the new
    parameter server, is the last checkpoint before the failure. Returns that step."""
    require(failure.killed_at is not None, "the parameter server was never killed: train with train_until "
                                           "inside the `with` block, up to num_steps.")
    require(failure.cluster.task(failure.task).alive(),
            f"{failure.task} is still dead: restart it on its port before building the new job.")
    require(not failure.watched(job.optimizer.iterations),
            "job is still the job whose parameter server died: its strategy, coordinator and variables "
            "belong to the dead process. Build a new job with make_job() after the restart.")
    try:
        restored = int(job.optimizer.iterations.numpy())
    except tf.errors.OpError as error:
        raise CheckFailed(f"the new job's step counter cannot be read from the parameter server "
                          f"({type(error).__name__}): build the job after restarting {failure.task}.") from None
    due = failure.killed_at // checkpoint_every * checkpoint_every
    require(restored != 0 or due == 0,
            f"the new job starts at step 0, but the checkpoint of step {due} was saved before the failure: "
            "restore your latest checkpoint into the new job.")
    require(restored == due, f"the new job is at step {restored}, but the last checkpoint before the failure "
                             f"(at step {failure.killed_at}) holds step {due}: restore the latest checkpoint, "
                             "and only that: the next cell trains on.")
    return restored


def trained_to(job, num_steps, data, target_accuracy):
    """The job's optimizer reached ``num_steps`` and the model learned; returns the test accuracy."""
    final = int(job.optimizer.iterations.numpy())
    require(final == num_steps, f"training ended at step {final}, not {num_steps}: train until num_steps.")
    return learned(job.model, data, target_accuracy)


def at_least_once(report, num_steps):
    """A run with worker failures only: no recovery was needed, and every scheduled step ran at least once."""
    require(not report.recoveries, f"a worker failure needed {len(report.recoveries)} recoveries; it needs none.")
    require(report.final_step >= num_steps, f"training stopped at step {report.final_step}, before {num_steps}.")
    require(report.final_step >= report.steps_scheduled,
        f"{report.steps_scheduled} steps were scheduled but only {report.final_step} ran: "
        "a worker failure lost steps, against at-least-once execution.")


def worked_after_restart(closures_since_restart, task):
    """The restarted ``task`` ran closures again: ``closures_since_restart`` ("worker:i" -> closures run
    since the coordinator reconnected ``task``) gives it at least one."""
    require(closures_since_restart[task] >= 1,
        f"{task} ran no closure after its restart, while the others ran "
        f"{sum(closures_since_restart.values())}: it was not given any work again.")


def one_recovery_per_failure(report, failures, num_steps):
    """``failures`` PS failures gave exactly that many recoveries, each from the checkpoint before it."""
    require(len(report.recoveries) == failures,
        f"{failures} parameter-server failure(s) gave {len(report.recoveries)} recoveries: "
        f"{report.recoveries}.")
    for recovery in report.recoveries:
        failed_at, resumed = recovery["failed_at_step"], recovery["resumed_from_step"]
        before = max([0] + [step for step in report.step if step < failed_at])
        # A checkpoint at the very step of the failure was saved either just before it or after the
        # recovery (the rows do not say which): resuming from it is right only in the first case.
        if resumed == failed_at and failed_at in report.step:
            before = failed_at
        require(resumed == before,
            f"resumed from step {resumed}, but the last checkpoint before the failure at step {failed_at} "
            f"was at step {before}.")
        require(recovery["steps_lost"] == failed_at - before, recovery)
    require(report.final_step >= num_steps, f"training stopped at step {report.final_step}, before {num_steps}.")


def latest_checkpoint_complete(latest, completed_steps):
    """``tf.train.latest_checkpoint`` names a checkpoint whose files were all written."""
    require(latest is not None, "no checkpoint at all: the earlier, completed ones should still be there.")
    step = int(latest.rpartition("-")[2])
    require(step in completed_steps, f"latest_checkpoint points to step {step}, whose write did not "
                                     f"finish; the completed checkpoints are at steps {completed_steps}.")
    require(tf.train.load_checkpoint(latest) is not None, f"the checkpoint at step {step} cannot be read back.")


def coordinator_resumed(lines, checkpoint_step, num_steps):
    """A restarted coordinator's output: it resumed from ``checkpoint_step`` or later and finished."""
    resumed = [loglines.resumed_step(line) for line in lines if loglines.RESUMED in line]
    require(len(resumed) == 1, f"the restarted coordinator printed {len(resumed)} 'resumed' lines: {lines}")
    step = resumed[0]
    require(step >= checkpoint_step, f"the restarted coordinator resumed at step {step}, before the "
                                     f"checkpoint at step {checkpoint_step} that the first one had saved.")
    finished = loglines.finished(lines[-1])
    require(finished and finished[0] == num_steps, f"it did not finish at step {num_steps}: {lines[-1]}")


def fit_skipped_epochs(lines, finished_epochs):
    """A restarted ``model.fit`` with BackupAndRestore (its program's output ``lines``) starts after the epochs
    already finished."""
    started = loglines.epochs_with(loglines.EPOCH_STARTED, lines)
    require(started and started[0] == finished_epochs + 1,
        f"the restarted fit began with epoch {started[0] if started else 'none'}, not epoch {finished_epochs + 1}: "
        f"it should skip the {finished_epochs} finished epochs.")


def killed_during(killed_at, total_steps):
    """An injected kill came while training ran: at a step read before the last (``killed_at`` from a ``KillAtStep``)."""
    require(killed_at is not None and killed_at < total_steps,
        f"the kill came at step {killed_at} of {total_steps}: not during training. Lower the kill step below "
        f"{total_steps}, so that the failure happens while the steps run.")
