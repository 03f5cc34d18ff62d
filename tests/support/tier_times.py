"""The test tiers, and how long each took in a pytest call: for docs/measurements.md's test times.

The tiers are the markers pyproject.toml lists for pytest (it lists no other); a test carries one, on itself, its
class or its module, or none: then it is a `unit` test.
With LABKIT_TEST_TIMES_DIR set, a pytest call sums each test's setup, call and teardown seconds by
tier and writes them, with the call's wall time, to <that directory>/<marker expression, or "all">.json
(`make measurements` runs ``make test-fast`` and ``make test`` so). Under pytest-xdist the controlling
process writes the file: the workers' reports reach it.
"""
import json
import os
import re
import time
import tomllib
from pathlib import Path

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


class TierTimes:
    def __init__(self):
        self.began = time.monotonic()
        self.seconds, self.tests = {}, {}

    def pytest_runtest_logreport(self, report):
        its_tier = dict(report.user_properties)["tier"]
        self.seconds[its_tier] = self.seconds.get(its_tier, 0.0) + report.duration
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
            "tiers": {name: {"seconds": round(self.seconds[name], 1), "tests": self.tests.get(name, {})}
                      for name in TIERS if name in self.seconds},
        }
        name = re.sub(r"[^a-z0-9]+", "-", expression.lower()).strip("-")
        (directory / f"{name}.json").write_text(json.dumps(document, indent=1) + "\n")


def register(config):
    """Record tier times in this call if asked to, unless it is a pytest-xdist worker (the controller records)."""
    if os.environ.get(DIRECTORY_VARIABLE) and "PYTEST_XDIST_WORKER" not in os.environ:
        config.pluginmanager.register(TierTimes(), "tier_times")
