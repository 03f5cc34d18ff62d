"""labkit.bench.costmodel: the cost model's arithmetic on hand-built costs, and its inputs read from bench rows."""
import pytest

from labkit import bench
from labkit.bench.costmodel import (Cost, Costs, fit_cost, measure_costs, predict, predict_rows, scale_model, spare_points,
                                    usable_cores)
from support.costs import bench_rows, row

MB = 1e6


def costs(one_worker=0.010, dispatch=0.0, coordinator=0.001, worker=0.008, ps=0.001, pull=MB, push=MB):
    return Costs(Cost(one_worker, dispatch), Cost(coordinator), Cost(worker), Cost(ps), pull, push)


def test_one_worker_alone_runs_at_its_measured_step_time():
    prediction = predict(costs(one_worker=0.010), workers=1, ps=1, steps_per_closure=1)
    assert prediction.bottleneck == "workers"
    assert prediction.steps_per_s == pytest.approx(100)


def test_packing_divides_the_dispatch_cost_per_closure():
    slow_dispatch = costs(one_worker=0.002, dispatch=0.008)
    assert predict(slow_dispatch, 1, 1, steps_per_closure=1).steps_per_s == pytest.approx(100)
    assert predict(slow_dispatch, 1, 1, steps_per_closure=8).steps_per_s == pytest.approx(1 / 0.003)


@pytest.mark.parametrize("hand_built, workers, bottleneck, steps_per_s", [
    (costs(one_worker=0.010), 4, "workers", 400),                     # separate hosts, fast PS: scales
    (costs(one_worker=0.010, coordinator=0.005), 4, "coordinator", 200),
    (costs(one_worker=0.010, ps=0.004), 4, "parameter servers", 250),
])
def test_the_slowest_resource_sets_the_pace(hand_built, workers, bottleneck, steps_per_s):
    prediction = predict(hand_built, workers, ps=1, steps_per_closure=1)
    assert prediction.bottleneck == bottleneck
    assert prediction.steps_per_s == pytest.approx(steps_per_s)
    assert prediction.steps_per_s == min(prediction.limits.values())


def test_processes_sharing_cores_cannot_use_more_cpu_than_the_cores():
    # every step costs 0.001 + 0.008 + 0.001 = 0.010 CPU seconds: 2 cores allow 200 steps/s, whatever the workers
    for workers in (2, 4, 8):
        prediction = predict(costs(one_worker=0.010), workers, ps=1, steps_per_closure=1, cores=2)
        assert prediction.bottleneck == "cores" and prediction.steps_per_s == pytest.approx(200)


def test_links_are_full_duplex_pull_and_push_each_get_the_whole_rate():
    # 1 MB pulled and 1 MB pushed per step through a 100 MB/s link each way: 100 steps/s, not 50
    prediction = predict(costs(one_worker=0.001), workers=50, ps=1, steps_per_closure=1, link_bytes_per_s=100 * MB)
    assert prediction.bottleneck == "network"
    assert prediction.limits["network"] == pytest.approx(100)
    lopsided = predict(costs(one_worker=0.001, pull=2 * MB, push=0.5 * MB), 50, 1, 1, link_bytes_per_s=100 * MB)
    assert lopsided.limits["network"] == pytest.approx(50), "the busier direction sets the limit"


def test_one_worker_waits_for_its_own_pull_then_its_push():
    prediction = predict(costs(one_worker=0.010), workers=1, ps=1, steps_per_closure=1, link_bytes_per_s=100 * MB)
    assert prediction.limits["workers"] == pytest.approx(1 / (0.010 + 0.020))


def test_a_second_ps_helps_only_when_the_ps_side_is_the_bottleneck():
    network_bound = costs(one_worker=0.001)
    one, two = (predict(network_bound, 50, ps, 1, link_bytes_per_s=100 * MB) for ps in (1, 2))
    assert two.steps_per_s == pytest.approx(2 * one.steps_per_s)
    with_overhead = Costs(Cost(0.010, 0.0, 0.002), Cost(0.001), Cost(0.008), Cost(0.001), MB, MB)
    one, two = (predict(with_overhead, 1, ps, 1) for ps in (1, 2))
    assert one.bottleneck == two.bottleneck == "workers"
    assert two.steps_per_s == pytest.approx(1 / 0.012) and two.steps_per_s < one.steps_per_s


