"""The ``labkit`` command: ``labkit --help`` lists the subcommands in the order a learner meets them.

Each subcommand is one block: ``cmd_<name>`` does the work and ``add_<name>`` registers its
parser, with help text and an example (the epilog) for the command and every option.
docs/cli.md is generated from this parser (``python -m labkit.tools.pages``, ``make docs``).
"""
import argparse
import json
import math
import os
import signal
import sys
import time

import labkit
from labkit.runtime import isolation, processes, tfconfig
from labkit.cluster import LocalCluster, pick_port, task_line
from labkit.registry import running_clusters, stop_recorded
from labkit import bench
from labkit.deploy import export, kubernetes
from labkit.tools import exercises

EXAMPLE_SHAPE = {"workers": 2, "ps": 1, "host": "localhost", "base_port": 2222}


def add_command(commands, name, run, example, help=None):
    """A subparser whose help is ``run``'s docstring and whose epilog is ``example``."""
    text = help or run.__doc__
    parser = commands.add_parser(name, help=text, description=text, epilog=f"example:\n  {example}",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(run=run)
    return parser


def add_cluster_shape(parser, workers=2, ps=1):
    parser.add_argument("--workers", type=int, default=workers, metavar="N",
                        help="number of worker processes (default: %(default)s)")
    parser.add_argument("--ps", type=int, default=ps, metavar="N",
                        help="number of parameter server processes (default: %(default)s)")


# ----- doctor -----------------------------------------------------------------
def cmd_doctor(args):
    """Check this machine and the stack: versions, Keras 2, cores, memory, a free port, the security fact."""
    import psutil

    if args.workshop:
        from labkit.tools import doctor

        sys.exit(0 if doctor.workshop(doctor.workshop_checks(args.notebooks or doctor.THREE_HOUR_PLAN)) else 1)

    print(f"interpreter {sys.executable}")
    print(f"cores       {os.cpu_count()}   memory {psutil.virtual_memory().total / 2**30:.1f} GiB")
    print(f"free port   {pick_port()} (LocalCluster picks ports like this one)")
    for name in ("TF_USE_LEGACY_KERAS", "GRPC_FAIL_FAST", "TF_CPP_MIN_LOG_LEVEL"):
        print(f"{name:<21} {os.environ.get(name)}")
    for name, version in labkit.versions().items():
        print(f"{name:<11} {version}")
    print(tfconfig.SECURITY_WARNING)


def add_doctor(commands):
    doctor = add_command(commands, "doctor", cmd_doctor, "labkit doctor --workshop     (the same as: make doctor)")
    doctor.add_argument("--workshop", action="store_true",
                        help="the pre-flight for a workshop: one PASS/WARN/FAIL line per item, then a real "
                             "1-worker/1-ps cluster trains a few steps; exits non-zero if an item FAILED")
    doctor.add_argument("--notebooks", nargs="+", metavar="NN",
                        help="--workshop: the notebooks of the day, e.g. 00 01 02 03 ex1; free memory must cover "
                             "the largest measured peak among them, or for the guide's 3-hour plan (the default) "
                             "its measured workshop day, kernels open as the guide keeps them")


# ----- demo -------------------------------------------------------------------
def isolate_from_the_network(args):
    """`labkit demo` and `labkit up`, run from a terminal, put themselves and their cluster in a private network
    namespace where the system allows it, as the PS Lab kernel does; elsewhere their cluster says it is exposed
    (``LocalCluster.start``). Called in another program (``cli.main([...])``), they never move it."""
    if args.own_process:
        isolation.run_again_isolated(["-m", "labkit.tools.cli", *sys.argv[1:]])


def cmd_demo(args):
    """Train MNIST with model.fit on a local PS cluster and print the test accuracy."""
    began = time.monotonic()
    isolate_from_the_network(args)
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


def add_demo(commands):
    demo = add_command(commands, "demo", cmd_demo, "labkit demo --workers 2 --epochs 4 --target 0.85")
    add_cluster_shape(demo)
    demo.add_argument("--epochs", type=int, default=8, help="training epochs (default: %(default)s)")
    demo.add_argument("--steps-per-epoch", type=int, default=100, metavar="N",
                      help="steps per epoch, over all workers (default: %(default)s)")
    demo.add_argument("--batch-size", type=int, default=64, metavar="N",
                      help="examples per worker step (default: %(default)s)")
    demo.add_argument("--target", type=float, default=0.0, metavar="ACCURACY",
                      help="exit with an error if the test accuracy ends below this (default: %(default)s)")


# ----- up ---------------------------------------------------------------------
def cmd_up(args):
    """Run a local cluster in the foreground, printing each task's TF_CONFIG, until Ctrl-C."""
    isolate_from_the_network(args)
    with LocalCluster(args.workers, args.ps, chief=True, name="cli-up") as cluster:
        print(f"Cluster ready in {cluster.ready_seconds:.1f} s. Logs: {cluster.log_dir}")
        for task in [t.name for t in cluster.tasks] + ["chief:0"]:
            print(f"\n{task}: TF_CONFIG='{json.dumps(cluster.tf_config(task))}'")
        if isolation.network_status()[0] == isolation.ISOLATED:
            print(f"\nThe tasks run in this command's private network namespace: no other machine reaches them, and "
                  f"neither does a program in another terminal. To run a coordinator of yours against them, start it "
                  f"in the namespace: nsenter --target {os.getpid()} --user --net --preserve-credentials "
                  f"python your_coordinator.py (with the chief's TF_CONFIG above).")
        else:
            print(f"\n{tfconfig.SECURITY_WARNING}")
        print("Press Ctrl-C to stop every task.")
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            processes.wait_until(lambda: not cluster.running, math.inf, "every task to exit", interval=1)
            print("every task has exited")
        except KeyboardInterrupt:
            print("\nstopping...")


def add_up(commands):
    add_cluster_shape(add_command(commands, "up", cmd_up, "labkit up --workers 3 --ps 2"))


# ----- status -----------------------------------------------------------------
def cmd_status(args):
    """List the clusters LocalCluster started on this machine, task by task, alive or dead (--all-users: everyone's)."""
    if args.all_users:
        from labkit.tools import class_status

        print("\n".join(class_status.report()))
        return
    clusters = running_clusters()
    if not clusters:
        print("no running labkit clusters")
    for state in clusters:
        print("\n".join(cluster_lines(state)))


def cluster_lines(state):
    """A running cluster (a dict of ``running_clusters()``) as ``labkit status`` shows it: a heading, where it can be
    reached from, then its tasks."""
    return [f"cluster {state['name']!r} (owner pid {state['owner_pid']}, logs {state['log_dir']})",
            "  " + ("in a private network namespace (its owner's): these addresses reach it from inside that "
                    "namespace only, not from this terminal or any other machine" if state.get("network") == "isolated"
                    else "its ports are reachable from this terminal and from other machines on the network"),
            *(task_line(task["task"], task["address"], task["pid"], "alive" if task["alive"] else "dead")
              for task in state["tasks"])]


def add_status(commands):
    status = add_command(commands, "status", cmd_status, "labkit status\n  sudo labkit status --all-users    "
                                                         "(a class hub: every learner's)")
    status.add_argument("--all-users", action="store_true",
                        help="(root) every user who runs a Jupyter server, kernel or task here: their memory (summed "
                             "PSS), processes and clusters, as an instructor watches a class hub")


# ----- tf-config --------------------------------------------------------------
def cmd_tf_config(args):
    """Explain the TF_CONFIG of one task: of the running cluster, or of an example when none runs."""
    given = {name: getattr(args, name) for name in EXAMPLE_SHAPE if getattr(args, name) is not None}
    clusters = [] if given else running_clusters()
    if clusters or args.cluster:
        state = one_cluster(clusters, args.cluster)
        cluster, note = state["cluster"], f"The running cluster {state['name']!r} (owner pid {state['owner_pid']}):"
    else:
        shape = EXAMPLE_SHAPE | given
        cluster = example_cluster(**shape)
        why = "its shape comes from the options" if given else "no labkit cluster is running on this machine"
        note = (f"An EXAMPLE cluster ({shape['workers']} worker(s), {shape['ps']} ps, ports from "
                f"{shape['base_port']} on {shape['host']}), not a running one: {why}.")
    task_type, task_index = tfconfig.parse_task(args.task)
    config = tfconfig.build(cluster, task_type, task_index)
    print(note, file=sys.stderr if args.json else sys.stdout)
    print(json.dumps(config) if args.json else tfconfig.explain(config))


def example_cluster(workers, ps, host, base_port):
    """A cluster spec with consecutive ports: the ps first, then the workers, the chief last."""
    ports = iter(range(base_port, base_port + ps + workers + 1))
    return {"ps": [f"{host}:{next(ports)}" for _ in range(ps)],
            "worker": [f"{host}:{next(ports)}" for _ in range(workers)],
            "chief": [f"{host}:{next(ports)}"]}


def one_cluster(clusters, name):
    """The cluster called ``name``, or the only one running when no name is given."""
    names = [state["name"] for state in clusters]
    if name is None and len(clusters) == 1:
        return clusters[0]
    if name is None:
        raise ValueError(f"{len(clusters)} clusters are running ({', '.join(names)}): name one with --cluster NAME.")
    matching = [state for state in clusters if state["name"] == name]
    if not matching:
        raise ValueError(f"no running cluster is called {name!r}; running: {', '.join(names) or 'none'}.")
    return matching[0]


def add_tf_config(commands):
    tf_config = add_command(commands, "tf-config", cmd_tf_config,
                            "labkit tf-config worker:0            (the running cluster's worker:0)\n"
                            "  labkit tf-config ps:1 --ps 2 --json  (an example cluster, raw JSON)")
    tf_config.add_argument("task", help='which task, e.g. "worker:0", "ps:0" or "chief:0"')
    tf_config.add_argument("--cluster", metavar="NAME",
                           help="which running cluster, when several run (names: labkit status)")
    example = "example cluster, shown even when one runs"
    tf_config.add_argument("--workers", type=int, metavar="N",
                           help=f"{example}: number of workers (default: {EXAMPLE_SHAPE['workers']})")
    tf_config.add_argument("--ps", type=int, metavar="N",
                           help=f"{example}: number of parameter servers (default: {EXAMPLE_SHAPE['ps']})")
    tf_config.add_argument("--host", help=f"{example}: every task's host (default: {EXAMPLE_SHAPE['host']})")
    tf_config.add_argument("--base-port", type=int, metavar="PORT",
                           help=f"{example}: the first task's port (default: {EXAMPLE_SHAPE['base_port']})")
    tf_config.add_argument("--json", action="store_true", help="print only the JSON (the note goes to stderr)")


# ----- stop -------------------------------------------------------------------
def cmd_stop(args):
    """Stop the task processes of a running cluster; the notebook or program that owns it keeps running."""
    clusters = running_clusters()
    if args.name and args.all:
        raise ValueError("give a cluster NAME or --all, not both.")
    if not clusters:
        print("no running labkit clusters")
        return
    chosen = clusters if args.all else [one_cluster(clusters, args.name)]
    for state in chosen:
        stopped = stop_recorded(state)
        print(f"stopped cluster {state['name']!r} (owner pid {state['owner_pid']}): "
              f"{', '.join(stopped) or 'no task was still running'}")


def add_stop(commands):
    stop = add_command(commands, "stop", cmd_stop,
                       "labkit stop demo     (or: labkit stop --all; names: labkit status)")
    stop.add_argument("name", nargs="?", metavar="NAME",
                      help="the cluster to stop, as `labkit status` names it (not needed when only one runs)")
    stop.add_argument("--all", action="store_true", help="stop every running labkit cluster on this machine")


# ----- exercises --------------------------------------------------------------
def cmd_exercises(args):
    """Write exercises/ from solutions/, each solution region replaced by a stub (--check: only compare)."""
    exercises.run(args)


def add_exercises(commands):
    exercises.add_arguments(add_command(commands, "exercises", cmd_exercises,
                                        "labkit exercises --check     (the same as: make exercises, without --check)"))


# ----- collect ----------------------------------------------------------------
def cmd_collect(args):
    """(root, on a class hub) Gather each learner's exercise notebooks from their home into a folder labkit grade takes."""
    from labkit.tools import collect

    collect.run(args)


def add_collect(commands):
    parser = add_command(commands, "collect", cmd_collect, "sudo labkit collect --group pslab --out class/\n  "
                         "sudo labkit grade class/ --out graded/ --jobs 2")
    parser.add_argument("learners", nargs="*", metavar="NAME", help="the learners' user names (default: --group's members)")
    parser.add_argument("--group", help="the class hub's Unix group (make hub HUB_GROUP=...): collect from its members")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="a new folder: DIR/<learner>/<exercise>.ipynb, root's alone")


