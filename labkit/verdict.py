"""Which of two things did better, by stated statistics, and every verdict kept as data.

Each comparison a lab concludes is one call here and comes back as a ``Verdict``: its effect (treatment
minus control; for timings the ratio treatment / control), a confidence interval of it, and one word. A
notebook records it (``labkit.tools.results.record_verdicts``) and prints ``Verdict.sentence``, made from
that record. The rules:

- **Paired** (``paired``): the same seed gives both runs the same initial weights and batch stream, so
  each seed's difference cancels its luck. The effect is the mean of the differences; its interval is
  Student's t with n − 1 degrees of freedom. **Unpaired** (``unpaired``): Welch's t-interval of the
  difference of the means.
- **Interleaved timings** (``interleave``, then ``interleaved``): A and B measured alternately (ABBA...)
  under the same load, so a drift of the machine divides out of each block's ratio (``interleave_many``: the same
  for several, A B C, C B A...). The effect is the geometric mean of the ratios, its interval the paired
  t-interval of their logarithms, exponentiated.
- **Several comparisons**: a notebook that concludes ``comparisons`` of them widens each interval to
  confidence 1 − (1 − confidence) / comparisons (Bonferroni), so that all hold together at ``confidence``.
- **Wins** (or **loses**) only if the whole interval lies on that side of "no difference" (0, or a ratio of
  1), *and* every pair agrees (each seed's difference, each block's ratio; unpaired: the treatment's worst
  seed beyond the control's best), *and* the effect is at least the resolution floor; with fewer than
  ``MIN_PAIRS`` pairs, or otherwise, **cannot tell**. A diverged seed (NaN) is refused: report it as
  diverged, never rank it.
- **Resolution floor** (``resolution_floor``): an accuracy p measured on N distinct test examples moves by
  one binomial standard error, sqrt(p (1 − p) / N), and by at least one example, 1 / N. Below that the test
  set cannot tell two models apart: 0.95 points at 0.9 on the offline subset's 1,000 test images, 0.17
  points at 0.97 on full MNIST's 10,000. It is also McNemar's standard error of the difference of two
  models on the same N examples when they disagree on a share p (1 − p) of them (half of what independent
  errors would give).
- **Non-inferiority** (``non_inferior``, which reads the verdict of ``paired`` or ``unpaired`` against a
  margin): non-inferior only if the interval's worse bound stays inside the margin; inferior if the whole
  interval is worse than the margin; otherwise cannot tell. Noisier seeds widen the interval and so make
  "non-inferior" harder to reach, never easier. ``paired_accuracy`` is the labs' usual case: test accuracies
  paired by seed, on the test examples ``data_basis`` counted, against a margin or not.

``data_basis`` says which MNIST ran and how many distinct test examples its accuracy verdicts rest on; it
refuses them on the timing stand-in. ``seeds_to_decide`` projects how many seeds a paired verdict that cannot
tell would need, if its mean difference and spread stayed as measured. ``mean_and_range``, ``mean_difference``,
``spreads_apart`` and ``five_number_summary`` are the summaries a table shows beside a verdict.
"""
import math
import re
from dataclasses import asdict, dataclass, replace

import numpy as np
from scipy.special import stdtrit  # Student's t quantile (scipy.stats.t.ppf, without loading scipy.stats)

from labkit import data

