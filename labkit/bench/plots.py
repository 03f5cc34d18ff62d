"""The points' figure: throughput against workers, parameter servers and steps per closure; ratios to one process."""
import numpy as np

from labkit.bench.workloads import MNIST_MODELS


def plot(rows, path, base):
    """Four panels: samples/s against workers; ratio to one process; PS count per model; custom vs fit.

    ``base``: the (workers, ps, batch size) of the base point, from ``base_point``.
    """
    from matplotlib.figure import Figure  # no pyplot: works headless (Agg) and shows in a notebook
    from matplotlib.ticker import MaxNLocator

    figure = Figure(figsize=(12, 8.5))
    axes = figure.subplots(2, 2)
    workers, ps, batch = base
    custom = [r for r in rows if r["loop"] == "custom"]
    first_model = custom[0]["model"]

    def errorbars(axis, chosen, x, label, **style):
        chosen = sorted(chosen, key=lambda r: r[x])
        y = [r["samples_per_s_median"] for r in chosen]
        low = [r["samples_per_s_median"] - r["samples_per_s_q1"] for r in chosen]
        high = [r["samples_per_s_q3"] - r["samples_per_s_median"] for r in chosen]
        axis.errorbar([r[x] for r in chosen], y, yerr=[low, high], marker="o", capsize=3, label=label, **style)

    axis = axes[0, 0]
    for steps_per_closure in sorted({r["steps_per_closure"] for r in custom}):
        errorbars(axis, [r for r in custom if r["model"] == first_model and r["ps"] == ps and
                         r["batch_size"] == batch and r["steps_per_closure"] == steps_per_closure], "workers", f"{steps_per_closure} steps/closure")
    beside = [r for r in custom if r["model"] == first_model and r["ps"] == ps and r["batch_size"] == batch]
    axis.scatter([r["workers"] for r in beside], [r["baseline_samples_per_s"] for r in beside], marker="x",
                 color="grey", label="one process, no cluster (timed in the same rounds)")
    axis.set(title=f"{first_model}: samples/s against workers ({ps} ps)", xlabel="workers", ylabel="samples/s")
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.legend(fontsize=8)

    axis = axes[0, 1]
    at_base = [r for r in custom if (r["workers"], r["ps"], r["batch_size"]) == (workers, ps, batch)]
    models = list(dict.fromkeys(r["model"] for r in at_base))
    closure_sizes = sorted({r["steps_per_closure"] for r in at_base})
    width = 0.8 / len(closure_sizes)
    for i, steps_per_closure in enumerate(closure_sizes):
        chosen = [next((r for r in at_base if r["model"] == m and r["steps_per_closure"] == steps_per_closure), None)
                  for m in models]
        ratios = [r["ratio_to_single_process"] if r else 0 for r in chosen]
        bounds = [r["ratio_to_single_process_interval"] if r else [None, None] for r in chosen]
        below = [ratio - low if low is not None else 0 for ratio, (low, _) in zip(ratios, bounds)]
        above = [high - ratio if high is not None else 0 for ratio, (_, high) in zip(ratios, bounds)]
        axis.bar(np.arange(len(models)) + i * width, ratios, width, yerr=[below, above], capsize=3,
                 label=f"{steps_per_closure} steps/closure")
    axis.axhline(1, color="grey", linestyle=":")
    axis.set(title=f"cluster ÷ one process, samples/s, 95 % interval ({workers} workers, {ps} ps)", ylabel="ratio",
             xticks=np.arange(len(models)) + width * (len(closure_sizes) - 1) / 2, xticklabels=models)
    axis.legend(fontsize=8)

    axis = axes[1, 0]
    top = max(closure_sizes)
    by_ps = [r for r in custom if (r["workers"], r["batch_size"], r["steps_per_closure"]) == (workers, batch, top)]
    ps_counts = sorted({r["ps"] for r in by_ps})
    for model in models:
        errorbars(axis, [r for r in by_ps if r["model"] == model], "ps", model)
    axis.set(title=ps_panel_title(ps_counts, workers, top), xlabel="parameter servers", ylabel="samples/s",
             yscale="log")
    if ps_counts:  # a tick at each PS count measured, even for a lone point
        axis.set(xticks=ps_counts, xlim=(ps_counts[0] - 0.5, ps_counts[-1] + 0.5))
    axis.legend(fontsize=8)

    axis = axes[1, 1]
    for loop, style in (("custom", "-"), ("fit", "--")):
        for color, model in zip(("C0", "C1"), MNIST_MODELS):
            chosen = [r for r in rows if r["loop"] == loop and r["model"] == model and
                      (r["workers"], r["ps"], r["batch_size"]) == (workers, ps, batch)]
            if chosen:
                errorbars(axis, chosen, "steps_per_closure", f"{model} {'labkit.train' if loop == 'custom' else 'model.fit'}",
                          linestyle=style, color=color)
    axis.set(title=f"custom loop vs model.fit ({workers} workers, {ps} ps)", xlabel="steps per closure / execution",
             ylabel="samples/s", xscale="log")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return figure


def ps_panel_title(ps_counts, workers, steps_per_closure):
    """The PS panel's title; with one PS count measured it says that each model is a lone point."""
    shape = f"{workers} workers, {steps_per_closure} steps/closure"
    if len(ps_counts) != 1:
        return f"samples/s against parameter servers ({shape})"
    servers = f"{ps_counts[0]} parameter server" + ("s" if ps_counts[0] > 1 else "")
    return f"samples/s with {servers} ({shape}):\nthe only PS count measured, one point per model"


def plot_predictions(predicted, goal=0.25):
    """Predicted against measured samples/s, one marker per point (``labkit.bench.costmodel.predict_rows``):
    filled where the point was not used to fit the model, hollow where it was; the band is ±``goal``."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.5, 5.5))
    axis = figure.subplots()
    models = list(dict.fromkeys(row["model"] for row, _, _ in predicted))
    for color, model in zip(("C0", "C1", "C2", "C3"), models):
        for calibrating in (False, True):
            chosen = [(row, p) for row, p, c in predicted if row["model"] == model and c == calibrating]
            if chosen:
                axis.scatter([row["samples_per_s_median"] for row, _ in chosen],
                             [p.steps_per_s * row["batch_size"] for row, p in chosen],
                             edgecolors=color, facecolors="none" if calibrating else color,
                             label=f"{model}{' (fitted on)' if calibrating else ''}")
    values = [row["samples_per_s_median"] for row, _, _ in predicted]
    values += [p.steps_per_s * row["batch_size"] for row, p, _ in predicted]
    line = np.geomspace(min(values) / 1.5, max(values) * 1.5, 50)
    axis.plot(line, line, color="grey", linestyle=":", label="predicted = measured")
    axis.fill_between(line, line * (1 - goal), line * (1 + goal), color="grey", alpha=0.15, label=f"±{goal:.0%}")
    axis.set(xscale="log", yscale="log", xlabel="measured samples/s", ylabel="predicted samples/s",
             title="the cost model against every custom-loop point")
    axis.legend(fontsize=8)
    figure.tight_layout()
    return figure
