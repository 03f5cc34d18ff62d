"""Every check in labkit.checks rejects a wrong result (and accepts the right one).

Sections follow labkit/checks.py. Real objects throughout: real processes, real checkpoints
written by TensorFlow, real matplotlib axes; only the numbers fed in are chosen to be wrong.
"""
import json
import subprocess
import sys
import types

import matplotlib
import numpy as np
import psutil
import pytest

import labkit  # noqa: F401  (Keras 2 before TensorFlow)
from labkit import checks, faults, staleness
from labkit.cluster import Task
from labkit.bench.costmodel import Prediction

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

tf = pytest.importorskip("tensorflow")


@pytest.fixture
def sleeper(tmp_path):
    """A real, idle child process (killed at the end)."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path)
    yield process
    process.kill()
    process.wait()


def saved_steps(directory, steps):
    """Real checkpoints of an optimizer whose step counter is at each of ``steps``."""
    optimizer = tf.keras.optimizers.legacy.Adam()
    checkpoint = tf.train.Checkpoint(optimizer=optimizer)
    manager = tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=5)
    for step in steps:
        optimizer.iterations.assign(step)
        manager.save(checkpoint_number=step)
    return manager


# ----- exercise 1 ----------------------------------------------------------------------
def test_ex1_a_non_loopback_host_is_refused_with_the_security_fact():
    cluster = {"ps": ["10.0.0.5:2222"], "worker": ["localhost:2223"], "chief": ["localhost:2224"]}
    configs = {f"{job}:{index}": {"cluster": cluster, "task": {"type": job, "index": index}}
               for job, addresses in cluster.items() for index in range(len(addresses))}
    with pytest.raises(AssertionError, match="listens on every interface whatever host"):
        checks.tf_configs(configs, 1)


def ex1_configs(ports):
    cluster = {"ps": [f"localhost:{ports[0]}"], "worker": [f"localhost:{ports[1]}"], "chief": [f"localhost:{ports[2]}"]}
    return {f"{job}:{index}": {"cluster": cluster, "task": {"type": job, "index": index}}
            for job, addresses in cluster.items() for index in range(len(addresses))}


@pytest.mark.parametrize("names, message", [
    (["ps:0", "worker:0", "chief:0"], "do not start a server for chief:0"),
    (["ps:0"], r"start one process for each of \['ps:0', 'worker:0'\]"),
])
def test_ex1_servers_serving_needs_one_process_per_server(sleeper, names, message):
    with pytest.raises(AssertionError, match=message):
        checks.servers_serving({name: sleeper for name in names}, ex1_configs([2222, 2223, 2224]))


def test_ex1_a_server_that_exited_is_named(tmp_path):
    exited = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    exited.wait()
    with pytest.raises(AssertionError, match="exited with code 3 before serving"):
        checks.servers_serving({"ps:0": exited, "worker:0": exited}, ex1_configs([2222, 2223, 2224]))


def test_ex1_a_server_that_never_listens_is_named_after_the_timeout(sleeper):
    with pytest.raises(AssertionError, match="ps:0 is not reachable on port 2222 after 1 s"):
        checks.servers_serving({"ps:0": sleeper, "worker:0": sleeper}, ex1_configs([2222, 2223, 2224]), timeout=1.0)


def test_ex1_a_chief_that_did_not_join_is_refused():
    with pytest.raises(AssertionError, match="this notebook does not serve at localhost:2224"):
        checks.cluster_trained(ex1_configs([2222, 2223, 2224]), model=None, data=None, target_accuracy=0.9)


def test_ex1_processes_still_running_are_named(sleeper):
    with pytest.raises(AssertionError, match="still running: ps:0"):
        checks.processes_stopped({"ps:0": sleeper})


def test_a_checklist_names_the_checks_not_passed():
    checklist = checks.Checklist("Exercise 9", ["first", "second"])
    checklist.passed("first")
    with pytest.raises(AssertionError, match="not passed yet: second"):
        checklist.summary()
    with pytest.raises(ValueError, match="is not a check of Exercise 9"):
        checklist.passed("third")
    checklist.passed("second")
    checklist.summary()


# ----- exercise 3 ----------------------------------------------------------------------
def test_ex3_the_latest_checkpoint_must_be_the_last_one_due(tmp_path):
    saved_steps(tmp_path / "right", [100, 200])
    checks.checkpoint_saved(str(tmp_path / "right"), 250, 100)
    saved_steps(tmp_path / "at-the-end", [100, 200, 250])
    with pytest.raises(AssertionError, match="should hold step 200"):
        checks.checkpoint_saved(str(tmp_path / "at-the-end"), 250, 100)
    with pytest.raises(AssertionError, match="no checkpoint"):
        checks.checkpoint_saved(str(tmp_path / "none"), 250, 100)


def killed_ps(sleeper, tmp_path, killed_at, counter):
    """A KillAtStep that killed ps:0 at step ``killed_at``: its cluster has one task, ps:0, run by ``sleeper``."""
    task = Task("ps", 0, 2222, tmp_path / "ps-0.log", sleeper)
    failure = faults.KillAtStep(types.SimpleNamespace(task=lambda name: task), "ps:0", counter, killed_at + 10)
    failure.killed_at = killed_at
    return failure


def job_at(step):
    optimizer = tf.keras.optimizers.legacy.Adam()
    optimizer.iterations.assign(step)
    return faults.TrainingJob(None, None, None, optimizer, None, None, 10, 1)


@pytest.mark.parametrize("restored, message", [
    (0, "starts at step 0, but the checkpoint of step 200"),
    (400, "at step 400, but the last checkpoint before the failure"),
])
def test_ex3_recovery_is_read_from_the_restored_job(sleeper, tmp_path, restored, message):
    old_job = job_at(250)
    failure = killed_ps(sleeper, tmp_path, 250, old_job.optimizer.iterations)
    assert checks.recovered(job_at(200), failure, 100) == 200
    with pytest.raises(checks.CheckFailed, match=message):
        checks.recovered(job_at(restored), failure, 100)
    with pytest.raises(checks.CheckFailed, match="still the job whose parameter server died"):
        checks.recovered(old_job, failure, 100)
    failure.killed_at = None
    with pytest.raises(checks.CheckFailed, match="never killed"):
        checks.recovered(job_at(200), failure, 100)


def test_ex3_a_dead_ps_must_be_restarted(sleeper, tmp_path):
    failure = killed_ps(sleeper, tmp_path, 250, job_at(250).optimizer.iterations)
    sleeper.kill()
    sleeper.wait()
    with pytest.raises(checks.CheckFailed, match="ps:0 is still dead"):
        checks.recovered(job_at(200), failure, 100)


def test_ex3_training_must_reach_num_steps():
    optimizer = tf.keras.optimizers.legacy.Adam()
    optimizer.iterations.assign(150)
    job = faults.TrainingJob(None, None, None, optimizer, None, None, 10, 1)
    with pytest.raises(AssertionError, match="training ended at step 150, not 200"):
        checks.trained_to(job, 200, data=None, target_accuracy=0.9)


# ----- exercise 4 ----------------------------------------------------------------------
RIGHT_TIMES = {1: [2.0, 2.2, 2.1], 2: [1.5, 1.2, 1.4]}


@pytest.mark.parametrize("times, message", [
    ({1: [2.0, 2.2, 2.1]}, "time every worker count"),
    ({1: 2.1, 2: [1.5, 1.2, 1.4]}, "must return a list of 3"),
    ({1: [2.0, 2.2, 2.1], 2: [1.5, 1.5, 1.5]}, "do not copy one timing"),
    ({1: [2.0, 2.2, 2.1], 2: [1.5, 0.0, 1.4]}, "measure seconds as a float"),
])
def test_ex4_timings_must_be_separate_repeats(times, message):
    checks.timed_every_worker_count(RIGHT_TIMES, [1, 2], 3)
    with pytest.raises(AssertionError, match=message):
        checks.timed_every_worker_count(times, [1, 2], 3)


@pytest.mark.parametrize("answer, message", [
    ({(1, 2): False, (2, 3): False}, "1 vs 2 workers"),
    ({(1, 2): True, (2, 3): True}, "2 vs 3 workers"),
    ({2: True, 3: False}, "one per pair of consecutive worker counts"),
])
def test_ex4_differences_beyond_the_spread_are_those_whose_timings_do_not_overlap(answer, message):
    times = {**RIGHT_TIMES, 3: [1.3, 1.6, 1.45]}  # 1 vs 2 apart; 2 vs 3 overlap
    checks.beyond_spread({(1, 2): True, (2, 3): False}, times)
    with pytest.raises(checks.CheckFailed, match=message):
        checks.beyond_spread(answer, times)


def test_ex4_spreads_must_come_from_the_timings():
    right = {1: (2.2 - 2.0) / 2.1, 2: (1.5 - 1.2) / 1.4}
    checks.spread_is_range_over_median(right, RIGHT_TIMES)
    with pytest.raises(AssertionError, match="give \\(max - min\\) / median"):
        checks.spread_is_range_over_median({1: right[1], 2: 0.3}, RIGHT_TIMES)


def errorbar_axis(xs, medians, low, high, label=True):
    figure, axis = plt.subplots()
    axis.errorbar(xs, medians, yerr=[[m - lo for m, lo in zip(medians, low)], [hi - m for m, hi in zip(medians, high)]])
    if label:
        axis.set_xlabel("workers")
        axis.set_ylabel("seconds")
    plt.close(figure)
    return axis


@pytest.mark.parametrize("make_axis, message", [
    (lambda: errorbar_axis([0, 1], [2.1, 1.4], [2.0, 1.2], [2.2, 1.5]), "not the worker counts"),
    (lambda: errorbar_axis([1, 2], [2.0, 1.2], [2.0, 1.2], [2.2, 1.5]), "not the median times"),
    (lambda: errorbar_axis([1, 2], [2.1, 1.4], [2.1, 1.4], [2.1, 1.4]), "not fastest to slowest"),
    (lambda: errorbar_axis([1, 2], [2.1, 1.4], [2.0, 1.2], [2.2, 1.5], label=False), "label both axes"),
])
def test_ex4_the_plot_must_show_medians_and_their_range(make_axis, message):
    checks.plot_shows(errorbar_axis([1, 2], [2.1, 1.4], [2.0, 1.2], [2.2, 1.5]), RIGHT_TIMES)
    with pytest.raises(AssertionError, match=message):
        checks.plot_shows(make_axis(), RIGHT_TIMES)


def test_ex4_a_plain_line_without_error_bars_is_refused():
    figure, axis = plt.subplots()
    axis.plot([1, 2], [2.1, 1.4])
    axis.set_xlabel("workers")
    axis.set_ylabel("seconds")
    plt.close(figure)
    with pytest.raises(AssertionError, match="no vertical error bars"):
        checks.plot_shows(axis, RIGHT_TIMES)


# ----- exercise 5 ----------------------------------------------------------------------
class MyFilter(staleness.StalenessFilter):
    """A learner's filter: a name of its own and its own scale()."""

    def __init__(self, max_tau):
        super().__init__(max_tau)
        self.name = f"my filter τ≤{max_tau}"

    def scale(self, tau):
        return tf.cast(tau <= self.max_tau, tf.float32)