# ----- sweep ------------------------------------------------------------------
def cmd_sweep(args):
    """Run a notebook over a grid of parameters with papermill; gather its results and verdicts into two CSV files."""
    from labkit.tools import sweep

    rows = sweep.run(args.notebook, sweep.parse_parameters(args.parameter), args.out, args.kernel)
    if any(row["status"] != "ok" for row in rows):
        sys.exit(1)


def add_sweep(commands):
    sweep_parser = add_command(commands, "sweep", cmd_sweep,
                               "labkit sweep notebooks/03_custom_training_loop.ipynb "
                               "-p num_workers 1 2 -p num_steps 200 400 --out runs/workers-and-steps")
    sweep_parser.add_argument("notebook", help="the notebook to run (its cell tagged parameters lists what -p can set)")
    sweep_parser.add_argument("-p", "--parameter", nargs="+", action="append", default=[],
                              metavar=("NAME", "VALUE"),
                              help="a parameter and its values, read as YAML (repeat -p per parameter; "
                                   "none: one run at the defaults)")
    sweep_parser.add_argument("--out", required=True, metavar="DIR", help="a new directory for the runs, results.csv and verdicts.csv")
    sweep_parser.add_argument("--kernel", default="pslab", help="Jupyter kernel (default: %(default)s)")


