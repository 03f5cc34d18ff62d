"""JupyterLab as `make lab` starts it: on 127.0.0.1 only, Jupyter's token on, serving a work folder.

    python -m labkit.tools.lab work    # what `make lab` runs once work/ is filled

The browser tests and the measured workshop day start it the same way (``command``).
"""
import os
import sys


def command(root, port=None, token=None, open_browser=True):
    """The command that serves ``root`` with JupyterLab on 127.0.0.1, opening ``notebooks/``: on ``port`` (else the
    first free one from 8888), with ``token`` (else one Jupyter makes) and a browser if ``open_browser``."""
    arguments = [sys.executable, "-m", "jupyterlab", "--ip=127.0.0.1", f"--ServerApp.root_dir={root}",
                 "--LabApp.default_url=/lab/tree/notebooks"]
    if port:
        arguments += [f"--port={port}", "--ServerApp.port_retries=0"]
    if token:
        arguments.append(f"--IdentityProvider.token={token}")
    if not open_browser:
        arguments.append("--no-browser")
    if os.getuid() == 0:  # Jupyter refuses to run as root (containers, CI machines) unless told it may
        arguments.append("--allow-root")
    return arguments


def main(argv=None):
    folder, = sys.argv[1:] if argv is None else argv
    arguments = command(folder)
    os.execv(arguments[0], arguments)


if __name__ == "__main__":
    main()
