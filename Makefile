# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
WORKDIR ?= runs/quickstart

.PHONY: run test venv clean

$(VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

venv: $(VENV)/.installed

run: venv
	$(PY) experiments/quickstart.py --workdir $(WORKDIR)

test: venv
	$(PY) -m pytest -q -n 2 --dist load tests

clean:
	rm -rf $(VENV) *.egg-info
