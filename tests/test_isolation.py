"""Kernels in a private network namespace (labkit.runtime.isolation): the task ports of a kernel started
the way `make lab` starts it cannot be reached on this machine's network address; with isolation off
they can; Jupyter's interrupt still reaches the kernel, and nothing is left running."""
import contextlib
import json
import shutil
import subprocess
import sys

import psutil
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager, start_new_kernel

from labkit.runtime import isolation, processes
from labkit.tools import doctor, kernelspec

NEEDS_AN_ADDRESS = pytest.mark.skipif(not isolation.host_addresses(),
                                      reason="this machine has no network address besides loopback to try")


def test_make_kernel_registers_the_launcher():
    argv = KernelSpecManager().get_kernel_spec("pslab").argv
    assert argv[1:] == kernelspec.LAUNCHER, f"the pslab kernel starts with {argv}: run `make kernel`"


def test_isolation_off_is_said_with_its_reason(monkeypatch):
    monkeypatch.setenv(isolation.SWITCH_VARIABLE, "off")
    assert isolation.why_not_isolated() == "LABKIT_ISOLATION=off"


@pytest.mark.parametrize("tried, why, says", [
    ({"192.0.2.2:4000": "refused", "192.0.2.2:4001": "refused"}, "", "private network namespace"),
    ({"192.0.2.2:4000": "refused", "192.0.2.2:4001": "accepted"}, "LABKIT_ISOLATION=off",
     "Exposed (LABKIT_ISOLATION=off): 1 of 2 connections"),
    ({"192.0.2.2:4000": "no answer"}, "macOS", "something else (a firewall?) refuses them"),
    ({}, "", "no network address besides loopback"),
])
def test_the_exposure_sentence_follows_the_connections_tried(tried, why, says):
    assert says in isolation.exposure(tried, why)


@pytest.mark.cluster
@NEEDS_AN_ADDRESS
def test_an_isolated_kernels_task_ports_refuse_this_machines_address():
    status, detail = doctor.security()
    assert status == doctor.PASS and "private network namespace" in detail, detail


@pytest.mark.cluster
@NEEDS_AN_ADDRESS
def test_with_isolation_off_the_same_ports_accept_and_the_doctor_warns(monkeypatch):
    monkeypatch.setenv(isolation.SWITCH_VARIABLE, "off")  # the kernel inherits it from this process
    status, detail = doctor.security()
    assert status == doctor.WARN and "Exposed (LABKIT_ISOLATION=off)" in detail, detail


@pytest.mark.cluster
def test_an_isolated_kernel_is_interrupted_and_leaves_nothing_behind():
    manager, client = start_new_kernel(kernel_name="pslab", startup_timeout=60)
    launcher = psutil.Process(manager.provisioner.process.pid)
    processes = [launcher, *launcher.children(recursive=True)]
    try:
        printed = []
        client.execute_interactive("import os; print(os.environ['LABKIT_NETWORK'])", timeout=30,
                                   output_hook=lambda message: printed.append(message["content"].get("text", "")))
        assert "".join(printed).strip() == isolation.ISOLATED
        client.execute("import time; print('asleep', flush=True); time.sleep(60)")
        while "asleep" not in client.get_iopub_msg(timeout=20)["content"].get("text", ""):
            pass  # the kernel has not reached the sleep yet
        manager.interrupt_kernel()
        reply = client.get_shell_msg(timeout=20)
        reply = reply if reply["msg_type"] == "execute_reply" else client.get_shell_msg(timeout=20)
        assert reply["content"]["ename"] == "KeyboardInterrupt"
    finally:
        client.stop_channels()
        manager.shutdown_kernel()
    gone, alive = psutil.wait_procs(processes, timeout=10)
    assert not alive, f"still running after the kernel's shutdown: {alive}"


