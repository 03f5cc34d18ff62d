"""The processes labkit starts: start, wait until serving, stop, read their logs.

Every task of a cluster (and the coordinator and evaluator programs) is started
by ``labkit.runtime.children``, which adds the pipe that makes it exit with its parent, and
then lives here. One place owns their life cycle:

- ``start_command``: start a command in its own session (output to a pipe or a log file);
- ``wait_until``: the one poll loop: call a condition until it holds, or raise TimeoutError;
- ``wait_until_serving``: return once the process says in its log that it serves, listens on its
  port and accepts a connection; raise with the end of its log if it exited or hung instead;
- ``stop``: SIGTERM (with SIGCONT for a suspended process), a grace period, then SIGKILL (``psutil.wait_procs``);
  ``stop_others`` does the same to processes that another process started;
- ``wait_until_gone``: wait until processes no longer run (a zombie does not);
- ``log_tail``: the last lines of a log, read from the end of the file;
- ``stop_at_exit``: one interpreter-exit hook for everything still running.
"""
import atexit
import contextlib
import errno
import os
import signal
import socket
import subprocess
import threading
import time
import weakref
from pathlib import Path

import psutil

from labkit.runtime import loglines

# The module that runs one ps or worker task: `python -m labkit.runtime.server`.
SERVER_MODULE = "labkit.runtime.server"
POLL_SECONDS = 0.05
STOP_GRACE_SECONDS = 5.0
TAIL_BLOCK_BYTES = 8192
# labkit.runtime.server's exit code for "another program holds my port": the starter may pick another and retry.
# (Here, not in server.py: `python -m labkit.runtime.server` must not be imported as a module first.)
EXIT_PORT_IN_USE = 75
HIDE_PSS = "LABKIT_HIDE_PSS"  # set to 1 to count memory as on macOS (USS), where PSS does not exist


class ServingError(RuntimeError):
    """A started process exited, or did not serve in time. The message ends with its log tail."""

    def __init__(self, message, returncode=None):
        super().__init__(message)
        self.returncode = returncode  # the exit code, or None if it is still running (it hung)


class Process(psutil.Popen):
    """A started child process: ``subprocess.Popen`` and ``psutil.Process`` in one, with ``stop()``."""

    def stop(self, grace_seconds=STOP_GRACE_SECONDS):
        stop([self], grace_seconds)

    def send_signal(self, sig):
        """As ``subprocess.Popen`` does: signalling a process that already exited does nothing."""
        if self.returncode is None:
            with contextlib.suppress(psutil.NoSuchProcess):
                super().send_signal(sig)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)


def start_command(command, env=None, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=None):
    """Start ``command`` in its own session; it is stopped at interpreter exit if still running.

    With the default ``stdout``, read its output as text from ``process.stdout``.
    """
    process = Process(command, env=env, stdin=stdin, stdout=stdout, stderr=stderr,
                      text=stdout is subprocess.PIPE, start_new_session=True)
    return stop_at_exit(process)


def running(pid):
    """True if process ``pid`` exists and is not a zombie (a killed child its parent has not reaped yet)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def carrying(variable, wanted):
    """The live processes whose environment sets ``variable`` to a value for which ``wanted(value)`` holds: the
    processes of one run, marked by a token every process it starts inherits."""
    found = []
    for process in psutil.process_iter(["environ"]):
        value = (process.info["environ"] or {}).get(variable)
        if value is not None and wanted(value) and running(process.pid):
            found.append(process)
    return found


def _tcp_sockets(pid):
    try:
        return psutil.Process(pid).net_connections(kind="tcp")
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return []


def listening(pid, port):
    """True if process ``pid`` has a TCP socket listening on ``port``."""
    return any(s.status == psutil.CONN_LISTEN and s.laddr.port == port for s in _tcp_sockets(pid))


def connected(pid, port):
    """True if process ``pid`` has a TCP connection established to ``port`` (of a peer on this machine)."""
    return any(s.status == psutil.CONN_ESTABLISHED and s.raddr and s.raddr.port == port for s in _tcp_sockets(pid))


def accepts_connections(port, timeout=0.5, host="127.0.0.1"):
    """True if something accepts a TCP connection on ``port`` of ``host`` (by default, this machine)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def serving(pid, port):
    """True once process ``pid`` itself listens on ``port`` and a connection to it is accepted."""
    return listening(pid, port) and accepts_connections(port)


