"""What the test modules share; they import this package (and labkit), never one another.

- ``processes``: this run's mark on every process it starts, the task processes among them, the orphan check
  that every test module gets (tests/conftest.py), and help with Ctrl-C
- ``smoke``: the notebooks run at their declared smoke parameters, once per notebook's test module, and what every
  run is checked for (``SmokeNotebook``)
- ``browser``: JupyterLab as `make lab` runs it, a headless Chromium page, a notebook looked at in it
- ``exercises``: the exercises' smoke parameters and the wrong answers their checks must reject
- ``costs``: benchmark rows of hand-built costs; ``gradients``: a gradient to compress
- ``network``: hosts as network namespaces (root); ``scripts``: scripts/ as modules; ``tier_times``: the tiers
"""
