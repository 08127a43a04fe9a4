# The two commands of the README: `make run` and `make test`. Both install the exact
# versions in requirements.lock (every direct and transitive dependency, pip and setuptools
# included); `make lock` regenerates it from setup.cfg's ranges with pip-tools.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
WORKDIR ?= runs/quickstart
PIP_TOOLS := pip-tools==7.6.2

.PHONY: run test venv lock clean

$(VENV)/.installed: requirements.lock setup.cfg pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { \
	  echo "make: requirements.lock needs Python >= 3.11; run with PYTHON=python3.11 (or newer)"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.lock
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

venv: $(VENV)/.installed

run: venv
	$(PY) experiments/quickstart.py --workdir $(WORKDIR)

test: venv
	$(PY) -m pytest -q -n 2 --dist load tests

# Refresh the lock (newest versions within setup.cfg's ranges), then rerun `make test`
# and re-measure the figures BUILD_NOTES.md records.
lock:
	rm -rf .lockenv
	$(PYTHON) -m venv .lockenv
	.lockenv/bin/pip install --quiet '$(PIP_TOOLS)'
	.lockenv/bin/pip-compile --quiet --upgrade --extra test --allow-unsafe --strip-extras \
	  --no-emit-index-url --no-emit-find-links -o requirements.lock setup.cfg tools/lock.in
	rm -rf .lockenv

clean:
	rm -rf $(VENV) *.egg-info