# A Jupyter client that starts a kernel, prints its launcher's pid, then waits to be killed. (The kernel's tasks
# exit with it: tests/test_cluster.py, its owner killed.)
CLIENT_KILLED_LATER = """
from jupyter_client.manager import start_new_kernel
manager, client = start_new_kernel(kernel_name="pslab", startup_timeout=60)
print(manager.provisioner.process.pid, flush=True)
input()
"""


@pytest.mark.cluster
def test_a_killed_jupyter_client_leaves_no_launcher_or_kernel_behind():
    client = subprocess.Popen([sys.executable, "-c", CLIENT_KILLED_LATER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    started = []
    try:
        launcher = psutil.Process(int(client.stdout.readline()))
        started = [launcher, *launcher.children(recursive=True)]
        assert any("ipykernel_launcher" in process.cmdline() for process in started), f"no kernel among {started}"
        client.kill()  # as SIGKILL or a crash ends JupyterLab or papermill: no shutdown request
        client.wait()
        gone, alive = psutil.wait_procs(started, timeout=20)
        assert not alive, f"still running 20 s after their Jupyter client was killed: {alive}"
    finally:
        client.kill()
        for process in started:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()


@pytest.mark.cluster
def test_status_and_stop_from_outside_reach_an_isolated_kernels_cluster(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path))  # this test's clusters alone; the kernel inherits it
    manager, client = start_new_kernel(kernel_name="pslab", startup_timeout=60)
    try:
        printed = []
        client.execute_interactive("import json, labkit; cluster = labkit.LocalCluster(1, 1, name='inside');"
                                   "print(json.dumps([task.pid for task in cluster.tasks]))", timeout=120,
                                   output_hook=lambda message: printed.append(message["content"].get("text", "")))
        pids = json.loads("".join(printed).strip().splitlines()[-1])
        status = run_labkit("status")
        assert "cluster 'inside'" in status and "private network namespace" in status, status
        assert all(f"pid {pid}" in status for pid in pids), status
        run_labkit("stop", "inside")
        processes.wait_until(lambda: not any(processes.running(pid) for pid in pids), 30,
                             "`labkit stop` from outside to stop the kernel's tasks")  # a zombie waits for the kernel
    finally:
        client.stop_channels()
        manager.shutdown_kernel()


def run_labkit(*arguments):
    done = subprocess.run([sys.executable, "-m", "labkit.tools.cli", *arguments], capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stdout


FORBIDS_NAMESPACES = ("echo 0 > /proc/sys/user/max_user_namespaces && "  # in a user namespace of its own: the
                      "exec \"$@\"")                                     # host's setting is untouched


@pytest.mark.cluster
@NEEDS_AN_ADDRESS
@pytest.mark.skipif(not shutil.which("unshare") or isolation.why_not_isolated() is not None,
                    reason="needs util-linux's unshare and a system that lets users make namespaces")
def test_where_the_system_forbids_namespaces_the_kernel_starts_exposed_and_says_so_once():
    manager = KernelManager(kernel_name="pslab")
    manager.kernel_spec.argv = ["unshare", "--user", "--map-root-user", "sh", "-c", FORBIDS_NAMESPACES, "sh",
                                *manager.kernel_spec.argv]
    manager.start_kernel()
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        printed = []
        client.execute_interactive(
            "import json, labkit\nfrom labkit.runtime import isolation\n"
            "first = labkit.LocalCluster(1, 1, name='exposed-1'); second = labkit.LocalCluster(1, 1, name='exposed-2')\n"
            "print(json.dumps([isolation.network_status(), isolation.from_outside([first.tasks[0].port])]))\n"
            "first.stop(); second.stop()", timeout=120,
            output_hook=lambda message: printed.append(message["content"].get("text", "")))
    finally:
        client.stop_channels()
        manager.shutdown_kernel()
    text = "".join(printed)
    (network, why), tried = json.loads(text.strip().splitlines()[-1])
    assert (network, why) == ("exposed", "this system does not let users make network namespaces (unshare failed)")
    assert list(tried.values()) == ["accepted"], tried
    assert text.count("labkit: the task ports are reachable from other machines") == 1, text
