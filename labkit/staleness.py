"""Stale gradients: measure them where they happen, and the published ways to live with them.

A *version counter* on the PS counts applied updates. A worker reads it just before it
reads the parameters. When the worker's gradient exists, the PS reads the counter again:

    tau = (updates applied by now) - (version the worker read)

the number of updates that landed in between. The update is applied, and only *after*
its ``assign_sub`` ops does it claim its version (adds one to the counter). A claim
that depends only on the version read runs at the start of the step, before the
gradient exists, and measures tau = 0 whatever happens. An update that a rule drops
claims nothing: the version counts applied updates only.

Ways to inject and to bound staleness, all on the PS:

- ``delay=D``: a buffer holds each gradient back, D updates exactly (one worker: tau = D once
  the first D updates have landed; theirs is 0, 1, ..., D - 1);
  with ``random_delay=True`` each arrival releases a random waiting gradient instead
  (one worker: tau geometric with mean D), since real delays vary.
- ``ssp_bound=s``: stale synchronous parallel (Ho et al., NIPS 2013). Each worker has a
  clock on the PS (its finished steps); a worker more than ``s`` clocks ahead of the
  slowest worker that may still run a step *waits* before its step. Once every step scheduled
  so far has begun (``steps_scheduled``), a worker that is not in a step gets no more, and nobody waits
  for it. The wait polls every ``poll_ms`` and gives up after ``max_wait_ms`` (a timeout, which
  breaks the bound: ``max_lead`` then exceeds it), so a lost worker cannot hang ``join()``.
- rules (``scale(tau)``, ``correct(...)``): plain async, alpha/max(1,tau), alpha/(1+tau),
  a staleness filter that drops updates above a bound, and DC-ASGD with a fixed or an
  adaptive lambda. A rule that keeps state on the PS has ``build(variables)``, called under
  the strategy's scope, and ``restart()``, which sets that state back to its start.

A run whose weights are no longer finite has *diverged*: its accuracy is recorded as NaN
(``argmax`` of NaN logits is class 0, which would read as the share of zeros in the test set).
"""
import math
from dataclasses import dataclass, field, replace

import numpy as np
import tensorflow as tf

from labkit import models, train
from labkit.pipelines import slowed


class Constant:
    """Plain asynchronous SGD: the same learning rate whatever the staleness."""
    name = "plain async"
    needs_read_parameters = False

    def scale(self, tau):
        return tf.ones_like(tau, tf.float32)

    def correct(self, gradient, parameters_now, parameters_read):
        return gradient


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


class StalenessFilter(Constant):
    """Drop an update whose tau exceeds ``max_tau``; apply the others as they are.

    This is not SSP: SSP makes a fast worker wait and drops nothing (``ssp_bound``).
    """

    def __init__(self, max_tau):
        if max_tau < 0:
            raise ValueError(f"max_tau must be >= 0 updates, got {max_tau}")
        self.max_tau, self.name = max_tau, f"drop τ>{max_tau}"

    def scale(self, tau):
        return tf.cast(tau <= self.max_tau, tf.float32)


class DelayCompensated(Constant):
    """DC-ASGD (Zheng et al., ICML 2017): g + λ·g⊙g⊙(w_now − w_read), a cheap Hessian correction, fixed λ."""
    needs_read_parameters = True

    def __init__(self, strength):
        if strength < 0:
            raise ValueError(f"strength (λ) must be >= 0, got {strength}")
        self.strength, self.name = strength, f"DC-ASGD λ={strength:g}"

    def correct(self, gradient, parameters_now, parameters_read):
        return gradient + self.strength * gradient * gradient * (parameters_now - parameters_read)


