"""Progress as printed lines, which read the same live, in a saved copy of a notebook and in a terminal.

A widget bar shows only where a widget frontend runs; a saved (or papermill) copy keeps it frozen at 0 %.
"""
import time


class ProgressLines:
    """One line of progress at most every ``every_seconds``, and the last one (``done`` reaching the total) once.

    ``line(done, **values)`` prints ``description: done/total units, name value, ..., elapsed``.
    """

    def __init__(self, total, description, unit="step", every_seconds=5.0):
        self.total, self.description, self.unit, self.every_seconds = total, description, unit, every_seconds
        self.began = self.last = time.perf_counter()
        self.finished = False

    def line(self, done, **values):
        now = time.perf_counter()
        if self.finished or (done < self.total and now - self.last < self.every_seconds):
            return
        self.last, self.finished = now, done >= self.total
        shown = "".join(f", {name} {value}" for name, value in values.items())
        print(f"{self.description}: {done}/{self.total} {self.unit}s{shown}, {now - self.began:.1f} s", flush=True)
