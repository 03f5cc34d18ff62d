"""Child processes that never outlive the process that started them.

The parent keeps the write end of each child's stdin pipe and never writes to it.
However the parent ends (exit, exception, Ctrl-C, SIGKILL, a killed kernel), the
operating system closes that pipe; the child, blocked reading stdin in a thread,
sees end-of-file and exits at once. (``labkit.runtime.processes`` stops them, waits for
them and reads their logs.) Whatever starts task processes checks ``check_task_limit`` first.
"""
import json
import os
import subprocess
import sys
import threading

import psutil

from labkit.runtime import processes

# Set by start(): only a child whose stdin is that pipe may treat end-of-file as "parent gone".
# Run by hand (stdin a terminal, or /dev/null under nohup), a labkit program must not exit.
STARTED_BY_PARENT = "LABKIT_EXIT_WITH_PARENT"
# If set, one cluster (a LocalCluster, an all-reduce run) may have at most this many task processes.
MAX_TASKS_VARIABLE = "LABKIT_MAX_TASKS"
# If set, this Unix user may run at most this many task processes at once, over all their clusters (a class hub's cap).
MAX_USER_TASKS_VARIABLE = "LABKIT_MAX_USER_TASKS"
TASK_MODULES = (processes.SERVER_MODULE, "labkit.allreduce")  # the programs that count as task processes


def start(module, *arguments, env=None, stdout=subprocess.PIPE, stderr=subprocess.STDOUT):
    """Run ``python -m module arguments...`` as a child that exits with this process.

    The child must call ``exit_with_parent_if_started_by_one()`` (labkit's programs do).
    With the default ``stdout``, read its output as text from ``process.stdout``.
    """
    return start_command([sys.executable, "-m", module, *arguments], env=env, stdout=stdout, stderr=stderr)


def start_program(module, *arguments, log_path, tf_config=None, read_stdout=False, env=None):
    """Start labkit program ``module`` (``python -m module arguments...``) as a child that exits with this one.

    ``tf_config`` (a dict) becomes its TF_CONFIG. Its output is appended to ``log_path``; with
    ``read_stdout``, only its stderr is, and its stdout is read as text from ``process.stdout``
    (a program whose printed lines are its results, such as the coordinator's timeline).
    """
    env = dict(os.environ if env is None else env, PYTHONUNBUFFERED="1")
    if tf_config is not None:
        env["TF_CONFIG"] = json.dumps(tf_config)
    with open(log_path, "ab") as log:
        if read_stdout:
            return start(module, *arguments, env=env, stderr=log)
        return start(module, *arguments, env=env, stdout=log)


def start_command(command, env=None, stdout=subprocess.PIPE, stderr=subprocess.STDOUT):
    """Like ``start``, for any command that ends up running a labkit program (``sh run.sh``, say).

    Whatever it runs on the way (a shell, ``ip netns exec``) must pass on stdin and the
    environment, and should ``exec`` the program so that killing this process kills it.
    Returns a ``labkit.runtime.processes.Process``; ``process.stop()`` stops it.
    """
    env = dict(os.environ if env is None else env, **{STARTED_BY_PARENT: "1"})
    return processes.start_command(command, env=env, stdin=subprocess.PIPE, stdout=stdout, stderr=stderr)


def exit_with_parent_if_started_by_one():
    """In the child: if ``start`` launched us, exit when that parent exits (checked in a thread)."""
    if os.environ.get(STARTED_BY_PARENT) == "1":
        threading.Thread(target=exit_when_parent_exits, daemon=True).start()


def exit_when_parent_exits():
    """In the child: exit as soon as stdin closes, which happens when the parent dies by any route.

    Reads the raw file descriptor: a thread blocked in ``sys.stdin`` would hold its lock
    and make a normal interpreter exit abort.
    """
    while os.read(0, 4096):
        pass
    os._exit(0)


class TaskLimitError(ValueError):
    """A cluster asked for more task processes than ``LABKIT_MAX_TASKS`` allows."""


def check_task_limit(count, asked, starting=None):
    """Raise a TaskLimitError if ``count`` task processes are more than ``LABKIT_MAX_TASKS`` allows, or if this
    user's running task processes and the ``starting`` ones (default: all ``count``) are more than
    ``LABKIT_MAX_USER_TASKS`` allows.

    ``asked`` says what asked for them, e.g. "16 workers and 1 parameter servers". Every launcher of a
    cluster's task processes calls this before it starts any, and each task server checks its TF_CONFIG's
    cluster again, already running itself (``starting=0``), so servers started by hand are capped too.
    """
    limit = _limit(MAX_TASKS_VARIABLE)
    if limit is not None and count > limit:
        raise TaskLimitError(f"{asked} make {count} task processes, but at most {limit} are allowed here "
                             f"({MAX_TASKS_VARIABLE}={limit}, which labkit grade sets so that one notebook cannot "
                             "take the machine): ask for fewer.")
    user_limit = _limit(MAX_USER_TASKS_VARIABLE)
    starting = count if starting is None else starting
    if user_limit is not None and (running := len(running_tasks_of_this_user())) + starting > user_limit:
        raise TaskLimitError(f"{asked}: with the {running} task processes you run already, you would run "
                             f"{running + starting}, but at most {user_limit} are allowed at once for each user here "
                             f"({MAX_USER_TASKS_VARIABLE}={user_limit}, which the class's JupyterHub sets so that one "
                             "learner cannot take the server). `labkit status` lists your clusters: stop those you no "
                             "longer need (shut down their notebooks' kernels), or ask for fewer.")


def _limit(variable):
    """The whole number in environment ``variable``, or None when it is unset or empty."""
    limit = os.environ.get(variable)
    if not limit:
        return None
    if not limit.isdigit():
        raise ValueError(f"{variable} must be a whole number of task processes, got {limit!r}.")
    return int(limit)


def running_tasks_of_this_user():
    """The task processes (``TASK_MODULES``) this Unix user runs now, in any of their clusters and namespaces."""
    me = os.getuid()
    return [process for process in psutil.process_iter(["uids", "cmdline"])
            if process.info["uids"] and process.info["uids"].real == me
            and any(module in (process.info["cmdline"] or []) for module in TASK_MODULES)]
