"""``python -m labkit.deploy.coordinator``: the training program as its own process (the chief).

It reads its cluster from TF_CONFIG like any task, trains the MNIST MLP and
checkpoints as it goes, printing a timeline line per event. Killed and started
again, it resumes from the latest checkpoint instead of starting over.

``--loop custom`` (default) uses the recovery driver, ``labkit.recovery.train_with_recovery``
(without a restart: a parameter-server failure ends this program, and whoever runs it starts it again);
``--loop fit`` uses ``model.fit`` with the ``BackupAndRestore`` callback, which
resumes from the last completed epoch.

Where the workers' data comes from:

- ``--data-dir DIR``, storage every worker mounts (a cluster's shared volume): the chief
  writes the training set there once, one shard file per worker (``pipelines.shared_shards``),
  and each worker reads its own; only file names cross the network. The exports use it.
- ``--ship-arrays``: the arrays travel inside the traced dataset function to every task
  (for machines that share no disk; it costs the training set's size per task).
- neither: the workers read files this program writes on its own disk
  (``MNIST.training_files``), so every task must run on this machine.
"""
import argparse
from pathlib import Path

import tensorflow as tf

from labkit import models, recovery
from labkit.runtime import loglines, tfruntime
from labkit.runtime.children import exit_with_parent_if_started_by_one
from labkit.data import load_mnist
from labkit.pipelines import files_dataset_fn, mnist_dataset_fn, shared_shards

BATCH_SIZE = 64


class EpochLog(tf.keras.callbacks.Callback):
    """Prints when each epoch starts and ends, so a watcher sees where a resumed run picks up."""

    def on_epoch_begin(self, epoch, logs=None):
        print(loglines.epoch_started_line(epoch + 1), flush=True)

    def on_epoch_end(self, epoch, logs=None):
        print(loglines.epoch_finished_line(epoch + 1, logs["loss"]), flush=True)


def training_dataset_fn(data, num_workers, args):
    """The workers' ``dataset_fn`` from the route the flags choose (see the module docstring)."""
    if not args.data_dir:
        return mnist_dataset_fn(data, BATCH_SIZE, ship_arrays=args.ship_arrays)
    paths = shared_shards((data.x_train, data.y_train), args.data_dir, num_workers)
    print(loglines.shards_line(len(paths), Path(paths[0]).parent), flush=True)
    return files_dataset_fn(paths, num_workers, BATCH_SIZE)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m labkit.deploy.coordinator", description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint-dir", required=True)
    parser.add_argument("--loop", choices=("custom", "fit"), default="custom")
    parser.add_argument("--num-steps", type=int, default=600, help="custom loop: steps to train")
    parser.add_argument("--checkpoint-every", type=int, default=100, help="custom loop: steps per checkpoint")
    parser.add_argument("--epochs", type=int, default=6, help="fit: epochs")
    parser.add_argument("--steps-per-epoch", type=int, default=50, help="fit: steps per epoch")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--data-dir", help="a directory on storage every worker mounts: the training data is "
                                           "written there once, one shard file per worker, and each worker reads its own")
    source.add_argument("--ship-arrays", action="store_true",
                        help="send the training arrays to the workers inside the dataset function (for workers "
                             "that share no disk with this machine)")
    args = parser.parse_args(argv)
    exit_with_parent_if_started_by_one()

    data = load_mnist()
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    dataset_fn = training_dataset_fn(data, resolver.cluster_spec().num_tasks("worker"), args)
    if args.loop == "custom":
        report = recovery.train_with_recovery(
            lambda: recovery.mnist_job(resolver, data, batch_size=BATCH_SIZE, dataset_fn=dataset_fn),
            args.num_steps, recovery.Checkpoints(args.checkpoint_dir, args.checkpoint_every), echo=True,
            evaluate=lambda model: {"accuracy": models.accuracy(model, data.x_test, data.y_test)})
        accuracy = report.final_accuracy if report.accuracy else float("nan")
        print(loglines.finished_line(report.final_step, accuracy), flush=True)
    else:
        strategy = tfruntime.connect(resolver)
        with strategy.scope():
            model = models.mnist_mlp()
        fit_callbacks = [tf.keras.callbacks.BackupAndRestore(args.checkpoint_dir), EpochLog()]
        creator = tf.keras.utils.experimental.DatasetCreator(dataset_fn)
        model.fit(creator, epochs=args.epochs, steps_per_epoch=args.steps_per_epoch, callbacks=fit_callbacks, verbose=0)
        print(loglines.fit_finished_line(models.accuracy(model, data.x_test, data.y_test)), flush=True)


if __name__ == "__main__":
    main()
