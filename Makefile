# The README's two commands: `make demo` (main job) and `make test` (whole suite).
# Each creates or reuses .venv and installs everything with pip first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip -q --disable-pip-version-check
STAMP := $(VENV)/.dualdl-installed
ARGS ?=
# pytest workers for `make test` (pytest-xdist); TEST_WORKERS=0 runs in this process
TEST_WORKERS ?= 2

.PHONY: install demo test gpu-check bench docs clean

install: $(STAMP)

$(STAMP): setup.cfg constraints.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip setuptools wheel
	# gluonnlp 0.10 builds from source against the venv's numpy and cython: install them first.
	$(PIP) install -c constraints.txt cython "numpy<1.24"
	$(PIP) install -c constraints.txt --no-build-isolation -e ".[all,dev]"
	# gluoncv (the translate corpus, the port tests); its own deps would replace pinned ones. Its model zoo
	# needs portalocker (in .[all]); import it beside torch>=2 with dualdl.port.gluoncv_compat.import_gluoncv().
	$(PIP) install -c constraints.txt --no-deps "gluoncv==0.10.5.post0"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/dualdl demo $(ARGS)

test: $(STAMP)
	$(VENV)/bin/mkdocs build --strict -q -d $(CURDIR)/build/site
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

docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict -q

clean:
	rm -rf $(VENV) site build *.egg-info