# ----- bench ------------------------------------------------------------------
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


def add_bench(commands):
    bench_parser = add_command(commands, "bench", cmd_bench,
                               "labkit bench --workers 1 2 --ps 1 --steps-per-closure 1 10 --models mlp --out runs/b\n"
                               "  labkit bench startup      (cluster start-up; make bench-startup)")
    defaults = bench.DEFAULTS
    for flag, kind, what in (("--workers", int, "worker counts"), ("--ps", int, "parameter server counts"),
                             ("--steps-per-closure", int, "steps per closure / steps_per_execution"),
                             ("--models", str, f"models, of: {', '.join(bench.MODELS)}"),
                             ("--batch-sizes", int, "batch sizes per worker step")):
        default = defaults[flag[2:].replace("-", "_")]
        bench_parser.add_argument(flag, type=kind, nargs="+", default=default,
                                  help=f"{what} (default: {' '.join(map(str, default))})")
    bench_parser.add_argument("--repeats", type=int, default=defaults["repeats"],
                              help="rounds: each point and its baseline timed once per round, taking turns, after "
                                   "one warm-up interval each (default: %(default)s)")
    bench_parser.add_argument("--min-steps", type=int, default=defaults["min_steps"],
                              help="steps per interval, at least (default: %(default)s)")
    bench_parser.add_argument("--target-accuracy", type=float, default=defaults["target_accuracy"],
                              help="MNIST test accuracy for time-to-accuracy (default: %(default)s)")
    bench_parser.add_argument("--out", default=time.strftime("runs/bench/%Y%m%d-%H%M%S"), metavar="DIR",
                              help="directory for results.csv, results.json, throughput.png (default: runs/bench/<time>)")
    bench_parser.add_argument("--report", action="store_true",
                              help="measure the points through notebook 08 with papermill; the executed notebook "
                                   "goes to --out (make bench-report)")
    bench_parser.set_defaults(benchmark="points")
    benchmarks = bench_parser.add_subparsers(dest="benchmark", metavar="startup | link")
    startup_help = "time a cluster's start-to-ready against a bare `import tensorflow`, alternately in one run"
    startup = add_command(benchmarks, "startup", cmd_bench, "labkit bench startup --repeats 5 --out runs/bench",
                          help=startup_help)
    startup.add_argument("--repeats", type=int, default=3, help="rounds of both timings (default: %(default)s)")
    add_cluster_shape(startup)
    startup.add_argument("--out", default="runs/bench", metavar="DIR",
                         help="directory for startup.json (default: %(default)s)")
    link_help = ("one point (MLP, 1 PS) over links rate-limited with tc on network namespaces (root), against the "
                 "cost model's prediction from inputs measured on loopback in the same run")
    link_parser = add_command(benchmarks, "link", cmd_bench, "sudo labkit bench link --rate-mbit 100", help=link_help)
    for flag, default, what in (("--rate-mbit", 100, "each link's rate in Mbit/s, each way"),
                                ("--workers", 2, "workers, each on its own host"), ("--steps-per-closure", 10, "steps per closure"),
                                ("--batch-size", 64, "batch size"), ("--repeats", 5, "timed intervals"),
                                ("--min-steps", 60, "steps per interval, at least")):
        link_parser.add_argument(flag, type=int, default=default, help=f"{what} (default: %(default)s)")
    link_parser.add_argument("--out", default="runs/bench/link", metavar="DIR",
                             help="directory for link.json (default: %(default)s)")


