"""`import labkit` selects Keras 2 and the environment PS training needs, or says what to do."""
import subprocess
import sys

import pytest

pytestmark = pytest.mark.cluster


def run_python(code, **env):
    import os

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def test_import_labkit_first_gives_keras_2_the_grpc_setting_and_hides_only_info_logs():
    done = run_python("import os, labkit, tensorflow as tf, tf_keras\n"
                      "print(tf.keras.Model is tf_keras.Model, os.environ['GRPC_FAIL_FAST'])\n"
                      "tf.get_logger().info('INFO-LINE'); tf.get_logger().warning('WARNING-LINE')",
                      TF_USE_LEGACY_KERAS="0")
    assert done.stdout.split() == ["True", "use_caller"], done.stderr[-2000:]
    assert "WARNING-LINE" in done.stderr and "INFO-LINE" not in done.stderr


def test_tensorflow_imported_first_with_keras_3_is_a_clear_error():
    done = run_python("import tensorflow\nimport labkit", TF_USE_LEGACY_KERAS="0")
    assert done.returncode != 0
    assert "KerasVersionError" in done.stderr
    assert "restart the kernel" in done.stderr and "import labkit" in done.stderr


def test_tensorflow_imported_first_with_legacy_keras_is_fine():
    done = run_python("import tensorflow\nimport labkit\nprint('ok')", TF_USE_LEGACY_KERAS="1")
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


def test_a_process_that_only_imported_ipykernel_is_not_taken_for_a_kernel():
    """pytest with nbval imports ipykernel; only a running kernel gets TensorFlow imported with labkit."""
    done = run_python("import sys, ipykernel.kernelspec, labkit\nprint('tensorflow' in sys.modules)")
    assert done.stdout.strip() == "False", done.stderr[-2000:]
