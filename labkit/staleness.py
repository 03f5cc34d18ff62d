"""Stale gradients: measure them on the parameter servers and scale updates by them.

A *version counter* on the PS counts applied updates. A worker reads it just before
it reads the parameters; when its gradient is applied, the PS claims the next
version and computes the staleness

    tau = (versions claimed before this update) - (version the worker read)

that is, exactly the number of updates applied in between. Everything happens in
the PS-side part of the step function, per update, not in coordinator Python.

``delay`` adds a gradient delay buffer on the PS: each gradient waits ``delay``
steps before it is applied, so with one worker tau is exactly ``delay``.
"""
import time
from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

from labkit import fit, models, train


class Constant:
    """Plain asynchronous SGD: the same learning rate whatever the staleness."""
    name = "plain async"

    def scale(self, tau):
        return tf.ones_like(tau, tf.float32)


class InverseTau(Constant):
    """Staleness-aware: alpha / max(1, tau) (Zhang, Gupta, Lian, Liu, IJCAI 2016)."""
    name = "α/max(1,τ)"

    def scale(self, tau):
        return 1.0 / tf.maximum(1.0, tf.cast(tau, tf.float32))


class InverseOnePlusTau(Constant):
    """The source tutorial's rule: alpha / (1 + tau)."""
    name = "α/(1+τ)"

    def scale(self, tau):
        return 1.0 / (1.0 + tf.cast(tau, tf.float32))


class Bounded(Constant):
    """Bounded staleness (SSP, Ho et al. 2013): drop an update whose tau exceeds ``bound``."""

    def __init__(self, bound):
        if bound < 0:
            raise ValueError(f"bound must be >= 0 updates, got {bound}")
        self.bound, self.name = bound, f"drop τ>{bound}"

    def scale(self, tau):
        return tf.cast(tau <= self.bound, tf.float32)


class StalenessSGD:
    """SGD on the PS with a version counter, a staleness histogram and a learning-rate rule.

    Create it under ``strategy.scope()``. ``histogram[w, t]`` counts updates from
    worker ``w`` applied with staleness ``t`` (the last bin also counts larger ones);
    ``dropped`` counts updates a rule scaled to zero.
    """

    def __init__(self, variables, rule=Constant(), learning_rate=0.1, delay=0, num_workers=1, max_tau=64):
        if delay < 0:
            raise ValueError(f"delay must be >= 0 steps, got {delay}")
        self.variables, self.rule, self.learning_rate, self.delay = list(variables), rule, learning_rate, delay
        self.version = tf.Variable(0, dtype=tf.int64, trainable=False, name="version")
        self.histogram = tf.Variable(tf.zeros([num_workers, max_tau + 1], tf.int64), trainable=False)
        self.dropped = tf.Variable(0, dtype=tf.int64, trainable=False)
        if delay:
            self.arrivals = tf.Variable(0, dtype=tf.int64, trainable=False)
            self.waiting = [tf.Variable(tf.zeros([delay, *v.shape]), trainable=False) for v in self.variables]
            self.waiting_versions = tf.Variable(tf.zeros([delay], tf.int64), trainable=False)

    def read_version(self):
        """The version a worker reads before it reads the parameters."""
        return self.version.read_value()

    def apply(self, gradients, read_version, worker=0):
        """Apply worker ``worker``'s gradients (through the delay buffer, if any); return tau."""
        if self.delay:
            gradients, read_version, ready = self._through_delay_buffer(gradients, read_version)
        else:
            ready = tf.constant(True)
        claimed = tf.cast(ready, tf.int64)  # the PS hands out versions one at a time
        tau = self.version.assign_add(claimed) - claimed - read_version
        scale = self.rule.scale(tau) * tf.cast(ready, tf.float32)
        self.dropped.assign_add(tf.cast(ready & (scale == 0), tf.int64))
        tau_bin = tf.minimum(tau, self.histogram.shape[1] - 1)
        self.histogram.scatter_nd_add([[tf.cast(worker, tf.int64), tau_bin]], [claimed])
        for variable, gradient in zip(self.variables, gradients):
            variable.assign_sub(self.learning_rate * scale * gradient)
        return tau

    def _through_delay_buffer(self, gradients, read_version):
        """Store this gradient and its version; take out the one stored ``delay`` steps ago."""
        arrival = self.arrivals.assign_add(1) - 1
        slot = arrival % self.delay
        released_version = self.waiting_versions[slot]
        self.waiting_versions.scatter_nd_update([[slot]], [read_version])
        released = []
        for waiting, gradient in zip(self.waiting, gradients):
            released.append(waiting[slot])
            with tf.control_dependencies([released[-1]]):
                waiting.scatter_nd_update([[slot]], [gradient])
        return released, released_version, arrival >= self.delay

    def staleness_counts(self):
        """numpy array [workers, tau]: how many updates each worker applied at each staleness."""
        return self.histogram.numpy()


