"""Synchronous all-reduce beside asynchronous parameter servers: the same model, data and workers.

Under ParameterServerStrategy one program, the coordinator, drives the cluster. Under
``tf.distribute.MultiWorkerMirroredStrategy`` (MWMS) there is none: every worker runs the SAME
program, configured by its own TF_CONFIG, holds a full copy of the variables, and each step
waits until all workers have all-reduced their gradients. ``run_all_reduce`` starts
``num_workers`` processes of ``python -m labkit.allreduce`` (``labkit.runtime.children``: they exit with
their parent), each running the source of a worker program (``all_reduce_worker``, or the notebook's
copy of it), waits for them and reads what each wrote to a JSON file.
``parameter_server_phases`` trains the same ``Setup`` on a ``LocalCluster`` from this process, one
phase at a time. The two can take turns (``run_all_reduce(..., alongside=...)``, ``Turns``): the
all-reduce workers wait, idle, while this process trains, and the reverse, so that timings of the
two strategies can be interleaved under the same conditions of the machine.

Facts checked in TensorFlow 2.21's source: on CPU the collectives are RING all-reduce over gRPC
(``CommunicationImplementation.AUTO``); dense gradients are all-reduced, while ``IndexedSlices``
(an embedding's gradient) are ALL-GATHERED, each worker receiving every other worker's rows and
ids (``cross_device_utils.all_reduce_indexed_slices``); Keras sums the replicas' gradients.
And unless a dataset's cardinality is INFINITE (a ``repeat()`` at its end), MWMS makes every step
all-reduce whether each worker still has data (``input_lib._enable_get_next_as_optional``): one more
collective per step. Our datasets are endless but TensorFlow cannot tell, so ``Setup.dataset_fn`` repeats.
"""
import argparse
import gc
import hashlib
import importlib
import inspect
import json
import os
import re
import shutil
import tempfile
import textwrap
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil
import tensorflow as tf

from labkit import models, sharding, traffic, train
from labkit.runtime import children, processes
from labkit.cluster import HOST, pick_port
from labkit.data import load_mnist
from labkit.pipelines import mnist_dataset_fn, power_law_ids, with_slowed_worker
from labkit.meter import Meter
from labkit.progress import ProgressLines

MODELS = ("mlp", "embedding")
LEARNING_RATES = {"mlp": 1e-3, "embedding": 0.1}  # the MLP's Adam, the embedding's Adagrad
PROGRESS_LINE = "samples done:"