def test_ex5_the_run_must_use_the_learners_filter():
    checks.used_own_filter(staleness.Run(rule="my filter τ≤0", delay="none", learning_rate=0.1), MyFilter, 0)
    with pytest.raises(checks.CheckFailed, match="not your filter"):
        checks.used_own_filter(staleness.Run(rule="drop τ>0", delay="none", learning_rate=0.1), MyFilter, 0)
    with pytest.raises(checks.CheckFailed, match="takes scale\\(\\) from labkit's StalenessFilter"):
        checks.used_own_filter(staleness.Run(rule="drop τ>0", delay="none", learning_rate=0.1),
                               staleness.StalenessFilter, 0)


def test_ex5_the_dropped_share_is_read_from_the_histogram():
    run = staleness.Run(rule="my filter τ≤0", delay="none", learning_rate=0.1, counts=np.array([[6, 3], [10, 1]]),
                        dropped=4)
    checks.dropped_share_read(0.2, run)
    with pytest.raises(checks.CheckFailed, match="dropped 4 of the 20 updates"):
        checks.dropped_share_read(0.8, run)


# ===== lesson notebooks 00, 01, 07, 08, 09 =============================================
def test_00_keras_3_is_refused():
    checks.keras_2("2.21.0")
    with pytest.raises(AssertionError, match="needs Keras 2"):
        checks.keras_2("3.10.0")


