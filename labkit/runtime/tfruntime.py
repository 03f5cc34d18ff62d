"""Keep TensorFlow's C++ runtime quiet, and connect this process to a cluster and away from it safely.

The C++ runtime prints noise a learner did not ask for; ``connect`` and ``disconnect`` join this
process to a cluster and leave it without hanging or crashing.

Two sources of red lines in a notebook, both written by C++ straight to the
process's stderr (ipykernel forwards that file descriptor into the notebook):

- start-up lines (oneDNN, "Could not find cuda drivers", cuInit) printed once,
  at ``import tensorflow`` and at the first device listing, before any log level
  applies. ``import_quietly`` sends them to ``STARTUP_LOG`` instead.
- "Failed to remove function remotely", "Unable to close remote context" and gRPC
  "failed to connect": TensorFlow objects (tf.functions, variables, strategies)
  freed *after* their cluster stopped still message the dead tasks.
  ``disconnect`` shrinks this process's cluster to itself while the tasks still
  run, so the remote contexts close cleanly and later frees stay local; what
  TensorFlow says while it does that goes to ``DISCONNECT_LOG``.
"""
import contextlib
import gc
import logging
import os
import sys
import threading
import time
from pathlib import Path

from labkit.runtime import processes

STARTUP_LOG = Path.home() / ".cache" / "labkit" / "tensorflow-startup.log"
DISCONNECT_LOG = STARTUP_LOG.with_name("tensorflow-disconnect.log")
# Closing the contexts on the tasks normally takes well under 2 s; on a loaded machine it was seen
# to wait 10-50 s for a task's answer. After this long, disconnect stops the tasks instead of waiting.
DISCONNECT_PATIENCE_SECONDS = 5.0


def import_quietly():
    """Import TensorFlow and list its devices with file descriptor 2 sent to ``STARTUP_LOG``."""
    STARTUP_LOG.parent.mkdir(parents=True, exist_ok=True)
    with open(STARTUP_LOG, "wb") as log:
        try:
            with _file_descriptor_2_to(log):
                import tensorflow as tf

                tf.config.list_physical_devices()
        except BaseException:
            print(f"TensorFlow failed to start; its own messages are in {STARTUP_LOG}:\n"
                  f"{STARTUP_LOG.read_text(errors='replace')}", file=sys.stderr)
            raise


@contextlib.contextmanager
def _file_descriptor_2_to(file):
    """Send file descriptor 2, where TensorFlow's C++ code writes, to the open ``file`` while the block runs."""
    sys.stderr.flush()
    saved_stderr = os.dup(2)
    os.dup2(file.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved_stderr, 2)
        os.close(saved_stderr)


class Messages:
    """What TensorFlow printed inside a ``messages_to`` block, kept in ``log_path``."""

    def __init__(self, log_path):
        self.log_path = Path(log_path)
        self.lines = []

    def summary(self):
        """One line for the notebook: how many lines TensorFlow printed, the first error, and where to read them."""
        if not self.lines:
            return "TensorFlow printed nothing."
        errors = [line for line in self.lines if "Error" in line or "UNAVAILABLE" in line]
        first = f"; first error: {errors[0].strip()[:160]}" if errors else ""
        return f"TensorFlow printed {len(self.lines)} lines, kept in {self.log_path}{first}"


