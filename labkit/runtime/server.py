"""One task of a parameter-server cluster: ``python -m labkit.runtime.server``.

Exactly what runs on each real machine: the process reads its task type and index from the
TF_CONFIG environment variable, starts a TensorFlow gRPC server and serves
until it is stopped. Parameter servers hold variables; workers run the
functions the coordinator schedules. Neither runs any training code itself.

Security: ``tf.distribute.Server`` listens on ALL network interfaces with no
authentication. Anyone who can reach the port can run operations here.
"""
import importlib.util
import os
import sys
import types

from labkit.runtime import children, loglines, processes, tfconfig

SERVING_TASK_TYPES = ("ps", "worker")


def main():
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        sys.exit(f"{processes.SERVER_MODULE}: TF_CONFIG is not set. Set it to this task's JSON, e.g. "
                 "the output of `labkit tf-config worker:0`.")
    try:
        config = tfconfig.validate(raw)
    except tfconfig.TFConfigError as error:
        sys.exit(f"{processes.SERVER_MODULE}: bad TF_CONFIG: {error}")
    task_type, task_index = config["task"]["type"], config["task"]["index"]
    if task_type not in SERVING_TASK_TYPES:
        sys.exit(f"{processes.SERVER_MODULE}: task type {task_type!r} does not run a server here. Only "
                 f"{' and '.join(SERVING_TASK_TYPES)} tasks do; the chief runs your training "
                 "program and the evaluator runs an evaluation loop.")

    exit_if_over_the_task_limit(config["cluster"])

    address = config["cluster"][task_type][task_index]
    port = int(address.rpartition(":")[2])
    if not processes.port_is_free(port):  # said at once, before TensorFlow loads
        exit_port_taken(address, port)

    server_lib, errors = tensorflow_server()
    try:
        server = server_lib.Server(server_lib.ClusterSpec(config["cluster"]), job_name=task_type,
                                   task_index=task_index, protocol="grpc", start=True)
    except errors.UnknownError as error:
        if processes.port_is_free(port):  # not a port clash: fail with the error itself (exit code 1)
            raise
        exit_port_taken(address, port, f": {error.message}")  # taken since the check above
    # Started only now, so a parent that died during start-up is noticed at once here.
    children.exit_with_parent_if_started_by_one()
    print(f"{processes.SERVER_MODULE}: {task_type}:{task_index} {loglines.SERVING} {address} "
          "(listening on all interfaces, no authentication)", flush=True)
    server.join()


def exit_if_over_the_task_limit(cluster):
    """Exit, before TensorFlow loads, if the cluster's servers are more than ``LABKIT_MAX_TASKS`` allows, or
    this user's running tasks (this one among them) more than ``LABKIT_MAX_USER_TASKS``: so a cluster started by
    hand (exercise 1, an exported plan) is capped as a LocalCluster is."""
    workers, ps = len(cluster.get("worker", [])), len(cluster.get("ps", []))
    try:
        children.check_task_limit(workers + ps, f"{workers} workers and {ps} parameter servers in TF_CONFIG",
                                  starting=0)
    except ValueError as error:  # a TaskLimitError, or a limit that is not a number
        sys.exit(f"{processes.SERVER_MODULE}: {error}")


def tensorflow_server():
    """TensorFlow's server module (``tf.distribute.Server`` is its ``Server``) and its errors, loaded alone.

    A task only serves: every operation it runs lives in TensorFlow's C++ library, which this loads.
    ``import tensorflow`` would also run TensorFlow's whole Python API (thousands of modules: Keras,
    autograph, ...), which a task never uses: seconds of CPU and hundreds of MB in every task.
    An empty stand-in for the ``tensorflow`` package lets the server module load without
    ``tensorflow/__init__.py``. (In a process that imported TensorFlow already, it is that one.)
    """
    if "tensorflow" not in sys.modules:
        package = types.ModuleType("tensorflow")
        package.__path__ = importlib.util.find_spec("tensorflow").submodule_search_locations
        sys.modules["tensorflow"] = package
    from tensorflow.python.framework import errors
    from tensorflow.python.training import server_lib
    return server_lib, errors


def exit_port_taken(address, port, detail=""):
    """Exit with the code that tells the starter to pick another port and try again."""
    print(f"{processes.SERVER_MODULE}: could not listen on {address}, port {port} is taken by another program{detail}",
          flush=True)
    sys.exit(processes.EXIT_PORT_IN_USE)


if __name__ == "__main__":
    main()
