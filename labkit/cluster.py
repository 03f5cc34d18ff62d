"""LocalCluster: a real parameter-server cluster made of local processes.

Every task (each worker, each parameter server) is its own OS process running
``python -m labkit.runtime.server``, configured only by its own TF_CONFIG, exactly as
on a real machine. The process that owns the LocalCluster is the coordinator.

No orphans: each task is a ``labkit.runtime.children`` process, which exits when its
stdin pipe closes, however the owner dies (exception, Ctrl-C, SIGKILL, kernel
restart); clusters are also stopped at interpreter exit and when a new cluster
with the same name starts (``labkit.registry``). ``labkit.runtime.processes`` starts, waits for and stops them.
"""
import functools
import html
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import portpicker

import labkit
from labkit import registry
from labkit.runtime import children, isolation, processes, tfconfig, tfruntime

HOST = "localhost"
PORT_ATTEMPTS = 3

class ClusterStartError(RuntimeError):
    """A task process died or never became reachable while the cluster started."""


class PortInUseError(ClusterStartError):
    """A port this cluster reserved was taken by another program."""


def pick_port():
    """A free TCP port on this machine."""
    return portpicker.pick_unused_port()


@dataclass
class Task:
    """One task process of the cluster."""

    type: str
    index: int
    port: int
    log_path: Path
    process: processes.Process = None
    started_at: float = 0.0
    restarts: int = field(default=0)

    @property
    def name(self):
        return f"{self.type}:{self.index}"

    @property
    def address(self):
        return f"{HOST}:{self.port}"

    @property
    def pid(self):
        return self.process.pid if self.process else None

    def alive(self):
        """True while the task's process runs. Not ``poll()`` alone: while another thread reaps a task it
        killed (a fault injector's), ``poll()`` still says running; the process is then a zombie."""
        return self.process is not None and self.process.poll() is None and processes.running(self.pid)

    def serving(self):
        """True once this task's own process listens on its port and accepts a connection."""
        return self.alive() and processes.serving(self.pid, self.port)

    def log_tail(self, lines=10):
        """The last lines of this task's log (read from the end of the file)."""
        return processes.log_tail(self.log_path, lines)


