# The two set-up commands of the README: `make demo` (the main job) and `make test` (the test suite).
# Each creates .venv and installs kinemesh from this checkout; nothing else is needed on a clean machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
OUT ?= out/demo

.PHONY: demo test test-slow install browser checkpoint bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[all]"
	touch $(STAMP)

install: $(STAMP)

# Debian's chromium for the viewer's browser test (playwright drives it; no browser download).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian chromium for the browser test"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "warning: could not install chromium; browser tests will be skipped"; }

demo: $(STAMP)
	$(BIN)/kinemesh demo --force --out $(OUT)

test: $(STAMP) browser
	$(BIN)/python -m pytest -q

test-slow: $(STAMP) browser
	$(BIN)/python -m pytest -q -m slow

checkpoint: $(STAMP)
	bash scripts/make_checkpoint.sh

bench: $(STAMP)
	for b in bench/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) out .pytest_cache
