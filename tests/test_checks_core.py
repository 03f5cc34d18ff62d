"""Every check of labkit.checks.core rejects a wrong result (and accepts the right one).

Real objects throughout: real processes, checkpoints written by TensorFlow, matplotlib axes; only the
numbers fed in are chosen to be wrong.
"""
import pytest

from labkit import checks


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


def test_accuracy_below_the_target_is_refused():
    assert checks.accuracy_reached(0.9, 0.85) == 0.9
    with pytest.raises(AssertionError, match="below 0.85"):
        checks.accuracy_reached(0.8, 0.85)


def test_the_core_of_the_checks_loads_no_tensorflow():
    """require and CheckFailed come without TensorFlow: only a check that evaluates a model imports it."""
    import subprocess
    import sys

    probe = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('core', sys.argv[1]); "
             "spec.loader.exec_module(importlib.util.module_from_spec(spec)); print('tensorflow' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe, checks.core.__file__], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
