"""What every check shares: ``require``, the exercises' ``Checklist`` and the checks several notebooks use.

``require`` fails with ``CheckFailed``, also under ``python -O``."""
from labkit.runtime import processes


class CheckFailed(AssertionError):
    """A check's verdict on the learner's work: what is wrong and how to fix it."""


def require(condition, message):
    """Fail the check with ``message`` unless ``condition`` holds (unlike ``assert``, also under ``python -O``)."""
    if not condition:
        raise CheckFailed(message)


class Checklist:
    """The checks of one exercise notebook, ticked off as their cells pass.

    It only tells the learner where they are: ``labkit grade`` ignores it and runs the check cells itself.
    """

    def __init__(self, exercise, checks):
        self.exercise, self.checks, self.done = exercise, list(checks), []

    def passed(self, check):
        if check not in self.checks:
            raise ValueError(f"{check!r} is not a check of {self.exercise}; they are {self.checks}.")
        self.done.append(check)
        print(f"✅ {check}")

    def summary(self):
        missing = [check for check in self.checks if check not in self.done]
        require(not missing, f"{self.exercise}: not passed yet: {', '.join(missing)}. Run their check cells.")
        print(f"✅ {self.exercise}: all {len(self.checks)} checks passed.")


def learned(model, data, target_accuracy):
    """The model's test accuracy (returned) is at least ``target_accuracy``."""
    from labkit import models  # TensorFlow: only the checks that evaluate a model need it

    return accuracy_reached(models.accuracy(model, data.x_test, data.y_test), target_accuracy)


def accuracy_reached(accuracy, target_accuracy):
    """``accuracy`` (returned) is at least ``target_accuracy``."""
    require(accuracy >= target_accuracy, f"test accuracy {accuracy:.3f} is below {target_accuracy}: "
                                         "train for more steps, or check the learning rate.")
    return accuracy


def processes_stopped(processes):
    """Every process the learner started has exited."""
    running = [f"{name} (pid {process.pid})" for name, process in processes.items() if process.poll() is None]
    require(not running, f"still running: {', '.join(running)}. Call terminate() and then wait() "
                         "on every process you started.")


def pids_gone(pids_by_name):
    """No process of ``pids_by_name`` (name -> pid) still runs (a zombie counts as gone)."""
    running = [f"{name} (pid {pid})" for name, pid in pids_by_name.items() if processes.running(pid)]
    require(not running, f"still running: {', '.join(running)}.")


def close_accuracy(accuracy, reference, max_gap):
    """``accuracy`` is within ``max_gap`` of ``reference``."""
    require(abs(accuracy - reference) <= max_gap,
        f"test accuracy {accuracy:.3f} vs {reference:.3f} undisturbed: more than {max_gap} apart.")
