"""scripts/first_install.py: the Ubuntu page's commands that need no sudo, as `make measurements` runs them to time
a learner's first install. The real run installs the whole stack (minutes): here the page's commands are
checked against what the measurement runs, its unpack step runs as written, and the measuring itself runs on
a stand-in kit whose `make lab` is quick."""
import tarfile
from pathlib import Path

import pytest

from labkit.runtime import processes
from measurements.items import install, notebooks
from support.scripts import script

ROOT = Path(__file__).resolve().parents[1]
first_install = script("first_install")
learner_bundle = script("learner_bundle")

# A stand-in kit: `make lab` makes a .venv of 3 MB, then serves "JupyterLab" after a second, until stopped;
# `make doctor` answers as the real one ends.
STAND_IN_MAKEFILE = """lab:
\tmkdir -p .venv/bin && head -c 3000000 /dev/zero > .venv/bin/python.data && printf '#!/bin/sh\\necho Python 3.12.9\\n' > .venv/bin/python && chmod +x .venv/bin/python
\t@sleep 1 && echo "    http://127.0.0.1:8888/lab/tree/notebooks?token=0123abcd" && echo $$$$ >> lab.pids && exec sleep 600

doctor:
\t@echo "PASS  jupyter    port 8888: this kit's JupyterLab" && echo "ready for the workshop (1 s)"
"""


def test_the_ubuntu_pages_commands_without_sudo_are_those_the_measurement_runs_or_names():
    commands = first_install.learner_commands()
    assert set(commands) == set(first_install.RUNS) | set(first_install.NOT_HERE)
    assert commands["unpack"].endswith("&& cd pslab") and commands["lab"] == "make lab"


def test_a_command_the_measurement_does_not_know_is_an_error(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```bash\nsudo apt install make\nmake lab\npip install --user something\n```\n")
    with pytest.raises(ValueError, match="'pip install --user something' is neither run"):
        first_install.learner_commands(page)


def test_the_unpack_step_runs_as_written(tmp_path):
    learner_bundle.bundle(tmp_path / "bundle.tar.gz")
    home = tmp_path / "home"
    (home / "Downloads").mkdir(parents=True)
    (tmp_path / "bundle.tar.gz").rename(home / "Downloads" / first_install.BUNDLE_NAME)
    import subprocess

    subprocess.run(["bash", "-e", "-c", first_install.learner_commands()["unpack"] + " && test -f Makefile"],
                   cwd=home, env=first_install.fresh_environment(home), check=True, timeout=60)
    assert (home / "pslab" / "docs" / "install-ubuntu.md").exists()


def test_the_measurement_times_make_lab_to_its_link_runs_the_doctor_beside_it_and_leaves_nothing(tmp_path):
    kit = tmp_path / "kit"
    kit.mkdir()
    (kit / "Makefile").write_text(STAND_IN_MAKEFILE)
    with tarfile.open(tmp_path / "bundle.tar.gz", "w:gz") as bundle:
        bundle.add(kit / "Makefile", arcname="pslab/Makefile")
    result = first_install.measure(tmp_path / "bundle.tar.gz", tmp_path / "home", timeout=60)
    assert 1 <= result["first_lab_seconds"] < 30 and 1 <= result["again_seconds"] < 30
    assert result["venv_mb"] >= 3 and result["python"] == "Python 3.12.9"
    assert result["doctor_returncode"] == 0 and result["doctor_verdict"] == "ready for the workshop (1 s)"
    assert "this kit's JupyterLab" in result["doctor_jupyter"]
    served = [int(pid) for pid in (tmp_path / "home" / "pslab" / "lab.pids").read_text().split()]
    assert len(served) == 2 and processes.wait_until_gone(served, timeout=10) == [], \
        "the stand-in's JupyterLab still runs"


def test_a_make_lab_that_fails_is_an_error_with_its_output(tmp_path):
    kit = tmp_path / "kit"
    kit.mkdir()
    (kit / "Makefile").write_text("lab:\n\t@echo no Python found && false\n")
    with tarfile.open(tmp_path / "bundle.tar.gz", "w:gz") as bundle:
        bundle.add(kit / "Makefile", arcname="pslab/Makefile")
    with pytest.raises(RuntimeError, match="gave no JupyterLab link(.|\n)*no Python found"):
        first_install.measure(tmp_path / "bundle.tar.gz", tmp_path / "home", timeout=30)


def test_the_measurements_page_shows_the_install_from_what_it_recorded():
    log = {"started": "2026-12-01 08:00 UTC", "load_average_before": [0.5, 0.4, 0.3]}
    result = {"first_lab_seconds": 252.4, "again_seconds": 6.1, "doctor_seconds": 41.0, "doctor_returncode": 0,
              "doctor_verdict": "ready for the workshop (41 s)", "venv_mb": 2712, "received_mb": 1234, "bundle_mb": 3.4,
              "python": "Python 3.11.2", "not_run_here": sorted(first_install.NOT_HERE)}
    text = "\n".join(install.section({"install": {"log": log, "result": result}}))
    assert "| `.venv` on disk | 2.7 GB |" in text and "the wheels, from the package index) | 1.2 GB |" in text
    assert "| first `make lab`, until JupyterLab prints its link | 4.2 min |" in text
    assert "| `make doctor` beside it | 41 s: ready for the workshop (41 s) |" in text
    assert "`uv python install 3.12`" in text and "Python 3.11.2" in text
    assert install.section({})[-2] == "Not measured yet."


def test_a_full_size_run_on_the_timing_stand_in_leaves_out_what_the_model_learnt():
    run = {"status": "ok", "seconds": 76.0, "peak_pss_mb": 3900, "peak_alone_mb": 3900, "peak_rss_mb": 4700,
           "largest_tasks": [["kernel", 1090]], "long_cells": [],
           "results": {"test_accuracy": 0.913, "ps_samples_to_target_median": 10240,
                       "verdict_random_InverseTau": "cannot tell", "mlp_speed_verdict_allreduce": "wins",
                       "ps_mlp_samples_per_s": 19142}}
    log = {"started": "2026-12-01 08:00 UTC", "load_average_before": [0.5, 0.4, 0.3]}
    for source, kept in (("timing-standin", False), ("keras", True)):
        text = "\n".join(notebooks.defaults_section("notebooks", "Notebooks", {
            "10_ps_vs_allreduce": {"log": dict(log, mnist_source=source), "result": run}}))
        assert "| `mlp_speed_verdict_allreduce` | wins |" in text and "| `ps_mlp_samples_per_s` | 19142 |" in text
        assert all((row in text) == kept for row in ("| `test_accuracy` | 0.913 |", "`ps_samples_to_target_median`",
                                                       "`verdict_random_InverseTau`")), source