def make_train_steps(strategy, model, optimizer, steps_per_closure=1):
    """Scheduled function: ``steps_per_closure`` steps, each reading the version before the parameters."""
    def one_step(features, labels):
        read_version = optimizer.read_version()
        with tf.control_dependencies([read_version]):  # parameters are read after the version
            with tf.GradientTape() as tape:
                loss = models.mean_cross_entropy(labels, model(features, training=True))
        worker = tf.distribute.coordinator.experimental_get_current_worker_index()
        optimizer.apply(tape.gradient(loss, optimizer.variables), read_version, worker)
        return loss

    @tf.function
    def train_steps(iterator):
        loss = tf.constant(0.0)
        for _ in tf.range(steps_per_closure):
            features, labels = next(iterator)
            loss = strategy.run(one_step, args=(features, labels))
        return loss

    return train_steps


def slowed(dataset, milliseconds):
    """The dataset with a pause before each element, like a slow disk or network.

    Prefetching is turned off, or the pauses would hide behind the training steps.
    """
    specs = tf.nest.flatten(dataset.element_spec)
    variant = tf.raw_ops.SleepDataset(input_dataset=tf.data.experimental.to_variant(dataset),
                                      sleep_microseconds=int(milliseconds * 1000),
                                      output_types=[spec.dtype for spec in specs],
                                      output_shapes=[spec.shape for spec in specs])
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    options.autotune.enabled = False
    return tf.data.experimental.from_variant(variant, dataset.element_spec).with_options(options)


@dataclass
class Run:
    """One training run: the rule, the injected delay, accuracy over updates, staleness counts."""

    rule: str
    delay: int
    learning_rate: float
    updates: list = field(default_factory=list)      # applied updates at each evaluation
    accuracy: list = field(default_factory=list)     # test accuracy at each evaluation
    counts: np.ndarray = None                        # [workers, tau] histogram
    dropped: int = 0
    seconds: float = 0.0

    @property
    def final_accuracy(self):
        return self.accuracy[-1]

    def updates_to_reach(self, target):
        """Applied updates at the first evaluation with accuracy >= target (None if never)."""
        return next((u for u, a in zip(self.updates, self.accuracy) if a >= target), None)


def train_mnist(strategy, coordinator, data, num_workers, rule=Constant(), learning_rate=0.1, delay=0,
                num_steps=600, evaluate_every=50, steps_per_closure=10, batch_size=64, straggler=None,
                straggler_ms=0, seed=0):
    """Train the MNIST MLP with StalenessSGD on the cluster; evaluate every ``evaluate_every`` steps.

    Worker ``straggler`` (an index) waits ``straggler_ms`` for each batch: a slow input pipeline.
    """
    if num_steps % evaluate_every or evaluate_every % steps_per_closure:
        raise ValueError(f"num_steps ({num_steps}) must be a multiple of evaluate_every ({evaluate_every}), "
                         f"and evaluate_every a multiple of steps_per_closure ({steps_per_closure})")
    tf.keras.utils.set_random_seed(seed)
    with strategy.scope():
        model = models.mnist_mlp()
        optimizer = StalenessSGD(model.trainable_variables, rule, learning_rate, delay, num_workers)

    mnist_batches = train.mnist_dataset_fn(data, batch_size, seed)

    def dataset_fn():
        dataset = mnist_batches()
        worker = tf.distribute.coordinator.experimental_get_current_worker_index()
        return slowed(dataset, straggler_ms) if straggler is not None and worker == straggler else dataset

    batches = train.per_worker_iterator(coordinator, dataset_fn)
    train_steps = make_train_steps(strategy, model, optimizer, steps_per_closure)
    run = Run(rule.name, delay, learning_rate)
    began = time.perf_counter()
    for _ in range(num_steps // evaluate_every):
        for _ in range(evaluate_every // steps_per_closure):
            coordinator.schedule(train_steps, args=(batches,))
        coordinator.join()
        run.updates.append(int(optimizer.version.numpy()))
        run.accuracy.append(fit.accuracy(model, data.x_test, data.y_test))
    run.seconds = time.perf_counter() - began
    run.counts, run.dropped = optimizer.staleness_counts(), int(optimizer.dropped.numpy())
    return run
