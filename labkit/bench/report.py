"""Every point in one call: measured and saved with its figure, or run through notebook 08 (papermill)."""
from pathlib import Path

from labkit.bench.files import format_table, save
from labkit.bench.points import DEFAULTS, base_point, check
from labkit.bench.plots import plot
from labkit.bench.measure import measure_points

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "08_performance_analysis.ipynb"


def run_and_save(out_dir, **settings):
    """Check the settings, measure their points, save CSV + JSON + throughput.png in ``out_dir``; return the rows.
    Settings: see DEFAULTS."""
    points = check(settings)
    settings = {**DEFAULTS, **settings}
    rows = measure_points(points, settings["repeats"], settings["min_steps"], settings["target_accuracy"])
    csv_path, json_path = save(rows, out_dir, settings)
    plot(rows, Path(out_dir) / "throughput.png", base_point(settings["workers"], settings["ps"], settings["batch_sizes"]))
    print(format_table(rows))
    print(f"saved {csv_path}, {json_path} and {Path(out_dir) / 'throughput.png'}")
    return rows


def report(out_dir, **settings):
    """Run notebook 08 with papermill on these settings; it writes its results into ``out_dir``."""
    import papermill

    check(settings)
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    parameters = {name: list(value) if isinstance(value, tuple) else value for name, value in settings.items()}
    executed = out_dir / NOTEBOOK.name
    papermill.execute_notebook(str(NOTEBOOK), str(executed), parameters={**parameters, "out_dir": str(out_dir)},
                               cwd=str(NOTEBOOK.parent), kernel_name="pslab", progress_bar=False)
    print(f"executed notebook: {executed}")
    return executed