WINS, LOSES, CANNOT_TELL = "wins", "loses", "cannot tell"
NON_INFERIOR, INFERIOR = "non-inferior", "inferior"
VERDICTS = (WINS, LOSES, CANNOT_TELL, NON_INFERIOR, INFERIOR)
CONFIDENCE = 0.95  # of every interval, after the correction for several comparisons
MIN_PAIRS = 3      # fewer pairs, seeds or blocks than this: cannot tell
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Verdict:
    """One comparison's outcome: ``effect`` is treatment minus control (``ratio``: treatment / control),
    ``interval`` its (lo, hi) at ``confidence`` after the correction for ``comparisons``."""

    name: str                      # a plain identifier, e.g. "topk_vs_dense_accuracy"
    verdict: str                   # one of VERDICTS
    effect: float
    interval: tuple
    paired: bool
    seeds: int                     # pairs, interleaved blocks, or (unpaired) the treatment's values
    distinct_test_examples: int | None
    measure: str = ""              # what was compared: "test accuracy", "samples/s"
    higher_is_better: bool = True
    floor: float = 0.0             # the resolution floor that applied (0 where none)
    margin: float | None = None    # the non-inferiority margin, if any
    comparisons: int = 1
    confidence: float = CONFIDENCE
    ratio: bool = False            # effect and interval are ratios treatment / control (timings)
    control_seeds: int | None = None  # unpaired: the control's seeds
    unit: str = "seeds"            # what each value comes from: "seeds", "timed intervals", "blocks"
    reason: str = ""               # why it cannot tell, in a few words

    def record(self) -> dict:
        """The verdict as plain JSON data (an interval bound that does not exist, with one pair, is None)."""
        record = asdict(self) | {"effect": float(self.effect),
                                 "interval": [_finite_or_none(bound) for bound in self.interval]}
        for key in ("distinct_test_examples", "seeds", "control_seeds", "comparisons"):  # numpy numbers too
            record[key] = None if record[key] is None else int(record[key])
        for key in ("floor", "margin", "confidence"):
            record[key] = None if record[key] is None else float(record[key])
        return check_record(record)

    def sentence(self, treatment: str, control: str) -> str:
        """The one sentence a notebook prints about it, made from its record only."""
        return sentence_of(self.record(), treatment, control)


def paired(name, treatment, control, *, measure, higher_is_better=True, distinct_test_examples=None,
           comparisons=1, unit="seeds") -> Verdict:
    """``treatment[i]`` against ``control[i]``, run with the same seed (weights and batches): the mean
    difference per seed, its t-interval, and the verdict every seed allows."""
    treatment, control = _values(name, treatment, control, same_length=True)
    differences = treatment - control
    interval = _t_interval(differences, comparisons)
    floor = _floor(distinct_test_examples, treatment, control)
    found, reason = _too_few(len(differences), "pairs") or _decide(
        differences.mean(), interval, floor, higher_is_better, _agreement(differences, higher_is_better),
        disagree="not every pair agrees")
    return Verdict(name, found, float(differences.mean()), interval, True, len(differences), distinct_test_examples,
                   measure, higher_is_better, floor, comparisons=comparisons, unit=unit, reason=reason)


def unpaired(name, treatment, control, *, measure, higher_is_better=True, distinct_test_examples=None,
             comparisons=1, unit="seeds") -> Verdict:
    """Two groups of runs (or of ``unit``: "timed intervals") that share no seeds: the difference of their
    means, Welch's t-interval, and a winner only if its worst value is beyond the other's best."""
    treatment, control = _values(name, treatment, control)
    effect, interval = _welch(treatment, control, comparisons)
    floor = _floor(distinct_test_examples, treatment, control)
    apart = spreads_apart(treatment, control) * (1 if higher_is_better else -1)
    found, reason = _too_few(min(len(treatment), len(control)), unit) or _decide(
        effect, interval, floor, higher_is_better, (apart == 1, apart == -1), disagree=f"the {unit}' ranges overlap")
    return Verdict(name, found, effect, interval, False, len(treatment), distinct_test_examples, measure,
                   higher_is_better, floor, comparisons=comparisons, control_seeds=len(control), unit=unit,
                   reason=reason)


def interleaved(name, treatment, control, *, measure, higher_is_better=True, comparisons=1) -> Verdict:
    """Timings measured in the same blocks (``treatment[i]`` and ``control[i]`` in block i of an interleaved
    schedule, see ``interleave``): the geometric mean of the ratios per block and its interval, on a log scale."""
    treatment, control = _values(name, treatment, control, same_length=True)
    if (treatment <= 0).any() or (control <= 0).any():
        raise ValueError(f"{name}: interleaved timings are ratios of positive measurements (seconds, samples/s); "
                         f"got {treatment.tolist()} against {control.tolist()}.")
    logs = np.log(treatment / control)
    log_interval = _t_interval(logs, comparisons)
    found, reason = _too_few(len(logs), "blocks") or _decide(
        logs.mean(), log_interval, 0.0, higher_is_better, _agreement(logs, higher_is_better),
        disagree="not every block agrees", no_difference="a ratio of 1")
    interval = tuple(math.exp(bound) if math.isfinite(bound) else bound for bound in log_interval)  # one block: none
    return Verdict(name, found, math.exp(logs.mean()), interval, True, len(logs), None, measure, higher_is_better,
                   comparisons=comparisons, ratio=True, unit="blocks", reason=reason)


