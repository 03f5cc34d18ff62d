"""The `labkit` command, run as a learner runs it."""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys

import pytest

import labkit as labkit_package
from labkit.runtime import isolation, processes
from labkit.tools import cli
from support.processes import default_ctrl_c, signal_state

pytestmark = pytest.mark.cluster

LABKIT = [sys.executable, "-m", "labkit.tools.cli"]


def labkit(*args, timeout=300):
    return subprocess.run([*LABKIT, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    """A state directory of this test's own: no other program's clusters are seen or stopped."""
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path / "clusters"))
    return tmp_path / "clusters"


def test_help_lists_the_commands_in_the_order_a_learner_meets_them():
    listed = re.findall(r"^    ([a-z-]+)", labkit("--help").stdout, flags=re.MULTILINE)
    learner_order = ["doctor", "demo", "up", "status", "tf-config", "stop", "exercises", "sweep", "bench", "export"]
    assert [command for command in listed if command in learner_order] == learner_order


def test_the_command_imports_tensorflow_and_nbformat_only_for_a_command_that_uses_them():
    """`labkit status`, `stop`, `--help` and bad input answer in a second, not after TensorFlow's seconds-long
    import or nbformat's (its jsonschema builds a grammar at import)."""
    imported = subprocess.run([sys.executable, "-c", "import sys; from labkit.tools import cli; cli.build_parser(); "
                               "print(sorted(name for name in ('tensorflow', 'tf_keras', 'nbformat', 'jsonschema') "
                               "if name in sys.modules))"],
                              capture_output=True, text=True, timeout=120)
    assert imported.stdout.strip() == "[]", imported.stdout + imported.stderr


