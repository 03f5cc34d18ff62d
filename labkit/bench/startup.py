"""How long a LocalCluster takes from start() to every task serving, against a bare TensorFlow import.

A task loads TensorFlow's server module alone, not all of ``import tensorflow``; both are timed
in the same run, alternately, so the ratio shows what a whole cluster costs against one import.
"""
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from labkit.bench.files import machine
from labkit.cluster import LocalCluster


def time_bare_import():
    """Seconds for a fresh Python process to import TensorFlow and exit."""
    began = time.monotonic()
    subprocess.run([sys.executable, "-c", "import tensorflow"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - began


def time_cluster_start(num_workers, num_ps):
    """Seconds from LocalCluster start() to every task serving."""
    with LocalCluster(num_workers, num_ps, name="bench-startup") as cluster:
        return cluster.ready_seconds


def startup(repeats, num_workers, num_ps, out_dir):
    """Alternate the two measurements ``repeats`` times; print medians and their ratio."""
    imports, starts = [], []
    for round_number in range(1, repeats + 1):
        imports.append(time_bare_import())
        starts.append(time_cluster_start(num_workers, num_ps))
        print(f"round {round_number}/{repeats}: import tensorflow {imports[-1]:.2f} s, "
              f"cluster ready {starts[-1]:.2f} s", flush=True)
    result = {
        "benchmark": "startup", "num_workers": num_workers, "num_ps": num_ps, "repeats": repeats,
        "import_tensorflow_s": statistics.median(imports), "cluster_ready_s": statistics.median(starts),
        "machine": machine(),
    }
    result["ratio"] = result["cluster_ready_s"] / result["import_tensorflow_s"]
    print(f"\nmedian bare `import tensorflow`: {result['import_tensorflow_s']:.2f} s")
    print(f"median cluster start-to-ready ({num_workers} workers + {num_ps} ps, started in parallel): "
          f"{result['cluster_ready_s']:.2f} s")
    print(f"ratio cluster / import: {result['ratio']:.2f} (below 1: the whole cluster serves before one import ends)")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "startup.json").write_text(json.dumps(result, indent=2))
    print(f"saved {out_dir / 'startup.json'}")
    return result
