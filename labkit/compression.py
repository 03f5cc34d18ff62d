"""Gradient compression both ways on the wire: what workers push and what they pull.

A compressor turns a tensor into a small *payload* (``compress``) and back (``decompress``).
Only payloads cross the network:

- **pushes**: each worker compresses its update; the PS applies the payload where the
  variable lives (``apply``): a scatter for sparse payloads, a dequantise for codes;
- **pulls** (``CompressedPulls``): each worker keeps its own replica of the parameters (a
  per-worker variable). The PS keeps, per worker, what it has sent that worker so far
  (``seen``) and sends only a compressed ``w_ps − seen``. What a pull leaves out stays in
  that difference and goes out later: error feedback, for free.

Sparse compressors (``Threshold``, ``TopK``, ``RandomK``) send float32 values + int32
positions; ``Int8`` sends int8 codes + a scale; ``QSGD`` (Alistarh et al. 2017) sends
s-level codes packed into the bits they need, with one norm per bucket; ``ScaledSign``
sends 1 bit per value.

``CompressedSGD`` stands where an optimizer goes in ``labkit.train``. Its updates are in
*update units* (learning rate × gradient), so error feedback stays exact when the learning
rate changes. What it does is a ``Push``: error feedback (Seide et al. 2014; Karimireddy et al.
2019), momentum on the PS (the naive way), or DGC (Lin et al. 2018, ``dgc()``): momentum
correction and factor masking on the worker, local gradient clipping, sparsity warm-up.
``train_mnist`` trains the MNIST MLP on a cluster as a ``Setting`` says (a push, a pull, a name).
"""
import math
from dataclasses import dataclass, replace

import numpy as np
import tensorflow as tf

from labkit import models, traffic, train
from labkit.meter import Meter


def payload_bytes(payload):
    """Bytes a payload takes on the wire (tensor contents, without RPC framing)."""
    return sum(int(tf.size(t)) * t.dtype.size for t in payload.values())


def payload_parts(compressor, shapes):
    """Bytes per payload part (e.g. values, positions) for tensors of these shapes, summed."""
    parts = {}
    for shape in shapes:
        payload = compressor.compress(tf.random.stateless_normal(shape, seed=[0, 0]))
        for name, tensor in payload.items():
            parts[name] = parts.get(name, 0) + int(tf.size(tensor)) * tensor.dtype.size
    return parts


def payload_bytes_tensor(payload):
    """``payload_bytes`` as a tensor, computed where it runs (inside a tf.function, on the PS)."""
    return tf.add_n([tf.cast(tf.size(t), tf.int64) * t.dtype.size for t in payload.values()])


class Compressor:
    """No compression: the dense float32 tensor is the payload (4 bytes per value)."""
    name = "none"

    def compress(self, gradient):
        return {"gradient": gradient}

    def decompress(self, payload, shape):
        """The dense tensor the payload stands for (on the PS, on a worker, for residuals)."""
        return tf.reshape(payload["gradient"], shape)

    def apply(self, variable, payload):
        """``variable -= decompress(payload)``, computed on the variable's device."""
        with tf.device(variable.device):
            variable.assign_sub(self.decompress(payload, variable.shape))

    def bytes_per_step(self, shape):
        """Payload bytes for a tensor of this shape (None when it depends on the values)."""
        return 4 * math.prod(shape)

    def __repr__(self):
        return self.name


class _Sparse(Compressor):
    """Send the chosen entries as float32 values + int32 positions in the flat tensor."""

    def select(self, flat, **options):
        raise NotImplementedError

    def compress(self, gradient, **options):
        flat = tf.reshape(gradient, [-1])
        positions = tf.cast(self.select(flat, **options), tf.int32)
        return {"values": tf.gather(flat, positions), "positions": positions}

    def decompress(self, payload, shape):
        size = math.prod(shape)
        dense = tf.scatter_nd(payload["positions"][:, None], payload["values"], [size])
        return tf.reshape(dense, shape)

    def apply(self, variable, payload):
        with tf.device(variable.device):  # the positions become indices on the PS
            indices = tf.transpose(tf.unravel_index(payload["positions"], tf.shape(variable)))
            variable.scatter_nd_sub(indices, payload["values"])


