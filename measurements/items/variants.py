"""How memory grows away from the defaults: notebooks run with parameters that cost more."""
from measurements.items import Run, notebooks
from measurements.records import ROOT

# (run name, notebook, its parameters, what it shows)
VARIANTS = [
    ("03-all-shipped", "03_custom_training_loop", ["-p", "shipped_examples", "60000"],
     "notebook 03 with all 60,000 training images shipped inside the graph (its default ships a slice)"),
]


result = notebooks.result  # a variant is a notebook's run


def runs():
    return [Run(name, notebooks.labkit_sweep(ROOT / "notebooks" / f"{stem}.ipynb", *parameters)) for name, stem, parameters, _ in VARIANTS]


def section(recorded):
    lines = ["## Memory away from the defaults", "", *notebooks.table("run")]
    for name, _, _, what in VARIANTS:
        lines.append(f"| {what} | {notebooks.run_cells(recorded[name])} |" if name in recorded else
                     f"| {what} | not measured yet | | | | | | |")
    return lines + [""]
