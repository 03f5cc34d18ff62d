# PS Lab: `make lab` is all a learner needs (`make doctor` checks the machine); `make test` is for contributors.
# `make help` lists every target. With conda, `make lab VENV="$CONDA_PREFIX"` uses the active environment.
# A target's line in `make help` is its `## ` comment.
# The Python that makes .venv (and runs the scripts below): 3.11-3.13. scripts/find_python.sh chooses one
# (python3.13, python3.12, python3.11 or python3 on PATH, else one uv manages) or stops, before anything
# is made, with the steps to get one. `make lab PYTHON=/path/to/python3.12` chooses it yourself.
PYTHON ?=
FIND_PYTHON = python=$$(sh scripts/find_python.sh $(PYTHON)) &&
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
TEST_STAMP := $(VENV)/.test-installed-stamp
HUB_STAMP := $(VENV)/.hub-installed-stamp
KERNEL := pslab
# The learner's copies of notebooks/, exercises/ and docs/ (git ignores it; see labkit/tools/workfolder.py).
WORK   := work
WHEELHOUSE := wheelhouse

.DEFAULT_GOAL := help
.PHONY: help lab lab-small hub test test-fast test-defaults install install-test install-hub kernel exercises doctor \
	doctor-small bench bench-report bench-startup measurements docs sync-notebooks site check-platforms test-offline-install \
	learner-bundle clean-runs

help: ## list the targets, one line each
	@echo "PS Lab: make lab to start, make test to check everything. Targets:"
	@awk 'BEGIN {FS = ":[^#]*## "} /^[a-zA-Z_-]+:[^#]*## / {printf "  make %-21s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

install: $(STAMP) ## create .venv with the pinned stack and register the "PS Lab" kernel (once)

# scripts/wheelhouse.py installs from the wheelhouse folder of this machine's platform and Python alone (no
# network needed), or from the package index where the wheelhouse has no such folder or lacks a wheel.
WHEELHOUSE_INSTALL = $(PY) scripts/wheelhouse.py install $(WHEELHOUSE)

# JupyterLab's settings for every learner (jupyterlab/overrides.json): no "get notified about official Jupyter
# news?" question, no news or update checks over the network.
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings

# Re-install whenever the pinned dependencies, the kernel's registration or the lab settings change. A learner's
# install is the kit alone; `make test` adds the test and authoring tools (pyproject.toml's "test" extra).
$(STAMP): pyproject.toml labkit/tools/kernelspec.py jupyterlab/overrides.json
	test -x $(PY) || { $(FIND_PYTHON) "$$python" -m venv $(VENV); }
	$(WHEELHOUSE_INSTALL) -- -e .
	$(MAKE) kernel
	mkdir -p $(LAB_SETTINGS) && cp jupyterlab/overrides.json $(LAB_SETTINGS)/overrides.json
	touch $(STAMP)

install-test: $(TEST_STAMP) ## install the test and authoring tools too (the "test", "site" and "hub" extras)

# The wheelhouse holds the learner's wheels: the test and hub tools come from the index.
$(TEST_STAMP): $(STAMP)
	$(WHEELHOUSE_INSTALL) --index -- -e '.[test,site,hub]'
	touch $(TEST_STAMP)

install-hub: $(HUB_STAMP) ## install the class hub's tools too (the "hub" extra: JupyterHub, its proxy, its idle culler)

$(HUB_STAMP): $(STAMP)
	$(WHEELHOUSE_INSTALL) --index -- -e '.[hub]'
	touch $(HUB_STAMP)

kernel: ## (re)register the "PS Lab" Jupyter kernel: the kit's environment variables, started isolated where possible
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL) \
	  --display-name "PS Lab (TensorFlow 2.21)" \
	  --env TF_USE_LEGACY_KERAS 1 --env GRPC_FAIL_FAST use_caller --env TF_CPP_MIN_LOG_LEVEL 2
	$(PY) -m labkit.tools.kernelspec $(KERNEL)

# Bound to 127.0.0.1 with Jupyter's token on: only you can reach your kernels (labkit/tools/lab.py).
# The first run copies notebooks/ and exercises/ into $(WORK)/; later runs copy only missing files.
# The kernels have no network where they run isolated (make kernel): full MNIST is cached out here first.
lab: install ## install if needed, copy the notebooks into work/ (once), cache full MNIST and open JupyterLab there
	$(PY) -m labkit.tools.workfolder $(WORK)
	@if [ -z "$$LABKIT_OFFLINE$$LABKIT_MNIST_SOURCE" ]; then $(VENV)/bin/labkit data download || \
	  echo "make lab: the notebooks will use the 5,000-image MNIST subset"; fi
	$(PY) -m labkit.tools.lab $(WORK)

# The class hub (docs/hub.md), as root. The kit goes where every learner can read it (HUB_PREFIX), without
# solutions/ (learners may read all of it), into a venv made from this system's own Python: one in root's home
# (pyenv's, uv's) is out of the learners' reach. Then labkit.tools.hub checks the server and runs JupyterHub,
# from HUB_PREFIX: `python -m` would take the kit in the current folder first.
HUB_GROUP ?=
HUB_PREFIX ?= /opt/pslab
HUB_ARGS ?=
SYSTEM_PATH := /usr/local/bin:/usr/bin:/bin
hub: ## (as root) JupyterHub for the users in group HUB_GROUP: the kit installed in /opt/pslab, then the hub (docs/hub.md)
	@test -n "$(HUB_GROUP)" || { echo "make hub: name the class's Unix group: sudo make hub HUB_GROUP=pslab (docs/hub.md)" >&2; exit 2; }
	@test "$$(id -u)" = 0 || { echo "make hub: run it as root (sudo): the hub starts each learner's server as that learner" >&2; exit 2; }