def _share_of_entries(value, name):
    """``value`` if it is a share of a tensor's entries, in (0, 1]; else a ValueError naming ``name``."""
    if not 0 < value <= 1:
        raise ValueError(f"{name} must be in (0, 1], got {value}")
    return value


class Threshold(_Sparse):
    """Keep entries with |g| >= fraction * max|g| (the tutorial's idea, scale-aware)."""

    def __init__(self, fraction=0.1):
        self.fraction, self.name = _share_of_entries(fraction, "fraction"), f"threshold {fraction:g}·max"

    def select(self, flat):
        magnitude = tf.abs(flat)
        return tf.where(magnitude >= self.fraction * tf.reduce_max(magnitude))[:, 0]

    def bytes_per_step(self, shape):
        return None


class TopK(_Sparse):
    """Keep the k = ceil(ratio * n) entries of largest magnitude (``ratio`` may be overridden per call)."""

    def __init__(self, ratio=0.01):
        self.ratio, self.name = _share_of_entries(ratio, "ratio"), f"top-k {ratio:g}"

    def k(self, size):
        return max(1, math.ceil(self.ratio * size))

    def select(self, flat, ratio=None):
        size = flat.shape[0]
        k = self.k(size) if ratio is None else tf.maximum(1, tf.cast(tf.math.ceil(ratio * size), tf.int32))
        return tf.math.top_k(tf.abs(flat), k=k, sorted=False).indices

    def bytes_per_step(self, shape):
        return 8 * self.k(math.prod(shape))


class RandomK(TopK):
    """Keep k random entries; ``unbiased`` scales them by n/k so the expected update is g.

    Use ``unbiased=False`` with error feedback: the n/k-scaled values overshoot, the
    residual absorbs the overshoot and grows until training diverges.
    """

    def __init__(self, ratio=0.01, unbiased=True):
        super().__init__(ratio)
        self.unbiased = unbiased
        self.name = f"random-k {ratio:g}" + (" unbiased" if unbiased else "")

    def select(self, flat):
        noise = tf.random.uniform(flat.shape)
        return tf.math.top_k(noise, k=self.k(flat.shape[0]), sorted=False).indices

    def compress(self, gradient):
        payload = super().compress(gradient)
        if self.unbiased:
            size = math.prod(gradient.shape)
            payload["values"] *= size / self.k(size)
        return payload


class Int8(Compressor):
    """8-bit quantisation: round(g / s) with s = max|g| / 127; sends int8 codes + s."""
    name = "int8"

    def compress(self, gradient):
        scale = tf.maximum(tf.reduce_max(tf.abs(gradient)), 1e-30) / 127.0
        return {"codes": tf.cast(tf.round(gradient / scale), tf.int8), "scale": scale}

    def decompress(self, payload, shape):
        return tf.reshape(tf.cast(payload["codes"], tf.float32) * payload["scale"], shape)

    def bytes_per_step(self, shape):
        return math.prod(shape) + 4


_BIT_WEIGHTS = tf.constant([1, 2, 4, 8, 16, 32, 64, 128], tf.int32)


