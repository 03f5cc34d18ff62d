"""Fault injection's own rules. The worker, parameter-server and coordinator failures and model.fit's
BackupAndRestore run end to end in notebook 07's smoke copy (tests/smoke, in `make test`), whose checks
(labkit.checks: at_least_once, worked_after_restart, one_recovery_per_failure, coordinator_resumed,
fit_skipped_epochs) assert what these tests asserted before; tests/test_checks.py shows each check
failing on a wrong outcome. scripts/stress_faults.py repeats the three kills many times.
"""
import pytest

from labkit import faults


def test_random_faults_are_reproducible():
    first = faults.random_faults(["worker:0", "worker:1"], 3, 500, seed=7)
    assert first == faults.random_faults(["worker:0", "worker:1"], 3, 500, seed=7)
    assert [f.step for f in first] == sorted(f.step for f in first) and all(0 < f.step < 500 for f in first)


def test_a_bad_fault_action_is_a_clear_error():
    with pytest.raises(ValueError, match="must be 'kill' or 'restart'"):
        faults.Fault(10, "worker:0", "pause")
