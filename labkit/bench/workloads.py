"""The models a benchmark trains, on real data: MNIST MLPs and the mini transformer LM."""
from dataclasses import dataclass, field

MODELS = {
    "mlp": "MNIST MLP, 128 hidden units",
    "wide-mlp": "MNIST MLP, 1024 hidden units",
    "lm": "mini transformer LM (2 layers, d_model 64) on Python's help text, 32-character windows",
}
MNIST_MODELS = ("mlp", "wide-mlp")
LM_SEQUENCE_LENGTH = 32


class Data:
    """The real data every workload trains on, loaded once per benchmark run."""

    def __init__(self, models):
        from labkit.data import load_mnist, load_text_corpus

        self.mnist = load_mnist() if set(models) & set(MNIST_MODELS) else None
        self.corpus = load_text_corpus() if "lm" in models else None


@dataclass
class Workload:
    """A compiled model, its input pipeline and (for MNIST) its test accuracy."""

    model: object
    dataset_fn: object  # () -> repeating tf.data.Dataset of (features, labels) batches
    evaluate: object    # () -> test accuracy, or None for the LM
    metrics: list = field(default_factory=list)


def workload(name, data, batch_size, steps_per_closure, seed=0):
    """Build model ``name`` (call it under ``strategy.scope()`` for a cluster) and its data."""
    import tensorflow as tf

    from labkit import models
    from labkit.pipelines import mnist_dataset_fn, next_token_windows

    tf.keras.utils.set_random_seed(seed)
    if name in MNIST_MODELS:
        mnist = data.mnist
        model = models.mnist_mlp(hidden_units=128 if name == "mlp" else 1024, steps_per_execution=steps_per_closure)
        return Workload(model, mnist_dataset_fn(mnist, batch_size, seed),
                        lambda: models.accuracy(model, mnist.x_test, mnist.y_test),
                        [tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
    corpus, sequence_length = data.corpus, LM_SEQUENCE_LENGTH
    model = models.mini_transformer_lm(len(corpus.vocabulary), sequence_length)
    model.compile(optimizer=tf.keras.optimizers.legacy.Adam(3e-3), loss=models.mean_cross_entropy,
                  steps_per_execution=steps_per_closure)
    return Workload(model, lambda: next_token_windows(corpus.train_ids, sequence_length, batch_size, seed),
                    lambda: None)

