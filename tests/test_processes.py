"""labkit.runtime.processes on small real processes (no TensorFlow): wait until serving, stop, log tails, exit hook."""
import os
import signal
import socket
import subprocess
import sys
import textwrap

import psutil
import pytest

from labkit.runtime import loglines, processes

PYTHON = sys.executable
IGNORES_SIGTERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"


def start(code, log_path):
    with open(log_path, "ab") as log:
        return processes.start_command([PYTHON, "-c", code], stdout=log)


def test_log_tail_gives_the_last_lines_and_reads_only_the_end(tmp_path):
    log = tmp_path / "task.log"
    assert processes.log_tail(log) == "", "no log yet: nothing to show"
    log.write_text("".join(f"line {i}\n" for i in range(5000)))
    assert processes.log_tail(log, 3) == "line 4997\nline 4998\nline 4999"
    huge = tmp_path / "huge.log"
    with open(huge, "wb") as file:  # a sparse file of 1 TiB: reading it whole would fail at once
        file.truncate(2**40)
        file.seek(2**40)
        file.write(b"early\nserving at localhost:1\nlast line\n")
    assert processes.log_tail(huge, 2) == "serving at localhost:1\nlast line"


def test_wait_until_serving_returns_once_the_process_listens_on_its_port_and_says_so(tmp_path):
    """The port opens before the line is printed: a process that listens but has not said so does not serve."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        port = probe.getsockname()[1]
    assert processes.port_is_free(port)
    log, say_so = tmp_path / "server.log", tmp_path / "say-so"
    server = start(f"import os, socket, time\ns = socket.socket(); s.bind(('', {port})); s.listen()\n"
                   f"while not os.path.exists({str(say_so)!r}): time.sleep(0.01)\n"
                   f"print('{loglines.SERVING} localhost:{port}', flush=True); time.sleep(60)", log)
    try:
        processes.wait_until(lambda: processes.serving(server.pid, port), 30, "the port to open")
        with pytest.raises(processes.ServingError, match="timed out"):  # the line will not come until said so
            processes.wait_until_serving(server, log, port, timeout=0)
        say_so.touch()
        processes.wait_until_serving(server, log, port, timeout=30)
        assert loglines.SERVING in processes.log_tail(log, 1)
        assert processes.serving(server.pid, port) and not processes.port_is_free(port)
    finally:
        server.stop()
    assert server.returncode == -signal.SIGTERM and processes.port_is_free(port)


def test_a_process_that_exits_while_starting_raises_with_its_code_and_log(tmp_path):
    failing = start("import sys; print('bad TF_CONFIG: no task', flush=True); sys.exit(3)", tmp_path / "t.log")
    with pytest.raises(processes.ServingError, match="worker:0 exited with code 3(.|\n)*bad TF_CONFIG") as caught:
        processes.wait_until_serving(failing, tmp_path / "t.log", port=1, name="worker:0", timeout=30)
    assert caught.value.returncode == 3


def test_a_process_that_never_serves_raises_after_the_timeout(tmp_path):
    hanging = start("import time; print('still importing', flush=True); time.sleep(60)", tmp_path / "t.log")
    try:  # its line written first: on a loaded machine Python's own start can outlast the 0.3 s
        processes.wait_until(lambda: "still importing" in (tmp_path / "t.log").read_text(), 60, "its first line")
        with pytest.raises(processes.ServingError, match="timed out after 0.3 s waiting for ps:0 to serve. Last lines(.|\n)*still importing") as caught:
            processes.wait_until_serving(hanging, tmp_path / "t.log", name="ps:0", timeout=0.3)
        assert caught.value.returncode is None and hanging.poll() is None
    finally:
        hanging.stop()


def test_wait_until_returns_the_value_of_a_condition_that_becomes_true():
    answers = iter([None, 0, "", "ready"])
    assert processes.wait_until(lambda: next(answers), timeout=30, what="the answer", interval=0.01) == "ready"


def test_wait_until_names_what_it_awaited_and_for_how_long_when_it_never_comes():
    calls = []
    with pytest.raises(TimeoutError, match=r"^timed out after 0.2 s waiting for ps:0 to serve$"):
        processes.wait_until(lambda: calls.append(1), timeout=0.2, what="ps:0 to serve", interval=0.01)
    assert len(calls) > 2, "the condition is polled until the deadline"
    with pytest.raises(processes.ServingError, match=r"^timed out after 0.1 s waiting for ps:0 to serve; its log: x$"):
        processes.wait_until(lambda: False, timeout=0.1, what="ps:0 to serve",
                             error=lambda message: processes.ServingError(f"{message}; its log: x"))


def test_stop_kills_a_process_that_ignores_sigterm_after_the_grace_period(tmp_path):
    stubborn = processes.start_command([PYTHON, "-c", IGNORES_SIGTERM])
    assert stubborn.stdout.readline().strip() == "ready"
    polite = start("import time; time.sleep(60)", tmp_path / "p.log")
    processes.stop([stubborn, polite], grace_seconds=0.5)
    assert stubborn.returncode == -signal.SIGKILL and polite.returncode == -signal.SIGTERM
    assert not processes.running(stubborn.pid) and not processes.running(polite.pid)


def test_stop_ends_a_suspended_process_at_once_not_after_the_grace_period(tmp_path):
    # A SIGTERM handler, as in TensorFlow's processes: the signal waits until the process runs again.
    suspended = processes.start_command([PYTHON, "-c", "import signal, sys, time; "
                                         "signal.signal(signal.SIGTERM, lambda *_: sys.exit(7)); "
                                         "print('ready', flush=True); time.sleep(60)"])
    assert suspended.stdout.readline().strip() == "ready"
    os.kill(suspended.pid, signal.SIGSTOP)  # as Ctrl-Z does, or a machine too busy to schedule it
    processes.stop([suspended], grace_seconds=30)
    assert suspended.returncode == 7, "it waited out the grace period and was killed"


HANDLES_SIGTERM = ("import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(7)); "
                   "print('ready', flush=True); time.sleep(60)")
# Another owner: starts a process that exits 7 on SIGTERM and one that ignores it, prints their pids once
# both are ready, and reaps them (printing their exit codes) only once its stdin closes.
OTHER_OWNER = textwrap.dedent(f"""
    import subprocess, sys
    owned = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
             for code in ({HANDLES_SIGTERM!r}, {IGNORES_SIGTERM!r})]
    assert [p.stdout.readline().strip() for p in owned] == ["ready", "ready"]
    print(*(p.pid for p in owned), flush=True)
    sys.stdin.read()
    print(*(p.wait() for p in owned), flush=True)
