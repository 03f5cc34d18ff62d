"""What the measurements recorded: one JSON file per run in measurements/recorded/, and how the pages show it.

A record is ``{"log": ..., "result": ...}``. The log says when and under what load the run was measured: started,
ended and seconds (of the whole run), the load average before and after it, the MNIST it used, and for the tests
the time of a bare ``import tensorflow`` just before (the machine's speed then). The result is what the run's
item (measurements/items/) made of the run's own files: structured values, never Markdown.
"""
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDED = Path(__file__).resolve().parent / "recorded"
RAW = ROOT / "runs" / "measurements"  # each run's own files, in a folder named as the run (not committed)
NO_MNIST_SOURCE = "none: each test picks its own, as in CI"


def read_all():
    """{run name: record} of every recorded run."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(RECORDED.glob("*.json"))}


def write(name, log, result):
    RECORDED.mkdir(parents=True, exist_ok=True)
    (RECORDED / f"{name}.json").write_text(json.dumps({"log": log, "result": result}, indent=1) + "\n")


def json_file(path):
    """The JSON a run wrote to ``path``, or None if it wrote none."""
    return json.loads(path.read_text()) if path.exists() else None


def minutes(seconds):
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def as_shown(seconds):
    """``seconds`` rounded as ``minutes()`` shows them: a sentence computed from a record agrees with the page."""
    return round(seconds) if seconds < 90 else round(seconds / 60, 1) * 60


def gigabytes(megabytes):
    return f"{float(megabytes) / 1000:.1f} GB"


def largest_tasks(text):
    """[[name, MB], ...] from the largest processes as labkit.tools.memory writes them: "kernel=697 ps:0=201"."""
    return [[name, int(megabytes)] for name, megabytes in re.findall(r"(.+?)=(\d+)(?: |$)", text)]


def tasks(largest):
    """The largest processes, [[name, MB], ...], as a table cell: "kernel 697 worker:1 847"."""
    return " ".join(f"{name} {megabytes}" for name, megabytes in largest)


def titled(title, record, body):
    """A section of the page: its ``title``, then ``body(record)`` (lines), or "Not measured yet." without a record."""
    return [f"## {title}", "", *(body(record) if record else ["Not measured yet.", ""])]


def measured_at(record):
    """When and under what load a run was measured, for a table cell or a sentence."""
    if not record:
        return "not measured yet"
    log = record["log"]
    speed = (f"; a bare `import tensorflow` took {log['import_tensorflow_s']:.2f} s just before, the machine's "
             "speed then" if "import_tensorflow_s" in log else "")
    return f"{log['started']}, load {log['load_average_before'][0]:.2f}{speed}"
