"""The fault matrix: kinds of failure, alone and combined, each a round on a small cluster that says what went wrong.

A round runs on a cluster of 2 workers and 1 PS and returns what went wrong, or None. Kinds: a worker killed and restarted (no recovery); a PS killed (one recovery, from the checkpoint before it);
the coordinator program killed after a checkpoint (it resumes and finishes); and the combinations: a worker
dead when a PS dies, every worker dead at once then restarted, two PS failures in a row, a PS that dies again
while its recovery restores, a PS killed while a checkpoint is being written (the latest complete checkpoint is
restored), and the coordinator program killed while a worker is dead (the new one waits until the worker is
back). Every round must finish its steps, each recovery losing at most one checkpoint interval, with every task
alive at the end. ``stress`` repeats a kind, each run of rounds in a child process with its own cluster; a child
that crashes fails its round, and a new child goes on (scripts/stress_faults.py; tests/test_fault_matrix.py runs
one round of each combination).
"""
import faulthandler
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import tensorflow as tf

import labkit
from labkit import checks, faults, recovery
from labkit.checks.core import CheckFailed
from labkit.data import load_mnist
from labkit.runtime import loglines

NUM_STEPS, CHECKPOINT_EVERY = 120, 40
WORKER_FAULTS = [faults.Fault(50, "worker:1"), faults.Fault(90, "worker:1", "restart")]
PS_KILL_STEP = 70
COORDINATOR_KILL = loglines.timeline_event(40, loglines.CHECKPOINT_SAVED)


def recovery_run(cluster, data, injected_faults=(), make_job=None, checkpoint_dir=None):
    """NUM_STEPS of MNIST (or ``make_job``'s) under the recovery driver, ``injected_faults`` injected."""
    checkpoints = recovery.Checkpoints(checkpoint_dir or tempfile.mkdtemp(prefix="labkit-stress-"), CHECKPOINT_EVERY)
    return faults.train_with_faults(cluster, make_job or (lambda: recovery.mnist_job(cluster.resolver(), data)),
                                    NUM_STEPS, checkpoints, injected_faults)


def outcome(report, cluster, ps_failures):
    """The problem with a run that had ``ps_failures`` recoveries, or None: each recovery resumed from the
    checkpoint before its failure (at most one interval lost), the run finished, every task is alive."""
    dead = [row["task"] for row in cluster.status() if not row["alive"]]
    try:
        checks.one_recovery_per_failure(report, ps_failures, NUM_STEPS)
    except CheckFailed as failed:
        return str(failed)
    lost = [recovery["steps_lost"] for recovery in report.recoveries if recovery["steps_lost"] > CHECKPOINT_EVERY]
    if lost or dead:
        return f"steps lost {lost} (more than one interval), dead tasks at the end {dead}"
    return None


def worker_round(cluster, data):
    report = recovery_run(cluster, data, WORKER_FAULTS)
    if report.recoveries or report.final_step < NUM_STEPS:
        return f"recoveries {report.recoveries}, final step {report.final_step}"
    return None


def ps_round(cluster, data):
    report = recovery_run(cluster, data, [faults.Fault(PS_KILL_STEP, "ps:0")])
    resumed = [recovery["resumed_from_step"] for recovery in report.recoveries]
    expected = PS_KILL_STEP // CHECKPOINT_EVERY * CHECKPOINT_EVERY
    if resumed != [expected] or report.final_step < NUM_STEPS:
        return f"resumed from {resumed} (expected [{expected}]), final step {report.final_step}"
    return None


def worker_then_ps_round(cluster, data):
    """A worker dies and stays dead; then the PS dies."""
    report = recovery_run(cluster, data, [faults.Fault(30, "worker:1"), faults.Fault(PS_KILL_STEP, "ps:0")])
    return outcome(report, cluster, 1)


def all_workers_round(cluster, data):
    """Every worker dies at once; both are restarted a little later: no recovery needed."""
    report = recovery_run(cluster, data, [faults.Fault(50, "worker:0"), faults.Fault(50, "worker:1"),
                                          faults.Fault(60, "worker:0", "restart"),
                                          faults.Fault(60, "worker:1", "restart")])
    return outcome(report, cluster, 0)


def ps_twice_round(cluster, data):
    """The PS dies, and dies again after the recovery."""
    report = recovery_run(cluster, data, [faults.Fault(50, "ps:0"), faults.Fault(PS_KILL_STEP + 20, "ps:0")])
    return outcome(report, cluster, 2)


def ps_again_during_recovery_round(cluster, data):
    """The PS dies; its new process dies too, right after the rebuilt job connects, before the restore."""
    builds = []

    def make_job():
        job = recovery.mnist_job(cluster.resolver(), data)
        builds.append(job)
        if len(builds) == 2:  # the first rebuild
            cluster.kill("ps:0")
        return job
    report = recovery_run(cluster, data, [faults.Fault(PS_KILL_STEP, "ps:0")], make_job=make_job)
    if len(builds) != 3:
        return f"the job was built {len(builds)} times, not 3 (the start, the failed rebuild, the recovery)"
    return outcome(report, cluster, 1)


