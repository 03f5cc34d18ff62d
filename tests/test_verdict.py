"""A verdict names a winner only where every seed allows it."""
import pytest

from labkit.verdict import CANNOT_TELL, LOSES, WINS, verdict


@pytest.mark.parametrize("treatment, control, expected", [
    ([0.85, 0.86, 0.87], [0.80, 0.82, 0.84], WINS),         # its worst seed beats the control's best
    ([0.80, 0.82, 0.84], [0.85, 0.86, 0.87], LOSES),        # its best seed is below the control's worst
    ([0.82, 0.85, 0.87], [0.83, 0.84, 0.845], CANNOT_TELL),  # a higher mean, but the ranges overlap
    ([0.84, 0.86, 0.87], [0.80, 0.82, 0.84], CANNOT_TELL),  # a tie at the edge is no win
])
def test_a_treatment_wins_only_outside_the_controls_range(treatment, control, expected):
    assert verdict(treatment, control) == expected


def test_lower_can_be_better_and_too_few_seeds_cannot_tell():
    assert verdict([1.0, 1.1], [2.0, 2.2], higher_is_better=False) == WINS
    assert verdict([1.0, 1.1], [2.0, 2.2], higher_is_better=False, min_seeds=3) == CANNOT_TELL


@pytest.mark.parametrize("treatment, control", [([0.9, float("nan"), 0.9], [0.5, 0.5]), ([], [0.5])])
def test_a_diverged_seed_or_no_seed_is_never_ranked(treatment, control):
    with pytest.raises(ValueError, match="diverged"):
        verdict(treatment, control)