class AdaptiveDelayCompensated(DelayCompensated):
    """DC-ASGD-a (Zheng et al., ICML 2017): λ_t = λ0 / sqrt(MeanSquare_t), element by element, with
    MeanSquare_t = m·MeanSquare_(t−1) + (1 − m)·g⊙g kept on the PS (the paper's m = 0.95), so that the
    correction λ_t·g⊙g⊙(w_now − w_read) scales like |g|, not g². MeanSquare starts at 0, so it is divided
    by 1 − m^t (as Adam does): else the first λ_t would be λ0/(√(1 − m)·|g|), 4.5 times λ0/|g|."""

    def __init__(self, strength, momentum=0.95, epsilon=1e-7):
        super().__init__(strength)
        self.momentum, self.epsilon, self.name = momentum, epsilon, f"DC-ASGD-a λ0={strength:g}"

    def build(self, variables):
        self.mean_squares = {v.ref(): tf.Variable(tf.zeros(v.shape), trainable=False) for v in variables}
        self.momentum_powers = {v.ref(): tf.Variable(1.0, trainable=False) for v in variables}  # m^t

    def restart(self):
        for mean_square in self.mean_squares.values():
            mean_square.assign(tf.zeros_like(mean_square))
        for momentum_power in self.momentum_powers.values():
            momentum_power.assign(1.0)

    def correct(self, gradient, parameters_now, parameters_read):
        mean_square = self.mean_squares[parameters_now.ref()]
        power = self.momentum_powers[parameters_now.ref()]
        momentum_power = power.assign(power * self.momentum)  # m^t
        updated = mean_square.assign(self.momentum * mean_square + (1 - self.momentum) * gradient * gradient)
        strength = self.strength / tf.sqrt(updated / (1 - momentum_power) + self.epsilon)
        return gradient + strength * gradient * gradient * (parameters_now - parameters_read)


@dataclass(frozen=True)
class Update:
    """How the PS applies each update: the ``rule``, the ``learning_rate``, a ``delay`` injected (in updates;
    ``random_delay``: random with that mean) and SSP's ``ssp_bound`` (None: no SSP), whose wait polls every
    ``poll_ms`` and gives up after ``max_wait_ms``."""

    rule: object = Constant()
    learning_rate: float = 0.1
    delay: int = 0
    random_delay: bool = False
    ssp_bound: int = None
    max_wait_ms: float = 2000
    poll_ms: float = 2

    def __post_init__(self):
        if self.delay < 0:
            raise ValueError(f"delay must be >= 0 steps, got {self.delay}")
        if self.random_delay and not self.delay:
            raise ValueError("random_delay=True needs a mean delay: pass delay=D with D >= 1")
        if self.ssp_bound is not None and self.ssp_bound < 0:
            raise ValueError(f"ssp_bound must be >= 0 clocks (or None for no SSP), got {self.ssp_bound}")


