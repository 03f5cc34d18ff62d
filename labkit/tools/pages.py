"""The pages written from the code: docs/cli.md, and docs/contributing.md's layers, retired names and layout.

    python -m labkit.tools.pages            # (re)write them  (make docs)
    python -m labkit.tools.pages --check    # write nothing; exit 1 if a page differs from the code

docs/cli.md is the ``labkit`` command's parser, option by option. In docs/contributing.md, each part
between ``<!-- make docs: NAME -->`` and ``<!-- make docs: end -->`` is written from
labkit/tools/conventions.py (the layers, the retired names) or from the files themselves (the layout:
every module of labkit, measurements/ and tests/support/, and every script, with the first line of its docstring).
"""
import argparse
import ast
import re
import sys
from pathlib import Path

from labkit.tools import cli
from labkit.tools import syntax
from labkit.tools.conventions import LAYERS, RETIRED

ROOT = Path(__file__).resolve().parents[2]
CLI_PAGE = Path("docs/cli.md")
CONTRIBUTING = Path("docs/contributing.md")
CLI_HEADER = """# The `labkit` command

Every command and option, generated from the command's parser by `make docs`
(`labkit/tools/pages.py`); a test fails when this page and the parser disagree.
`labkit COMMAND --help` prints the same. The commands are listed in the order a learner meets them.
`make lab` installs the command into the kit's environment: run it as `.venv/bin/labkit`, or as plain
`labkit` after `source .venv/bin/activate`.
"""
GENERATED = re.compile(r"(<!-- make docs: (\w+) -->\n)(.*?)(<!-- make docs: end -->)", re.DOTALL)
# The layout's lines for what is not Python: (path, what it holds).
OTHER_FOLDERS = [
    ("notebooks/", "00_… one topic each, run top to bottom; outputs are never committed"),
    ("exercises/", "generated from solutions/ (not edited by hand)"),
    ("solutions/", "the exercise notebooks with their solutions"),
    ("tests/", "one module per labkit module, check module or notebook, tiers as above; support/, what they share:"),
    ("docs/", "these pages; cli.md and measurements.md are generated"),
    ("jupyterlab/", "overrides.json: the lab settings `make install` gives every learner (no news question)"),
    ("Dockerfile", "the image `labkit export --k8s` and `--tfjob` run"),
]


class PageError(ValueError):
    """Something the pages are written from is missing: a module's docstring, its layer, a page's marker."""


# ----- docs/cli.md ---------------------------------------------------------------------------------------

def option_name(action):
    """How the option is typed: ``--workers N``, ``-p/--parameter NAME VALUE``, ``task``."""
    if not action.option_strings:
        return action.metavar or action.dest
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    metavar = action.metavar or action.dest.upper()
    shown = " ".join(metavar) + " ..." if isinstance(metavar, tuple) else metavar
    return ", ".join(action.option_strings) + f" {shown}"


def command_section(parser, name, level):
    lines = [f"{'#' * level} `{name}`", "", parser.description or "", ""]
    formatter = parser._get_formatter()
    rows = [(option_name(action), formatter._expand_help(action)) for action in parser._actions
            if action.help != argparse.SUPPRESS and not isinstance(action, (argparse._HelpAction,
                                                                            argparse._SubParsersAction))]
    if rows:
        lines += ["| option | what it does |", "|---|---|"]
        lines += [f"| `{flag}` | {text.replace('|', '&#124;')} |" for flag, text in rows]
        lines.append("")
    if parser.epilog:
        lines += ["```", parser.epilog.removeprefix("example:\n").replace("\n  ", "\n").strip(), "```", ""]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                lines += command_section(sub, f"{name} {sub_name}", level + 1)
    return lines


def cli_reference():
    """docs/cli.md's text."""
    return "\n".join([CLI_HEADER, *command_section(cli.build_parser(), "labkit", 2)]).rstrip() + "\n"


# ----- docs/contributing.md ------------------------------------------------------------------------------

def layers_line():
    return "Layers, top to bottom: " + "; ".join(
        f"{name} ({', '.join(f'`{part}`' for part in parts)})" for name, parts in LAYERS) + "."


def retired_line():
    return "Retired names, refused by `tests/test_names.py`: " + "; ".join(r.stated() for r in RETIRED) + "."