""")


def test_stop_others_stops_another_owners_processes_and_counts_their_zombies_as_stopped():
    owner = subprocess.Popen([PYTHON, "-c", OTHER_OWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    suspended, stubborn = map(int, owner.stdout.readline().split())
    os.kill(suspended, signal.SIGSTOP)
    # A long grace for the suspended one: it returns as soon as that one exits (or waits the grace out).
    assert processes.stop_others([psutil.Process(suspended)], grace_seconds=30) == []
    left = processes.stop_others([psutil.Process(stubborn)], grace_seconds=0.5)
    assert left == [], "a zombie its owner has not reaped yet counts as stopped"
    owner.stdin.close()
    assert owner.stdout.readline().split() == ["7", str(-signal.SIGKILL)], "SIGTERM (after SIGCONT), then SIGKILL"
    owner.wait()


NOT_OURS = textwrap.dedent("""
    import os, sys, psutil
    from labkit.runtime import processes
    os.setgroups([]); os.setgid(65534); os.setuid(65534)  # now nobody: root's processes are not ours to signal
    print(*[process.pid for process in processes.stop_others([psutil.Process(int(sys.argv[1]))], grace_seconds=0.5)])
""")


@pytest.mark.root
def test_stop_others_returns_a_process_it_may_not_signal_as_still_running():
    """What labkit grade relies on: a process it cannot stop is reported as still running, never raised."""
    if os.geteuid() != 0:
        pytest.skip("needs root (to start a process that a process turned nobody may not signal)")
    sleeper = processes.start_command(["sleep", "60"])
    try:
        stopper = subprocess.run([PYTHON, "-c", NOT_OURS, str(sleeper.pid)], capture_output=True, text=True, timeout=60)
        assert stopper.returncode == 0, stopper.stderr
        assert stopper.stdout.split() == [str(sleeper.pid)] and sleeper.poll() is None
    finally:
        sleeper.stop()


EXITING_OWNER = textwrap.dedent("""
    import atexit, sys
    registered, register = [], atexit.register
    atexit.register = lambda function, *args, **kwargs: registered.append(function) or register(function, *args, **kwargs)
    from labkit.runtime import processes
    hooks = len(registered)
    started = [processes.start_command([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(3)]
    print(" ".join(str(p.pid) for p in started), len(registered) - hooks, flush=True)
""")


def test_one_exit_hook_stops_every_process_left_running():
    owner = subprocess.run([PYTHON, "-c", EXITING_OWNER], capture_output=True, text=True, timeout=60)
    *pids, new_hooks = map(int, owner.stdout.split())
    assert len(pids) == 3 and new_hooks == 0, "starting processes must not add exit hooks"
    assert processes.wait_until_gone(pids, timeout=1.0) == [], "the exit hook stops what the owner left running"


def test_a_watcher_polls_while_its_block_runs_and_stops_when_poll_says_so():
    class CountTo(processes.Watcher):
        def __init__(self, limit):
            super().__init__(interval=0.01)
            self.limit, self.polls = limit, 0

        def poll(self):
            self.polls += 1
            return self.polls >= self.limit

    with CountTo(3) as watcher:
        processes.wait_until(lambda: not watcher._thread.is_alive(), 10, "the watcher to stop by itself")
    assert watcher.polls == 3
    with CountTo(10**9) as endless:
        processes.wait_until(lambda: endless.polls >= 2, 10, "two polls")
    assert not endless._thread.is_alive(), "leaving the block stops the thread"


def test_a_killed_child_not_yet_reaped_is_not_running():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert processes.running(child.pid)
    child.kill()
    processes.wait_until(lambda: not processes.running(child.pid), 10, "the killed child to become a zombie")
    assert child.returncode is None, "the test needs the child unreaped: it is a zombie now"
    child.wait()
    assert not processes.running(child.pid)


def test_connected_sees_this_process_s_connection_to_a_port_while_it_is_open():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert processes.listening(os.getpid(), port) and not processes.connected(os.getpid(), port)
        client = socket.create_connection(("127.0.0.1", port))
        assert processes.connected(os.getpid(), port)
        client.close()
        assert not processes.connected(os.getpid(), port)


def test_the_processes_of_a_run_are_found_by_the_token_in_their_environment():
    token = f"run-{os.getpid()}"
    sleep = [PYTHON, "-c", "import time; time.sleep(60)"]
    marked = subprocess.Popen(sleep, env=dict(os.environ, LABKIT_TEST_TOKEN=token))
    other = subprocess.Popen(sleep, env=dict(os.environ, LABKIT_TEST_TOKEN="another run"))
    try:
        assert [p.pid for p in processes.carrying("LABKIT_TEST_TOKEN", lambda value: value == token)] == [marked.pid]
    finally:
        for child in (marked, other):
            child.kill()
            child.wait()
    assert processes.carrying("LABKIT_TEST_TOKEN", lambda value: value == token) == []
