"""The measurement items, one module each: what each runs, what it keeps of a run, and its section of the page.

An item module has
- ``runs()``: the runs it makes, each a ``Run`` (a name, the command that measures into a folder, the MNIST it uses);
- ``result(run, folder)``: what to keep of the run's files in ``folder``, as JSON values (None: it left nothing);
- ``section(recorded)``: its lines of docs/measurements.md, from every run's record ({name: record}).
An item that measures nothing itself (the long cells, read from the notebooks' runs) has no runs.
Adding an item: a module here, and its line in measurements/order.py's ITEMS.
"""
import sys
from dataclasses import dataclass
from typing import Callable

LABKIT = [sys.executable, "-m", "labkit.tools.cli"]
SMALL_LAPTOP = "offline-subset"  # the MNIST of `make lab-small`
AS_CI = "as-ci"  # no MNIST source set, as in CI: each test picks its own


@dataclass(frozen=True)
class Run:
    """One measurement: ``command(folder)`` measures into ``folder``; ``mnist`` is its LABKIT_MNIST_SOURCE (None:
    the run's default, full MNIST where it is cached)."""

    name: str
    command: Callable
    mnist: str | None = None
