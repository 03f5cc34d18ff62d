"""How long each test tier and each group of tests took in a pytest call, for docs/measurements.md
and tests/group_seconds.json.

With LABKIT_TEST_TIMES_DIR set, a pytest call sums each test's setup, call and teardown seconds by
tier, and by group and tier (tests/conftest.py: a group's unit tests alone decide its share of
``make test-fast``), and writes them, with the call's wall time, to
<that directory>/<marker expression, or "all">.json. `scripts/measurements.py --only tests` runs
``make test-fast`` and ``make test`` with it set and turns the files into the page's table and the
groups' order. Under pytest-xdist the controlling process writes the file: the workers' reports reach it.
"""
import json
import os
import re
import time
from pathlib import Path

DIRECTORY_VARIABLE = "LABKIT_TEST_TIMES_DIR"
# The tiers (pyproject.toml lists them; tests/conftest.py marks a test without another one `unit`).
TIERS = ("unit", "cluster", "notebook", "browser", "root")


def tier(keywords):
    """The tier of a test, from its keywords (a test report's, or an item's)."""
    return next((name for name in TIERS if name in keywords), "unit")


class TierTimes:
    def __init__(self):
        self.began = time.monotonic()
        self.seconds, self.tests, self.groups = {}, {}, {}

    def pytest_runtest_logreport(self, report):
        its_tier = tier(report.keywords)
        self.seconds[its_tier] = self.seconds.get(its_tier, 0.0) + report.duration
        group = self.groups.setdefault(dict(report.user_properties)["group"], {})
        group[its_tier] = group.get(its_tier, 0.0) + report.duration
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
            "groups": {group: {name: round(seconds, 1) for name, seconds in tiers.items()}
                       for group, tiers in sorted(self.groups.items())},
        }
        name = re.sub(r"[^a-z0-9]+", "-", expression.lower()).strip("-")
        (directory / f"{name}.json").write_text(json.dumps(document, indent=1) + "\n")


def register(config):
    """Record tier times in this call if asked to, unless it is a pytest-xdist worker (the controller records)."""
    if os.environ.get(DIRECTORY_VARIABLE) and "PYTEST_XDIST_WORKER" not in os.environ:
        config.pluginmanager.register(TierTimes(), "tier_times")
