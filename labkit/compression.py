"""Gradient compression that really shrinks what workers push to the parameter servers.

A compressor turns a gradient into a small *payload* on the worker (``compress``) and
turns the payload back into an update where the variable lives (``apply``, run on
the variable's parameter server). Only the payload crosses the network:

- sparse compressors (threshold, top-k, random-k) send values + int32 positions and
  the PS adds them in place with a scatter op;
- quantisers send int8 codes (or packed sign bits) + one float32 scale, and the PS
  dequantises them.

``CompressedSGD`` is a drop-in for ``optimizer.apply_gradients`` in
``labkit.train.make_train_steps``. With ``error_feedback=True`` each worker keeps
what compression dropped (its *residual*) in a per-worker variable and adds it to
its next gradient (Seide et al. 2014; Karimireddy et al. 2019). The residual stays
on the worker: it never crosses the network.
"""
import math
import time
from dataclasses import dataclass

import tensorflow as tf

from labkit import fit, models, traffic, train


def payload_bytes(payload):
    """Bytes a payload takes on the wire (tensor contents, without RPC framing)."""
    return sum(int(tf.size(t)) * t.dtype.size for t in payload.values())


def _payload_bytes_tensor(payload):
    return tf.add_n([tf.cast(tf.size(t), tf.int64) * t.dtype.size for t in payload.values()])


class Compressor:
    """No compression: the dense float32 gradient is the payload (4 bytes per value)."""
    name = "none"

    def compress(self, gradient):
        return {"gradient": gradient}

    def decompress(self, payload, shape):
        """The dense gradient the payload stands for (used on the PS and for residuals)."""
        return tf.reshape(payload["gradient"], shape)

    def apply(self, variable, payload, learning_rate):
        """SGD update of ``variable`` from ``payload``, computed on the variable's device."""
        with tf.device(variable.device):
            variable.assign_sub(learning_rate * self.decompress(payload, variable.shape))

    def bytes_per_step(self, shape):
        """Payload bytes for a gradient of this shape (None when it depends on the values)."""
        return 4 * math.prod(shape)

    def __repr__(self):
        return self.name


class _Sparse(Compressor):
    """Send the chosen entries as float32 values + int32 positions in the flat gradient."""

    def select(self, flat):
        raise NotImplementedError

    def compress(self, gradient):
        flat = tf.reshape(gradient, [-1])
        positions = tf.cast(self.select(flat), tf.int32)
        return {"values": tf.gather(flat, positions), "positions": positions}

    def decompress(self, payload, shape):
        size = math.prod(shape)
        dense = tf.scatter_nd(payload["positions"][:, None], payload["values"], [size])
        return tf.reshape(dense, shape)

    def apply(self, variable, payload, learning_rate):
        with tf.device(variable.device):  # the positions become indices on the PS
            indices = tf.transpose(tf.unravel_index(payload["positions"], tf.shape(variable)))
            variable.scatter_nd_sub(indices, learning_rate * payload["values"])


class Threshold(_Sparse):
    """Keep entries with |g| >= fraction * max|g| (the tutorial's idea, scale-aware)."""

    def __init__(self, fraction=0.1):
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        self.fraction, self.name = fraction, f"threshold {fraction:g}·max"

    def select(self, flat):
        magnitude = tf.abs(flat)
        return tf.where(magnitude >= self.fraction * tf.reduce_max(magnitude))[:, 0]

    def bytes_per_step(self, shape):
        return None


class TopK(_Sparse):
    """Keep the k = ceil(ratio * n) entries of largest magnitude."""

    def __init__(self, ratio=0.01):
        if not 0 < ratio <= 1:
            raise ValueError(f"ratio must be in (0, 1], got {ratio}")
        self.ratio, self.name = ratio, f"top-k {ratio:g}"

    def k(self, size):
        return max(1, math.ceil(self.ratio * size))

    def select(self, flat):
        return tf.math.top_k(tf.abs(flat), k=self.k(flat.shape[0]), sorted=False).indices

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


class QSGD(Int8):
    """Stochastic quantisation to ``levels`` levels of |g|/‖g‖ (Alistarh et al. 2017): unbiased."""

    def __init__(self, levels=127):
        if not 1 <= levels <= 127:
            raise ValueError(f"levels must be 1..127 to fit in int8, got {levels}")
        self.levels, self.name = levels, f"qsgd {levels} levels"

    def compress(self, gradient):
        norm = tf.maximum(tf.norm(gradient), 1e-30)
        scaled = tf.abs(gradient) / norm * self.levels  # in [0, levels]
        lower = tf.floor(scaled)
        rounded_up = tf.cast(tf.random.uniform(tf.shape(gradient)) < scaled - lower, tf.float32)
        codes = tf.sign(gradient) * (lower + rounded_up)
        return {"codes": tf.cast(codes, tf.int8), "scale": norm / self.levels}


_BIT_WEIGHTS = tf.constant([1, 2, 4, 8, 16, 32, 64, 128], tf.int32)


class ScaledSign(Compressor):
    """1 bit per value: sign(g) packed 8 per byte, times s = mean|g| (signSGD with a scale)."""
    name = "scaled sign"

    def compress(self, gradient):
        flat = tf.reshape(gradient, [-1])
        padding = -flat.shape[0] % 8
        bits = tf.cast(tf.pad(flat, [[0, padding]]) >= 0, tf.int32)
        packed = tf.reduce_sum(tf.reshape(bits, [-1, 8]) * _BIT_WEIGHTS, axis=1)
        return {"signs": tf.cast(packed, tf.uint8), "scale": tf.reduce_mean(tf.abs(flat))}

    def decompress(self, payload, shape):
        packed = tf.cast(payload["signs"], tf.int32)[:, None]
        bits = tf.reshape(tf.bitwise.bitwise_and(packed, _BIT_WEIGHTS) > 0, [-1])
        signs = tf.where(bits[:math.prod(shape)], 1.0, -1.0)
        return tf.reshape(signs * payload["scale"], shape)

    def bytes_per_step(self, shape):
        return math.ceil(math.prod(shape) / 8) + 4