@dataclass
class Setup:
    """What both strategies run. Steps are counted in batches of ``batch_size`` (one worker's step):
    an interval is ``batches_per_interval`` batches summed over all workers.

    With ``seeds`` > 1 (the MLP), the even phase runs once per seed (``seed``, ``seed + 1``, ...) on
    the same model, optimizer and traced step. Each seed is a run of its own: its stream of batches
    starts again (each worker's own order, from that seed), and after one untimed call per worker
    (the warm-up) the weights take that seed's initial values and the optimizer starts from zero.
    So one seed gives both strategies the same initial weights and the same batches on each worker.
    """

    model: str = "mlp"                # "mlp": the MNIST MLP; "embedding": a large item-embedding table
    num_workers: int = 2
    batch_size: int = 64              # per worker and step, both strategies
    steps_per_closure: int = 10       # steps packed in one tf.function (PS: a scheduled closure; all-reduce: a call)
    batches_per_interval: int = 100
    intervals: int = 6
    seeds: int = 1                    # the even phase once per seed, from seed, seed + 1, ...
    slow_worker: int = None           # then train ``slow_batches`` more with this worker slowed
    slow_ms: float = 0.0              # its pause before each batch
    slow_batches: int = 0             # timed as one interval: see ``phases``
    rows: int = 1_000_000             # embedding only
    dim: int = 16
    ids_per_example: int = 8
    seed: int = 0                     # the (first seed's) initial weights and each worker's order of batches
    learning_rate: float = None       # None: the model's usual rate (LEARNING_RATES)

    def __post_init__(self):
        if self.model not in MODELS:
            raise ValueError(f"unknown model {self.model!r}; use one of {', '.join(MODELS)}.")
        if self.learning_rate is None:
            self.learning_rate = LEARNING_RATES[self.model]
        for name in ("num_workers", "batch_size", "steps_per_closure", "batches_per_interval", "intervals", "seeds"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {value!r}.")
        per_call = self.steps_per_closure * self.num_workers  # one synchronous call: a packed step on every worker
        for name in ("batches_per_interval", "slow_batches"):
            if getattr(self, name) % per_call:
                raise ValueError(f"{name} ({getattr(self, name)}) must be a multiple of steps_per_closure x num_workers "
                                 f"({per_call}): under all-reduce every call runs {self.steps_per_closure} steps on each "
                                 f"of the {self.num_workers} workers.")
        if self.seeds > 1 and self.model != "mlp":
            raise ValueError(f"seeds={self.seeds} needs the mlp model: the {self.model} trains one seed (seeds=1).")
        if self.slow_worker is not None and not 0 <= self.slow_worker < self.num_workers:
            raise ValueError(f"slow_worker {self.slow_worker} is not a worker index (0 to {self.num_workers - 1}); "
                             "use None for no slowed worker.")

    @property
    def phases(self):
        """(name, intervals, batches per interval, slowed worker, seed to restart from): the even phase once
        per seed, named "seed N", then the one with a slowed worker, if any (it continues the last seed's
        weights, seed None). That one is a single interval: under parameter servers the end of each interval waits for
        every scheduled closure, the slow worker's last one too, which a longer interval waits for less often."""
        even = [(f"seed {seed}", self.intervals, self.batches_per_interval, None, seed)
                for seed in range(self.seed, self.seed + self.seeds)]
        return even + ([("slowed", 1, self.slow_batches, self.slow_worker, None)]
                       if self.slow_worker is not None and self.slow_batches else [])

    def build(self):
        """(model, optimizer), under the caller's ``strategy.scope()``.

        The embedding trains with Adagrad: its sparse update touches only the rows of the batch
        (legacy Adam would decay every row's moments at every step). The initial weights follow ``seed``.
        """
        tf.keras.utils.set_random_seed(self.seed)
        if self.model == "mlp":
            return models.mnist_mlp(), tf.keras.optimizers.legacy.Adam(self.learning_rate)
        return (models.item_embedding_classifier(self.rows, self.dim, self.ids_per_example),
                tf.keras.optimizers.legacy.Adagrad(self.learning_rate))

    def restart(self, model, optimizer, seed):
        """Set the MLP ``model`` to the initial weights a new MLP gets with seed ``seed``, and its Adam
        ``optimizer`` back to its start (step count and moments zero). Nothing for a phase that continues
        (``seed`` None) or for the embedding model, which trains one seed from ``build()``."""
        if seed is None or self.model != "mlp":
            return
        models.restart_mnist_mlp(model, seed)
        for variable in optimizer.variables():
            variable.assign(tf.zeros_like(variable))

    def dataset_fn(self, data=None, slow_worker=None, seed=None):
        """A ``dataset_fn`` for either strategy: each worker its own stream from ``seed`` (None: ``self.seed``);
        ``slow_worker`` paused per batch."""
        seed = self.seed if seed is None else seed
        if self.model == "mlp":
            batches = mnist_dataset_fn(data, self.batch_size, seed)
        else:
            def batches(input_context=None):
                return power_law_ids(self.rows, self.ids_per_example, self.batch_size, seed, input_context)
        batches = with_slowed_worker(batches, slow_worker, self.slow_ms)

        def dataset_fn(input_context=None):
            return batches(input_context).repeat()  # of INFINITE cardinality: see the module's docstring
        return dataset_fn


@dataclass(kw_only=True)
class Phase(train.TrainingLog):
    """One measured stretch of training: a TrainingLog whose ``step`` counts the batches trained by all
    workers and whose ``seconds`` are training time (evaluation excluded), cumulative per interval;
    the bytes are those of ``batches`` worker steps."""

    batch_size: int = 0
    link_bytes: float = 0.0           # into + out of the workers' links (None: no `ss` here)
    batches: int = 0
    cpu_seconds: dict = field(default_factory=dict)  # role -> CPU seconds its processes used in the timed intervals

    @property
    def samples(self):
        return [step * self.batch_size for step in self.step]

    @property
    def samples_per_second(self):
        return self.final_step * self.batch_size / self.total_seconds

    @property
    def cpu_seconds_per_sample(self):
        """{role: CPU seconds its processes spent per sample trained}, and their "total"."""
        per_role = {role: seconds / (self.final_step * self.batch_size) for role, seconds in self.cpu_seconds.items()}
        return per_role | {"total": sum(per_role.values())}

    @property
    def updates_per_batch(self):
        """Optimizer updates applied per batch trained, between the first and the last evaluation (the
        evaluations read the optimizer's update count; the warm-up is outside)."""
        updates = self.evaluation["updates"]
        return (updates[-1] - updates[0]) / (self.step[-1] - self.step[0])

    def reaching(self, accuracy):
        """(samples, training seconds) when the test accuracy first reached ``accuracy``, or None if it never
        did. Between the last evaluation below it and the first at or above it, both are interpolated along
        a straight line of accuracy (the first evaluation's own values if that one already reached it)."""
        row = train.first_reaching(self.accuracy, accuracy)
        if row is None:
            return None
        if row == 0:
            return self.samples[0], self.seconds[0]
        below, above = self.accuracy[row - 1], self.accuracy[row]
        share = (accuracy - below) / (above - below)
        return tuple(float(values[row - 1] + share * (values[row] - values[row - 1]))
                     for values in (self.samples, self.seconds))

    @property
    def link_bytes_per_step(self):
        """Bytes through a worker's network link per batch it trained (pulls + pushes, or sent + received)."""
        return None if self.link_bytes is None else self.link_bytes / self.batches


def meter_phase(phase, meter, batches_counted):
    """Put what ``meter`` saw while ``phase`` trained into it: CPU seconds per role, the link bytes
    (sent + received) and the ``batches_counted`` batches whose bytes those are."""
    phase.cpu_seconds = meter.cpu_seconds
    phase.link_bytes = meter.bytes.sent + meter.bytes.received if meter.bytes else None
    phase.batches = batches_counted
    return phase


def evaluation(setup, model, optimizer, data):
    """For the MLP, a function returning ``{"accuracy": test accuracy, "updates": the optimizer's update
    count so far}`` (None for the embedding, which has no test set)."""
    if setup.model != "mlp":
        return None
    return lambda: {"accuracy": models.accuracy(model, data.x_test, data.y_test),
                    "updates": int(optimizer.iterations.numpy())}


def held_bytes(model, optimizer):
    """Bytes of the model's and optimizer's variables held by each task, e.g. {"ps:0": ..., "ps:1": ...}."""
    return sharding.bytes_per_task(model.variables + optimizer.variables())


def weights_digest(model):
    """A digest of the model's weights: equal on two workers only if their copies are bit for bit the same."""
    return hashlib.sha256(b"".join(weights.tobytes() for weights in model.get_weights())).hexdigest()


# ----- asynchronous: parameter servers, driven from this process ------------------------
def parameter_server_phases(setup, cluster, coordinator, data=None):
    """Train ``setup`` on a running LocalCluster through ``coordinator``, one phase per ``next()``: yields
    (phase name, Phase) in the order of ``setup.phases``, then ("held_bytes", ``held_bytes``); ``dict()`` of
    it is every phase at once.

    Each phase takes a new iterator on its seed's stream, warms up untimed (one closure per worker:
    tracing, each worker's dataset and first pulls), restarts the weights (``Setup.restart``) and trains its
    timed intervals. Bytes: what the parameter servers received (pushes) and sent (pulls). Every pull and
    push crosses exactly one worker's link, so per batch that is one worker's link traffic.
    """
    strategy = coordinator.strategy
    with strategy.scope():
        model, optimizer = setup.build()
    steps = train.make_train_steps(strategy, model, optimizer, models.mean_cross_entropy, setup.steps_per_closure)
    roles = {"workers": [task.pid for task in cluster.tasks if task.name.startswith("worker")],
             "parameter servers": [task.pid for task in cluster.tasks if task.name.startswith("ps")],
             "coordinator": [os.getpid()]}
    samples = ProgressLines(_total_samples(setup), "parameter servers", unit="sample")
    done = 0

    def progress(count):
        nonlocal done
        done += count
        samples.line(done)

    per_call = setup.steps_per_closure * setup.num_workers  # one closure per worker
    for name, intervals, batches_per_interval, slow_worker, seed in setup.phases:
        iterator = train.per_worker_iterator(coordinator, setup.dataset_fn(data, slow_worker, seed))
        train.run(coordinator, steps, iterator, per_call, setup.steps_per_closure, log_every_steps=per_call,
                  recording=train.Recording(description=None))  # the warm-up, untimed
        setup.restart(model, optimizer, seed)
        meter = Meter(roles, traffic.ps_pids(cluster))
        recording = train.Recording(evaluate=evaluation(setup, model, optimizer, data), description=None,
                                    on_progress=lambda _: progress(batches_per_interval * setup.batch_size),
                                    training_log=Phase(batch_size=setup.batch_size), meter=meter)
        phase = train.run(coordinator, steps, iterator, intervals * batches_per_interval, setup.steps_per_closure,
                          log_every_steps=batches_per_interval, recording=recording)
        yield name, meter_phase(phase, meter, intervals * batches_per_interval)
    yield "held_bytes", held_bytes(model, optimizer)


# ----- synchronous: all-reduce, one program on every worker ----------------------------
class AllReduceError(RuntimeError):
    """A worker of an all-reduce run failed or hung; the message ends with its log tail."""


def run_all_reduce(*setups, program=None, timeout=600.0, log_dir=None, alongside=None):
    """Run each setup in turn under MultiWorkerMirroredStrategy, on one set of local worker processes.

    Every worker runs ``program(setups, progress)`` (default: ``all_reduce_worker``; ``run_workers``).
    With ``alongside``, a function, the workers take turns with this process: ``alongside(turns)`` runs
    here while they start, and each ``turns.take()`` (``Turns``) lets them train their next phase and
    returns when they have; between two turns they wait, idle. Once it returns they train the rest.
    Returns one dict per setup: {phase name: Phase} (times, losses and accuracies from worker 0;
    bytes from every worker), "held_bytes", "weights_digest" and "rss_bytes" per worker, and the
    workers' "pids".
    """
    reports, pids = run_workers(program or all_reduce_worker, setups, sum(_total_samples(setup) for setup in setups),
                                timeout, log_dir, alongside)
    return [_combine([report[number] for report in reports]) | {"pids": pids} for number in range(len(setups))]


def run_workers(program, setups, total_samples, timeout=600.0, log_dir=None, alongside=None):
    """Start ``setups[0].num_workers`` processes of ``python -m labkit.allreduce``, each running
    ``program(setups, progress)`` with its own TF_CONFIG; wait for them. Returns (each worker's
    return value, in worker order; their pids by task name).

    ``setups`` are dataclasses of one class with a ``num_workers`` field (``Setup``, or a lab's own).
    ``program``'s source is written to ``log_dir`` and executed in each worker with this module's
    names, so a notebook's copy of the function, edited there, is what the workers run; it calls
    ``progress(samples)`` as it goes (``total_samples`` in all, shown from worker 0). ``alongside``: as for
    ``run_all_reduce``; the program waits for each turn with ``wait_for_turn()``.
    Whatever happens (an error, Ctrl-C), the processes are gone when it returns or raises. The
    workers' logs go to ``log_dir`` (default: a new temporary directory, removed after a clean
    run). More workers than ``LABKIT_MAX_TASKS`` allows are refused (``children.check_task_limit``).
    """
    sizes = {setup.num_workers for setup in setups}
    if len(sizes) != 1:
        raise ValueError(f"the setups ask for different numbers of workers ({sorted(sizes)}); "
                         "one run has one set of workers: run them separately.")
    [num_workers] = sizes
    children.check_task_limit(num_workers, f"{num_workers} all-reduce workers")
    own_log_dir = log_dir is None
    log_dir = Path(log_dir or tempfile.mkdtemp(prefix="labkit-allreduce-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    program_path = log_dir / "program.py"
    program_path.write_text(textwrap.dedent(inspect.getsource(program)))
    cluster = {"worker": [f"{HOST}:{pick_port()}" for _ in range(num_workers)]}
    setup_class = f"{type(setups[0]).__module__}:{type(setups[0]).__qualname__}"
    setup_arguments = [argument for setup in setups for argument in ("--setup", json.dumps(asdict(setup)))]
    workers = []
    try:
        for index in range(num_workers):
            workers.append(children.start_program("labkit.allreduce", "--program", str(program_path),
                                                  "--function", program.__name__, "--setup-class", setup_class,
                                                  *setup_arguments, "--out", str(log_dir / f"worker-{index}.json"),
                                                  *(["--turns"] if alongside else []),
                                                  tf_config=tf_config(cluster, index),
                                                  log_path=log_dir / f"worker-{index}.log"))
        samples = ProgressLines(total_samples, "all-reduce", unit="sample")
        if alongside:
            alongside(Turns(workers, log_dir, timeout, samples))
            (log_dir / TURNS_OVER).touch()
        _wait(workers, log_dir, samples, timeout)
    finally:
        processes.stop(workers)
    reports = [json.loads((log_dir / f"worker-{index}.json").read_text()) for index in range(num_workers)]
    pids = {f"worker:{index}": worker.pid for index, worker in enumerate(workers)}
    if own_log_dir:
        shutil.rmtree(log_dir)
    return reports, pids


def tf_config(cluster, index):
    """Worker ``index``'s TF_CONFIG for all-reduce: the cluster lists workers only, worker 0 is the chief.

    (``labkit.runtime.tfconfig`` checks parameter-server clusters, which need a "ps" task.)
    """
    return {"cluster": cluster, "task": {"type": "worker", "index": index}}


def _wait(workers, log_dir, samples, timeout, until=None, what="the all-reduce workers to finish"):
    """Wait until ``until()`` (default: every worker exited 0), showing worker 0's progress on ``samples``
    (a ProgressLines); raise AllReduceError if a worker fails or ``timeout`` seconds pass first."""
    progress_log = log_dir / "worker-0.log"

    def finished():
        samples.line(_samples_done(progress_log))
        for index, worker in enumerate(workers):
            if worker.poll() not in (None, 0):
                log = log_dir / f"worker-{index}.log"
                raise AllReduceError(f"all-reduce worker {index} exited with code {worker.returncode}. "
                                     f"Last lines of {log}:\n{processes.log_tail(log)}")
        return until() if until else all(worker.returncode == 0 for worker in workers)

    processes.wait_until(finished, timeout, what, interval=POLL_SECONDS,
                         error=lambda message: AllReduceError(
                             f"{message}. Last lines of {progress_log}:\n{processes.log_tail(progress_log)}"))


# ----- taking turns: the all-reduce workers and this process, one at a time -----------------
TURNS_OVER = "turns-over"   # a file in the run's directory: the workers need wait for no more turns
POLL_SECONDS = 0.05         # how often either side looks for the other's files (and the kernel at the workers)


class Turns:
    """The all-reduce workers' turns, given from this process (``run_all_reduce(..., alongside=...)``).

    A worker waits for a turn before each phase (``wait_for_turn``, in ``all_reduce_worker``): idle,
    so that what this process runs meanwhile has the cores to itself. ``take()`` gives the workers
    their next turn and returns once every one of them waits for the one after it (or has exited).
    Through files in the run's directory: this process writes ``turn-N``; a worker that waits for
    turn N has written ``waiting-N-worker-I``.
    """

    def __init__(self, workers, log_dir, timeout, samples):
        self.workers, self.log_dir, self.timeout, self.samples = workers, log_dir, timeout, samples
        self.taken = 0

    @property
    def pids(self):
        """The workers' process ids (e.g. to measure what they use while they wait)."""
        return [worker.pid for worker in self.workers]

    def until_waiting(self):
        """Return once every worker waits for its next turn (they start, load TensorFlow, connect first)."""
        turn = self.taken
        _wait(self.workers, self.log_dir, self.samples, self.timeout, what=f"the all-reduce workers to wait for turn {turn}",
              until=lambda: all(worker.returncode == 0 or (self.log_dir / f"waiting-{turn}-worker-{index}").exists()
                                for index, worker in enumerate(self.workers)))

    def take(self):
        """Let the workers train their next phase; return when every one of them has (and waits again)."""
        (self.log_dir / f"turn-{self.taken}").touch()
        self.taken += 1
        self.until_waiting()


class _OwnTurns:
    """A worker's side of ``Turns``: in the run's ``directory`` (None: a run that takes no turns)."""

    directory, worker, turn = None, 0, 0

    def wait(self):
        if self.directory is None:
            return
        (self.directory / f"waiting-{self.turn}-worker-{self.worker}").touch()
        given = self.directory / f"turn-{self.turn}"
        while not (given.exists() or (self.directory / TURNS_OVER).exists()):
            time.sleep(POLL_SECONDS)
        self.turn += 1


_own_turns = _OwnTurns()  # main() gives it the run's directory when the run takes turns (``--turns``)


def wait_for_turn():
    """In an all-reduce worker: wait, idle, until this run gives the next turn; at once in a run that takes
    no turns, or once they are over."""
    _own_turns.wait()


def _samples_done(log_path):
    """The last count of samples a worker's log shows; a line it is still writing (unbuffered, the count
    may come in a later write than its start) is left for the next look."""
    counts = [int(found[1]) for line in processes.log_tail(log_path, 5).splitlines()
              if (found := re.fullmatch(rf"{PROGRESS_LINE} (\d+)", line))]
    return counts[-1] if counts else 0


def _combine(reports):
    """Worker 0's phases, with every worker's bytes and batches added up."""
    combined = {key: [report[key] for report in reports] for key in ("held_bytes", "weights_digest", "rss_bytes")}
    for name in reports[0]["phases"]:
        phases = [Phase(**report["phases"][name]) for report in reports]
        total = phases[0]
        total.batches = sum(phase.batches for phase in phases)
        total.cpu_seconds = {"workers": sum(phase.cpu_seconds["workers"] for phase in phases)}
        if total.link_bytes is not None:
            total.link_bytes = sum(phase.link_bytes for phase in phases)
        combined[name] = total
    return combined


def _total_samples(setup):
    return sum(intervals * batches for _, intervals, batches, _, _ in setup.phases) * setup.batch_size


def main(argv=None):
    """One MWMS worker: run the worker program ``--function`` of ``--program`` on the setups, write its reports to ``--out``."""
    parser = argparse.ArgumentParser(prog="python -m labkit.allreduce", description=main.__doc__)
    parser.add_argument("--program", required=True, help="a Python file that defines the worker program")
    parser.add_argument("--function", required=True, help="its name, called as function(setups, progress)")
    parser.add_argument("--setup-class", default=f"{__name__}:Setup", help="the setups' dataclass, as module:Class")
    parser.add_argument("--setup", required=True, action="append", help="a setup as JSON (repeat for more)")
    parser.add_argument("--out", required=True, help="where to write this worker's results (JSON)")
    parser.add_argument("--turns", action="store_true", help="wait for each turn (wait_for_turn), in --out's directory")
    args = parser.parse_args(argv)
    children.exit_with_parent_if_started_by_one()
    if args.turns:
        _own_turns.directory = Path(args.out).parent
        _own_turns.worker = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    module, _, name = args.setup_class.partition(":")
    setup_class = getattr(importlib.import_module(module), name)
    setups = [setup_class(**json.loads(setup)) for setup in args.setup]
    namespace = dict(globals())  # the program sees this module's names, as the notebook's imports give them
    exec(compile(Path(args.program).read_text(), args.program, "exec"), namespace)
    done = 0

    def progress(samples):
        nonlocal done
        done += samples
        print(f"{PROGRESS_LINE} {done}", flush=True)  # one write: a reader never sees the line without its count

    reports = namespace[args.function](setups, progress)
    Path(args.out).write_text(json.dumps(reports))


def all_reduce_worker(setups, progress):
    """The program every all-reduce worker runs, each with its own TF_CONFIG: train each setup in lockstep
    with the other workers, each phase in its turn; this worker's report on each (worker 0's also has the
    test accuracies)."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # reads TF_CONFIG; before any other TensorFlow work
    worker = strategy.cluster_resolver.task_id
    data = load_mnist() if any(setup.model == "mlp" for setup in setups) else None
    reports = []
    for setup in setups:
        model, phases = None, {}
        per_call = setup.steps_per_closure * setup.num_workers  # batches of one call, summed over the workers
        for name, intervals, batches_per_interval, slow_worker, seed in setup.phases:
            wait_for_turn()  # until this run gives the next turn (at once in a run that takes none)
            if model is None:  # in the setup's first turn: creating the variables is training's work too
                with strategy.scope():
                    model, optimizer = setup.build()  # a full copy of the variables on every worker
                steps = train.make_train_steps(strategy, model, optimizer, models.mean_cross_entropy,
                                               setup.steps_per_closure)
            iterator = None  # the last phase's stream: its map function (a FuncGraph, a reference cycle) holds this
            gc.collect()     # worker's copy of the training images until a full garbage collection frees it
            iterator = iter(strategy.distribute_datasets_from_function(setup.dataset_fn(data, slow_worker, seed)))
            steps(iterator)  # the warm-up, untimed: tracing, each worker's dataset, the collectives' first handshake
            setup.restart(model, optimizer, seed)
            meter = Meter({"workers": os.getpid()}, [os.getpid()])
            # Only worker 0 evaluates, between its timed intervals; the others wait for it in their next all-reduce.
            recording = train.Recording(
                evaluate=evaluation(setup, model, optimizer, data) if worker == 0 else None, description=None,
                training_log=Phase(batch_size=setup.batch_size), meter=meter,
                on_progress=lambda _: progress(batches_per_interval * setup.batch_size))
            phase = train.timed_intervals(lambda batches: [steps(iterator) for _ in range(batches // per_call)],
                                          intervals * batches_per_interval, batches_per_interval, recording)
            phases[name] = asdict(meter_phase(phase, meter, intervals * batches_per_interval // setup.num_workers))
        reports.append({"phases": phases, "held_bytes": sum(held_bytes(model, optimizer).values()),
                        "weights_digest": weights_digest(model), "rss_bytes": psutil.Process().memory_info().rss})
    return reports


if __name__ == "__main__":
    main()
