"""The pages written from the code (`make docs`): docs/cli.md is the parser's, and docs/contributing.md's layers,
retired names and layout are labkit/tools/conventions.py's and the files' own."""
import pytest

from labkit.tools import pages
from labkit.tools.pages import PageError


@pytest.mark.parametrize("page", [pages.CLI_PAGE, pages.CONTRIBUTING], ids=str)
def test_each_generated_page_is_what_the_code_writes(page):
    assert (pages.ROOT / page).read_text() == pages.pages()[pages.ROOT / page], f"{page} is out of date: run make docs"


def kit(root, modules):
    """A kit in ``root`` with ``modules`` ({path under labkit/: its text}) and one script."""
    for path, text in {"__init__.py": '"""The package."""', **modules}.items():
        (root / "labkit" / path).parent.mkdir(parents=True, exist_ok=True)
        (root / "labkit" / path).write_text(text)
    (root / "scripts").mkdir()
    (root / "scripts" / "tidy.py").write_text('"""Tidy up (make tidy).\n\nMore on tidying."""\n')
    return root


def test_the_layout_lists_every_module_by_layer_with_its_summary(tmp_path):
    root = kit(tmp_path, {"tools/__init__.py": '"""The tools."""', "tools/new_tool.py": '"""A new tool.\n\nIts details."""',
                          "runtime/__init__.py": '"""Plumbing."""', "runtime/pipes.py": '"""Pipes, ``quietly``."""',
                          "train.py": '"""The loop."""'})
    assert pages.layout(root).splitlines()[:7] == [
        "- `labkit/`: The package.",
        "  - `tools/`: The tools.",
        "    - `new_tool.py`: A new tool.",
        "  - `train.py`: The loop.",
        "  - `runtime/`: Plumbing.",
        "    - `pipes.py`: Pipes, `quietly`.",
        "- `scripts/`: what `make` runs beyond the kit",
    ]
    assert "  - `tidy.py`: Tidy up (make tidy)." in pages.layout(root)


@pytest.mark.parametrize("modules, complaint", [
    ({"tools/__init__.py": '"""The tools."""', "tools/bare.py": "x = 1\n"}, "bare.py has no docstring"),
    ({"helpers.py": '"""Helpers."""'}, "helpers in no layer: add each to LAYERS"),
], ids=["no-docstring", "no-layer"])
def test_a_module_the_layout_cannot_place_is_refused(tmp_path, modules, complaint):
    with pytest.raises(PageError, match=complaint):
        pages.layout(kit(tmp_path, modules))


def test_contributing_without_its_generated_parts_is_refused():
    with pytest.raises(PageError, match="must have one generated part each of layers, layout, retired"):
        pages.contributing("## Layout\n\n<!-- make docs: layers -->\nold\n<!-- make docs: end -->\n")
