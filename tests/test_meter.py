"""The training layer's timing core: Meter and train.timed_intervals, on real processes, no TensorFlow cluster."""
import os
import subprocess
import sys
import types

import pytest

from labkit import meter as meter_module
from labkit import traffic, train
from labkit.allreduce import Phase
from labkit.meter import Meter


@pytest.fixture
def clock(monkeypatch):
    """A clock that only moves when a test moves it (the meter's ``time.perf_counter``)."""
    now = [0.0]
    monkeypatch.setattr(meter_module, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    return now


def test_the_meter_times_the_interval_without_reading_the_counters(clock, monkeypatch):
    """Reading the `ss` counters takes time: it must happen outside the timed interval, at both ends."""
    def read_counters(pids):
        clock[0] += 1.0  # each read of the counters "takes" one second
        return traffic.Traffic(received=100 * clock[0], sent=0)
    monkeypatch.setattr(meter_module.traffic, "available", lambda: True)
    monkeypatch.setattr(meter_module.traffic, "process_traffic", read_counters)
    meter = Meter({"coordinator": os.getpid()}, socket_pids=[os.getpid()])
    meter.begin()
    clock[0] += 0.5  # the training steps
    assert meter.end() == 0.5
    assert meter.seconds == [0.5]
    assert meter.bytes.received == 150, "the bytes of the interval: counters read just before and just after it"


def test_counters_count_inside_the_intervals_only():
    pushed = [0]
    meter = Meter(counters={"pushed": lambda: pushed[0]})
    pushed[0] += 7  # a warm-up, before any interval
    for payload in (10, 20):
        meter.begin()
        pushed[0] += payload
        meter.end()
        pushed[0] += 1000  # between intervals (an evaluation, say)
    assert meter.counts == {"pushed": 30}


# Spends 0.1 s of CPU each time it reads a line, then prints the CPU seconds it has used in all.
BURN_ON_REQUEST = """
import sys, time
for line in sys.stdin:
    began = time.process_time()
    while time.process_time() - began < 0.1:
        pass
    print(time.process_time(), flush=True)
"""


def test_cpu_seconds_are_counted_per_role_over_the_timed_intervals_only(sleeper):
    busy = subprocess.Popen([sys.executable, "-c", BURN_ON_REQUEST], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)

    def burn():
        busy.stdin.write("burn\n")
        busy.stdin.flush()
        return float(busy.stdout.readline())

    try:
        burn()  # before the first interval: not counted
        meter = Meter({"busy": busy.pid, "both": [busy.pid, sleeper.pid], "idle": [sleeper.pid]})
        burned = []
        phase = train.timed_intervals(lambda steps: burned.append(burn()) or [1.0], 40, 20, train.Recording(
            description=None, meter=meter, evaluate=lambda: {"cpu_seconds_so_far": burn()},
            training_log=Phase(batch_size=10)))
    finally:
        busy.stdin.close()
        busy.wait()
    spent = meter.cpu_seconds
    # Two intervals of one burst each; the evaluations' bursts after them are not counted. (The kernel counts
    # CPU time in ticks of 10 ms.)
    assert len(burned) == 2 and spent["busy"] == pytest.approx(0.2, abs=0.04), spent
    assert spent["idle"] == pytest.approx(0.0, abs=0.02), spent
    assert spent["both"] == pytest.approx(spent["busy"] + spent["idle"]), "a role adds up its processes"
    phase.cpu_seconds = meter.cpu_seconds
    per_sample = phase.cpu_seconds_per_sample  # 2 intervals x 20 steps x 10 samples
    assert per_sample["busy"] == pytest.approx(spent["busy"] / 400)
    assert per_sample["total"] == pytest.approx(per_sample["busy"] + per_sample["both"] + per_sample["idle"])


class Remote:
    """A RemoteValue stand-in whose fetch takes a second of the clock."""

    def __init__(self, clock, loss):
        self.clock, self.loss = clock, loss

    def fetch(self):
        self.clock[0] += 1.0
        return self.loss


def test_timed_intervals_time_the_training_only_and_record_a_row_each(clock):
    evaluations = iter([0.5, 0.7, 0.9])

    def train_interval(steps):
        clock[0] += steps / 100  # 100 steps/s
        return [Remote(clock, 2.0), Remote(clock, 4.0)]

    def evaluate():
        clock[0] += 5.0
        return {"accuracy": next(evaluations)}

    seen = []
    training_log = train.timed_intervals(train_interval, 250, 100, train.Recording(
        evaluate=evaluate, description=None, on_progress=lambda progress: seen.append(progress.final_step)))
    assert training_log.step == [100, 200, 250] and seen == [100, 200, 250], "the last interval is the steps left"
    assert training_log.seconds == pytest.approx([1.0, 2.0, 2.5]), "fetching losses and evaluating are not timed"
    assert training_log.steps_per_second == pytest.approx([100.0, 100.0, 100.0])
    assert training_log.loss == [3.0, 3.0, 3.0] and training_log.accuracy == [0.5, 0.7, 0.9]
