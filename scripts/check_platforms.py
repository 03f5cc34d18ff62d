"""Check, against the package registry, that the pinned stack installs on each platform docs/install.md names.

For every platform and Python version it asks pip to resolve every pin of pyproject.toml
(dependencies included) from wheels only, as that platform would, without installing
anything: ``pip install --dry-run --only-binary=:all: --platform ... --python-version ...``.
A platform docs/install.md lists as installable must resolve; one it lists with no wheel must not
(else the page is out of date). Needs Python 3.11+ (tomllib) and access to the registry; downloads only metadata.

    python scripts/check_platforms.py                      # every platform, Python 3.11
    python scripts/check_platforms.py --python 3.10 3.13 --platform windows-amd64
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def manylinux(arch, glibc_minor):
    """The wheel platform tags a Linux machine with glibc 2.``glibc_minor`` accepts."""
    tags = [f"manylinux_2_{minor}_{arch}" for minor in range(glibc_minor, 16, -1)]
    return tags + [f"manylinux2014_{arch}"]


# name -> (its row in docs/install.md's platform table, pip --platform tags, installs there)
PLATFORMS = {
    "linux-x86_64": ("Linux x86_64, glibc ≥ 2.28", manylinux("x86_64", 28), True),
    "macos-arm64": ("macOS 12+ on Apple silicon", ["macosx_12_0_arm64"], True),
    "windows-amd64": ("Windows 10/11 x64", ["win_amd64"], True),
    "linux-aarch64": ("Linux aarch64", manylinux("aarch64", 28), True),
    "macos-x86_64": ("macOS on Intel", ["macosx_12_0_x86_64"], False),
}


def pins(pyproject=ROOT / "pyproject.toml"):
    """The exact pins of the project's dependencies, as pip requirements."""
    return tomllib.loads(Path(pyproject).read_text())["project"]["dependencies"]


def registry_environment():
    """This environment without local pip configuration, so the registry alone answers."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("PIP_FIND_LINKS", "PIP_CONSTRAINT", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX")}
    return dict(env, PIP_CONFIG_FILE=os.devnull)


def resolve(platform, python_version, requirements):
    """Resolve ``requirements`` for a platform: (True, the tensorflow wheel) or (False, pip's error)."""
    _, tags, _ = PLATFORMS[platform]
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
                   "--target", str(Path(scratch) / "target"), "--report", str(report),
                   "--only-binary=:all:", "--implementation", "cp", "--python-version", python_version,
                   *[f"--platform={tag}" for tag in tags], *requirements]
        done = subprocess.run(command, capture_output=True, text=True, env=registry_environment())
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
            return False, (" / ".join(errors) if errors else done.stderr.strip()[-300:])
        installs = json.loads(report.read_text())["install"]
    wheels = [item["download_info"]["url"].rsplit("/", 1)[-1] for item in installs
              if item["metadata"]["name"].lower() == "tensorflow"]
    return True, f"{len(installs)} packages, {wheels[0] if wheels else 'no tensorflow'}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platform", nargs="+", choices=list(PLATFORMS), default=list(PLATFORMS))
    parser.add_argument("--python", nargs="+", default=["3.11"], help="Python versions (default: 3.11)")
    args = parser.parse_args(argv)
    requirements = pins()
    points = [(platform, version) for platform in args.platform for version in args.python]
    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(pool.map(lambda point: resolve(*point, requirements), points))
    wrong = 0
    for (platform, version), (resolved, detail) in zip(points, outcomes):
        expected = PLATFORMS[platform][2]
        verdict = "ok" if resolved == expected else "PAGE WRONG"
        wrong += resolved != expected
        print(f"{verdict:<12} {platform:<14} Python {version:<5} "
              f"{'resolves' if resolved else 'does not resolve'}: {detail}")
    if wrong:
        sys.exit(f"{wrong} platform(s) disagree with docs/install.md's platform table: update PLATFORMS and the page.")


if __name__ == "__main__":
    main()