def test_01_09_a_task_with_another_cluster_is_named():
    cluster = {"ps": ["localhost:1"], "worker": ["localhost:2"]}
    configs = {"ps:0": {"cluster": cluster}, "worker:0": {"cluster": dict(cluster, worker=["localhost:3"])}}
    checks.same_cluster_everywhere({"ps:0": configs["ps:0"]}, cluster)
    with pytest.raises(AssertionError, match="cluster part of worker:0 differs"):
        checks.same_cluster_everywhere(configs, cluster)
    with pytest.raises(AssertionError, match="no task"):
        checks.same_cluster_everywhere({}, cluster)


def test_01_a_different_received_tf_config_is_refused():
    config = {"cluster": {"ps": ["localhost:1"]}, "task": {"type": "ps", "index": 0}}
    checks.received_its_tf_config("ps:0", config, config)
    with pytest.raises(AssertionError, match="ps:0 got TF_CONFIG"):
        checks.received_its_tf_config("ps:0", dict(config, task={"type": "ps", "index": 1}), config)


@pytest.mark.parametrize("sockets, message", [
    ([("::", 2223)], "does not listen on its port 2222"),
    ([("127.0.0.1", 2222)], "listens on \\['127.0.0.1'\\] only"),
])
def test_01_a_server_must_listen_on_its_port_on_every_interface(sockets, message):
    checks.listens_on_every_interface("ps:0", 2222, [("::", 2222)])
    checks.listens_on_every_interface("ps:0", 2222, [("0.0.0.0", 2222)])
    with pytest.raises(AssertionError, match=message):
        checks.listens_on_every_interface("ps:0", 2222, sockets)


