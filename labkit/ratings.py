"""Ratings for the recommendation lab: users rate items, a few items are very popular, most are rare.

``planted_ratings`` makes them from a known model (``Tastes``), so a check can say how close a trained model
gets to the best possible: each user and item has ``factors`` hidden tastes, each item a hidden bias, and

    rating = item bias + strength * (user tastes . item tastes) + noise,   noise ~ N(0, noise_sd^2)

No model can predict the noise, so the best possible mean squared error on held-out ratings is
``noise_sd ** 2`` (the *noise floor*). Items are numbered by popularity: item 0 is drawn most often,
with probability falling as a power (Zipf's law, ``zipf_exponent``), as real item popularity does.

``movielens_ratings`` reads a MovieLens ``u.data`` file (ml-100k) where the learner has one: its licence
forbids redistribution, so the kit ships none. Its noise floor is unknown.

``popularity_baseline`` is what a recommender must beat: each item's mean training rating, shrunk
towards the overall mean for items seen rarely (the overall mean for items never seen).
"""
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from labkit.data import array_file


@dataclass
class Ratings:
    """(user, item, rating) triples for training and for held-out evaluation, one array each."""

    train_users: np.ndarray
    train_items: np.ndarray
    train_ratings: np.ndarray
    test_users: np.ndarray
    test_items: np.ndarray
    test_ratings: np.ndarray
    num_users: int
    num_items: int
    noise_floor: float | None  # the best possible held-out MSE; None where the data's is unknown
    source: str

    def __post_init__(self):
        for array in (self.train_users, self.train_items, self.train_ratings,
                      self.test_users, self.test_items, self.test_ratings):
            array.flags.writeable = False  # named by content once by array_file

    def training_files(self):
        """(users, items, ratings) as ArrayFiles, written on first use: a ``dataset_fn`` reads them on the worker."""
        return tuple(array_file(array) for array in (self.train_users, self.train_items, self.train_ratings))

    @property
    def distinct_test_pairs(self):
        """How many distinct (user, item) pairs the held-out ratings have: what a verdict on them rests on."""
        return len(np.unique(self.test_users.astype(np.int64) * self.num_items + self.test_items))

    def __repr__(self):
        floor = "unknown" if self.noise_floor is None else f"{self.noise_floor:.3f}"
        return (f"Ratings from {self.source}: {len(self.train_ratings):,} training and {len(self.test_ratings):,} "
                f"held-out ratings of {self.num_items:,} items by {self.num_users:,} users; noise floor {floor}")


@dataclass(frozen=True)
class Tastes:
    """The planted model: how many hidden tastes, how strongly they decide a rating, the spread of the items'
    biases and of the noise (whose variance is the noise floor)."""

    factors: int = 4
    strength: float = 2.0
    item_bias_sd: float = 0.5
    noise_sd: float = 0.5


def zipf_probabilities(num_items, exponent):
    """p(item k) proportional to (k + 1) ** -exponent: item 0 the most popular (exponent 0: all equal)."""
    weights = np.arange(1, num_items + 1, dtype=np.float64) ** -float(exponent)
    return weights / weights.sum()


def planted_ratings(num_users=1_000, num_items=100_000, zipf_exponent=1.1, train_ratings=200_000,
                    test_ratings=20_000, seed=0, tastes=Tastes()):
    """Ratings drawn from a known model, ``tastes`` (see the module docstring); the same ``seed``, the same ratings."""
    for name, value in (("num_users", num_users), ("num_items", num_items), ("factors", tastes.factors),
                        ("train_ratings", train_ratings), ("test_ratings", test_ratings)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}.")
    rng = np.random.default_rng(seed)
    user_tastes = rng.normal(0, 1 / np.sqrt(tastes.factors), (num_users, tastes.factors))
    item_tastes = rng.normal(0, 1 / np.sqrt(tastes.factors), (num_items, tastes.factors))
    item_bias = rng.normal(0, tastes.item_bias_sd, num_items)
    count = train_ratings + test_ratings
    items = rng.choice(num_items, count, p=zipf_probabilities(num_items, zipf_exponent))
    users = rng.integers(0, num_users, count)
    ratings = (item_bias[items] + tastes.strength * np.einsum("nf,nf->n", user_tastes[users], item_tastes[items])
               + rng.normal(0, tastes.noise_sd, count))
    return _split(users, items, ratings, train_ratings, num_users, num_items, tastes.noise_sd ** 2,
                  f"planted tastes (seed {seed}, Zipf exponent {zipf_exponent})")


def movielens_ratings(path, test_fraction=0.1, seed=0):
    """MovieLens ratings from ``path``: an ml-100k ``u.data`` file, or the folder holding it (tab-separated
    user, item, rating, time). Ids are renumbered from 0, items by popularity; a random ``test_fraction`` is held out."""
    path = Path(path)
    path = path / "u.data" if path.is_dir() else path
    if not path.is_file():
        raise FileNotFoundError(f"no MovieLens ratings at {path}: give the ml-100k folder (with u.data) or the "
                                "u.data file itself, or leave movielens_dir = None to use the planted ratings.")
    table = np.loadtxt(path, dtype=np.int64, usecols=(0, 1, 2), ndmin=2)
    if table.shape[1] != 3 or len(table) < 10:
        raise ValueError(f"{path} does not look like MovieLens's u.data (user, item, rating, time per line).")
    users = np.unique(table[:, 0], return_inverse=True)[1]
    item_ids, item_index, item_counts = np.unique(table[:, 1], return_inverse=True, return_counts=True)
    by_popularity = np.empty(len(item_ids), np.int64)
    by_popularity[np.argsort(-item_counts, kind="stable")] = np.arange(len(item_ids))
    order = np.random.default_rng(seed).permutation(len(table))
    train = len(table) - max(1, int(round(test_fraction * len(table))))
    return _split(users[order], by_popularity[item_index][order], table[order, 2].astype(np.float64), train,
                  int(users.max()) + 1, len(item_ids), None, f"MovieLens ({path})")


def _split(users, items, ratings, train, num_users, num_items, noise_floor, source):
    users, items, ratings = users.astype(np.int64), items.astype(np.int64), ratings.astype(np.float32)
    return Ratings(users[:train], items[:train], ratings[:train], users[train:], items[train:], ratings[train:],
                   num_users, num_items, noise_floor, source)


def popularity_baseline(ratings, shrinkage=5.0):
    """Each item's predicted rating: its mean training rating, shrunk towards the overall mean by
    ``shrinkage`` pretend ratings (an item seen once is not trusted as much as one seen a thousand times)."""
    overall = float(np.mean(ratings.train_ratings))
    counts = np.bincount(ratings.train_items, minlength=ratings.num_items)
    sums = np.bincount(ratings.train_items, weights=ratings.train_ratings, minlength=ratings.num_items)
    return (sums + shrinkage * overall) / (counts + shrinkage)


def mean_squared_error(predicted, ratings):
    """Mean squared error of ``predicted`` against the held-out ``ratings.test_ratings``."""
    return float(np.mean((np.asarray(predicted, np.float64) - ratings.test_ratings) ** 2))