# ----- export -----------------------------------------------------------------
def cmd_export(args):
    """Write, per host, each task's TF_CONFIG and start command for a multi-machine cluster."""
    addresses_given = bool(args.chief or args.ps or args.worker)
    if bool(args.cluster) == addresses_given:
        raise ValueError("give the cluster either as a file (--cluster cluster.yaml) or as addresses "
                         "(--chief HOST:PORT --ps HOST:PORT --worker HOST:PORT ...), exactly one of the two.")
    cluster = export.load_cluster(args.cluster) if args.cluster else \
        export.cluster_from_flags(args.chief, args.ps, args.worker)
    if args.k8s or args.tfjob:
        return cmd_export_k8s(args, cluster)
    plan = export.export(cluster, args.out, args.chief_command)
    print(export.format_plan(plan))
    print(f"\nWrote tf_config.json and run.sh for {len(plan)} tasks under {args.out}/<host>/<task>/. "
          "Copy each host's directory to that machine; start ps and workers first, the chief last.")


def cmd_export_k8s(args, cluster):
    """The same cluster as Kubernetes manifests: a Pod and headless Service per task and the chief as
    a Job (--k8s), or one TFJob for the Kubeflow Training Operator (--tfjob)."""
    if args.k8s and args.tfjob:
        raise ValueError("give --k8s (plain manifests) or --tfjob (a TFJob for the Training Operator), not both.")
    if args.evaluator and not args.tfjob:
        raise ValueError("--evaluator adds a replica to a TFJob: use it with --tfjob.")
    custom = args.chief_command != export.DEFAULT_CHIEF_COMMAND
    chief_command = args.chief_command if custom else kubernetes.DEFAULT_CHIEF_COMMAND
    if args.tfjob:
        objects = kubernetes.tfjob_manifests(cluster, args.image, args.name, chief_command, args.evaluator)
    else:
        objects = kubernetes.manifests(cluster, args.image, args.name, chief_command)
    path = kubernetes.write(objects, args.out, args.name)
    print(f"Wrote {len(objects)} Kubernetes objects to {path}; start them with: kubectl apply -f {path}")
    if args.tfjob:
        tfjob = next(item for item in objects if item["kind"] == "TFJob")
        print(f"Then: kubectl get tfjob {args.name} -w (its state); kubectl delete -f {path} (everything). "
              "It needs the Kubeflow Training Operator in the cluster, which sets every TF_CONFIG; "
              f"in the namespace default their cluster is\n  "
              f"{json.dumps(kubernetes.operator_tf_config(tfjob, 'chief', 0)['cluster'])}")
    for task, config in kubernetes.tf_configs(objects).items():
        print(f"  {task:<9} TF_CONFIG cluster {json.dumps(config['cluster'])}")


