"""docs/measurements.md, rendered from the records alone.

A heading (the machine, when, under what load, which MNIST), each item's section in ITEMS' order, and what the
memory figures mean.
"""
import platform

from measurements.order import ITEMS
from measurements.records import NO_MNIST_SOURCE, ROOT, minutes

PAGE = ROOT / "docs" / "measurements.md"
INTRO = ["# Measurements", "",
         "Every number the kit's pages quote comes from here. This page is written by `make measurements`",
         "(`measurements/`) from the results it recorded in `measurements/recorded/`; do not edit it by hand.",
         "Timings depend on the machine and on what else runs on it: the load average (1 minute) at the start",
         "of each measurement is given beside it.", ""]
MEMORY = """## Memory

Memory is the peak, sampled twice a second, of the summed *proportional set size* (PSS) of the
kernel and every process it starts (task servers, coordinator, evaluator): each page shared by
several processes (TensorFlow's libraries, mapped by every task) is divided among them, so the sum
is what the run really takes. The summed resident size (RSS) is given beside it only for
comparison: it counts each shared library once per process and so overstates the sum. PSS also
divides a page with other programs that map it, so "alone" estimates what a laptop running nothing
else needs: the processes' private memory plus the largest shared part of any one of them.
`labkit doctor --workshop` compares free memory with the larger of PSS and alone
(`labkit/tools/notebook_peaks.json`, written with this page).
"""


def render(recorded):
    """The page's text, from ``recorded`` ({run name: record})."""
    lines = INTRO + heading(recorded) + [""]
    for item in ITEMS:
        lines += item.section(recorded)
    return "\n".join(lines + [MEMORY]).rstrip() + "\n"


def heading(recorded):
    if not recorded:
        return ["**Nothing measured yet**: run `make measurements`."]
    machine = recorded.get("startup", {}).get("result", {}).get("machine", {})
    versions = machine.get("versions", {})
    logs = [record["log"] for record in recorded.values()]
    seconds = [log.get("seconds") for log in logs]
    total = f"; the measurements below took {minutes(sum(seconds))} in all" if None not in seconds else ""
    loads = [log["load_average_before"][0] for log in logs]
    sources = sorted({log["mnist_source"] for log in logs if log["mnist_source"] != NO_MNIST_SOURCE})
    return [f"- **Machine**: {machine.get('cores', '?')} cores, {machine.get('memory_gib', '?')} GiB, "
            f"{machine.get('platform', platform.platform())}; Python {versions.get('python', platform.python_version())}, "
            f"TensorFlow {versions.get('tensorflow', '?')}, labkit {versions.get('labkit', '?')}",
            f"- **Date**: {min(log['started'] for log in logs)} to "
            f"{max(log.get('ended') or log['started'] for log in logs)}{total}",
            f"- **Load average** at the start of each measurement: {min(loads):.2f} to {max(loads):.2f}",
            f"- **MNIST**: {', '.join(sources)} "
            "(`timing-standin` is full MNIST's size, repeated from the offline subset: its accuracies mean nothing)"]
