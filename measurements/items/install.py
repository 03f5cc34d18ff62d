"""A learner's first install (scripts/first_install.py): what `make lab` downloads, its size, how long it takes."""
import json
import sys

from measurements.items import AS_CI, Run
from measurements.records import ROOT, gigabytes, measured_at, minutes


def runs():
    return [Run("install", lambda folder: [sys.executable, str(ROOT / "scripts" / "first_install.py"), "--out",
                                           str(folder / "install.json")], AS_CI)]


def result(run, folder):
    path = folder / "install.json"
    return json.loads(path.read_text()) if path.exists() else None


def section(recorded):
    lines = ["## Installing (`make lab`, the first time)", ""]
    if "install" not in recorded:
        return lines + ["Not measured yet.", ""]
    record = recorded["install"]
    result = record["result"]
    return lines + [
        f"The Ubuntu page's commands that need no sudo, run as written in a fresh home ({measured_at(record)}): "
        f"the learner bundle ({result['bundle_mb']} MB, no wheelhouse) unpacked, `make lab` with an empty pip cache "
        f"and {result['python']}, then `make doctor` in a second terminal, then `make lab` once more. "
        f"Not run here: {'; '.join(f'`{command}`' for command in result['not_run_here'])} (this machine reaches the "
        "package registries only; its own Python stood in).", "",
        "| what | measured |", "|---|---|",
        f"| received over the network during the first `make lab` (the wheels, from the package index) | "
        f"{gigabytes(result['received_mb'])} |",
        f"| `.venv` on disk | {gigabytes(result['venv_mb'])} |",
        f"| first `make lab`, until JupyterLab prints its link | {minutes(result['first_lab_seconds'])} |",
        f"| `make doctor` beside it | {minutes(result['doctor_seconds'])}: {result['doctor_verdict']} |",
        f"| `make lab` again, once installed | {minutes(result['again_seconds'])} |", ""]