def interleave(measure_a, measure_b, blocks, order="ABBA") -> tuple[list, list]:
    """Call ``measure_a()`` and ``measure_b()`` once in each of ``blocks`` blocks, alternately: "ABBA" (A B, B A,
    A B...: whoever goes first in a block changes, so a warm-up or a steady drift favours neither) or "ABAB";
    return (A's values, B's values), one per block."""
    if order not in ("ABBA", "ABAB"):
        raise ValueError(f"order {order!r}: use 'ABBA' (the first of each block alternates) or 'ABAB'.")
    if order == "ABBA":
        return tuple(interleave_many([measure_a, measure_b], blocks))
    _check_blocks(blocks)
    a_values, b_values = [], []
    for _ in range(blocks):
        a_values.append(measure_a())
        b_values.append(measure_b())
    return a_values, b_values


def interleave_many(measures, blocks, after_block=None) -> list[list]:
    """ABBA for any number of measurements: call each of ``measures`` once in each of ``blocks`` blocks, in their
    order in the first block and reversed in the next (A B C, C B A, A B C...), so that a drift or a warm-up
    favours none; return one list of values per measurement, one value per block. Any two of them are then
    compared block by block (``interleaved``). ``after_block(n)``, if given, is called after block n (from 1),
    e.g. for a progress line."""
    _check_blocks(blocks)
    values = [[] for _ in measures]
    for block in range(blocks):
        order = list(zip(measures, values))
        for measure, kept in (order[::-1] if block % 2 else order):
            kept.append(measure())
        if after_block:
            after_block(block + 1)
    return values


def _check_blocks(blocks):
    if blocks < 1:
        raise ValueError(f"blocks={blocks}: interleave needs at least one block (3 or more for a verdict).")


def non_inferior(comparison, margin) -> Verdict:
    """Is the treatment of ``comparison`` (the verdict of ``paired`` or ``unpaired``) worse than its control by
    less than ``margin`` (in the measure's units, e.g. 0.01 = one point of accuracy)? Non-inferior if the
    interval's worse bound is inside the margin; inferior if its better bound is beyond it; otherwise cannot
    tell. Returns the comparison with that verdict and the margin."""
    if not isinstance(comparison, Verdict) or comparison.ratio or comparison.margin is not None:
        raise TypeError(f"non_inferior reads the verdict of verdict.paired or verdict.unpaired (a difference, "
                        f"not a ratio or a verdict read against a margin already), not {comparison!r}.")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not margin > 0:
        raise ValueError(f"{comparison.name}: the margin is how much worse the treatment may be, a positive number "
                         f"in the measure's units (0.01 = one point of accuracy); got {margin!r}.")
    sign = 1 if comparison.higher_is_better else -1
    worse_bound, better_bound = sorted(sign * bound for bound in comparison.interval)
    count = comparison.seeds if comparison.paired else min(comparison.seeds, comparison.control_seeds)
    too_few = _too_few(count, "pairs" if comparison.paired else comparison.unit)
    if too_few:
        found, reason = too_few
    elif worse_bound > -margin and margin >= comparison.floor:
        found, reason = NON_INFERIOR, ""
    elif better_bound < -margin and abs(comparison.effect) >= comparison.floor:
        found, reason = INFERIOR, ""
    elif margin < comparison.floor:
        found, reason = CANNOT_TELL, "the margin is below the resolution floor"
    else:
        found, reason = CANNOT_TELL, "the interval reaches past the margin"
    return replace(comparison, verdict=found, margin=float(margin), reason=reason)


