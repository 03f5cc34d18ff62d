"""Every check of labkit.checks.transformer rejects a wrong result (and accepts the right one)."""
import pytest

from labkit import checks, verdict

TRIGRAM = [6.8, 6.5, 6.9, 6.4, 6.7, 6.6, 6.5, 6.7]  # the trigram's perplexity on 8 stretches of validation text


def against_the_trigram(model):
    return {"trigram": verdict.paired("transformer_vs_trigram_perplexity", model, TRIGRAM,
                                      measure="validation perplexity", higher_is_better=False,
                                      unit="validation blocks")}


def test_a_model_must_win_against_the_count_model_it_must_beat():
    checks.beats_baseline(against_the_trigram([p - 0.6 for p in TRIGRAM]), "trigram")
    with pytest.raises(checks.CheckFailed, match="Cannot tell the model from the trigram count model"):
        checks.beats_baseline(against_the_trigram([p + (0.3 if i % 2 else -0.3) for i, p in enumerate(TRIGRAM)]),
                              "trigram")  # lower on half the text, higher on the rest
    with pytest.raises(checks.CheckFailed, match="The model loses to the trigram count model"):
        checks.beats_baseline(against_the_trigram([p + 2 for p in TRIGRAM]), "trigram")  # beats the bigram only
    with pytest.raises(ValueError, match="use one of trigram"):
        checks.beats_baseline(against_the_trigram(TRIGRAM), "5-gram")
