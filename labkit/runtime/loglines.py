"""The lines labkit's programs print that other code reads: each is written and parsed here, never retyped.

- ``SERVING``: ``labkit.runtime.server`` prints it once its port is open;
- the recovery driver's timeline (``labkit.faults``): ``timeline_line``, its events ``CHECKPOINT_SAVED``
  and ``resumed_line``, read back with ``steps_with``, ``seconds_with`` and ``resumed_step``;
- the coordinator program's last line, ``finished_line``, read back with ``finished``, and its line
  on the training shards it wrote or found (``--data-dir``), ``shards_line``, read back with ``shard_count``;
- the coordinator program's ``model.fit`` route (``--loop fit``): ``epoch_started_line`` and
  ``epoch_finished_line`` per epoch (``epoch_event``, read back with ``epochs_with``), and its last line,
  ``fit_finished_line``;
- the evaluator's line per checkpoint, ``evaluated_line``.
"""
import re

SERVING = "serving at"
CHECKPOINT_SAVED = "checkpoint saved"
RESUMED = "resumed from checkpoint at step"
FINISHED = "finished at step"
EVALUATED = "checkpoint at step"
SHARDS = "training data:"
EPOCH_STARTED, EPOCH_FINISHED = "started", "finished"
FIT_FINISHED = "finished with test accuracy"


def timeline_line(seconds, step, event):
    return f"{seconds:7.1f} s  {timeline_event(step, event)}"


def timeline_event(step, event):
    """The part of a timeline line that records ``event`` at ``step``: what a watcher waits for."""
    return f"step {step:>5}  {event}"


def steps_with(event, text):
    """The step of every timeline line in ``text`` that records ``event``."""
    return [int(step) for step in re.findall(rf"step +(\d+)  {re.escape(event)}", text)]


def seconds_with(event, text):
    """The seconds of every timeline line in ``text`` that records ``event``, in the order of ``steps_with``."""
    return [float(seconds) for seconds in re.findall(rf"([0-9.]+) s  step +\d+  {re.escape(event)}", text)]


def resumed_line(step):
    return f"{RESUMED} {step}"


def resumed_step(line):
    """The step a ``resumed_line`` in ``line`` names, or None."""
    found = re.search(rf"{RESUMED} (\d+)", line)
    return int(found.group(1)) if found else None


def finished_line(step, accuracy):
    return f"{FINISHED} {step} with test accuracy {accuracy:.4f}"


def finished(text):
    """(step, test accuracy) from the last ``finished_line`` in ``text``, or None if there is none."""
    found = re.findall(rf"{FINISHED} (\d+) with test accuracy ([0-9.]+|nan)", text)
    return (int(found[-1][0]), float(found[-1][1])) if found else None


def shards_line(count, directory):
    return f"{SHARDS} {count} shard files in {directory}"


def shard_count(text):
    """How many shard files the last ``shards_line`` in ``text`` names, or None if there is none."""
    found = re.findall(rf"{SHARDS} (\d+) shard files in ", text)
    return int(found[-1]) if found else None


def epoch_event(epoch, event):
    """The part of an epoch's line that records ``event`` (``EPOCH_STARTED`` or ``EPOCH_FINISHED``): what a watcher waits for."""
    return f"epoch {epoch} {event}"


def epoch_started_line(epoch):
    return epoch_event(epoch, EPOCH_STARTED)


def epoch_finished_line(epoch, loss):
    return f"{epoch_event(epoch, EPOCH_FINISHED)}, loss {loss:.4f}"


def epochs_with(event, lines):
    """The epoch of every line among ``lines`` that records ``event``, in order."""
    return [int(found.group(1)) for line in lines if (found := re.match(rf"epoch (\d+) {re.escape(event)}\b", line))]


def fit_finished_line(accuracy):
    return f"{FIT_FINISHED} {accuracy:.4f}"


def evaluated_line(step, accuracy):
    return f"{EVALUATED} {step}: test accuracy {accuracy:.4f}"