def seeds_to_decide(found, most=1000):
    """How many pairs a paired verdict that cannot tell would need before its interval decided it, if its mean
    difference and the spread of its differences stayed as measured: the fewest whose interval clears "no
    difference" (read against a margin: clears the margin). None where more pairs cannot decide it: an effect below
    the resolution floor or on the margin, a spread unknown (fewer than 2 pairs), or more than ``most`` needed. Only
    the interval is projected: a winner also needs every pair to agree."""
    if found.verdict != CANNOT_TELL or not found.paired or found.ratio or found.seeds < 2:
        return None
    toward = found.effect * (1 if found.higher_is_better else -1) + (found.margin or 0.0)  # < 0: toward worse
    if found.margin is not None and toward > 0:  # toward non-inferior: the margin must be one the test set resolves
        resolvable = found.margin >= found.floor
    else:  # toward a winner, a loser or inferior: the effect must be
        resolvable = abs(found.effect) >= found.floor
    distance = abs(toward)  # what the interval's half-width must stay under
    if not resolvable or distance == 0:
        return None
    spread = (found.interval[1] - found.interval[0]) / 2 / _quantile(found.seeds - 1, found.comparisons) \
        * math.sqrt(found.seeds)
    return next((n for n in range(found.seeds + 1, most + 1)
                 if _quantile(n - 1, found.comparisons) * spread / math.sqrt(n) < distance), None)


def paired_accuracy(name, treatment, control, basis, comparisons=1, margin=None) -> Verdict:
    """Test accuracies of runs paired by seed, on the data ``basis`` says ran (``data_basis``: its distinct test
    examples set the resolution floor; the timing stand-in is refused): ``paired``, read against ``margin``
    (``non_inferior``) if one is given."""
    found = paired(name, treatment, control, measure="test accuracy",
                   distinct_test_examples=basis.distinct_test_examples, comparisons=comparisons)
    return found if margin is None else non_inferior(found, margin)


def resolution_floor(distinct_test_examples, accuracy) -> float:
    """The smallest accuracy difference a test set of ``distinct_test_examples`` resolves at ``accuracy``: one
    binomial standard error sqrt(p (1 − p) / N), and never less than one example (1 / N)."""
    if isinstance(distinct_test_examples, bool) or not isinstance(distinct_test_examples, (int, np.integer)) \
            or distinct_test_examples < 1:
        raise ValueError(f"distinct_test_examples={distinct_test_examples!r}: give the number of distinct test "
                         "examples, a positive integer (verdict.data_basis(data).distinct_test_examples).")
    if not 0 <= accuracy <= 1:
        raise ValueError(f"accuracy {accuracy!r} is not a share in [0, 1]: the resolution floor applies to "
                         "accuracies; give distinct_test_examples=None for any other measure.")
    return max(math.sqrt(accuracy * (1 - accuracy) / distinct_test_examples), 1 / distinct_test_examples)


@dataclass(frozen=True)
class DataBasis:
    """Which MNIST ran, in a few words (``str()``), and what its accuracy verdicts may rest on."""

    kind: str                     # data.FULL_MNIST, data.OFFLINE_SUBSET or data.TIMING_STANDIN
    test_examples: int
    distinct: int                 # distinct test images

    @property
    def accuracy_means_something(self) -> bool:
        return self.kind != data.TIMING_STANDIN

    @property
    def distinct_test_examples(self) -> int:
        """The count an accuracy verdict rests on; refused on the timing stand-in."""
        if not self.accuracy_means_something:
            raise ValueError("this run used the timing stand-in, whose accuracy means nothing: make no accuracy "
                             "verdict on it (check data_basis(data).accuracy_means_something first), or run with "
                             "full MNIST or the offline subset (LABKIT_MNIST_SOURCE=auto or offline-subset).")
        return self.distinct

    def __str__(self):
        if not self.accuracy_means_something:
            return f"{self.kind} (accuracy means nothing)"
        repeated = f", {self.distinct:,} distinct" if self.distinct != self.test_examples else ""
        return f"{self.kind} ({self.test_examples:,} test images{repeated})"


def data_basis(mnist) -> DataBasis:
    """What ran: ``str()`` says it ("full MNIST (10,000 test images)", "the offline subset (1,000 test
    images)", "the timing stand-in (accuracy means nothing)"); ``.distinct_test_examples`` is the count
    a verdict's ``distinct_test_examples`` takes, and refuses the timing stand-in."""
    if not isinstance(mnist, data.MNIST):
        raise TypeError(f"data_basis takes the MNIST object load_mnist() returned, not a {type(mnist).__name__}.")
    distinct = len({image.tobytes() for image in mnist.x_test})
    return DataBasis(mnist.kind, len(mnist.x_test), distinct)