def pack_bits(codes, bits):
    """Pack int32 codes in [0, 2**bits) into a uint8 stream, ``bits`` bits per code."""
    powers = 2 ** tf.range(bits)
    stream = tf.reshape((codes[:, None] // powers) % 2, [-1])
    stream = tf.pad(stream, [[0, -stream.shape[0] % 8]])
    return tf.cast(tf.reduce_sum(tf.reshape(stream, [-1, 8]) * _BIT_WEIGHTS, axis=1), tf.uint8)


def unpack_bits(packed, bits, count):
    """The ``count`` int32 codes that ``pack_bits(codes, bits)`` packed."""
    stream = tf.bitwise.bitwise_and(tf.cast(packed, tf.int32)[:, None], _BIT_WEIGHTS) > 0
    code_bits = tf.reshape(tf.cast(tf.reshape(stream, [-1])[:count * bits], tf.int32), [count, bits])
    return tf.reduce_sum(code_bits * 2 ** tf.range(bits), axis=1)


class QSGD(Compressor):
    """QSGD (Alistarh et al. 2017): s levels per bucket of d values, unbiased, bit-packed.

    Each bucket sends its norm (float32) and, per value, sign × level with level in 0..s,
    rounded up or down at random so that its expectation is |v|·s/‖bucket‖: the code
    sign·level + s needs ceil(log2(2s + 1)) bits.
    """

    def __init__(self, levels=4, bucket_size=512):
        if not 1 <= levels <= 127:
            raise ValueError(f"levels must be 1..127, got {levels}")
        if bucket_size < 1:
            raise ValueError(f"bucket_size must be at least 1, got {bucket_size}")
        self.levels, self.bucket_size = levels, bucket_size
        self.bits = math.ceil(math.log2(2 * levels + 1))
        self.name = f"qsgd s={levels}"

    def compress(self, gradient):
        flat = tf.reshape(gradient, [-1])
        size = flat.shape[0]
        buckets = tf.reshape(tf.pad(flat, [[0, -size % self.bucket_size]]), [-1, self.bucket_size])
        norms = tf.norm(buckets, axis=1, keepdims=True)
        scaled = tf.abs(buckets) / tf.maximum(norms, 1e-30) * self.levels  # in [0, s]
        lower = tf.floor(scaled)
        level = lower + tf.cast(tf.random.uniform(tf.shape(scaled)) < scaled - lower, tf.float32)
        codes = tf.cast(tf.sign(buckets) * level, tf.int32) + self.levels  # in [0, 2s]
        return {"codes": pack_bits(tf.reshape(codes, [-1])[:size], self.bits), "norms": norms[:, 0]}

    def decompress(self, payload, shape):
        size = math.prod(shape)
        levels = tf.cast(unpack_bits(payload["codes"], self.bits, size) - self.levels, tf.float32)
        buckets = tf.reshape(tf.pad(levels, [[0, -size % self.bucket_size]]), [-1, self.bucket_size])
        values = tf.reshape(buckets * payload["norms"][:, None] / self.levels, [-1])
        return tf.reshape(values[:size], shape)

    def bytes_per_step(self, shape):
        size = math.prod(shape)
        return math.ceil(size * self.bits / 8) + 4 * math.ceil(size / self.bucket_size)

    def variance_bound(self, size):
        """The paper's bound on E‖Q(v) − v‖² / ‖v‖² (Lemma 3.1, per bucket): min(d/s², √d/s)."""
        d = min(self.bucket_size, size)
        return min(d / self.levels ** 2, math.sqrt(d) / self.levels)


class ScaledSign(Compressor):
    """1 bit per value: sign(g) packed 8 per byte, times s = mean|g| (signSGD with a scale)."""
    name = "scaled sign"

    def compress(self, gradient):
        flat = tf.reshape(gradient, [-1])
        return {"signs": pack_bits(tf.cast(flat >= 0, tf.int32), 1), "scale": tf.reduce_mean(tf.abs(flat))}

    def decompress(self, payload, shape):
        signs = tf.where(unpack_bits(payload["signs"], 1, math.prod(shape)) > 0, 1.0, -1.0)
        return tf.reshape(signs * payload["scale"], shape)

    def bytes_per_step(self, shape):
        return math.ceil(math.prod(shape) / 8) + 4


def compress_with_feedback(compressor, update, residual, **options):
    """Error feedback: compress update + residual; what compression dropped is the new residual.

    Keep ``update`` and ``residual`` in the same units, the units applied to the variable
    (learning rate × gradient): then the identity sent + residual = Σ updates holds for
    any learning-rate schedule.
    """
    corrected = update + residual
    payload = compressor.compress(corrected, **options)
    return payload, corrected - compressor.decompress(payload, corrected.shape)


def feedback_books(compressor, gradients, learning_rates):
    """Error feedback's books after these steps: how far what was applied plus what still waits in the
    residual is from the sum of the updates, as a share of that sum. Returns (update units, gradient units):
    the residual kept in update units (lr × g, as ``CompressedSGD`` keeps it), and kept in gradient units,
    multiplied by the rate of the step that finally sends it."""
    residual = gradient_residual = applied = applied_gradient_units = wanted = tf.zeros_like(gradients[0])
    for gradient, rate in zip(gradients, learning_rates):
        payload, residual = compress_with_feedback(compressor, rate * gradient, residual)
        applied += compressor.decompress(payload, gradient.shape)
        payload, gradient_residual = compress_with_feedback(compressor, gradient, gradient_residual)
        applied_gradient_units += rate * compressor.decompress(payload, gradient.shape)
        wanted += rate * gradient
    owed = [applied + residual, applied_gradient_units + learning_rates[-1] * gradient_residual]
    return tuple(float(tf.norm(books - wanted) / tf.norm(wanted)) for books in owed)


def warmup_ratio(step, ratio, warmup_steps):
    """DGC's sparsity warm-up: the kept ratio falls exponentially from 25 % to ``ratio`` over warmup_steps."""
    start = max(0.25, ratio)
    progress = tf.minimum(1.0, tf.cast(step, tf.float32) / warmup_steps)
    return start * (ratio / start) ** progress


@dataclass(frozen=True)
class Push:
    """How each worker makes its update and sends it (``CompressedSGD``).

    ``learning_rate``: a number, or a function of the run's step count. ``error_feedback``: keep what
    compression dropped and add it to the next update. ``momentum`` alone is kept on the PS (the naive
    way); with ``momentum_correction``, on the worker before compression (DGC), where ``factor_masking``
    restarts the velocity of the entries just sent. ``clip_norm``: each worker's gradient clipped by its
    global norm (None: not clipped). ``warmup_steps``: a TopK's ratio ramped from 25 % to its own.
    """

    learning_rate: object = 0.1
    error_feedback: bool = False
    momentum: float = 0.0
    momentum_correction: bool = False
    factor_masking: bool = False
    clip_norm: float | None = None
    warmup_steps: int = 0

    def __post_init__(self):
        if self.momentum_correction and not self.momentum:
            raise ValueError("momentum_correction needs a momentum, e.g. momentum=0.9.")
        if self.factor_masking and not self.momentum_correction:
            raise ValueError("factor_masking restarts the worker's velocity: it needs momentum_correction=True.")


STEP_WINDOW = (1.1, 1.6)  # where rate_matched aims a control's steps: never smaller than the target, not much larger


def rate_matched(setting, target_step, trial, window=STEP_WINDOW, probes=5):
    """``setting`` at a learning rate whose steps move the parameters at least as far as ``target_step`` (a mean
    ``Result.applied_step``), and its run there: (setting, run). A probe lands when its step is within ``window``
    times the target: never smaller (1.1: a margin for the next seeds, whose steps vary), not much larger. Where
    no rate does (the step jumps over the window), the probe whose step was the smallest above it.

    Each probe is ``trial(setting)``, one run that returns a ``Result``. The next rate solves step ∝ rate^p for
    the window's middle, p fitted on the last two probes (1 at first): p is above 1 where training turns unstable
    and below 1 where error feedback's residual carries the steps. Where the step jumps (the onset of
    instability) the fit can overshoot: a rate outside the probes that bracket the window is replaced by their
    midpoint.
    """
    low, high = (target_step * bound for bound in window)
    aim, probed = math.sqrt(low * high), []  # probed: (step, setting, run)
    for _ in range(probes):
        run = trial(setting)
        rate, step = setting.push.learning_rate, run.applied_step
        if low <= step <= high:
            return setting, run
        power = 1.0
        if probed and probed[-1][1].push.learning_rate != rate and probed[-1][0] != step:
            last_step, last_rate = probed[-1][0], probed[-1][1].push.learning_rate
            power = min(3.0, max(0.2, math.log(step / last_step) / math.log(rate / last_rate)))
        probed.append((step, setting, run))
        scaled = rate * (aim / step) ** (1 / power)
        below = [s.push.learning_rate for stepped, s, _ in probed if stepped < low]
        above = [s.push.learning_rate for stepped, s, _ in probed if stepped > high]
        if below and above and not max(below) < scaled < min(above):
            scaled = math.sqrt(max(below) * min(above))
        setting = replace(setting, push=replace(setting.push, learning_rate=scaled))
    larger = [(step, setting, run) for step, setting, run in probed if step > high]
    if not larger:
        raise ValueError(f"{setting.title}: no learning rate in {probes} probes gave steps of at least {low:.3g} "
                         f"(the largest: {max(step for step, _, _ in probed):.3g}): give it more probes or a higher "
                         "rate.")
    _, setting, run = min(larger, key=lambda probe: probe[0])  # the window falls in a jump: the step just over it
    return setting, run


def dgc(learning_rate=0.1, momentum=0.9, clip_norm=5.0, warmup_steps=100):
    """The ``Push`` of Deep Gradient Compression (Lin et al. 2018), for a TopK compressor."""
    return Push(learning_rate, error_feedback=True, momentum=momentum, momentum_correction=True,
                factor_masking=True, clip_norm=clip_norm, warmup_steps=warmup_steps)


class CompressedSGD:
    """SGD whose updates travel compressed, made and sent as ``push`` (a ``Push``) says; use it where an
    optimizer goes.

    Build it under ``strategy.scope()`` after creating the ``ClusterCoordinator``: the worker's
    state (residuals, DGC velocities) is per-worker variables that never cross the network.
    ``steps`` counts the run's steps on the PS (every worker's), so a warm-up follows the run
    whichever worker runs each step; a learning rate that is a function takes that count.
    On the PS, ``pushed_bytes`` adds up the payload bytes that arrived and ``applied_norms`` the
    size (L2 norm) of each step applied to the parameters: how far the steps really moved them.
    """

    def __init__(self, variables, compressor, push=Push()):
        if push.warmup_steps and not isinstance(compressor, TopK):
            raise ValueError(f"warmup_steps ramps a TopK's ratio; {compressor.name} has none. Use TopK or 0.")
        self.compressor, self.push = compressor, push
        self.pushed_bytes = tf.Variable(0, dtype=tf.int64, trainable=False, name="pushed_bytes")
        self.applied_norms = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="applied_norms")
        self.steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="steps")

        def on_each_worker():
            return [tf.Variable(tf.zeros(v.shape), trainable=False, per_worker_variable=True) for v in variables]
        self.residuals = on_each_worker() if push.error_feedback else None
        self.velocities = on_each_worker() if push.momentum_correction else None
        self.ps_velocities = [tf.Variable(tf.zeros(v.shape), trainable=False) for v in variables] \
            if push.momentum and not push.momentum_correction else None

    def apply_gradients(self, gradients_and_variables):
        """On a worker: compress each update there and apply only its payload on the variable's PS."""
        push = self.push
        gradients, variables = zip(*gradients_and_variables)
        if push.clip_norm:
            gradients, _ = tf.clip_by_global_norm(gradients, push.clip_norm)
        step = self.steps.assign_add(1) - 1  # on the PS: the run's step count comes back (8 bytes)
        learning_rate = push.learning_rate(step) if callable(push.learning_rate) else push.learning_rate
        options = {"ratio": warmup_ratio(step, self.compressor.ratio, push.warmup_steps)} if push.warmup_steps else {}
        pushed, squares = [], []
        for i, (gradient, variable) in enumerate(zip(gradients, variables)):
            if push.momentum_correction:  # the velocity is accumulated on the worker, before compression
                velocity = push.momentum * self.velocities[i] + gradient
                self.velocities[i].assign(velocity)
                gradient = velocity
            update = learning_rate * gradient
            if push.error_feedback:
                payload, residual = compress_with_feedback(self.compressor, update, self.residuals[i], **options)
                self.residuals[i].assign(residual)
            else:
                payload = self.compressor.compress(update, **options)
            if push.factor_masking:  # the entries just sent restart their velocity at 0
                sent = self.compressor.decompress(payload, variable.shape) != 0
                self.velocities[i].assign(tf.where(sent, 0.0, velocity))
            payload_size, applied_square = self.apply_on_ps(i, variable, payload)
            pushed.append(payload_size)
            squares.append(applied_square)
        with tf.device(self.pushed_bytes.device):
            self.pushed_bytes.assign_add(tf.add_n(pushed))
            self.applied_norms.assign_add(tf.sqrt(tf.cast(tf.add_n(squares), tf.float64)))

    def apply_on_ps(self, i, variable, payload):
        """Apply one payload on the variable's PS (momentum there, the naive way); return its bytes and the
        squared norm of the step applied."""
        with tf.device(variable.device):
            if self.ps_velocities:
                velocity = self.ps_velocities[i]
                applied = velocity.assign(self.push.momentum * velocity
                                          + self.compressor.decompress(payload, variable.shape))
                variable.assign_sub(applied)
            else:
                applied = self.compressor.decompress(payload, variable.shape)
                self.compressor.apply(variable, payload)
            return payload_bytes_tensor(payload), tf.reduce_sum(tf.square(applied))