def summary(path):
    """The first line of a module's docstring (a shell script's first comment): its line in the layout."""
    text = path.read_text()
    if path.suffix == ".sh":
        first = next((line.removeprefix("#").strip() for line in text.splitlines()[1:] if line.startswith("#")), "")
    else:
        first = (ast.get_docstring(syntax.parse(text), clean=False) or "").strip().split("\n")[0]
    if not first:
        raise PageError(f"{path} has no docstring: write one, its first line a summary (docs/contributing.md's "
                        "layout shows it)")
    return first.replace("``", "`")


def modules_by_layer(package):
    """The paths of ``package``'s modules, top layer first, each subpackage's ``__init__.py`` before its modules."""
    layered = [part for _, parts in LAYERS for part in parts]
    present = sorted(path.stem if path.is_file() else path.name for path in package.iterdir()
                     if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file())
    unlayered = [name for name in present if name not in layered]
    if unlayered:
        raise PageError(f"labkit's {', '.join(unlayered)} in no layer: add each to LAYERS in "
                        "labkit/tools/conventions.py (tests/test_layers.py checks its imports against it)")
    paths = [package / "__init__.py"]
    for part in (part for part in layered if part in present):
        folder = package / part
        if folder.is_dir():
            paths += [folder / "__init__.py", *sorted(set(folder.glob("*.py")) - {folder / "__init__.py"})]
        else:
            paths.append(package / f"{part}.py")
    return paths


def package(folder, depth=0):
    """A package's lines of the layout: the folder with its ``__init__.py``'s summary, then its modules and its
    subpackages, each with its own."""
    lines = [f"{'  ' * depth}- `{folder.name}/`: {summary(folder / '__init__.py')}"]
    for path in sorted(folder.iterdir()):
        if path.suffix == ".py" and path.name != "__init__.py":
            lines.append(f"{'  ' * (depth + 1)}- `{path.name}`: {summary(path)}")
        elif (path / "__init__.py").is_file():
            lines += package(path, depth + 1)
    return lines


def layout(root=ROOT):
    """The layout: every module of labkit (by layer), of the measurements and of the tests' support, and every
    script, each with its summary, as a nested list."""
    labkit = root / "labkit"
    lines = [f"- `labkit/`: {summary(labkit / '__init__.py')}"]
    for path in modules_by_layer(labkit)[1:]:
        depth = len(path.relative_to(labkit).parts)
        name = f"{path.parent.name}/" if path.name == "__init__.py" else path.name
        depth -= path.name == "__init__.py"
        lines.append(f"{'  ' * depth}- `{name}`: {summary(path)}")
    lines += package(root / "measurements") if (root / "measurements").is_dir() else []
    lines.append("- `scripts/`: what `make` runs beyond the kit")
    lines += [f"  - `{path.name}`: {summary(path)}" for path in sorted((root / "scripts").glob("*.[ps][yh]"))]
    for name, what in OTHER_FOLDERS:
        lines.append(f"- `{name}`: {what}")
        if name == "tests/" and (root / "tests" / "support").is_dir():
            lines += package(root / "tests" / "support", depth=1)
    return "\n".join(lines) + "\n"


def contributing(text, root=ROOT):
    """docs/contributing.md's ``text`` with each generated part written anew."""
    parts = {"layers": layers_line() + "\n", "retired": retired_line() + "\n", "layout": layout(root)}
    found = [match[2] for match in GENERATED.finditer(text)]
    if sorted(found) != sorted(parts):
        raise PageError(f"{CONTRIBUTING} must have one generated part each of {', '.join(sorted(parts))}, between "
                        f"`<!-- make docs: NAME -->` and `<!-- make docs: end -->`; it has {', '.join(found) or 'none'}")
    return GENERATED.sub(lambda match: match[1] + parts[match[2]] + match[4], text)


def pages(root=ROOT):
    """{path: the text it should have} of every generated page."""
    return {root / CLI_PAGE: cli_reference(),
            root / CONTRIBUTING: contributing((root / CONTRIBUTING).read_text(), root)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page differs from the code")
    options = parser.parse_args(argv)
    wanted = pages()
    stale = [path for path, text in wanted.items() if path.read_text() != text]
    for path in stale:
        if options.check:
            print(f"{path.relative_to(ROOT)} differs from the code: run make docs")
        else:
            path.write_text(wanted[path])
            print(f"wrote {path.relative_to(ROOT)}")
    return 1 if options.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