class StalenessSGD:
    """SGD on the PS with a version counter, a staleness histogram, a rule, and optional SSP (``update``).

    Create it under ``strategy.scope()``. ``histogram[w, t]`` counts updates from
    worker ``w`` that reached the PS with staleness ``t`` (the last bin also counts
    larger ones); ``dropped`` counts those a rule scaled to zero. ``steps_scheduled``: how many steps
    the coordinator has scheduled so far, all workers together (SSP: once all have begun, a worker
    that is not in a step gets none of them, and nobody waits for it; None: never).
    """

    def __init__(self, variables, update=Update(), num_workers=1, max_tau=64, seed=0, steps_scheduled=None):
        rule, delay = update.rule, update.delay
        self.variables, self.rule, self.learning_rate = list(variables), rule, update.learning_rate
        self.delay, self.random_delay = delay, update.random_delay
        self.ssp_bound, self.poll_ms = update.ssp_bound, update.poll_ms
        if hasattr(rule, "build"):
            rule.build(self.variables)
        self.max_polls = max(1, round(update.max_wait_ms / update.poll_ms))
        counter = dict(dtype=tf.int64, trainable=False)
        self.version = tf.Variable(0, name="version", **counter)
        self.histogram = tf.Variable(tf.zeros([num_workers, max_tau + 1], tf.int64), trainable=False)
        self.dropped = tf.Variable(0, **counter)
        self.clocks = tf.Variable(tf.zeros([num_workers], tf.int64), trainable=False)  # steps finished
        self.begun = tf.Variable(tf.zeros([num_workers], tf.int64), trainable=False)  # SSP: steps begun
        self.steps_scheduled = tf.Variable(steps_scheduled or tf.int64.max, **counter)
        self.waited = tf.Variable(0.0, dtype=tf.float64, trainable=False)  # SSP: wall seconds waited, all workers
        self.timeouts = tf.Variable(0, **counter)   # SSP: waits that gave up
        self.polls = tf.Variable(0, **counter)      # SSP: reads of the clocks while waiting
        self.max_lead = tf.Variable(0, **counter)   # SSP: most clocks a worker began a step ahead of the slowest
        self.seed = tf.Variable(seed, **counter)    # the random delays' seed
        if delay:
            self.arrivals = tf.Variable(0, **counter)
            self.waiting_versions = tf.Variable(tf.fill([delay], tf.constant(-1, tf.int64)), trainable=False)
            self.waiting = [tf.Variable(tf.zeros([delay, *v.shape]), trainable=False) for v in self.variables]
            self.waiting_read = [tf.Variable(tf.zeros([delay, *v.shape]), trainable=False)
                                 for v in self.variables] if rule.needs_read_parameters else []

    def restart(self, seed):
        """Start again from no updates, as a new optimizer seeded ``seed`` would, keeping the same
        variables: a step function traced for this optimizer runs on without tracing again."""
        for state in (self.version, self.histogram, self.dropped, self.clocks, self.begun, self.waited, self.timeouts,
                      self.polls, self.max_lead):
            state.assign(tf.zeros_like(state))
        self.seed.assign(seed)
        if self.delay:
            self.arrivals.assign(0)
            self.waiting_versions.assign(tf.fill([self.delay], tf.constant(-1, tf.int64)))
            for waiting in self.waiting + self.waiting_read:
                waiting.assign(tf.zeros_like(waiting))
        if hasattr(self.rule, "restart"):
            self.rule.restart()

    def begin_step(self, worker):
        """Wait if SSP says so, then read the version (before the parameters are read)."""
        if self.ssp_bound is None:
            return self.version.read_value()
        with tf.control_dependencies([self._wait_for_slowest(worker)]):
            return self.version.read_value()

    def _wait_for_slowest(self, worker):
        """SSP: poll while this worker is more than ``ssp_bound`` clocks ahead of the slowest that may still step."""
        begun = self.begun.scatter_nd_add([[tf.cast(worker, tf.int64)]], [1])

        def lead():
            may_run = (self.begun > self.clocks) | (tf.reduce_sum(self.begun) < self.steps_scheduled)
            return self.clocks[worker] - tf.reduce_min(tf.where(may_run, self.clocks, self.clocks[worker]))

        def too_far_ahead(polls):
            return (lead() > self.ssp_bound) & (polls < self.max_polls)

        def poll(polls):
            with tf.control_dependencies([pause(self.poll_ms)]):
                return (polls + 1,)

        began = tf.timestamp()
        with tf.control_dependencies([began, begun]):  # the clocks are read before the first poll
            (polls,) = tf.while_loop(too_far_ahead, poll, (tf.identity(tf.constant(0, tf.int64)),))
        with tf.control_dependencies([polls]):  # and again after the last
            waited, lead_now = tf.timestamp() - began, lead()
        return tf.group(self.waited.assign_add(tf.where(polls > 0, waited, tf.zeros_like(waited))),
                        self.timeouts.assign_add(tf.cast(polls >= self.max_polls, tf.int64)),
                        self.polls.assign_add(polls), self.max_lead.assign(tf.maximum(self.max_lead, lead_now)))

    def read_parameters(self):
        """The parameter values this step reads, if the rule needs them later (DC-ASGD); else []."""
        return [tf.identity(v) for v in self.variables] if self.rule.needs_read_parameters else []

    def apply(self, gradients, read_version, worker=0, read_parameters=()):
        """Apply worker ``worker``'s gradients (through the delay buffer, if any); return tau."""
        read_parameters = list(read_parameters) or [None] * len(gradients)
        if self.delay:
            gradients, read_parameters, read_version, ready = self._through_delay_buffer(
                gradients, read_parameters, read_version)
        else:
            ready = tf.constant(True)
        with tf.control_dependencies(gradients):  # the gradient exists: read how many updates landed
            tau = self.version.read_value() - read_version
        scale = self.rule.scale(tau) * tf.cast(ready, tf.float32)
        updates = [variable.assign_sub(self.learning_rate * scale * self.rule.correct(gradient, variable, read))
                   for variable, gradient, read in zip(self.variables, gradients, read_parameters)]
        applied = ready & (scale > 0)
        with tf.control_dependencies(updates):  # the claim: only after the update has landed
            self.version.assign_add(tf.cast(applied, tf.int64))
            self.clocks.scatter_nd_add([[tf.cast(worker, tf.int64)]], [1])
        self.dropped.assign_add(tf.cast(ready & ~applied, tf.int64))
        tau_bin = tf.minimum(tau, self.histogram.shape[1] - 1)
        self.histogram.scatter_nd_add([[tf.cast(worker, tf.int64), tau_bin]], [tf.cast(ready, tf.int64)])
        return tau

    def _through_delay_buffer(self, gradients, read_parameters, read_version):
        """Put this gradient into a slot of the buffer; release the one waiting there (constant: the oldest)."""
        arrival = self.arrivals.assign_add(1) - 1
        if self.random_delay:
            slot = tf.random.stateless_uniform([], tf.stack([self.seed.read_value(), arrival]),
                                               maxval=self.delay, dtype=tf.int64)
        else:
            slot = arrival % self.delay
        released_version = swap(self.waiting_versions, slot, read_version)  # -1: the slot was empty
        released = [swap(waiting, slot, gradient) for waiting, gradient in zip(self.waiting, gradients)]
        released_read = [swap(waiting, slot, read) for waiting, read in zip(self.waiting_read, read_parameters)]
        return released, released_read or [None] * len(gradients), released_version, released_version >= 0

    def staleness_counts(self):
        """numpy array [workers, tau]: how many updates each worker applied at each staleness."""
        return self.histogram.numpy()


