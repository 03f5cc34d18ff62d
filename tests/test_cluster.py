"""LocalCluster on real task processes: start, watch, kill, restart, port clashes, logs, state, no orphans."""
import contextlib
import gc
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import weakref
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from labkit import cluster as cluster_module, registry
from labkit.cluster import ClusterStartError, LocalCluster, PortInUseError
from labkit.runtime import loglines, processes
from labkit.runtime.processes import EXIT_PORT_IN_USE
from support.processes import default_ctrl_c, signal_state

pytestmark = pytest.mark.cluster


SQUATTER = textwrap.dedent("""
    import socket, sys, time
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC: an earlier owner's TIME_WAIT is no obstacle
    squatter.bind(("", int(sys.argv[1])))
    squatter.listen()
    print(squatter.getsockname()[1], flush=True)
    time.sleep(600)
""")


@contextlib.contextmanager
def squat(port):
    """Another program listening on ``port`` (0: any free port); yields the port."""
    squatter = subprocess.Popen([sys.executable, "-c", SQUATTER, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        yield int(squatter.stdout.readline())
    finally:
        squatter.kill()
        squatter.wait()


@pytest.fixture(scope="module")
def clashed_start():
    """The module's cluster, started as another program held the first port handed to a task (ps:0's; the
    chief's comes first); also that port and every port the start picked. One worker and one PS: two task
    processes show what three would."""
    picked = []

    def pick_port():
        picked.append(taken if len(picked) == 1 else cluster_module.portpicker.pick_unused_port())
        return picked[-1]
    with pytest.MonkeyPatch.context() as monkeypatch, squat(0) as taken:
        monkeypatch.setattr(cluster_module, "pick_port", pick_port)
        cluster = LocalCluster(num_workers=1, num_ps=1, name="test-lifecycle")
    with cluster:
        yield SimpleNamespace(cluster=cluster, taken=taken, picked=picked)


@pytest.fixture(scope="module")
def small_cluster(clashed_start):
    return clashed_start.cluster


def test_every_task_is_its_own_process_configured_by_its_own_tf_config(small_cluster):
    assert [t.name for t in small_cluster.tasks] == ["ps:0", "worker:0"]
    pids = {task.pid for task in small_cluster.tasks}
    assert len(pids) == 2 and os.getpid() not in pids
    for task in small_cluster.tasks:
        assert task.serving()
        environ = psutil.Process(task.pid).environ()
        assert json.loads(environ["TF_CONFIG"]) == small_cluster.tf_config(task.name)
        assert environ["GRPC_FAIL_FAST"] == "use_caller"


def test_status_repr_and_html_show_every_task(small_cluster):
    rows = small_cluster.status()
    assert [row["alive"] for row in rows] == [True, True]
    assert all(loglines.SERVING in row["last_log_line"] for row in rows)
    text, page = repr(small_cluster), small_cluster._repr_html_()
    for task in small_cluster.tasks:
        assert task.address in text and task.address in page
    assert "all network interfaces" in page


def test_kill_then_restart_a_worker_on_the_same_port(small_cluster):
    worker = small_cluster.task("worker:0")
    old_process, old_pid, port = worker.process, worker.pid, worker.port
    small_cluster.kill("worker:0")
    assert not processes.running(old_pid)
    assert [row["alive"] for row in small_cluster.status()] == [True, False]
    small_cluster.restart("worker:0")
    assert worker.pid != old_pid and worker.port == port
    assert old_process.stdin.closed, "the dead process's stdin pipe was left open (a ResourceWarning at its collection)"
    assert worker.alive() and worker.serving() and worker.restarts == 1


def test_unknown_task_name_is_a_clear_error(small_cluster):
    with pytest.raises(KeyError, match="its tasks are ps:0, worker:0"):
        small_cluster.kill("worker:7")


@pytest.mark.parametrize("kwargs, message", [
    ({"num_workers": 0}, "num_workers must be a whole number >= 1"),
    ({"num_ps": 0}, "num_ps must be a whole number >= 1"),
    ({"num_workers": 1.5}, "num_workers must be a whole number >= 1"),
])
def test_bad_sizes_are_refused_before_any_process_starts(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LocalCluster(name="test-bad", **kwargs)


def test_start_again_does_nothing_while_the_cluster_runs(small_cluster):
    tasks, pids = list(small_cluster.tasks), [task.pid for task in small_cluster.tasks]
    assert small_cluster.start() is small_cluster
    assert small_cluster.tasks == tasks and [task.pid for task in small_cluster.tasks] == pids


def test_its_state_file_is_outside_the_home_cache_while_it_runs(small_cluster):
    assert not registry.state_dir().is_relative_to(Path.home() / ".cache"), "tests must not write into ~/.cache"
    [state] = [s for s in registry.running_clusters() if s["name"] == "test-lifecycle"]
    assert [task["task"] for task in state["tasks"]] == ["ps:0", "worker:0"]


def test_strategy_refuses_a_chief_port_another_program_took(small_cluster):
    with squat(small_cluster.chief_port):
        with pytest.raises(PortInUseError, match=f"chief's port {small_cluster.chief_port}(.|\n)*taken"):
            small_cluster.strategy()


def test_restart_on_a_port_taken_meanwhile_raises_a_public_error(small_cluster):
    worker = small_cluster.task("worker:0")
    small_cluster.kill("worker:0")
    with squat(worker.port):
        with pytest.raises(PortInUseError, match=f"took its port {worker.port}(.|\n)*exited with code 75"):
            small_cluster.restart("worker:0")
        assert not worker.alive()
    small_cluster.restart("worker:0")
    assert worker.serving()


def test_a_taken_port_is_replaced_by_a_free_one(clashed_start):
    """The module's cluster met a taken port as it started: it started again on new ports."""
    cluster, taken = clashed_start.cluster, clashed_start.taken
    assert taken not in [task.port for task in cluster.tasks]
    assert all(task.serving() for task in cluster.tasks)
    assert f"port {taken} is taken by another program" in cluster.logs("ps:0", lines=100), \
        "ps:0 first tried the taken port, and its server said so"
    assert len(clashed_start.picked) == 6, "two rounds of ports: chief, ps:0, worker:0"


def test_a_server_exits_with_the_port_in_use_code_only_for_a_port_clash(monkeypatch, capsys):
    """A port taken before the server starts, or while TensorFlow binds it, exits with EXIT_PORT_IN_USE; any
    other failure to start the server is its own error (an exception: exit code 1), not "port in use".

    ``server.main()`` runs in this process, as ``python -m labkit.runtime.server`` runs it, with
    TensorFlow's ``Server`` class (``tf.distribute.Server``) replaced by each failure.
    """
    import tensorflow as tf
    from tensorflow.python.training import server_lib

    from labkit.runtime import server

    port = cluster_module.pick_port()
    tf_config = {"cluster": {"ps": [f"localhost:{port}"], "worker": ["localhost:1"]}, "task": {"type": "ps", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    monkeypatch.delenv("LABKIT_EXIT_WITH_PARENT", raising=False)
    squatter = socket.socket()

    def fails(*args, **kwargs):
        raise tf.errors.UnknownError(None, None, "out of file descriptors")

    def loses_the_port(*args, **kwargs):  # another program takes the port after the server's check
        squatter.bind(("", port))
        squatter.listen()
        raise tf.errors.UnknownError(None, None, "Address already in use")

    monkeypatch.setattr(server_lib, "Server", fails)
    with pytest.raises(tf.errors.UnknownError, match="out of file descriptors"):
        server.main()
    monkeypatch.setattr(server_lib, "Server", loses_the_port)
    with squatter, pytest.raises(SystemExit) as taken_meanwhile:
        server.main()
    assert taken_meanwhile.value.code == EXIT_PORT_IN_USE
    assert f"port {port} is taken by another program: Address already in use" in capsys.readouterr().out
    monkeypatch.setattr(server_lib, "Server", fails)  # not reached: the taken port is seen first
    with squat(port), pytest.raises(SystemExit) as taken_before:
        server.main()
    assert taken_before.value.code == EXIT_PORT_IN_USE


def test_logs_are_kept_when_asked_or_when_an_exception_ends_the_with_block(tmp_path):
    kept = LocalCluster(name="test-keep", start=False, keep_logs=True)
    kept.stop()
    assert kept.log_dir.is_dir()
    failed = LocalCluster(name="test-keep", start=False)
    failed.__exit__(RuntimeError, RuntimeError("the training failed"), None)
    assert failed.log_dir.is_dir(), "logs stay to be read after a failure"
    given = LocalCluster(name="test-keep", start=False, log_dir=tmp_path / "mine")
    given.stop()
    assert given.log_dir.is_dir(), "a log directory the user gave is never removed"
    shutil.rmtree(kept.log_dir), shutil.rmtree(failed.log_dir)


STATE_READER = textwrap.dedent("""
    import json, sys, time
    path, torn, deadline = sys.argv[1], 0, time.monotonic() + float(sys.argv[2])
    print("reading", flush=True)
    while time.monotonic() < deadline:
        try:
            json.loads(open(path).read())
        except FileNotFoundError:
            pass
        except ValueError:
            torn += 1
    print(torn)
""")


def test_the_state_file_is_never_seen_half_written():
    cluster = LocalCluster(name="test-state", start=False)
    cluster._write_state()
    state_file = registry.state_path(cluster.name, os.getpid())
    reader = subprocess.Popen([sys.executable, "-c", STATE_READER, str(state_file), "3"], stdout=subprocess.PIPE,
                              text=True)
    assert reader.stdout.readline() == "reading\n"
    for _ in range(3000):
        cluster._write_state()
    assert int(reader.stdout.read()) == 0, "another process read a torn state file"
    reader.wait()
    cluster.stop()


def test_status_shows_a_killed_task_its_owner_has_not_reaped_as_dead(tmp_path, monkeypatch):
    """Until its owner reaps it, a killed task is a zombie: its pid still exists, but it runs no more."""
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path))
    task = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    task.kill()
    processes.wait_until(lambda: psutil.Process(task.pid).status() == psutil.STATUS_ZOMBIE, 10,
                         "the killed task to become a zombie")
    registry.state_path("test-zombie", os.getpid()).write_text(json.dumps(
        {"name": "test-zombie", "owner_pid": os.getpid(), "tasks": [{"task": "worker:0", "pid": task.pid}]}))
    try:
        [state] = registry.running_clusters()
        assert state["tasks"][0]["alive"] is False
    finally:
        task.wait()


def test_a_task_that_dies_while_starting_raises_with_its_log(monkeypatch):
    broken = lambda self, task="chief:0": {"cluster": self.cluster_spec, "task": {"type": "worker", "index": 5}}
    monkeypatch.setattr(LocalCluster, "tf_config", broken)
    with pytest.raises(ClusterStartError, match="exited with code 1(.|\n)*bad TF_CONFIG: task index 5 is out of range"):
        LocalCluster(num_workers=1, num_ps=1, name="test-broken")


def test_a_new_cluster_with_the_same_name_stops_the_old_one_and_with_starts_and_stops_it(tmp_path, monkeypatch):
    """Stopping first makes this process a cluster of one again, and logs what leaving took."""
    import tensorflow as tf
    from tensorflow.python.eager import context

    from labkit.runtime import tfruntime

    monkeypatch.setattr(tfruntime, "DISCONNECT_LOG", tmp_path / "disconnect.log")
    first = LocalCluster(num_workers=1, num_ps=1, name="test-rerun")
    first_pids = [task.pid for task in first.tasks]
    second = LocalCluster(num_workers=1, num_ps=1, name="test-rerun", start=False)
    assert [pid for pid in first_pids if processes.running(pid)] == [], "made, the second has stopped the first"
    assert not second.running and second.tasks == []
    with pytest.raises(ClusterStartError, match="not running: call cluster.start()"):
        second.strategy()
    with second:
        assert second.running and all(task.serving() for task in second.tasks)
        log_dir = second.log_dir
        assert (log_dir / "ps-0.log").exists()
        with second.strategy().scope():
            variable = tf.Variable(1.0)
        assert variable.numpy() == 1.0  # read from the parameter server
        addresses = {task.address for task in second.tasks}
    assert not second.running and not log_dir.exists(), "a clean stop removes the logs it made"
    alone = context.context().get_server_def()
    assert [job_def.name for job_def in alone.cluster.job] == ["chief"], \
        "stop() left this process connected to the tasks"
    assert not addresses & {address for job_def in alone.cluster.job for address in job_def.tasks.values()}
    [line] = [line for line in (tmp_path / "disconnect.log").read_text().splitlines() if line.startswith("labkit:")]
    assert line.startswith("labkit: left 2 tasks: garbage collection ") and "update_server_def" in line, line
    collected = weakref.ref(second)
    del second
    gc.collect()
    assert collected() is None, "a stopped cluster must not be kept alive by an exit hook"


def test_a_stop_gives_up_on_tasks_that_do_not_answer_and_this_process_trains_on(tmp_path, monkeypatch):
    """Frozen tasks (SIGSTOP) never answer the closing of their contexts, as tasks on a loaded machine
    were seen not to for 10-50 s: after the patience, stop() stops them instead of waiting."""
    import tensorflow as tf
    from tensorflow.python.eager import context

    from labkit.runtime import tfruntime

    monkeypatch.setattr(tfruntime, "DISCONNECT_LOG", tmp_path / "disconnect.log")
    monkeypatch.setattr(tfruntime, "DISCONNECT_PATIENCE_SECONDS", 1.0)
    frozen = LocalCluster(num_workers=1, num_ps=1, name="test-frozen")
    with frozen.strategy().scope():
        variable = tf.Variable(1.0)
    assert variable.numpy() == 1.0
    pids = [task.pid for task in frozen.tasks]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    frozen.stop()
    assert processes.wait_until_gone(pids, timeout=1) == []
    [line] = [line for line in (tmp_path / "disconnect.log").read_text().splitlines() if line.startswith("labkit:")]
    assert line.endswith("(no answer after 1 s: the tasks were stopped)"), line
    alone = context.context().get_server_def()
    assert [job_def.name for job_def in alone.cluster.job] == ["chief"]
    with LocalCluster(num_workers=1, num_ps=1, name="test-frozen") as again:
        with again.strategy().scope():
            variable = tf.Variable(2.0)
        variable.assign_add(1.0)
        assert variable.numpy() == 3.0


OWNER = textwrap.dedent("""
    import sys, time, labkit
    cluster = labkit.LocalCluster(num_workers=1, num_ps=1, name="orphan-test-" + sys.argv[1])
    print(" ".join(str(task.pid) for task in cluster.tasks), flush=True)
    sys.stdin.readline()  # the test checks the tasks are up, then lets us go on
    time.sleep(600)
""")


def start_owner(how):
    owner = subprocess.Popen([sys.executable, "-c", OWNER, how], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, start_new_session=True, preexec_fn=default_ctrl_c)
    pids = [int(pid) for pid in owner.stdout.readline().split()]
    assert len(pids) == 2 and all(processes.running(pid) for pid in pids)
    owner.stdin.write("go on\n")
    owner.stdin.flush()
    return owner, pids


# Two ways cover every way an owner ends. "sigkill": it dies at once, and each task sees its stdin pipe
# close. "ctrl-c": KeyboardInterrupt, an uncaught exception like any other, ends the interpreter, whose
# exit hook stops the cluster. Killing its process group delivers what "sigkill" does: the tasks run in
# sessions of their own, so that SIGKILL reaches the owner alone (a Jupyter kernel restart is this case).
@pytest.mark.parametrize("how", ["sigkill", "ctrl-c"])
def test_no_task_outlives_its_owner(how):
    owner, pids = start_owner(how)
    if how == "sigkill":
        owner.kill()
    elif how == "ctrl-c":
        state = signal_state(owner.pid)
        owner.send_signal(signal.SIGINT)
    try:
        owner.wait(timeout=30)
    except subprocess.TimeoutExpired:
        owner.kill()
        pytest.fail(f"the owner did not exit within 30 s of {how}" + (f" (its signals: {state})" if how == "ctrl-c" else ""))
    assert processes.wait_until_gone(pids, timeout=15) == []


def test_a_server_started_by_hand_keeps_serving_with_stdin_closed():
    """On a real machine (nohup, systemd) stdin is /dev/null: that must not read as 'parent gone'."""
    port = cluster_module.pick_port()
    tf_config = {"cluster": {"ps": [f"localhost:{port}"], "worker": ["localhost:1"]},
                 "task": {"type": "ps", "index": 0}}
    env = {key: value for key, value in os.environ.items() if key != "LABKIT_EXIT_WITH_PARENT"}
    server = subprocess.Popen([sys.executable, "-m", processes.SERVER_MODULE], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**env, "TF_CONFIG": json.dumps(tf_config)})
    try:
        assert any(loglines.SERVING in line for line in server.stdout)
        assert processes.serving(server.pid, port), "the server exited although nobody asked it to"
    finally:
        server.kill()
        server.wait()
