"""JupyterLab as `make lab` runs it, in a real browser driven by Playwright (tests/support/browser.py).

Headless Chromium opens a notebook, runs all cells, and uses the dashboard's kill and restart buttons; the cost-model
explorer predicts, measures and leaves no task behind; in a work folder built as `make lab` builds it, a notebook's
links to a docs page, an exercise and another notebook each open. (The notebooks' test modules look at their own
executed smoke copies in the browser.)
"""
import json
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import expect

from labkit.runtime import processes
from labkit.tools import workfolder
from support.browser import (SECONDS, browser_page, failure_screenshot, first_heading, lab,  # noqa: F401  (fixtures)
                             needs_chromium)
from support.costs import bench_rows
from support.processes import task_processes

NOTEBOOK_CELLS = ["import labkit\nfrom labkit.widgets import ClusterDashboard",
                  'cluster = labkit.LocalCluster(num_workers=1, num_ps=1, name="browser-test")\n'
                  "ClusterDashboard(cluster)"]

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600), needs_chromium]


@pytest.fixture
def lab_url(lab):
    """The URL of a one-notebook JupyterLab whose notebook shows the cluster dashboard."""
    root, url_of = lab
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for code in NOTEBOOK_CELLS])
    notebook.metadata["kernelspec"] = {"name": "pslab", "display_name": "PS Lab (TensorFlow 2.21)",
                                       "language": "python"}
    nbformat.write(notebook, root / "dashboard.ipynb")
    return url_of("dashboard.ipynb")


def test_dashboard_kill_and_restart_buttons_in_jupyterlab(lab_url, browser_page):
    page, screenshot = browser_page
    with failure_screenshot(screenshot):
        run_the_notebook_then_kill_and_restart_a_worker(page, lab_url, screenshot)


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