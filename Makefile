# The two commands of the README: `make run` and `make test`. Both install the exact
# versions in requirements.lock (every direct and transitive dependency, pip and setuptools
# included): the CPU build of jax. `make venv-cuda` / `make venv-tpu` add the accelerator
# build on top: requirements-cuda.lock and requirements-tpu.lock are requirements.lock plus
# the plugin and its libraries, every shared pin identical. `make lock` regenerates all three
# from setup.cfg's ranges with pip-tools.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
WORKDIR ?= runs/quickstart
PIP_TOOLS := pip-tools==7.6.2

.PHONY: run test venv venv-cuda venv-tpu lock clean

$(VENV)/.installed: requirements.lock setup.cfg pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { \
	  echo "make: requirements.lock needs Python >= 3.11; run with PYTHON=python3.11 (or newer)"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.lock
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

venv: $(VENV)/.installed

# The same venv plus jax's CUDA 12 plugin and NVIDIA libraries (GBs), or libtpu.
$(VENV)/.installed-%: $(VENV)/.installed requirements-%.lock
	$(PY) -m pip install --quiet -r requirements-$*.lock
	touch $@

venv-cuda: $(VENV)/.installed-cuda

venv-tpu: $(VENV)/.installed-tpu

run: venv
	$(PY) experiments/quickstart.py --workdir $(WORKDIR)

test: venv
	$(PY) -m pytest -q -n 2 --dist loadgroup --max-worker-restart=0 --durations=15 tests

# Refresh the lock (newest versions within setup.cfg's ranges), then rerun `make test`
# and re-measure the figures BUILD_NOTES.md records. The accelerator locks start from a copy
# of the new requirements.lock and are compiled without --upgrade, so that pip-compile keeps
# its pins and only adds what the extra needs.
COMPILE := .lockenv/bin/pip-compile --quiet --allow-unsafe --strip-extras \
  --no-emit-index-url --no-emit-find-links
lock:
	rm -rf .lockenv
	$(PYTHON) -m venv .lockenv
	.lockenv/bin/pip install --quiet '$(PIP_TOOLS)'
	$(COMPILE) --upgrade --extra test -o requirements.lock setup.cfg tools/lock.in
	for x in cuda tpu; do \
	  cp requirements.lock requirements-$$x.lock && \
	  $(COMPILE) --extra test --extra $$x -o requirements-$$x.lock setup.cfg tools/lock.in \
	  || exit 1; \
	done
	rm -rf .lockenv

clean:
	rm -rf $(VENV) *.egg-info
