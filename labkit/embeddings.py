"""Where parameter servers win: embedding tables bigger than a worker, sparse traffic, hot keys (notebook 11).

A recommendation model looks each user and item up in a table of learned rows. The item table can
have billions of rows; each example touches a few of them. On parameter servers the table is split
into row ranges, one per server (``shard_sizes``, TensorFlow's partitioners' split), so no process
holds all of it, and a step moves only the rows its batch touches: ``lookup`` asks each server for
its own rows, each distinct id once, and the gradient goes back as those rows (``tf.IndexedSlices``).
Under all-reduce every worker holds the whole table and its optimizer state.

Items numbered by popularity put the popular rows in the first range, on one server: a hot key.
``spread`` shuffles rows with a fixed permutation first, so popular items land on every server.
``bytes_per_step`` predicts what each server receives and sends for a batch; ``measure_load``
measures it on the sockets, with each server's CPU.

Memory is measured per process (``task_memory_mb``): ``MemoryLine`` fits it against the table's rows,
and ``refuse_over_budget`` refuses a run whose predicted memory exceeds a process's budget
(``memory_budget_mb``) or this machine's free memory, before it starts.
"""
import math
from dataclasses import dataclass

import numpy as np
import psutil
import tensorflow as tf

from labkit import traffic, train
from labkit.sharding import task_of
from labkit.runtime import processes

SPREAD_MULTIPLIER = 2_654_435_761  # a prime near 2**32 / golden ratio (Knuth's multiplicative hashing)
LEARNING_RATE = 1.0  # Adagrad: its sparse update touches only the rows of the batch
MB = 1e6
RESERVED_GB = 3.0  # of a laptop's memory: the operating system and desktop (2 GB) and the browser (1 GB)


# ----- the mechanism: where a row lives, which rows move -------------------------------------------
def shard_sizes(rows, num_shards):
    """How TensorFlow's partitioners split ``rows`` rows into ``num_shards`` row ranges, in order:
    the first ``rows % num_shards`` ranges one row longer."""
    if not 1 <= num_shards <= rows:
        raise ValueError(f"cannot split {rows} rows into {num_shards} shards: use 1 to {rows} shards.")
    per_shard, longer = divmod(rows, num_shards)
    return [per_shard + 1] * longer + [per_shard] * (num_shards - longer)


def shard_of(ids, sizes):
    """(shard, row within that shard) of each id, for a table split into row ranges of ``sizes`` rows."""
    ends = tf.cumsum(tf.constant(sizes, tf.int64))
    shard = tf.searchsorted(ends, tf.cast(ids, tf.int64), side="right")
    return shard, tf.cast(ids, tf.int64) - tf.gather(ends - sizes, shard)


def lookup(shards, ids):
    """The rows of ``ids`` from a table split into ``shards`` (its row ranges, in order), shaped like
    ``ids`` plus the row: each distinct id is asked for once, and each shard only for its own rows."""
    distinct, position = tf.unique(tf.reshape(ids, [-1]))
    shard, row = shard_of(distinct, [int(variable.shape[0]) for variable in shards])
    wanted = tf.dynamic_partition(row, shard, len(shards))
    found = [tf.gather(variable, rows) for variable, rows in zip(shards, wanted)]
    order = tf.dynamic_partition(tf.range(tf.size(distinct)), shard, len(shards))
    rows_of_distinct = tf.dynamic_stitch(order, found)
    return tf.reshape(tf.gather(rows_of_distinct, position), tf.concat([tf.shape(ids), [shards[0].shape[1]]], axis=0))


def spread(ids, rows):
    """Each id's row after a fixed shuffle of the table's ``rows`` rows: (id x M) mod rows. With M a
    prime that does not divide ``rows`` this is a permutation: no two ids share a row, and ids
    numbered by popularity (0, 1, 2, ...) land far apart, on every shard."""
    return tf.math.floormod(tf.cast(ids, tf.int64) * SPREAD_MULTIPLIER, rows)


def bytes_per_step(ids, sizes, dim):
    """What each shard's server receives plus sends for one step on ``ids``, table rows only: for each distinct id
    on it, the id (once: the same ids serve the pull and the push), its row of ``dim`` floats pulled, and its
    gradient row pushed back. RPC framing and the small dense variables come on top."""
    distinct = np.unique(np.asarray(ids))
    shard, _ = shard_of(distinct, sizes)
    return np.bincount(shard.numpy(), minlength=len(sizes)) * (8 + 2 * 4 * dim)