def swap(buffer, slot, value):
    """Put ``value`` into ``buffer[slot]`` (a variable on the PS); return what was there. Only that slot is read."""
    released = buffer.sparse_read(slot)
    with tf.control_dependencies([released]):
        buffer.scatter_nd_update([[slot]], [value])
    return released


def pause(milliseconds):
    """Sleep ``milliseconds`` where this op runs (inside a tf.function): one slowed dataset element."""
    one = slowed(tf.data.Dataset.from_tensors(tf.constant(0, tf.int64)), milliseconds)
    return one.reduce(tf.constant(0, tf.int64), lambda total, element: total + element)


def make_versioned_train_steps(strategy, model, optimizer, steps_per_closure=1):
    """Scheduled function: ``steps_per_closure`` steps, each reading the version first.

    The batch is fetched *after* the version read, so a slow input pipeline widens the
    read→update window in which other workers' updates land.
    """
    def one_step(iterator):
        worker = tf.distribute.coordinator.experimental_get_current_worker_index()
        read_version = optimizer.begin_step(worker)
        with tf.control_dependencies([read_version]):  # everything below happens after the read
            read_parameters = optimizer.read_parameters()
            features, labels = next(iterator)
            with tf.GradientTape() as tape:
                loss = models.mean_cross_entropy(labels, model(features, training=True))
        optimizer.apply(tape.gradient(loss, optimizer.variables), read_version, worker, read_parameters)
        return loss

    return train.pack_steps(strategy, one_step, steps_per_closure)


@dataclass(kw_only=True)
class Run(train.TrainingLog):
    """One training run (a TrainingLog: accuracy and applied updates at each evaluation) with the rule,
    the injected delay and the staleness measured."""

    rule: str
    delay: str
    learning_rate: float
    seed: int = 0
    counts: np.ndarray = None                        # [workers, tau] histogram
    dropped: int = 0
    clocks: list = field(default_factory=list)       # steps each worker finished
    waited_seconds: float = 0.0                      # SSP: wall time the workers spent waiting, summed
    timeouts: int = 0                                # SSP: waits that gave up
    polls: int = 0                                   # SSP: reads of the clocks while waiting
    ssp_bound: int = None                            # SSP's bound in clocks (None: no SSP)
    max_lead: int = None                             # SSP: most clocks a worker began a step ahead of the slowest

    @property
    def bound_held(self):
        """SSP: no worker began a step more than ``ssp_bound`` clocks ahead of the slowest that could still run."""
        return self.max_lead <= self.ssp_bound

    @property
    def updates(self):
        """Applied updates at each evaluation (a filter drops some steps' updates)."""
        return self.evaluation["updates"]

    @property
    def taus(self):
        """Staleness of every update, all workers together: counts over tau = 0, 1, 2, ..."""
        return self.counts.sum(axis=0)

    @property
    def mean_tau(self):
        return float(self.taus @ np.arange(len(self.taus)) / max(self.taus.sum(), 1))

    @property
    def max_tau(self):
        return int(self.taus.nonzero()[0].max()) if self.taus.any() else 0

    def tau_quantile(self, q):
        """The smallest tau at or below which a share ``q`` of the updates lie (0.5: the median)."""
        cumulative = np.cumsum(self.taus) / max(self.taus.sum(), 1)
        return int(np.searchsorted(cumulative, q))

    @property
    def diverged(self):
        """Whether the weights stopped being finite (the accuracy recorded is then NaN)."""
        return any(math.isnan(a) for a in self.accuracy)

    @property
    def stale_share(self):
        """Fraction of the updates with tau > 0."""
        return float(self.taus[1:].sum() / max(self.taus.sum(), 1))


