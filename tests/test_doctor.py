"""`labkit doctor --workshop`: every item passes here, a real cluster trains, and each check fails on a bad machine."""
import os
import subprocess
import sys

import psutil
import pytest

from labkit import doctor, traffic


@pytest.mark.cluster
def test_the_workshop_preflight_passes_here_and_leaves_nothing_running(tmp_path):
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    # Its own cluster registry: clusters of other jobs on this machine are not "left running" by this run.
    env = dict(os.environ, LABKIT_STATE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "labkit.cli", "doctor", "--workshop"],
                          capture_output=True, text=True, timeout=300, env=env)
    lines = done.stdout.splitlines()
    items = {line.split()[1]: line.split()[0] for line in lines if line[:4] in ("PASS", "WARN", "FAIL", "NOTE")}
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(items) == set(doctor.WORKSHOP_CHECKS), lines
    assert "FAIL" not in items.values(), done.stdout
    assert items["cluster"] == "PASS" and "steps, loss" in done.stdout
    assert "ready for the workshop" in lines[-1]
    assert {child.pid for child in psutil.Process().children(recursive=True)} <= before
    assert not list(tmp_path.iterdir()), "the pre-flight's cluster is still registered as running"


@pytest.mark.parametrize("check, bad_input", [
    (doctor.python_version, (3, 10)),
    (doctor.python_version, (3, 14)),
    (doctor.pinned_versions, {"tensorflow": "2.20.0"}),
    (doctor.keras_2, "Keras 3.11.0: PS model.fit will fail; import labkit first"),
    (doctor.memory, 1.5 * 2**30),
    (doctor.leftover_clusters, [{"name": "default", "owner_pid": 4242, "tasks": []}]),
])
def test_each_check_fails_on_a_bad_machine(check, bad_input):
    status, detail = check(bad_input)
    assert status == doctor.FAIL, detail


def test_limits_worth_knowing_are_warnings(monkeypatch):
    assert doctor.cores(1)[0] == doctor.WARN
    assert doctor.memory(3 * 2**30)[0] == doctor.WARN
    assert doctor.memory(8 * 2**30)[0] == doctor.PASS
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))  # `ss` hidden, as on macOS
    assert doctor.traffic_counters() == (doctor.WARN, traffic.UNAVAILABLE)


def test_a_check_that_breaks_is_a_fail_line_and_the_rest_still_run():
    def broken():
        raise RuntimeError("no such thing")
    lines = []
    ok = doctor.workshop({"first": broken, "second": lambda: (doctor.PASS, "fine")}, out=lines.append)
    assert not ok
    assert lines[1].startswith("FAIL  first") and "no such thing" in lines[1]
    assert lines[2].startswith("PASS  second")
    assert "1 item(s) FAILED" in lines[-1]

