"""The set-up files agree with each other and with what the kit needs."""
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

from labkit.tools import lab

ROOT = Path(__file__).resolve().parents[1]


def pins(requirements):
    """{name: version} from 'name==version' strings (ignoring comments and non-pins)."""
    found = {}
    for line in requirements:
        match = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)==([^\s#;]+)\s*", line.split("#")[0])
        if match:
            found[match.group(1).lower()] = match.group(2)
    return found


TEST_TOOLS = {"pytest", "pytest-timeout", "pytest-xdist", "nbval", "playwright", "kubernetes-validate"}


def pyproject_pins(extra=None):
    """The learner's pins, or with ``extra="test"`` the test extra's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    dependencies = project["optional-dependencies"][extra] if extra else project["dependencies"]
    assert all("==" in dependency for dependency in dependencies), "every dependency must be pinned with =="
    return pins(dependencies)


def environment_pins():
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(item["pip"] for item in environment["dependencies"] if isinstance(item, dict))
    return pins(pip_section)


def test_environment_yml_pins_match_pyproject():
    assert environment_pins() == pyproject_pins()


def test_the_learners_install_carries_no_test_tool_and_the_test_extra_carries_them_all():
    assert not TEST_TOOLS & set(pyproject_pins()), "test tools belong in the \"test\" extra"
    assert TEST_TOOLS <= set(pyproject_pins("test"))
    assert "papermill" in pyproject_pins(), "labkit sweep runs papermill: a learner needs it"
    assert not set(pyproject_pins()) & set(pyproject_pins("test"))


def test_make_test_installs_the_test_extra_and_make_lab_the_kit_alone():
    makefile = (ROOT / "Makefile").read_text()
    assert "-e '.[test,site,hub]'" in makefile.split("\n$(TEST_STAMP):")[1].split("\n\n")[0]
    assert makefile.split("\n$(STAMP):")[1].split("\n\n")[0].count("-e .\n") == 1
    assert re.search(r"\ntest: install-test\b", makefile) and re.search(r"\nlab: install\b", makefile)


def test_the_pins_compare_versions_not_just_names():
    assert pins(["tensorflow==2.21.0"]) != pins(["tensorflow==2.20.0"])


def test_tensorflow_and_tf_keras_share_a_minor_version():
    versions = pyproject_pins()
    assert versions["tensorflow"].rsplit(".", 1)[0] == versions["tf-keras"].rsplit(".", 1)[0]


def test_installed_versions_are_the_pinned_ones():
    from importlib.metadata import version

    for name, pinned in (pyproject_pins() | pyproject_pins("test") | pyproject_pins("hub")).items():
        assert version(name) == pinned, f"{name} {version(name)} is installed but {pinned} is pinned"


def test_nbformat_loads_without_jsonschemas_iri_grammar_and_still_validates():
    """jsonschema 4.25+ imports rfc3987-syntax, which builds a grammar (2.6 CPU-s) in every process
    that reads a notebook: the pin keeps it out, and nbformat still rejects a broken notebook."""
    code = ("import sys, nbformat\n"
            "notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('print(1)')])\n"
            "nbformat.validate(notebook)\n"
            "del notebook.cells[0]['source']\n"
            "try:\n    nbformat.validate(notebook)\nexcept nbformat.ValidationError as error:\n"
            "    print('rejected' if 'source' in str(error) else error)\n"
            "print(sorted({'rfc3987_syntax', 'lark'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split("\n")[:2] == ["rejected", "[]"], done.stdout + done.stderr[-2000:]


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert "make test" in (ROOT / "README.md").read_text()
    assert "make lab" in (ROOT / "README.md").read_text()


def test_kernel_spec_sets_the_labkit_environment():
    listing = subprocess.run([sys.executable, "-m", "jupyter", "kernelspec", "list", "--json"],
                             capture_output=True, text=True, check=True)
    spec = json.loads(listing.stdout)["kernelspecs"]["pslab"]["spec"]
    assert spec["env"]["TF_USE_LEGACY_KERAS"] == "1"
    assert spec["env"]["GRPC_FAIL_FAST"] == "use_caller"


def test_lab_binds_to_localhost_and_keeps_the_token():
    lab_recipe = (ROOT / "Makefile").read_text().split("\nlab:")[1].split("\n\n")[0]
    assert "-m labkit.tools.lab $(WORK)" in lab_recipe, "make lab starts JupyterLab through labkit/tools/lab.py"
    command = lab.command("work")
    assert "--ip=127.0.0.1" in command and "--ServerApp.root_dir=work" in command
    assert not [part for part in command if "token" in part.lower()], "never disable or set Jupyter's token in make lab"
    assert "--IdentityProvider.token=abc" in lab.command("work", 8899, "abc", open_browser=False), \
        "a program that talks to the server (the workshop day) sets its own token"


def test_notebooks_are_committed_without_outputs():
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        notebook = json.loads(path.read_text())
        for cell in notebook["cells"]:
            if cell["cell_type"] == "code":
                assert not cell["outputs"] and cell["execution_count"] is None, f"{path.name} has outputs"