def add_export(commands):
    export_parser = add_command(commands, "export", cmd_export,
                                "labkit export --chief 10.0.0.9:2222 --ps 10.0.0.1:2222 "
                                "--worker 10.0.0.2:2222 --worker 10.0.0.3:2222\n"
                                "  labkit export --k8s --image registry.example.com/pslab:0.1 "
                                "--cluster cluster.yaml --out k8s")
    export_parser.add_argument("--cluster", metavar="FILE", help="YAML or JSON: task type -> list of host:port")
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
    export_parser.add_argument("--tfjob", action="store_true",
                               help="write a Kubeflow TFJob (tfjob.yaml) for the Training Operator instead")
    export_parser.add_argument("--evaluator", action="store_true",
                               help="--tfjob: add an Evaluator replica that evaluates every checkpoint")
    export_parser.add_argument("--image", help="--k8s, --tfjob: the container image with labkit (see the Dockerfile)")
    export_parser.add_argument("--name", default=kubernetes.DEFAULT_NAME,
                               help="--k8s, --tfjob: prefix of every object and DNS name (default: %(default)s)")


# ----- data -------------------------------------------------------------------
def cmd_data(args):
    """Cache full MNIST for the labs: download it, or check (and install) a copy of mnist.npz."""
    from labkit import data

    if args.action == "download":
        if data.KERAS_CACHE.exists() and not args.again:
            try:
                data.verify_mnist(data.KERAS_CACHE)
                print(f"full MNIST is already cached and intact: {data.KERAS_CACHE}")
                return
            except ValueError as error:
                print(f"{error} Downloading it again.")
        try:
            data.download_mnist()
        except OSError as error:
            sys.exit(f"labkit data download: could not download full MNIST ({error}). Without internet, copy "
                     f"mnist.npz from another machine (e.g. a USB stick) and run `labkit data verify FILE --install`; "
                     "the labs also run on the offline subset that ships with the kit.")
        return
    data.verify_mnist(args.file)
    print(f"{args.file}: SHA-256 {data.MNIST_SHA256} (full MNIST, as Keras checks it)")
    if args.install:
        print(f"copied to {data.install_mnist_file(args.file)}: the labs use full MNIST from now on")


