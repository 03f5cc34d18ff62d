"""JupyterLab as `make lab` runs it, in a real browser driven by Playwright.

Headless Debian Chromium (/usr/bin/chromium; Playwright never downloads a browser here)
opens a notebook, runs all cells, and uses the dashboard's kill and restart buttons; it
also opens two smoke notebooks as nbval executed them earlier in this pytest run and
checks what a learner sees: figures as images, no red stderr. In a work folder built as `make lab`
builds it, a notebook's links to a docs page, an exercise and another notebook each open.
Screenshots go to runs/browser-test/.
"""
import os
import re
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import expect, sync_playwright

from executed_notebooks import FIGURE_CALLS, executed_copy
from labkit.cluster import pick_port
from labkit.runtime import processes
from labkit.tools import workfolder

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 # Without these Chromium keeps calling home and floods the closed network with retries.
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOTS = Path(__file__).resolve().parents[1] / "runs" / "browser-test"
NOTEBOOK_CELLS = ["import labkit\nfrom labkit.widgets import ClusterDashboard",
                  'cluster = labkit.LocalCluster(num_workers=1, num_ps=1, name="browser-test")\n'
                  "ClusterDashboard(cluster)"]
SECONDS = 1000  # Playwright counts milliseconds

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600),
              pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}: the browser test "
                                 "needs Debian's chromium package (apt-get install chromium)")]


@pytest.fixture
def lab(tmp_path):
    """JupyterLab serving a folder of notebooks, started as `make lab` starts it (token on).

    Yields (folder, url_of): put notebooks in the folder; ``url_of(name)`` opens one, in a workspace of its own.
    """
    root = tmp_path / "root"
    root.mkdir()
    # Lab settings and workspaces of this run only (a learner's saved layout must not leak in), and every
    # cell rendered, not only those scrolled into view, so the page holds all outputs. No news question:
    # the kit's own settings (jupyterlab/overrides.json, which `make install` installs) answer it.
    settings = tmp_path / "lab-settings"
    for extension, setting in [("notebook-extension/tracker", '{"windowingMode": "none"}')]:
        path = settings / "@jupyterlab" / f"{extension}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(setting)
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "lab-workspaces"))
    port = pick_port()
    command = [str(Path(sys.executable).parent / "jupyter"), "lab", "--ip=127.0.0.1", f"--port={port}",
               "--no-browser", f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0"]
    if os.getuid() == 0:
        command.append("--allow-root")
    log_path = tmp_path / "jupyter.log"
    with open(log_path, "w") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
    try:
        token = wait_for_token(log_path, port, server)
        # Each notebook in a workspace of its own: the page shows that notebook alone.
        yield root, lambda name: (f"http://127.0.0.1:{port}/lab/workspaces/{Path(name).stem}/tree/{name}"
                                  f"?token={token}")
    finally:
        server.terminate()  # Jupyter shuts its kernels down; their cluster's tasks exit with them
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
def lab_url(lab):
    """The URL of a one-notebook JupyterLab whose notebook shows the cluster dashboard."""
    root, url_of = lab
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for code in NOTEBOOK_CELLS])
    notebook.metadata["kernelspec"] = {"name": "pslab", "display_name": "PS Lab (TensorFlow 2.21)",
                                       "language": "python"}
    nbformat.write(notebook, root / "dashboard.ipynb")
    return url_of("dashboard.ipynb")


