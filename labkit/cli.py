"""The ``labkit`` command: ``labkit --help`` lists the subcommands."""
import argparse
import json
import os
import signal
import sys
import time

import labkit
from labkit import tfconfig
from labkit.cluster import LocalCluster, pick_port, running_clusters
from labkit import bench, exercises, export, kubernetes


def cmd_up(args):
    """Run a local cluster in the foreground until Ctrl-C."""
    with LocalCluster(args.workers, args.ps, chief=True, name="cli-up") as cluster:
        print(f"Cluster ready in {cluster.ready_seconds:.1f} s. Logs: {cluster.log_dir}")
        for task in [t.name for t in cluster.tasks] + ["chief:0"]:
            print(f"\n{task}: TF_CONFIG='{json.dumps(cluster.tf_config(task))}'")
        print(f"\n{tfconfig.SECURITY_WARNING}\nPress Ctrl-C to stop every task.")
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            while cluster.running:
                time.sleep(1)
            print("every task has exited")
        except KeyboardInterrupt:
            print("\nstopping...")


def cmd_status(args):
    """Show the clusters started by LocalCluster on this machine."""
    clusters = running_clusters()
    if not clusters:
        print("no running labkit clusters")
    for state in clusters:
        print(f"cluster {state['name']!r} (owner pid {state['owner_pid']}, logs {state['log_dir']})")
        for task in state["tasks"]:
            print(f"  {task['task']:<9} {task['address']:<16} pid {task['pid']:<7} "
                  f"{'alive' if task['alive'] else 'dead'}")


def cmd_tf_config(args):
    """Print (and explain) the TF_CONFIG of one task of a cluster."""
    cluster = {"ps": [f"{args.host}:{args.base_port + i}" for i in range(args.ps)],
               "worker": [f"{args.host}:{args.base_port + args.ps + i}" for i in range(args.workers)],
               "chief": [f"{args.host}:{args.base_port + args.ps + args.workers}"]}
    task_type, task_index = tfconfig.parse_task(args.task)
    config = tfconfig.build(cluster, task_type, task_index)
    print(json.dumps(config) if args.json else tfconfig.explain(config))


def cmd_doctor(args):
    """Check the environment: versions, cores, memory, free ports, security facts."""
    import psutil

    if args.workshop:
        from labkit import doctor

        sys.exit(0 if doctor.workshop() else 1)

    print(f"interpreter {sys.executable}")
    print(f"cores       {os.cpu_count()}   memory {psutil.virtual_memory().total / 2**30:.1f} GiB")
    print(f"free port   {pick_port()} (LocalCluster picks ports like this one)")
    for name in ("TF_USE_LEGACY_KERAS", "GRPC_FAIL_FAST", "TF_CPP_MIN_LOG_LEVEL"):
        print(f"{name:<21} {os.environ.get(name)}")
    for name, version in labkit.versions().items():
        print(f"{name:<11} {version}")
    print(tfconfig.SECURITY_WARNING)


def cmd_demo(args):
    """Train MNIST with model.fit on a local PS cluster and print the test accuracy."""
    began = time.monotonic()
    from labkit import fit, models
    from labkit.data import load_mnist

    data = load_mnist()
    print(data)
    with LocalCluster(args.workers, args.ps, name="demo") as cluster:
        print(f"cluster of {args.workers} worker(s) and {args.ps} ps ready in {cluster.ready_seconds:.1f} s")
        strategy = cluster.strategy()
        with strategy.scope():
            model = models.mnist_mlp()
        fit.fit(model, data.x_train, data.y_train, epochs=args.epochs,
                steps_per_epoch=args.steps_per_epoch, batch_size=args.batch_size)
        test_accuracy = models.accuracy(model, data.x_test, data.y_test)
    print(f"test accuracy: {test_accuracy:.4f} ({len(data.x_test)} test images, "
          f"{time.monotonic() - began:.0f} s in all)")
    if test_accuracy < args.target:
        sys.exit(f"test accuracy {test_accuracy:.4f} is below the target {args.target}")


