"""Every check of labkit.checks.transformer rejects a wrong result (and accepts the right one)."""
import pytest

from labkit import checks

LADDER = {"uniform": 101.0, "unigram": 27.8, "bigram": 11.8, "trigram": 6.64, "fourgram": 5.35}


def test_a_model_at_the_trigram_does_not_beat_it():
    checks.beats_baseline(6.0, LADDER, "trigram")
    with pytest.raises(checks.CheckFailed, match="6.64 does not beat the trigram count model"):
        checks.beats_baseline(6.64, LADDER, "trigram")
    with pytest.raises(checks.CheckFailed, match="does not beat the trigram"):
        checks.beats_baseline(9.5, LADDER, "trigram")  # beats the bigram only
    with pytest.raises(ValueError, match="use one of uniform, unigram, bigram, trigram, fourgram"):
        checks.beats_baseline(6.0, LADDER, "5-gram")
