"""Where a model's variables live: which parameter server holds which shard, and how many bytes.

With ``ParameterServerStrategy(resolver, variable_partitioner=...)`` a large
variable is split along its first axis into shards ("name/part_0", "name/part_1",
...), each placed on a PS in turn, so no single PS must hold or serve all of it.
``tf.distribute.experimental.partitioners.MinSizePartitioner`` shards only
variables above a size; ``FixedShardsPartitioner`` splits every variable.
Keras lists each shard as its own variable in ``model.variables``.
"""
import re
from collections import defaultdict

import numpy as np

_SHARD_SUFFIX = re.compile(r"/part_(\d+)(:\d+)?$")


def task_of(device):
    """ "/job:ps/replica:0/task:1/device:CPU:0" -> "ps:1" """
    match = re.search(r"/job:(\w+)/replica:\d+/task:(\d+)", device)
    return f"{match.group(1)}:{match.group(2)}" if match else device


def _pieces(variables):
    """(variable name, shard index, shard) for every shard of every variable."""
    for variable in variables:
        for shard in getattr(variable, "variables", [variable]):  # a ShardedVariable's shards
            match = _SHARD_SUFFIX.search(shard.name)
            name = shard.name[: match.start()] if match else shard.name.rsplit(":", 1)[0]
            yield name, int(match.group(1)) if match else 0, shard


def placement(variables):
    """One row per shard: variable, shard index, task holding it, shape, bytes."""
    return [{"variable": name, "shard": index, "task": task_of(shard.device), "shape": tuple(shard.shape),
             "bytes": shard.shape.num_elements() * shard.dtype.size}
            for name, index, shard in _pieces(variables)]


def bytes_per_task(variables):
    """Total bytes of variables held by each task, e.g. {"ps:0": 51200, "ps:1": 51200}."""
    totals = defaultdict(int)
    for row in placement(variables):
        totals[row["task"]] += row["bytes"]
    return dict(sorted(totals.items()))


def format_placement(variables):
    """``placement()`` as a printable table, with the bytes each task holds."""
    lines = [f"{'variable':<36} {'shard':>5}  {'task':<6} {'shape':<12} {'bytes':>9}"]
    for row in placement(variables):
        lines.append(f"{row['variable']:<36} {row['shard']:>5}  {row['task']:<6} "
                     f"{str(row['shape']):<12} {row['bytes']:>9,}")
    totals = ", ".join(f"{task} {size:,}" for task, size in bytes_per_task(variables).items())
    return "\n".join(lines + [f"bytes per task: {totals}"])


def full_values(variables):
    """Each variable's whole value as a numpy array (shards joined in order), for ``set_weights``."""
    shards = defaultdict(dict)
    for name, index, shard in _pieces(variables):
        shards[name][index] = shard.numpy()
    return [np.concatenate([parts[i] for i in sorted(parts)], axis=0) for parts in shards.values()]
