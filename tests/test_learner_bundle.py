"""`make learner-bundle`: the kit without solutions/, with the wheelhouse's wheels when there are any."""
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import learner_bundle  # noqa: E402

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
    wheelhouse.mkdir()
    (wheelhouse / "example-1.0-py3-none-any.whl").write_bytes(b"a wheel")
    (wheelhouse / "notes.txt").write_text("not a wheel")
    names = learner_bundle.bundle(tmp_path / "bundle.tar.gz", wheelhouse)
    assert "wheelhouse/example-1.0-py3-none-any.whl" in names
    assert "pslab/wheelhouse/example-1.0-py3-none-any.whl" in members(tmp_path / "bundle.tar.gz")
    assert "pslab/wheelhouse/notes.txt" not in members(tmp_path / "bundle.tar.gz")


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
