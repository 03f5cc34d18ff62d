"""Checks of notebook 04 (the mini transformer language model)."""
from labkit.checks.core import require


def beats_baseline(verdicts, baseline):
    """The model wins against the ``baseline`` count model (e.g. "trigram"): ``verdicts`` are its
    ``labkit.verdict`` verdicts against each count model, {count model's name: Verdict}."""
    if baseline not in verdicts:
        raise ValueError(f"unknown baseline {baseline!r}; use one of {', '.join(verdicts)}.")
    found = verdicts[baseline]
    require(found.verdict == "wins", f"{found.sentence('the model', f'the {baseline} count model')} "
                                     "It must beat it: train for more steps.")


def lookup_sends_rows(lookup_bytes, rows_bytes):
    """An embedding lookup's bytes are those of one row per token (within RPC overhead), not fewer."""
    if not 0.9 * rows_bytes <= lookup_bytes <= 1.5 * rows_bytes:
        raise AssertionError(f"a lookup sent {lookup_bytes:,.0f} bytes, expected about {rows_bytes:,} "
                             "(one row per token of the batch): did the lookup run on the parameter servers?")