def port_is_free(port):
    """True if a server could bind ``port`` on every interface now (as TensorFlow's gRPC server does)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC: TIME_WAIT is no clash
        try:
            probe.bind(("", port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def wait_until_serving(process, log_path, port=None, name="the task", timeout=90.0):
    """Return once ``process`` serves; raise ``ServingError`` with its log tail if it exits or hangs first.

    Serving: its log holds the line ``labkit.runtime.server`` prints once it serves and, given a
    ``port``, this very process listens on it and accepts a connection. (A process in another network
    namespace is given no port: its sockets cannot be seen or reached from here.) The port opens a
    moment before the line is printed, so the port alone would return while the log still ends in
    TensorFlow's start-up messages. A restarted task appends to its log, so for it the line of its
    first process counts: it serves once its port does.
    """
    def ready():
        logged = Path(log_path).exists() and loglines.SERVING in Path(log_path).read_text(errors="replace")
        return logged and (port is None or serving(process.pid, port))

    def ready_or_exited():
        if ready():
            return True
        code = process.poll()
        if code is not None:
            raise ServingError(f"{name} exited with code {code} while starting. "
                               f"Last lines of {log_path}:\n{log_tail(log_path)}", code)
        return False

    wait_until(ready_or_exited, timeout, f"{name} to serve{f' on port {port}' if port else ''}",
               error=lambda message: ServingError(f"{message}. Last lines of {log_path}:\n{log_tail(log_path)}"))


def wait_until(condition, timeout, what, interval=POLL_SECONDS, error=TimeoutError):
    """Call ``condition()`` every ``interval`` seconds until it returns a true value; return that value.

    If ``timeout`` seconds pass first, raise ``error(message)``, the message naming ``what`` (e.g.
    "ps:0 to serve") and the timeout: ``error`` is an exception class, or a function that adds
    what helps (a log's last lines). To stop waiting early (the process died), let ``condition`` raise.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise error(f"timed out after {round(timeout, 1):g} s waiting for {what}")
        time.sleep(interval)


def cpu_seconds(pid):
    """CPU time a process has used so far (user + system), or 0.0 if it is gone."""
    try:
        times = psutil.Process(pid).cpu_times()
        return times.user + times.system
    except psutil.NoSuchProcess:
        return 0.0


def memory_measure():
    """How to count a process's memory: "pss" where the system reports it (Linux) and HIDE_PSS is unset, else "uss".

    PSS divides each shared page among the processes that map it, so it adds up over processes; USS
    (the private pages alone) understates a process; RSS counts shared libraries once per process."""
    has_pss = "pss" in psutil.Process().memory_full_info()._fields
    return "pss" if has_pss and not os.environ.get(HIDE_PSS) else "uss"


def memory_bytes(pid, measure):
    """A process's memory counted by ``measure`` ("pss", "uss" or "rss"), or None if it is gone."""
    try:
        return getattr(psutil.Process(pid).memory_full_info(), measure)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


class Watcher:
    """While its ``with`` block runs, a thread calls ``poll()`` every ``interval`` seconds, until ``poll``
    returns a true value. Subclasses say what to watch in ``poll``. If ``poll`` raises, the watch ends and
    the block raises that error when it ends (unless the block raised one of its own): a thread's error
    would otherwise be lost."""

    def __init__(self, interval):
        self.interval, self._stop, self._error = interval, threading.Event(), None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, error_type, error, traceback):
        self._stop.set()
        self._thread.join()
        if self._error is not None and error_type is None:
            raise self._error

    def _run(self):
        try:
            while not self._stop.wait(self.interval):
                if self.poll():
                    return
        except Exception as error:  # raised in the block's own thread, by __exit__
            self._error = error

    def poll(self):
        raise NotImplementedError


