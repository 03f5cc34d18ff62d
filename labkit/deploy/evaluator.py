"""``python -m labkit.deploy.evaluator``: a sidecar evaluator, its own process beside the training.

It watches a checkpoint directory, loads each new checkpoint into a local copy of
the MNIST model and evaluates it on the test set, so evaluation never slows the
cluster. It stops after the checkpoint of ``--until-step``. Keras'
``SidecarEvaluator`` does the watching; the checkpoints are those that
``labkit.recovery.train_with_recovery`` writes.
"""
import argparse
from pathlib import Path

import tensorflow as tf

from labkit import models
from labkit.runtime import children, loglines
from labkit.data import load_mnist


class PrintResult(tf.keras.callbacks.Callback):
    """One line per evaluated checkpoint: its training step and the test accuracy."""

    def on_test_end(self, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        print(loglines.evaluated_line(step, logs['accuracy']), flush=True)


def start(checkpoint_dir, until_step):
    """Start the evaluator as a child process; read its result lines from ``.stdout``.

    Its warnings and errors go to ``evaluator.log`` in ``checkpoint_dir``.
    """
    return children.start_program("labkit.deploy.evaluator", "--checkpoint-dir", str(checkpoint_dir),
                                  "--until-step", str(until_step), log_path=Path(checkpoint_dir) / "evaluator.log",
                                  read_stdout=True)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m labkit.deploy.evaluator", description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint-dir", required=True)
    parser.add_argument("--until-step", type=int, required=True,
                        help="stop after evaluating the checkpoint of this training step")
    args = parser.parse_args(argv)
    children.exit_with_parent_if_started_by_one()

    data = load_mnist()
    test_set = tf.data.Dataset.from_tensor_slices((data.x_test, data.y_test)).batch(256)
    tf.keras.utils.SidecarEvaluator(models.mnist_mlp(), test_set, args.checkpoint_dir,
                                    max_evaluations=args.until_step, callbacks=[PrintResult()]).start()


if __name__ == "__main__":
    main()
