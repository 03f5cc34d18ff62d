"""The pages: numbers come from docs/measurements.md only, history stays in CHANGELOG.md, links resolve (tests/test_pages.py
checks the generated ones)."""
import re
import subprocess
from pathlib import Path

import nbformat
import pytest

from measurements import publish

ROOT = Path(__file__).resolve().parents[1]

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NUMBER_PAGES = [*(page for page in PAGES if page.name != "measurements.md"),
                ROOT / "exercises" / "README.md", ROOT / "solutions" / "README.md"]
HISTORY_FILES = [*PAGES, ROOT / "Makefile", ROOT / "exercises" / "README.md", ROOT / "solutions" / "README.md",
                 *sorted(ROOT.glob("notebooks/*.ipynb")), *sorted(ROOT.glob("exercises/*.ipynb")),
                 *sorted(ROOT.glob("solutions/*.ipynb"))]

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


def without_generated(text):
    """A page without the lines `make measurements` writes into it (the README's test times)."""
    return publish.TIER_ROW.sub("", publish.TEST_TIMES_LINE.sub("", text))


def without_code(text):
    """Markdown without fenced code blocks (commands and example output quote what a program prints)."""
    return re.sub(r"```.*?```", "", text, flags=re.DOTALL)


def matches(pattern, text):
    return [match.group(0) for match in pattern.finditer(text)]


@pytest.mark.parametrize("page", NUMBER_PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_page_quotes_a_measured_number_outside_the_measurements_page(page):
    assert matches(MEASURED, without_generated(without_code(text_of(page)))) == [], \
        f"{page.name} states measured numbers: quote docs/measurements.md instead (link to it)"


@pytest.mark.parametrize("path", HISTORY_FILES, ids=lambda path: str(path.relative_to(ROOT)))
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


# The page of exact steps for each operating system, and what it must say.
OS_PAGES = {"install-macos.md": ["xcode-select --install", "brew install python@3.12", "/opt/homebrew/bin/python3.12",
                                 "uv python install 3.12", "Install Certificates"],
            "install-windows.md": ["wsl --install -d Ubuntu-24.04", "administrator", "Virtualization", ".wslconfig",
                                   "memory=", "wsl --shutdown", "/mnt/c"],
            "install-ubuntu.md": ["22.04", "24.04", "26.04", "Python 3.14", "ppa:deadsnakes/ppa", "uv python install 3.12",
                                  "python3.12-venv"]}
LEARNER_PAGES = [ROOT / "README.md", ROOT / "docs" / "install.md", *(ROOT / "docs" / page for page in OS_PAGES)]


def test_each_operating_system_has_a_page_of_steps_that_install_md_and_the_readme_link():
    install, readme = (ROOT / "docs" / "install.md").read_text(), (ROOT / "README.md").read_text()
    for page, steps in OS_PAGES.items():
        assert f"]({page}" in install and f"](docs/{page}" in readme, f"link {page} from install.md and the README"
        text = (ROOT / "docs" / page).read_text()
        assert [step for step in steps if step not in text] == [], page
        assert "make lab" in text and "make doctor" in text and "install.md#updating-the-kit" in text, page
    named = re.findall(r"docs/[\w-]+\.md", (ROOT / "scripts" / "find_python.sh").read_text())
    assert named and [page for page in named if not (ROOT / page).exists()] == []


def anchors(page):
    """The #anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", without_code(page.read_text()), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def test_every_link_to_a_section_of_a_page_finds_its_heading():
    links = [(page, (page.parent / target).resolve() if target else page, anchor) for page in PAGES
             for target, anchor in re.findall(r"\]\(([^)#:]*)#([^)]+)\)", page.read_text())]
    broken = [f"{page.name} -> {target.name}#{anchor}" for page, target, anchor in links
              if target.suffix == ".md" and anchor not in anchors(target)]
    assert broken == [] and len(links) > 10
    assert "updating-the-kit" in anchors(ROOT / "docs" / "install.md")


def bare_labkit_lines(text):
    """The lines of a page's command blocks that type `labkit` as if the environment were active, where it is not."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.DOTALL)
    return [line for block in blocks if "source .venv/bin/activate" not in block
            for line in block.splitlines() if re.match(r"\s*labkit\s", line)]


@pytest.mark.parametrize("page", LEARNER_PAGES, ids=lambda path: path.name)
def test_learner_pages_show_labkit_commands_as_they_run(page):
    """`labkit` lives in .venv: a command block types it as .venv/bin/labkit, or activates the environment first."""
    assert bare_labkit_lines(page.read_text()) == []
    assert bare_labkit_lines("```bash\nlabkit status\n```") == ["labkit status"]
    assert bare_labkit_lines("```bash\nsource .venv/bin/activate\nlabkit status\n```") == []


def make(*arguments):
    return subprocess.run(["make", "-s", *arguments], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_make_help_is_the_default_and_lists_every_target():
    listed = make().stdout
    assert listed == make("help").stdout and listed.startswith("PS Lab: make lab")
    targets = re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(), flags=re.MULTILINE)
    assert [target for target in targets if f"make {target} " not in listed] == []


def test_every_notebook_says_how_long_it_runs_and_how_much_memory_it_needs():
    run_time = re.compile(r"^\*Runs in (under|about) [0-9.½]+ minutes? with its defaults on a 2-core machine.*; "
                          r"[0-9.]+ GB of memory at its peak", re.M)
    silent = [path.name for path in sorted(ROOT.glob("notebooks/[0-9][0-9]_*.ipynb"))
              if not run_time.search(nbformat.read(path, as_version=4).cells[0].source)]
    assert silent == [], f"notebooks without their measured run time at the top: {silent}"


# What every notebook and exercise says last: an idle kernel keeps its memory (a workshop day adds them up).
SHUT_DOWN = ("**Done here?** Shut this notebook's kernel down (Kernel > Shut Down Kernel): an open kernel keeps "
             "holding its memory, even idle.")


def closes_with_shut_down(path):
    last = nbformat.read(path, as_version=4).cells[-1]
    return last.cell_type == "markdown" and last.source.rstrip().endswith(SHUT_DOWN)


def test_every_notebook_and_exercise_ends_by_saying_to_shut_its_kernel_down(tmp_path):
    shipped = [*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("exercises/*.ipynb"), *ROOT.glob("solutions/*.ipynb")]
    assert [path.name for path in shipped if not closes_with_shut_down(path)] == []
    ending_in_code = tmp_path / "lab.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(SHUT_DOWN),
                                                   nbformat.v4.new_code_cell("cluster.stop()")]), ending_in_code)
    assert not closes_with_shut_down(ending_in_code)


README_MOST_LINES = 150  # a few screens: what a learner needs first, the rest one link away


def test_the_readme_stays_a_few_screens_and_links_the_rest():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MOST_LINES, "the README grew: move details to a page and link it"
    for page in ("docs/cheatsheet.md", "docs/glossary.md", "docs/install.md", "docs/instructor-guide.md"):
        assert f"]({page}" in readme, f"the README's reader finds {page} one link away"
    assert "git clone <" not in "".join(path.read_text() for path in (ROOT / "docs").glob("install*.md")), \
        "an install page names no address a learner cannot type"