def ps_during_save_round(cluster, data, ballast_floats=5_000_000):
    """The PS is killed while the second checkpoint is being written: the first one is restored."""
    checkpoint_dir = Path(tempfile.mkdtemp(prefix="labkit-stress-"))

    def make_job():  # 20 MB more on the PS: a save lasts long enough to be interrupted
        job = recovery.mnist_job(cluster.resolver(), data)
        with job.strategy.scope():
            job.model.ballast = tf.Variable(tf.zeros([ballast_floats]))
        return job

    with faults.KillDuringSave(cluster, "ps:0", checkpoint_dir, save=2) as killer:  # a complete one before it
        report = recovery_run(cluster, data, make_job=make_job, checkpoint_dir=checkpoint_dir)
    if killer.killed_during is None:
        return "ps:0 was never killed during a save"
    killed_step = int(killer.killed_during.rpartition("-")[2])
    complete_before = max(step for step in report.step if step < killed_step)
    resumed = [recovery["resumed_from_step"] for recovery in report.recoveries]
    if resumed != [complete_before]:
        return (f"killed during the save of step {killed_step}: resumed from {resumed}, not from the last complete "
                f"checkpoint, step {complete_before}")
    return outcome(report, cluster, 1)


def coordinator_arguments():
    return ["--checkpoint-dir", tempfile.mkdtemp(prefix="labkit-stress-"), "--num-steps", str(NUM_STEPS),
            "--checkpoint-every", str(CHECKPOINT_EVERY)]


def coordinator_outcome(lines):
    """The problem with a restarted coordinator program's lines, or None: it resumed from a checkpoint and finished."""
    resumed = [loglines.resumed_step(line) for line in lines if loglines.RESUMED in line]
    finished = loglines.finished(lines[-1])
    if resumed not in ([40], [80]) or finished is None or finished[0] != NUM_STEPS:
        return f"resumed: {resumed}, last line: {lines[-1]}"
    return None


def coordinator_round(cluster, data):
    restarted = faults.kill_and_restart_coordinator(cluster, coordinator_arguments(), kill_when=COORDINATOR_KILL,
                                                    resumed_when=loglines.RESUMED, finished_when=loglines.FINISHED)
    return coordinator_outcome(restarted.after_restart)


def coordinator_while_worker_dead_round(cluster, data, dead_seconds=3.0):
    """worker:1 dies, then the coordinator program; the new program waits until worker:1 is back, which
    happens ``dead_seconds`` later (as a cluster manager would restart it), and resumes."""
    arguments = coordinator_arguments()
    first = faults.start_coordinator(cluster, *arguments)
    faults.read_until(first, COORDINATOR_KILL)
    cluster.kill("worker:1")
    first.kill()
    first.wait()
    back = threading.Timer(dead_seconds, cluster.restart, args=("worker:1",))
    back.start()
    second = faults.start_coordinator(cluster, *arguments)
    lines = faults.read_until(second, loglines.FINISHED)
    back.join()
    if second.wait() != 0:
        return f"the restarted coordinator exited with code {second.returncode}: {lines[-3:]}"
    return coordinator_outcome(lines)


ROUNDS = {"worker": worker_round, "ps": ps_round, "coordinator": coordinator_round,
          "worker-then-ps": worker_then_ps_round, "all-workers": all_workers_round, "ps-twice": ps_twice_round,
          "ps-again-during-recovery": ps_again_during_recovery_round, "ps-during-save": ps_during_save_round,
          "coordinator-while-worker-dead": coordinator_while_worker_dead_round}


def run_rounds(kind, rounds, first_round):
    """Run ``rounds`` rounds of ``kind`` in this process, printing one line per round."""
    faulthandler.enable()  # a crash inside TensorFlow prints the Python stack before the process dies
    data = load_mnist()
    with labkit.LocalCluster(num_workers=2, num_ps=1, chief=True, name=f"stress-{kind}", ready_timeout=600) as cluster:
        for round_number in range(first_round, first_round + rounds):
            began = time.monotonic()
            try:
                problem = ROUNDS[kind](cluster, data)
            except Exception as error:  # a failed round is counted, not fatal
                problem = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:200]}"
            print(f"{kind:<29} round {round_number:>3}: {'FAILED ' + problem if problem else 'ok'} "
                  f"({time.monotonic() - began:.0f} s)", flush=True)
            for row in cluster.status():
                if not row["alive"]:
                    cluster.restart(row["task"])


def stress(kind, rounds):
    """Run the rounds of ``kind`` in child processes; a child that crashes fails its round and a new one goes on.

    Returns the number of failed rounds.
    """
    failures, done = 0, 0
    while done < rounds:
        child = subprocess.Popen([sys.executable, "-m", __name__, kind, str(rounds - done), str(done + 1)],
                                 stdout=subprocess.PIPE, text=True)
        for line in child.stdout:
            print(line, end="", flush=True)
            if " round " in line and line.startswith(kind):
                done += 1
                failures += "FAILED" in line
        if child.wait() != 0 and done < rounds:
            done += 1
            failures += 1
            print(f"{kind:<29} round {done:>3}: FAILED the process died with exit code {child.returncode}",
                  flush=True)
    return failures


if __name__ == "__main__":  # a child of stress(): KIND ROUNDS FIRST_ROUND
    run_rounds(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
