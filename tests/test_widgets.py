"""The cluster dashboard's state on a real cluster of processes, without a browser."""
import html

import pytest

import labkit
from labkit.runtime import processes
from labkit.runtime.processes import wait_until
from labkit.train import TrainingLog
from labkit.widgets import ALIVE, DEAD, ClusterDashboard

pytestmark = pytest.mark.cluster
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def cluster():
    with labkit.LocalCluster(num_workers=1, num_ps=1, name="test-widgets") as running:
        yield running


@pytest.fixture
def dashboard(cluster):
    shown = ClusterDashboard(cluster, interval=0.2)
    yield shown
    shown.close()


def state(dashboard, task):
    return {ALIVE: "alive", DEAD: "dead"}[dashboard.cells[task]["state"].value]


def test_every_row_shows_a_live_task_process(cluster, dashboard):
    dashboard.refresh()
    for task in cluster.tasks:
        cells = {key: widget.value for key, widget in dashboard.cells[task.name].items()}
        assert state(dashboard, task.name) == "alive"
        assert (cells["task"], cells["address"], cells["pid"]) == (task.name, task.address, str(task.pid))
        assert cells["cpu"].endswith(" %") and cells["uptime"].endswith(" s")
        assert float(cells["memory"].removesuffix(" MB")) > 100, "a task process holds TensorFlow"
        assert html.escape(task.log_tail(1)) in cells["log"], "TensorFlow may log after labkit's 'serving at'"
    assert dashboard.headings["memory"].value == "<b>memory (PSS)</b>", "the measure every memory figure uses"


def test_a_kill_shows_dead_and_the_buttons_restart_and_kill(cluster, dashboard):
    old_pid = cluster.task("worker:0").pid
    cluster.kill("worker:0")
    wait_until(lambda: state(dashboard, "worker:0") == "dead", 5, "the refresh thread to see the kill")
    assert dashboard.cells["worker:0"]["memory"].value == "&ndash;"

    dashboard.buttons["worker:0"]["restart"].click()
    new_pid = cluster.task("worker:0").pid
    assert new_pid != old_pid and processes.running(new_pid)
    assert state(dashboard, "worker:0") == "alive" and dashboard.cells["worker:0"]["pid"].value == str(new_pid)
    assert dashboard.message.value.startswith("restart worker:0: done in")

    dashboard.buttons["worker:0"]["kill"].click()
    assert not processes.running(new_pid)
    assert state(dashboard, "worker:0") == "dead" and state(dashboard, "ps:0") == "alive"


def test_the_training_panel_shows_the_latest_interval(dashboard):
    training_log = TrainingLog()
    training_log.record(step=100, seconds=2.5, loss=2.3, steps_per_second=40.0, metrics={}, evaluation={})
    training_log.record(step=200, seconds=3.75, loss=0.5, steps_per_second=80.0, metrics={}, evaluation={})
    dashboard.show_training(training_log)
    panel = dashboard.training.value
    assert "step 200" in panel and "loss 0.5000 (first 2.3000)" in panel and "80.0 steps/s" in panel


def test_without_a_widget_frontend_it_shows_the_status_table(cluster, dashboard):
    html_before, plain_before = cluster._repr_html_(), repr(cluster)
    bundle = dashboard._repr_mimebundle_()
    html_after, plain_after = cluster._repr_html_(), repr(cluster)  # uptimes in seconds: the bundle shows one of the two
    assert WIDGET_VIEW in bundle
    assert bundle["text/html"] in (html_before, html_after) and bundle["text/plain"] in (plain_before, plain_after)


def test_close_stops_the_refresh_thread(cluster, dashboard):
    assert dashboard.refreshing
    dashboard.close()
    assert not dashboard.refreshing
    assert WIDGET_VIEW not in dashboard._repr_mimebundle_(), "a closed dashboard has no widget to show"


def test_refreshing_stops_when_the_cluster_stops(cluster, dashboard):
    assert dashboard.refreshing
    cluster.stop()
    wait_until(lambda: not dashboard.refreshing, 5, "the refresh thread to end with the cluster")
    assert all(state(dashboard, task.name) == "dead" for task in cluster.tasks)