def cmd_export(args):
    """Write, per host, each task's TF_CONFIG and start command for a multi-machine cluster."""
    addresses_given = bool(args.chief or args.ps or args.worker)
    if bool(args.cluster) == addresses_given:
        raise ValueError("give the cluster either as a file (--cluster cluster.yaml) or as addresses "
                         "(--chief HOST:PORT --ps HOST:PORT --worker HOST:PORT ...), exactly one of the two.")
    cluster = export.load_cluster(args.cluster) if args.cluster else \
        export.cluster_from_flags(args.chief, args.ps, args.worker)
    if args.k8s:
        return cmd_export_k8s(args, cluster)
    plan = export.export(cluster, args.out, args.chief_command)
    print(export.format_plan(plan))
    print(f"\nWrote tf_config.json and run.sh for {len(plan)} tasks under {args.out}/<host>/<task>/. "
          "Copy each host's directory to that machine; start ps and workers first, the chief last.")


def cmd_export_k8s(args, cluster):
    """The same cluster as Kubernetes manifests: a Pod and headless Service per task, the chief as a Job."""
    custom = args.chief_command != export.DEFAULT_CHIEF_COMMAND
    chief_command = args.chief_command if custom else kubernetes.DEFAULT_CHIEF_COMMAND
    objects = kubernetes.manifests(cluster, args.image, args.name, chief_command)
    path = kubernetes.write(objects, args.out, args.name)
    print(f"Wrote {len(objects)} Kubernetes objects to {path}; start them with: kubectl apply -f {path}")
    for task, config in kubernetes.tf_configs(objects).items():
        print(f"  {task:<9} TF_CONFIG cluster {json.dumps(config['cluster'])}")


def cmd_sweep(args):
    """Run a notebook over a grid of parameters with papermill and gather its results into results.csv."""
    from labkit import sweep

    rows = sweep.run(args.notebook, sweep.parse_parameters(args.parameter), args.out, args.kernel)
    if any(row["status"] != "ok" for row in rows):
        sys.exit(1)


def cmd_bench(args):
    """Measure training speed against workers, parameter servers, step packing, model and batch size."""
    if args.benchmark == "startup":
        bench.startup(args.repeats, args.workers, args.ps, args.out)
        return
    if args.benchmark == "link":
        from labkit.bench.link import link

        link(args.rate_mbit, args.workers, args.steps_per_closure, args.batch_size, args.repeats, args.min_steps, args.out)
        return
    settings = {name: getattr(args, name) for name in bench.DEFAULTS}
    if args.report:
        bench.report(args.out, **settings)
    else:
        bench.run_and_save(args.out, **settings)


def cmd_exercises(args):
    """Write exercises/ from solutions/, each solution region replaced by a stub (--check: only compare)."""
    exercises.run(args)