@contextlib.contextmanager
def messages_to(log_path):
    """Send TensorFlow's log records and C++ stderr lines to ``log_path`` while the block runs.

    A killed task makes TensorFlow print dozens of lines (gRPC errors, cancelled closures, stack
    notes); in a notebook that injects failures on purpose they belong in a file, counted.
    Yields a ``Messages``, filled when the block ends.
    """
    messages = Messages(log_path)
    messages.log_path.parent.mkdir(parents=True, exist_ok=True)
    start = messages.log_path.stat().st_size if messages.log_path.exists() else 0
    logger = logging.getLogger("tensorflow")
    saved_handlers, saved_propagate = logger.handlers[:], logger.propagate
    with open(messages.log_path, "ab") as log, open(log.fileno(), "w", closefd=False) as text:
        handler = logging.StreamHandler(text)
        handler.setFormatter(logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
        logger.handlers, logger.propagate = [handler], False
        try:
            # TensorFlow's C++ lines, and Python's own (e.g. "Exception ignored in ... __del__")
            with _file_descriptor_2_to(log), contextlib.redirect_stderr(text):
                yield messages
        finally:
            text.flush()
            logger.handlers, logger.propagate = saved_handlers, saved_propagate
    with open(messages.log_path, "rb") as log:
        log.seek(start)
        messages.lines = log.read().decode(errors="replace").splitlines()


def disconnect(task_addresses, stop_tasks):
    """If this process's TensorFlow is connected to the cluster of these tasks ("host:port"),
    make this process a cluster of one. Call it while the tasks still run, before stopping them.

    First the garbage collector frees TensorFlow functions in reference cycles (datasets, packed
    loops), while the tasks that hold them still answer; freed later, they would message dead tasks
    (``free_unreachable_functions_before_reconnecting``).

    ``update_server_def`` keeps this process's own gRPC server (TensorFlow can neither stop nor
    rebind it) and closes the contexts on the removed tasks, waiting for each task's answer. If
    they have not all answered after ``DISCONNECT_PATIENCE_SECONDS``, ``stop_tasks()`` is called:
    the closing then fails at once, which TensorFlow handles. What each part took is a line in ``DISCONNECT_LOG``.
    """
    if "tensorflow" not in sys.modules:
        return
    from tensorflow.core.protobuf import tensorflow_server_pb2
    from tensorflow.python.eager import context

    connected = context.context().get_server_def()
    if connected is None or not set(task_addresses) & _addresses(connected):
        return
    alone = tensorflow_server_pb2.ServerDef()
    alone.CopyFrom(connected)
    alone.cluster.Clear()
    alone.cluster.job.add(name=connected.job_name).tasks[connected.task_index] = _own_address(connected)
    # Work still in flight for the departing tasks (a coordinator's per-worker resources) can fail
    # as they go; TensorFlow's complaints about it go to DISCONNECT_LOG, not to the notebook.
    with messages_to(DISCONNECT_LOG):
        began = time.perf_counter()
        free_unreachable_functions_before_reconnecting()
        collected = time.perf_counter()
        patience, gave_up = DISCONNECT_PATIENCE_SECONDS, []

        def stop_silent_tasks():
            gave_up.append(f" (no answer after {patience:g} s: the tasks were stopped)")
            stop_tasks()
        impatient = threading.Timer(patience, stop_silent_tasks)
        impatient.start()
        try:
            context.context().update_server_def(alone)
        finally:
            impatient.cancel()
            impatient.join()
        # One line per disconnect, to tell which part a slow cluster.stop() spent its time in.
        print(f"labkit: left {len(task_addresses)} tasks: garbage collection {collected - began:.2f} s, "
              f"update_server_def {time.perf_counter() - collected:.2f} s{''.join(gave_up)}", file=sys.stderr)


def free_unreachable_functions_before_reconnecting():
    """Run the garbage collector now, right before this process's cluster changes (a new strategy,
    a disconnect, a job rebuilt after a failure).

    TensorFlow functions caught in reference cycles (datasets, packed loops of an earlier strategy
    or job) are freed only when the collector runs, and each then messages the tasks it ran on.
    Freed while ``update_server_def`` rebuilds the connection, they crashed the process (a
    segfault a stress run found after worker restarts); freed now, the tasks still answer.
    The collector runs in a thread of its own: an error a finalizer raises (a dead task's executor)
    then holds that thread's frames, not the caller's (a cluster's ``strategy``), so whatever keeps such
    errors (pytest records them until the test ends) does not keep the caller's objects alive.
    """
    collector = threading.Thread(target=gc.collect, name="labkit-collect-before-reconnecting")
    collector.start()
    collector.join()


def connect(resolver, timeout=60.0, **options):
    """A ParameterServerStrategy on ``resolver``'s cluster (``options`` go to the strategy), once every
    worker and PS accepts connections: how every coordinator of the kit connects.

    TensorFlow's strategy waits forever while any task of its cluster is down, so a process that
    connects to a cluster with a dead worker or PS hangs. This waits at most ``timeout`` seconds,
    then raises a TimeoutError that names the tasks that do not answer. Before connecting it stops
    this process's earlier coordinators (``stop_earlier_coordinators``: one may still be reconnecting
    a restarted worker) and frees unreachable functions.
    """
    import tensorflow as tf

    spec = resolver.cluster_spec()
    addresses = {f"{task_type}:{index}": spec.task_address(task_type, index)
                 for task_type in ("worker", "ps") if task_type in spec.jobs for index in spec.task_indices(task_type)}

    def silent():
        return [name for name, address in addresses.items()
                if not processes.accepts_connections(int(address.rpartition(":")[2]), host=address.rpartition(":")[0])]

    processes.wait_until(lambda: not silent(), timeout, "every worker and parameter server to accept connections",
                         interval=0.2, error=lambda message: TimeoutError(
                             f"{message}: {', '.join(silent())} did not answer. A strategy cannot connect to a "
                             "cluster with a dead task (TensorFlow would wait forever): restart it "
                             "(LocalCluster.restart(task), or the cluster manager's way), then build the job again."))
    stop_earlier_coordinators()
    free_unreachable_functions_before_reconnecting()
    return tf.distribute.ParameterServerStrategy(resolver, **options)


def stop_earlier_coordinators(timeout=30.0):
    """Before a new strategy connects: stop every coordinator of this process whose worker-failure thread
    still runs, and wait for it. One reconnecting a dead worker is in ``update_server_def`` until the task
    is back; an idle one would enter it at the next failure. Its call and the new strategy's at once
    crash the process (``stop_reconnecting``). A new connection makes the earlier coordinators unusable
    anyway. Raises a RuntimeError that says what to do if one still waits after ``timeout`` seconds.
    """
    from tensorflow.python.distribute.coordinator.cluster_coordinator import ClusterCoordinator

    earlier = [found for found in gc.get_objects() if isinstance(found, ClusterCoordinator)
               and found._cluster.failure_handler._preemption_handler_thread.is_alive()]  # noqa: SLF001
    for coordinator in earlier:
        stop_reconnecting(coordinator)
    if not all([stop_coordinator(coordinator, timeout) for coordinator in earlier]):
        raise RuntimeError("an earlier coordinator is still reconnecting a dead task, and a new connection now "
                           "could crash this process: restart the dead tasks (LocalCluster.restart) and try "
                           "again, or stop the cluster and start a new one.")


def stop_reconnecting(coordinator):
    """Tell a ``ClusterCoordinator`` that will not be used again to stop reconnecting dead workers.

    While a worker is dead, the coordinator's worker-failure thread calls ``update_server_def`` to
    reconnect it, and that call blocks until the dead tasks answer again. Left alone after a
    parameter server failure, it completed while the dead tasks restarted and a new strategy
    connected: two ``update_server_def`` calls at once crashed the process (a segfault). Returns at
    once; the thread ends when its current call does (``stop_coordinator`` waits for it). TensorFlow
    offers no public way to do this (its own ``stop()`` waits for a lock that call holds).
    """
    handler = coordinator._cluster.failure_handler  # noqa: SLF001
    handler._should_preemption_thread_run = False  # noqa: SLF001
    handler._cluster_due_for_update_or_finish.set()  # noqa: SLF001


def stop_coordinator(coordinator, timeout=30.0):
    """Stop a ``ClusterCoordinator`` that will not be used again, once its worker-failure thread has
    ended (``stop_reconnecting``); False if the thread still runs after ``timeout`` seconds (it waits
    for a task that is still dead): then nothing is stopped, and a new connection is not safe."""
    stop_reconnecting(coordinator)
    handler_thread = coordinator._cluster.failure_handler._preemption_handler_thread  # noqa: SLF001
    handler_thread.join(timeout)
    if handler_thread.is_alive():
        return False
    coordinator._cluster.stop()  # noqa: SLF001
    return True


def _addresses(server_def):
    return {address for job_def in server_def.cluster.job for address in job_def.tasks.values()}


def _own_address(server_def):
    [job_def] = [job_def for job_def in server_def.cluster.job if job_def.name == server_def.job_name]
    return job_def.tasks[server_def.task_index]
