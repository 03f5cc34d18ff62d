"""Build a static HTML book of the executed notebooks, the exercises and the docs (make site).

    python scripts/build_site.py                  # into runs/site; open runs/site/index.html
    python -m http.server -d runs/site 8000       # serve it to a room (read-only pages, no kernel)

Each notebook comes with the outputs of its latest run: `make measurements` (learner defaults,
runs/measurements/NN_topic/) when there is one, else the smoke copy `make test` executed (runs/smoke/);
a notebook never run shows its code without outputs, and the build says which. Built with Sphinx,
MyST-NB and the Sphinx Book Theme (the `site` extra), which need no network: nothing is executed.
"""
import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs"
CONF = '''project = "PS Lab"
extensions = ["myst_nb"]
nb_execution_mode = "off"            # the notebooks come executed; the build runs nothing
myst_heading_anchors = 3
html_theme = "sphinx_book_theme"
html_title = "PS Lab"
html_theme_options = {"show_toc_level": 2}
exclude_patterns = ["_build"]
suppress_warnings = ["myst.header", "mystnb.unknown_mime_type", "misc.highlighting_failure"]
'''


def executed(notebook):
    """The latest executed copy of ``notebook``: from make measurements, else from make test; or None."""
    found = [*(RUNS / "measurements" / notebook.stem).glob(f"*/{notebook.name}"), RUNS / "smoke" / notebook.name]
    found = [path for path in found if path.exists()]
    return max(found, key=lambda path: path.stat().st_mtime) if found else None


def sources(src):
    """Copy the book's pages into ``src``; return the notebooks that have no outputs."""
    shutil.rmtree(src, ignore_errors=True)
    (src / "notebooks").mkdir(parents=True)
    unexecuted = []
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        copy = executed(notebook)
        if copy is None:
            unexecuted.append(notebook.name)
        shutil.copy(copy or notebook, src / "notebooks" / notebook.name)
    for folder in ("docs", "exercises"):
        shutil.copytree(ROOT / folder, src / folder)
    shutil.copy(ROOT / "CHANGELOG.md", src / "CHANGELOG.md")
    toc = ["", "```{toctree}", ":hidden:", ":caption: Notebooks", ""]
    toc += [f"notebooks/{path.stem}" for path in sorted((src / "notebooks").glob("*.ipynb"))]
    toc += ["```", "", "```{toctree}", ":hidden:", ":caption: Exercises", "", "exercises/README"]
    toc += [f"exercises/{path.stem}" for path in sorted((src / "exercises").glob("*.ipynb"))]
    toc += ["```", "", "```{toctree}", ":hidden:", ":caption: Docs", ""]
    toc += [f"docs/{path.stem}" for path in sorted((src / "docs").glob("*.md"))] + ["CHANGELOG", "```", ""]
    (src / "index.md").write_text((ROOT / "README.md").read_text() + "\n".join(toc))
    (src / "conf.py").write_text(CONF)
    return unexecuted


def build(out):
    """Build the book into ``out``; return the names of the notebooks shown without outputs."""
    src = RUNS / "site-src"
    unexecuted = sources(src)
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", str(src), str(out)], check=True)
    return unexecuted


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=RUNS / "site", help="where the HTML goes (default: runs/site)")
    args = parser.parse_args(argv)
    try:
        import myst_nb, sphinx_book_theme  # noqa: F401
    except ImportError:
        sys.exit("make site needs the site extra: .venv/bin/pip install -e '.[site]'")
    unexecuted = build(args.out)
    if unexecuted:
        print(f"shown without outputs (never run here: run make test or make measurements first): {', '.join(unexecuted)}")
    print(f"built {args.out / 'index.html'}")


if __name__ == "__main__":
    main()
