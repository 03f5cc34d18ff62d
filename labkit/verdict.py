"""Which of two groups of seeds did better: a verdict that every seed allows.

A group's spread is its range, from its lowest value to its highest. A treatment *wins* only if its
worst seed did better than the control's best, *loses* if its best did worse than the control's worst:
the winner is outside the other's spread. Where the two spreads overlap the run cannot tell. A diverged
seed (NaN) has no accuracy to rank: report the divergence instead.
"""
import math

WINS, LOSES, CANNOT_TELL = "wins", "loses", "cannot tell"


def verdict(treatment, control, higher_is_better=True, min_seeds=1):
    """``"wins"``, ``"loses"`` or ``"cannot tell"`` for the values of ``treatment`` against those of
    ``control`` (one per seed); fewer than ``min_seeds`` on either side cannot tell."""
    values = [float(value) for value in [*treatment, *control]]
    if min(len(treatment), len(control)) == 0 or any(math.isnan(value) for value in values):
        raise ValueError(f"a verdict needs values on both sides and no NaN (a diverged seed is reported as "
                         f"diverged, never ranked): got {list(treatment)} against {list(control)}")
    if min(len(treatment), len(control)) < min_seeds:
        return CANNOT_TELL
    sign = 1 if higher_is_better else -1
    treatment, control = [sign * value for value in treatment], [sign * value for value in control]
    if min(treatment) > max(control):
        return WINS
    return LOSES if max(treatment) < min(control) else CANNOT_TELL
