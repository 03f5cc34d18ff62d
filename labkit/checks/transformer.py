"""Checks of notebook 04 (the mini transformer language model)."""
from labkit.checks.core import require


def beats_baseline(perplexity, baselines, baseline):
    """The model's ``perplexity`` is below the ``baseline`` entry of ``baselines`` (e.g. "trigram")."""
    if baseline not in baselines:
        raise ValueError(f"unknown baseline {baseline!r}; use one of {', '.join(baselines)}.")
    require(perplexity < baselines[baseline], f"validation perplexity {perplexity:.2f} does not beat the {baseline} "
                                              f"count model ({baselines[baseline]:.2f}): train for more steps.")


def lookup_sends_rows(lookup_bytes, rows_bytes):
    """An embedding lookup's bytes are those of one row per token (within RPC overhead), not fewer."""
    if not 0.9 * rows_bytes <= lookup_bytes <= 1.5 * rows_bytes:
        raise AssertionError(f"a lookup sent {lookup_bytes:,.0f} bytes, expected about {rows_bytes:,} "
                             "(one row per token of the batch): did the lookup run on the parameter servers?")