class CompressedPulls:
    """Each worker reads its own replica of ``variables``, kept up to date by compressed differences.

    Build it under ``strategy.scope()`` after creating the ``ClusterCoordinator``. Each pull,
    on the PS: ``payload = compress(w_ps − seen[worker])`` and ``seen[worker] += decompress(payload)``;
    on the worker: ``replica += decompress(payload)``. ``seen[worker]`` and the replica stay
    equal, and what a pull left out is still in ``w_ps − seen[worker]`` for the next one.
    ``seen`` costs the PS one copy of the model per worker. ``pulled_bytes`` (on the PS) adds up
    the payload bytes sent.
    """

    def __init__(self, strategy, variables, compressor):
        num_workers = strategy.extended._num_workers  # TF keeps the cluster's worker count there
        self.variables, self.compressor, self.seen, self.replicas = list(variables), compressor, [], []
        for variable in self.variables:
            value = variable.numpy()  # every replica and every seen[worker] start from the PS's value
            self.replicas.append(tf.Variable(value, trainable=False, per_worker_variable=True))
            with strategy.extended.colocate_vars_with(variable):
                self.seen.append(tf.Variable(np.repeat(value[None], num_workers, axis=0), trainable=False))
        self.pulled_bytes = tf.Variable(0, dtype=tf.int64, trainable=False, name="pulled_bytes")

    def pull(self):
        """On a worker: bring its replica up to date; return the replica's new values (tensors)."""
        worker = tf.distribute.coordinator.experimental_get_current_worker_index()
        values, sent = [], []
        for variable, seen, replica in zip(self.variables, self.seen, self.replicas):
            with tf.device(variable.device):  # on the PS: compress what this worker has not seen yet
                payload = self.compressor.compress(variable - tf.gather(seen, worker))
                change = self.compressor.decompress(payload, variable.shape)
                seen.scatter_nd_add(tf.reshape(worker, [1, 1]), change[None])
                sent.append(payload_bytes_tensor(payload))
            value = tf.convert_to_tensor(replica) + self.compressor.decompress(payload, replica.shape)
            replica.assign(value)
            values.append(value)
        with tf.device(self.pulled_bytes.device):
            self.pulled_bytes.assign_add(tf.add_n(sent))
        return values


