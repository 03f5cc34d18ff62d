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
                    "the shuffle seed (labkit.pipelines.shuffled_batches) or give each worker its own shard.")


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


def only_keras3_failed(keras2, keras3):
    """One program (two ``snippets.run_program`` results): it trained under Keras 2 and failed under Keras 3."""
    if keras2.returncode != 0:
        raise AssertionError(f"the program did not train under Keras 2 ({keras2}): fix it there first, "
                             "so that the Keras version is the only difference.")
    if keras3.returncode == 0 or keras3.timed_out:
        raise AssertionError(f"the program did not end with an error under Keras 3 ({keras3}): "
                             "was it run with keras=3 (TF_USE_LEGACY_KERAS=0)?")
