"""The one way a notebook records its key results, so that scripts and ``labkit sweep`` can read them.

A notebook's ``parameters`` cell has ``results_dir = None``; its last section calls

    results.record(results_dir, test_accuracy=accuracy, num_steps=num_steps)

With a directory (``labkit sweep`` gives each run its own), this writes the values to
``results.json`` there, added to what earlier calls recorded. With ``None`` (a learner's
run) it writes nothing but still checks the values, so a smoke run catches a bad one.
Values are numbers, strings, booleans or None, or a list of them (one per task, say): one column each in
``results.csv``, a list as its JSON text.

Every comparison a notebook concludes is a ``labkit.verdict.Verdict``; ``record_verdicts(results_dir,
verdicts)`` keeps them under ``"verdicts"`` in the same file, one entry per name (``labkit sweep`` gathers
them into ``verdicts.csv`` and says which held in every run).
"""
import json
import numbers
import re
from pathlib import Path

from labkit import verdict

FILE_NAME = "results.json"
VERDICTS = "verdicts"
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def record(results_dir, **values) -> dict:
    """Check ``values`` and, if ``results_dir`` is given, add them to its ``results.json``; return them."""
    checked = {key: _plain(key, value) for key, value in values.items()}
    if VERDICTS in checked:
        raise ValueError(f"{VERDICTS!r} is where record_verdicts keeps the verdicts: name this result otherwise.")
    _write(results_dir, lambda recorded: recorded | checked)
    return checked


def record_verdicts(results_dir, verdicts) -> list[dict]:
    """Check each of ``verdicts`` (``labkit.verdict.Verdict``s, or their records) and, if ``results_dir`` is
    given, add them to the "verdicts" list of its ``results.json`` (one replaces an earlier one of its name);
    return their records. Each must be corrected for at least as many comparisons as are recorded."""
    records = [verdict.check_record(dict(found)) if isinstance(found, dict) else found.record() for found in verdicts]
    names = [found["name"] for found in records]
    if len(set(names)) != len(names):
        raise ValueError(f"two verdicts share a name in {names}: give each comparison its own name.")

    def added(recorded):
        kept = [found for found in recorded.get(VERDICTS, []) if found["name"] not in names]
        return recorded | {VERDICTS: _corrected_for_all(kept + records)}
    _corrected_for_all(records)
    _write(results_dir, added)
    return records


def _corrected_for_all(records):
    """``records``, unless one is corrected for fewer comparisons than there are records (Bonferroni)."""
    short = [found["name"] for found in records if found.get("comparisons", 1) < len(records)]
    if short:
        raise ValueError(f"{len(records)} verdicts are recorded, but {', '.join(short)} "
                         f"{'is' if len(short) == 1 else 'are'} corrected for fewer comparisons: make each with "
                         f"comparisons={len(records)} (or more), the number of comparisons the notebook concludes.")
    return records


def _write(results_dir, change):
    """Replace ``results_dir``'s results.json by ``change(what it holds)``; nothing without a directory."""
    if results_dir is not None:
        directory = Path(results_dir)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / FILE_NAME).write_text(json.dumps(change(load(directory)), indent=2) + "\n")


def load(results_dir) -> dict:
    """What a run recorded in ``results_dir`` ({} if it recorded nothing); its verdicts under "verdicts"."""
    path = Path(results_dir) / FILE_NAME
    return json.loads(path.read_text()) if path.exists() else {}


def without_verdicts(recorded) -> dict:
    """``load()``'s result without its verdicts: the values, one CSV column each."""
    return {key: value for key, value in recorded.items() if key != VERDICTS}


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
    if isinstance(value, (list, tuple)) and not any(isinstance(element, (list, tuple, dict)) for element in value):
        return [_plain(key, element) for element in value]
    raise TypeError(f"result {key!r} is a {type(value).__name__}; record numbers, strings, booleans or None, or a "
                    "list of them (one CSV column each), e.g. float(accuracy).")
