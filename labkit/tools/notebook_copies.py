"""Notebook definitions that copy labkit's, each marked `# labkit: NAME`: `make sync-notebooks` rewrites them.

A notebook writes out in full the few functions that carry its idea; where labkit keeps the same
code for the rest of the kit, the line just above the notebook's definition names labkit's, relative
to the package::

    # labkit: staleness.StalenessSGD.apply
    def apply(self, gradients, read_version, worker=0, read_parameters=()):

and ``python -m labkit.tools.notebook_copies`` (``make sync-notebooks``) rewrites each marked
definition from labkit's source: change labkit's, then sync. The notebook's own class may have
another name (``class WaitingSGD(StalenessSGD)`` marks its method with labkit's
``staleness.StalenessSGD._wait_for_slowest``). It reads source files as syntax trees and imports
nothing (TensorFlow included).
"""
import argparse
import ast
import re
import sys
import textwrap
from pathlib import Path

import nbformat

from labkit.tools import syntax

PACKAGE = Path(__file__).resolve().parents[1]
NOTEBOOKS = PACKAGE.parent / "notebooks"
MARKER = re.compile(r"^(?P<indent>[ \t]*)# labkit: (?P<name>\S+)[ \t]*$")
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class CopyMarkerError(ValueError):
    """A `# labkit:` line that names nothing in labkit, or marks no definition."""


def first_line(node):
    """The line a definition starts on, its decorators included."""
    return min([node.lineno] + [decorator.lineno for decorator in node.decorator_list])


def find_definition(body, names):
    """The definition ``names`` (["Class", "method"]) among the statements ``body``, or None."""
    for node in body:
        if isinstance(node, DEFINITIONS) and node.name == names[0]:
            return node if len(names) == 1 else find_definition(node.body, names[1:])
    return None


def kit_source(name):
    """The source of labkit's ``name`` (``module.function``, ``module.Class`` or ``module.Class.method``,
    relative to the package), dedented."""
    parts = name.split(".")
    for split in range(len(parts) - 1, 0, -1):
        path = PACKAGE.joinpath(*parts[:split]).with_suffix(".py")
        if path.is_file():
            break
    else:
        raise CopyMarkerError(f"`# labkit: {name}` names no labkit module: name a definition relative to the "
                              "package, as in `# labkit: staleness.StalenessSGD.apply`")
    source = path.read_text()
    node = find_definition(syntax.parse(source).body, parts[split:])
    if node is None:
        raise CopyMarkerError(f"`# labkit: {name}`: labkit/{path.relative_to(PACKAGE)} defines no "
                              f"{'.'.join(parts[split:])}; correct the name, or remove the line")
    return textwrap.dedent("\n".join(source.splitlines()[first_line(node) - 1:node.end_lineno]))


def marked(source):
    """[(labkit's name, the definition's node)] for each `# labkit:` line of ``source`` (a cell's)."""
    tree = syntax.parse(source)
    starts = {first_line(node): node for node in ast.walk(tree) if isinstance(node, DEFINITIONS)}
    found = []
    for number, line in enumerate(source.split("\n"), start=1):
        match = MARKER.match(line)
        if not match:
            continue
        node = starts.get(number + 1)
        if node is None or node.col_offset != len(match["indent"]):
            raise CopyMarkerError(f"line {number}, `{line.strip()}`, is not just above a definition at its "
                                  "indentation: put it on the line before the `def` or `class` it marks")
        found.append((match["name"], node))
    return found


def synced(source):
    """``source`` (a cell's) with each marked definition rewritten from labkit's, and the names of those that differed."""
    lines, differed = source.split("\n"), []
    for name, node in reversed(marked(source)):
        start, end = first_line(node) - 1, node.end_lineno
        copied = textwrap.indent(kit_source(name), " " * node.col_offset).split("\n")
        if lines[start:end] != copied:
            lines[start:end] = copied
            differed.insert(0, name)
    return "\n".join(lines), differed


def sync(path, write=True):
    """Rewrite the marked definitions of notebook ``path`` from labkit's (only if ``write``); return the
    names of those that differed."""
    notebook = nbformat.read(path, as_version=4)
    changed = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code" or "# labkit: " not in cell.source:
            continue
        try:
            cell.source, differed = synced(cell.source)
        except CopyMarkerError as error:
            raise CopyMarkerError(f"{path.name}, cell {index}: {error}") from None
        changed += differed
    if changed and write:
        nbformat.write(notebook, path)
    return changed


def notebooks():
    """The lab notebooks (an exercise's solutions are the learner's own code, never labkit's)."""
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a copy differs from labkit's")
    options = parser.parse_args(argv)
    differing = 0
    for path in notebooks():
        for name in sync(path, write=not options.check):
            differing += 1
            print(f"{path.relative_to(PACKAGE.parent)}: {name} {'differs' if options.check else 'rewritten'}")
    return 1 if options.check and differing else 0


if __name__ == "__main__":
    sys.exit(main())
