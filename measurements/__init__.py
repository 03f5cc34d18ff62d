"""Everything the kit's pages quote, measured on this machine (`make measurements`).

    python -m measurements                    # measure each run not recorded yet, then render and publish
    python -m measurements --only 06 ex2      # measure these runs (name prefixes) again, then render and publish
    python -m measurements --render           # measure nothing: render and publish from the records

Each item (measurements/items/, one module each) makes runs; ``runner`` runs each one into its own folder of
runs/measurements/ and keeps what the item makes of it, with when and under what load it ran, as JSON in
measurements/recorded/ (committed). ``page`` renders docs/measurements.md from those records alone, and
``publish`` writes the figures other files quote: the README's test times, each notebook's "*Runs in ...*"
sentence and time notes, labkit/tools/notebook_peaks.json. Adding an item: its module, and its line in
``order.py``.
"""