def test_fit_cost_separates_per_step_per_closure_and_per_extra_ps():
    exact = [(1, 1, 0.012), (10, 1, 0.0039), (10, 2, 0.0049), (1, 2, 0.013)]  # 0.003 + 0.009 / K + 0.001 (p - 1)
    cost = fit_cost(exact)
    assert (cost.per_step, cost.per_closure, cost.per_extra_ps) == pytest.approx((0.003, 0.009, 0.001))
    noisy = fit_cost([(1, 1, 0.010), (10, 1, 0.011)])  # K = 10 measured slower: no negative dispatch cost
    assert noisy.per_closure == 0 and noisy.per_step == pytest.approx(0.0105)
    assert fit_cost([(10, 1, 0.004), (10, 1 + 1, 0.005)]).per_closure == 0, "one K: no dispatch cost to fit"


def test_fit_cost_fits_every_point_by_least_squares_so_a_spare_point_leaves_a_residual():
    measured = [(1, 1, 0.012), (10, 1, 0.0039), (10, 2, 0.0049), (1, 2, 0.015)]  # the last 2 ms off the model
    cost = fit_cost(measured)
    residuals = [seconds - cost.at(k, ps) for k, ps, seconds in measured]
    assert all(abs(r) > 1e-5 for r in residuals), "no point is passed through exactly: the residual is spread"
    assert sum(residuals) == pytest.approx(0, abs=1e-9)  # least squares with a constant part
    # an exact fit through the first three (the rule of two packings and one more PS) leaves the fourth 2 ms off
    assert sum(r * r for r in residuals) < 0.002 ** 2
    rows = [row(ps=ps, steps_per_closure=k) for k, ps, _ in measured] + [row(workers=2)]
    assert spare_points(rows, "mlp", 64) == 1
    assert spare_points(rows[:2], "mlp", 64) == 0, "two packings, one PS count: two parts, no residual"


