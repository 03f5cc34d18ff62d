"""Run a command on Linux the way labkit sees macOS: `ss` hidden from PATH and PSS hidden.

    .venv/bin/python scripts/like_macos.py .venv/bin/jupyter nbconvert --to notebook --execute \\
        --output /tmp/nb03.ipynb notebooks/03_custom_training_loop.ipynb

macOS has no `ss` (iproute2), so labkit.traffic counts bytes on the loopback interface instead of
on each socket, and no PSS, so labkit counts memory as USS. PATH becomes one temporary directory
of links to every program on PATH but `ss`; LABKIT_HIDE_PSS=1 makes labkit's memory figures ignore
PSS. The kernels and task processes the command starts inherit both. tests/conftest.py runs the
smoke notebooks and the exercise solutions this way.
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HIDDEN_PROGRAMS = ("ss",)
HIDE_PSS = "LABKIT_HIDE_PSS"  # read by labkit.runtime.processes.memory_measure


def path_without(hidden, path, directory):
    """Fill ``directory`` with a link to each program on ``path`` except ``hidden``; return it as a PATH."""
    for folder in path.split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for program in os.scandir(folder):
            link = Path(directory) / program.name
            if program.name not in hidden and not link.exists() and os.access(program.path, os.X_OK):
                link.symlink_to(program.path)  # the first program of a name on PATH wins, as in a shell
    return str(directory)


def environment(directory, base=None):
    """``base`` (os.environ) with `ss` hidden from its PATH, through links in ``directory``, and PSS hidden."""
    base = dict(os.environ if base is None else base)
    return base | {"PATH": path_without(HIDDEN_PROGRAMS, base.get("PATH", ""), directory), HIDE_PSS: "1"}


def main(command):
    if not command:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory(prefix="like-macos-path-") as directory:
        return subprocess.run(command, env=environment(directory)).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
