"""Run a code snippet as its own program, the way one machine of a cluster runs it.

The notebooks use this to run the usual (broken) snippets exactly as written,
in a fresh Python process with its own TF_CONFIG and Keras version, and show
the real error they end with.
"""
import inspect
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass

import psutil

from labkit.runtime import children
from labkit.runtime.children import exit_when_parent_exits

NOISE_PREFIXES = ("I0000", "W0000", "E0000", "WARNING: All log messages")
# Put before every snippet: the program exits when its parent does (see labkit.runtime.children),
# without importing labkit, which would change the Keras version under test.
EXIT_WITH_PARENT = ("import os\n" + inspect.getsource(exit_when_parent_exits)
                    + "import threading\nthreading.Thread(target=exit_when_parent_exits, daemon=True).start()\n")


@dataclass
class ProgramResult:
    """How a snippet program ended."""

    returncode: int | None
    seconds: float
    output: str
    timed_out: bool

    @property
    def error(self):
        """The last line of the traceback (``ValueError: ...``), or "" if it ended cleanly."""
        lines = [line for line in self.output.splitlines() if line.strip()]
        if self.timed_out:
            return f"no error: still waiting after {self.seconds:.0f} s, so it was stopped"
        return lines[-1] if lines and self.returncode != 0 else ""

    def __str__(self):
        ending = "timed out" if self.timed_out else f"exit code {self.returncode}"
        return f"{ending} after {self.seconds:.1f} s\n{self.error}"


def run_program(code, tf_config, keras=2, timeout=300.0):
    """Run ``code`` with ``python -c`` under ``tf_config`` (a dict) and Keras ``keras`` (2 or 3).

    The ``timeout`` (seconds) is for a program that hangs; one that ends waits no longer than it runs.
    Starting TensorFlow and Keras 3 took over 120 s on a 2-core machine at load 18.
    """
    if keras not in (2, 3):
        raise ValueError(f"keras must be 2 or 3, got {keras!r}")
    env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), TF_USE_LEGACY_KERAS="1" if keras == 2 else "0")
    began = time.monotonic()
    with tempfile.TemporaryFile("w+") as output_file:
        program = children.start_command([sys.executable, "-c", EXIT_WITH_PARENT + code], env=env,
                                         stdout=output_file)
        try:
            returncode, timed_out = program.wait(timeout=timeout), False
        except psutil.TimeoutExpired:
            returncode, timed_out = None, True
        program.stop()
        output_file.seek(0)
        output = output_file.read()
    kept = "\n".join(line for line in output.splitlines() if not line.startswith(NOISE_PREFIXES))
    return ProgramResult(returncode, time.monotonic() - began, kept, timed_out)
