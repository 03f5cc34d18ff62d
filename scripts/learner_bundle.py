"""Pack the kit for learners without its solutions: ``make learner-bundle``.

    python scripts/learner_bundle.py dist/pslab-learner.tar.gz [--wheelhouse wheelhouse]

The archive holds every file git tracks except ``solutions/`` (the instructor hands those out
later), under one top folder ``pslab/``, and the wheelhouse's wheels if one was built
(``make wheelhouse``: a folder per platform and Python), so ``make lab`` installs with no network on
every laptop whose platform has its folder, and from the package index on the others. Without solutions/ the tests
that run them skip; the exercises work as in the full kit.
"""
import argparse
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEFT_OUT = ("solutions/",)
TOP = "pslab"


def tracked_files(root=ROOT):
    """The files git tracks in ``root``, minus ``LEFT_OUT``."""
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True)
    if listing.returncode != 0:
        raise RuntimeError(f"{root} is not a git checkout ({listing.stderr.strip()}): bundle from the kit's clone.")
    return [name for name in listing.stdout.split("\0") if name and not name.startswith(LEFT_OUT)
            and (root / name).is_file()]


def bundle(out, wheelhouse=None, root=ROOT):
    """Write the learner's archive to ``out``; return the names it holds."""
    names = tracked_files(root)
    wheels = sorted(Path(wheelhouse).glob("*/*.whl")) if wheelhouse else []
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w:gz") as archive:
        for name in names:
            archive.add(root / name, arcname=f"{TOP}/{name}")
        for wheel in wheels:
            archive.add(wheel, arcname=f"{TOP}/wheelhouse/{wheel.parent.name}/{wheel.name}")
    return names + [f"wheelhouse/{wheel.parent.name}/{wheel.name}" for wheel in wheels]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the archive to write, e.g. dist/pslab-learner.tar.gz")
    parser.add_argument("--wheelhouse", type=Path, help="add its wheels, if it holds any")
    args = parser.parse_args(argv)
    try:
        names = bundle(args.out, args.wheelhouse)
    except RuntimeError as error:
        sys.exit(f"learner_bundle: {error}")
    wheels = [name for name in names if name.startswith("wheelhouse/")]
    folders = sorted({name.split("/")[1] for name in wheels})
    size = args.out.stat().st_size / 2**20
    print(f"{args.out}: {len(names) - len(wheels)} kit files without solutions/, {len(wheels)} wheels"
          f"{' for ' + ', '.join(folders) if folders else ''}, {size:.1f} MB. "
          "Hand out solutions/ separately, after the exercises.")


if __name__ == "__main__":
    main()
