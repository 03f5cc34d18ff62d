"""The long cells of the notebooks' runs at their defaults, read from those runs: it measures nothing of its own.

A long cell has a time note before it, or ran longer than LONG_CELL_SECONDS; publishing writes each time note.
"""
from measurements.items.notebooks import LONG_CELL_SECONDS
from measurements.records import ROOT, minutes


def runs():
    return []


def section(recorded):
    lines = ["## Long cells", "",
             f"Every code cell of a notebook that has a time note before it, or that ran longer than {LONG_CELL_SECONDS} s,",
             "in the runs above (papermill's time for the cell). `make measurements` writes each time note from here.", "",
             "| notebook | cell | its first line | run time | time note |", "|---|---|---|---|---|"]
    found = [(path.stem, cell) for path in sorted((ROOT / "notebooks").glob("*.ipynb"))
             for cell in recorded.get(path.stem, {}).get("result", {}).get("long_cells", [])]
    if not found:
        return lines[:2] + ["Not measured yet.", ""]
    return lines + [f"| `{stem}` | `{cell['id']}` | `{cell['first_line'][:60]}` | {minutes(cell['seconds'])} | "
                    f"{'yes' if cell['time_note'] else 'missing'} |" for stem, cell in found] + [""]
