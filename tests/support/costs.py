"""Benchmark rows of hand-built costs, as `labkit bench` writes them: what the cost model and its explorer read."""


def row(loop="custom", workers=1, ps=1, steps_per_closure=1, batch_size=64, steps_per_s=100.0, cpu=(0.2, 0.5, 0.1),
        beside=(1, 1)):
    coordinator, workers_cpu, ps_cpu = cpu
    return {"model": "mlp", "loop": loop, "workers": workers, "ps": ps, "steps_per_closure": steps_per_closure, "batch_size": batch_size,
            "steps_per_s_median": steps_per_s, "samples_per_s_median": steps_per_s * batch_size,
            "cpu_coordinator": coordinator, "cpu_workers": workers_cpu,
            "cpu_ps": ps_cpu, "measured_pull_bytes_per_step": 4e5, "measured_push_bytes_per_step": 4.1e5,
            "beside_workers": beside[0], "beside_ps": beside[1]}


def bench_rows():
    return [row(steps_per_closure=1, steps_per_s=50.0), row(steps_per_closure=10, steps_per_s=200.0),
            row(ps=2, steps_per_closure=10, steps_per_s=160.0),
            row(workers=2, steps_per_closure=10, steps_per_s=300.0, cpu=(0.3, 1.2, 0.3)),
            row(loop="single-process", workers=0, ps=0, steps_per_closure=10, steps_per_s=400.0, cpu=(1.9, 0, 0)),
            row(loop="single-process", workers=0, ps=0, steps_per_closure=10, batch_size=256, steps_per_s=200.0,
                cpu=(1.0, 0, 0)),
            row(workers=2, steps_per_closure=10, batch_size=256, steps_per_s=150.0, cpu=(0.3, 1.2, 0.3))]
