"""Models for the labs, built with tf.keras (Keras 2 via tf_keras, see labkit/__init__)."""
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from labkit.data import token_windows


def mnist_mlp(hidden_units=128, learning_rate=1e-3, steps_per_execution=1):
    """A small compiled MLP for MNIST vectors; build it under ``strategy.scope()`` for PS training.

    ``steps_per_execution`` packs that many training steps into each function the
    coordinator schedules on a worker, so per-step dispatch overhead is paid once per pack.
    """
    model = tf.keras.Sequential([
        tf.keras.Input(shape=(784,)),
        tf.keras.layers.Dense(hidden_units, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    model.compile(
        optimizer=tf.keras.optimizers.legacy.Adam(learning_rate),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        steps_per_execution=steps_per_execution,
    )
    return model


def restart_mnist_mlp(model, seed):
    """Set an ``mnist_mlp`` to the initial weights a new one built with seed ``seed`` starts from.

    Layer by layer (``assign``), so it also works where a kernel is split over parameter servers
    (a ShardedVariable takes the whole value).
    """
    tf.keras.utils.set_random_seed(seed)
    for layer, initial in zip(model.layers, mnist_mlp().layers):  # its Dense layers
        layer.kernel.assign(initial.kernel)
        layer.bias.assign(initial.bias)


def item_embedding_classifier(rows, dim=16, ids_per_example=8):
    """A recommendation-style model: a large embedding table (``rows`` x ``dim``) and a small head.

    Each step reads only the rows of the ids in its batch, so the table's gradient is sparse
    (``tf.IndexedSlices``: the touched rows and their ids). Two logits per example. Not compiled.
    """
    ids = tf.keras.Input(shape=(ids_per_example,), dtype="int64", name="item_ids")
    x = tf.keras.layers.Embedding(rows, dim, name="item_embedding")(ids)
    x = tf.keras.layers.Flatten()(x)
    logits = tf.keras.layers.Dense(2, name="logits")(x)
    return tf.keras.Model(ids, logits, name="item_embedding_classifier")


class PositionEmbedding(tf.keras.layers.Layer):
    """Adds a learned vector to each position of a (batch, positions, features) input."""

    def build(self, input_shape):
        self.positions = self.add_weight(name="positions", shape=tuple(input_shape[1:]),
                                         initializer="uniform", trainable=True)

    def call(self, inputs):
        return inputs + self.positions


def mini_transformer_lm(vocab_size, sequence_length, d_model=64, num_heads=4, num_layers=2, ffn_units=128):
    """The source tutorial's transformer language model, scaled down for 2 CPU cores and corrected.

    embedding (+ positions) -> num_layers x [causal self-attention + LayerNorm, FFN + LayerNorm]
    -> logits over the vocabulary for the NEXT token at every position. Not compiled.
    """
    tokens = tf.keras.Input(shape=(sequence_length,), dtype="int32", name="tokens")
    x = tf.keras.layers.Embedding(vocab_size, d_model, name="token_embedding")(tokens)
    # The source has no positions. Unmasked attention cannot tell word order; masked attention could work it
    # out, with effort. A learned vector per position makes order direct and cheap to learn.
    x = PositionEmbedding(name="position_embedding")(x)
    for layer in range(num_layers):
        # use_causal_mask: position t may only look at positions <= t. The source omits it,
        # so its model could read the very token it is asked to predict.
        attention = tf.keras.layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=d_model // num_heads, name=f"attention_{layer}")(
            x, x, use_causal_mask=True)
        x = tf.keras.layers.LayerNormalization(name=f"attention_norm_{layer}")(x + attention)
        hidden = tf.keras.layers.Dense(ffn_units, activation="relu", name=f"ffn_in_{layer}")(x)
        ffn = tf.keras.layers.Dense(d_model, name=f"ffn_out_{layer}")(hidden)
        x = tf.keras.layers.LayerNormalization(name=f"ffn_norm_{layer}")(x + ffn)
    logits = tf.keras.layers.Dense(vocab_size, name="next_token_logits")(x)
    return tf.keras.Model(tokens, logits, name="mini_transformer_lm")


def model_bytes(model):
    """M: bytes of the trainable parameters (float32), what a worker pulls (and pushes as gradients) per step."""
    return sum(4 * v.shape.num_elements() for v in model.trainable_variables)


def mean_cross_entropy(labels, logits):
    """Mean cross-entropy of integer labels against logits, over every position of the batch.

    The loss for MNIST digits, and for a language model's next-token predictions.
    """
    return tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))


def accuracy(model, x, y):
    """Fraction of ``x`` classified as ``y``, computed on this process with the PS's current variables."""
    predictions = np.argmax(model(x).numpy(), axis=1)
    return float(np.mean(predictions == y))


def perplexity(model, ids, sequence_length, max_windows=512):
    """exp(mean next-token cross-entropy) over up to ``max_windows`` windows of ``ids``.

    A model that guesses uniformly over V tokens has perplexity V; lower is better.
    """
    return float(np.exp(np.mean(cross_entropies(model, token_windows(ids, sequence_length, max_windows)))))


