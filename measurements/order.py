"""The items, in the order of docs/measurements.md's sections (and of the runs). Adding an item: its line here.

Not in the package's ``__init__``: an item that runs itself as ``python -m measurements.items.NAME`` would then be
imported twice (runpy warns that it "may result in unpredictable behaviour").
"""
from measurements.items import (bench_report, class_on_one_server, cost_model, grading, install, long_cells, notebooks,
                                startup, stress, tests, variants, workshop_day)

ITEMS = [
    tests,
    install,
    startup,
    notebooks,
    workshop_day,
    class_on_one_server,
    grading,
    variants,
    cost_model,
    long_cells,
    bench_report,
    stress,
]
