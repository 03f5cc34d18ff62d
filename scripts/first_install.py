"""A learner's first install, measured: the Ubuntu page's commands that need no sudo, run as written.

    python scripts/first_install.py --out runs/measurements/install/install.json    # make measurements runs it

In a fresh home (no pip cache, no Jupyter or labkit state) it puts the learner bundle where the page expects
it, runs the page's unpack line, then its ``make lab`` until JupyterLab prints its link (the first install:
every wheel downloaded from the package index), its ``make doctor`` beside it (the second terminal of the
page), and ``make lab`` once more (a start once installed). It records the seconds of each, the size of
``.venv``, the bytes the machine received while the first ``make lab`` ran (the wheels; other traffic of the
machine adds to it), and the doctor's verdict. The commands come from the page itself
(``learner_commands``), so the page and the measurement cannot drift apart.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UBUNTU_PAGE = ROOT / "docs" / "install-ubuntu.md"
BUNDLE_NAME = "pslab-learner.tar.gz"
JUPYTERLAB_LINK = re.compile(r"http://127\.0\.0\.1:(\d+)/lab[\w/.-]*\?token=\w+")
# The page's commands without sudo: those this measurement runs, by how each starts, and those it cannot run
# here, with why (this machine reaches the package registries only).
RUNS = {"unpack": "cd ~ && tar xzf ~/Downloads/pslab-learner.tar.gz", "lab": "make lab", "doctor": "make doctor"}
NOT_HERE = {"curl -LsSf https://astral.sh/uv/install.sh | sh": "uv's installer is not on a package registry",
            "uv python install 3.12": "uv downloads its Pythons from GitHub, not from a package registry"}


def page_commands(page=UBUNTU_PAGE):
    """Every command line of the page's ``bash`` blocks, comments and blank lines left out."""
    blocks = re.findall(r"```bash\n(.*?)```", Path(page).read_text(), re.DOTALL)
    lines = [line.split("  #")[0].split(" # ")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def learner_commands(page=UBUNTU_PAGE):
    """The page's commands that need no sudo, as {RUNS key or NOT_HERE command: the command as the page has it}.
    A command this measurement neither runs nor names is an error: the page changed, and so must this."""
    found = {}
    for command in page_commands(page):
        if command.startswith("sudo "):
            continue
        key = next((key for key, start in RUNS.items() if command.startswith(start)),
                   command if command in NOT_HERE else None)
        if key is None:
            raise ValueError(f"{page}: the command {command!r} is neither run by scripts/first_install.py (RUNS) nor "
                             "named as impossible here (NOT_HERE): add it to one of them.")
        found[key] = command
    return found


def disk_bytes(path):
    """The disk space the files under ``path`` take (as ``du``), symlinks not followed."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            total += os.lstat(os.path.join(folder, name)).st_blocks * 512
    return total


def received_bytes():
    """Bytes this machine has received on its network interfaces (loopback aside), from the kernel's counters."""
    import psutil

    return sum(counters.bytes_recv for name, counters in psutil.net_io_counters(pernic=True).items() if name != "lo")


def fresh_environment(home):
    """A learner's environment in ``home``: no pip configuration or cache of this machine's, nothing set by a test;
    only the network's own settings kept (proxies, the certificates this machine trusts)."""
    network = ("_proxy", "_PROXY", "CERT", "CA_BUNDLE", "CAINFO", "SSL_CERT_FILE", "SSL_CERT_DIR")
    kept = {name: value for name, value in os.environ.items()
            if name in ("PATH", "LANG", "LC_ALL", "TERM", "TZ") or any(part in name for part in network)}
    return dict(kept, HOME=str(home), PIP_CONFIG_FILE=os.devnull, TMPDIR=str(home / "tmp"))


def until_jupyterlab(command, cwd, env, log_path, timeout):
    """Start ``command`` (a shell line) in its own process group; return it and the seconds until JupyterLab's
    link appears in its output. Raises RuntimeError (with the output's end) if it exits first or times out."""
    began = time.monotonic()
    with open(log_path, "w") as log:
        process = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    while time.monotonic() - began < timeout:
        if JUPYTERLAB_LINK.search(Path(log_path).read_text(errors="replace")):
            return process, time.monotonic() - began
        if process.poll() is not None:
            break
        time.sleep(0.5)
    stop(process)
    raise RuntimeError(f"`{command}` gave no JupyterLab link within {timeout:.0f} s; its output ends:\n"
                       + "\n".join(Path(log_path).read_text(errors="replace").splitlines()[-20:]))


def stop(process):
    """Stop ``process`` and its process group (JupyterLab shuts its kernels down on SIGTERM)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def measure(bundle, home, page=UBUNTU_PAGE, timeout=1800):
    """Run the page's learner commands with ``bundle`` in the fresh ``home``; return what they took."""
    commands = learner_commands(page)
    (home / "Downloads").mkdir(parents=True)
    (home / "tmp").mkdir()
    shutil.copy(bundle, home / "Downloads" / BUNDLE_NAME)
    env = fresh_environment(home)
    subprocess.run(["bash", "-e", "-c", commands["unpack"]], cwd=home, env=env, check=True)
    kit = home / "pslab"
    received = received_bytes()
    lab, first_seconds = until_jupyterlab(commands["lab"], kit, env, home / "first-lab.log", timeout)
    received = received_bytes() - received
    try:
        began = time.monotonic()
        doctor = subprocess.run(["bash", "-c", commands["doctor"]], cwd=kit, env=env, capture_output=True, text=True,
                                timeout=timeout)
        doctor_seconds = time.monotonic() - began
    finally:
        stop(lab)
    lab, again_seconds = until_jupyterlab(commands["lab"], kit, env, home / "again-lab.log", timeout)
    stop(lab)
    python = subprocess.run([str(kit / ".venv" / "bin" / "python"), "--version"], capture_output=True, text=True)
    printed = doctor.stdout.strip().splitlines() or [doctor.stderr.strip()[-300:]]
    return {"first_lab_seconds": round(first_seconds, 1), "again_seconds": round(again_seconds, 1),
            "doctor_seconds": round(doctor_seconds, 1), "doctor_returncode": doctor.returncode,
            "doctor_verdict": printed[-1],
            "doctor_jupyter": next((line for line in doctor.stdout.splitlines() if line[6:].startswith("jupyter")), ""),
            "venv_mb": round(disk_bytes(kit / ".venv") / 1e6), "received_mb": round(received / 1e6),
            "bundle_mb": round(Path(bundle).stat().st_size / 1e6, 1), "python": python.stdout.strip(),
            "commands": [commands[key] for key in RUNS], "not_run_here": sorted(NOT_HERE)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "scripts"))
    import learner_bundle

    with tempfile.TemporaryDirectory(prefix="pslab-first-install-") as scratch:
        bundle = Path(scratch) / BUNDLE_NAME
        learner_bundle.bundle(bundle)  # the kit alone: with no wheelhouse, every wheel comes from the index
        result = measure(bundle, Path(scratch) / "home")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