# ----- the model ---------------------------------------------------------------------------------------
class Table(tf.keras.layers.Layer):
    """An embedding table of ``rows`` x ``dim``, read with ``lookup_rows`` (a function like ``lookup``);
    ``spread_ids``, a function like ``spread`` (ids, rows) -> rows, places each id's row first (None: id k
    in row k). Under ParameterServerStrategy with a partitioner its variable is split into shards."""

    def __init__(self, rows, dim, spread_ids=None, lookup_rows=lookup, **kwargs):
        super().__init__(**kwargs)
        self.rows, self.dim, self.spread_ids, self.lookup_rows = rows, dim, spread_ids, lookup_rows

    def build(self, input_shape):
        self.table = self.add_weight(name="rows", shape=(self.rows, self.dim),
                                     initializer=tf.keras.initializers.RandomNormal(stddev=0.1))

    def call(self, ids):
        ids = tf.cast(ids, tf.int64)
        if self.spread_ids is not None:
            ids = self.spread_ids(ids, self.rows)
        return self.lookup_rows(shards(self.table), ids)


def shards(table):
    """The row ranges of a table variable: a ShardedVariable's shards, else the variable itself."""
    return list(getattr(table, "variables", [table]))


def recommender(num_users, num_items, dim=16, spread_ids=None, lookup_rows=lookup):
    """Predict a user's rating of an item: their rows of a user table and an item table (``Table``s read with
    ``lookup_rows``, the item ids through ``spread_ids`` if given), then a small dense head on (user row x
    item row, item row). Inputs {"user": ids, "item": ids}; not compiled."""
    user = tf.keras.Input(shape=(), dtype="int64", name="user")
    item = tf.keras.Input(shape=(), dtype="int64", name="item")
    user_row = Table(num_users, dim, lookup_rows=lookup_rows, name="user_table")(user)
    item_row = Table(num_items, dim, spread_ids, lookup_rows, name="item_table")(item)
    both = tf.keras.layers.Concatenate()([tf.keras.layers.Multiply()([user_row, item_row]), item_row])
    rating = tf.keras.layers.Dense(1, name="rating")(both)
    return tf.keras.Model({"user": user, "item": item}, tf.keras.layers.Reshape(())(rating), name="recommender")


def mean_squared_error(labels, predictions):
    """The training loss: mean squared error of the predicted ratings."""
    return tf.reduce_mean(tf.square(tf.cast(labels, predictions.dtype) - predictions))


def restart(model, optimizer, seed):
    """Set a ``recommender`` to the initial weights of seed ``seed``, and its Adagrad ``optimizer`` back to
    its start, in place: each variable's new values are drawn where it lives (a table's rows on the
    parameter server holding them), so nothing the size of the table crosses the network, and the
    processes hold no second table. The same seed gives the same weights."""
    for index, variable in enumerate(model.variables):
        with tf.device(variable.device):
            stateless_seed = tf.constant([seed, index], tf.int64)
            if variable.shape.rank == 2 and "table" in variable.name:
                variable.assign(tf.random.stateless_normal(variable.shape, stateless_seed, stddev=0.1))
            elif variable.shape.rank == 2:  # the head's kernel: Glorot's uniform range, as Keras draws it
                limit = math.sqrt(6 / sum(variable.shape))
                variable.assign(tf.random.stateless_uniform(variable.shape, stateless_seed, -limit, limit))
            else:
                variable.assign(tf.zeros_like(variable))
    for variable in optimizer.variables():
        with tf.device(variable.device):
            start = 0 if variable.dtype == tf.int64 else optimizer._initial_accumulator_value  # noqa: SLF001
            variable.assign(tf.fill(variable.shape, tf.cast(start, variable.dtype)))


