"""The pages: docs/cli.md is the parser's, numbers come from docs/measurements.md only, history stays in CHANGELOG.md."""
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import cli_reference  # noqa: E402  (a script, not a package)

OWNED_ELSEWHERE = "its owner moves its numbers to docs/measurements.md and its history to CHANGELOG.md"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NUMBER_PAGES = [page for page in PAGES if page.name != "measurements.md"]
HISTORY_FILES = [*PAGES, ROOT / "Makefile", ROOT / "exercises" / "README.md", ROOT / "solutions" / "README.md",
                 *sorted(ROOT.glob("notebooks/*.ipynb")), *sorted(ROOT.glob("exercises/*.ipynb")),
                 *sorted(ROOT.glob("solutions/*.ipynb"))]
NOT_YET = {"instructor-guide.md", "06_stale_gradients.ipynb"}

# A measured quantity: a number with a unit of time, memory, share or ratio ("1.8 min", "4.6 GB", "2.0×").
MEASURED = re.compile(r"\b\d[\d,]*(\.\d+)?\s?(ms|s|sec|seconds?|min|minutes?|hours?|[KMG]i?B|kB|%)(?![\w/])"
                      r"|\b\d[\d,]*(\.\d+)?\s?×(?!\s?\d)")
# Talk of how the project got here, which belongs in CHANGELOG.md.
HISTORY = re.compile(r"\bsessions?\b|\bissues?\s?#?\d+|\bearlier (version|versions|run|runs|kit)\b"
                     r"|\bprevious (version|run|release)s?\b|\bbefore these changes\b|\blater the same day\b"
                     r"|\bwas (faster|slower|larger|smaller|longer|shorter) before\b|\blast submissions?\b", re.IGNORECASE)


def text_of(path):
    """What a reader sees: a page's text, or a notebook's markdown cells."""
    if path.suffix == ".ipynb":
        return "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "markdown")
    return path.read_text()


def without_code(text):
    """Markdown without fenced code blocks (commands and example output quote what a program prints)."""
    return re.sub(r"```.*?```", "", text, flags=re.DOTALL)


def matches(pattern, text):
    return [match.group(0) for match in pattern.finditer(text)]


def case(path):
    marks = [pytest.mark.xfail(strict=True, reason=OWNED_ELSEWHERE)] if path.name in NOT_YET else []
    return pytest.param(path, id=str(path.relative_to(ROOT)), marks=marks)


def test_cli_reference_is_what_the_parser_generates():
    assert (ROOT / "docs" / "cli.md").read_text() == cli_reference.reference(), \
        "docs/cli.md is out of date: run `make docs` (python scripts/cli_reference.py)"


@pytest.mark.parametrize("page", [case(page) for page in NUMBER_PAGES])
def test_no_page_quotes_a_measured_number_outside_the_measurements_page(page):
    assert matches(MEASURED, without_code(text_of(page))) == [], \
        f"{page.name} states measured numbers: quote docs/measurements.md instead (link to it)"


@pytest.mark.parametrize("path", [case(path) for path in HISTORY_FILES])
def test_no_page_speaks_of_sessions_issues_or_earlier_versions(path):
    assert matches(HISTORY, text_of(path)) == [], f"{path.name} tells history: move it to CHANGELOG.md"


def test_the_scans_find_numbers_and_history():
    assert matches(MEASURED, "it took 1.8 min and 4.6 GB, 2.0× faster, 55 % lost, 12,196 s") == \
        ["1.8 min", "4.6 GB", "2.0×", "55 %", "12,196 s"]
    assert matches(MEASURED, "2 workers, 1 PS, port 8888, Python 3.11, 1M × 16 rows, 100 Mbit/s, 64 × 32") == []
    assert matches(HISTORY, "after issue 15, a run last session; an earlier version of this kit; "
                            "Makefile: was faster before") == ["issue 15", "session", "earlier version",
                                                                "was faster before"]
    assert matches(HISTORY, "start_new_session; TensorFlow was imported before labkit; no longer exist") == []


def test_every_page_link_resolves():
    broken = [(page.name, target) for page in PAGES for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text())
              if not (page.parent / target).exists()]
    assert broken == []


def make(*arguments):
    return subprocess.run(["make", "-s", *arguments], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_make_help_is_the_default_and_lists_every_target():
    listed = make().stdout
    assert listed == make("help").stdout and listed.startswith("PS Lab: make lab")
    targets = re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(), flags=re.MULTILINE)
    assert [target for target in targets if f"make {target} " not in listed] == []
