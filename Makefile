# The two set-up commands of the README:
#   make lab    install everything, start the embedded gateway, open JupyterLab on the tutorials
#   make test   install everything (Chromium, squid and LiteLLM's proxy too), check types, style and layers, run the whole test suite
# and the documentation site (mkdocs.yml, from docs/):
#   make docs   build it into site/ (tests/docs/test_site.py builds it too, with --strict)
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# LiteLLM's proxy, a real third-party gateway for tests/thirdparty, in a venv of its own so its
# pins never touch gatecell's (about 90 s, once). The tests find it here or at GATECELL_LITELLM_VENV.
LITELLM_VENV  ?= .venv-litellm
LITELLM_STAMP := $(LITELLM_VENV)/.installed

# The suite runs on TEST_JOBS pytest-xdist workers, a test file whole on one of them (the
# root conftest.py says why); `make test TEST_JOBS=0` runs it in one process.
TEST_JOBS ?= 2

.PHONY: lab test docs debian litellm

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

lab: $(STAMP)
	$(VENV)/bin/gatecell lab

test: $(STAMP) debian $(LITELLM_STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports
	GATECELL_LITELLM_VENV=$(LITELLM_VENV) $(PY) -m pytest -n $(TEST_JOBS) --dist loadfile

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

litellm: $(LITELLM_STAMP)

$(LITELLM_STAMP): tests/thirdparty/litellm-requirements.txt
	python3 -m venv $(LITELLM_VENV)
	$(LITELLM_VENV)/bin/python -m pip install -q -r tests/thirdparty/litellm-requirements.txt
	touch $@

# Debian's packages the tests drive: Chromium for the widget tests (Playwright never downloads
# a browser here); squid, the real proxy of tests/proxy.py, which starts its own on a free
# loopback port; openssl, which writes its htpasswd. One `apt-get update`, only when one is
# missing; the squid service a fresh install may start is stopped and disabled (unused).
debian:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	[ -x /usr/sbin/squid ] || missing="$$missing squid"; \
	command -v openssl >/dev/null 2>&1 || missing="$$missing openssl"; \
	if [ -n "$$missing" ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
		case "$$missing" in *squid*) { systemctl disable --now squid || service squid stop; } >/dev/null 2>&1 || true;; esac; \
	fi