def check_record(record) -> dict:
    """``record`` if it is a well-formed, self-consistent verdict record; else ValueError saying what is wrong.
    A winner or a loser needs an interval that excludes "no difference" and an effect at least the floor;
    non-inferior, an interval whose worse end is inside the margin; inferior, one wholly beyond it."""
    missing = {"name", "verdict", "effect", "interval", "paired", "seeds", "distinct_test_examples"} - set(record)
    if missing:
        raise ValueError(f"a verdict record needs {sorted(missing)}; make it with labkit.verdict (Verdict.record()).")
    name = record["name"]
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"verdict name {name!r} is not a plain name: use letters, digits and '_'.")
    problems = []
    if record["verdict"] not in VERDICTS:
        problems.append(f"verdict {record['verdict']!r} is not one of {', '.join(VERDICTS)}")
    interval = record["interval"]
    if not (isinstance(interval, (list, tuple)) and len(interval) == 2
            and all(bound is None or isinstance(bound, (int, float)) for bound in interval)):
        problems.append(f"interval {interval!r} is not [lo, hi]")
    elif None not in interval and interval[0] > interval[1]:
        problems.append(f"interval {interval!r} has lo > hi")
    if not isinstance(record["effect"], (int, float)) or not math.isfinite(record["effect"]):
        problems.append(f"effect {record['effect']!r} is not a finite number")
    if not isinstance(record["paired"], bool):
        problems.append(f"paired {record['paired']!r} is not true or false")
    if isinstance(record["seeds"], bool) or not isinstance(record["seeds"], int) or record["seeds"] < 1:
        problems.append(f"seeds {record['seeds']!r} is not a positive count")
    examples = record["distinct_test_examples"]
    if examples is not None and (isinstance(examples, bool) or not isinstance(examples, int) or examples < 1):
        problems.append(f"distinct_test_examples {examples!r} is neither None nor a positive count")
    if not problems and record["verdict"] in (WINS, LOSES):
        problems += _winner_problems(record)
    if not problems and record["verdict"] in (NON_INFERIOR, INFERIOR):
        problems += _margin_problems(record)
    if problems:
        raise ValueError(f"verdict {name}: " + "; ".join(problems) + ".")
    return record


def sentence_of(record, treatment, control) -> str:
    """The sentence for a verdict ``record`` (``Verdict.record()``, or an entry of results.json's "verdicts")."""
    said = _said(check_record(record), treatment, control)
    return (said[0].upper() if said[0].isascii() else said[0]) + said[1:]  # "α×0.2 ...", never "Α×0.2"


def _said(record, treatment, control):
    found, measure, margin = record["verdict"], record.get("measure") or "the measure", record.get("margin")
    lo, hi = record["interval"]
    cut = lo is not None and record.get("distinct_test_examples") is not None and (lo < -1 or hi > 1)
    if cut:  # a t-interval of few scattered seeds can reach past what two accuracies can differ by
        lo, hi = max(lo, -1.0), min(hi, 1.0)
    interval = ("no interval from single values" if lo is None else
                f"{record.get('confidence', CONFIDENCE):.0%} interval {_amount(lo, record, unit=False)} to "
                f"{_amount(hi, record, unit=False)}")
    if cut:
        interval += ", cut at ±100 points, the most two accuracies can differ by"
    if record.get("comparisons", 1) > 1 and lo is not None:
        interval += f", corrected for {record['comparisons']} comparisons"
    agreeing = ", every one agreeing" if found in (WINS, LOSES) else ""
    evidence = f"{_amount(record['effect'], record)} ({interval}; {_counted(record)}{agreeing})"
    within = f"the margin of {_amount(margin, record, signed=False)}" if margin is not None else ""
    if found == WINS:
        return f"{treatment} wins against {control} on {measure}: {evidence}."
    if found == LOSES:
        return f"{treatment} loses to {control} on {measure}: {evidence}."
    if found == NON_INFERIOR:
        return (f"{treatment} is non-inferior to {control} on {measure}: {evidence}; even the interval's worse "
                f"end stays within {within}.")
    if found == INFERIOR:
        return (f"{treatment} is inferior to {control} on {measure}: {evidence}; the whole interval is worse "
                f"than {within}.")
    reason = record.get("reason", "")
    if "floor" in reason:
        reason += (f" ({record['distinct_test_examples']:,} distinct test examples resolve "
                   f"{_amount(record['floor'], record, signed=False)})")
    if "margin" in reason and within:
        reason = reason.replace("the margin", within)
    return f"Cannot tell {treatment} from {control} on {measure}: {evidence}" + (f"; {reason}." if reason else ".")


