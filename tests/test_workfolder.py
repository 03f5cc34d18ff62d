"""The learner's work folder: `make lab` copies the notebooks and exercises there once and never
replaces a file a learner has; git ignores it, so `git pull` and `make test` never touch it."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.tools import workfolder

ROOT = Path(__file__).resolve().parents[1]


def test_the_first_run_copies_every_notebook_and_exercise(tmp_path):
    copied = workfolder.copy_missing(tmp_path / "work")
    names = {(path.parent.name, path.name) for path in copied}
    for folder in workfolder.FOLDERS:
        for original in (ROOT / folder).glob("*.ipynb"):
            assert (folder, original.name) in names
            assert (tmp_path / "work" / folder / original.name).read_bytes() == original.read_bytes()
    assert not (tmp_path / "work" / "exercises" / ".generated.json").exists()


def test_a_learners_edited_copy_survives_later_runs_and_only_missing_files_come_back(tmp_path):
    work = tmp_path / "work"
    workfolder.copy_missing(work)
    edited, deleted = work / "exercises" / "ex1_basic_cluster.ipynb", work / "notebooks" / "00_welcome.ipynb"
    edited.write_text("my answers")
    deleted.unlink()
    copied = workfolder.copy_missing(work)
    assert copied == [deleted]
    assert edited.read_text() == "my answers"


def test_the_command_says_what_it_did_and_refuses_a_folder_that_is_not_the_kit(tmp_path):
    run = [sys.executable, "-m", "labkit.tools.workfolder", str(tmp_path / "work")]
    first = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert "already there, left untouched" in first and " 0 already there" in first
    again = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert ": 0 new file(s)" in again
    wrong = subprocess.run(run + ["--kit", str(tmp_path)], capture_output=True, text=True)
    assert wrong.returncode == 1 and "notebooks is missing: run this from a PS Lab checkout" in wrong.stderr


def test_git_ignores_the_work_folder_and_make_lab_opens_it():
    assert "\nwork/\n" in (ROOT / ".gitignore").read_text()
    makefile = (ROOT / "Makefile").read_text()
    lab_recipe = makefile.split("\nlab:")[1].split("\n\n")[0]
    assert "labkit.tools.workfolder $(WORK)" in lab_recipe and "labkit.tools.lab $(WORK)" in lab_recipe
    assert re.search(r"\nWORK\s*:= work\n", makefile)


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the git checkout")
def test_git_ignores_every_file_of_the_work_folder_and_pytest_looks_only_in_tests():
    import tomllib

    ignored = subprocess.run(["git", "check-ignore", "work/exercises/ex1_basic_cluster.ipynb", "work/runs/x.json"],
                             cwd=ROOT, capture_output=True, text=True)
    assert ignored.stdout.split() == ["work/exercises/ex1_basic_cluster.ipynb", "work/runs/x.json"]
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert options["testpaths"] == ["tests"], "make test must not collect learners' copies in work/"


@pytest.mark.notebook
def test_make_lab_small_starts_jupyterlab_whose_kernels_use_the_offline_subset(monkeypatch, tmp_path):
    """The kernels JupyterLab starts inherit its environment, so `make lab-small`'s variable reaches them,
    and they use the subset though (a tiny stand-in for) full MNIST is cached."""
    import numpy as np
    from jupyter_client.manager import start_new_kernel

    recipe = (ROOT / "Makefile").read_text().split("\nlab-small:")[1].split("\n\n")[0]
    assert "LABKIT_MNIST_SOURCE=offline-subset $(MAKE) lab" in recipe
    cache = tmp_path / ".keras" / "datasets" / "mnist.npz"
    cache.parent.mkdir(parents=True)
    images, labels = np.zeros((10, 28, 28), "uint8"), np.zeros(10, "uint8")
    np.savez(cache, x_train=images, y_train=labels, x_test=images, y_test=labels)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("LABKIT_MNIST_SOURCE", "offline-subset")
    manager, client = start_new_kernel(kernel_name="pslab", startup_timeout=120)
    try:
        said = []
        client.execute_interactive("from labkit.data import load_mnist\nprint(load_mnist().source)", timeout=120,
                                   output_hook=lambda message: said.append(message["content"].get("text", "")))
        assert "offline MNIST subset" in "".join(said)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def relative_links(notebook):
    """The relative link targets (without #anchors) in a notebook's markdown cells."""
    cells = json.loads(notebook.read_text())["cells"]
    text = "".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")
    return {target.split("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", text)
            if not re.match(r"[a-z]+:", target) and not target.startswith("#")}


def test_every_relative_link_of_a_notebook_opens_in_the_work_folder(tmp_path):
    work = tmp_path / "work"
    workfolder.copy_missing(work)
    broken = [f"{notebook.relative_to(work)} -> {target}" for folder in ("notebooks", "exercises")
              for notebook in sorted((work / folder).glob("*.ipynb")) for target in relative_links(notebook)
              if not (notebook.parent / target).exists()]
    assert broken == [], "links that JupyterLab cannot open in work/ (copy their target there, or link elsewhere)"
