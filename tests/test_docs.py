"""The pages: numbers come from docs/measurements.md only, history stays in CHANGELOG.md, links resolve (tests/test_pages.py
checks the generated ones)."""
import re
import subprocess
from pathlib import Path

import nbformat
import pytest

from support.scripts import script

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
    """A page without the lines scripts/measurements.py writes into it (the README's test times)."""
    measurements = script("measurements")

    return measurements.TIER_ROW.sub("", measurements.TEST_TIMES_LINE.sub("", text))


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


def measured_row(stem, page_text):
    """(seconds, "X.Y GB") of a notebook's row in docs/measurements.md, or None if it was not measured."""
    row = re.search(rf"^\| `{stem}` \| ok \| ([0-9.]+) (s|min) \| ([0-9.]+ GB) \|", page_text, flags=re.MULTILINE)
    if not row:
        return None
    return float(row.group(1)) * (1 if row.group(2) == "s" else 60), row.group(3)


@pytest.mark.parametrize("notebook", sorted(ROOT.glob("notebooks/*.ipynb")), ids=lambda path: path.stem)
def test_a_notebooks_first_line_states_what_measurements_md_measured(notebook):
    measurements = script("measurements")

    measured = measured_row(notebook.stem, (ROOT / "docs" / "measurements.md").read_text())
    if measured is None:
        pytest.fail(f"{notebook.stem} is not in docs/measurements.md yet: run `make measurements`")
    executable = nbformat.read(notebook, as_version=4)
    stated = measurements.FIRST_LINE.search(executable.cells[0].source)
    assert stated and stated.group(0) == measurements.first_line(*measured, measurements.uses_mnist(executable)), \
        f"{notebook.name}'s first cell disagrees with docs/measurements.md: run `scripts/measurements.py --write-only`"


def test_the_readme_quotes_the_test_times_measurements_md_measured():
    from support.tier_times import TIERS

    page, readme = (ROOT / "docs" / "measurements.md").read_text(), (ROOT / "README.md").read_text()
    in_all = re.search(r"^\| `make test` \(every tier[^|]*\| ([^|]+) \|(.*)\|$", page, re.MULTILINE)
    fast = re.search(r"^\| `make test-fast` [^|]*\| ([^|]+) \|", page, re.MULTILINE)
    if not (in_all and fast):
        pytest.fail("docs/measurements.md has no test times yet: run `scripts/measurements.py --only tests`")
    hint = "the README's test times disagree with docs/measurements.md: run `scripts/measurements.py --write-only`"
    speed = re.search(r"a bare `import tensorflow` took ([\d.]+) s just before", page)
    at_speed = f" (a bare `import tensorflow` took {float(speed[1]):.1f} s there then)" if speed else ""
    assert f"*`make test` takes {in_all[1].strip()}; `make test-fast` {fast[1].strip()}{at_speed}.*" in readme, hint
    for tier, cell in zip(TIERS, in_all[2].split("|")):
        seconds = cell.split(", ")[-1].strip() if cell.strip() else "0 s"
        assert re.search(rf"^\| `{tier}` \|[^|]+\| {seconds} \|$", readme, re.MULTILINE), f"{tier}: {hint}"


