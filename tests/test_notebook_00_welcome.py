"""Notebook 00 (welcome) at its smoke parameters, as on macOS (no `ss`, no PSS): every cell runs and asserts, a
learner sees every figure and no unexplained red, it records the results it declares (tests/support/smoke.py); and
`make site` builds a book whose every page loads, with its figures as images."""
import shutil

import pytest
from playwright.sync_api import expect

from support.browser import browser_page, failure_screenshot, needs_chromium  # noqa: F401  (a fixture)
from support.scripts import script
from support.smoke import SmokeNotebook, figure_cells


class TestSmokeRun(SmokeNotebook):
    notebook = "00_welcome.ipynb"

    @pytest.mark.browser
    @needs_chromium
    def test_the_site_shows_every_page_with_its_figures(self, executed, browser_page, tmp_path, monkeypatch):
        """The book is built from this notebook's executed copy alone: another worker may write the others meanwhile."""
        pytest.importorskip("myst_nb", reason="make site needs the site extra: pip install -e '.[site]'")
        build_site = script("build_site")
        runs = tmp_path / "runs"
        (runs / "smoke").mkdir(parents=True)
        shutil.copy(executed.path, runs / "smoke")
        monkeypatch.setattr(build_site, "RUNS", runs)
        site = tmp_path / "site"
        build_site.build(site)
        expected_figures = {path.stem: figure_cells(path) for path in map(build_site.executed, sorted(
            build_site.ROOT.glob("notebooks/*.ipynb"))) if path}
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
