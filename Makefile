# kbbot — `make run` and `make test` are the whole quick start.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH_VERSION ?= 2.13.0
# PyTorch's own CPU-only wheel index (torch 2.13.0+cpu for CPython 3.11: a 192 MB wheel). PyPI's `torch` wheel
# for Linux is the CUDA build, which pulls GBs of nvidia-* wheels.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: setup run test bench lint clean

setup: $(STAMP)

# CPU torch goes in first: a bare `torch` requirement would otherwise pull a multi-GB CUDA build. The CPU
# index is tried with a short timeout and no retries, so a machine that cannot reach it (a mirror, a
# proxy) falls back to its configured index at once instead of hanging.
$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "kbbot needs Python 3.11 ($(PYTHON) not found)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --timeout 15 --retries 0 --index-url $(TORCH_INDEX) torch==$(TORCH_VERSION) 2>/dev/null \
	  || { echo "PyTorch's CPU index is not reachable; installing torch from the configured index"; \
	       $(BIN)/pip install --quiet torch==$(TORCH_VERSION); }
	@$(BIN)/python -c "import torch; torch.version.cuda and print('warning: torch is a CUDA build; see TORCH_INDEX')"
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# One process syncs and then serves: imports and the embedding model are loaded once.
run: setup
	$(BIN)/kbbot start --sync

test: setup
	$(BIN)/ruff check bot tools tests scripts
	$(BIN)/ruff format --check bot tools tests scripts
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/kbbot eval all

lint: setup
	$(BIN)/ruff check bot tools tests scripts
	$(BIN)/ruff format --check bot tools tests scripts

clean:
	rm -rf $(VENV) .kbbot
