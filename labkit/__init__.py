"""PS Lab helper package: local parameter-server clusters for learning.

Import it before TensorFlow. It sets the environment every task of the kit needs:

- ``TF_USE_LEGACY_KERAS=1``: ``tf.keras`` becomes Keras 2 (tf_keras). Keras 3's
  ``model.fit`` does not support ParameterServerStrategy.
- ``GRPC_FAIL_FAST=use_caller``: without it, worker fault tolerance does not work.
- ``TF_CPP_MIN_LOG_LEVEL=2``: hides TensorFlow's C++ info messages (if unset);
  TensorFlow's Python INFO messages are hidden too (warnings and errors stay).

In a Jupyter kernel it also imports TensorFlow, sending TensorFlow's C++ start-up
lines (oneDNN, CUDA drivers, cuInit) to ``~/.cache/labkit/tensorflow-startup.log``
instead of the notebook, and makes every matplotlib Figure display as an image.
"""
import logging
import os
import sys

__version__ = "0.1.0"

REQUIRED_ENV = {"TF_USE_LEGACY_KERAS": "1", "GRPC_FAIL_FAST": "use_caller"}
DEFAULT_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2"}


class KerasVersionError(RuntimeError):
    """TensorFlow was imported with Keras 3 before labkit could select Keras 2."""


def _configure_environment():
    tensorflow = sys.modules.get("tensorflow")
    if tensorflow is not None and not getattr(tensorflow, "_tf_uses_legacy_keras", False):
        raise KerasVersionError(
            "TensorFlow was imported before labkit, so tf.keras is Keras 3, whose "
            "model.fit cannot train with ParameterServerStrategy.\n"
            "Fix: restart the kernel (Kernel > Restart Kernel), then run "
            "`import labkit` before `import tensorflow`. In a script, put "
            "`import labkit` first, or set TF_USE_LEGACY_KERAS=1 before Python starts."
        )
    os.environ.update(REQUIRED_ENV)
    for name, value in DEFAULT_ENV.items():
        os.environ.setdefault(name, value)
    # A filter, not a level: TensorFlow resets the level to INFO in interactive sessions.
    logging.getLogger("tensorflow").addFilter(lambda record: record.levelno >= logging.WARNING)


def versions():
    """The versions that matter for PS training, as a dict (this imports TensorFlow)."""
    import platform

    import tensorflow as tf

    if getattr(tf, "_tf_uses_legacy_keras", False):
        import tf_keras

        keras = f"Keras 2 (tf_keras {tf_keras.__version__}): PS model.fit works"
    else:
        import keras as keras3

        keras = f"Keras {keras3.__version__}: PS model.fit will fail; import labkit first"
    return {"python": platform.python_version(), "labkit": __version__,
            "tensorflow": tf.__version__, "tf.keras": keras}


def _in_a_jupyter_kernel():
    """True in a running IPython kernel; False in a process that only imported ipykernel (pytest with nbval)."""
    kernel_app = sys.modules.get("ipykernel.kernelapp")
    return kernel_app is not None and kernel_app.IPKernelApp.initialized()


_configure_environment()

if _in_a_jupyter_kernel():
    from labkit.runtime import tfruntime
    from labkit.tools import display

    tfruntime.import_quietly()
    display.show_figures_as_images()

from labkit.runtime.tfconfig import TFConfigError  # noqa: E402

_FROM_CLUSTER = ("ClusterStartError", "LocalCluster", "PortInUseError")


def __getattr__(name):
    """``labkit.LocalCluster`` and its errors, imported from ``labkit.cluster`` when first asked for: a task
    server imports ``labkit.runtime`` (and so this package) and never loads the cluster."""
    if name in _FROM_CLUSTER:
        from labkit import cluster

        return getattr(cluster, name)
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")

__all__ = ["versions", "LocalCluster", "ClusterStartError", "PortInUseError", "TFConfigError", "KerasVersionError"]
