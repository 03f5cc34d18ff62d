"""The `labkit` command, run as a learner runs it."""
import json
import re
import signal
import subprocess
import sys

import pytest

from support import default_ctrl_c, signal_state, wait_until_gone

LABKIT = [sys.executable, "-m", "labkit.cli"]


def labkit(*args, timeout=300):
    return subprocess.run([*LABKIT, *args], capture_output=True, text=True, timeout=timeout)


def test_help_lists_every_subcommand():
    done = labkit("--help")
    for command in ("up", "status", "tf-config", "doctor", "demo"):
        assert command in done.stdout


def test_tf_config_prints_a_valid_config_for_the_task():
    config = json.loads(labkit("tf-config", "worker:1", "--json", "--workers", "3").stdout)
    assert config["task"] == {"type": "worker", "index": 1}
    assert len(config["cluster"]["worker"]) == 3


def test_tf_config_for_a_missing_task_is_a_clear_error():
    done = labkit("tf-config", "worker:5")
    assert done.returncode != 0 and "out of range" in done.stderr


def test_doctor_reports_keras_2_and_the_security_fact():
    done = labkit("doctor")
    assert "Keras 2 (tf_keras 2.21" in done.stdout
    assert "all network interfaces" in done.stdout


@pytest.mark.cluster
def test_up_serves_until_ctrl_c_and_status_sees_it():
    up = subprocess.Popen([*LABKIT, "up", "--workers", "1"], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True, preexec_fn=default_ctrl_c)
    printed = []
    for line in up.stdout:
        printed.append(line)
        if "Press Ctrl-C" in line:
            break
    text = "".join(printed)
    assert "worker:0: TF_CONFIG=" in text and "ps:0: TF_CONFIG=" in text
    status = labkit("status").stdout.split("cluster 'cli-up'")[1].split("\ncluster ")[0]
    rows = [line for line in status.splitlines() if line.strip().startswith(("ps:0", "worker:0"))]
    assert len(rows) >= 2 and all(row.rstrip().endswith("alive") for row in rows)
    pids = [int(pid) for pid in re.findall(r"pid (\d+)\s+alive", status)]
    state = signal_state(up.pid)
    up.send_signal(signal.SIGINT)
    try:
        assert up.wait(timeout=60) == 0
    except subprocess.TimeoutExpired:
        up.kill()
        pytest.fail(f"`labkit up` did not stop within 60 s of Ctrl-C (its signals: {state})")
    assert wait_until_gone(pids) == []


@pytest.mark.cluster
def test_demo_trains_mnist_to_90_percent():
    done = labkit("demo", "--target", "0.90", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    accuracy = float(re.search(r"test accuracy: ([0-9.]+)", done.stdout).group(1))
    assert accuracy >= 0.90
