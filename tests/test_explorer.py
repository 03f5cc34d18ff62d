"""labkit.explorer: the cost-model explorer's controls, what its model says it assumes, its refusals, and a
measurement cancelled with every task it started gone. (tests/test_browser.py drives it in JupyterLab.)"""
import pytest

from labkit.explorer import CostModelExplorer, Shape
from labkit.explorer.model import ExplorerModel
from labkit.runtime import processes
from support.costs import bench_rows
from support.processes import task_processes


@pytest.fixture
def explorer():
    made = CostModelExplorer(bench_rows(), cores=2, max_measured_workers=3)
    yield made
    made.close()


def test_moving_a_control_predicts_again_and_redraws(explorer):
    before, picture = explorer.prediction.value, explorer.image.value
    explorer.controls["steps_per_closure"].value = 1
    assert explorer.prediction.value != before and explorer.image.value != picture
    assert "<b>2w 1ps K=1 batch 64</b>: predicted" in explorer.prediction.value
    slow_link = explorer.model.predict(Shape(8, 1, 10, 64, link="100 Mbit/s"))
    assert slow_link.bottleneck == "network" and slow_link.steps_per_s < explorer.model.predict(Shape(8, 1, 10, 64)).steps_per_s


def test_what_was_not_measured_is_said_to_be_assumed(explorer):
    assert explorer.model.assumptions(Shape(2, 1, 10, 64)) == []
    assert "Every input of this prediction was measured" in explorer.assumed.value
    size, packing, link = explorer.model.assumptions(Shape(2, 3, 50, 64, model_size=4, link="1 Gbit/s"))
    assert size.startswith("A model ×4 the size of mlp was not measured")
    assert "outside those measured (1–10)" in packing and link.startswith("Links of 1 Gbit/s: only the rate counts")
    assert explorer.model.assumptions(Shape(2, 3, 10, 64)) == [], "the rows measured 2 PS: what another PS costs is known"
    assert explorer.model.assumptions(Shape(5, 1, 10, 64)) == [
        "5 workers: the benchmark checked the model on up to 2; beyond, the curve is a prediction that no measurement "
        "has checked."]
    one_ps = ExplorerModel([r for r in bench_rows() if r["ps"] != 2], cores=2)
    assert one_ps.assumptions(Shape(2, 2, 10, 64))[0].startswith("The points measured 1 PS only")


def test_a_point_it_cannot_measure_here_gets_a_message_and_no_process(explorer):
    explorer.controls["workers"].value = 5
    explorer.measure()
    assert "5 workers are more than this machine measures (3 at most" in explorer.status.value
    explorer.controls["workers"].value, explorer.controls["model_size"].value = 2, 4
    explorer.measure()
    assert "only the measured model (mlp, ×1) over loopback" in explorer.status.value
    assert not explorer.measuring and explorer.measurement is None


def test_the_saved_copy_figure_has_a_curve_per_packing_and_the_measured_points(explorer):
    axis = explorer.default_grid().axes[0]
    assert {x for line in axis.get_lines() for x in line.get_xdata()} == {1, 2}, "drawn up to the 2 workers measured"
    labels = axis.get_legend_handles_labels()[1]
    assert {"K=1 predicted", "K=10 predicted", "K=10 measured"} <= set(labels)
    annotations = [text.get_text() for text in axis.texts]
    assert "fitted on" in annotations and any(text.endswith("%") for text in annotations), annotations


def test_rows_without_a_custom_loop_point_say_what_to_give():
    with pytest.raises(ValueError, match="no custom-loop row"):
        ExplorerModel([r for r in bench_rows() if r["loop"] != "custom"])


@pytest.mark.cluster
def test_cancel_stops_the_measurement_and_every_task_it_started(explorer):
    explorer.controls["workers"].value = 2
    explorer.measure()
    assert explorer.measuring and explorer.cancel_button.disabled is False
    processes.wait_until(lambda: len(task_processes()) >= 3, timeout=120, what="the measurement's cluster to start")
    explorer.cancel()
    assert task_processes() == [] and not explorer.measuring
    assert explorer.status.value.startswith("Cancelled: 2w 1ps K=10 batch 64 was not measured")
    assert explorer.model.measurements == [] and explorer.measure_button.disabled is False
