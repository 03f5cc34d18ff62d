"""Repeat the worker, parameter-server and coordinator kill scenarios and count the failures.

    python scripts/stress_faults.py --rounds 20            # all three kinds, 20 rounds each
    python scripts/stress_faults.py --rounds 5 --kinds ps

A round fails if it raises or its outcome is wrong: a worker kill must cost no recovery, one
PS kill must give exactly one recovery from the checkpoint before it, and a killed coordinator
must resume from a checkpoint and finish. Each kind runs in a child process with its own small
cluster (2 workers, 1 PS); a child that crashes fails its round, and a new child goes on.
"""
import argparse
import faulthandler
import subprocess
import sys
import tempfile
import time

import labkit
from labkit import faults
from labkit.data import load_mnist
from labkit.runtime import loglines

NUM_STEPS, CHECKPOINT_EVERY = 120, 40
WORKER_FAULTS = [faults.Fault(50, "worker:1"), faults.Fault(90, "worker:1", "restart")]
PS_KILL_STEP = 70
COORDINATOR_KILL = loglines.timeline_event(40, loglines.CHECKPOINT_SAVED)


def recovery_run(cluster, data, injected_faults):
    return faults.train_with_faults(cluster, lambda: faults.mnist_job(cluster.resolver(), data), NUM_STEPS,
                                    tempfile.mkdtemp(prefix="labkit-stress-"), CHECKPOINT_EVERY,
                                    faults=injected_faults)


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


def coordinator_round(cluster, data):
    arguments = ["--checkpoint-dir", tempfile.mkdtemp(prefix="labkit-stress-"), "--num-steps", str(NUM_STEPS),
                 "--checkpoint-every", str(CHECKPOINT_EVERY)]
    _, lines, _ = faults.kill_and_restart_coordinator(cluster, arguments, kill_when=COORDINATOR_KILL,
                                                      resumed_when=loglines.RESUMED,
                                                      finished_when=loglines.FINISHED)
    resumed = [loglines.resumed_step(line) for line in lines if loglines.RESUMED in line]
    if resumed not in ([40], [80]) or loglines.finished(lines[-1]) is None \
            or loglines.finished(lines[-1])[0] != NUM_STEPS:
        return f"resumed: {resumed}, last line: {lines[-1]}"
    return None


ROUNDS = {"worker": worker_round, "ps": ps_round, "coordinator": coordinator_round}


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
            print(f"{kind:<11} round {round_number:>3}: {'FAILED ' + problem if problem else 'ok'} "
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
        child = subprocess.Popen([sys.executable, __file__, "--kinds", kind, "--rounds", str(rounds - done),
                                  "--first-round", str(done + 1), "--in-process"],
                                 stdout=subprocess.PIPE, text=True)
        for line in child.stdout:
            print(line, end="", flush=True)
            if " round " in line and line.startswith(kind):
                done += 1
                failures += "FAILED" in line
        if child.wait() != 0 and done < rounds:
            done += 1
            failures += 1
            print(f"{kind:<11} round {done:>3}: FAILED the process died with exit code {child.returncode}",
                  flush=True)
    return failures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="rounds of each kind")
    parser.add_argument("--kinds", nargs="+", choices=sorted(ROUNDS), default=list(ROUNDS))
    parser.add_argument("--first-round", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.in_process:
        run_rounds(args.kinds[0], args.rounds, args.first_round)
        return 0
    failures = {kind: stress(kind, args.rounds) for kind in args.kinds}
    print("\nfailed rounds per kind:")
    for kind, failed in failures.items():
        print(f"  {kind:<11} {failed} of {args.rounds}")
    return 1 if sum(failures.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
