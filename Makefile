# The two set-up commands of the README:
#   make lab    install everything, start the embedded gateway, open JupyterLab on the tutorials
#   make test   install everything (Chromium too), check types and style, run the whole test suite
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: lab test chromium

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

lab: $(STAMP)
	$(VENV)/bin/gatecell lab

test: $(STAMP) chromium
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(PY) -m pytest

# Debian's Chromium drives the widget tests; Playwright never downloads a browser here.
chromium:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
