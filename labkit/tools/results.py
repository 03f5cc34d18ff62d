"""The one way a notebook records its key results, so that scripts and ``labkit sweep`` can read them.

A notebook's ``parameters`` cell has ``results_dir = None``; its last section calls

    results.record(results_dir, test_accuracy=accuracy, num_steps=num_steps)

With a directory (``labkit sweep`` gives each run its own), this writes the values to
``results.json`` there, added to what earlier calls recorded. With ``None`` (a learner's
run) it writes nothing but still checks the values, so a smoke run catches a bad one.
Values are numbers, strings, booleans or None: one column each in ``results.csv``.
"""
import json
import numbers
import re
from pathlib import Path

FILE_NAME = "results.json"
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def record(results_dir, **values) -> dict:
    """Check ``values`` and, if ``results_dir`` is given, add them to its ``results.json``; return them."""
    checked = {key: _plain(key, value) for key, value in values.items()}
    if results_dir is not None:
        directory = Path(results_dir)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / FILE_NAME
        path.write_text(json.dumps(load(directory) | checked, indent=2) + "\n")
    return checked


def load(results_dir) -> dict:
    """What a run recorded in ``results_dir`` ({} if it recorded nothing)."""
    path = Path(results_dir) / FILE_NAME
    return json.loads(path.read_text()) if path.exists() else {}


def _plain(key, value):
    if not _KEY.fullmatch(key):
        raise ValueError(f"result name {key!r} is not a plain name: use letters, digits and '_'.")
    if getattr(value, "shape", None) == () and hasattr(value, "item"):  # a numpy scalar
        value = value.item()
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise TypeError(f"result {key!r} is a {type(value).__name__}; record numbers, strings, booleans or None "
                    "(one CSV column each), e.g. float(accuracy) or one result per list element.")
