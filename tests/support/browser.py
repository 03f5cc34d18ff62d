"""JupyterLab as `make lab` runs it and headless Chromium to look at it, for the browser tests (and the hub's).

Debian's Chromium (/usr/bin/chromium; Playwright never downloads a browser here); a test marked
``needs_chromium`` is skipped, saying why, where there is none. Screenshots go to runs/browser-test/.
"""
import os
import re
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import expect, sync_playwright

from labkit.cluster import pick_port
from labkit.runtime import processes
from labkit.tools import lab as jupyter_lab
from support.smoke import figure_cells

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 # Without these Chromium keeps calling home and floods the closed network with retries.
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "runs" / "browser-test"
SECONDS = 1000  # Playwright counts milliseconds
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}: the browser tests "
                                    "need Debian's chromium package (apt-get install chromium)")


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
    command = jupyter_lab.command(root, port, open_browser=False)
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
        return re.search(rf"http://127\.0\.0\.1:{port}/lab[^?\s]*\?token=(\w+)", log_path.read_text())

    return processes.wait_until(token, timeout, "JupyterLab to serve", error=lambda message: AssertionError(
        f"{message}; its log:\n{log_path.read_text()}")).group(1)


def look_at_figures_and_stderr(browser_page, lab, executed):
    """Open the executed notebook at ``executed`` in ``lab`` (the fixtures): every figure is an image that loaded, and
    no figure shows as text, no output is red."""
    (page, screenshot), (root, url_of) = browser_page, lab
    shutil.copy(executed, root / executed.name)
    with failure_screenshot(screenshot):
        page.goto(url_of(executed.name))
        outputs = page.locator(".jp-Notebook .jp-OutputArea-output")
        outputs.first.wait_for(timeout=60 * SECONDS)
        images = page.locator(".jp-Notebook .jp-RenderedImage img")
        expect(images.nth(figure_cells(executed) - 1)).to_be_attached(timeout=30 * SECONDS)
        for index in range(images.count()):
            image = images.nth(index)
            image.scroll_into_view_if_needed()
            expect(image).to_be_visible()
            assert image.evaluate("img => img.complete && img.naturalWidth > 100"), f"figure {index} did not load"
            screenshot(f"{executed.stem}-figure-{index}")
        assert not page.get_by_text("<Figure size").count(), "a figure shows as text"
        stderr = page.locator('.jp-Notebook [data-mime-type="application/vnd.jupyter.stderr"]')
        assert stderr.count() == 0, f"red stderr output in {executed.stem}: {stderr.all_inner_texts()[:3]}"


def first_heading(path):
    """The text of the first level-1 heading of a Markdown file or a notebook's Markdown cells."""
    if path.suffix == ".ipynb":
        text = "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells
                         if cell.cell_type == "markdown")
    else:
        text = path.read_text()
    return re.search(r"^# (.+)$", text, re.MULTILINE).group(1).strip()
