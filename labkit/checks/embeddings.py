"""Checks of notebook 11 and exercise 6: embedding tables on parameter servers, their memory, traffic and hot keys."""
import numpy as np

from labkit.checks.core import require
from labkit.verdict import WINS


def lookup_matches(rows, expected):
    """A lookup returned the rows TensorFlow's ``tf.nn.embedding_lookup`` returns for the same table and ids."""
    rows, expected = np.asarray(rows), np.asarray(expected)
    require(rows.shape == expected.shape, f"the lookup returned shape {rows.shape}, TensorFlow's {expected.shape}: "
                                          "one row per id, in the ids' shape.")
    require(np.allclose(rows, expected), "the lookup returned other rows than tf.nn.embedding_lookup: does each id "
                                         "find its shard (shard_of) and its row within that shard, and come back "
                                         "in the ids' order?")


def spread_is_a_permutation(spread, rows):
    """``spread(ids, rows)`` maps the ids 0 .. rows - 1 onto the rows 0 .. rows - 1, each row once: no two ids share a row."""
    placed = np.asarray(spread(np.arange(rows, dtype=np.int64), rows)).ravel()
    require(len(placed) == rows, f"spread returned {len(placed)} rows for {rows} ids: one row per id.")
    outside = placed[(placed < 0) | (placed >= rows)]
    require(len(outside) == 0, f"spread put ids in rows outside the table (0 to {rows - 1}), e.g. {outside[:3].tolist()}.")
    shared = rows - len(np.unique(placed))
    require(shared == 0, f"spread is not a permutation: {shared:,} of {rows:,} rows hold two or more ids, whose items "
                         "would then share one learned row. Multiply by a number that shares no factor with rows "
                         "(a large prime), then take the remainder.")


def line_predicts(line, rows, measured_mb, role, tolerance=0.1):
    """A fitted ``MemoryLine`` predicts a point it was not fitted on within ``tolerance`` (a share of the measured MB)."""
    predicted = line.predict(rows)
    require(abs(predicted - measured_mb) <= tolerance * measured_mb,
            f"the {role}'s memory line predicts {predicted:,.0f} MB at {rows:,} rows, but {measured_mb:,.0f} MB were "
            f"measured there (more than {tolerance:.0%} apart): its memory does not grow in a line here, so no "
            "prediction from it can be trusted. Re-run the memory cells on a quieter machine, or with larger added_table_rows.")


def held_where_expected(lines, row_bytes, num_ps):
    """Per million rows, each parameter server grows by at least half its share of the rows (``row_bytes`` each,
    the row and its optimizer state), and an all-reduce worker by at least most of all of them. Half, not all:
    a table may land in memory its process freed earlier, and PSS moves with the other processes that map the
    same libraries, so a server's fitted slope scatters around its share from run to run; one without the rows
    grows by none of it."""
    share_mb = row_bytes / num_ps  # MB per million rows on each server
    grows = {role: line.mb_per_million_rows for role, line in lines.items()}
    require(grows["parameter server"] >= 0.5 * share_mb,
            f"each parameter server grew {grows['parameter server']:.1f} MB per million rows, less than half its share "
            f"of the rows ({share_mb:.1f} MB): are the tables split over all {num_ps} servers (the partitioner)?")
    require(grows["all-reduce worker"] >= 0.8 * row_bytes,
            f"an all-reduce worker grew {grows['all-reduce worker']:.1f} MB per million rows, less than the rows "
            f"themselves ({row_bytes} MB): every all-reduce worker holds the whole table and its optimizer state.")


def workers_hold_no_rows(grown_mb, allreduce_grown_mb, most=0.15):
    """As tables were added, a worker of the parameter servers grew by at most ``most`` of what an all-reduce worker, which
    holds every row, grew by (it still gains each model's functions and datasets)."""
    require(grown_mb <= most * allreduce_grown_mb,
            f"a worker of the parameter servers grew {grown_mb:,.0f} MB as tables were added, more than {most:.0%} of the "
            f"{allreduce_grown_mb:,.0f} MB an all-reduce worker grew by holding the tables: it should hold no rows.")


def allreduce_refused(refused, predicted_mb, budget_mb):
    """The all-reduce run was refused exactly when its predicted memory exceeded the budget."""
    if predicted_mb > budget_mb:
        require(refused, f"all-reduce was predicted at {predicted_mb:,.0f} MB per worker, over the {budget_mb:,.0f} MB "
                         "budget, yet not refused: refuse_over_budget must stop it before it starts.")
    else:
        require(not refused, f"all-reduce was refused although predicted at {predicted_mb:,.0f} MB per worker, within "
                             f"the {budget_mb:,.0f} MB budget.")