def cross_entropies(model, windows):
    """Each window's mean next-token cross-entropy (nats per token) under ``model``: its tokens but the last
    in, every token but the first predicted."""
    return np.concatenate([tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
        batch[:, 1:], model(batch[:, :-1]), from_logits=True), axis=1).numpy()
        for batch in np.array_split(windows, max(1, len(windows) // 64))])


def block_perplexities(window_cross_entropies, blocks):
    """exp(mean cross-entropy) of each of ``blocks`` runs of consecutive windows: one perplexity per stretch
    of the text, for a comparison paired stretch by stretch (``labkit.verdict.paired``)."""
    if not 1 <= blocks <= len(window_cross_entropies):
        raise ValueError(f"blocks={blocks}: split the {len(window_cross_entropies)} windows into 1 to "
                         f"{len(window_cross_entropies)} blocks.")
    return [float(np.exp(np.mean(block))) for block in np.array_split(np.asarray(window_cross_entropies), blocks)]


COUNT_MODELS = {"uniform": 0, "unigram": 1, "bigram": 2, "trigram": 3, "fourgram": 4}  # name: n of the n-gram


@dataclass(frozen=True)
class CountModel:
    """A count model's validation perplexity, and the add-k ``smoothing`` its counts got (None: uniform);
    ``cross_entropies``: each validation window's mean cross-entropy (nats per token)."""

    n: int
    smoothing: float | None
    perplexity: float
    cross_entropies: tuple


def count_models(corpus, sequence_length, max_windows=512, smoothings=(1, 0.1, 0.01, 0.001)):
    """The ladder of count models, scored on the same validation windows as ``perplexity``: {name: CountModel}.

    uniform: every token equally likely (perplexity = vocabulary size). An n-gram (unigram: n = 1)
    predicts a token from how often it followed the n - 1 tokens before it in the training text.
    Each n-gram takes the k of ``smoothings`` that best predicts the last 10 % of the training text
    from the counts of the rest: the validation text does not choose it.
    """
    size, train_ids = len(corpus.vocabulary), np.asarray(corpus.train_ids)
    split = int(0.9 * len(train_ids))
    held_out = token_windows(train_ids[split:], sequence_length, max_windows)
    windows = token_windows(corpus.validation_ids, sequence_length, max_windows)
    ladder = {"uniform": CountModel(0, None, float(size), (float(np.log(size)),) * len(windows))}
    for name, n in list(COUNT_MODELS.items())[1:]:
        smoothing = min(smoothings, key=lambda k: ngram_perplexity(train_ids[:split], held_out, n, k, size))
        per_window = ngram_cross_entropies(train_ids, windows, n, smoothing, size)
        ladder[name] = CountModel(n, smoothing, float(np.exp(np.mean(per_window))), tuple(per_window.tolist()))
    return ladder


def ngram_perplexity(train_ids, windows, n, smoothing, vocab_size):
    """Perplexity of an add-``smoothing`` n-gram counted on ``train_ids``, on every token of ``windows`` but the first.

    p(token | context) = (count(context, token) + k) / (count(context) + k * vocab_size): an unseen
    sequence is unlikely, never impossible. A token's context is the n - 1 tokens before it within
    its window (fewer at the window's start), what the transformer sees of them.
    """
    return float(np.exp(np.mean(ngram_cross_entropies(train_ids, windows, n, smoothing, vocab_size))))


def ngram_cross_entropies(train_ids, windows, n, smoothing, vocab_size):
    """Each window's mean cross-entropy (nats per token) under the n-gram of ``ngram_perplexity``."""
    train_ids = np.asarray(train_ids)
    counts_with_token = {context: _sequence_counts(train_ids, context + 1, vocab_size) for context in range(n)}
    counts_of_context = {context: _sequence_counts(train_ids[:-1], context, vocab_size)  # a token follows each
                         for context in range(n)}
    log_probabilities = []
    for position in range(1, windows.shape[1]):
        context = min(n - 1, position)
        sequences = windows[:, position - context: position + 1]
        numerator = _count_of(counts_with_token[context], sequences, vocab_size) + smoothing
        denominator = _count_of(counts_of_context[context], sequences[:, :-1], vocab_size) + smoothing * vocab_size
        log_probabilities.append(np.log(numerator / denominator))
    return -np.mean(log_probabilities, axis=0)


def _sequence_counts(ids, length, vocab_size):
    """The sequences of ``length`` consecutive ``ids`` as codes (sorted, each once) and how often each occurs."""
    sequences = np.lib.stride_tricks.sliding_window_view(ids, length)
    return np.unique(_codes(sequences, vocab_size), return_counts=True)


def _count_of(counts, sequences, vocab_size):
    """How often each row of ``sequences`` occurs in ``counts`` (from ``_sequence_counts``)."""
    codes, numbers = counts
    wanted = _codes(sequences, vocab_size)
    index = np.minimum(np.searchsorted(codes, wanted), len(codes) - 1)
    return np.where(codes[index] == wanted, numbers[index], 0)


def _codes(sequences, vocab_size):
    """Each row of token ids as one integer: its ids as the digits of a number in base ``vocab_size``."""
    return sequences.astype(np.int64) @ vocab_size ** np.arange(sequences.shape[1] - 1, -1, -1, dtype=np.int64)


def generate(model, corpus, prompt, length, sequence_length, temperature=0.8, seed=0):
    """Continue ``prompt`` by ``length`` characters, sampling one next character at a time.

    The model runs as one traced graph (a window of the same shape each time): called eagerly,
    layer by layer, it would cost about 20 times as long per character.
    """
    rng = np.random.default_rng(seed)
    ids = list(corpus.encode(prompt))
    next_logits = tf.function(model, input_signature=[tf.TensorSpec((1, sequence_length), tf.int32)])
    for _ in range(length):
        context = ids[-sequence_length:]
        window = np.zeros((1, sequence_length), dtype="int32")
        window[0, : len(context)] = context  # right padding is harmless: attention is causal
        logits = next_logits(window)[0, len(context) - 1].numpy().astype("float64") / temperature
        probabilities = np.exp(logits - logits.max())
        ids.append(int(rng.choice(len(probabilities), p=probabilities / probabilities.sum())))
    return corpus.decode(ids)
