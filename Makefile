# The two set-up commands of the README:
#   make lab    install everything, start the embedded gateway, open JupyterLab on the tutorials
#   make test   install everything (Chromium and LiteLLM's proxy too), check types, style and layers, run the whole test suite
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# LiteLLM's proxy, a real third-party gateway for tests/thirdparty, in a venv of its own so its
# pins never touch gatecell's (about 90 s, once). The tests find it here or at GATECELL_LITELLM_VENV.
LITELLM_VENV  ?= .venv-litellm
LITELLM_STAMP := $(LITELLM_VENV)/.installed

.PHONY: lab test chromium litellm

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

lab: $(STAMP)
	$(VENV)/bin/gatecell lab

test: $(STAMP) chromium $(LITELLM_STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports
	GATECELL_LITELLM_VENV=$(LITELLM_VENV) $(PY) -m pytest

litellm: $(LITELLM_STAMP)

$(LITELLM_STAMP): tests/thirdparty/litellm-requirements.txt
	python3 -m venv $(LITELLM_VENV)
	$(LITELLM_VENV)/bin/python -m pip install -q -r tests/thirdparty/litellm-requirements.txt
	touch $@

# Debian's Chromium drives the widget tests; Playwright never downloads a browser here.
chromium:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
