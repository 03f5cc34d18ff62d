"""Build a wheelhouse (every wheel the kit installs) and prove an install from it needs no network.

    python scripts/wheelhouse.py wheelhouse            # download the pinned stack (make wheelhouse)
    python scripts/wheelhouse.py --check wheelhouse    # fresh venv, index disabled (make test-offline-install)

The wheels are for the Python and platform that run this script: build the wheelhouse
with the same Python the laptops will use. ``make lab`` and ``make install`` install from
``wheelhouse/`` with ``--no-index`` whenever it holds wheels.
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from check_platforms import ROOT, pins, registry_environment

BUILD_REQUIREMENTS = ["setuptools>=69"]  # pyproject.toml's build backend, for the editable install
DEAD_PROXY = "http://127.0.0.1:9"  # nothing listens there: any attempt to reach the network fails


def build(wheelhouse):
    """Download every pinned package, its dependencies and the build backend as wheels."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--dest", str(wheelhouse),
                    *pins(), *BUILD_REQUIREMENTS], check=True)
    wheels = list(Path(wheelhouse).glob("*.whl"))
    size = sum(wheel.stat().st_size for wheel in wheels) / 2**20
    print(f"{len(wheels)} wheels, {size:.0f} MB in {wheelhouse}")


def offline_environment():
    """No pip configuration, no index, and a proxy that goes nowhere."""
    return dict(registry_environment(), PIP_NO_INDEX="1", http_proxy=DEAD_PROXY, https_proxy=DEAD_PROXY,
                HTTP_PROXY=DEAD_PROXY, HTTPS_PROXY=DEAD_PROXY)


def check(wheelhouse):
    """Install the kit from the wheelhouse alone into a fresh venv, then check every pin there."""
    wheelhouse = Path(wheelhouse).resolve()
    if not any(wheelhouse.glob("*.whl")):
        sys.exit(f"no wheels in {wheelhouse}: run `make wheelhouse` first.")
    with tempfile.TemporaryDirectory(prefix="pslab-offline-") as scratch:
        venv = Path(scratch) / "venv"
        python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
        env = offline_environment()
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-index", "--find-links",
                        str(wheelhouse), "-e", str(ROOT)], check=True, env=env)
        probe = ("from labkit.tools import doctor\n"
                 "for check in (doctor.python_version, doctor.pinned_versions, doctor.keras_2):\n"
                 "    status, detail = check(); print(status, detail); assert status == 'PASS', detail\n")
        subprocess.run([str(python), "-c", probe], check=True, env=env, cwd=scratch)
    print(f"offline install from {wheelhouse}: PASS (fresh venv, no index, network blocked)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheelhouse", type=Path)
    parser.add_argument("--check", action="store_true", help="install from it offline instead of building it")
    args = parser.parse_args(argv)
    (check if args.check else build)(args.wheelhouse)


if __name__ == "__main__":
    main()
