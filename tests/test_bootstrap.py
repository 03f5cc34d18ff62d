"""`make install` finds a Python the kit supports; `import labkit` selects Keras 2 and the environment PS
training needs. Either says what to do when it cannot."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# What the Makefile and scripts/find_python.sh run besides Python: a PATH of these alone hides this machine's Pythons.
TOOLS = ["make", "sh", "head", "grep", "sed", "tr", "uname", "id", "mkdir"]
FAKE_PYTHON = """[ "$1 $2" = "-m venv" ] && mkdir -p "$3/bin"
echo "Python {version}"
"""


def fake_program(bin_dir, name, script):
    """Write a shell script named `name` into bin_dir, in place of any program of that name."""
    program = bin_dir / name
    program.unlink(missing_ok=True)
    program.write_text("#!/bin/sh\n" + script)
    program.chmod(0o755)


def path_with(tmp_path, **pythons):
    """A PATH holding the kit's tools and fake Pythons, and nothing else.

    Each fake (name -> version) reports its version and, like a real one, makes a folder for `-m venv DIR`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        (bin_dir / tool).symlink_to(shutil.which(tool))
    for name, version in pythons.items():
        fake_program(bin_dir, name, FAKE_PYTHON.format(version=version))
    return str(bin_dir)


def test_make_install_without_a_supported_python_stops_before_making_the_venv_and_says_how_to_get_one(tmp_path):
    venv = tmp_path / "venv"
    done = subprocess.run(["make", "-C", str(ROOT), "install", f"VENV={venv}"], capture_output=True, text=True,
                          env={**os.environ, "PATH": path_with(tmp_path, python3="3.10.12"), "OS_RELEASE": os.devnull},
                          timeout=60)
    assert done.returncode != 0
    assert "Found python3 (" in done.stderr and "): Python 3.10.12." in done.stderr
    assert "needs Python 3.11, 3.12 or 3.13" in done.stderr
    assert "make lab PYTHON=/path/to/python3.12" in done.stderr
    assert any(step in done.stderr for step in ["python.org", "deadsnakes"]), done.stderr
    assert not venv.exists()


def test_the_newest_supported_python_on_path_is_chosen_and_python_overrides_it(tmp_path):
    path = path_with(tmp_path, python3="3.10.12", **{"python3.12": "3.12.3", "python3.11": "3.11.9"})
    chosen = subprocess.run(["sh", str(ROOT / "scripts" / "find_python.sh")], capture_output=True, text=True,
                            env={**os.environ, "PATH": path}, timeout=60)
    assert chosen.stdout.strip() == str(tmp_path / "bin" / "python3.12"), chosen.stderr
    named = subprocess.run(["sh", str(ROOT / "scripts" / "find_python.sh"), "python3.11"], capture_output=True,
                           text=True, env={**os.environ, "PATH": path}, timeout=60)
    assert named.stdout.strip() == str(tmp_path / "bin" / "python3.11"), named.stderr


def test_without_one_on_path_the_python_uv_manages_is_chosen_and_a_mac_is_told_of_brew(tmp_path):
    path = path_with(tmp_path, python3="3.9.6")
    find_python = ["sh", str(ROOT / "scripts" / "find_python.sh")]
    fake_program(tmp_path / "bin", "uname", "echo Darwin\n")
    on_a_mac = subprocess.run(find_python, capture_output=True, text=True, env={**os.environ, "PATH": path}, timeout=60)
    assert on_a_mac.returncode != 0 and "brew install python@3.12" in on_a_mac.stderr, on_a_mac.stderr
    assert "step by step: docs/install-macos.md" in on_a_mac.stderr
    fake_program(tmp_path / "bin", "uv", '[ "$*" = "python find >=3.11,<3.14" ] && echo /uv/python3.12\n')
    with_uv = subprocess.run(find_python, capture_output=True, text=True, env={**os.environ, "PATH": path}, timeout=60)
    assert with_uv.stdout.strip() == "/uv/python3.12", with_uv.stderr


UBUNTU = 'NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="{version}"\n'


