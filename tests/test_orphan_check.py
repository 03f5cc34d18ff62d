"""The orphan check can fail: a pytest run whose test leaks a task process fails because of it."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

import support.processes as this_run
from labkit.runtime import processes

TESTS = Path(__file__).resolve().parent

# The sub-run's conftest: this project's orphan check, from the module the real conftest uses,
# with a shorter grace period (nothing is going to exit there).
CONFTEST = textwrap.dedent("""
    import support.processes
    from support.processes import no_orphan_task_processes  # noqa: F401

    support.processes.ORPHAN_GRACE_SECONDS = 1.0
""")

# A real `python -m labkit.runtime.server` with a valid TF_CONFIG, started as its own session without the
# parent-death pipe, so it outlives the sub-run as an orphan would. Its pid goes to a file.
START_SERVER = textwrap.dedent("""
    import json, os, subprocess, sys
    import portpicker
    from labkit.runtime import processes

    def start_server():
        ps, worker = (f"localhost:{portpicker.pick_unused_port()}" for _ in range(2))
        config = {"cluster": {"ps": [ps], "worker": [worker]}, "task": {"type": "ps", "index": 0}}
        return subprocess.Popen([sys.executable, "-m", processes.SERVER_MODULE], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                env=dict(os.environ, TF_CONFIG=json.dumps(config)))
""")

LEAKS = START_SERVER + textwrap.dedent("""
    def test_forgets_its_server(tmp_path_factory):
        server = start_server()
        with open(os.environ["LEAKED_PIDS"], "a") as pids:
            pids.write(f"{server.pid}\\n")
""")

CLEANS_UP = START_SERVER + textwrap.dedent("""
    def test_stops_its_server():
        server = start_server()
        server.kill()
        server.wait()
""")


@pytest.mark.cluster
def test_a_leaked_task_process_fails_the_run_and_a_stopped_one_does_not(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_leaks.py").write_text(LEAKS)
    (tmp_path / "test_cleans_up.py").write_text(CLEANS_UP)
    leaked_pids = tmp_path / "leaked.txt"
    env = dict(os.environ, LEAKED_PIDS=str(leaked_pids),
               PYTHONPATH=os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])))
    try:
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:nbval",
                              "--rootdir", str(tmp_path), str(tmp_path)],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    finally:
        pids = [int(pid) for pid in leaked_pids.read_text().split()] if leaked_pids.exists() else []
        for pid in pids:
            try:
                leaked = psutil.Process(pid)
                mark = leaked.environ().get(this_run.RUN_MARK[0])
                leaked.kill()
            except psutil.NoSuchProcess:
                mark = None
        assert processes.wait_until_gone(pids, timeout=15) == [], "could not clean up the leaked server"
    output = run.stdout + run.stderr
    assert len(pids) == 1, output
    assert run.returncode == 1, output
    assert "1 error" in output and "2 passed" in output, output
    assert "ERROR at teardown of test_forgets_its_server" in output, output
    assert f"{this_run.ORPHAN_MESSAGE}: pids [{pids[0]}]" in output, output
    assert "test_stops_its_server" not in output.split("short test summary")[-1], output
    assert mark not in (None, this_run.RUN_MARK[1]), "the sub-run's processes must carry their own mark"
