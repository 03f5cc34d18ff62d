"""Checks of notebook 02 (the strategy and MNIST)."""
import numpy as np


def workers_see_different_batches(first_batches):
    """``first_batches`` ({worker: labels}, from ``train.first_batches``) differ between every two workers."""
    workers = sorted(first_batches)
    if len(workers) < 2:
        raise AssertionError(f"need the first batches of at least 2 workers, got workers {workers}.")
    for index, first in enumerate(workers):
        for second in workers[index + 1:]:
            if np.array_equal(first_batches[first], first_batches[second]):
                raise AssertionError(
                    f"workers {first} and {second} read the same first batch {list(first_batches[first])}: "
                    "the dataset_fn gives every worker the same stream. Fold the worker index into "
                    "the shuffle seed (labkit.data.shuffled_batches) or give each worker its own shard.")


def fit_ran_every_input(steps_by_input, steps_per_epoch):
    """``model.fit`` ran ``steps_per_epoch`` steps for every kind of input in ``steps_by_input``."""
    wrong = {kind: steps for kind, steps in steps_by_input.items() if steps != steps_per_epoch}
    if wrong:
        raise AssertionError(f"expected {steps_per_epoch} steps for every input, got {wrong}.")


def waited_in_the_strategy(result):
    """A snippet program (``snippets.run_program``) reached the strategy's constructor and waited there."""
    output = result.output
    if "creating the strategy" not in output:
        raise AssertionError(f"the program never reached the strategy ({result}): it failed or was "
                             "stopped earlier, e.g. while importing TensorFlow; give it more time.")
    if "connected" in output or "still creating the strategy" not in output:
        raise AssertionError(f"the program did not wait in ParameterServerStrategy(...): {result}")
