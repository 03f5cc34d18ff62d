"""Timed intervals: wall time, CPU seconds per task and bytes through the parameter servers.

Each interval is timed by ``Meter``; ``run_fit`` and ``run_custom`` run one warm-up interval
and then the timed ones, with ``model.fit`` or with labkit.train's packed closures.
"""
import time

from labkit import traffic
from labkit.runtime.processes import cpu_seconds


class Meter:
    """Wall time, CPU seconds of each task and bytes through the parameter servers, per interval."""

    def __init__(self, pids, ps_pids=()):
        self.pids = pids  # task name -> process id
        self.ps_pids = list(ps_pids) if traffic.available() else []
        self.seconds, self.cpu_seconds = [], dict.fromkeys(pids, 0.0)
        self.bytes = traffic.Traffic(0, 0) if self.ps_pids else None

    def _counters(self):
        cpu = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        return cpu, traffic.process_traffic(self.ps_pids) if self.ps_pids else None

    def begin(self):
        self._before = self._counters()
        self._began = time.perf_counter()  # after reading the counters: reading them is not timed

    def end(self):
        ended = time.perf_counter()  # before reading the counters, for the same reason
        (cpu_before, bytes_before), (cpu_after, bytes_after) = self._before, self._counters()
        self.seconds.append(ended - self._began)
        for name in self.pids:
            self.cpu_seconds[name] += cpu_after[name] - cpu_before[name]
        if self.ps_pids:
            self.bytes = self.bytes + (bytes_after - bytes_before)


def _interval_callback(meter, evaluate, accuracies):
    """A Keras callback: epoch 0 is the warm-up; every later epoch is one timed interval."""
    import tensorflow as tf

    class Intervals(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch:
                meter.begin()

        def on_epoch_end(self, epoch, logs=None):
            if epoch:
                meter.end()
            accuracies.append(evaluate())
    return Intervals()


def run_fit(work, meter, steps, repeats, dataset):
    """Warm-up epoch + ``repeats`` timed epochs of ``steps`` steps with model.fit; test accuracy after each."""
    accuracies = []
    work.model.fit(dataset, epochs=repeats + 1, steps_per_epoch=steps, verbose=0,
                   callbacks=[_interval_callback(meter, work.evaluate, accuracies)])
    return accuracies


def run_custom(work, meter, steps, repeats, steps_per_closure, strategy, coordinator):
    """The same with labkit.train's packed closures: schedule steps / steps_per_closure closures, join, evaluate."""
    from labkit import models, train

    batches = train.per_worker_iterator(coordinator, work.dataset_fn)
    train_steps = train.make_train_steps(strategy, work.model, work.model.optimizer, models.mean_cross_entropy,
                                         steps_per_closure, work.metrics)
    accuracies = []
    for interval in range(repeats + 1):
        if interval:
            meter.begin()
        for _ in range(steps // steps_per_closure):
            coordinator.schedule(train_steps, args=(batches,))
        coordinator.join()
        if interval:
            meter.end()
        accuracies.append(work.evaluate())
    return accuracies