def add_grade_command(commands):
    """``labkit grade``: run learners' exercise notebooks and write grades.csv and feedback (labkit/grade.py)."""
    from labkit import grade

    summary = "Run submitted exercise notebooks, each in its own kernel and cluster, and grade them."
    parser = commands.add_parser("grade", help=summary, description=summary,
                                 epilog="e.g. labkit grade submissions/ --out graded/ --jobs 2")
    grade.add_arguments(parser)
    parser.set_defaults(run=grade.run)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="labkit", description="PS Lab: local parameter-server clusters.")
    commands = parser.add_subparsers(dest="command", required=True)

    up = commands.add_parser("up", help=cmd_up.__doc__)
    status = commands.add_parser("status", help=cmd_status.__doc__)
    tf_config = commands.add_parser("tf-config", help=cmd_tf_config.__doc__)
    doctor = commands.add_parser("doctor", help=cmd_doctor.__doc__)
    demo = commands.add_parser("demo", help=cmd_demo.__doc__)
    for sub in (up, demo):
        sub.add_argument("--workers", type=int, default=2, help="number of workers (default 2)")
        sub.add_argument("--ps", type=int, default=1, help="number of parameter servers (default 1)")
    tf_config.add_argument("task", help='which task, e.g. "worker:0", "ps:0" or "chief:0"')
    tf_config.add_argument("--workers", type=int, default=2)
    tf_config.add_argument("--ps", type=int, default=1)
    tf_config.add_argument("--host", default="localhost")
    tf_config.add_argument("--base-port", type=int, default=2222)
    tf_config.add_argument("--json", action="store_true", help="print only the JSON")
    demo.add_argument("--epochs", type=int, default=8)
    demo.add_argument("--steps-per-epoch", type=int, default=100)
    demo.add_argument("--batch-size", type=int, default=64)
    demo.add_argument("--target", type=float, default=0.0,
                      help="exit with an error if test accuracy ends below this")
    up.set_defaults(run=cmd_up)
    status.set_defaults(run=cmd_status)
    tf_config.set_defaults(run=cmd_tf_config)
    doctor.add_argument("--workshop", action="store_true",
                        help="the pre-flight for a workshop: one PASS/WARN/FAIL line per item, then a real "
                             "1-worker/1-ps cluster trains a few steps (about a minute)")
    doctor.set_defaults(run=cmd_doctor)
    demo.set_defaults(run=cmd_demo)
    export_parser = commands.add_parser("export", help=cmd_export.__doc__, description=cmd_export.__doc__,
                                        epilog="e.g. labkit export --chief 10.0.0.9:2222 --ps 10.0.0.1:2222 "
                                               "--worker 10.0.0.2:2222 --worker 10.0.0.3:2222")
    export_parser.add_argument("--cluster", metavar="FILE", help="YAML or JSON: job -> list of host:port")
    export_parser.add_argument("--chief", metavar="HOST:PORT", help="where the training program runs")
    export_parser.add_argument("--ps", metavar="HOST:PORT", action="append", default=[],
                               help="a parameter server (repeat for each)")
    export_parser.add_argument("--worker", metavar="HOST:PORT", action="append", default=[],
                               help="a worker (repeat for each)")
    export_parser.add_argument("--chief-command", default=export.DEFAULT_CHIEF_COMMAND,
                               help="the training program the chief runs (default: %(default)s)")
    export_parser.add_argument("--out", metavar="DIR", default="cluster-export",
                               help="a new or empty directory to write (default: %(default)s)")
    export_parser.add_argument("--k8s", action="store_true",
                               help="write Kubernetes manifests (kubernetes.yaml) instead of per-host files")
    export_parser.add_argument("--image", help="--k8s: the container image with labkit (see the Dockerfile)")
    export_parser.add_argument("--name", default=kubernetes.DEFAULT_NAME,
                               help="--k8s: prefix of every object and DNS name (default: %(default)s)")
    export_parser.set_defaults(run=cmd_export)
    sweep_parser = commands.add_parser("sweep", help=cmd_sweep.__doc__, description=cmd_sweep.__doc__,
                                       epilog="e.g. labkit sweep notebooks/03_custom_training_loop.ipynb "
                                              "-p num_workers 1 2 -p num_steps 200 400 --out runs/sweep03")
    sweep_parser.add_argument("notebook", help="the notebook to run (its cell tagged parameters lists what -p can set)")
    sweep_parser.add_argument("-p", "--parameter", nargs="+", action="append", default=[],
                              metavar=("NAME", "VALUE"), help="a parameter and its values (repeat -p per parameter)")
    sweep_parser.add_argument("--out", required=True, metavar="DIR", help="a new directory for the runs and results.csv")
    sweep_parser.add_argument("--kernel", default="pslab", help="Jupyter kernel (default: %(default)s)")
    sweep_parser.set_defaults(run=cmd_sweep)
    bench_parser = commands.add_parser("bench", help=cmd_bench.__doc__, description=cmd_bench.__doc__,
                                       epilog="e.g. labkit bench --workers 1 2 --ps 1 --steps-per-closure 1 10 --models mlp; "
                                              "labkit bench startup times cluster start-up")
    defaults = bench.DEFAULTS
    for flag, kind, what in (("--workers", int, "worker counts"), ("--ps", int, "parameter server counts"),
                             ("--steps-per-closure", int, "steps per closure / steps_per_execution"),
                             ("--models", str, f"models, of: {', '.join(bench.MODELS)}"),
                             ("--batch-sizes", int, "batch sizes per worker step")):
        default = defaults[flag[2:].replace("-", "_")]
        bench_parser.add_argument(flag, type=kind, nargs="+", default=default,
                                  help=f"{what} (default: {' '.join(map(str, default))})")
    bench_parser.add_argument("--repeats", type=int, default=defaults["repeats"],
                              help="timed intervals per point, after one warm-up interval (default: %(default)s)")
    bench_parser.add_argument("--min-steps", type=int, default=defaults["min_steps"],
                              help="steps per interval, at least (default: %(default)s)")
    bench_parser.add_argument("--target-accuracy", type=float, default=defaults["target_accuracy"],
                              help="MNIST test accuracy for time-to-accuracy (default: %(default)s)")
    bench_parser.add_argument("--out", default=time.strftime("runs/bench/%Y%m%d-%H%M%S"),
                              help="directory for results.csv, results.json, sweep.png (default: runs/bench/<time>)")
    bench_parser.add_argument("--report", action="store_true",
                              help="run notebook 08 on the sweep with papermill; the executed notebook goes to --out")
    bench_parser.set_defaults(run=cmd_bench, benchmark="sweep")
    startup_help = "time a cluster's start-to-ready against a bare `import tensorflow`, alternately in one run"
    benchmarks = bench_parser.add_subparsers(dest="benchmark", metavar="startup | link")
    startup = benchmarks.add_parser("startup", help=startup_help, description=startup_help)
    startup.add_argument("--repeats", type=int, default=3, help="rounds of both timings (default: %(default)s)")
    startup.add_argument("--workers", type=int, default=2, help="workers of the cluster (default: %(default)s)")
    startup.add_argument("--ps", type=int, default=1, help="parameter servers of the cluster (default: %(default)s)")
    startup.add_argument("--out", default="runs/bench", help="directory for startup.json (default: %(default)s)")
    link_help = ("one point (MLP, 1 PS) over links rate-limited with tc on network namespaces (root), against the "
                 "cost model's prediction from inputs measured on loopback in the same run")
    link_parser = benchmarks.add_parser("link", help=link_help, description=link_help)
    for flag, default, what in (("--rate-mbit", 100, "each link's rate in Mbit/s, each way"),
                                ("--workers", 2, "workers, each on its own host"), ("--steps-per-closure", 10, "steps per closure"),
                                ("--batch-size", 64, "batch size"), ("--repeats", 5, "timed intervals"),
                                ("--min-steps", 60, "steps per interval, at least")):
        link_parser.add_argument(flag, type=int, default=default, help=f"{what} (default: %(default)s)")
    link_parser.add_argument("--out", default="runs/bench/link", help="directory for link.json (default: %(default)s)")
    exercises_parser = commands.add_parser("exercises", help=cmd_exercises.__doc__, description=cmd_exercises.__doc__)
    exercises.add_arguments(exercises_parser)
    exercises_parser.set_defaults(run=cmd_exercises)
    add_grade_command(commands)

    args = parser.parse_args(argv)
    try:
        args.run(args)
    except (tfconfig.TFConfigError, ValueError) as error:
        sys.exit(f"labkit {args.command}: {error}")


if __name__ == "__main__":
    main()