def compress_with_feedback(compressor, gradient, residual):
    """Error feedback: compress gradient + residual; what compression dropped is the new residual."""
    corrected = gradient + residual
    payload = compressor.compress(corrected)
    return payload, corrected - compressor.decompress(payload, corrected.shape)


class CompressedSGD:
    """Plain SGD whose gradients travel compressed; use it where an optimizer goes.

    Build it under ``strategy.scope()`` after creating the ``ClusterCoordinator``
    (the residuals are per-worker variables). ``pushed_bytes`` (on the PS) adds up
    the payload bytes every worker pushed.
    """

    def __init__(self, variables, compressor, learning_rate=0.1, error_feedback=False):
        self.compressor, self.learning_rate = compressor, learning_rate
        self.error_feedback = error_feedback
        self.pushed_bytes = tf.Variable(0, dtype=tf.int64, trainable=False, name="pushed_bytes")
        self.residuals = [tf.Variable(tf.zeros(v.shape), trainable=False, per_worker_variable=True)
                          for v in variables] if error_feedback else None

    def apply_gradients(self, gradients_and_variables):
        pushed = []
        for i, (gradient, variable) in enumerate(gradients_and_variables):
            if self.error_feedback:
                payload, new_residual = compress_with_feedback(self.compressor, gradient, self.residuals[i])
                self.residuals[i].assign(new_residual)
            else:
                payload = self.compressor.compress(gradient)
            self.compressor.apply(variable, payload, self.learning_rate)
            pushed.append(_payload_bytes_tensor(payload))
        self.pushed_bytes.assign_add(tf.add_n(pushed))

    def bytes_per_step(self, variables):
        """Payload bytes of one step, or None if they depend on the gradient's values."""
        sizes = [self.compressor.bytes_per_step(tuple(v.shape)) for v in variables]
        return None if None in sizes else sum(sizes)


@dataclass
class Result:
    """One MNIST training run with a compressor: what it pushed and what it reached."""

    compressor: str
    error_feedback: bool
    steps: int
    test_accuracy: float
    pushed_bytes_per_step: float  # payload bytes, counted by the workers as they push
    dense_bytes_per_step: int     # what an uncompressed float32 gradient takes
    steps_per_second: float
    measured: traffic.Traffic | None = None  # bytes per step the PS sockets saw (ss), if available

    @property
    def ratio(self):
        """How many times fewer gradient bytes than uncompressed."""
        return self.dense_bytes_per_step / self.pushed_bytes_per_step


def train_mnist(strategy, coordinator, data, compressor, error_feedback=False, num_steps=600,
                steps_per_closure=10, batch_size=64, learning_rate=0.1, ps_pids=(), seed=0):
    """Train the MNIST MLP with CompressedSGD on the cluster; measure bytes and accuracy."""
    tf.keras.utils.set_random_seed(seed)
    with strategy.scope():
        model = models.mnist_mlp()
        optimizer = CompressedSGD(model.trainable_variables, compressor, learning_rate, error_feedback)

    batches = train.per_worker_iterator(coordinator, train.mnist_dataset_fn(data, batch_size, seed))
    train_steps = train.make_train_steps(strategy, model, optimizer, models.mean_cross_entropy, steps_per_closure)
    coordinator.schedule(train_steps, args=(batches,))  # warm-up: tracing, first pulls
    coordinator.join()
    warm_steps, warm_bytes = steps_per_closure, int(optimizer.pushed_bytes.numpy())
    before = traffic.process_traffic(ps_pids) if ps_pids and traffic.available() else None
    began = time.perf_counter()
    for _ in range(num_steps // steps_per_closure - 1):
        coordinator.schedule(train_steps, args=(batches,))
    coordinator.join()
    seconds = time.perf_counter() - began
    timed_steps = num_steps - warm_steps
    measured = None
    if before is not None:
        measured = (traffic.process_traffic(ps_pids) - before) / timed_steps
    return Result(compressor.name, error_feedback, num_steps, fit.accuracy(model, data.x_test, data.y_test),
                  (int(optimizer.pushed_bytes.numpy()) - warm_bytes) / timed_steps,
                  sum(4 * v.shape.num_elements() for v in model.trainable_variables),
                  timed_steps / seconds, measured)


def format_results(results):
    """A text table of Results: bytes pushed per step (counted and measured), accuracy, speed."""
    lines = [f"{'compressor':<22}{'error fb':>9}{'push B/step':>13}{'fewer':>8}"
             f"{'measured push':>15}{'pull B/step':>13}{'accuracy':>10}{'steps/s':>9}"]
    for r in results:
        measured_push = f"{r.measured.received:,.0f}" if r.measured else "n/a"
        pull = f"{r.measured.sent:,.0f}" if r.measured else "n/a"
        lines.append(f"{r.compressor:<22}{'yes' if r.error_feedback else 'no':>9}{r.pushed_bytes_per_step:>13,.0f}"
                     f"{r.ratio:>7.1f}×{measured_push:>15}{pull:>13}{r.test_accuracy:>10.3f}{r.steps_per_second:>9.1f}")
    return "\n".join(lines)