def test_the_test_times_are_written_from_what_each_pytest_call_recorded(tmp_path, monkeypatch):
    import json

    measurements = script("measurements")

    monkeypatch.setattr(measurements, "OUT", tmp_path)
    (tmp_path / "tests").mkdir()
    for call, wall, tiers in [("unit", 50.0, {"unit": [95.0, 548]}),
                              ("all", 670.0, {"unit": [40.0, 548], "cluster": [500.0, 90], "notebook": [640.0, 230],
                                              "browser": [45.0, 9]})]:
        (tmp_path / "tests" / f"{call}.json").write_text(json.dumps(
            {"marker_expression": call, "workers": 2, "wall_seconds": wall, "exit_status": 0,
             "tiers": {tier: {"seconds": seconds, "tests": {"passed": count}} for tier, (seconds, count) in tiers.items()}}))
    assert measurements.finished("tests", tmp_path / "tests")
    log = {"tests": {"started": "2026-12-01 08:00 UTC", "load_average_before": [0.5, 0.4, 0.3], "import_tensorflow_s": 4.04}}
    lines = measurements.tests_section(log)
    assert any("load 0.50; a bare `import tensorflow` took 4.04 s just before" in line for line in lines), \
        "the machine's speed when the tests ran"
    assert "| `make test` (every tier, 2 workers) | 11.2 min | 548 tests, 40 s | 90 tests, 8.3 min | 230 tests, " \
           "10.7 min | 9 tests, 45 s |  |" in lines
    assert "| `make test-fast` (`-m unit`, 2 workers) | 50 s | 548 tests, 1.6 min |  |  |  |  |" in lines
    readme = tmp_path / "README.md"
    readme.write_text("*`make test` takes (not measured yet).*\n\n| `cluster` | start processes | |\n")
    monkeypatch.setattr(measurements, "README", readme)
    assert measurements.write_test_times(log)
    assert readme.read_text() == ("*`make test` takes 11.2 min; `make test-fast` 50 s (a bare "
                                  "`import tensorflow` took 4.0 s there then).*"
                                  "\n\n| `cluster` | start processes | 8.3 min |\n")


def record_startup_and_welcome(out):
    """In ``out``, as `make measurements` records them: `labkit bench startup` and notebook 00, 40 s each at load 0.5."""
    import json

    entry = {"started": "2026-12-01 08:00 UTC", "ended": "2026-12-01 08:01 UTC", "seconds": 40,
             "load_average_before": [0.5, 0.4, 0.3], "mnist_source": "timing-standin"}
    (out / "log.json").write_text(json.dumps({"startup": entry, "00_welcome": entry}))
    (out / "startup").mkdir()
    (out / "startup" / "startup.json").write_text(json.dumps(
        {"num_workers": 2, "num_ps": 1, "repeats": 3, "import_tensorflow_s": 2.7, "cluster_ready_s": 3.73, "ratio": 1.38,
         "machine": {"cores": 2, "memory_gib": 23.5, "platform": "Linux", "versions": {"tensorflow": "2.21.0"}}}))
    (out / "notebooks" / "00_welcome").mkdir(parents=True)
    (out / "notebooks" / "00_welcome" / "results.csv").write_text(
        "point,status,error,seconds,peak_pss_mb,peak_rss_mb,peak_alone_mb,largest_tasks,environment_ok\n"
        "00,ok,,11.2,819,1500,900,kernel=700 ps:0=119,True\n")


def test_the_measurements_page_is_written_from_the_recorded_files(tmp_path, monkeypatch):
    import json

    measurements = script("measurements")

    monkeypatch.setattr(measurements, "OUT", tmp_path)
    record_startup_and_welcome(tmp_path)
    text = measurements.page(*measurements.recorded())
    assert "- **Load average** at the start of each measurement: 0.50 to 0.50" in text
    assert "| ratio, start-to-ready ÷ bare import | 1.38 |" in text
    assert measured_row("00_welcome", text) == (11, "0.8 GB")  # the page rounds to whole seconds
    assert "| 0.8 GB | 0.9 GB | 1.5 GB | kernel 700 ps:0 119 |" in text
    assert measurements.first_line(11, "0.8 GB", False).startswith("*Runs in under 1 minute with its defaults")
    assert "about 1.8 minutes" in measurements.first_line(108, "4.6 GB", True)
    assert measurements.peaks_table(json.loads((tmp_path / "log.json").read_text()))["notebooks"] == {"00_welcome": {
        "peak_pss_mb": 819, "peak_alone_mb": 900, "peak_rss_mb": 1500, "minutes": 0.2, "ok": True,
        "measured": "2026-12-01 08:00 UTC", "mnist_source": "timing-standin", "load_average": 0.5}}
    assert "| `environment_ok` | True |" in text
    assert "| `01_tf_config_and_cluster` | not measured yet |" in text