def subparsers(parser, prefix="labkit"):
    """(name, parser) of every command and subcommand, depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from subparsers(sub, f"{prefix} {name}")


def missing_help(parser):
    """What lacks help text or an example in ``parser`` and its subcommands (empty: nothing)."""
    missing = []
    for name, sub in [("labkit", parser), *subparsers(parser)]:
        if not sub.description or "example:" not in (sub.epilog or ""):
            missing.append(f"{name}: description or example")
        missing += [f"{name} {action.dest}" for action in sub._actions
                    if not isinstance(action, argparse._SubParsersAction) and not action.help]
    return missing


def test_every_command_and_option_has_help_and_every_command_an_example():
    assert missing_help(cli.build_parser()) == []


def test_the_help_check_finds_an_option_without_help():
    parser = cli.build_parser()
    parser.add_argument("--undocumented")
    assert missing_help(parser) == ["labkit undocumented"]


def test_version():
    done = labkit("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"labkit {labkit_package.__version__}"


def test_tf_config_without_a_running_cluster_says_it_shows_an_example(state_dir):
    done = labkit("tf-config", "worker:1")
    assert done.stdout.startswith("An EXAMPLE cluster") and "no labkit cluster is running" in done.stdout
    assert "worker    1      localhost:2224  <- this process" in done.stdout


def test_tf_config_prints_a_valid_config_for_the_task(state_dir):
    done = labkit("tf-config", "worker:1", "--json", "--workers", "3")
    config = json.loads(done.stdout)
    assert config["task"] == {"type": "worker", "index": 1}
    assert len(config["cluster"]["worker"]) == 3
    assert "EXAMPLE" in done.stderr


def test_tf_config_for_a_missing_task_is_a_clear_error(state_dir):
    done = labkit("tf-config", "worker:5")
    assert done.returncode != 0 and "out of range" in done.stderr


def test_stop_with_nothing_running_says_so(state_dir):
    done = labkit("stop")
    assert done.returncode == 0 and done.stdout.strip() == "no running labkit clusters"
    done = labkit("stop", "demo", "--all")
    assert done.returncode != 0 and "not both" in done.stderr


OWNER = """import sys, labkit
cluster = labkit.LocalCluster(num_workers=1, num_ps=1, name="stop-me")
print("ready", flush=True)
sys.stdin.read()  # a learner's kernel, idle: runs until its stdin closes
"""


def test_tf_config_explains_the_running_cluster_and_stop_stops_its_tasks_not_its_owner(state_dir):
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "ready"
        [state_file] = state_dir.glob("stop-me-*.json")
        state = json.loads(state_file.read_text())
        worker_address = state["tasks"][1]["address"]

        explained = labkit("tf-config", "worker:0").stdout
        assert explained.startswith(f"The running cluster 'stop-me' (owner pid {owner.pid})")
        assert f"worker    0      {worker_address}  <- this process" in explained
        assert "EXAMPLE" in labkit("tf-config", "worker:0", "--ps", "2").stdout

        wrong_name = labkit("stop", "demo")
        assert wrong_name.returncode != 0 and "running: stop-me" in wrong_name.stderr
        done = labkit("stop", "stop-me")
        assert done.returncode == 0 and "ps:0, worker:0" in done.stdout, done.stderr
        assert processes.wait_until_gone([task["pid"] for task in state["tasks"]], timeout=15) == []
        assert owner.poll() is None, "stop must not end the program that owns the cluster"
        assert labkit("status").stdout.strip() == "no running labkit clusters"
    finally:
        owner.stdin.close()
        owner.wait(timeout=60)


def test_doctor_reports_keras_2_and_the_security_fact(capsys):
    """Run in this process: a fresh interpreter would import TensorFlow once more for the same lines
    (that the command selects Keras 2 in a fresh interpreter, `labkit demo`'s model.fit shows)."""
    cli.main(["doctor"])
    printed = capsys.readouterr().out
    assert "Keras 2 (tf_keras 2.21" in printed
    assert "all network interfaces" in printed


def start_up(**env):
    """`labkit up --workers 1` as a terminal runs it; returns the process and what it printed until it serves."""
    up = subprocess.Popen([*LABKIT, "up", "--workers", "1"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True, preexec_fn=default_ctrl_c, env={**os.environ, **env})
    printed = []
    for line in up.stdout:
        printed.append(line)
        if "Press Ctrl-C" in line:
            break
    return up, "".join(printed)


def cli_up_rows():
    """`labkit status`'s part on the cluster of `labkit up`: its network line and task rows."""
    return labkit("status").stdout.split("cluster 'cli-up'")[1].split("\ncluster ")[0]


def refused_from_here(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return False
    except ConnectionRefusedError:
        return True


def test_up_serves_until_ctrl_c_and_status_sees_it():
    """Run from a terminal, `labkit up` puts its tasks in a private network namespace (the kernel's isolation):
    this machine's own loopback, outside it, finds nothing at their ports."""
    up, text = start_up()
    assert "worker:0: TF_CONFIG=" in text and "ps:0: TF_CONFIG=" in text
    status = cli_up_rows()
    rows = [line for line in status.splitlines() if line.strip().startswith(("ps:0", "worker:0"))]
    assert len(rows) >= 2 and all(row.rstrip().endswith("alive") for row in rows)
    pids = [int(pid) for pid in re.findall(r"pid (\d+)\s+alive", status)]
    if isolation.why_not_isolated() is None:
        assert "in a private network namespace" in status and "nsenter --target" in text
        ports = [int(port) for port in re.findall(r"localhost:(\d+)\s+pid", status)]
        assert [port for port in ports if not refused_from_here(port)] == []
    state = signal_state(up.pid)
    up.send_signal(signal.SIGINT)
    try:
        assert up.wait(timeout=60) == 0
    except subprocess.TimeoutExpired:
        up.kill()
        pytest.fail(f"`labkit up` did not stop within 60 s of Ctrl-C (its signals: {state})")
    assert processes.wait_until_gone(pids, timeout=15) == []


def test_stop_reaches_the_tasks_of_an_isolated_up_which_then_exits():
    up, _ = start_up()
    try:
        pids = [int(pid) for pid in re.findall(r"pid (\d+)\s+alive", cli_up_rows())]
        done = labkit("stop", "cli-up")
        assert done.returncode == 0 and "ps:0, worker:0" in done.stdout, done.stderr
        assert processes.wait_until_gone(pids, timeout=15) == []
        assert up.wait(timeout=30) == 0 and "every task has exited" in up.stdout.read()
    finally:
        up.kill()


def test_a_program_whose_tasks_are_exposed_says_so_once_on_stderr_and_an_isolated_one_says_nothing():
    program = "from labkit import cluster\ncluster._say_once_if_exposed()\ncluster._say_once_if_exposed()\nprint('done')"
    exposed = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "LABKIT_NETWORK": "exposed: LABKIT_ISOLATION=off"})
    assert exposed.stdout == "done\n"
    assert exposed.stderr.count("reachable from other machines, unauthenticated (LABKIT_ISOLATION=off)") == 1
    assert "isolation --inside -- python SCRIPT" in exposed.stderr
    isolated = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "LABKIT_NETWORK": "isolated"})
    assert (isolated.stdout, isolated.stderr) == ("done\n", "")


def test_demo_trains_mnist_on_a_cluster_to_its_target():
    """One worker and 2 of the default 8 epochs: the command's whole path, at a quarter of its default training
    (the offline subset's test accuracy then is about 0.90)."""
    done = labkit("demo", "--workers", "1", "--epochs", "2", "--target", "0.85", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "cluster of 1 worker(s) and 1 ps ready" in done.stdout
    accuracy = float(re.search(r"test accuracy: ([0-9.]+)", done.stdout).group(1))
    assert accuracy >= 0.85