def spreads_apart(values, others) -> int:
    """1 if every one of ``values`` is above every one of ``others``, -1 if every one is below, 0 if their spreads
    (lowest to highest) overlap; a tie at the edge overlaps."""
    if min(values) > max(others):
        return 1
    return -1 if max(values) < min(others) else 0


def mean_difference(treatment, control) -> tuple[float, float]:
    """The difference of the means of ``treatment`` and ``control`` and its standard error, from each group's
    variance between its seeds (Welch's; a group of one value adds none)."""
    treatment, control = (np.asarray(values, dtype=np.float64) for values in (treatment, control))
    variance_of_mean = [values.var(ddof=1) / len(values) if len(values) > 1 else 0.0 for values in (treatment, control)]
    return float(treatment.mean() - control.mean()), math.sqrt(sum(variance_of_mean))


def five_number_summary(values):
    """Median, quartiles and extremes (the spread) of a list of measurements."""
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return {"median": float(median), "q1": float(q1), "q3": float(q3),
            "min": float(min(values)), "max": float(max(values))}


def mean_and_range(values) -> tuple[float, float, float]:
    """The mean, lowest and highest of ``values`` (one per seed): what a table shows beside a verdict."""
    values = [float(value) for value in values]
    return float(np.mean(values)), min(values), max(values)


def _values(name, treatment, control, same_length=False):
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"verdict name {name!r} is not a plain name: use letters, digits and '_', "
                         "e.g. 'topk_vs_dense_accuracy'.")
    treatment, control = (np.asarray(values, dtype=np.float64).ravel() for values in (treatment, control))
    if min(len(treatment), len(control)) == 0 or np.isnan(treatment).any() or np.isnan(control).any():
        raise ValueError(f"{name}: a verdict needs values on both sides and no NaN (a diverged seed is reported "
                         f"as diverged, never ranked): got {treatment.tolist()} against {control.tolist()}.")
    if same_length and len(treatment) != len(control):
        raise ValueError(f"{name}: paired values come one per seed or block on each side, in the same order; "
                         f"got {len(treatment)} against {len(control)}.")
    return treatment, control


def _quantile(degrees_of_freedom, comparisons):
    if isinstance(comparisons, bool) or not isinstance(comparisons, (int, np.integer)) or comparisons < 1:
        raise ValueError(f"comparisons={comparisons!r}: give how many comparisons the notebook concludes, a whole "
                         "number, at least 1.")
    return float(stdtrit(degrees_of_freedom, 1 - (1 - CONFIDENCE) / (2 * comparisons)))


def _t_interval(values, comparisons):
    """The t-interval of the mean of ``values``; infinite with one value (nothing to estimate the spread by)."""
    if len(values) < 2:
        _quantile(1, comparisons)  # still refuses a bad number of comparisons
        return (-math.inf, math.inf)
    half = _quantile(len(values) - 1, comparisons) * values.std(ddof=1) / math.sqrt(len(values))
    return (float(values.mean() - half), float(values.mean() + half))


def _welch(treatment, control, comparisons):
    """The difference of the means and Welch's t-interval of it (infinite with one seed on a side)."""
    effect, standard_error = mean_difference(treatment, control)
    if min(len(treatment), len(control)) < 2:
        _quantile(1, comparisons)  # still refuses a bad number of comparisons
        return effect, (-math.inf, math.inf)
    if standard_error == 0:
        return effect, (effect, effect)
    shares = treatment.var(ddof=1) / len(treatment), control.var(ddof=1) / len(control)
    degrees = sum(shares) ** 2 / (shares[0] ** 2 / (len(treatment) - 1) + shares[1] ** 2 / (len(control) - 1))
    half = _quantile(degrees, comparisons) * standard_error
    return effect, (effect - half, effect + half)