def test_one_section_is_written_into_the_page_as_it_is(tmp_path, monkeypatch):
    """--sections grading: only the class-grading section comes from the recorded files; every other section
    stays as the page has it (this clone holds no file of theirs), and the heading widens to include it, once."""
    import json

    measurements = script("measurements")

    (tmp_path / "before").mkdir()
    monkeypatch.setattr(measurements, "OUT", tmp_path / "before")
    record_startup_and_welcome(tmp_path / "before")
    old = measurements.page(*measurements.recorded())
    monkeypatch.setattr(measurements, "OUT", tmp_path)
    entry = {"started": "2030-01-01 08:00 UTC", "ended": "2030-01-01 08:05 UTC", "seconds": 300,
             "load_average_before": [9.5, 0.4, 0.3], "mnist_source": "grading-test"}
    (tmp_path / "log.json").write_text(json.dumps({"grading": entry}))
    (tmp_path / "grading").mkdir()
    notebooks = [{"learner": "learner1", "kind": "solution", "file": "ex1_basic_cluster.ipynb", "status": "ok",
                  "score": 4, "max_score": 4, "seconds": 20.5},
                 {"learner": "learner6", "kind": "corrupt", "file": "ex3_fault_tolerance.ipynb", "status": "error",
                  "score": 0, "max_score": 0, "seconds": 0.0}]
    (tmp_path / "grading" / "grading.json").write_text(json.dumps(
        {"seconds": 290, "jobs": 2, "flags": {"cell_timeout": 120.0, "timeout": 600.0}, "peak_pss_mb": 3500,
         "peak_rss_mb": 5000, "peak_alone_mb": 3600, "largest_tasks": "kernel=900", "notebooks": notebooks}))
    text = measurements.page_with_sections(["grading"], *measurements.recorded(), old)
    sections = lambda page: {block.splitlines()[0]: block for block in page.split("\n## ")[1:]}
    kept = {title: block for title, block in sections(old).items() if title != "Grading a class"}
    assert {title: sections(text)[title] for title in kept} == kept, "a section other than grading changed"
    grading = sections(text)["Grading a class"]
    assert "`labkit grade --jobs 2 --cell-timeout 120 --timeout 600` over a class of 2 notebooks" in grading
    assert "**4.8 min** for the class" in grading and "| the solution | 1 | ok (1) | 4 of 4 | 20, 20 |" in grading
    heading = text.split("\n## ")[0]
    assert "2026-12-01 08:00 UTC to 2030-01-01 08:05 UTC; the measurements below took 6.3 min in all" in heading, \
        "twice 40 s, and 300 s"
    assert "at the start of each measurement: 0.50 to 9.50" in heading
    assert "| ratio, start-to-ready ÷ bare import | 1.38 |" in text
    assert "grading-test" in heading
    again = measurements.page_with_sections(["grading"], *measurements.recorded(), text)
    assert again == text, "writing the same section twice counted its time twice"


