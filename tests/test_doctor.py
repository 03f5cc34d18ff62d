"""`labkit doctor --workshop`: every item passes here, a real cluster trains, and each check fails on a bad machine."""
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import psutil
import pytest

from labkit import traffic
from labkit.tools import doctor


@pytest.mark.cluster
def test_the_workshop_preflight_passes_here_and_leaves_nothing_running(tmp_path):
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    # Its own cluster registry: clusters of other jobs on this machine are not "left running" by this run.
    env = dict(os.environ, LABKIT_STATE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "labkit.tools.cli", "doctor", "--workshop"],
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
    peak = doctor.largest_peak(doctor.THREE_HOUR_PLAN)[1] * 1e6
    assert doctor.memory(peak - 0.1 * 2**30)[0] == doctor.FAIL, "below the 3-hour plan's largest peak"
    assert doctor.memory(peak + 0.5 * 2**30)[0] == doctor.WARN
    assert doctor.memory(peak + 1.5 * 2**30)[0] == doctor.PASS
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



PEAKS = {"00_welcome": {"peak_pss_mb": 700}, "03_custom_training_loop": {"peak_pss_mb": 4800},
         "ex1_basic_cluster": {"peak_pss_mb": 3900}}


def test_memory_is_judged_against_the_largest_measured_peak_of_the_chosen_notebooks():
    status, detail = doctor.memory(4 * 2**30, ("00", "ex1"), PEAKS)
    assert status == doctor.WARN and "ex1_basic_cluster needs 3.6 GiB" in detail and "the most of 00 ex1" in detail
    status, detail = doctor.memory(4 * 2**30, ("00", "03", "ex1"), PEAKS)
    assert status == doctor.FAIL and "03_custom_training_loop needs 4.5 GiB" in detail and "make lab-small" in detail
    with pytest.raises(ValueError, match="no measured notebook starts with '11'; measured: 00_welcome"):
        doctor.memory(4 * 2**30, ("00", "11"), PEAKS)


def test_the_peaks_table_covers_every_notebook_and_solution_within_5_gb():
    root = Path(__file__).resolve().parents[1]
    peaks = json.loads(doctor.PEAKS_TABLE.read_text())["notebooks"]
    shipped = {path.stem for folder in ("notebooks", "exercises") for path in (root / folder).glob("*.ipynb")}
    assert set(peaks) == shipped, "run `make measurements` (scripts/measurements.py) for the missing ones"
    assert [name for name, entry in peaks.items() if not entry["ok"]] == [], "every run at the defaults succeeds"
    assert all(entry["mnist_source"] == "timing-standin" for entry in peaks.values()), "measure with full-size MNIST"
    over = {name: entry["peak_pss_mb"] for name, entry in peaks.items() if entry["peak_pss_mb"] > 5000}
    assert not over, f"over 5 GB at the learner defaults: {over}"


@pytest.mark.cluster
def test_doctor_refuses_an_unknown_notebook_before_running_anything():
    done = subprocess.run([sys.executable, "-m", "labkit.tools.cli", "doctor", "--workshop", "--notebooks", "00", "99"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "labkit doctor: no measured notebook starts with '99'" in done.stderr
    assert "PASS" not in done.stdout


def test_a_learners_install_without_the_test_tools_passes_the_pinned_versions_check():
    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    learner = dict(pin.split("#")[0].strip().split("==") for pin in project["dependencies"])
    assert doctor.pinned_versions(learner)[0] == doctor.PASS
    assert doctor.pinned_versions(dict(learner, papermill="missing"))[0] == doctor.FAIL
