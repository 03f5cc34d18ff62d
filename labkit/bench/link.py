"""``labkit bench link``: one benchmark point over rate-limited links, measured and predicted by the cost model.

In the same run: the cost model's inputs are measured on loopback (one worker, two numbers of steps per closure,
``labkit.bench.measure``), then the point runs on network namespaces (``labkit.deploy.netns``, needs root):
a chief, one PS and the workers on hosts of their own, every cable limited to ``rate_mbit`` in
each direction by tc's token bucket filter (``tbf``) at both its ends. Only the rate is emulated:
``netem`` (added delay, loss) does not exist on every kernel (on the kit's machine: "Specified
qdisc kind is unknown"). All hosts still share this computer's cores.
"""
import argparse
import json
import os
import tempfile
from pathlib import Path

from labkit.deploy import export, netns
from labkit.runtime import processes, tfruntime
from labkit.bench.files import machine
from labkit.bench.costmodel import measure_costs, predict, relative_error, usable_cores
from labkit.bench.points import Point
from labkit.bench.measure import measure_points

CHIEF, PS = "10.231.1.1", "10.231.1.2"
PORT = 2222
MODEL = "mlp"


def _workers(count):
    return [f"10.231.1.{3 + index}" for index in range(count)]


def measure_here(workers, steps_per_closure, batch_size, repeats, min_steps, out_path):
    """On the chief: time the MLP's custom loop on the cluster of TF_CONFIG; write steps/s to ``out_path``."""
    import tensorflow as tf

    from labkit.bench.measure import custom_loop
    from labkit.bench.points import interval_steps
    from labkit.train import per_worker_iterator
    from labkit.verdict import five_number_summary
    from labkit.bench.workloads import Data, workload
    from labkit.meter import Meter

    strategy = tfruntime.connect(tf.distribute.cluster_resolver.TFConfigClusterResolver())
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        work = workload(MODEL, Data([MODEL]), batch_size, steps_per_closure)
    steps = interval_steps(Point(MODEL, "custom", workers, 1, steps_per_closure, batch_size), min_steps)
    train_interval = custom_loop(work, per_worker_iterator(coordinator, work.dataset_fn), steps_per_closure, strategy,
                                 coordinator)
    train_interval(Meter(), steps)  # the warm-up: tracing, datasets, first pulls
    meter = Meter({"coordinator": os.getpid()})
    for _ in range(repeats):
        train_interval(meter, steps)
    result = {"steps_per_s": five_number_summary([steps / s for s in meter.seconds]), "interval_steps": steps}
    Path(out_path).write_text(json.dumps(result))


def _chief_command(workers, steps_per_closure, batch_size, repeats, min_steps):
    return (f"python -m labkit.bench.link --chief --workers {workers} --steps-per-closure {steps_per_closure} --batch-size {batch_size} "
            f'--repeats {repeats} --min-steps {min_steps} --out "$PWD/measured.json"')


def measure_on_namespaces(rate_mbit, workers, steps_per_closure, batch_size, repeats, min_steps):
    """The point on hosts joined by ``rate_mbit`` links: (steps/s spread, bytes through the PS link per step)."""
    netns.remove_stale()
    hosts = [CHIEF, PS, *_workers(workers)]
    with tempfile.TemporaryDirectory(prefix="labkit-link-") as out, netns.VirtualNetwork(hosts) as network:
        network.limit_rate(rate_mbit)
        cluster = {"chief": [f"{CHIEF}:{PORT}"], "ps": [f"{PS}:{PORT}"],
                   "worker": [f"{host}:{PORT}" for host in _workers(workers)]}
        export.export(cluster, out, _chief_command(workers, steps_per_closure, batch_size, repeats, min_steps))
        tasks = export.exported_tasks(out)
        started = []
        try:
            for _, host, directory in tasks[:-1]:  # all at once: each spends seconds importing TensorFlow
                started.append(export.start_task(directory, network.namespace(host)))
            for (_, _, directory), process in zip(tasks, started):
                export.wait_until_serving(process, directory)
            before = network.traffic()[PS]
            _, chief_host, chief_dir = tasks[-1]
            export.follow_chief(export.start_task(chief_dir, network.namespace(chief_host)), chief_dir, 0,
                                timeout=600)
            after = network.traffic()[PS]
        finally:
            processes.stop(started)
        measured = json.loads((chief_dir / "measured.json").read_text())
    all_steps = (repeats + 1) * measured["interval_steps"]  # the warm-up interval crossed the link too
    sent, received = after[0] - before[0], after[1] - before[1]
    return measured["steps_per_s"], {"pull": sent / all_steps, "push": received / all_steps}