def test_01_kill_and_restart_checks_on_real_processes(sleeper, tmp_path):
    task = Task("worker", 1, 2222, tmp_path / "worker-1.log", sleeper)
    with pytest.raises(AssertionError, match="still alive after the kill"):
        checks.task_dead(task)
    checks.restarted_in_place(task, old_pid=sleeper.pid + 1, old_port=2222)
    with pytest.raises(AssertionError, match="still has pid"):
        checks.restarted_in_place(task, old_pid=sleeper.pid, old_port=2222)
    with pytest.raises(AssertionError, match="moved from port 2223"):
        checks.restarted_in_place(task, old_pid=sleeper.pid + 1, old_port=2223)
    with pytest.raises(AssertionError, match="still running: worker:1"):
        checks.pids_gone({"worker:1": sleeper.pid})
    sleeper.kill()
    sleeper.wait()
    checks.task_dead(task)
    checks.pids_gone({"worker:1": sleeper.pid})
    with pytest.raises(AssertionError, match="not alive after the restart"):
        checks.restarted_in_place(task, old_pid=sleeper.pid + 1, old_port=2222)


def report(final_step, steps_scheduled=0, recoveries=(), checkpoint_steps=()):
    recovered = faults.RecoveryReport(timeline=faults.Timeline(), recoveries=list(recoveries),
                                      steps_scheduled=steps_scheduled)
    for step in sorted({*checkpoint_steps, final_step}):  # a row per checkpoint; the last at the final step
        recovered.record(step, 0.0)
    return recovered


@pytest.mark.parametrize("wrong, message", [
    (report(600, 600, recoveries=[{}]), "needs none"),
    (report(590, 590), "before 600"),
    (report(600, 610), "only 600 ran"),
])
def test_07_a_worker_failure_must_lose_no_step(wrong, message):
    checks.at_least_once(report(606, 600), 600)
    with pytest.raises(AssertionError, match=message):
        checks.at_least_once(wrong, 600)


def test_07_accuracy_and_restarted_worker_checks():
    checks.close_accuracy(0.90, 0.91, 0.03)
    with pytest.raises(AssertionError, match="more than 0.03 apart"):
        checks.close_accuracy(0.80, 0.91, 0.03)
    checks.worked_after_restart(1.0, 3.0)
    with pytest.raises(AssertionError, match="not given any work"):
        checks.worked_after_restart(1.0, 1.05)


RECOVERY = {"failed_at_step": 250, "resumed_from_step": 200, "steps_lost": 50}


@pytest.mark.parametrize("wrong, message", [
    (report(400, recoveries=[RECOVERY, dict(RECOVERY, failed_at_step=200, steps_lost=0)],
            checkpoint_steps=[100, 200, 300, 400]), "gave 2 recoveries"),
    (report(400, recoveries=[dict(RECOVERY, resumed_from_step=100, steps_lost=150)],
            checkpoint_steps=[100, 200, 300, 400]), "last checkpoint before the failure"),
    (report(400, recoveries=[dict(RECOVERY, steps_lost=250)], checkpoint_steps=[100, 200, 300, 400]), "250"),
    (report(300, recoveries=[RECOVERY], checkpoint_steps=[100, 200, 300]), "before 400"),
])
def test_07_one_ps_failure_must_give_one_recovery_from_the_checkpoint_before_it(wrong, message):
    checks.one_recovery_per_failure(report(400, recoveries=[RECOVERY], checkpoint_steps=[100, 200, 300, 400]), 1, 400)
    with pytest.raises(AssertionError, match=message):
        checks.one_recovery_per_failure(wrong, 1, 400)


