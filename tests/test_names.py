"""The Names table holds: no retired name (docs/contributing.md's Names table, "not" column) in the kit's
code, notebooks, exercises, solutions, scripts, tests or pages. The retired names are written once, here;
docs/contributing.md states the same list in one line, checked below."""
import ast
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEARCHED = ["labkit", "notebooks", "exercises", "solutions", "scripts", "tests", "docs"]
THIS_TEST = Path(__file__).resolve().relative_to(ROOT).as_posix()
NAMES_TABLE = "docs/contributing.md"  # where the table names each retired name in its "not" column


@dataclass(frozen=True)
class Retired:
    """A retired ``name`` and where it is caught: ``pattern`` (a regular expression) in any text, or, with
    ``identifier``, a Python variable, argument or definition called ``name`` (attributes such as Keras's
    ``History.history`` do not count); only in files under ``scope`` (path prefixes), if given."""

    name: str
    meaning: str
    use: str
    pattern: str = ""
    identifier: bool = False
    scope: tuple = ()

    def stated(self):
        return f"{self.name} ({self.meaning}: {self.use})"


RETIRED = [
    Retired("`history`", "a TrainingLog", "`training_log`", identifier=True),
    Retired("`job`", "a task type", "`task_type`; `job` is recovery's TrainingJob only", identifier=True),
    Retired("straggler", "the worker slowed on purpose", "`slow_worker`, `slow_ms`", r"\bstragglers?\b"),
    Retired("parameter bytes", "the model's size in bytes", "`model_bytes`", r"\bparameter bytes\b"),
    Retired("`VersionedSGD`, `VersionCounter`", "the staleness lab's optimizer", "`StalenessSGD`",
            r"\b(VersionedSGD|VersionCounter)\b"),
    Retired("`TopKCompressor`", "the top-k compressor", "`TopK`", r"\bTopKCompressor\b"),
    Retired("`lockstep_limit`", "a number, not a check", "`lockstep_limit_samples_per_s`", r"\blockstep_limit\b"),
    Retired("checks `tf_configs`, `compression_result`, `stale_sgd_comparison`, `updates_per_batch`",
            "checks named as nouns",
            "`tf_configs_valid`, `compression_paid_off`, `staleness_aware_won_back`, `updates_per_batch_match`",
            r"(?m)(checks\.|^def )(tf_configs|compression_result|stale_sgd_comparison|updates_per_batch)\(",
            scope=("labkit/checks/", "notebooks/", "exercises/", "solutions/", "scripts/", "tests/", "docs/")),
    Retired("sweep, plan in the benchmark", "the grid it measures", "its points (`bench.points`)", r"\b(sweep|[Pp]lan)",
            scope=("labkit/bench/", "notebooks/08_", "tests/test_bench.py", "tests/test_cost_model.py")),
]

# Where a retired name stays for now, and why: (name, file).
BENCH_GRID = RETIRED[-1].name
ALLOWED = {
    # Notebook 08 and the cost model are changed by their own issue's work; its figure's file name,
    # sweep.png, is shared by notebook 08, `labkit bench` (report.py, cli.py's --out help) and its test.
    (BENCH_GRID, "notebooks/08_performance_analysis.ipynb"),
    (BENCH_GRID, "labkit/bench/costmodel.py"),
    (BENCH_GRID, "labkit/bench/report.py"),
    (BENCH_GRID, "tests/test_bench.py"),
}


def searched_files(root):
    for folder in SEARCHED:
        for path in sorted((root / folder).rglob("*")):
            relative = path.relative_to(root).as_posix()
            if path.suffix in (".py", ".ipynb", ".md") and relative != THIS_TEST and "/smoke/" not in f"/{relative}":
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


def identifiers(source):
    """Names the source binds or reads (variables, arguments, keywords, definitions), not attributes."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a page's fragment: every word not after a dot
        return set(re.findall(r"(?<![.\w])([A-Za-z_]\w*)", source))
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
    return found


def recovery_job_file(relative):
    """Files about recovery's TrainingJob (the one meaning `job` keeps): recovery, faults and their tests."""
    return re.search(r"(recovery|fault)", relative) is not None


def occurrences(root=ROOT):
    """Every retired name found, as "file: `name` (meaning: use instead)"."""
    found = []
    for relative, path in searched_files(root):
        text, sources = texts(path)
        for retired in RETIRED:
            if (retired.scope and not relative.startswith(retired.scope)) or (retired.name, relative) in ALLOWED:
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


def test_contributing_states_the_same_retired_names():
    text = (ROOT / NAMES_TABLE).read_text()
    stated = re.search(r"^Retired names, refused by `tests/test_names.py`: (.+)$", text, re.MULTILINE)
    written = "; ".join(retired.stated() for retired in RETIRED) + "."
    assert stated, f"{NAMES_TABLE} must list the retired names in one line: 'Retired names, refused by ...: {written}'"
    assert stated.group(1) == written, f"{NAMES_TABLE}'s retired names differ from this test's: write\n{written}"


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
