"""One cluster shape measured in a child process, watched by a thread, and cancellable with every task it started.

``python -m labkit.explorer.measurement`` is the child: it runs ``bench.measure_points`` on the shape's
``LocalCluster`` and its single-process baseline, and writes the rows.
"""
import argparse
import contextlib
import json
import re
import shutil
import tempfile
import threading
from pathlib import Path

import psutil

from labkit.runtime import children, processes

PROGRESS_LINE = re.compile(r"^bench: (\d+)/(\d+) measurements?")


class Measurement:
    """Measure ``shape`` of ``model`` (``repeats`` timed intervals of at least ``min_steps`` steps) in the background.

    ``on_progress(done, total, line)`` is called for each progress line of the child; ``on_end(rows, failure)``
    once it ends, with its rows, or None and why not (None if cancelled)."""

    def __init__(self, shape, model, repeats, min_steps, on_progress, on_end):
        self.folder = Path(tempfile.mkdtemp(prefix="labkit-explorer-"))
        arguments = [f"--{name.replace('_', '-')}={getattr(shape, name)}"
                     for name in ("workers", "ps", "steps_per_closure", "batch_size")]
        self.cancelled = False
        self.process = children.start_program(
            __name__, *arguments, f"--model={model}", f"--repeats={repeats}", f"--min-steps={min_steps}",
            f"--out={self.folder / 'rows.json'}", log_path=self.folder / "measure.log", read_stdout=True)
        self.thread = threading.Thread(target=self._watch, args=(on_progress, on_end), name="labkit-explorer",
                                       daemon=True)
        self.thread.start()

    def _watch(self, on_progress, on_end):
        """In the thread: pass on the child's progress lines, then its rows (or why there are none)."""
        for line in self.process.stdout:
            found = PROGRESS_LINE.match(line)
            if found:
                on_progress(int(found.group(1)), int(found.group(2)), line.strip())
        self.process.wait()
        out = self.folder / "rows.json"
        if self.cancelled:
            on_end(None, None)
        elif self.process.returncode != 0 or not out.exists():
            on_end(None, f"the measurement failed (exit code {self.process.returncode}); the end of its log:\n"
                         f"{processes.log_tail(self.folder / 'measure.log', 8)}")
        else:
            on_end(json.loads(out.read_text()), None)
        shutil.rmtree(self.folder, ignore_errors=True)

    @property
    def running(self):
        return self.thread.is_alive()

    def cancel(self):
        """Stop the child and every task it started; return once they are gone."""
        self.cancelled, tasks = True, []
        with contextlib.suppress(psutil.NoSuchProcess):  # it may have just finished
            tasks = [child.pid for child in self.process.children(recursive=True)]  # its cluster's tasks
        processes.stop([self.process])
        processes.wait_until_gone(tasks, timeout=30)
        self.thread.join()


def main(argv=None):
    """``python -m labkit.explorer.measurement``: measure one cluster shape and its single-process baseline; write
    the rows."""
    parser = argparse.ArgumentParser(prog="python -m labkit.explorer.measurement", description=main.__doc__)
    for flag in ("--workers", "--ps", "--steps-per-closure", "--batch-size", "--repeats", "--min-steps"):
        parser.add_argument(flag, type=int, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    children.exit_with_parent_if_started_by_one()
    from labkit.bench import Point, measure_points

    points = [Point(args.model, "single-process", 0, 0, args.steps_per_closure, args.batch_size),
              Point(args.model, "custom", args.workers, args.ps, args.steps_per_closure, args.batch_size)]
    rows = measure_points(points, args.repeats, args.min_steps, target_accuracy=1.0)
    Path(args.out).write_text(json.dumps(rows))


if __name__ == "__main__":
    main()