@pytest.fixture
def browser_page(capsys):
    """A headless Chromium page, and ``screenshot(name)``, which saves one to runs/browser-test/."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shots = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 700})

        def screenshot(name, **options):
            shots.append(SCREENSHOTS / f"{name}.png")
            page.screenshot(path=shots[-1], **options)

        try:
            yield page, screenshot
        finally:
            browser.close()
            with capsys.disabled():
                print("\nbrowser test screenshots:", *shots, sep="\n  ")


@contextmanager
def failure_screenshot(screenshot):
    """On an exception, save what the page showed as failure.png."""
    try:
        yield
    except Exception:
        screenshot("failure")
        raise


def wait_for_token(log_path, port, server, timeout=180.0):
    """The token Jupyter generated, read from the URL it logs once it serves."""
    def token():
        if server.poll() is not None:
            raise AssertionError(f"JupyterLab exited with code {server.returncode}; its log:\n{log_path.read_text()}")
        return re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=(\w+)", log_path.read_text())

    return processes.wait_until(token, timeout, "JupyterLab to serve", error=lambda message: AssertionError(
        f"{message}; its log:\n{log_path.read_text()}")).group(1)


def test_dashboard_kill_and_restart_buttons_in_jupyterlab(lab_url, browser_page):
    page, screenshot = browser_page
    with failure_screenshot(screenshot):
        run_the_notebook_then_kill_and_restart_a_worker(page, lab_url, screenshot)


@pytest.mark.reads("00_welcome.ipynb")
def test_the_site_shows_every_page_with_its_figures(browser_page, tmp_path, monkeypatch):
    """`make site` builds a book of the executed notebooks; every page loads, every figure is an image.
    The book is built from notebook 00's executed copy alone: another worker may write the others meanwhile."""
    pytest.importorskip("myst_nb", reason="make site needs the site extra: pip install -e '.[site]'")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import build_site

    runs = tmp_path / "runs"
    (runs / "smoke").mkdir(parents=True)
    shutil.copy(executed_copy("00_welcome.ipynb"), runs / "smoke")  # a notebook with a figure
    monkeypatch.setattr(build_site, "RUNS", runs)
    site = tmp_path / "site"
    build_site.build(site)
    expected_figures = {path.stem: sum(bool(FIGURE_CALLS.search(cell.source)) for cell in
                                       nbformat.read(path, as_version=4).cells if cell.cell_type == "code")
                        for path in map(build_site.executed, sorted(build_site.ROOT.glob("notebooks/*.ipynb"))) if path}
    pages = sorted(path for path in site.rglob("*.html")
                   if path.name not in ("genindex.html", "search.html") and "_static" not in path.parts)
    page, screenshot = browser_page
    with failure_screenshot(screenshot):
        page.goto(site.joinpath("index.html").as_uri())
        toc = page.locator("nav.bd-links a").evaluate_all("links => links.map(a => a.href)")
        assert {f"notebooks/{stem}.html" for stem in expected_figures} <= {href.split("/site/")[-1] for href in toc}
        for path in pages:
            page.goto(path.as_uri())
            expect(page.locator("article h1").first).to_be_visible()
            images = page.locator("article img")
            for index in range(images.count()):
                images.nth(index).scroll_into_view_if_needed()
                assert images.nth(index).evaluate("img => img.complete && img.naturalWidth > 0"), \
                    f"{path.name}: image {index} did not load"
            if path.stem in expected_figures:
                assert images.count() >= expected_figures[path.stem], f"{path.name}: figures missing"
        page.goto(site.joinpath("notebooks", "00_welcome.html").as_uri())
        screenshot("site-00_welcome")


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.reads(name))
                                  for name in ["08_performance_analysis.ipynb", "06_stale_gradients.ipynb"]])
def test_executed_notebook_shows_its_figures_and_no_red(lab, browser_page, name):
    root, url_of = lab
    page, screenshot = browser_page
    executed = executed_copy(name)
    shutil.copy(executed, root / name)
    figure_cells = sum(bool(FIGURE_CALLS.search(cell.source))
                       for cell in nbformat.read(executed, as_version=4).cells if cell.cell_type == "code")
    with failure_screenshot(screenshot):
        look_at_figures_and_stderr(page, url_of(name), Path(name).stem, figure_cells, screenshot)


def look_at_figures_and_stderr(page, url, stem, figure_cells, screenshot):
    page.goto(url)
    outputs = page.locator(".jp-Notebook .jp-OutputArea-output")
    outputs.first.wait_for(timeout=60 * SECONDS)
    images = page.locator(".jp-Notebook .jp-RenderedImage img")
    expect(images.nth(figure_cells - 1)).to_be_attached(timeout=30 * SECONDS)
    for index in range(images.count()):
        image = images.nth(index)
        image.scroll_into_view_if_needed()
        expect(image).to_be_visible()
        assert image.evaluate("img => img.complete && img.naturalWidth > 100"), f"figure {index} did not load"
        screenshot(f"{stem}-figure-{index}")
    assert not page.get_by_text("<Figure size").count(), "a figure shows as text"
    stderr = page.locator('.jp-Notebook [data-mime-type="application/vnd.jupyter.stderr"]')
    assert stderr.count() == 0, f"red stderr output in {stem}: {stderr.all_inner_texts()[:3]}"


def run_the_notebook_then_kill_and_restart_a_worker(page, lab_url, screenshot):
    page.goto(lab_url)
    # Run All before the kernel is connected would open a "Select Kernel" dialog instead.
    expect(page.get_by_text("PS Lab (TensorFlow 2.21) | Idle")).to_be_visible(timeout=180 * SECONDS)
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()

    dashboard = page.locator(".labkit-dashboard")
    dashboard.wait_for(timeout=60 * SECONDS)  # two TensorFlow processes start first
    worker, ps = dashboard.locator(".labkit-task-worker-0"), dashboard.locator(".labkit-task-ps-0")
    for row in (worker, ps):
        expect(row.locator(".labkit-state")).to_contain_text("alive")
    old_pid = worker.locator(".labkit-pid").inner_text()
    screenshot("1-all-alive")

    worker.locator(".labkit-kill").click()
    expect(worker.locator(".labkit-state")).to_contain_text("dead", timeout=15 * SECONDS)
    expect(ps.locator(".labkit-state")).to_contain_text("alive")
    assert not processes.running(int(old_pid)), "the killed worker's process should be gone"
    screenshot("2-worker-killed")

    worker.locator(".labkit-restart").click()
    expect(dashboard).to_contain_text("restart worker:0: done in", timeout=60 * SECONDS)  # it serves again
    expect(worker.locator(".labkit-state")).to_contain_text("alive")
    expect(worker.locator(".labkit-pid")).not_to_have_text(old_pid)
    assert processes.running(int(worker.locator(".labkit-pid").inner_text()))
    screenshot("3-worker-restarted")