@pytest.mark.parametrize("system, machine, release, os_release, says, not_says", [
    ("Linux", "x86_64", "6.8.0-generic", UBUNTU.format(version="26.04"),
     ["Ubuntu 26.04 ships a Python TensorFlow 2.21 cannot use", "uv python install 3.12", "ppa:deadsnakes/ppa",
      "docs/install-ubuntu.md"], ["WSL2"]),
    ("Linux", "x86_64", "6.8.0-generic", UBUNTU.format(version="22.04"),
     ["Ubuntu 22.04 ships Python 3.10", "ppa:deadsnakes/ppa", "uv python install 3.12"], ["26.04"]),
    ("Linux", "x86_64", "6.6.87.2-microsoft-standard-WSL2", UBUNTU.format(version="26.04"),
     ["This is WSL2", "wsl --install -d Ubuntu-24.04", "uv python install 3.12"], []),
    ("Darwin", "arm64", "24.1.0", "", ["brew install python@3.12", "/opt/homebrew/bin", "uv python install 3.12",
                                       "docs/install-macos.md"], ["Intel"]),
    ("Darwin", "x86_64", "24.1.0", "", ["Intel Mac: TensorFlow 2.21 has no wheel for it"], ["brew install"]),
    ("Linux", "x86_64", "6.9.0", 'ID=fedora\nVERSION_ID=41\n', ["sudo dnf install python3.12"], ["apt"]),
])
def test_the_advice_fits_the_system_it_runs_on(tmp_path, system, machine, release, os_release, says, not_says):
    path = path_with(tmp_path, python3="3.14.0")
    fake_program(tmp_path / "bin", "uname", f'case "$1" in -s) echo {system};; -m) echo {machine};; '
                                            f'-r) echo {release};; esac\n')
    (tmp_path / "os-release").write_text(os_release)
    done = subprocess.run(["sh", str(ROOT / "scripts" / "find_python.sh")], capture_output=True, text=True,
                          env={**os.environ, "PATH": path, "OS_RELEASE": str(tmp_path / "os-release")}, timeout=60)
    assert done.returncode != 0 and "Found python3 (" in done.stderr and "Python 3.14.0" in done.stderr
    assert [phrase for phrase in says if phrase not in done.stderr] == [], done.stderr
    assert [phrase for phrase in not_says if phrase in done.stderr] == [], done.stderr


def run_python(code, **env):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


@pytest.mark.cluster
def test_import_labkit_first_gives_keras_2_the_grpc_setting_and_hides_only_info_logs():
    done = run_python("import os, labkit, tensorflow as tf, tf_keras\n"
                      "print(tf.keras.Model is tf_keras.Model, os.environ['GRPC_FAIL_FAST'])\n"
                      "tf.get_logger().info('INFO-LINE'); tf.get_logger().warning('WARNING-LINE')",
                      TF_USE_LEGACY_KERAS="0")
    assert done.stdout.split() == ["True", "use_caller"], done.stderr[-2000:]
    assert "WARNING-LINE" in done.stderr and "INFO-LINE" not in done.stderr


@pytest.mark.cluster
def test_tensorflow_imported_first_with_keras_3_is_a_clear_error():
    done = run_python("import tensorflow\nimport labkit", TF_USE_LEGACY_KERAS="0")
    assert done.returncode != 0
    assert "KerasVersionError" in done.stderr
    assert "restart the kernel" in done.stderr and "import labkit" in done.stderr


@pytest.mark.cluster
def test_tensorflow_imported_first_with_legacy_keras_is_fine():
    done = run_python("import tensorflow\nimport labkit\nprint('ok')", TF_USE_LEGACY_KERAS="1")
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


@pytest.mark.cluster
def test_a_process_that_only_imported_ipykernel_is_not_taken_for_a_kernel():
    """pytest with nbval (make test-defaults) imports ipykernel; only a running kernel gets TensorFlow imported with labkit."""
    done = run_python("import sys, ipykernel.kernelspec, labkit\nprint('tensorflow' in sys.modules)")
    assert done.stdout.strip() == "False", done.stderr[-2000:]