ifneq ($(abspath $(HUB_PREFIX)),$(CURDIR))
	$(FIND_PYTHON) "$$python" scripts/learner_bundle.py --wheelhouse $(WHEELHOUSE) dist/pslab-hub.tar.gz
	mkdir -p $(HUB_PREFIX) && tar -xzf dist/pslab-hub.tar.gz --strip-components=1 --no-same-owner -C $(HUB_PREFIX)
endif
	python=$$(PATH=$(SYSTEM_PATH) sh scripts/find_python.sh $(PYTHON)) && $(MAKE) -C $(HUB_PREFIX) install-hub PYTHON="$$python"
	chmod -R go+rX,go-w $(HUB_PREFIX)
	$(HUB_PREFIX)/$(VENV)/bin/labkit data download || echo "make hub: the learners will use the 5,000-image MNIST subset"
	cd $(HUB_PREFIX) && $(PY) -m labkit.tools.hub --group $(HUB_GROUP) $(HUB_ARGS)

# The kernels inherit the variable from JupyterLab.
lab-small: ## make lab for laptops with little memory: the offline MNIST subset even where full MNIST is cached
	LABKIT_MNIST_SOURCE=offline-subset $(MAKE) lab

# One pytest call on three workers; each test file runs whole on one of them (pyproject's --dist loadfile).
# Three on the kit's 2 cores: a third worker fills the time the others wait for JupyterLab, the hub, Chromium or a
# timeout (docs/contributing.md).
test: install-test ## install if needed, then run every test (all tiers, three pytest workers)
	$(PY) -m pytest -n 3

test-fast: install-test ## the unit tier alone: no TensorFlow cluster, no kernel, no root
	$(PY) -m pytest -m unit -n 2

# nbval runs each notebook cell by cell, reporting each cell (outputs not compared: --nbval-lax).
test-defaults: install-test ## run every notebook with its learner defaults, as a learner runs it
	$(PY) -m pytest --nbval-lax --nbval-kernel-name=pslab notebooks

exercises: install ## regenerate exercises/ from solutions/ (refuses to overwrite an edited exercise)
	$(PY) -m labkit.tools.exercises

doctor: install ## the workshop pre-flight: labkit doctor --workshop
	$(PY) -m labkit.tools.cli doctor --workshop

doctor-small: ## make doctor for a laptop that will use make lab-small: memory judged with the offline MNIST subset
	LABKIT_MNIST_SOURCE=offline-subset $(MAKE) doctor

bench: install ## the speed benchmark: labkit bench (results in runs/bench/points)
	$(PY) -m labkit.tools.cli bench --out runs/bench/points

bench-report: install ## the speed benchmark through notebook 08: labkit bench --report
	$(PY) -m labkit.tools.cli bench --report --out runs/bench/report

bench-startup: install ## cluster start-up against a bare TensorFlow import: labkit bench startup
	$(PY) -m labkit.tools.cli bench startup

measurements: install ## measure what the pages quote (resumable), then write docs/measurements.md and the quotes
	$(PY) -m measurements

docs: install ## regenerate docs/cli.md (the command's parser) and contributing.md's layers, retired names and layout
	$(PY) -m labkit.tools.pages

# A notebook definition marked `# labkit: NAME` is a copy of labkit's NAME (labkit/tools/notebook_copies.py).
sync-notebooks: install ## rewrite each notebook definition marked `# labkit: NAME` from labkit's source
	$(PY) -m labkit.tools.notebook_copies

site: install ## build the HTML book of the executed notebooks into runs/site (needs the site extra)
	$(PY) scripts/build_site.py

check-platforms: ## ask the registry whether the pinned stack installs on every platform of docs/install.md
	$(FIND_PYTHON) "$$python" scripts/check_platforms.py

# Every wheel `make install` needs, one folder per platform and Python: this machine's by default; for a mixed
# room name the others, e.g. `make wheelhouse PLATFORMS="linux-x86_64 macos-arm64" PYTHONS="3.11 3.12"`.
# Copy the kit with it (make learner-bundle) to laptops without network: `make lab` installs from their folder.
wheelhouse: pyproject.toml ## download every wheel the kit installs, for offline laptops (PLATFORMS, PYTHONS: a mixed room)
	$(FIND_PYTHON) "$$python" scripts/wheelhouse.py build $(WHEELHOUSE) \
	  $(if $(PLATFORMS),--platform $(PLATFORMS)) $(if $(PYTHONS),--python $(PYTHONS))

test-offline-install: wheelhouse ## install from this machine's wheelhouse folder alone into a fresh venv, and check it
	$(FIND_PYTHON) "$$python" scripts/wheelhouse.py check $(WHEELHOUSE)

learner-bundle: ## the kit for learners: every tracked file except solutions/, with wheelhouse/ if built
	$(FIND_PYTHON) "$$python" scripts/learner_bundle.py --wheelhouse $(WHEELHOUSE) dist/pslab-learner.tar.gz

clean-runs: ## delete runs/ (executed notebooks, benchmarks, screenshots)
	rm -rf runs