def relative_variance(draws, value):
    """E||Q(v) − v||² / ||v||² estimated from round trips ``draws`` (one per row) of ``value``."""
    draws, value = np.asarray(draws, dtype=np.float64), np.asarray(value, dtype=np.float64)
    squared_errors = np.sum((draws - value).reshape(len(draws), -1) ** 2, axis=1)
    return float(np.mean(squared_errors) / np.sum(value ** 2))


def dense_layers_call(model, weights, features):
    """The outputs of a Sequential of Dense layers computed with ``weights`` (kernel, bias, ...)."""
    outputs = features
    for layer, kernel, bias in zip(model.layers, weights[0::2], weights[1::2]):
        outputs = layer.activation(tf.matmul(outputs, kernel) + bias)
    return outputs


def make_pulling_train_steps(strategy, model, optimizer, pulls, steps_per_closure):
    """Packed training steps; with ``pulls`` (CompressedPulls) the model runs on the worker's replica."""
    if pulls is None:
        return train.make_train_steps(strategy, model, optimizer, models.mean_cross_entropy, steps_per_closure)

    def one_step(iterator):
        features, labels = next(iterator)
        weights = pulls.pull()
        with tf.GradientTape() as tape:
            tape.watch(weights)
            loss = models.mean_cross_entropy(labels, dense_layers_call(model, weights, features))
        optimizer.apply_gradients(zip(tape.gradient(loss, weights), pulls.variables))
        return loss

    return train.pack_steps(strategy, one_step, steps_per_closure)


