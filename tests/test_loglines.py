"""The lines labkit's programs print for other code to read are parsed back as written."""
import math

from labkit.runtime import loglines


def test_timeline_lines_are_found_by_their_event():
    text = "\n".join([loglines.timeline_line(1.0, 0, "started"),
                      loglines.timeline_line(2.5, 50, loglines.CHECKPOINT_SAVED),
                      loglines.timeline_line(4.0, 100, loglines.CHECKPOINT_SAVED),
                      loglines.timeline_line(4.1, 100, loglines.resumed_line(100))])
    assert loglines.steps_with(loglines.CHECKPOINT_SAVED, text) == [50, 100]
    assert loglines.seconds_with(loglines.CHECKPOINT_SAVED, text) == [2.5, 4.0]
    assert loglines.timeline_event(100, loglines.CHECKPOINT_SAVED) in text
    assert [loglines.resumed_step(line) for line in text.splitlines()] == [None, None, None, 100]


def test_the_finished_line_gives_back_its_step_and_accuracy():
    assert loglines.finished("x\n" + loglines.finished_line(600, 0.91234) + "\n") == (600, 0.9123)
    step, accuracy = loglines.finished(loglines.finished_line(10, float("nan")))
    assert step == 10 and math.isnan(accuracy)
    assert loglines.finished("training finished") is None


def test_the_coordinators_shard_line_is_read_back():
    text = "\n".join(["loading MNIST", loglines.shards_line(2, "/data/0a1b-2-shards"), loglines.finished_line(300, 0.9)])
    assert loglines.shard_count(text) == 2
    assert loglines.shard_count(loglines.finished_line(300, 0.9)) is None  # arrays shipped: no shard line


def test_the_fit_routes_epoch_lines_are_found_by_their_event():
    lines = ["loading MNIST", loglines.epoch_started_line(3), loglines.epoch_finished_line(3, 0.51234),
             loglines.epoch_started_line(4), loglines.fit_finished_line(0.9)]
    assert loglines.epochs_with(loglines.EPOCH_STARTED, lines) == [3, 4]
    assert loglines.epochs_with(loglines.EPOCH_FINISHED, lines) == [3]
    assert loglines.epoch_event(3, loglines.EPOCH_FINISHED) in lines[2]
    assert loglines.FIT_FINISHED in lines[-1] and loglines.FINISHED not in lines[-1]
