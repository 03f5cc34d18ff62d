"""The import rule: labkit's modules import only their own layer and the layers below it (the layers of
labkit/tools/conventions.py, which docs/contributing.md states); what a process loads (a task server does not
load the cluster); no function takes more than MAX_PARAMETERS parameters; no
module defines a function or class twice."""
import ast
import json
import subprocess
import sys
from pathlib import Path

from labkit.tools.conventions import LAYERS
from labkit.tools import syntax

ROOT = Path(__file__).resolve().parents[1]
LABKIT = ROOT / "labkit"

# What the package imports for its public API (tools.display: figures as images, in a kernel only).
PACKAGE_IMPORTS = {"runtime", "cluster", "tools"}


def layer_of(module):
    """The index in LAYERS of ``labkit.<module>``'s top-level part."""
    top = module.split(".")[0]
    found = [index for index, (_, parts) in enumerate(LAYERS) if top in parts]
    assert found, f"labkit.{module} is in no layer: add it to LAYERS in labkit/tools/conventions.py"
    return found[0]


def labkit_imports(path):
    """The labkit modules ``path`` imports (at the top or inside functions), without the ``labkit.`` prefix."""
    found = set()
    for node in ast.walk(syntax.parse(path.read_text())):
        names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "labkit":
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "labkit" and len(parts) > 1:
                found.add(".".join(parts[1:]))
    return found


def modules():
    """(module name without ``labkit.``, path) of every module of the package but the package itself."""
    for path in sorted(LABKIT.rglob("*.py")):
        name = ".".join(path.relative_to(LABKIT).with_suffix("").parts).removesuffix(".__init__")
        if name != "__init__":
            yield name, path


def is_module(name):
    """Whether ``labkit.<name>`` is a module or subpackage (not a name the package exports, like LocalCluster)."""
    top = name.split(".")[0]
    return (LABKIT / top).is_dir() or (LABKIT / f"{top}.py").exists()


def violations():
    """Every import of a module from a layer above the importer's, as a sentence."""
    return [f"labkit.{module} ({LAYERS[layer_of(module)][0]}) imports labkit.{imported} "
            f"({LAYERS[layer_of(imported)][0]}, a layer above)"
            for module, path in modules() for imported in sorted(labkit_imports(path))
            if is_module(imported) and layer_of(imported) < layer_of(module)]


def test_every_module_imports_only_its_layer_and_those_below():
    assert violations() == []


def test_the_package_imports_only_its_public_api():
    imported = {name.split(".")[0] for name in labkit_imports(LABKIT / "__init__.py")}
    assert imported <= PACKAGE_IMPORTS, imported - PACKAGE_IMPORTS


def test_an_import_from_a_layer_above_is_caught(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text("def f():\n    from labkit.tools import grade\n")
    (tmp_path / "tools").mkdir()
    monkeypatch.setattr(sys.modules[__name__], "LABKIT", tmp_path)
    assert violations() == ["labkit.train (training core) imports labkit.tools.grade (tools, a layer above)"]


def loaded_modules(statement):
    """The labkit modules (and TensorFlow) a fresh interpreter holds after ``statement``."""
    probe = (f"import json, sys; {statement}; "
             "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('labkit', 'tensorflow')))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_a_task_server_does_not_load_the_cluster():
    loaded = loaded_modules("import labkit.runtime.server")
    assert "labkit.cluster" not in loaded and "tensorflow" not in loaded, loaded


def test_labkit_local_cluster_still_loads_on_first_use():
    assert "labkit.cluster" in loaded_modules("from labkit import LocalCluster")
    assert "labkit.cluster" in loaded_modules("import labkit; labkit.ClusterStartError")


def reexports(path):
    """Names ``path`` imports from another labkit module and never uses: a second import path for them."""
    tree = syntax.parse(path.read_text())
    imported = {alias.asname or alias.name: node.module for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("labkit")
                for alias in node.names}
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    return sorted(f"{name} (from {module})" for name, module in imported.items() if name not in used)


def test_a_public_name_has_one_import_path():
    found = {module: names for module, path in modules() if path.name != "__init__.py" and (names := reexports(path))}
    assert found == {}, "import these from their own module where they are used, and do not re-export them"


def test_a_reexport_is_caught(tmp_path):
    (tmp_path / "faults.py").write_text("from labkit.recovery import PS_FAILURES, mnist_job  # noqa: F401\n"
                                        "def f():\n    return PS_FAILURES\n")
    assert reexports(tmp_path / "faults.py") == ["mnist_job (from labkit.recovery)"]


MAX_PARAMETERS = 8  # more: group them in a dataclass (train.Recording, bench.Connected)
# Functions being brought down to MAX_PARAMETERS, listed only while that change is under way (none now).
BEING_REDUCED = set()


def bodies(root):
    """("module." or "module.Class.", its statements) for every module and class of the package at ``root``."""
    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        for node in ast.walk(syntax.parse(path.read_text())):
            if isinstance(node, (ast.Module, ast.ClassDef)):
                yield f"{module}.{node.name + '.' if isinstance(node, ast.ClassDef) else ''}", node.body


def long_signatures(root):
    """{"module.function": its number of parameters, self and cls not counted} of every function of the package
    at ``root`` that takes more than MAX_PARAMETERS."""
    found = {}
    for prefix, body in bodies(root):
        for child in body:
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            arguments = child.args
            names = [a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]]
            count = len(names) - (names[:1] in (["self"], ["cls"])) + bool(arguments.vararg) + bool(arguments.kwarg)
            if count > MAX_PARAMETERS:
                found[prefix + child.name] = count
    return found


def test_no_function_takes_more_than_eight_parameters():
    found = long_signatures(LABKIT)
    assert set(found) - BEING_REDUCED == set(), f"group parameters in a dataclass: {found}"
    assert BEING_REDUCED - set(found) == set(), "these take 8 or fewer now: remove them from BEING_REDUCED"


def test_a_long_signature_is_found(tmp_path):
    (tmp_path / "lab.py").write_text("def run(a, b, c, d, e, f, g, h, *rest):\n    pass\n\n\nclass Job:\n"
                                     "    def __init__(self, a, b, c, d, e, f, g, h):\n        pass\n")
    assert long_signatures(tmp_path) == {"lab.run": 9}


def defined_twice(root):
    """"module.name" of every function or class that a module or class body of the package at ``root`` defines
    more than once: the later definition silently replaces the earlier."""
    found = []
    for prefix, body in bodies(root):
        names = [child.name for child in body
                 if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                 and not any(isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter") for d in child.decorator_list)]
        found += sorted(prefix + name for name in set(names) if names.count(name) > 1)
    return found


def test_no_module_defines_a_name_twice():
    assert defined_twice(LABKIT) == [], "delete the earlier definition (or rename one of them)"


def test_a_name_defined_twice_is_found(tmp_path):
    (tmp_path / "lab.py").write_text("def loss(a):\n    return a\n\n\ndef loss(a):\n    return 2 * a\n\n\nclass Job:\n"
                                     "    @property\n    def size(self):\n        return 1\n\n"
                                     "    @size.setter\n    def size(self, value):\n        pass\n")
    assert defined_twice(tmp_path) == ["lab.loss"]
