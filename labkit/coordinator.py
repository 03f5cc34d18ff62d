"""``python -m labkit.coordinator``: the training program as its own process (the chief).

It reads its cluster from TF_CONFIG like any task, trains the MNIST MLP and
checkpoints as it goes, printing a timeline line per event. Killed and started
again, it resumes from the latest checkpoint instead of starting over.

``--loop custom`` (default) uses ``labkit.faults.train_with_recovery``;
``--loop fit`` uses ``model.fit`` with the ``BackupAndRestore`` callback, which
resumes from the last completed epoch.
"""
import argparse

import labkit  # noqa: F401  (Keras 2 and GRPC_FAIL_FAST before TensorFlow loads)
import tensorflow as tf

from labkit import faults, models
from labkit.children import exit_with_parent_if_started_by_one
from labkit.data import load_mnist, mnist_dataset_fn


class EpochLog(tf.keras.callbacks.Callback):
    """Prints when each epoch starts and ends, so a watcher sees where a resumed run picks up."""

    def on_epoch_begin(self, epoch, logs=None):
        print(f"epoch {epoch + 1} started", flush=True)

    def on_epoch_end(self, epoch, logs=None):
        print(f"epoch {epoch + 1} finished, loss {logs['loss']:.4f}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m labkit.coordinator", description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint-dir", required=True)
    parser.add_argument("--loop", choices=("custom", "fit"), default="custom")
    parser.add_argument("--num-steps", type=int, default=600, help="custom loop: steps to train")
    parser.add_argument("--checkpoint-every", type=int, default=100, help="custom loop: steps per checkpoint")
    parser.add_argument("--epochs", type=int, default=6, help="fit: epochs")
    parser.add_argument("--steps-per-epoch", type=int, default=50, help="fit: steps per epoch")
    parser.add_argument("--ship-arrays", action="store_true",
                        help="send the training arrays to the workers inside the dataset function (for workers "
                             "on other machines, which cannot read this machine's files)")
    args = parser.parse_args(argv)
    exit_with_parent_if_started_by_one()

    data = load_mnist()
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if args.loop == "custom":
        report = faults.train_with_recovery(
            lambda: faults.mnist_job(resolver, data, ship_arrays=args.ship_arrays), args.num_steps, args.checkpoint_dir,
            args.checkpoint_every, echo=True,
            evaluate=lambda model: {"accuracy": models.accuracy(model, data.x_test, data.y_test)})
        accuracy = report.final_accuracy if report.accuracy else float("nan")
        print(f"finished at step {report.final_step} with test accuracy {accuracy:.4f}", flush=True)
    else:
        strategy = tf.distribute.ParameterServerStrategy(resolver)
        with strategy.scope():
            model = models.mnist_mlp()
        fit_callbacks = [tf.keras.callbacks.BackupAndRestore(args.checkpoint_dir), EpochLog()]
        creator = tf.keras.utils.experimental.DatasetCreator(mnist_dataset_fn(data, batch_size=64, ship_arrays=args.ship_arrays))
        model.fit(creator, epochs=args.epochs, steps_per_epoch=args.steps_per_epoch, callbacks=fit_callbacks, verbose=0)
        print(f"finished with test accuracy {models.accuracy(model, data.x_test, data.y_test):.4f}", flush=True)


if __name__ == "__main__":
    main()