class LocalCluster:
    """A PS cluster of local processes: ``num_workers`` workers and ``num_ps`` parameter servers.

    The cluster spec also lists a chief, the coordinator, at a reserved port, as a
    multi-machine TF_CONFIG would: the process that calls ``strategy()`` listens there.
    With ``chief=False`` TensorFlow picks the coordinator's port at each connection, and
    reconnecting in the same process (after a PS failure, say) then breaks checkpointing.
    Use it as a context manager (which starts it, if made with ``start=False``), or call
    ``stop()`` when done. A clean stop removes the log directory it made, unless
    ``keep_logs=True``; leaving a ``with`` block by an exception keeps it, to read.
    A ``log_dir`` you give is never removed.
    """

    def __init__(self, num_workers=2, num_ps=1, chief=True, name="default",
                 log_dir=None, start=True, ready_timeout=90.0, keep_logs=False):
        if not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"num_workers must be a whole number >= 1, got {num_workers!r}: "
                             "a PS cluster needs at least one worker to run steps.")
        if not isinstance(num_ps, int) or num_ps < 1:
            raise ValueError(f"num_ps must be a whole number >= 1, got {num_ps!r}: "
                             "a PS cluster needs at least one parameter server to hold variables.")
        children.check_task_limit(num_workers + num_ps, f"{num_workers} workers and {num_ps} parameter servers")
        self.num_workers, self.num_ps, self.chief, self.name = num_workers, num_ps, chief, name
        self.ready_timeout, self.keep_logs = ready_timeout, keep_logs
        self._own_log_dir = log_dir is None
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix=f"labkit-{name}-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.ready_seconds = None
        self.tasks = []
        self.chief_port = None
        registry.replace_live(name, self)
        if start:
            self.start()

    # ----- the cluster description ---------------------------------------
    @property
    def cluster_spec(self):
        """The ``cluster`` part of TF_CONFIG: task type -> list of "host:port"."""
        spec = {}
        if self.chief_port:
            spec["chief"] = [f"{HOST}:{self.chief_port}"]
        for task in self.tasks:
            spec.setdefault(task.type, []).append(task.address)
        return spec

    def tf_config(self, task="chief:0"):
        """The TF_CONFIG (a dict) of one task, e.g. ``"worker:1"``."""
        task_type, task_index = tfconfig.parse_task(task)
        return tfconfig.build(self.cluster_spec, task_type, task_index)

    def task(self, name):
        """The Task called ``name`` ("worker:0", "ps:1", ...)."""
        for task in self.tasks:
            if task.name == name:
                return task
        raise KeyError(f"no task {name!r} in this cluster; its tasks are "
                       f"{', '.join(t.name for t in self.tasks)}.")

    # ----- lifecycle ------------------------------------------------------
    @property
    def running(self):
        return any(task.alive() for task in self.tasks)

    def start(self):
        """Start every task in parallel and return once all accept connections.

        Does nothing if the cluster already runs. A task whose port another program took
        meanwhile makes the cluster start again on new ports (up to PORT_ATTEMPTS times).
        """
        if self.running:
            return self
        began = time.monotonic()
        self.log_dir.mkdir(parents=True, exist_ok=True)  # again, if a stop removed it
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self._assign_ports()
            for task in self.tasks:
                self._launch(task)
            try:
                self._wait_until_serving(self.tasks)
                break
            except processes.ServingError as error:
                self._stop_tasks()
                if error.returncode != processes.EXIT_PORT_IN_USE:
                    raise ClusterStartError(str(error)) from None
                if attempt == PORT_ATTEMPTS:
                    raise PortInUseError(f"another program took the picked ports {attempt} times in a row; "
                                         f"is something grabbing ports on this machine? The last clash:\n{error}"
                                         ) from None
            except BaseException:
                self._stop_tasks()
                raise
        self.ready_seconds = time.monotonic() - began
        processes.stop_at_exit(self)
        self._write_state()
        _say_once_if_exposed()
        return self

    def kill(self, task):
        """Kill one task with SIGKILL, as a crashed machine would die."""
        target = self.task(task)
        if target.alive():
            target.process.kill()
            target.process.wait()
        self._write_state()

    def restart(self, task):
        """Restart one task on the same port (killing it first if needed); wait until it serves."""
        target = self.task(task)
        self.kill(task)
        target.restarts += 1
        self._launch(target)
        try:
            self._wait_until_serving([target])
        except processes.ServingError as error:
            self._write_state()
            if error.returncode == processes.EXIT_PORT_IN_USE:
                raise PortInUseError(f"{target.name} cannot restart: another program took its port "
                                     f"{target.port} while it was down. Stop that program and call "
                                     f"restart({task!r}) again, or start a new cluster.\n{error}") from None
            raise ClusterStartError(str(error)) from None
        self._write_state()

    def stop(self, keep_logs=None):
        """Stop every task (SIGTERM, then SIGKILL after a grace period). Safe to call twice.

        This process's TensorFlow leaves the cluster first, so TensorFlow objects freed later
        do not message dead tasks (see ``tfruntime.disconnect``). Removes the log directory
        this cluster made, unless ``keep_logs`` (default: as given when the cluster was made).
        """
        try:
            if self.running:
                tfruntime.disconnect([task.address for task in self.tasks], stop_tasks=self._stop_tasks)
        finally:
            self._stop_tasks()
        registry.forget(self.name, os.getpid(), self)
        if self._own_log_dir and not (self.keep_logs if keep_logs is None else keep_logs):
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, error_type, error, traceback):
        self.stop(keep_logs=True if error_type else None)

    # ----- TensorFlow helpers ----------------------------------------------
    def resolver(self):
        """A cluster resolver for the coordinator: this process, listed as chief:0 if the spec has a chief."""
        import tensorflow as tf

        task_type, task_id = ("chief", 0) if self.chief else (None, None)
        return tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(self.cluster_spec), task_type=task_type, task_id=task_id,
            rpc_layer="grpc")

    def strategy(self, **kwargs):
        """A ParameterServerStrategy connected to this cluster (kwargs go to the strategy; ``tfruntime.connect``).

        This process then listens at the chief's address: raises ``PortInUseError`` if
        another program took that port since the cluster started.
        """
        if not self.running:
            raise ClusterStartError("this cluster is not running: call cluster.start(), or use "
                                    "`with LocalCluster(...) as cluster:`, before making its strategy.")
        if self.chief_port and not (processes.port_is_free(self.chief_port)
                                    or processes.listening(os.getpid(), self.chief_port)):
            raise PortInUseError(f"the chief's port {self.chief_port}, where this process must listen as the "
                                 "coordinator, was taken by another program after the cluster started. "
                                 "Stop that program, or stop this cluster and start a new one (new ports).")
        dead = [task.name for task in self.tasks if not task.alive()]
        if dead:
            raise ClusterStartError(f"{', '.join(dead)} is dead, and a strategy cannot connect to a cluster with a "
                                    f"dead task (TensorFlow would wait forever): restart it first, "
                                    f"cluster.restart({dead[0]!r}).")
        return tfruntime.connect(self.resolver(), **kwargs)

    # ----- watching -----------------------------------------------------------
    def status(self):
        """One dict per task: name, address, pid, alive, uptime (s), restarts, last log line."""
        now = time.monotonic()
        return [{"task": t.name, "address": t.address, "pid": t.pid, "alive": t.alive(),
                 "uptime_seconds": round(now - t.started_at, 1) if t.alive() else 0.0,
                 "restarts": t.restarts, "last_log_line": t.log_tail(1)} for t in self.tasks]

    def logs(self, task, lines=20):
        """The last ``lines`` lines of one task's log file."""
        return self.task(task).log_tail(lines)

    def __repr__(self):
        rows = [f"LocalCluster {self.name!r}: {self.num_workers} worker(s), {self.num_ps} ps, "
                f"logs in {self.log_dir}"]
        for row in self.status():
            state = f"alive {row['uptime_seconds']:.0f}s" if row["alive"] else "dead"
            rows.append(task_line(row["task"], row["address"], row["pid"], state))
        return "\n".join(rows)

    def _repr_html_(self):
        head = "".join(f"<th>{h}</th>" for h in ("task", "address", "pid", "alive", "uptime", "last log line"))
        body = "".join(
            f"<tr><td>{r['task']}</td><td>{r['address']}</td><td>{r['pid']}</td>"
            f"<td>{'&#9989; alive' if r['alive'] else '&#10060; dead'}</td><td>{r['uptime_seconds']:.0f} s</td>"
            f"<td><code>{html.escape(r['last_log_line'][-100:])}</code></td></tr>" for r in self.status())
        return (f"<b>LocalCluster {html.escape(self.name)}</b> &mdash; logs in "
                f"<code>{html.escape(str(self.log_dir))}</code>"
                f"<table><tr>{head}</tr>{body}</table>"
                "<small>TF servers listen on all network interfaces without authentication.</small>")

    # ----- internals --------------------------------------------------------
    def _assign_ports(self):
        self.chief_port = pick_port() if self.chief else None
        tasks = [("ps", i) for i in range(self.num_ps)] + [("worker", i) for i in range(self.num_workers)]
        self.tasks = [Task(task_type, index, pick_port(), self.log_dir / f"{task_type}-{index}.log")
                      for task_type, index in tasks]

    def _launch(self, task):
        if task.process is not None:  # a restart: reap the dead process and close its stdin pipe
            processes.stop([task.process])
        task.process = children.start_program(processes.SERVER_MODULE, tf_config=self.tf_config(task.name),
                                              log_path=task.log_path)
        task.started_at = time.monotonic()

    def _wait_until_serving(self, tasks):
        """Wait for tasks started together: one deadline for all of them."""
        deadline = time.monotonic() + self.ready_timeout
        for task in tasks:
            processes.wait_until_serving(task.process, task.log_path, task.port, task.name,
                                         timeout=max(0.0, deadline - time.monotonic()))

    def _stop_tasks(self):
        processes.stop([task.process for task in self.tasks if task.process])

    def _write_state(self):
        """Record this cluster for `labkit status` in other processes."""
        registry.record({"name": self.name, "owner_pid": os.getpid(), "log_dir": str(self.log_dir),
                         "cluster": self.cluster_spec, "network": isolation.network_status()[0],
                         "tasks": [{"task": t.name, "address": t.address, "pid": t.pid} for t in self.tasks]})


def task_line(task, address, pid, state):
    """One task as a line of a text table: ``LocalCluster``'s repr and ``labkit status`` show these."""
    return f"  {task:<9} {address:<16} pid {pid!s:<7} {state}"


@functools.cache
def _say_once_if_exposed():
    """One line, once per process, when its tasks are not in a private network namespace: in a kernel under
    the cell, in a program on stderr (its stdout may be read by other programs)."""
    network, why = isolation.network_status()
    if network == isolation.ISOLATED:
        return
    exposed = (f"labkit: the task ports are reachable from other machines, unauthenticated ({why}): use a network "
               f"you trust, or the firewall steps in {isolation.FIREWALL_STEPS}.")
    if labkit._in_a_jupyter_kernel():
        print(exposed)
    else:
        print(f"{exposed} On Linux, `python -m labkit.runtime.isolation --inside -- python SCRIPT` runs a script "
              "in a private network namespace.", file=sys.stderr)


__all__ = ["LocalCluster", "ClusterStartError", "PortInUseError", "Task", "pick_port", "task_line"]