def within_budget(memory_mb, budget_mb):
    """Every task process (parameter servers and workers) used at most ``budget_mb``."""
    over = {task: round(mb) for task, mb in memory_mb.items() if mb > budget_mb}
    require(not over, f"over the {budget_mb:,.0f} MB budget: {over}. Use more parameter servers, or fewer rows.")


def beats_popularity(record, gains, min_gain):
    """The recommender's verdict against popularity is a win, and where the noise floor is known every seed closed at
    least ``min_gain`` of the gap between popularity and the best possible (``gains``, one per seed)."""
    require(record["verdict"] == WINS, f"the recommender did not beat popularity by a verdict every seed allows "
                                       f"({record['verdict']}): train longer (train_steps), or check the learning rate.")
    short = [f"{gain:.0%}" for gain in gains if gain < min_gain]
    require(not short, f"the recommender closed only {', '.join(short)} of the gap to the best possible on some seeds, "
                       f"below the {min_gain:.0%} this check asks: train longer (train_steps).")


def bytes_follow_distinct_ids(vocabulary_ratio, ids_ratio, distinct_ratio, tolerance=0.15):
    """A table 4x larger moved about the same bytes per step; 4x the ids per batch moved about as many times the
    bytes as it had distinct ids."""
    require(abs(vocabulary_ratio - 1) <= tolerance,
            f"a table four times larger moved {vocabulary_ratio:.2f}x the bytes per step: a lookup should move the rows "
            "a batch touches, whatever the table's size. Does the lookup gather rows, or read whole shards?")
    require(abs(ids_ratio / distinct_ratio - 1) <= tolerance,
            f"four times the ids moved {ids_ratio:.2f}x the bytes, but the batches had {distinct_ratio:.2f}x the "
            "distinct ids: the bytes should follow the distinct ids.")


def bytes_near_prediction(measured, predicted, low=1.0, high=1.5):
    """The bytes measured on the servers' sockets per step are at least the predicted rows and ids, and at most
    ``high`` times them (RPC framing and the small dense variables come on top)."""
    require(low * predicted <= measured <= high * predicted,
            f"measured {measured:,.0f} bytes per step on the servers' sockets, predicted {predicted:,.0f} bytes of rows "
            f"and ids: outside {low:g}x to {high:g}x. Is every distinct id asked for once (tf.unique in lookup)?")


def spreading_cooled_the_hot_server(record, before, after, num_ps, slack=0.1):
    """Spreading won by its verdict, and the busiest server's share fell from ``before`` to at most 1 / num_ps + slack."""
    require(record["verdict"] == WINS, f"spreading the ids did not lower the busiest server's share by a verdict every "
                                       f"block allows ({record['verdict']}; {before:.0%} -> {after:.0%}).")
    require(after <= 1 / num_ps + slack, f"after spreading the busiest server still carried {after:.0%} of the load, "
                                         f"more than {1 / num_ps + slack:.0%} ({num_ps} servers and {slack:.0%} slack).")


def more_servers_fewer_bytes(busiest_by_count):
    """The busiest server's load falls with every server added, and with the most servers it is at most 60 % of one
    server's alone."""
    counts = sorted(busiest_by_count)
    loads = [busiest_by_count[count] for count in counts]
    require(all(later < earlier for earlier, later in zip(loads, loads[1:])),
            f"the busiest server's load did not fall with every server added: {dict(zip(counts, loads))}.")
    require(loads[-1] <= 0.6 * loads[0], f"over {counts[-1]} servers the busiest still carried {loads[-1] / loads[0]:.0%} "
                                         "of what one server carried alone: is the table split over all of them?")


def hot_share_within(shares, bound):
    """The busiest server's share of the load (``shares``: server -> share, e.g. ``Load.shares``) is at most ``bound``."""
    server = max(shares, key=shares.get)
    require(shares[server] <= bound, f"{server} still carried {shares[server]:.0%} of the load, more than {bound:.0%}: "
                                     "the popular ids still land together. Spread them over the whole table.")


def used_own_spread(model, spread):
    """The model's item table places its ids with ``spread`` (the learner's function, not the kit's or none)."""
    placed_by = model.get_layer("item_table").spread_ids
    require(placed_by is spread, f"the model's item table places its ids with {getattr(placed_by, '__name__', placed_by)!r}, "
                                 f"not with {spread.__name__}: build the load with spread_ids={spread.__name__}.")