def test_07_latest_checkpoint_must_be_a_completed_one(tmp_path):
    manager = saved_steps(tmp_path, [100, 200])
    checks.latest_checkpoint_complete(manager.latest_checkpoint, [100, 200])
    with pytest.raises(AssertionError, match="points to step 200, whose write did not finish"):
        checks.latest_checkpoint_complete(manager.latest_checkpoint, [100])
    with pytest.raises(AssertionError, match="no checkpoint at all"):
        checks.latest_checkpoint_complete(None, [100])


@pytest.mark.parametrize("lines, message", [
    (["   1.0 s  step   100  resumed from checkpoint at step 100", "finished at step 600 with test accuracy 0.9"],
     "before the checkpoint at step 300"),
    (["   1.0 s  step     0  started", "finished at step 600 with test accuracy 0.9"], "printed 0 'resumed' lines"),
    (["   1.0 s  step   300  resumed from checkpoint at step 300", "finished at step 500 with test accuracy 0.9"],
     "did not finish at step 600"),
])
def test_07_a_restarted_coordinator_must_resume_and_finish(lines, message):
    checks.coordinator_resumed(["   1.0 s  step   300  resumed from checkpoint at step 300",
                                "finished at step 600 with test accuracy 0.9"], 300, 600)
    with pytest.raises(AssertionError, match=message):
        checks.coordinator_resumed(lines, 300, 600)


def test_07_a_restarted_fit_must_skip_the_finished_epochs():
    checks.fit_skipped_epochs(["epoch 3 started", "epoch 4 started"], 2)
    with pytest.raises(AssertionError, match="should skip the 2 finished epochs"):
        checks.fit_skipped_epochs(["epoch 1 started", "epoch 2 started"], 2)


def test_08_saved_results_must_match_the_points():
    from labkit.bench import Point

    points = [Point("mlp", "single-process", 0, 0, 10, 64), Point("mlp", "custom", 1, 1, 10, 64),
              Point("mlp", "custom", 2, 1, 10, 64)]
    table = [{**{k: str(v) for k, v in vars(p).items()}, "samples_per_s_median": "120.5"} for p in points]
    table.append(dict(table[0]))  # the baseline, measured again beside the second cluster shape
    saved = {"results": table, "machine": {"cores": 2, "memory_gib": 24, "versions": {}}}
    checks.results_saved(table, points, saved)
    with pytest.raises(AssertionError, match="4 CSV rows but 3 JSON results"):
        checks.results_saved(table, points, dict(saved, results=table[:3]))
    with pytest.raises(AssertionError, match=r"missing from the CSV: \[\('mlp', 'custom', '2'"):
        checks.results_saved(table[:2], points, dict(saved, results=table[:2]))
    with pytest.raises(AssertionError, match="without a positive median speed"):
        slow = [*table[:3], dict(table[0], samples_per_s_median="0")]
        checks.results_saved(slow, points, dict(saved, results=slow))
    with pytest.raises(AssertionError, match="memory_gib"):
        checks.results_saved(table, points, dict(saved, machine={"cores": 2, "versions": {}}))


def test_08_dense_traffic_must_be_about_the_model_size():
    row = {"model": "mlp", "loop": "custom", "workers": 1, "ps": 1, "steps_per_closure": 1, "model_bytes": 1000,
           "measured_pull_bytes_per_step": 1100, "measured_push_bytes_per_step": 1050}
    checks.dense_traffic_is_model_size(row)
    with pytest.raises(AssertionError, match="push 0.10 M per step"):
        checks.dense_traffic_is_model_size(dict(row, measured_push_bytes_per_step=100))
    with pytest.raises(AssertionError, match="pull 3.00 M per step"):
        checks.dense_traffic_is_model_size(dict(row, measured_pull_bytes_per_step=3000))


def test_08_a_running_cluster_is_named():
    checks.clusters_stopped([])
    with pytest.raises(AssertionError, match="clusters still running"):
        checks.clusters_stopped([{"name": "bench", "owner_pid": 1}])


def _cost_model_rows():
    row = {"model": "mlp", "loop": "custom", "workers": 1, "ps": 1, "steps_per_closure": 1, "steps_per_s_median": 100.0}
    return [row, dict(row, workers=2, steps_per_s_median=150.0)]


