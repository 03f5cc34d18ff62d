"""The fault matrix (`scripts/stress_faults.py`): each kind of failure ROUNDS times, and how many rounds failed."""
import sys

from measurements.items import SMALL_LAPTOP, Run
from measurements.records import ROOT, json_file, measured_at, titled

ROUNDS = 20  # of each kind; they train on the offline subset


def runs():
    return [Run("stress", lambda folder: [sys.executable, str(ROOT / "scripts" / "stress_faults.py"), "--rounds",
                                          str(ROUNDS), "--json", str(folder / "stress.json")], SMALL_LAPTOP)]


def result(run, folder):
    return json_file(folder / "stress.json")


def section(recorded):
    return titled("Fault matrix (`scripts/stress_faults.py`)", recorded.get("stress"), failed_rounds)


def failed_rounds(record):
    counts = record["result"]
    return [f"Each kind of failure {counts['rounds']} times, each round on a cluster of 2 workers and 1 PS "
            f"({measured_at(record)}); a round fails if it raises, its process dies, or it does not",
            "finish its steps with one recovery per PS failure from the checkpoint before it and every task alive.", "",
            "| kind | failed rounds |", "|---|---|",
            *[f"| {kind} | {failed} of {counts['rounds']} |" for kind, failed in counts["failed"].items()], ""]