def link(rate_mbit=100, workers=2, steps_per_closure=10, batch_size=64, repeats=5, min_steps=60, out_dir="runs/bench/link"):
    """Measure the inputs on loopback and the point over ``rate_mbit`` links; print and save both with the
    prediction. Returns the saved document."""
    reason = netns.unavailable_reason()
    if reason:
        raise RuntimeError(f"labkit bench link needs network namespaces: {reason}.")
    os.environ["LABKIT_OFFLINE"] = "1"  # the namespaces have no internet: the same offline MNIST everywhere
    points = [Point(MODEL, "single-process", 0, 0, steps_per_closure, batch_size)]  # the baseline measure_points needs
    points += [Point(MODEL, "custom", 1, 1, k, batch_size) for k in sorted({1, steps_per_closure})]
    points.append(Point(MODEL, "custom", workers, 1, steps_per_closure, batch_size))  # the same point on loopback
    rows = measure_points(points, repeats, min_steps, target_accuracy=1.0)
    costs = measure_costs(rows, MODEL, batch_size)
    loopback = next(r for r in rows if r["loop"] == "custom" and r["workers"] == workers
                    and r["steps_per_closure"] == steps_per_closure)
    steps_per_s, bytes_per_step = measure_on_namespaces(rate_mbit, workers, steps_per_closure, batch_size, repeats, min_steps)
    rate, cores = rate_mbit * 1e6 / 8, usable_cores(rows, MODEL, batch_size, os.cpu_count())
    predicted = predict(costs, workers, 1, steps_per_closure, cores=cores, link_bytes_per_s=rate)
    predicted_loopback = predict(costs, workers, 1, steps_per_closure, cores=cores)
    document = {
        "machine": machine(), "point": {"model": MODEL, "workers": workers, "ps": 1, "steps_per_closure": steps_per_closure,
                                        "batch_size": batch_size, "rate_mbit": rate_mbit},
        "linked": {"steps_per_s": steps_per_s, "bytes_per_step": bytes_per_step,
                   "predicted_steps_per_s": predicted.steps_per_s, "bottleneck": predicted.bottleneck,
                   "limits": predicted.limits,
                   "half_duplex_network_limit": rate / (costs.pull_bytes + costs.push_bytes)},
        "loopback": {"steps_per_s": loopback["steps_per_s_median"],
                     "predicted_steps_per_s": predicted_loopback.steps_per_s,
                     "bottleneck": predicted_loopback.bottleneck},
        "costs": {"pull_bytes": costs.pull_bytes, "push_bytes": costs.push_bytes,
                  "one_worker_seconds": vars(costs.one_worker_seconds)}}
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "link.json").write_text(json.dumps(document, indent=1))
    print(format_link(document))
    return document


def format_link(document):
    """What the link benchmark measured and predicted, in a few lines."""
    point, linked, loopback = document["point"], document["linked"], document["loopback"]
    measured = linked["steps_per_s"]["median"]
    error = relative_error(linked["predicted_steps_per_s"], measured)
    return "\n".join([
        f"{point['model']}, {point['workers']} workers, 1 PS, {point['steps_per_closure']} steps/closure, batch {point['batch_size']}:",
        f"  loopback:           measured {loopback['steps_per_s']:7.1f} steps/s, predicted "
        f"{loopback['predicted_steps_per_s']:7.1f} ({loopback['bottleneck']})",
        f"  {point['rate_mbit']} Mbit/s links: measured {measured:7.1f} steps/s "
        f"(quartiles {linked['steps_per_s']['q1']:.1f}-{linked['steps_per_s']['q3']:.1f}), predicted "
        f"{linked['predicted_steps_per_s']:7.1f} ({linked['bottleneck']}), error {error:.0%}",
        f"  network limit full duplex {linked['limits'].get('network', float('nan')):.1f} steps/s; if pull and push "
        f"shared one direction it would be {linked['half_duplex_network_limit']:.1f}",
        f"  bytes per step through the PS link: pull {linked['bytes_per_step']['pull'] / 1e3:.0f} KB, "
        f"push {linked['bytes_per_step']['push'] / 1e3:.0f} KB (warm-up included)",
        "  only the rate is emulated: tc netem (added latency) is not available on this kernel"])


def main(argv=None):
    """``python -m labkit.bench.link --chief ...``: the chief's side, run from its exported run.sh."""
    parser = argparse.ArgumentParser(prog="python -m labkit.bench.link", description=main.__doc__)
    parser.add_argument("--chief", action="store_true", required=True)
    for flag in ("--workers", "--steps-per-closure", "--batch-size", "--repeats", "--min-steps"):
        parser.add_argument(flag, type=int, required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    from labkit.runtime.children import exit_with_parent_if_started_by_one

    exit_with_parent_if_started_by_one()
    measure_here(args.workers, args.steps_per_closure, args.batch_size, args.repeats, args.min_steps, args.out)


if __name__ == "__main__":
    main()
