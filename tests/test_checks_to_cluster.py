"""Every check of labkit.checks.to_cluster rejects a wrong result (and accepts the right one).

Real objects throughout: real processes, checkpoints written by TensorFlow, matplotlib axes; only the
numbers fed in are chosen to be wrong.
"""
import json
import subprocess
import sys

import psutil
import pytest

from labkit import checks


def test_09_a_task_must_run_in_its_directory_with_its_tf_config(tmp_path):
    config = {"cluster": {"ps": ["localhost:1"], "worker": ["localhost:2"]}, "task": {"type": "ps", "index": 0}}
    (tmp_path / "ps-0").mkdir()
    (tmp_path / "ps-0" / "tf_config.json").write_text(json.dumps(config))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "tf_config.json").write_text(json.dumps(dict(config, task={"type": "worker", "index": 0})))
    process = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
                               cwd=tmp_path / "ps-0", env={"TF_CONFIG": json.dumps(config)}, stdout=subprocess.PIPE)
    process.stdout.readline()  # it runs the program now: before exec, /proc shows this process's environment
    try:
        checks.runs_with_its_files(psutil.Process(process.pid), tmp_path / "ps-0")
        with pytest.raises(AssertionError, match="does not have the TF_CONFIG of"):
            checks.runs_with_its_files(psutil.Process(process.pid), tmp_path / "other")
        (tmp_path / "copy").mkdir()
        (tmp_path / "copy" / "tf_config.json").write_text(json.dumps(config))
        with pytest.raises(AssertionError, match="runs in"):
            checks.runs_with_its_files(psutil.Process(process.pid), tmp_path / "copy")
    finally:
        process.kill()
        process.wait()
