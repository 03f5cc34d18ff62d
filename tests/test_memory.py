"""The peak-memory sampler behind `labkit sweep` and `make measurements`, on real processes."""
import json
import os
import subprocess
import sys

import pytest

from labkit.runtime import processes
from labkit.tools.memory import PeakMemory, task_name

# Touches 300 MB, says so, and holds them until its stdin closes.
HOLD_300_MB = ("import sys; block = bytearray(300_000_000); block[::4096] = b'x' * len(block[::4096]); "
               "print('holding', flush=True); sys.stdin.read()")


def sampled_while_running(*commands, environments=None):
    """PeakMemory's sample taken while ``commands`` (the arguments of Python programs that print a line once
    ready, then wait for their stdin to close; each with its environment, if given) all run, then end."""
    children = [subprocess.Popen([sys.executable, *command], env=environment, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
                for command, environment in zip(commands, environments or [None] * len(commands))]
    with PeakMemory(interval=60) as sampled:  # the test samples once, when every child is ready
        try:
            for child in children:
                child.stdout.readline()
            sampled.poll()
        finally:
            for child in children:
                child.stdin.close()
                child.wait()
    return sampled


def two_children_holding_300_mb():
    return sampled_while_running(["-c", HOLD_300_MB], ["-c", HOLD_300_MB])


def test_the_peaks_count_every_child_and_its_private_memory():
    sampled = two_children_holding_300_mb()
    assert sampled.measure == "pss"
    assert sampled.peak_mb >= 600, "two children each touching 300 MB"
    assert sampled.rss_mb >= sampled.peak_mb, "RSS counts shared pages once per process: never less than PSS"
    assert sampled.alone_mb >= 600
    assert max(sampled.task_mb.values()) >= 600, "same-named processes are summed under one name"
    assert sampled.peaks()["peak_pss_mb"] == sampled.peak_mb


def test_without_pss_as_on_macos_the_peaks_are_uss_and_say_so(monkeypatch):
    monkeypatch.setenv(processes.HIDE_PSS, "1")
    sampled = two_children_holding_300_mb()
    assert sampled.measure == "uss"
    assert sampled.peak_mb >= 600, "the private pages the children touched"
    assert "peak_pss_mb" not in sampled.peaks() and sampled.peaks()["peak_uss_mb"] == sampled.peak_mb


@pytest.mark.parametrize("hidden, expected", [("", "pss"), ("1", "uss")])
def test_the_measure_is_pss_unless_hidden(monkeypatch, hidden, expected):
    monkeypatch.setenv(processes.HIDE_PSS, hidden)
    assert processes.memory_measure() == expected


def test_a_process_memory_by_each_measure_and_none_once_gone(sleeper):
    sizes = {measure: processes.memory_bytes(sleeper.pid, measure) for measure in ("uss", "pss", "rss")}
    assert 0 < sizes["uss"] <= sizes["pss"] <= sizes["rss"], sizes
    sleeper.kill()
    sleeper.wait()
    assert processes.memory_bytes(sleeper.pid, "pss") is None


def test_with_no_child_running_the_peaks_stay_zero():
    with PeakMemory(interval=0.05) as sampled:
        sampled.poll()  # one sample at least, taken while no child runs
    assert sampled.peaks() == {"peak_pss_mb": 0, "peak_rss_mb": 0, "peak_alone_mb": 0, "largest_tasks": ""}


def test_each_all_reduce_worker_is_named_by_its_task_not_summed_as_python():
    # processes with the all-reduce worker's module on their command line and its TF_CONFIG (waiting, not training)
    wait = ["-c", "import sys; print('ready', flush=True); sys.stdin.read()", "-m", "labkit.allreduce"]
    sampled = sampled_while_running(wait, wait, environments=[
        os.environ | {"TF_CONFIG": json.dumps({"task": {"type": "worker", "index": index}})} for index in range(2)])
    names = set(sampled.task_mb)  # (and any child the pytest worker holds)
    assert {"all-reduce worker:0", "all-reduce worker:1"} <= names and "python" not in names, names


class CommandLine:
    """A process as task_name reads it: only its command line."""

    def __init__(self, *parts):
        self.parts = list(parts)

    def cmdline(self):
        return self.parts


def test_a_jupyter_server_and_its_kernels_are_named_apart():
    assert task_name(CommandLine(sys.executable, "-m", "jupyterlab", "--no-browser")) == "jupyter server"
    kernel = CommandLine(sys.executable, "-m", "ipykernel_launcher", "-f", "/tmp/jupyterlab-runtime/kernel-1.json")
    assert task_name(kernel) == "kernel"
    launcher = CommandLine(sys.executable, "-m", "labkit.runtime.isolation", "-f", "/tmp/jupyterlab-runtime/kernel-1.json")
    assert task_name(launcher) == "kernel launcher"
    hub_server = CommandLine(sys.executable, "-m", "jupyterhub.singleuser", '--ServerApp.terminado_settings={'
                             '"shell_command": ["python", "-m", "labkit.runtime.isolation", "--inside"]}')
    assert task_name(hub_server) == "jupyter server", "a setting that names the launcher does not make a launcher"