@pytest.mark.parametrize("call, message", [
    (lambda: predict(costs(), workers=0, ps=1, steps_per_closure=1), "workers must be a whole number >= 1, got 0"),
    (lambda: predict(costs(), workers=2, ps=1.5, steps_per_closure=1), "ps must be a whole number >= 1, got 1.5"),
    (lambda: predict(costs(), 2, 1, 1, link_bytes_per_s=0), "link_bytes_per_s must be > 0 or None"),
    (lambda: predict(costs(), 2, 1, 1, cores=-2), "cores must be > 0 or None"),
    (lambda: costs(worker=-0.001), "worker_cpu must be a positive cost"),
    (lambda: costs(pull=-1), "bytes per step must be >= 0"),
    (lambda: fit_cost([(1, 1, 0.01), (1, 1, 0.02)]), "one measurement per (steps per closure, PS count)"),
])
def test_bad_input_says_what_is_wrong(call, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        call()


def test_costs_are_read_from_one_worker_rows():
    measured = measure_costs(bench_rows(), "mlp", 64)
    # wall seconds per step: 1/50 at K = 1, 1/200 at K = 10 -> per closure 1/60, per step 1/300
    assert measured.one_worker_seconds.per_closure == pytest.approx(1 / 60)
    assert measured.one_worker_seconds.per_step == pytest.approx(1 / 300)
    assert measured.one_worker_seconds.at(10, ps=2) == pytest.approx(1 / 160)
    assert measured.worker_cpu.at(10) == pytest.approx(0.5 / 200)  # cores busy / steps per second
    assert (measured.pull_bytes, measured.push_bytes) == (4e5, 4.1e5)


def test_every_custom_row_is_predicted_and_calibration_rows_are_reproduced():
    rows = bench_rows()
    predicted = predict_rows(rows, calibration_batch=64, cores=2)
    assert [r for r, _, _ in predicted] == [r for r in rows if r["loop"] == "custom"]
    for r, prediction, calibrating in predicted:
        if calibrating:
            assert prediction.steps_per_s == pytest.approx(r["steps_per_s_median"])
    two_workers = next(p for r, p, _ in predicted if r["workers"] == 2 and r["batch_size"] == 64)
    # 2 workers at 1/200 s each, below the cores limit: 1.9 usable cores / 0.004 CPU seconds per step = 475 steps/s
    assert two_workers.steps_per_s == pytest.approx(400) and two_workers.limits["cores"] == pytest.approx(475)
    bigger_batch = next(p for r, p, _ in predicted if r["batch_size"] == 256)
    # batch 256 adds 1/200 - 1/400 s of compute per step (single process): 2 / (1/200 + 1/400) steps/s
    assert bigger_batch.limits["workers"] == pytest.approx(2 / (1 / 200 + 1 / 400))


def test_the_usable_cores_are_the_most_kept_busy_without_a_second_worker():
    rows = bench_rows()  # one process alone kept 1.9 cores busy; the one-worker points 0.8
    assert usable_cores(rows, "mlp", 64, cores=2) == pytest.approx(1.9)
    assert usable_cores(rows, "mlp", 64, cores=1) == 1, "never more than the machine's cores"
    busy_one_worker = [dict(r, cpu_workers=2.5) if r["workers"] == 1 and r["steps_per_closure"] == 1 else r for r in rows]
    assert usable_cores(busy_one_worker, "mlp", 64, cores=4) == pytest.approx(0.2 + 2.5 + 0.1)
    elsewhere = [dict(r, beside_workers=2) if r["loop"] == "single-process" else r for r in rows]
    assert usable_cores(elsewhere, "mlp", 64, cores=2) == pytest.approx(0.8), \
        "a baseline measured beside a two-worker shape is not an input"


def test_a_scaled_model_moves_bytes_and_per_step_costs_with_its_size_but_not_dispatch():
    measured = costs(one_worker=0.010, dispatch=0.004, coordinator=0.001, worker=0.008, ps=0.001)
    doubled = scale_model(measured, 2)
    assert (doubled.pull_bytes, doubled.push_bytes) == (2 * MB, 2 * MB)
    assert doubled.one_worker_seconds.at(1) == pytest.approx(0.024)  # 2 x 0.010 per step + 0.004 per closure
    assert (doubled.worker_cpu.at(1), doubled.ps_cpu.at(1), doubled.coordinator_cpu.at(1)) == pytest.approx((0.016, 0.002, 0.001))
    with pytest.raises(ValueError, match="model size factor must be > 0, got 0"):
        scale_model(measured, 0)


def test_without_socket_bytes_the_costs_take_the_model_size_each_way_and_say_so():
    rows = [dict(r, measured_pull_bytes_per_step=None, measured_push_bytes_per_step=None, model_bytes=407_080)
            for r in bench_rows()]
    costs = measure_costs(rows, "mlp", 64)
    assert (costs.pull_bytes, costs.push_bytes) == (407_080, 407_080)
    assert "not measured" in costs.bytes_source and "measured on the PS sockets" == measure_costs(
        bench_rows(), "mlp", 64).bytes_source


def test_without_a_one_worker_row_the_error_says_what_to_measure():
    rows = [r for r in bench_rows() if r["workers"] != 1]
    with pytest.raises(ValueError, match="no one-worker custom-loop row of mlp at batch 64"):
        measure_costs(rows, "mlp", 64)


def test_plan_measures_the_cost_model_inputs_for_every_model():
    points = bench.points(workers=[2, 3], ps=[1, 2], steps_per_closure=[1, 10, 50], models=["mlp", "lm"], batch_sizes=[64],
                        cores=2)
    for model in ("mlp", "lm"):
        one_worker = {(p.ps, p.steps_per_closure) for p in points if p.model == model and p.workers == 1}
        assert one_worker == {(ps, k) for ps in (1, 2) for k in (1, 10, 50)}


def test_every_cable_is_rate_limited_at_both_ends_so_each_direction_gets_the_rate():
    from labkit.deploy import netns

    network = netns.VirtualNetwork(["10.0.0.1", "10.0.0.2"], name="pslab-1")
    commands = network.rate_limit_commands(100)
    limited = {(command[2], command[6]) for command in commands}
    assert limited == {("pslab-1-10.0.0.1", "eth0"), ("pslab-1-10.0.0.2", "eth0"),
                       ("pslab-1-switch", "port0"), ("pslab-1-switch", "port1")}
    assert all(command[8:12] == ["tbf", "rate", "100mbit", "burst"] for command in commands)
    with pytest.raises(ValueError, match="rate_mbit must be > 0, got 0"):
        network.limit_rate(0)