def test_the_small_laptop_runs_and_the_workshop_day_reach_the_page_and_the_peaks_table(tmp_path, monkeypatch):
    import json

    measurements = script("measurements")
    from labkit.tools import doctor

    monkeypatch.setattr(measurements, "OUT", tmp_path)
    entry = {"started": "2026-12-01 08:00 UTC", "seconds": 40, "load_average_before": [0.5, 0.4, 0.3],
             "mnist_source": "offline-subset"}
    log = {"00_welcome": dict(entry, mnist_source="timing-standin"), "small-laptop-00_welcome": entry,
           "day-full-size": entry, "day-small-laptop": entry}
    for folder, row in (("notebooks", "00,ok,,11.2,819,1500,900,kernel=700"),
                        ("small-laptop/notebooks", "00,ok,,9.0,650,1400,700,kernel=600")):
        (tmp_path / folder / "00_welcome").mkdir(parents=True)
        (tmp_path / folder / "00_welcome" / "results.csv").write_text(
            "point,status,error,seconds,peak_pss_mb,peak_rss_mb,peak_alone_mb,largest_tasks\n" + row + "\n")
    step = {"notebook": "00_welcome", "open_kernels": 1, "seconds": 5, "peak_pss_mb": 3100, "peak_alone_mb": 3200,
            "peak_rss_mb": 3500, "largest_tasks": "kernel=700 jupyter server=60"}
    for setting, pss, alone in (("full-size", 4900, 5100), ("small-laptop", 2900, 2940)):  # alone counts too
        (tmp_path / "day" / setting).mkdir(parents=True)
        (tmp_path / "day" / setting / "day.json").write_text(json.dumps(
            {"peak_pss_mb": pss, "peak_alone_mb": alone, "peak_rss_mb": 6000, "steps": [step]}))
    text = "\n".join(measurements.small_laptop_section(log) + measurements.day_section(log))
    assert "| `00_welcome` | ok | 9 s | 0.7 GB | 0.7 GB | 1.4 GB | kernel 600 |" in text
    assert "| `ex1_basic_cluster` | not measured yet |" in text
    assert "The day's peak: **4.9 GB** (PSS), 5.1 GB alone, OVER the 5 GB the kit aims at" in text
    assert "The day's peak: **2.9 GB** (PSS), 2.9 GB alone, within the 3 GB the kit aims at" in text
    assert "| `00_welcome` | 1 | 5 s | 3.1 GB | 3.2 GB | 3.5 GB | kernel 700 jupyter server 60 |" in text
    table = measurements.peaks_table(log)
    small = table["notebooks"]["00_welcome"]["small_laptop"]
    assert (small["peak_pss_mb"], small["peak_alone_mb"], small["mnist_source"]) == (650, 700, "offline-subset")
    day = table["workshop_day"]  # what `labkit doctor --workshop` judges the 3-hour plan by, in the doctor's names
    assert day["plan"] == list(doctor.THREE_HOUR_PLAN)
    assert (day["full_size"]["peak_alone_mb"], day["small_laptop"]["peak_pss_mb"]) == (5100, 2900)
    assert doctor.day_peak(doctor.THREE_HOUR_PLAN, day, doctor.SMALL_LAPTOP) == 2940


def test_each_time_note_states_what_measurements_md_measured_and_no_long_cell_lacks_one():
    measurements = script("measurements")

    page = (ROOT / "docs" / "measurements.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| `([\w-]+)` \| `[^`]*` \| ([^|]+) \| (yes|missing) \|$", page, re.MULTILINE)
    if not rows:
        pytest.fail("docs/measurements.md has no long cells yet: run `make measurements`")
    measured = {(stem, cell_id): (shown.strip(), noted) for stem, cell_id, shown, noted in rows}
    assert not [key for key, (_, noted) in measured.items() if noted == "missing"], \
        "a cell that runs longer than 20 s needs a time note ('*Next cell: ...*') in the markdown cell before it"
    for path in sorted(ROOT.glob("notebooks/*.ipynb")):
        for cell_id, note_cell in measurements.timed_cells(nbformat.read(path, as_version=4)).items():
            if (path.stem, cell_id) in measured:
                stated = measurements.TIME_NOTE.search(note_cell.source).group(0)
                assert f"about {measured[path.stem, cell_id][0]} with" in stated, \
                    f"{path.name}: '{stated}' disagrees with docs/measurements.md: run `scripts/measurements.py --write-only`"


def test_a_time_note_times_the_next_code_cell():
    measurements = script("measurements")

    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("A long cell.\n\n" + measurements.time_note(42.0)),
        nbformat.v4.new_markdown_cell("More words."), nbformat.v4.new_code_cell("train()"),
        nbformat.v4.new_code_cell("plot()")])
    assert list(measurements.timed_cells(notebook)) == [notebook.cells[2].id]
    assert measurements.time_note(42.0) == "*Next cell: about 42 s with the defaults on a 2-core machine.*"


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
