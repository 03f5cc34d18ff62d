"""docs/install.md's platform table agrees with scripts/check_platforms.py, and the kit works without `ss`."""
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labkit import compression, traffic
from labkit.meter import Meter
from support.scripts import script

ROOT = Path(__file__).resolve().parents[1]
check_platforms = script("check_platforms")


def test_the_platform_check_asks_for_every_pin_of_pyproject():
    pins = check_platforms.pins()
    assert "tensorflow==2.21.0" in pins and all("==" in pin for pin in pins)


def test_the_install_page_lists_every_checked_platform_as_the_check_expects():
    page = (ROOT / "docs" / "install.md").read_text()
    rows = [line for line in page[page.index("## Platforms"):].splitlines() if line.startswith("| ")]
    for name, (label, _, installs) in check_platforms.PLATFORMS.items():
        row = next((row for row in rows if row.startswith(f"| {label} |")), None)
        assert row is not None, f"docs/install.md's platform table has no row for {name} ({label})"
        assert ("**none**" not in row) == installs, f"the docs/install.md row for {name} disagrees with the check: {row}"


@pytest.fixture
def no_ss(monkeypatch):
    """PATH without `ss`, as on macOS."""
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))
    assert not traffic.available()


def test_without_ss_traffic_says_why_and_what_the_notebooks_report_instead(no_ss):
    with pytest.raises(RuntimeError, match="not on PATH .* payload bytes"):
        traffic.process_traffic([os.getpid()])


def test_without_ss_the_meter_measures_time_and_cpu_but_no_bytes(no_ss):
    meter = Meter({"self": os.getpid()}, socket_pids=[os.getpid()])
    meter.begin()
    began = time.process_time()
    while time.process_time() - began < 0.05:  # CPU the meter must see
        pass
    meter.end()
    assert meter.bytes is None and len(meter.seconds) == 1 and meter.cpu_seconds["self"] > 0


def test_without_ss_the_compression_table_shows_payload_bytes_and_na(no_ss):
    result = compression.Result(name="top-k 1%", seed=0, error_feedback=True, push_payload=4088.0,
                                pull_payload=407080.0, model_bytes=407080, measured=None)
    result.record(600, 30.0, steps_per_second=20.0, evaluation={"accuracy": 0.9})
    table = compression.format_results([result])
    row = table.splitlines()[1]
    assert "4,088" in row and "407,080" in row and row.count("n/a") == 3


def install_commands(wheelhouse):
    done = subprocess.run(["make", "-n", "-B", "-C", str(ROOT), "install", f"WHEELHOUSE={wheelhouse}"],
                          capture_output=True, text=True, check=True)
    return [line for line in done.stdout.splitlines() if "install" in line and "wheelhouse.py" in line]


def test_make_install_installs_through_the_wheelhouse_step(tmp_path):
    """`make install` leaves the choice of wheels to scripts/wheelhouse.py (this platform's folder with no
    network, else the index: tests/test_learner_bundle.py installs through it both ways)."""
    assert install_commands(tmp_path) == [f".venv/bin/python scripts/wheelhouse.py install {tmp_path} -- -e ."]


def test_make_install_test_asks_the_wheelhouse_step_for_the_index(tmp_path, monkeypatch):
    """The test tools come from the index: `--index` reaches wheelhouse.install, not pip (where Python 3.11's
    argparse once passed it on, and pip read it as `--index-url --`)."""
    done = subprocess.run(["make", "-n", "-B", "-C", str(ROOT), "install-test", f"WHEELHOUSE={tmp_path}"],
                          capture_output=True, text=True, check=True)
    line = next(line for line in done.stdout.splitlines() if "wheelhouse.py install" in line and "--index" in line)
    wheelhouse = script("wheelhouse")
    asked = []
    monkeypatch.setattr(wheelhouse, "install", lambda folder, requirements, index: asked.append((requirements, index)) or 0)
    with pytest.raises(SystemExit) as stopped:
        wheelhouse.main(shlex.split(line)[2:])
    assert stopped.value.code == 0 and asked == [(["-e", ".[test,site,hub]"], True)]