@dataclass(kw_only=True)
class Result(train.TrainingLog):
    """One MNIST training run (a TrainingLog with one row: the timed steps, their seconds and speed, and
    the test accuracy at the end) and, per timed step, its bytes (payloads counted, socket bytes measured)
    and how far its step moved the parameters."""

    name: str
    seed: int
    error_feedback: bool
    push_payload: float   # payload bytes pushed per step, counted on the PS
    pull_payload: float   # payload bytes pulled per step (the whole model when pulls are dense)
    model_bytes: int      # the parameters as float32
    measured: traffic.Traffic | None = None  # bytes per step on the PS sockets (ss), if available
    applied_step: float = math.nan  # the mean L2 norm of the step applied to the parameters, on the PS

    @property
    def payload_total(self):
        return self.push_payload + self.pull_payload

    @property
    def measured_total(self):
        return self.measured.received + self.measured.sent if self.measured else None

    @property
    def push_ratio(self):
        """How many times fewer payload bytes pushed than a dense float32 gradient."""
        return self.model_bytes / self.push_payload


@dataclass(frozen=True)
class Schedule:
    """How long a run trains: ``num_steps`` steps (all workers together) in closures of ``steps_per_closure``
    steps, each on a batch of ``batch_size`` images. The first closure is a warm-up (tracing, first reads):
    not counted in steps, bytes or speed."""

    num_steps: int = 600
    steps_per_closure: int = 10
    batch_size: int = 64

    def __post_init__(self):
        if self.steps_per_closure < 1:
            raise ValueError(f"steps_per_closure must be at least 1, got {self.steps_per_closure}")
        if self.num_steps % self.steps_per_closure or self.num_steps < 2 * self.steps_per_closure:
            raise ValueError(f"num_steps ({self.num_steps}) must be a multiple of steps_per_closure "
                             f"({self.steps_per_closure}), of two closures at least: the first is a warm-up, "
                             "not measured.")