def delay_name(delay, random_delay=False):
    if not delay:
        return "none"
    return f"random, configured mean {delay}" if random_delay else f"{delay}"


def run_description(rule_name, delay, seed, ssp_bound=None, slowed=None):
    """A run's progress line: its rule, what else sets it apart (SSP's bound, a slowed worker), delay and seed."""
    bound = None if ssp_bound is None else f"SSP bound {ssp_bound}"
    parts = [rule_name, bound, slowed, f"delay {delay}", f"seed {seed}"]
    return ", ".join(part for part in parts if part)


@dataclass(frozen=True)
class Schedule:
    """How long a run trains and how it is watched: ``num_steps`` in closures of ``steps_per_closure``
    steps of ``batch_size``, evaluated every ``evaluate_every`` steps; with ``curve_test_images=N`` the
    evaluations before the last (the curve) use the test set's first N images, which costs less."""

    num_steps: int = 600
    evaluate_every: int = 50
    steps_per_closure: int = 10
    batch_size: int = 64
    curve_test_images: int = None

    def __post_init__(self):
        if self.num_steps % self.evaluate_every or self.evaluate_every % self.steps_per_closure:
            raise ValueError(f"num_steps ({self.num_steps}) must be a multiple of evaluate_every "
                             f"({self.evaluate_every}), and evaluate_every a multiple of steps_per_closure "
                             f"({self.steps_per_closure})")


@dataclass(frozen=True)
class Batches:
    """Where a run takes its batches from. By default each seed starts a stream of its own
    (``train.mnist_batches`` shuffled by that seed): two runs with the same seed, a rule and its control,
    see the same batches as they start from the same weights, so their accuracies are paired. Worker
    ``slow_worker`` (an index; None: no worker) waits ``slow_ms`` for each batch, inside its read→update window.

    ``continue_on`` makes one stream that the runs continue instead, each taking the batches that follow
    the last run's. It saves starting a stream per run (each worker reads the training set then, inside the
    run's first timed interval): for runs that count τ or time a mechanism, never for runs compared on accuracy.
    ``made_once_per_seed`` keeps each seed's stream to start again from its beginning: paired runs without the
    reading.
    """

    slow_worker: int | None = None
    slow_ms: float = 0
    continued: object = None  # the iterator the runs continue (made by continue_on); None: one stream per seed
    datasets: dict | None = None  # made_once_per_seed: each seed's per-worker dataset, made on first use

    def __post_init__(self):
        if self.slow_ms < 0 or (self.slow_ms and self.slow_worker is None):
            raise ValueError(f"slow_ms={self.slow_ms} with slow_worker={self.slow_worker}: give the index of the "
                             "worker to slow (slow_worker=0) and its pause per batch in ms (>= 0).")

    def continue_on(self, coordinator, data, batch_size=64, seed=0):
        """These batches as one stream, shuffled by ``seed``, that every run given it continues."""
        return replace(self, continued=train.mnist_batches(coordinator, data, batch_size, seed,
                                                           slow_worker=self.slow_worker, slow_ms=self.slow_ms))

    def made_once_per_seed(self):
        """These batches with each seed's stream made once and started again from its beginning for every run with
        that seed (a new iterator over the seed's dataset, ``train.mnist_datasets``): the runs are paired as with
        a stream each, and the workers read the training set once per seed, not once per run (a second or more
        with full MNIST). Each worker keeps a copy of the training set per seed while these batches live: free
        them (``del``) before their cluster stops."""
        return replace(self, datasets={})

    def stream(self, coordinator, data, batch_size, seed):
        """The iterator that the run seeded ``seed`` takes its batches from."""
        if self.continued is not None:
            return self.continued
        kept = {} if self.datasets is None else self.datasets  # made_once_per_seed keeps them; else made anew
        if (batch_size, seed) not in kept:
            kept[batch_size, seed] = train.mnist_datasets(coordinator, data, batch_size, seed,
                                                          slow_worker=self.slow_worker, slow_ms=self.slow_ms)
        return iter(kept[batch_size, seed])

    @property
    def slowed(self):
        """What the progress lines say of the slowed worker, or None."""
        return None if self.slow_worker is None else f"worker {self.slow_worker} slowed {self.slow_ms:g} ms per batch"


@dataclass(frozen=True)
class Definitions:
    """The PS update and the worker's step that a run trains with: labkit's ``StalenessSGD`` and
    ``make_versioned_train_steps``, or a notebook's own versions of them (a subclass, a function like it)."""

    optimizer_class: type = StalenessSGD
    train_steps: object = make_versioned_train_steps


