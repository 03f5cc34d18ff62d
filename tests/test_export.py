"""`labkit export`: per-host TF_CONFIG and start commands, written as files and printed as a plan."""
import json
import os
import shlex
import subprocess
import sys

import psutil
import pytest

from labkit.deploy import export
from labkit.runtime import loglines, tfconfig

CLUSTER = {"chief": ["10.0.0.9:2222"], "ps": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.2:2223"]}
FLAGS = ["--chief", "10.0.0.9:2222", "--ps", "10.0.0.1:2222", "--worker", "10.0.0.2:2222", "--worker", "10.0.0.2:2223"]


def labkit_export(*args):
    return subprocess.run([sys.executable, "-m", "labkit.tools.cli", "export", *args], capture_output=True, text=True)


def test_every_task_gets_its_tf_config_and_the_plan_command_in_its_host_directory(tmp_path):
    plan = export.export(CLUSTER, tmp_path)
    assert sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*") if path.is_file()) == [
        "10.0.0.1/ps-0/run.sh", "10.0.0.1/ps-0/tf_config.json",
        "10.0.0.2/worker-0/run.sh", "10.0.0.2/worker-0/tf_config.json",
        "10.0.0.2/worker-1/run.sh", "10.0.0.2/worker-1/tf_config.json",
        "10.0.0.9/chief-0/run.sh", "10.0.0.9/chief-0/tf_config.json", "plan.txt"]
    for entry, (task, host, directory) in zip(plan, export.exported_tasks(tmp_path)):
        assert (entry["task"], entry["host"]) == (task, host)
        config = json.loads((directory / "tf_config.json").read_text())
        assert config == tfconfig.build(CLUSTER, *tfconfig.parse_task(task))
        run = directory / "run.sh"
        assert run.read_text().splitlines()[-1] == f"exec env {entry['command']}"
        assert os.access(run, os.X_OK)
        words = shlex.split(run.read_text().splitlines()[-1])
        assert json.loads(words[2].removeprefix("TF_CONFIG=")) == config
        program = export.DEFAULT_CHIEF_COMMAND if task == "chief:0" else "python -m labkit.runtime.server"
        assert words[3:] == shlex.split(program)


def test_the_plan_says_where_each_task_runs_which_ports_to_open_and_the_security_fact(tmp_path):
    text = export.format_plan(export.export(CLUSTER, tmp_path))
    assert (tmp_path / "plan.txt").read_text() == text + "\n"
    assert "10.0.0.2: port 2222, 2223 to the cluster's other hosts only (10.0.0.1, 10.0.0.9)" in text
    assert "no authentication" in text and "0.0.0.0" in text
    assert "every ps host share" in text
    assert "each worker reads its own from the same path: storage every worker host shares too" in text
    assert '--data-dir "$PWD/data"' in export.DEFAULT_CHIEF_COMMAND and "--ship-arrays" in text  # the way out
    worker_run = (tmp_path / "10.0.0.2" / "worker-1" / "run.sh").read_text()
    assert "open port 2223" in worker_run and "no authentication" in worker_run


@pytest.mark.cluster
def test_the_cli_prints_the_plan_and_writes_the_same_files_from_flags_or_a_file(tmp_path):
    from_flags = labkit_export(*FLAGS, "--out", str(tmp_path / "flags"))
    assert from_flags.returncode == 0, from_flags.stderr
    assert "# on host 10.0.0.1\n# ps:0\nTF_CONFIG=" in from_flags.stdout
    (tmp_path / "cluster.yaml").write_text(
        "chief: [10.0.0.9:2222]\nps: [10.0.0.1:2222]\nworker:\n  - 10.0.0.2:2222\n  - 10.0.0.2:2223\n")
    (tmp_path / "tf_config.json").write_text(json.dumps(tfconfig.build(CLUSTER, "worker", 0)))
    for name in ("cluster.yaml", "tf_config.json"):
        out = tmp_path / f"from-{name}"
        done = labkit_export("--cluster", str(tmp_path / name), "--out", str(out))
        assert done.returncode == 0, done.stderr
        assert done.stdout == from_flags.stdout.replace(str(tmp_path / "flags"), str(out))
        assert (out / "plan.txt").read_text() == (tmp_path / "flags" / "plan.txt").read_text()


@pytest.mark.parametrize("args, message", [
    pytest.param(["--ps", "10.0.0.1:2222", "--worker", "10.0.0.2:2222"], 'the cluster has no "chief"', id="no-chief"),
    pytest.param(["--chief", "10.0.0.9:2222", "--ps", "10.0.0.1", "--worker", "10.0.0.2:2222"],
                 "is not of the form host:port", id="no-port"),
    pytest.param(["--chief", "10.0.0.9:2222", "--worker", "10.0.0.2:2222"], "has no 'ps' task", id="no-ps"),
    pytest.param(["--chief", "10.0.0.9:2222", "--ps", "10.0.0.9:2222", "--worker", "10.0.0.2:2222"],
                 "is used by both", id="address-twice"),
    pytest.param([], "exactly one of the two", id="no-cluster"),
    pytest.param(["--cluster", "missing.yaml", "--chief", "10.0.0.9:2222"], "exactly one of the two", id="both"),
    pytest.param(["--cluster", "missing.yaml"], "No such file or directory. Check the path", id="missing-file"),
])
@pytest.mark.cluster
def test_bad_input_is_a_clear_error_and_writes_nothing(args, message, tmp_path):
    done = labkit_export(*args, "--out", str(tmp_path / "out"))
    assert done.returncode != 0 and message in done.stderr and done.stderr.startswith("labkit export: ")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text, message", [
    ("chief: [10.0.0.9:2222\n", "is not valid YAML or JSON"),
    ("chief: [10.0.0.9:2222]\nps: [10.0.0.1:2222]\nworkers: [10.0.0.2:2222]\n", "Did you mean 'worker'?"),
    ("ps: 10.0.0.1:2222\n", "must have a non-empty list"),
])
def test_a_bad_cluster_file_is_a_clear_error(text, message, tmp_path):
    (tmp_path / "cluster.yaml").write_text(text)
    with pytest.raises(tfconfig.TFConfigError, match=message):
        export.export(export.load_cluster(tmp_path / "cluster.yaml"), tmp_path / "out")


def test_an_earlier_export_is_never_mixed_with_a_new_one(tmp_path):
    export.export(CLUSTER, tmp_path)
    with pytest.raises(ValueError, match="is not empty"):
        export.export({**CLUSTER, "worker": ["10.0.0.3:2222"]}, tmp_path)


def test_following_the_chief_prints_its_progress_as_text_lines(tmp_path, capsys):
    """A papermill or saved copy keeps text lines as they were printed; a widget bar would stay frozen there."""
    log = "".join(loglines.timeline_line(0.1 * step, step, loglines.CHECKPOINT_SAVED) + "\n" for step in (10, 20))
    (tmp_path / export.LOG_NAME).touch()  # as start_task makes it, before the chief writes a line
    writes_log = f"import time; time.sleep(0.3); open({export.LOG_NAME!r}, 'w').write({log!r})"
    chief = psutil.Popen([sys.executable, "-c", writes_log], cwd=tmp_path)
    looks = []
    assert export.follow_chief(chief, tmp_path, 20, while_running=lambda: looks.append(chief.is_running())) == log
    assert capsys.readouterr().out.startswith("chief: training steps: 20/20 steps")
    assert looks and all(looks), "while_running is called while the chief runs, and only then"
