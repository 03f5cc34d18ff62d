# PS Lab: two commands do everything.
#   make lab    install into .venv (first time only), copy the notebooks into work/ and open JupyterLab there
#   make test   install the kit and its test tools if needed, then run every test
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
TEST_STAMP := $(VENV)/.test-installed-stamp
KERNEL := pslab
# The learner's copies of notebooks/ and exercises/ (git ignores it; see labkit/workfolder.py).
WORK   := work

WHEELHOUSE := wheelhouse

.PHONY: lab lab-small test test-defaults install install-test kernel bench bench-report clean-runs exercises \
	check-setup check-platforms test-offline-install learner-bundle

install: $(STAMP)

# With a wheelhouse (`make wheelhouse`), install from it alone: no network needed.
PIP_SOURCE = $(if $(wildcard $(WHEELHOUSE)/*.whl),--no-index --find-links $(WHEELHOUSE))

# Re-install whenever the pinned dependencies change. A learner's install is the kit alone;
# `make test` adds the test and authoring tools (pyproject.toml's "test" extra).
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(PIP_SOURCE) -e .
	$(MAKE) kernel
	touch $(STAMP)

install-test: $(TEST_STAMP)

# The wheelhouse holds the learner's wheels: the test tools may still come from the index.
$(TEST_STAMP): $(STAMP)
	$(PY) -m pip install --quiet $(if $(wildcard $(WHEELHOUSE)/*.whl),--find-links $(WHEELHOUSE)) -e '.[test]'
	touch $(TEST_STAMP)

# The kit's Jupyter kernel sets the same environment `import labkit` sets.
kernel:
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL) \
	  --display-name "PS Lab (TensorFlow 2.21)" \
	  --env TF_USE_LEGACY_KERAS 1 --env GRPC_FAIL_FAST use_caller --env TF_CPP_MIN_LOG_LEVEL 2

# Bound to 127.0.0.1 with Jupyter's token on: only you can reach your kernels.
# Jupyter refuses to run as root (containers, CI machines) unless told it may.
# The first run copies notebooks/ and exercises/ into $(WORK)/; later runs copy only missing files.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
lab: install
	$(PY) -m labkit.workfolder $(WORK)
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 $(ALLOW_ROOT) --ServerApp.root_dir=$(WORK) --LabApp.default_url=/lab/tree/notebooks

# For laptops with little memory: every notebook uses the 5,000-image offline MNIST subset,
# even where full MNIST is cached (the kernels inherit the variable from JupyterLab).
lab-small:
	LABKIT_MNIST_SOURCE=offline-subset $(MAKE) lab

# One process: 12-15 min on 2 cores. `$(PY) -m pytest -n 2 --dist loadfile` (pytest-xdist) was faster
# before, but under its load a timing-sensitive check failed in three of five runs (see README, Tests).
test: install-test
	$(PY) -m pytest

# Every notebook with its learner defaults, as a learner runs it (longer than `make test`).
test-defaults: install-test
	$(PY) -m pytest notebooks

# exercises/ is generated: run this after editing a notebook in solutions/ (it refuses to
# overwrite an edited exercise; `$(PY) -m labkit.exercises --force` does).
exercises: install
	$(PY) -m labkit.exercises

bench: install
	$(PY) -m labkit.cli bench startup

# The performance sweep through notebook 08 (papermill): executed notebook, CSV/JSON, plot.
bench-report: install
	$(PY) -m labkit.cli bench --report --out runs/bench/report

# The workshop pre-flight: one PASS/WARN/FAIL line per item, then a real 1-worker/1-ps cluster trains.
check-setup: install
	$(PY) -m labkit.cli doctor --workshop

# Does the pinned stack resolve on every platform the README names? (asks the registry; minutes)
check-platforms:
	$(PYTHON) scripts/check_platforms.py

# Every wheel `make install` needs, for this machine's platform and Python: copy the folder
# (or the whole kit with it) to laptops without network, then `make lab` installs from it.
$(WHEELHOUSE): pyproject.toml
	$(PYTHON) scripts/wheelhouse.py $(WHEELHOUSE)

# Builds the wheelhouse, then installs from it into a fresh venv with every index disabled and
# imports the stack there (network-heavy once, then about 2 minutes; not part of `make test`).
test-offline-install: $(WHEELHOUSE)
	$(PYTHON) scripts/wheelhouse.py --check $(WHEELHOUSE)

# The kit for learners: every tracked file except solutions/, with wheelhouse/ if it was built.
learner-bundle:
	$(PYTHON) scripts/learner_bundle.py --wheelhouse $(WHEELHOUSE) dist/pslab-learner.tar.gz

clean-runs:
	rm -rf runs
