"""Figures as images in Jupyter, whoever made them.

IPython's inline backend registers its PNG formatter for ``matplotlib.figure.Figure``
only when pyplot is imported. A Figure built without pyplot (``bench.plot`` builds
one, so it also works headless) would otherwise show as the text ``<Figure ...>``.
"""
import sys


def show_figures_as_images():
    """In an IPython session, draw every Figure a cell returns or displays as a PNG."""
    if "IPython" not in sys.modules:
        return
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        # By name: matplotlib is not imported until a Figure is actually shown.
        shell.display_formatter.formatters["image/png"].for_type_by_name("matplotlib.figure", "Figure", figure_png)


def figure_png(figure):
    """The figure as PNG bytes, cropped as the inline backend crops it."""
    from IPython.core.pylabtools import print_figure

    return print_figure(figure, "png", bbox_inches="tight")