def held_out_error(model, ratings, batch_size=4096):
    """The model's mean squared error on the held-out ratings, computed here with the variables where they live."""
    predict = tf.function(lambda users, items: model({"user": users, "item": items}))
    predicted = np.concatenate([predict(users, items).numpy() for users, items in zip(
        np.array_split(ratings.test_users, max(1, len(ratings.test_users) // batch_size)),
        np.array_split(ratings.test_items, max(1, len(ratings.test_items) // batch_size)))])
    return float(np.mean((predicted.astype(np.float64) - ratings.test_ratings) ** 2))


class TablePartitioner:
    """A strategy's ``variable_partitioner``: variables of at least ``min_rows`` rows (the tables) split into
    ``num_shards`` row ranges, every other variable whole. Change ``num_shards`` between models to
    split the next one's tables differently; the strategy places shards on the servers in turn."""

    def __init__(self, num_shards, min_rows=10_000):
        self.num_shards, self.min_rows = num_shards, min_rows

    def __call__(self, shape, dtype):
        rows = shape[0] if shape.rank else 0
        return [self.num_shards if rows >= self.min_rows else 1] + [1] * (max(shape.rank, 1) - 1)


# ----- what each parameter server does: rows, bytes and CPU ------------------------------------------
@dataclass
class Load:
    """What each parameter server did per step over a measured stretch: the distinct rows the steps asked of it
    (counted by the steps themselves), the bytes through its sockets (received + sent; None where `ss` cannot
    count them) and its CPU seconds."""

    rows_per_step: dict
    bytes_per_step: dict | None
    cpu_seconds_per_step: dict

    @property
    def measured(self):
        """What the shares come from: the bytes where `ss` counted them, else the rows asked."""
        return self.bytes_per_step if self.bytes_per_step is not None else self.rows_per_step

    @property
    def unit(self):
        return "bytes" if self.bytes_per_step is not None else "rows asked"

    @property
    def shares(self):
        """Each server's share of the measured load, adding up to 1."""
        total = sum(self.measured.values())
        return {name: value / total for name, value in self.measured.items()}

    @property
    def hottest_share(self):
        return max(self.shares.values())


def measure_load(coordinator, load, ps_pids, steps, steps_per_closure):
    """Run ``steps`` steps of ``load`` (a ``LoadSteps``, in closures of ``steps_per_closure``) and measure each
    parameter server's ``Load`` over them. ``ps_pids``: server name -> process id. One closure per worker
    warms up first, unmeasured."""
    def schedule(closures):
        for _ in range(closures):
            coordinator.schedule(load.steps, args=(None,))
        coordinator.join()

    def read():
        cpu = {name: processes.cpu_seconds(pid) for name, pid in ps_pids.items()}
        sockets = {name: traffic.process_traffic([pid]) for name, pid in ps_pids.items()} if traffic.available() else None
        return load.rows_asked.numpy(), cpu, sockets

    schedule(coordinator.strategy.extended._num_workers)  # noqa: SLF001 (TF keeps the worker count there)
    rows_before, cpu_before, sockets_before = read()
    schedule(steps // steps_per_closure)
    rows_after, cpu_after, sockets_after = read()
    rows = dict.fromkeys(ps_pids, 0.0)
    for server, asked in zip(load.servers, rows_after - rows_before):  # a server may hold several shards
        rows[server] += asked / steps
    cpu = {name: (cpu_after[name] - cpu_before[name]) / steps for name in ps_pids}
    if sockets_before is None:
        return Load(rows, None, cpu)
    moved = {name: sockets_after[name] - sockets_before[name] for name in ps_pids}
    return Load(rows, {name: (traffic.received + traffic.sent) / steps for name, traffic in moved.items()}, cpu)


# ----- memory: measured per process, predicted, and a budget ----------------------------------------
def task_memory_mb(pids):
    """{name: MB} that each process of ``pids`` (name -> pid) uses now: PSS where the system reports it, else
    USS (``processes.memory_measure``)."""
    measure = processes.memory_measure()
    return {name: processes.memory_bytes(pid, measure) / MB for name, pid in pids.items()}


def memory_budget_mb(laptop_memory_gb, processes_per_laptop):
    """The memory each process may use when a laptop of ``laptop_memory_gb`` plays a cluster of
    ``processes_per_laptop`` machines (one per process): what its operating system, desktop and browser
    leave (``RESERVED_GB``), shared equally."""
    if laptop_memory_gb <= RESERVED_GB:
        raise ValueError(f"a {laptop_memory_gb} GB laptop leaves nothing after the {RESERVED_GB:g} GB its operating "
                         "system, desktop and browser take: give its memory in GB, e.g. laptop_memory_gb = 8.")
    return (laptop_memory_gb - RESERVED_GB) * 1000 / processes_per_laptop


@dataclass(frozen=True)
class MemoryLine:
    """A process's memory against the rows of the table the cluster trains: ``base_mb`` with no table,
    plus ``mb_per_million_rows`` for every million rows, fitted by least squares."""

    base_mb: float
    mb_per_million_rows: float
    residual_mb: float  # the root mean square of the fitted points' misses

    @classmethod
    def fit(cls, rows, megabytes):
        if len(rows) < 3:
            raise ValueError(f"fit a line on 3 or more points, not {len(rows)}: two always fit exactly, "
                             "so they cannot show whether memory really grows in a line.")
        millions = np.asarray(rows, np.float64) / 1e6
        slope, base = np.polyfit(millions, megabytes, 1)
        misses = np.asarray(megabytes) - (base + slope * millions)
        return cls(float(base), float(slope), float(np.sqrt(np.mean(misses ** 2))))

    def predict(self, rows):
        """The predicted MB at a table of ``rows`` rows."""
        return self.base_mb + self.mb_per_million_rows * rows / 1e6

    def rows_within(self, budget_mb):
        """The most rows whose predicted memory stays within ``budget_mb`` (inf where memory does not grow)."""
        if self.mb_per_million_rows <= 0:
            return math.inf
        return max(0, int((budget_mb - self.base_mb) / self.mb_per_million_rows * 1e6))


class MemoryBudgetError(RuntimeError):
    """A run was refused before it started: it would need more memory than it may use."""


def refuse_over_budget(what, predicted_mb, budget_mb, available_mb=None):
    """Raise MemoryBudgetError, before anything starts, where ``what`` (a run, in words) would need more than
    ``budget_mb`` in any process (``predicted_mb``: name -> MB), or more in all than this machine has
    available now (``available_mb``, default: psutil's): a run past either would swap the laptop."""
    available_mb = available_mb if available_mb is not None else psutil.virtual_memory().available / MB
    over = {name: mb for name, mb in predicted_mb.items() if mb > budget_mb}
    if over:
        largest = max(over, key=over.get)
        raise MemoryBudgetError(f"not started: {what} would need {over[largest]:,.0f} MB in {largest} "
                                f"({len(over)} of {len(predicted_mb)} processes over the budget), more than the "
                                f"{budget_mb:,.0f} MB each process may use. Use fewer rows, or parameter servers.")
    if sum(predicted_mb.values()) > available_mb:
        raise MemoryBudgetError(f"not started: {what} would need {sum(predicted_mb.values()):,.0f} MB in all, more "
                                f"than the {available_mb:,.0f} MB this machine has available now.")


# ----- synthetic load: tables added for memory, the traffic and hot-key experiments -------------------------
def draw_items(rows, count, zipf_exponent=0.0, seed=None):
    """``count`` item ids of ``rows`` items: drawn alike (exponent 0), or item k about (k + 1) ** -zipf_exponent
    as often as item 0, by inverting the continuous power law. Eagerly (``seed``: a pair of ints, the same
    ids each time) or inside a step (``seed`` None: new ids at every step)."""
    shape = [count]
    uniform = (tf.random.uniform(shape, dtype=tf.float64) if seed is None
               else tf.random.stateless_uniform(shape, seed, dtype=tf.float64))
    if zipf_exponent == 1.0:
        drawn = tf.pow(float(rows), uniform)
    else:
        drawn = tf.pow((float(rows) ** (1 - zipf_exponent) - 1) * uniform + 1, 1 / (1 - zipf_exponent))
    return tf.clip_by_value(tf.cast(tf.floor(drawn), tf.int64) - 1, 0, rows - 1)


@dataclass
class TableLoad:
    """A ``recommender`` with an item table of ``rows`` rows of ``dim`` floats, trained ``steps`` steps on
    ``ids_per_batch`` item ids that each step draws itself (``draw_items``), all rated 0 by user 0: a load
    whose only variety is which rows it touches. The memory run adds one after another."""

    rows: int
    num_workers: int = 2
    dim: int = 16
    ids_per_batch: int = 2_048
    zipf_exponent: float = 0.0
    steps: int = 20

    def build(self, strategy, spread_ids=None, lookup_rows=lookup, steps_per_closure=1):
        """A ``LoadSteps`` under ``strategy``: the model, its optimizer, and a function running ``steps_per_closure``
        training steps (call it with None). No dataset: the ids are drawn in the step, so there is no iterator
        to free afterwards. Under parameter servers each step also counts the distinct rows it asks of each shard."""
        with strategy.scope():
            model = recommender(1, self.rows, self.dim, spread_ids, lookup_rows)
            optimizer = tf.keras.optimizers.legacy.Adagrad(LEARNING_RATE)
            item_shards = shards(model.get_layer("item_table").table)
            counting = isinstance(strategy, tf.distribute.ParameterServerStrategy)
            rows_asked = tf.Variable(tf.zeros([len(item_shards)], tf.int64), trainable=False) if counting else None

        def one_step(_):
            items = draw_items(self.rows, self.ids_per_batch, self.zipf_exponent)
            with tf.GradientTape() as tape:
                predictions = model({"user": tf.zeros_like(items), "item": items}, training=True)
                loss = mean_squared_error(tf.zeros_like(predictions), predictions) / strategy.num_replicas_in_sync
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
            if counting:
                placed = items if spread_ids is None else spread_ids(items, self.rows)
                shard, _ = shard_of(tf.unique(placed).y, [int(variable.shape[0]) for variable in item_shards])
                rows_asked.assign_add(tf.math.bincount(shard, minlength=len(item_shards), maxlength=len(item_shards),
                                                       dtype=tf.int64))
            return loss
        servers = [task_of(variable.device) for variable in item_shards]
        return LoadSteps(model, optimizer, train.pack_steps(strategy, one_step, steps_per_closure), rows_asked, servers)


@dataclass
class LoadSteps:
    """A built ``TableLoad``: the model, its optimizer, ``steps`` (a function to schedule with the argument None),
    ``rows_asked`` (under parameter servers: the distinct rows the steps asked of each shard of the item table, in
    a variable on a parameter server) and ``servers`` (the server holding each shard, in shard order)."""

    model: object
    optimizer: object
    steps: object
    rows_asked: object
    servers: list


def memory_on_parameter_servers(cluster, coordinator, setups):
    """Each ``TableLoad`` in turn on ``cluster``: its model built (tables split over the servers), trained, and kept,
    so the tables add up; then each task's memory. [{"rows": rows held so far, "memory_mb": {task: MB}}],
    the first before any table."""
    pids = {task.name: task.pid for task in cluster.tasks}
    points, kept, rows = [{"rows": 0, "memory_mb": task_memory_mb(pids)}], [], 0
    for setup in setups:
        built = setup.build(coordinator.strategy)
        for _ in range(setup.steps):
            coordinator.schedule(built.steps, args=(None,))
        coordinator.join()
        kept.append(built)
        rows += setup.rows
        points.append({"rows": rows, "memory_mb": task_memory_mb(pids)})
    return points


def all_reduce_tables(setups, progress):
    """The program each all-reduce worker runs (``allreduce.run_workers``): the setups of
    ``memory_on_parameter_servers``, each model built on every worker (a full copy), trained in lockstep and
    kept; this worker's memory and link bytes per step (sent + received) after each."""
    import os

    from labkit import embeddings
    from labkit.meter import Meter

    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # reads TF_CONFIG; before any other TensorFlow work
    me = {"worker": os.getpid()}
    points, kept, rows = [{"rows": 0, "memory_mb": embeddings.task_memory_mb(me)["worker"]}], [], 0
    for setup in setups:
        built = setup.build(strategy)
        built.steps(None)  # warm-up: tracing, the optimizer's slots, the collectives' first handshake
        meter = Meter({}, [os.getpid()])
        meter.begin()
        for _ in range(setup.steps):
            built.steps(None)
        meter.end()
        kept.append(built)
        rows += setup.rows
        link = None if meter.bytes is None else (meter.bytes.sent + meter.bytes.received) / setup.steps
        points.append({"rows": rows, "memory_mb": embeddings.task_memory_mb(me)["worker"], "link_bytes_per_step": link})
        progress(setup.steps * setup.ids_per_batch)
    return points