def test_08_every_custom_point_must_have_a_positive_prediction():
    rows = _cost_model_rows()
    good = [(rows[0], Prediction(100.0, "workers"), True), (rows[1], Prediction(200.0, "workers"), False)]
    checks.predicted_every_point(good, rows + [dict(rows[0], loop="single-process")])
    with pytest.raises(AssertionError, match="2 custom-loop points measured, but 1 predicted"):
        checks.predicted_every_point(good[:1], rows)
    with pytest.raises(AssertionError, match="not a positive number of steps/s"):
        checks.predicted_every_point([good[0], (rows[1], Prediction(float("inf"), "coordinator"), False)], rows)


def test_09_a_task_must_run_in_its_directory_with_its_tf_config(tmp_path):
    config = {"cluster": {"ps": ["localhost:1"], "worker": ["localhost:2"]}, "task": {"type": "ps", "index": 0}}
    (tmp_path / "ps-0").mkdir()
    (tmp_path / "ps-0" / "tf_config.json").write_text(json.dumps(config))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "tf_config.json").write_text(json.dumps(dict(config, task={"type": "worker", "index": 0})))
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path / "ps-0",
                               env={"TF_CONFIG": json.dumps(config)})
    try:
        checks.runs_with_its_files(psutil.Process(process.pid), tmp_path / "ps-0")
        with pytest.raises(AssertionError, match="does not have the TF_CONFIG of"):
            checks.runs_with_its_files(psutil.Process(process.pid), tmp_path / "other")
        (tmp_path / "copy").mkdir()
        (tmp_path / "copy" / "tf_config.json").write_text(json.dumps(config))
        with pytest.raises(AssertionError, match="runs in"):
            checks.runs_with_its_files(psutil.Process(process.pid), tmp_path / "copy")
    finally:
        process.kill()
        process.wait()


def test_accuracy_below_the_target_is_refused():
    assert checks.accuracy_reached(0.9, 0.85) == 0.9
    with pytest.raises(AssertionError, match="below 0.85"):
        checks.accuracy_reached(0.8, 0.85)


# ----- 10 PS vs all-reduce ----------------------------------------------------------------
def test_10_a_strategy_short_of_the_target_is_named():
    checks.both_reached({"PS": 0.9, "all-reduce": 0.88}, 0.85)
    with pytest.raises(AssertionError, match="all-reduce"):
        checks.both_reached({"PS": 0.9, "all-reduce": 0.8}, 0.85)


def test_10_the_slowed_worker_bounds_sync_but_not_async():
    limit = checks.lockstep_limit(2, 64, 100)  # 2 x 64 samples per 0.1 s
    assert limit == 1280
    checks.sync_waited(1200, 2, 64, 100)
    with pytest.raises(AssertionError, match="really slowed"):
        checks.sync_waited(3000, 2, 64, 100)
    checks.async_did_not_wait(3000, 2, 64, 100)
    with pytest.raises(AssertionError, match="wait for the slow one"):
        checks.async_did_not_wait(1200, 2, 64, 100)


def test_10_bytes_far_from_the_payload_are_refused():
    checks.link_bytes_near(1.1e6, 1e6, "PS")
    for wrong in (0.5e6, 2e6):
        with pytest.raises(AssertionError, match="PS: "):
            checks.link_bytes_near(wrong, 1e6, "PS")


def test_10_a_sparse_step_must_move_rows_not_the_table():
    checks.moved_rows_not_table(70_000, 32_768, 64_000_000)
    with pytest.raises(AssertionError, match="dense table"):
        checks.moved_rows_not_table(64_000_000, 32_768, 64_000_000)
    with pytest.raises(AssertionError, match="touched rows"):
        checks.moved_rows_not_table(1_000, 32_768, 64_000_000)


def test_10_the_table_must_be_sharded_on_ps_and_replicated_under_all_reduce():
    checks.sharded_over_ps({"ps:0": 64_000_008, "ps:1": 64_000_000}, 2)
    with pytest.raises(AssertionError, match="spread over 2"):
        checks.sharded_over_ps({"ps:0": 128_000_008}, 2)
    with pytest.raises(AssertionError, match="outside the parameter servers"):
        checks.sharded_over_ps({"ps:0": 8, "worker:0": 128_000_000}, 2)
    checks.replicated([128_000_000, 128_000_000], 64_000_000)
    with pytest.raises(AssertionError, match="less than the table"):
        checks.replicated([128_000_000, 0], 64_000_000)
