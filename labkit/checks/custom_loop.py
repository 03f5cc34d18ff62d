"""Checks of notebook 03 (the custom training loop: data per worker, sharding, scheduling)."""


def every_worker_ran(closures_per_worker, num_workers):
    """``closures_per_worker`` ({worker: count}) shows each of the ``num_workers`` workers ran something."""
    idle = [worker for worker in range(num_workers) if closures_per_worker.get(worker, 0) == 0]
    if idle:
        raise AssertionError(f"workers {idle} ran no scheduled function ({dict(closures_per_worker)}): "
                             "are they alive and in the cluster the strategy was built from?")


def arrays_shipped_to_every_task(sent_by_task, data_bytes):
    """The graph-constant route: the coordinator sent at least the arrays' bytes to every task."""
    short = {task: sent for task, sent in sent_by_task.items() if sent < 0.9 * data_bytes}
    if short:
        raise AssertionError(f"tasks {sorted(short)} received less than the {data_bytes:,} bytes of the "
                             f"arrays ({short}): were the arrays really captured by the dataset_fn?")


def files_route_ships_no_data(sent_by_task, data_bytes, max_fraction=0.05):
    """The files route: no task received more than ``max_fraction`` of the data's bytes from the coordinator."""
    heavy = {task: sent for task, sent in sent_by_task.items() if sent > max_fraction * data_bytes}
    if heavy:
        raise AssertionError(f"tasks {sorted(heavy)} received more than {max_fraction:.0%} of the "
                             f"{data_bytes:,} data bytes ({heavy}): the dataset_fn still captures arrays.")


def split_into_shards(variable, num_ps):
    """``variable`` is split into ``num_ps`` shards, each on a different parameter server."""
    from labkit import sharding

    rows = sharding.placement([variable])
    tasks = {row["task"] for row in rows}
    if len(rows) != num_ps or len(tasks) != num_ps:
        raise AssertionError(f"{variable.name} is in {len(rows)} shard(s) on {sorted(tasks)}, expected "
                             f"{num_ps} shards on {num_ps} parameter servers: is the strategy's "
                             "variable_partitioner set, and is the variable above its min_shard_bytes?")


def static_split(closures_per_worker, num_workers):
    """A static split: every worker ran exactly one of the ``num_workers`` long closures."""
    if sorted(closures_per_worker.items()) != [(worker, 1) for worker in range(num_workers)]:
        raise AssertionError(f"expected one long closure on each of {num_workers} workers, got "
                             f"{dict(closures_per_worker)}: schedule exactly num_workers closures at once.")


def free_workers_took_more(closures_per_worker, slow_worker):
    """Dynamic scheduling: the slow worker ran fewer closures than every other worker."""
    slow = closures_per_worker.get(slow_worker, 0)
    others = {worker: count for worker, count in closures_per_worker.items() if worker != slow_worker}
    if not others or min(others.values()) <= slow:
        raise AssertionError(f"the slow worker {slow_worker} ran {slow} closures, the others {others}: "
                             "schedule() should have given most closures to the free, faster workers.")


def slots_beside_their_variables(rows):
    """Each row (variable name, its task, {slot name: slot's task}) has slots, all on the variable's task."""
    if not rows:
        raise AssertionError("no variables given: pass one row per trainable variable (shard).")
    for name, task, slots in rows:
        if not slots:
            raise AssertionError(f"{name} has no slot variables: run apply_gradients once before looking.")
        elsewhere = {slot: slot_task for slot, slot_task in slots.items() if slot_task != task}
        if elsewhere:
            raise AssertionError(f"{name} is on {task} but its slots {elsewhere} are not: read each slot with "
                                 "optimizer.get_slot(variable, name) and its task from slot.device.")