EXPLORER_CELLS = ["import json\nfrom labkit.explorer import CostModelExplorer\n"
                  'rows = json.loads(open("rows.json").read())  # points of hand-built costs: only the measurement is real',
                  "explorer = CostModelExplorer(rows, cores=2, repeats=2, min_steps=4)\nexplorer"]


def test_explorer_predicts_as_a_control_moves_measures_a_point_and_its_kernel_leaves_no_task(lab, browser_page):
    import json

    from support import task_processes
    from test_cost_model import bench_rows

    root, url_of = lab
    (root / "rows.json").write_text(json.dumps(bench_rows()))
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for code in EXPLORER_CELLS])
    notebook.metadata["kernelspec"] = {"name": "pslab", "display_name": "PS Lab (TensorFlow 2.21)", "language": "python"}
    nbformat.write(notebook, root / "explorer.ipynb")
    page, screenshot = browser_page
    with failure_screenshot(screenshot):
        page.goto(url_of("explorer.ipynb"))
        expect(page.get_by_text("PS Lab (TensorFlow 2.21) | Idle")).to_be_visible(timeout=180 * SECONDS)
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        explorer = page.locator(".labkit-explorer")
        prediction = explorer.locator(".labkit-explorer-prediction")
        expect(prediction).to_contain_text("2w 1ps K=10 batch 64", timeout=60 * SECONDS)
        before = prediction.inner_text()
        explorer.locator(".labkit-explorer-workers .noUi-handle").press("ArrowLeft")  # 2 workers -> 1
        expect(prediction).to_contain_text("1w 1ps K=10 batch 64")
        assert prediction.inner_text() != before
        screenshot("explorer-1-moved")

        explorer.locator(".labkit-explorer-measure").click()
        table = explorer.locator(".labkit-explorer-table")
        expect(table).to_contain_text("1w 1ps K=10 batch 64", timeout=120 * SECONDS)
        expect(explorer.locator(".labkit-explorer-status")).to_contain_text("Measured 1w 1ps K=10 batch 64")
        screenshot("explorer-2-measured")

        explorer.locator(".labkit-explorer-measure").click()  # again, and shut the kernel down while it runs
        processes.wait_until(lambda: len(task_processes()) >= 2, 120, "the second measurement to start its cluster")
        page.get_by_role("menuitem", name="Kernel", exact=True).click()
        page.get_by_role("menuitem", name="Shut Down Kernel", exact=True).click()
        confirm = page.get_by_role("button", name="Shut Down", exact=True)
        if confirm.count():
            confirm.click()
        processes.wait_until(lambda: not task_processes(), 30, "the measurement's tasks to end with the kernel")


# One relative link of each kind in notebook 05 as the learner opens it from work/notebooks/.
LINKED_FROM_05 = {"docs/measurements.md": "a docs page", "exercises/ex2_gradient_compression.ipynb": "an exercise",
                  "notebooks/06_stale_gradients.ipynb": "another notebook"}


NEWS_QUESTION = "Would you like to get notified about official Jupyter news?"


def test_links_in_a_notebook_open_their_targets_in_the_work_folder(lab, browser_page):
    """In the work folder `make lab` builds, clicking a docs link, an exercise link and a notebook link in
    notebook 05's text opens each target in a tab of its own, showing its first heading, not an error."""
    root, url_of = lab
    workfolder.copy_missing(root)
    page, screenshot = browser_page
    notebook = "notebooks/05_gradient_compression.ipynb"
    with failure_screenshot(screenshot):
        page.goto(url_of(notebook))
        for target, kind in LINKED_FROM_05.items():
            page.locator(".lm-TabBar-tab", has_text=Path(notebook).name).click()
            link = page.locator(f'.jp-RenderedMarkdown a[href*="/files/{target}?"]')
            expect(link, f"no link to {kind} ({target}) in {notebook}").to_have_count(1, timeout=60 * SECONDS)
            link.click()
            expect(page.locator(".lm-TabBar-tab.jp-mod-current"),
                   f"{kind} ({target}) did not open").to_have_text(Path(target).name, timeout=30 * SECONDS)
            document = page.locator("#jp-main-dock-panel .jp-MainAreaWidget:visible")
            expect(document.locator("h1").first).to_contain_text(first_heading(root / target), timeout=30 * SECONDS)
            expect(page.locator(".jp-Dialog"), f"{kind} ({target}) opened a dialog").to_have_count(0)
            screenshot(f"link-to-{Path(target).stem}")
        expect(page.get_by_text(NEWS_QUESTION), "JupyterLab asked about news: are the kit's lab settings "
                                                "(jupyterlab/overrides.json) installed?").to_have_count(0)


def first_heading(path):
    """The text of the first level-1 heading of a Markdown file or a notebook's Markdown cells."""
    if path.suffix == ".ipynb":
        text = "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells
                         if cell.cell_type == "markdown")
    else:
        text = path.read_text()
    return re.search(r"^# (.+)$", text, re.MULTILINE).group(1).strip()
