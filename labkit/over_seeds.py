"""One result over several seeds, summarised: the mean and range of the final test accuracies, and how
much more accurate one group of runs is than another, with the standard error of that difference.

Which group wins is ``labkit.verdict``'s to say (its spread is the range of every seed); these numbers
are what a table or a plot shows beside it. A run is a ``train.TrainingLog`` (or a lab's subclass).
"""
import numpy as np


def accuracy_mean_and_range(runs):
    """The final test accuracies of ``runs`` (one per seed): their mean, lowest and highest."""
    accuracies = [r.final_accuracy for r in runs]
    return float(np.mean(accuracies)), min(accuracies), max(accuracies)


def mean_difference(runs, others):
    """How much more accurate ``runs`` are than ``others`` on average, and the standard error of that
    difference from the variance between their seeds (0 with one seed each): test accuracy on a
    finite test set and a seed's luck both move each run."""
    def accuracies(group):
        return np.array([r.final_accuracy for r in group], dtype=np.float64)

    def variance_of_mean(values):
        return values.var(ddof=1) / len(values) if len(values) > 1 else 0.0
    mine, theirs = accuracies(runs), accuracies(others)
    return float(mine.mean() - theirs.mean()), float(np.sqrt(variance_of_mean(mine) + variance_of_mean(theirs)))
