# Two entry points for a bare machine with Python 3.11+: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck imports unit install clean bench compile clean-compiled

$(STAMP): pyproject.toml
	@echo "[make] creating the virtualenv $(VENV)"
	$(PYTHON) -m venv $(VENV)
	@echo "[make] upgrading pip"
	$(BIN)/python -m pip install --quiet --upgrade pip
	@echo "[make] installing the project and its dependencies into $(VENV) (about a minute the first time)"
	$(BIN)/python -m pip install --quiet -e '.[embedded,test]'
	touch $(STAMP)
	@echo "[make] installed"


install: $(STAMP)

## The main job on embedded defaults.
run: $(STAMP)
	@echo "[make] running ledger demo"
	$(BIN)/ledger demo

lint: $(STAMP)
	$(BIN)/ruff check engine ledger consumers api devstack cli tests bench
	$(BIN)/ruff format --check engine ledger consumers api devstack cli tests bench

typecheck: $(STAMP)
	$(BIN)/mypy engine ledger consumers api devstack cli

## Import direction engine <- ledger <- consumers <- (api | devstack) <- cli (contracts in pyproject.toml).
imports: $(STAMP)
	$(BIN)/lint-imports

## The whole test suite: lint, types, import contracts, unit, integration and end-to-end tests.
test: lint typecheck imports
	$(BIN)/pytest -q -p no:cacheprovider --durations=15

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

## Optional: compile the engine's hot pure modules with mypyc, in place (needs a C compiler).
## Nothing depends on it; `make clean-compiled` returns to the pure-Python engine.
compile: $(STAMP)
	$(BIN)/python -m engine.build

clean-compiled:
	find engine \( -name "*.so" -o -name "*.pyd" \) -delete

clean: clean-compiled
	rm -rf $(VENV) .ledger .pytest_cache .mypy_cache .ruff_cache
