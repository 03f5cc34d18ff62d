"""Write docs/cli.md from the ``labkit`` command's own parser, so the page cannot drift from the code.

    python scripts/cli_reference.py            # (re)write docs/cli.md  (make docs)
    python scripts/cli_reference.py --check    # exit 1 if docs/cli.md differs from what the parser gives
"""
import argparse
import sys
from pathlib import Path

from labkit.tools import cli

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "cli.md"
HEADER = """# The `labkit` command

Every command and option, generated from the command's parser by `make docs`
(`scripts/cli_reference.py`); a test fails when this page and the parser disagree.
`labkit COMMAND --help` prints the same. The commands are listed in the order a learner meets them.
`make lab` installs the command into the kit's environment: run it as `.venv/bin/labkit`, or as plain
`labkit` after `source .venv/bin/activate`.
"""


def option_name(action):
    """How the option is typed: ``--workers N``, ``-p/--parameter NAME VALUE``, ``task``."""
    if not action.option_strings:
        return action.metavar or action.dest
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    metavar = action.metavar or action.dest.upper()
    shown = " ".join(metavar) + " ..." if isinstance(metavar, tuple) else metavar
    return ", ".join(action.option_strings) + f" {shown}"


def section(parser, name, level):
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
                lines += section(sub, f"{name} {sub_name}", level + 1)
    return lines


def reference():
    """docs/cli.md's text."""
    return "\n".join([HEADER, *section(cli.build_parser(), "labkit", 2)]).rstrip() + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if docs/cli.md is out of date")
    args = parser.parse_args(argv)
    if args.check:
        if PAGE.read_text() != reference():
            sys.exit(f"{PAGE} differs from the labkit parser: run `make docs` (python scripts/cli_reference.py).")
        return
    PAGE.write_text(reference())
    print(f"wrote {PAGE}")


if __name__ == "__main__":
    main()
