"""labkit.ratings: planted ratings with a known noise floor, MovieLens's file read where a learner has one, and
the popularity baseline a recommender must beat."""
import numpy as np
import pytest

from labkit import ratings


def test_planted_ratings_are_reproducible_skewed_and_their_floor_is_the_noise():
    data = ratings.planted_ratings(num_users=50, num_items=2_000, train_ratings=5_000, test_ratings=1_000, seed=3)
    again = ratings.planted_ratings(num_users=50, num_items=2_000, train_ratings=5_000, test_ratings=1_000, seed=3)
    assert np.array_equal(data.train_ratings, again.train_ratings) and np.array_equal(data.test_items, again.test_items)
    assert len(data.train_ratings) == 5_000 and len(data.test_ratings) == 1_000
    assert data.noise_floor == pytest.approx(0.25)
    assert np.mean(data.train_items < 20) > 0.3  # the first 1 % of items are drawn far more than 1 % of the time
    assert data.train_users.max() < 50 and data.train_items.max() < 2_000
    assert "noise floor 0.250" in repr(data)
    with pytest.raises(ValueError, match="num_items must be a whole number >= 1"):
        ratings.planted_ratings(num_items=0)


def test_popularity_learns_item_means_and_the_best_model_reaches_the_noise_floor():
    data = ratings.planted_ratings(num_users=200, num_items=50, zipf_exponent=0.0, train_ratings=40_000,
                                   test_ratings=20_000, seed=1)
    overall = ratings.mean_squared_error(np.full(len(data.test_ratings), data.train_ratings.mean()), data)
    popularity = ratings.mean_squared_error(ratings.popularity_baseline(data)[data.test_items], data)
    assert popularity < overall  # each item's mean knows its bias
    assert popularity > data.noise_floor + 0.3  # but not the users' tastes


def test_distinct_test_pairs_count_each_user_item_pair_once():
    data = ratings.planted_ratings(num_users=2, num_items=3, train_ratings=10, test_ratings=200, seed=0)
    assert data.distinct_test_pairs <= 6


def test_movielens_is_read_from_its_u_data_renumbered_by_popularity(tmp_path):
    lines = ["196\t242\t3\t881250949", "186\t302\t3\t891717742", "22\t377\t1\t878887116", "244\t51\t2\t880606923",
             "166\t346\t1\t886397596", "298\t474\t4\t884182806", "115\t265\t2\t881171488", "253\t465\t5\t891628467",
             "305\t451\t3\t886324817", "6\t86\t3\t883603013", "62\t257\t2\t879372434", "286\t1014\t5\t879781125",
             "200\t222\t5\t876042340", "210\t40\t3\t891035994", "224\t29\t3\t888104457", "303\t785\t3\t879485318",
             "122\t387\t5\t879270459", "194\t274\t2\t879539794", "291\t1042\t4\t874834944", "234\t1184\t2\t892079237",
             "119\t392\t4\t886176814", "167\t486\t4\t892738452", "299\t144\t4\t877881320", "291\t118\t2\t874833878",
             "308\t1\t4\t887736532", "95\t546\t2\t879196566", "38\t95\t5\t892430094", "102\t768\t2\t883748450",
             "63\t277\t4\t875747401", "160\t234\t5\t876861185", "50\t246\t3\t877052329", "301\t98\t4\t882075827",
             "225\t193\t4\t879539727", "290\t88\t4\t880731963", "97\t194\t3\t884238860", "157\t274\t4\t886890835",
             "181\t1081\t1\t878962623", "278\t603\t5\t891295330", "276\t796\t1\t874791932", "7\t32\t4\t891350932"]
    folder = tmp_path / "ml-100k"
    folder.mkdir()
    (folder / "u.data").write_text("\n".join(lines) + "\n")
    data = ratings.movielens_ratings(folder, test_fraction=0.25)
    assert len(data.train_ratings) == 30 and len(data.test_ratings) == 10 and data.noise_floor is None
    items = [int(line.split()[1]) for line in lines]
    assert data.num_items == len(set(items)) and data.num_users == len({line.split()[0] for line in lines})
    renumbered = np.concatenate([data.train_items, data.test_items])
    assert np.sum(renumbered == 0) == max(items.count(item) for item in items)  # item 0: the most rated
    assert data.train_items.dtype == np.int64 and set(np.unique(np.concatenate([data.train_ratings, data.test_ratings]))) <= {1, 2, 3, 4, 5}
    with pytest.raises(FileNotFoundError, match="no MovieLens ratings at .*nowhere"):
        ratings.movielens_ratings(tmp_path / "nowhere")
    (tmp_path / "u.data").write_text("1\t2\t3\t4\n")
    with pytest.raises(ValueError, match="does not look like MovieLens"):
        ratings.movielens_ratings(tmp_path / "u.data")