def train_mnist(strategy, coordinator, data, update=Update(), schedule=Schedule(), seed=0, batches=Batches(),
                definitions=Definitions()):
    """One run of ``train_mnist_over_seeds`` (the same arguments), seeded ``seed``."""
    return train_mnist_over_seeds(strategy, coordinator, data, [seed], update, schedule, batches, definitions)[0]


def train_mnist_over_seeds(strategy, coordinator, data, seeds, update=Update(), schedule=Schedule(), batches=Batches(),
                           definitions=Definitions()):
    """Train the MNIST MLP with StalenessSGD (``update``) on the cluster once per seed, as ``schedule`` says
    (a ``Trainer``, built once, run once per seed).

    A seed sets the initial weights, the random delays and (unless ``batches`` continues one stream) the
    batch stream: the same seeds give two calls paired runs. The last evaluation uses the whole test set.
    ``definitions``: the optimizer class and step function to train with (a notebook's own, say).
    """
    trainer = Trainer(strategy, coordinator, data, update, schedule, definitions)
    return [trainer.run(seed, batches) for seed in seeds]


class Trainer:
    """The MNIST MLP, a StalenessSGD (``update``) and its traced step function on one cluster, built once:
    each ``run`` restarts them (``StalenessSGD.restart``) instead of building and tracing again, which costs
    seconds per run, and trains as ``schedule`` says. Free it (``del``) before its cluster stops."""

    def __init__(self, strategy, coordinator, data, update=Update(), schedule=Schedule(), definitions=Definitions()):
        if update.ssp_bound is not None and schedule.steps_per_closure > 1:
            raise ValueError("SSP waits before each step: with more than 1 step per closure a waiting worker holds "
                             "steps that the slowest may need. Pass steps_per_closure=1 with ssp_bound.")
        self.coordinator, self.data, self.update, self.schedule = coordinator, data, update, schedule
        with strategy.scope():
            self.model = models.mnist_mlp()
            self.optimizer = definitions.optimizer_class(self.model.trainable_variables, update,
                                                         train.worker_count(strategy))
        self.steps = definitions.train_steps(strategy, self.model, self.optimizer, schedule.steps_per_closure)

    def run(self, seed=0, batches=Batches()):
        """One run from the initial weights and optimizer state seeded ``seed``, on its batches (``batches``:
        the seed's own stream, or one the runs continue); a ``Run``."""
        model, optimizer, schedule, update = self.model, self.optimizer, self.schedule, self.update
        models.restart_mnist_mlp(model, seed)
        optimizer.restart(seed)
        stream = batches.stream(self.coordinator, self.data, schedule.batch_size, seed)
        evaluations = iter(range(schedule.num_steps // schedule.evaluate_every, 0, -1))  # left, this one included
        optimizer.steps_scheduled.assign(schedule.evaluate_every)

        def evaluate():
            optimizer.steps_scheduled.assign_add(schedule.evaluate_every)  # the next interval's
            images = None if next(evaluations) == 1 else schedule.curve_test_images
            finite = all(np.isfinite(v.numpy()).all() for v in model.trainable_variables)
            x_test, y_test = self.data.x_test[:images], self.data.y_test[:images]
            accuracy = models.accuracy(model, x_test, y_test) if finite else math.nan
            return {"updates": int(optimizer.version.numpy()), "accuracy": accuracy}

        rule, ssp_bound = update.rule, update.ssp_bound
        run = Run(rule=rule.name, delay=delay_name(update.delay, update.random_delay),
                  learning_rate=update.learning_rate, seed=seed, ssp_bound=ssp_bound)
        description = run_description(rule.name, run.delay, seed, ssp_bound, batches.slowed)
        train.run(self.coordinator, self.steps, stream, schedule.num_steps, schedule.steps_per_closure,
                  log_every_steps=schedule.evaluate_every,
                  recording=train.Recording(evaluate=evaluate, training_log=run, description=description))
        run.counts, run.dropped = optimizer.staleness_counts(), int(optimizer.dropped.numpy())
        run.clocks, run.timeouts = optimizer.clocks.numpy().tolist(), int(optimizer.timeouts.numpy())
        run.waited_seconds, run.polls = float(optimizer.waited.numpy()), int(optimizer.polls.numpy())
        run.max_lead = int(optimizer.max_lead.numpy()) if ssp_bound is not None else None
        return run
