"""What each notebook declares about itself, in its metadata under "labkit": its declaration, read in one place.

- ``smoke``: the small parameters its test run uses (``parameters``) and why they are enough (``why``);
- ``records``: the results its smoke run must record with ``labkit.tools.results`` (it may record
  more; names may depend on the parameters, e.g. ``mean_tau_2w_1s``);
- ``allowed_stderr``: the stderr lines it may print, each a regular expression with why it is allowed.

The tests read it; adding a notebook lab means
writing this once in the new notebook (JupyterLab: Property Inspector > Advanced Tools > Notebook metadata).
"""
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

KEY = "labkit"


class DeclarationError(ValueError):
    """A notebook's "labkit" metadata is missing or malformed."""


@dataclass(frozen=True)
class Declaration:
    smoke_parameters: dict
    smoke_why: str
    records: frozenset
    allowed_stderr: tuple  # (pattern, why) pairs

    def unexplained(self, lines):
        """The stderr ``lines`` that no allowed pattern explains."""
        return [line for line in lines if not any(re.search(pattern, line) for pattern, _ in self.allowed_stderr)]


def read(path):
    """The declaration of the notebook at ``path``."""
    path = Path(path)
    metadata = nbformat.read(path, as_version=4).metadata.get(KEY)
    if not isinstance(metadata, dict) or "smoke" not in metadata or "records" not in metadata:
        raise DeclarationError(f"{path.name} has no \"{KEY}\" declaration in its metadata (with \"smoke\" and \"records\"): "
                            f"copy one from another notebook's metadata and adapt it (see {__name__}).")
    smoke = metadata["smoke"]
    allowed = tuple((entry["pattern"], entry["why"]) for entry in metadata.get("allowed_stderr", []))
    for pattern, _ in allowed:
        re.compile(pattern)  # a bad pattern fails here, naming itself
    return Declaration(dict(smoke.get("parameters", {})), smoke.get("why", ""), frozenset(metadata["records"]), allowed)


def write(path, smoke_parameters, records, allowed_stderr=(), smoke_why=""):
    """Store a declaration in the notebook at ``path`` (its cells are left as they are)."""
    notebook = nbformat.read(path, as_version=4)
    notebook.metadata[KEY] = {
        "smoke": {"parameters": smoke_parameters, "why": smoke_why},
        "records": sorted(records),
        "allowed_stderr": [{"pattern": pattern, "why": why} for pattern, why in allowed_stderr],
    }
    nbformat.write(notebook, path)


def read_all(folder):
    """{notebook name: declaration} for every notebook in ``folder``."""
    return {path.name: read(path) for path in sorted(Path(folder).glob("*.ipynb"))}
