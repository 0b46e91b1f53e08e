# The README's two commands: `make demo` (main job) and `make test` (whole suite).
# Each creates or reuses .venv and installs everything with pip first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# pip prints what it collects and installs (no -q): a fresh install takes minutes, most of it downloads
PIP := $(PY) -m pip --disable-pip-version-check
STAMP := $(VENV)/.dualdl-installed
# mkdocs-material prints a notice about its successor on every build; the site does not depend on it
MKDOCS := NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs
ARGS ?=
# pytest workers for `make test` (pytest-xdist); TEST_WORKERS=0 runs in this process
TEST_WORKERS ?= 2

.PHONY: install demo test gpu-check bench docs clean

install: $(STAMP)

# Four stages, each announced by one line; pip shows what it collects and installs. The last one,
# pip check, is expected clean: gluoncv's own dependencies (opencv-python, pandas, yacs, autocfg, ...)
# come with the gluoncv extra, pinned beside mxnet's numpy<1.24 in constraints.txt. A failure is
# reported, not fatal; what it means and what to do: docs/index.md, "Installed packages and pip check".
$(STAMP): setup.cfg constraints.txt pyproject.toml
	@echo "== dualdl install 1/4: virtual environment $(VENV), pip, setuptools, wheel"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel
	@echo "== dualdl install 2/4: cython and numpy<1.24 (gluonnlp 0.10 builds from source against them)"
	$(PIP) install -c constraints.txt cython "numpy<1.24"
	@echo "== dualdl install 3/4: dualdl with torch, mxnet, gluonnlp, gluoncv and its dependencies, the test and docs tools (a few minutes)"
	$(PIP) install -c constraints.txt --no-build-isolation -e ".[all,gluoncv,demo,dev]"
	@echo "   and d2l 0.17.6's wheel, downloaded, not installed (its pins clash with mxnet's numpy): tests read its d2l/mxnet.py"
	$(PIP) download -q --no-deps d2l==0.17.6 -d $(VENV)/wheels
	@echo "== dualdl install 4/4: pip check (every installed package has what it declares)"
	$(PIP) check || echo "pip check found the problems above: see docs/index.md, 'Installed packages and pip check'"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/dualdl demo $(ARGS)

# the docs site first (mkdocs without -q: with -q it drops its warnings before --strict counts them)
test: $(STAMP)
	$(MKDOCS) build --strict -d $(CURDIR)/build/site
	$(PY) -m pytest -q -n $(TEST_WORKERS) $(ARGS)

# On a CUDA machine (under 6 minutes): the tests marked gpu (each CUDA path against the CPU path)
# and the CUDA benchmark rows. DUALDL_REQUIRE_GPU=1 turns "no framework sees CUDA" into a failure.
# On an offline CUDA image whose python3 already has torch (no venv, no pip index):
#   PYTHONPATH=$PWD make gpu-check PY=python3 STAMP=     (MXNet's rows then skip and say why)
gpu-check: $(STAMP)
	DUALDL_REQUIRE_GPU=1 timeout 240 $(PY) -m pytest -q -rsP -m gpu tests/test_gpu.py
	mkdir -p build
	timeout 110 $(PY) -m benchmarks --only data_parallel:cuda --only data_parallel:cuda_mxnet --case-timeout 50 --json build/gpu-bench.json --markdown ''

bench: $(STAMP)
	$(PY) -m benchmarks $(ARGS)

# the site into site/, then headless Chromium screenshots of the home, a porting and the API page, and
# a search, into build/docs-screenshots/ (skipped with a line when there is no chromium)
docs: $(STAMP)
	$(MKDOCS) build --strict
	$(PY) tests/docs_browser.py site build/docs-screenshots

clean:
	rm -rf $(VENV) site build *.egg-info