def _floor(distinct_test_examples, treatment, control):
    if distinct_test_examples is None:
        return 0.0
    values = np.concatenate([treatment, control])
    if values.min() < 0 or values.max() > 1:
        raise ValueError(f"distinct_test_examples applies to accuracies in [0, 1], not to {values.tolist()}: "
                         "give distinct_test_examples=None for any other measure.")
    return resolution_floor(distinct_test_examples, float(values.mean()))


def _agreement(differences, higher_is_better):
    """(every pair's difference, or log ratio, lies on the better side; every one on the worse side)."""
    sign = 1 if higher_is_better else -1
    return bool((sign * differences > 0).all()), bool((sign * differences < 0).all())


def _too_few(count, counted):
    """CANNOT_TELL and why, with fewer than MIN_PAIRS values on a side; None with enough."""
    return (CANNOT_TELL, f"fewer than {MIN_PAIRS} {counted}") if count < MIN_PAIRS else None


def _decide(effect, interval, floor, higher_is_better, agreement, disagree, no_difference="a difference of 0"):
    """WINS, LOSES or CANNOT_TELL from enough values, and why it cannot tell; ``agreement`` is (every value on
    the better side, every value on the worse side)."""
    sign = 1 if higher_is_better else -1
    low, high = sorted(sign * bound for bound in interval)
    every_better, every_worse = agreement
    if abs(effect) < floor:
        return CANNOT_TELL, "below the resolution floor"
    if low > 0 and every_better:
        return WINS, ""
    if high < 0 and every_worse:
        return LOSES, ""
    if low <= 0 <= high:
        return CANNOT_TELL, "the interval includes " + no_difference
    return CANNOT_TELL, disagree


def _margin_problems(record):
    margin, (lo, hi) = record.get("margin"), record["interval"]
    if margin is None or lo is None:
        return [f"it says {record['verdict']} with no margin or no interval"]
    sign = 1 if record.get("higher_is_better", True) else -1
    worse, better = sorted((sign * lo, sign * hi))
    if record["verdict"] == NON_INFERIOR and not worse > -margin:
        return [f"it says non-inferior but the worse end of its interval {record['interval']} is beyond the "
                f"margin {margin:g}"]
    if record["verdict"] == INFERIOR and not better < -margin:
        return [f"it says inferior but its interval {record['interval']} reaches inside the margin {margin:g}"]
    return []


def _winner_problems(record):
    lo, hi = record["interval"]
    floor = record.get("floor", 0.0) or 0.0
    null = 1.0 if record.get("ratio") else 0.0
    problems = []
    if lo is None or not (lo > null or hi < null):
        problems.append(f"it says {record['verdict']} but its interval {record['interval']} includes "
                        f"{null:g} (no difference)")
    if not record.get("ratio") and abs(record["effect"]) < floor:
        problems.append(f"it says {record['verdict']} but its effect {record['effect']:.4g} is below the "
                        f"resolution floor {floor:.4g}")
    return problems


def _counted(record):
    """How many values the verdict rests on, in words: "3 paired seeds", "6 interleaved blocks"."""
    count, other, unit = record["seeds"], record.get("control_seeds"), record.get("unit", "seeds")

    def noun(number):
        return unit if number != 1 else unit.removesuffix("s")
    if record["paired"]:
        return f"{count} {'interleaved' if record.get('ratio') else 'paired'} {noun(count)}"
    if other in (None, count):
        return f"{count} unpaired {noun(count)} each"
    return f"{count} and {other} unpaired {noun(other)}"


def _amount(value, record, signed=True, unit=True):
    """``value`` as the record's measure shows it: a ratio (1.36×), points of accuracy (+1.2 points), a number."""
    sign = "+" if signed else ""
    if record.get("ratio"):
        return f"{value:.2f}×"
    if record.get("distinct_test_examples") is not None:
        return f"{value * 100:{sign}.1f}" + " points" * unit
    return f"{value:{sign},.3g}" if abs(value) < 1000 else f"{value:{sign},.0f}"


def _finite_or_none(value):
    return float(value) if math.isfinite(value) else None

