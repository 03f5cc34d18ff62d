"""Snippets run as their own programs, report how they ended, and never outlive the caller."""
import subprocess
import sys
import textwrap

import psutil

from labkit.runtime import processes
from labkit.runtime.processes import wait_until
from labkit.tools import snippets

import pytest

pytestmark = pytest.mark.cluster

NO_CLUSTER = {}


def test_the_last_error_line_and_exit_code_are_reported():
    result = snippets.run_program("print('working')\nraise ValueError('the real error')", NO_CLUSTER)
    assert result.returncode == 1 and not result.timed_out
    assert result.error == "ValueError: the real error"
    assert "working" in result.output


def test_a_program_that_hangs_is_stopped_at_the_timeout():
    result = snippets.run_program("import time\ntime.sleep(60)", NO_CLUSTER, timeout=1.0)
    assert result.timed_out and result.returncode is None
    assert "still waiting after 1 s" in result.error


def test_the_keras_version_is_the_one_asked_for():
    code = "import os\nprint('legacy keras:', os.environ['TF_USE_LEGACY_KERAS'])"
    assert "legacy keras: 0" in snippets.run_program(code, NO_CLUSTER, keras=3).output
    assert "legacy keras: 1" in snippets.run_program(code, NO_CLUSTER, keras=2).output


def test_a_snippet_dies_with_the_process_that_runs_it():
    caller = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        from labkit.tools import snippets
        snippets.run_program("import time\\ntime.sleep(120)", {}, timeout=120)
    """)])
    [snippet] = wait_until(psutil.Process(caller.pid).children, 30, "the snippet's process to start")
    caller.kill()
    caller.wait()
    assert processes.wait_until_gone([snippet.pid], timeout=10) == []
