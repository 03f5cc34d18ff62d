"""The test tiers, and how long each took in a pytest call: for docs/measurements.md's test times.

The tiers are the markers pyproject.toml lists for pytest (it lists no other); a test carries one, on itself, its
class or its module, or none: then it is a `unit` test.
With LABKIT_TEST_TIMES_DIR set, a pytest call sums each test's setup, call and teardown seconds by
tier and writes them, with the call's wall time, to <that directory>/<marker expression, or "all">.json
(`make measurements` runs ``make test-fast`` and ``make test`` so). Under pytest-xdist the controlling
process writes the file: the workers' reports reach it. Beside the seconds, the CPU seconds each phase used in
the process that ran it and in every process it started that ended and was waited for (kernels, tasks,
programs: ``cpu_seconds_used``), by tier and for the test files that used the most: on a machine whose cores
are all busy, CPU is what a test costs the whole run.
"""
import json
import os
import re
import resource
import time
import tomllib
from pathlib import Path

import pytest

DIRECTORY_VARIABLE = "LABKIT_TEST_TIMES_DIR"
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
# pyproject.toml's pytest markers are the tiers, top to bottom: "unit: no TensorFlow process, ..."
TIERS = tuple(marker.split(":")[0] for marker in
              tomllib.loads(PYPROJECT.read_text())["tool"]["pytest"]["ini_options"]["markers"])


def tier(markers):
    """The one tier among the names of a test's ``markers``, `unit` where there is none; ValueError if two."""
    marked = set(markers) & set(TIERS)
    if len(marked) > 1:
        raise ValueError(f"it has the tier markers {sorted(marked)}: give it one")
    return marked.pop() if marked else "unit"


HEAVIEST_FILES = 12  # how many test files the record lists, those that used the most CPU


def cpu_seconds_used():
    """User and system CPU seconds of this process (every thread) and of its children that ended and were waited
    for, with theirs: a kernel's tasks count once the kernel has reaped them and been reaped."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class PhaseCPU:
    """In the process that runs the tests: each report gets the CPU seconds since the last one (its phase: setup,
    call or teardown, with the module's fixtures it set up or tore down) as the user property "cpu_seconds"."""

    def __init__(self):
        self.last = cpu_seconds_used()

    def pytest_runtest_logstart(self):
        self.last = cpu_seconds_used()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self):
        report = yield
        now = cpu_seconds_used()
        report.user_properties = [*report.user_properties, ("cpu_seconds", round(now - self.last, 3))]
        self.last = now
        return report


class TierTimes:
    def __init__(self):
        self.began = time.monotonic()
        self.seconds, self.cpu_seconds, self.tests, self.files = {}, {}, {}, {}

    def pytest_runtest_logreport(self, report):
        properties = dict(report.user_properties)
        its_tier, cpu = properties["tier"], properties.get("cpu_seconds", 0.0)
        self.seconds[its_tier] = self.seconds.get(its_tier, 0.0) + report.duration
        self.cpu_seconds[its_tier] = self.cpu_seconds.get(its_tier, 0.0) + cpu
        seconds_and_cpu = self.files.setdefault(report.nodeid.split("::")[0], [0.0, 0.0])
        seconds_and_cpu[0] += report.duration
        seconds_and_cpu[1] += cpu
        if report.when == "call" or (report.when == "setup" and report.skipped):
            self.tests.setdefault(its_tier, {}).setdefault(report.outcome, 0)
            self.tests[its_tier][report.outcome] += 1

    def pytest_sessionfinish(self, session):
        directory = Path(os.environ[DIRECTORY_VARIABLE])
        expression = session.config.option.markexpr or "all"
        directory.mkdir(parents=True, exist_ok=True)
        document = {
            "marker_expression": expression,
            "workers": getattr(session.config.option, "numprocesses", None) or 1,
            "wall_seconds": round(time.monotonic() - self.began, 1),
            "exit_status": int(session.exitstatus),
            "tiers": {name: {"seconds": round(self.seconds[name], 1), "cpu_seconds": round(self.cpu_seconds[name], 1),
                             "tests": self.tests.get(name, {})}
                      for name in TIERS if name in self.seconds},
            "heaviest_files": [{"file": file, "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1)}
                               for file, (seconds, cpu) in sorted(self.files.items(), key=lambda item: -item[1][1])
                               [:HEAVIEST_FILES]],
        }
        name = re.sub(r"[^a-z0-9]+", "-", expression.lower()).strip("-")
        (directory / f"{name}.json").write_text(json.dumps(document, indent=1) + "\n")


def register(config):
    """Record tier times in this call if asked to: each phase's CPU where tests run, the sums in the process that
    is not a pytest-xdist worker (the controller, or the only process)."""
    if os.environ.get(DIRECTORY_VARIABLE):
        config.pluginmanager.register(PhaseCPU(), "phase_cpu")
        if "PYTEST_XDIST_WORKER" not in os.environ:
            config.pluginmanager.register(TierTimes(), "tier_times")