@dataclass(frozen=True)
class Setting:
    """What a run compresses and how: the ``compressor`` of each push (None: dense), the ``pull``
    compressor (None: dense pulls), the ``push`` (learning rate, error feedback, momentum, DGC's options) and
    the run's ``name`` (default: its compressors)."""

    name: str = ""
    compressor: Compressor | None = None
    pull: Compressor | None = None
    push: Push = Push()

    @property
    def title(self):
        """The name, or one made from the compressors: "push top-k 0.005 +EF, pull dense"."""
        compressor = self.compressor or Compressor()
        feedback = " +EF" if self.push.error_feedback else ""
        return self.name or f"push {compressor.name}{feedback}, pull {self.pull.name if self.pull else 'dense'}"


@dataclass(frozen=True)
class Shared:
    """What the runs on one cluster share: ``ps_pids``, the parameter servers whose sockets are measured
    (``traffic.ps_pids(cluster)``; none: not measured), and the classes of the push and the pull,
    ``CompressedSGD`` and ``CompressedPulls`` or a notebook's own versions of them."""

    ps_pids: tuple = ()
    push_class: type = CompressedSGD
    pull_class: type = CompressedPulls


def train_mnist(strategy, coordinator, data, setting=Setting(), schedule=Schedule(), seed=0, shared=Shared()):
    """Train the MNIST MLP as ``setting`` says (compressed pushes, and pulls if it has a ``pull``); measure it.

    ``schedule``: the steps, packing and batch size. ``seed`` sets the model's initial weights, each
    worker's stream of batches (its own shard, shuffled by the seed) and the run's random draws: two runs
    with the same seed start alike and see the same batches, so their accuracies compare pair by pair.
    ``shared``: what the runs on the cluster share.
    """
    compressor = setting.compressor or Compressor()
    tf.keras.utils.set_random_seed(seed)
    with strategy.scope():
        model = models.mnist_mlp()
        optimizer = shared.push_class(model.trainable_variables, compressor, setting.push)
        pulls = shared.pull_class(strategy, model.trainable_variables, setting.pull) if setting.pull else None
    batches = train.mnist_batches(coordinator, data, schedule.batch_size, seed, sharded=True)
    counters = {"pushed": lambda: int(optimizer.pushed_bytes.numpy()),
                "applied": lambda: float(optimizer.applied_norms.numpy())}
    if pulls:
        counters["pulled"] = lambda: int(pulls.pulled_bytes.numpy())
    meter = Meter(socket_pids=shared.ps_pids, counters=counters)
    steps_per_closure = schedule.steps_per_closure
    timed_steps = schedule.num_steps - steps_per_closure
    train_steps = make_pulling_train_steps(strategy, model, optimizer, pulls, steps_per_closure)

    def evaluate():
        return {"accuracy": models.accuracy(model, data.x_test, data.y_test)}

    training_log = train.run(coordinator, train_steps, batches, timed_steps, steps_per_closure,
                             log_every_steps=timed_steps, warmup_closures=1,
                             recording=train.Recording(evaluate=evaluate, description=None, meter=meter))
    model_bytes = models.model_bytes(model)
    return Result(name=setting.title, seed=seed, error_feedback=setting.push.error_feedback,
                  push_payload=meter.counts["pushed"] / timed_steps,
                  pull_payload=meter.counts["pulled"] / timed_steps if pulls else model_bytes, model_bytes=model_bytes,
                  measured=meter.bytes / timed_steps if meter.bytes else None,
                  applied_step=meter.counts["applied"] / timed_steps, **vars(training_log))