def stop(processes, grace_seconds=STOP_GRACE_SECONDS):
    """Stop processes this one started: SIGTERM (and SIGCONT, so that a suspended one acts on it), then
    SIGKILL to those still running after ``grace_seconds``.

    Returns once every one has exited (each ``returncode`` is set); closes their stdin pipes,
    which also tells a ``labkit.runtime.children`` child that its parent is gone.
    """
    _terminate_then_kill([process for process in processes if process.poll() is None], grace_seconds,
                         wait=_reap, kill_grace_seconds=None)
    for process in processes:
        if process.stdin:
            process.stdin.close()


def stop_others(processes, grace_seconds=STOP_GRACE_SECONDS):
    """Stop ``psutil.Process``es that another process started, as ``stop`` does. Only their parent can reap
    them: one counts as stopped once it is a zombie. Returns those still running ``grace_seconds`` after SIGKILL."""
    return _terminate_then_kill([process for process in processes if running(process.pid)], grace_seconds,
                                wait=_still_running_after, kill_grace_seconds=grace_seconds)


def _terminate_then_kill(processes, grace_seconds, wait, kill_grace_seconds):
    """SIGTERM and SIGCONT; SIGKILL to those ``wait(processes, grace_seconds)`` returns as still running;
    then ``wait`` for those (``kill_grace_seconds`` None: until they exit)."""
    for process in processes:
        _signal(process.terminate)
        _signal(process.resume)  # a process stopped by SIGSTOP or Ctrl-Z leaves SIGTERM pending until continued
    still_running = wait(processes, grace_seconds)
    for process in still_running:
        _signal(process.kill)
    return wait(still_running, kill_grace_seconds)


def _reap(children, timeout):
    """Wait for ``children`` to exit and reap them; return those still running after ``timeout`` s (None: no limit)."""
    return psutil.wait_procs(children, timeout=timeout)[1]


def _still_running_after(processes, timeout):
    """Those of ``processes`` (another's) still running after ``timeout`` s; a zombie does not run."""
    running_pids = wait_until_gone([process.pid for process in processes], timeout)
    return [process for process in processes if process.pid in running_pids]


def wait_until_gone(pids, timeout):
    """Wait until no process of ``pids`` runs (a zombie does not); return those still running after ``timeout`` s."""
    def still_running():
        return [pid for pid in pids if running(pid)]

    with contextlib.suppress(TimeoutError):
        wait_until(lambda: not still_running(), timeout, "the processes to exit")
    return still_running()


def _signal(send):
    """``send()`` a signal; nothing if the process exited in between, or is not ours to signal (it changed its
    user: it stays running, and ``stop_others`` returns it as such)."""
    with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
        send()


def log_tail(path, lines=10):
    """The last ``lines`` lines of a log file ("" if it does not exist yet), read from its end."""
    try:
        with open(path, "rb") as log:
            end = log.seek(0, os.SEEK_END)
            tail = b""
            while end > 0 and tail.count(b"\n") <= lines:
                start = max(0, end - TAIL_BLOCK_BYTES)
                log.seek(start)
                tail = log.read(end - start) + tail
                end = start
    except FileNotFoundError:
        return ""
    return "\n".join(tail.decode(errors="replace").splitlines()[-lines:])


# ----- one interpreter-exit hook for whatever is still running -------------------------
_to_stop_at_exit = weakref.WeakSet()


def stop_at_exit(owner):
    """Call ``owner.stop()`` when the interpreter exits, unless it was garbage-collected before."""
    _to_stop_at_exit.add(owner)
    return owner


@atexit.register
def _stop_everything_left():
    """Owners first (a cluster stops its tasks together), then the processes left, together too."""
    owners = list(_to_stop_at_exit)
    for owner in owners:
        if not isinstance(owner, Process):
            owner.stop()
    stop([owner for owner in owners if isinstance(owner, Process)])


__all__ = ["EXIT_PORT_IN_USE", "SERVER_MODULE", "Process", "ServingError", "start_command", "wait_until", "wait_until_serving",
           "serving", "listening", "connected", "accepts_connections", "port_is_free", "stop", "stop_others",
           "wait_until_gone", "log_tail", "stop_at_exit", "carrying"]
