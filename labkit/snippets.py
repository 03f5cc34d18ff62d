"""Run a code snippet as its own program, the way one machine of a cluster runs it.

The notebooks use this to run the usual (broken) snippets exactly as written,
in a fresh Python process with its own TF_CONFIG and Keras version, and show
the real error they end with.
"""
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

NOISE_PREFIXES = ("I0000", "W0000", "E0000", "WARNING: All log messages")


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


def run_program(code, tf_config, keras=2, timeout=120.0):
    """Run ``code`` with ``python -c`` under ``tf_config`` (a dict) and Keras ``keras`` (2 or 3)."""
    if keras not in (2, 3):
        raise ValueError(f"keras must be 2 or 3, got {keras!r}")
    env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), TF_USE_LEGACY_KERAS="1" if keras == 2 else "0")
    began = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=timeout)
        returncode, output, timed_out = done.returncode, done.stdout + done.stderr, False
    except subprocess.TimeoutExpired as expired:
        returncode, output, timed_out = None, _text(expired.stdout) + _text(expired.stderr), True
    kept = "\n".join(line for line in output.splitlines() if not line.startswith(NOISE_PREFIXES))
    return ProgramResult(returncode, time.monotonic() - began, kept, timed_out)


def _text(captured):
    return captured.decode(errors="replace") if isinstance(captured, bytes) else (captured or "")
