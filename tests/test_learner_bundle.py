"""`make learner-bundle`: the kit without solutions/, with the wheelhouse's wheels when there are any; its
install in a mixed room."""
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from support.scripts import script

ROOT = Path(__file__).resolve().parents[1]
learner_bundle = script("learner_bundle")

pytestmark = pytest.mark.skipif(not (ROOT / ".git").exists(), reason="bundles are made from the git checkout")


def members(archive):
    with tarfile.open(archive) as bundle:
        return {member.name for member in bundle.getmembers()}


def test_the_bundle_holds_the_kit_without_solutions(tmp_path):
    out = tmp_path / "pslab-learner.tar.gz"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "learner_bundle.py"), str(out)],
                          capture_output=True, text=True, check=True)
    names = members(out)
    assert "0 wheels" in done.stdout and "kit files without solutions/" in done.stdout
    assert not [name for name in names if name.startswith("pslab/solutions")]
    for needed in ("Makefile", "scripts/find_python.sh", "pyproject.toml", "labkit/tools/cli.py",
                   "notebooks/03_custom_training_loop.ipynb", "exercises/ex1_basic_cluster.ipynb",
                   "docs/instructor-guide.md"):
        assert f"pslab/{needed}" in names
    assert not [name for name in names if "/.venv/" in name or "/runs/" in name or "/work/" in name]


def test_the_bundle_carries_the_wheelhouse_when_one_was_built(tmp_path):
    wheelhouse = tmp_path / "wheelhouse"
    (wheelhouse / "macos-arm64-py3.12").mkdir(parents=True)
    (wheelhouse / "macos-arm64-py3.12" / "example-1.0-py3-none-any.whl").write_bytes(b"a wheel")
    (wheelhouse / "macos-arm64-py3.12" / "notes.txt").write_text("not a wheel")
    names = learner_bundle.bundle(tmp_path / "bundle.tar.gz", wheelhouse)
    assert "wheelhouse/macos-arm64-py3.12/example-1.0-py3-none-any.whl" in names
    assert "pslab/wheelhouse/macos-arm64-py3.12/example-1.0-py3-none-any.whl" in members(tmp_path / "bundle.tar.gz")
    assert "pslab/wheelhouse/macos-arm64-py3.12/notes.txt" not in members(tmp_path / "bundle.tar.gz")


