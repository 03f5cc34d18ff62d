"""Wheelhouses for a room: every wheel the kit installs, one folder per platform and Python, and the install
that uses the one fitting this machine.

    python scripts/wheelhouse.py build wheelhouse         # this machine's platform and Python (make wheelhouse)
    python scripts/wheelhouse.py build wheelhouse --platform macos-arm64 linux-x86_64 --python 3.12
    python scripts/wheelhouse.py check wheelhouse         # fresh venv, index disabled (make test-offline-install)
    python scripts/wheelhouse.py install wheelhouse -- -e .   # what `make install` runs

A wheelhouse holds one folder per platform and Python version (``wheelhouse/macos-arm64-py3.12/``), so one
bundle serves a mixed room: each laptop installs from its own folder with no network, and a laptop whose
folder is missing (or lacks a wheel) installs from the package index instead, saying so. ``build`` downloads
any platform's wheels from any machine (pip's ``--platform``): build the folders of every laptop in the room.
"""
import argparse
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from check_platforms import PLATFORMS, ROOT, pins, registry_environment

BUILD_REQUIREMENTS = ["setuptools>=69"]  # pyproject.toml's build backend, for the editable install
DEAD_PROXY = "http://127.0.0.1:9"  # nothing listens there: any attempt to reach the network fails
SYSTEMS = {"linux": "linux", "darwin": "macos", "win32": "windows"}


def this_platform():
    """This machine's platform as scripts/check_platforms.py names them: linux-x86_64, macos-arm64, ..."""
    return f"{SYSTEMS.get(sys.platform, sys.platform)}-{platform.machine().lower()}"


def folder_name(platform_name, python_version):
    return f"{platform_name}-py{python_version}"


def this_folder(wheelhouse):
    """The folder of ``wheelhouse`` for this machine's platform and this Python."""
    return Path(wheelhouse) / folder_name(this_platform(), f"{sys.version_info[0]}.{sys.version_info[1]}")


def built_folders(wheelhouse):
    """The names of the folders of ``wheelhouse`` that hold wheels."""
    return sorted(folder.name for folder in Path(wheelhouse).glob("*") if any(folder.glob("*.whl")))


def build(wheelhouse, platforms, pythons):
    """Download every pinned package, its dependencies and the build backend as wheels, one folder per platform
    and Python version."""
    for platform_name in platforms:
        for version in pythons:
            folder = Path(wheelhouse) / folder_name(platform_name, version)
            tags = PLATFORMS[platform_name][1]
            subprocess.run([sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--implementation", "cp",
                            "--python-version", version, *[f"--platform={tag}" for tag in tags],
                            "--dest", str(folder), *pins(), *BUILD_REQUIREMENTS], check=True, env=registry_environment())
            wheels = list(folder.glob("*.whl"))
            print(f"{len(wheels)} wheels, {sum(wheel.stat().st_size for wheel in wheels) / 2**20:.0f} MB in {folder}")


def install(wheelhouse, requirements, python=sys.executable, index=False, pip_options=()):
    """``pip install requirements`` from this machine's folder of ``wheelhouse`` alone (no network), or, where that
    folder is missing or lacks a wheel, from the package index (saying so). ``index``: use the index as well
    (the test tools are not in a wheelhouse). Returns pip's exit code."""
    command = [str(python), "-m", "pip", "install", "--quiet", *pip_options]
    folder = this_folder(wheelhouse)
    if folder.name in built_folders(wheelhouse):
        if not index:
            offline = subprocess.run([*command, "--no-index", "--find-links", str(folder), *requirements])
            if offline.returncode == 0:
                return 0
            print(f"{folder} lacks a wheel (above): installing what it lacks from the package index.", file=sys.stderr)
        return subprocess.run([*command, "--find-links", str(folder), *requirements]).returncode
    others = built_folders(wheelhouse)
    if others and not index:
        print(f"{wheelhouse}/ holds wheels for {', '.join(others)}, none for this machine ({folder.name}): installing "
              "from the package index instead.", file=sys.stderr)
    return subprocess.run([*command, *requirements]).returncode


def offline_environment():
    """No pip configuration, no index, and a proxy that goes nowhere."""
    return dict(registry_environment(), PIP_NO_INDEX="1", http_proxy=DEAD_PROXY, https_proxy=DEAD_PROXY,
                HTTP_PROXY=DEAD_PROXY, HTTPS_PROXY=DEAD_PROXY)


def check(wheelhouse):
    """Install the kit from this machine's folder alone into a fresh venv, then check every pin there."""
    folder = this_folder(Path(wheelhouse).resolve())
    if not any(folder.glob("*.whl")):
        sys.exit(f"no wheels in {folder}: run `make wheelhouse` first (with this Python).")
    with tempfile.TemporaryDirectory(prefix="pslab-offline-") as scratch:
        venv = Path(scratch) / "venv"
        python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
        env = offline_environment()
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-index", "--find-links",
                        str(folder), "-e", str(ROOT)], check=True, env=env)
        probe = ("from labkit.tools import doctor\n"
                 "for check in (doctor.python_version, doctor.pinned_versions, doctor.keras_2):\n"
                 "    status, detail = check(); print(status, detail); assert status == 'PASS', detail\n")
        subprocess.run([str(python), "-c", probe], check=True, env=env, cwd=scratch)
    print(f"offline install from {folder}: PASS (fresh venv, no index, network blocked)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    actions = parser.add_subparsers(dest="action", required=True)
    build_parser = actions.add_parser("build", help="download the wheels (make wheelhouse)")
    build_parser.add_argument("wheelhouse", type=Path)
    build_parser.add_argument("--platform", nargs="+", choices=list(PLATFORMS), default=[this_platform()],
                              help="platforms to download for (default: this machine's)")
    build_parser.add_argument("--python", nargs="+", default=[f"{sys.version_info[0]}.{sys.version_info[1]}"],
                              help="Python versions to download for (default: this Python's)")
    check_parser = actions.add_parser("check", help="install from it offline into a fresh venv (make test-offline-install)")
    check_parser.add_argument("wheelhouse", type=Path)
    install_parser = actions.add_parser("install", help="pip install from this machine's folder, else the index "
                                        "(pip's requirements after --)")
    install_parser.add_argument("wheelhouse", type=Path)
    install_parser.add_argument("--index", action="store_true", help="use the package index as well")
    argv = sys.argv[1:] if argv is None else list(argv)
    # pip's requirements follow "--", split off by hand: argparse (3.11) puts an option written after the
    # wheelhouse, such as --index, into a REMAINDER argument, where pip read it as --index-url.
    split = argv.index("--") if "--" in argv else len(argv)
    args, requirements = parser.parse_args(argv[:split]), argv[split + 1:]
    if args.action == "build":
        unknown = [name for name in args.platform if name not in PLATFORMS]
        if unknown:
            sys.exit(f"unknown platform {unknown}: one of {', '.join(PLATFORMS)}")
        build(args.wheelhouse, args.platform, args.python)
    elif args.action == "check":
        check(args.wheelhouse)
    else:
        sys.exit(install(args.wheelhouse, requirements, index=args.index))


if __name__ == "__main__":
    main()