def format_results(results, baseline=None):
    """A text table: payload and socket bytes per step (push, pull, total), the step applied, accuracy, speed.

    ``× fewer`` compares each measured total (payload total, without ``ss``) with ``baseline``'s, and ``step``
    how far each step moved the parameters (``applied_step``) with ``baseline``'s.
    """
    baseline = baseline or results[0]

    def total(result):
        return result.measured_total if result.measured else result.payload_total

    lines = [f"{'run':<44}{'payload push':>13}{'pull':>9}{'socket push':>12}{'pull':>9}{'total':>10}"
             f"{'× fewer':>8}{'step':>7}{'accuracy':>9}{'steps/s':>8}"]
    for r in results:
        socket = (f"{r.measured.received:>12,.0f}{r.measured.sent:>9,.0f}{r.measured_total:>10,.0f}"
                  if r.measured else f"{'n/a':>12}{'n/a':>9}{'n/a':>10}")
        lines.append(f"{r.name:<44}{r.push_payload:>13,.0f}{r.pull_payload:>9,.0f}{socket}"
                     f"{total(baseline) / total(r):>7.1f}×{r.applied_step / baseline.applied_step:>6.2f}×"
                     f"{r.final_accuracy:>9.3f}{r.steps_per_second[-1]:>8.1f}")
    return "\n".join(lines)
