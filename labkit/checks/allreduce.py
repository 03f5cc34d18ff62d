"""Checks of notebook 10 (parameter servers against all-reduce)."""

from labkit.checks.core import require


def lockstep_limit_samples_per_s(num_workers, batch_size, slow_ms):
    """Samples/s a synchronous step can reach at most when one worker pauses ``slow_ms`` per batch."""
    return num_workers * batch_size / (slow_ms / 1000)


# Batches the slowed worker can have ready when a timed interval starts, paused for before it: TensorFlow's
# distributed iterator (a MultiDeviceIterator) buffers one and prefetches one while the worker waits between phases.
READY_BATCHES = 2


def lockstep_bound_samples_per_s(num_workers, batch_size, slow_ms, batches_per_worker):
    """Samples/s a synchronous run of ``batches_per_worker`` batches per worker can reach at most when one worker
    pauses ``slow_ms`` per batch and starts with ``READY_BATCHES`` of them ready: the lockstep limit, a little higher
    over a short run."""
    if batches_per_worker <= READY_BATCHES:
        raise ValueError(f"batches_per_worker must be more than {READY_BATCHES}, the batches a worker can have ready "
                         f"before it starts; got {batches_per_worker}. Train the slowed phase longer.")
    paused = batches_per_worker - READY_BATCHES
    return lockstep_limit_samples_per_s(num_workers, batch_size, slow_ms) * batches_per_worker / paused


def sync_waited(samples_per_second, num_workers, batch_size, slow_ms, batches_per_worker):
    """All-reduce with a worker pausing ``slow_ms`` per batch, ``batches_per_worker`` batches each, ran no faster
    than that pause allows."""
    bound = lockstep_bound_samples_per_s(num_workers, batch_size, slow_ms, batches_per_worker)
    require(samples_per_second <= bound,
        f"all-reduce ran {samples_per_second:,.0f} samples/s with a worker pausing {slow_ms} ms per batch, "
        f"above the {bound:,.0f} that lockstep allows over {batches_per_worker} batches per worker: was that worker "
        "really slowed?")


def async_did_not_wait(samples_per_second, num_workers, batch_size, slow_ms, batches_per_worker):
    """Asynchronous PS training with a slowed worker, ``batches_per_worker`` batches each, beat what lockstep
    allows: the others did not wait."""
    bound = lockstep_bound_samples_per_s(num_workers, batch_size, slow_ms, batches_per_worker)
    require(samples_per_second > bound,
        f"PS training ran {samples_per_second:,.0f} samples/s, not above the {bound:,.0f} that lockstep allows "
        f"with a {slow_ms} ms pause over {batches_per_worker} batches per worker: did the fast workers wait for the "
        "slow one?")


def link_bytes_near(measured, expected, what, low=0.8, high=1.5):
    """A measured byte count per step is within ``low``-``high`` times the ``expected`` payload."""
    require(low * expected <= measured <= high * expected,
        f"{what}: {measured:,.0f} bytes per step, expected {low}-{high} x {expected:,.0f}.")


def moved_rows_not_table(bytes_per_step, rows_bytes, table_bytes):
    """A sparse step moved at least the touched rows' bytes, and under 1% of the whole table."""
    require(rows_bytes <= bytes_per_step < 0.01 * table_bytes,
        f"{bytes_per_step:,.0f} bytes per step; expected at least the touched rows ({rows_bytes:,}) and under "
        f"1% of the table ({table_bytes:,}): a dense table gradient would move all of it.")


def sharded_over_ps(held_by_task, num_ps):
    """The variables live on the ``num_ps`` parameter servers, none holding over 1.2 x an equal share."""
    on_workers = {task: held for task, held in held_by_task.items() if not task.startswith("ps")}
    require(not on_workers, f"variables held outside the parameter servers: {on_workers}")
    total, largest = sum(held_by_task.values()), max(held_by_task.values())
    require(len(held_by_task) == num_ps and largest <= 1.2 * total / num_ps,
        f"{held_by_task}: expected the table spread over {num_ps} parameter servers (use a variable_partitioner).")


def replicated(held_by_worker, table_bytes):
    """Every all-reduce worker holds at least a full copy of the table."""
    short = [held for held in held_by_worker if held < table_bytes]
    require(not short, f"workers hold {held_by_worker} bytes, some less than the table's {table_bytes:,}.")


def copies_identical(digests_by_worker):
    """Every all-reduce worker ended with the same weights, bit for bit (``allreduce.weights_digest`` of each)."""
    require(len(set(digests_by_worker)) == 1,
        f"the workers' weights differ ({len(set(digests_by_worker))} different digests among {len(digests_by_worker)} "
        "workers): a synchronous update must leave every copy the same. Did each worker apply its own gradient?")


def updates_per_batch_match(measured, expected, what):
    """The optimizer applied ``expected`` updates per batch trained (parameter servers 1, all-reduce 1 / num_workers)."""
    require(abs(measured - expected) <= 0.01 * expected,
        f"{what}: {measured:.3f} optimizer updates per batch trained, expected {expected:.3f}.")
