"""Predict, then measure: notebook 08's cost model as controls and a plot, for JupyterLab (ipywidgets).

``CostModelExplorer(rows)`` fits ``labkit.bench.costmodel`` on the rows of the benchmark's points
(``bench.measure_points``, as notebook 08 does). Its controls choose a cluster (workers, parameter servers, steps per
closure, batch size, model size, link rate); the plot shows the predicted samples/s against workers, each point
marked with the resource that bounds it, redrawn as a control moves. "Measure this point" runs that cluster shape on
this machine in a child process; each measurement stays on the plot beside its prediction, with its error.

Three parts: ``model`` (what is predicted and what that assumes, from the rows alone), ``measurement`` (one point
measured in a child process, ``python -m labkit.explorer.measurement``, that can be cancelled) and ``view`` (the
widgets and the figures).
"""
from labkit.explorer.model import Shape
from labkit.explorer.view import CostModelExplorer

__all__ = ["CostModelExplorer", "Shape"]