def a_wheel(folder, name="example", version="1.0"):
    """A real (tiny, pure-Python) wheel in ``folder``, as `pip download` would leave it."""
    import base64
    import hashlib
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {f"{name}.py": "ANSWER = 42\n", f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    digest = lambda text: base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record = "".join(f"{path},sha256={digest(text)},{len(text)}\n" for path, text in files.items()) + f"{info}/RECORD,,\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in {**files, f"{info}/RECORD": record}.items():
            archive.writestr(member, text)
    return path


def wheelhouse_install(kit, *pip_arguments, env):
    """The install step `make install` runs in ``kit`` (an unpacked bundle), with pip's ``pip_arguments``."""
    return subprocess.run([sys.executable, str(kit / "scripts" / "wheelhouse.py"), "install", str(kit / "wheelhouse"),
                           "--", *pip_arguments], cwd=kit, capture_output=True, text=True, env=env, timeout=300)


def test_a_bundle_whose_wheelhouse_lacks_this_platform_installs_from_the_package_index(tmp_path):
    """A bundle built for the Macs of a mixed room, unpacked on this machine: `make install`'s step resolves the
    kit's pins from the package index. A dry run of one small pin (portpicker) without its dependencies shows
    where pip looks, which is what this proves; that the whole stack resolves on each platform is
    `make check-platforms`' job."""
    wheelhouse = tmp_path / "wheelhouse"
    a_wheel(wheelhouse / "macos-arm64-py3.12")
    learner_bundle.bundle(tmp_path / "bundle.tar.gz", wheelhouse)
    with tarfile.open(tmp_path / "bundle.tar.gz") as bundle:
        bundle.extractall(tmp_path / "laptop", filter="data")
    kit = tmp_path / "laptop" / "pslab"
    pin = next(pin for pin in wheelhouse_module().pins() if pin.startswith("portpicker=="))
    done = wheelhouse_install(kit, "--dry-run", "--no-deps", "--ignore-installed", "--target", str(tmp_path / "t"),
                              "--report", str(tmp_path / "report.json"), pin,
                              env=wheelhouse_module().registry_environment())
    assert done.returncode == 0, done.stderr
    assert "holds wheels for macos-arm64-py3.12, none for this machine" in done.stderr
    assert "installing from the package index instead" in done.stderr
    [chosen] = json.loads((tmp_path / "report.json").read_text())["install"]
    assert chosen["metadata"]["version"] == pin.split("==")[1]
    assert chosen["download_info"]["url"].startswith("https://"), "from the index, not the wheelhouse"


def test_this_platforms_folder_installs_with_no_network_and_what_it_lacks_comes_from_the_index(tmp_path):
    wheelhouse = wheelhouse_module()
    kit = tmp_path / "kit"
    (kit / "scripts").mkdir(parents=True)
    for script in ("wheelhouse.py", "check_platforms.py"):
        shutil.copy(ROOT / "scripts" / script, kit / "scripts")
    a_wheel(wheelhouse.this_folder(kit / "wheelhouse"))
    offline = wheelhouse.offline_environment()
    done = wheelhouse_install(kit, "--target", str(tmp_path / "t"), "example==1.0", env=offline)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert (tmp_path / "t" / "example.py").read_text() == "ANSWER = 42\n"
    lacking = wheelhouse_install(kit, "--target", str(tmp_path / "t2"), "example==1.0", "no-such-package-pslab==1",
                                 env=dict(offline, PIP_RETRIES="0", PIP_TIMEOUT="2"))
    assert lacking.returncode != 0, "the dead proxy blocks the index: nothing can supply the missing package"
    assert "lacks a wheel (above): installing what it lacks from the package index" in lacking.stderr


def wheelhouse_module():
    sys.path.insert(0, str(ROOT / "scripts"))
    import wheelhouse

    return wheelhouse


def test_a_folder_that_is_not_a_checkout_is_refused(tmp_path):
    with pytest.raises(RuntimeError, match="is not a git checkout"):
        learner_bundle.bundle(tmp_path / "bundle.tar.gz", root=tmp_path)


def test_make_learner_bundle_passes_the_wheelhouse():
    recipe = (ROOT / "Makefile").read_text().split("\nlearner-bundle:")[1].split("\n\n")[0]
    assert "scripts/learner_bundle.py --wheelhouse $(WHEELHOUSE)" in recipe


def test_the_update_steps_for_bundle_learners_keep_their_work_and_bring_the_new_kit(tmp_path):
    """docs/install.md's "Updating the kit" commands for the bundle, run as written (all but `make lab`)."""
    import os
    import re

    block = re.search(r"\*\*From the learner bundle\*\*.*?```bash\n(.*?)```", (ROOT / "docs" / "install.md").read_text(),
                      re.DOTALL).group(1)
    steps = [line.split("#")[0].strip() for line in block.splitlines()]
    assert steps[-1] == "cd pslab && make lab"
    home = tmp_path / "home"
    (home / "Downloads").mkdir(parents=True)
    learner_bundle.bundle(home / "Downloads" / "pslab-learner.tar.gz")
    old = home / "pslab"
    (old / "work" / "notebooks").mkdir(parents=True)
    (old / "work" / "notebooks" / "00_welcome.ipynb").write_text("the learner's edits")
    (old / "notebooks").mkdir()
    (old / "notebooks" / "99_dropped.ipynb").write_text("a notebook the new kit no longer has")
    script = "\n".join([*steps[:-1], "cd pslab"])  # `make lab` installs the kit: not in a unit test
    subprocess.run(["sh", "-e", "-c", script], env=dict(os.environ, HOME=str(home)), cwd=tmp_path, check=True)
    assert (old / "work" / "notebooks" / "00_welcome.ipynb").read_text() == "the learner's edits"
    assert (old / "Makefile").exists() and not (old / "notebooks" / "99_dropped.ipynb").exists()
    assert not (home / "pslab-old" / "work").exists()
