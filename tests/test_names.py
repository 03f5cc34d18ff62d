"""The Names table holds: no retired name (docs/contributing.md's Names table, "not" column) in the kit's
code, notebooks, exercises, solutions, scripts, tests or pages. The retired names are written once, in
labkit/tools/conventions.py; `make docs` states them in docs/contributing.md."""
import ast
import functools
import json
import re
import sys
from pathlib import Path

from labkit.tools import conventions
from labkit.tools import syntax
from labkit.tools.conventions import RETIRED

ROOT = Path(__file__).resolve().parents[1]
SEARCHED = ["labkit", "measurements", "notebooks", "exercises", "solutions", "scripts", "tests", "docs"]
# The files that spell the retired names out: this test's and the list's.
SPELLED_OUT = {Path(path).resolve().relative_to(ROOT).as_posix() for path in (__file__, conventions.__file__)}
NAMES_TABLE = "docs/contributing.md"  # where the table names each retired name in its "not" column


def searched_files(root):
    for folder in SEARCHED:
        for path in sorted((root / folder).rglob("*")):
            relative = path.relative_to(root).as_posix()
            if path.suffix in (".py", ".ipynb", ".md") and relative not in SPELLED_OUT and "/smoke/" not in f"/{relative}":
                yield relative, path


def texts(path):
    """(all text, Python sources) of a file: a notebook's cells, a page's ```python blocks, a module."""
    text = path.read_text()
    if path.suffix == ".ipynb":
        cells = json.loads(text)["cells"]
        return ("\n".join("".join(cell["source"]) for cell in cells),
                ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"])
    if path.suffix == ".md":
        return text, re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    return text, [text]


@functools.cache  # each source parsed once, not once per retired name
def identifiers(source):
    """Names the source binds or reads (variables, arguments, keywords, definitions), not attributes."""
    try:
        tree = syntax.parse(source)
    except SyntaxError:  # a page's fragment: every word not after a dot
        return frozenset(re.findall(r"(?<![.\w])([A-Za-z_]\w*)", source))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.arg):
            found.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            found.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
    return frozenset(found)


def recovery_job_file(relative):
    """Files about recovery's TrainingJob (the one meaning `job` keeps): recovery, faults and their tests."""
    return re.search(r"(recovery|fault)", relative) is not None


def occurrences(root=ROOT):
    """Every retired name found, as "file: `name` (meaning: use instead)"."""
    found = []
    for relative, path in searched_files(root):
        text, sources = texts(path)
        for retired in RETIRED:
            if (retired.scope and not relative.startswith(retired.scope)) or relative.startswith(retired.outside):
                continue
            if retired.identifier:
                name = retired.name.strip("`")
                hit = any(name in identifiers(source) for source in sources)
                hit = hit and not (name == "job" and recovery_job_file(relative))
            else:
                hit = relative != NAMES_TABLE and re.search(retired.pattern, text) is not None
            if hit:
                found.append(f"{relative}: {retired.stated()}")
    return found


def test_no_retired_name_is_used():
    assert occurrences() == [], "rename these as docs/contributing.md's Names table says"


def test_a_retired_name_is_caught(tmp_path, monkeypatch):
    (tmp_path / "labkit").mkdir()
    (tmp_path / "labkit" / "train.py").write_text("def run(history=None):\n    return history.loss  # a straggler\n")
    (tmp_path / "labkit" / "fit.py").write_text("def fit(model):\n    return model.fit().history\n")
    (tmp_path / "notebooks").mkdir()
    cell = {"cell_type": "code", "source": ["for job, addresses in cluster.items():\n", "    pass\n"]}
    (tmp_path / "notebooks" / "01_x.ipynb").write_text(json.dumps({"cells": [cell]}))
    monkeypatch.setattr(sys.modules[__name__], "SEARCHED", ["labkit", "notebooks"])
    history, job, straggler = (retired.stated() for retired in RETIRED[:3])
    assert occurrences(tmp_path) == [f"labkit/train.py: {history}", f"labkit/train.py: {straggler}",
                                     f"notebooks/01_x.ipynb: {job}"]


def test_sweep_means_the_command_alone(tmp_path, monkeypatch):
    (tmp_path / "labkit" / "tools").mkdir(parents=True)
    (tmp_path / "labkit" / "tools" / "cli.py").write_text(
        'from labkit.tools import sweep\n# ----- sweep ---\nsweep_parser = add_command(commands, "sweep")\n'
        'rows = sweep.run()  # `labkit sweep` runs a notebook over a grid\n')
    (tmp_path / "labkit" / "tools" / "sweep.py").write_text('"""A failed point is reported; the sweep goes on."""\n')
    (tmp_path / "labkit" / "report.py").write_text('plot(rows, "sweep.png")\n')
    monkeypatch.setattr(sys.modules[__name__], "SEARCHED", ["labkit"])
    [sweep] = [retired.stated() for retired in RETIRED if retired.name.startswith("sweep")]
    assert occurrences(tmp_path) == [f"labkit/report.py: {sweep}"]
