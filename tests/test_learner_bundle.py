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
