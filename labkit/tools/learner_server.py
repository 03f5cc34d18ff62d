"""What the class hub starts for each learner, as that learner: ``python -m labkit.tools.learner_server ARGS...``.

It copies the kit's notebooks, exercises and docs into ``~/work`` (``labkit.tools.workfolder``, as ``make lab`` does:
only the files missing, so a learner's edits stay), a folder only its owner may read; gives them the full MNIST
that ``make hub`` cached for the class, if it did; then becomes JupyterHub's single-user server (ARGS are the
hub's) on ``~/work``, where the PS Lab kernel is the only kernel (each one in a private network namespace,
``labkit.runtime.isolation``) and each terminal's shell starts in a private network namespace too.
"""
import json
import os
import pwd
import sys
from pathlib import Path

from labkit.data import KERAS_CACHE, install_mnist_file
from labkit.tools import workfolder
from labkit.tools.hub import CLASS_MNIST

KERNEL = "pslab"  # the kernel `make kernel` registers
WORK = Path.home() / "work"


def server_arguments(shell):
    """The single-user server's own settings: ``~/work``, the PS Lab kernel alone, isolated terminals running ``shell``."""
    terminal = [sys.executable, "-m", "labkit.runtime.isolation", "--inside", "--", shell, "-l"]
    return [f"--ServerApp.root_dir={WORK}", f"--MappingKernelManager.default_kernel_name={KERNEL}",
            f"--KernelSpecManager.allowed_kernelspecs={KERNEL}",
            f"--ServerApp.terminado_settings={json.dumps({'shell_command': terminal})}",
            # No news feed nor update check fetched from the internet for each learner's server.
            "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]


def main():
    WORK.mkdir(mode=0o700, exist_ok=True)
    WORK.chmod(0o700)
    workfolder.copy_missing(WORK)
    if CLASS_MNIST.exists() and not KERAS_CACHE.exists():
        install_mnist_file(CLASS_MNIST)
    shell = pwd.getpwuid(os.getuid()).pw_shell or "/bin/sh"
    os.execv(sys.executable, [sys.executable, "-m", "jupyterhub.singleuser", *sys.argv[1:], *server_arguments(shell)])


if __name__ == "__main__":
    main()
