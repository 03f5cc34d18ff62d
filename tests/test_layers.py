"""What a process loads: a task server imports labkit's runtime without the cluster above it."""
import subprocess
import sys


def loaded_modules(statement):
    """The labkit modules (and TensorFlow) a fresh interpreter holds after ``statement``."""
    probe = f"import sys; {statement}; print(sorted(m for m in sys.modules if m.startswith(('labkit', 'tensorflow'))))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return eval(done.stdout)  # a list literal printed by the probe


def test_a_task_server_does_not_load_the_cluster():
    loaded = loaded_modules("import labkit.runtime.server")
    assert "labkit.cluster" not in loaded and "tensorflow" not in loaded, loaded


def test_labkit_local_cluster_still_loads_on_first_use():
    assert "labkit.cluster" in loaded_modules("from labkit import LocalCluster")
    assert "labkit.cluster" in loaded_modules("import labkit; labkit.ClusterStartError")