def add_data(commands):
    data_parser = add_command(commands, "data", cmd_data,
                              "labkit data download\n  labkit data verify /media/stick/mnist.npz --install")
    actions = data_parser.add_subparsers(dest="action", required=True, metavar="download | verify")
    download = add_command(actions, "download", cmd_data, "labkit data download",
                           help="fetch mnist.npz into Keras's cache, checking its SHA-256")
    download.add_argument("--again", action="store_true", help="download even if the cache holds an intact copy")
    verify = add_command(actions, "verify", cmd_data, "labkit data verify /media/stick/mnist.npz --install",
                         help="check that FILE is Keras's mnist.npz (SHA-256)")
    verify.add_argument("file", metavar="FILE", help="the mnist.npz to check")
    verify.add_argument("--install", action="store_true", help="then copy it into Keras's cache (~/.keras/datasets)")


# ----- grade ------------------------------------------------------------------
def cmd_grade(args):
    """Grade submitted exercise notebooks, each run in its own kernel and cluster, or build a Gradescope autograder."""
    from labkit.tools import grade, gradescope  # here: nbformat's import costs seconds that other commands need not pay

    autograder = args.gradescope_autograder or args.visibility or args.full_mnist
    return gradescope.command(args) if autograder else grade.run(args)


def add_grade(commands):
    parser = add_command(commands, "grade", cmd_grade, "labkit grade submissions/ --out graded/ --jobs 2\n  "
                         "labkit grade --gradescope-autograder autograder.zip --timeout 180 --visibility after_published")
    parser.add_argument("submissions", nargs="?", metavar="SUBMISSIONS",
                        help="a folder with one notebook file or one folder per learner, or a Canvas "
                             "or Moodle bulk-download .zip (or its unpacked folder)")
    parser.add_argument("--out", metavar="DIR", help="a new folder for grades.csv and the feedback (needed with "
                                                     "SUBMISSIONS)")
    parser.add_argument("--gradescope-autograder", metavar="OUT.zip",
                        help="instead of grading here, build Gradescope's autograder zip: it installs the kit's "
                             "pinned stack and grades each submission against --reference with --parameters, "
                             "--timeout, --cell-timeout and --max-tasks, one Gradescope test per check")
    parser.add_argument("--visibility", metavar="WHEN",
                        help="--gradescope-autograder: when learners see their results on Gradescope: visible "
                             "(the default: at once), hidden, after_due_date or after_published")
    parser.add_argument("--full-mnist", action="store_true",
                        help="--gradescope-autograder: setup.sh caches full MNIST, and every notebook is graded on it "
                             "(default: the 5,000-image subset the kit ships, which needs less memory)")
    parser.add_argument("--roster", metavar="FILE",
                        help="CSV of the class, a column id (or ID, as in Canvas's gradebook export) naming each "
                             "learner, optionally name (or Student): learners who handed in nothing get a row too")
    parser.add_argument("--export", choices=["canvas"],
                        help="also write the learning platform's files (canvas: DIR/canvas.csv for the "
                             "gradebook's Import, a column per exercise and the total; DIR/canvas-feedback.zip for "
                             "Re-Upload Submissions, each notebook back with its learner's feedback)")
    parser.add_argument("--assignment", default="PS Lab exercises",
                        help="the gradebook column of --export that holds the total, as the platform names the "
                             "assignment (Canvas's own export says 'Name (id)') (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks run at once (default: %(default)s; "
                                                            "each runs a kernel and a small cluster)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per notebook (default: %(default)s)")
    parser.add_argument("--cell-timeout", type=float, default=600.0,
                        help="seconds per cell: a longer cell is interrupted and the next runs (default: %(default)s)")
    parser.add_argument("--max-tasks", type=int, default=4,
                        help="task processes allowed per cluster a notebook starts (default: %(default)s)")
    parser.add_argument("--parameters", metavar="FILE",
                        help="YAML: exercise (e.g. ex3) -> {parameter: value}, to grade at other settings "
                             "than the exercises' defaults")
    parser.add_argument("--reference", metavar="DIR",
                        help="the assignment's exercise notebooks, those the submissions come from: the total counts "
                             "every check of each, handed in or not (default: all of the kit's exercises/)")
    parser.add_argument("--kernel", default="pslab", help="Jupyter kernel (default: %(default)s)")


# In the order a learner meets them: check the machine, a first run, clusters by hand, the
# exercises, then `labkit sweep`, the benchmarks and the tools for real machines.
COMMANDS = (add_doctor, add_data, add_demo, add_up, add_status, add_tf_config, add_stop, add_exercises,
            add_collect, add_grade, add_sweep, add_bench, add_export)


def build_parser():
    """The ``labkit`` argument parser, every subcommand registered."""
    parser = argparse.ArgumentParser(prog="labkit", description="PS Lab: local parameter-server clusters.",
                                     epilog="example:\n  labkit doctor\n  labkit tf-config worker:0 --help",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"labkit {labkit.__version__}",
                        help="print labkit's version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(commands)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    args.own_process = argv is None  # run as the `labkit` program, not called by another one
    try:
        args.run(args)
    except (tfconfig.TFConfigError, ValueError) as error:
        sys.exit(f"labkit {args.command}: {error}")


if __name__ == "__main__":
    main()
