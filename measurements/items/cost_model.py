"""Notebook 08's cost model on cluster shapes its defaults never run: its median error on points it was not fitted on.

Those points have 3 workers, 5 steps per closure, a second parameter server.
"""
from measurements.items import Run
from measurements.items.notebooks import labkit_sweep, result as notebook_result
from measurements.records import ROOT, measured_at

NAME = "cost-model-shapes"
PARAMETERS = {"workers": "[1, 3]", "ps": "[1, 2]", "steps_per_closure": "[1, 5, 10]"}
GOAL = 0.25  # notebook 08's check: the median error over the points the model was not fitted on


def runs():
    arguments = [part for name, value in PARAMETERS.items() for part in ("-p", name, value)]
    return [Run(NAME, labkit_sweep(ROOT / "notebooks" / "08_performance_analysis.ipynb", *arguments))]


def result(run, folder):
    """The run's status, and the model's median error over the points it was not fitted on, and how many."""
    run = notebook_result(run, folder)
    return run and {"status": run["status"], "unfitted_median_error": run["results"].get("cost_model_unfitted_median_error"),
                    "unfitted_points": run["results"].get("cost_model_unfitted_points")}


def section(recorded):
    shapes = ", ".join(f"`{name} = {value}`" for name, value in PARAMETERS.items())
    lines = ["## The cost model on cluster shapes notebook 08's defaults never run", "",
             f"Notebook 08 with {shapes}: the model is fitted on its one-worker points and predicts the others",
             "(3 workers, 5 steps per closure, a second parameter server).", ""]
    if NAME not in recorded:
        return lines + ["Not measured yet.", ""]
    run = recorded[NAME]["result"]
    if run["status"] != "ok" or run["unfitted_median_error"] is None:
        return lines + [f"The run did not record the model's error (status {run['status']}).", ""]
    error = run["unfitted_median_error"]
    return lines + [f"Median error **{error:.0%}** over the {run['unfitted_points']} points it was not fitted on, "
                    f"{'within' if error <= GOAL else 'OVER'} the notebook's {GOAL:.0%} ({measured_at(recorded[NAME])}).", ""]
