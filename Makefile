# Two entry points for a bare machine with Python 3.11+: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
COMPILED := $(VENV)/.engine-built
## What the compiled build depends on: the engine's sources, ledger.build and the ledger's compiled
## modules with everything they import from ledger (verify, replay, store).
COMPILED_SOURCES := $(shell find engine ledger/verify ledger/replay ledger/store ledger/build.py -name '*.py' -not -path '*/__pycache__/*')

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


## The engine's and the ledger's hot modules compiled with mypyc when a C compiler is there (pure
## Python otherwise; engine/build.py, ledger/build.py); rebuilt whenever one of their sources changes.
## `LEDGER_ENGINE=pure` runs the sources beside a build.
$(COMPILED): $(STAMP) $(COMPILED_SOURCES)
	@echo "[make] compiling the engine and the ledger's hot modules with mypyc (about a minute; pure Python if no C compiler)"
	$(BIN)/python -m ledger.build --if-possible
	touch $(COMPILED)

install: $(STAMP) $(COMPILED)

## The main job on embedded defaults.
run: install
	@echo "[make] running ledger demo"
	$(BIN)/ledger demo

lint: $(STAMP)
	$(BIN)/ruff check engine ledger consumers api devstack cli tests bench
	$(BIN)/ruff format --check engine ledger consumers api devstack cli tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

## Import direction engine <- ledger <- consumers <- (api | devstack) <- cli (contracts in pyproject.toml).
imports: $(STAMP)
	$(BIN)/lint-imports

## The whole test suite: lint, types, import contracts, unit, integration and end-to-end tests.
test: install lint typecheck imports
	$(BIN)/pytest -q -p no:cacheprovider --durations=15

unit: install
	$(BIN)/pytest -q tests/unit

bench: install
	$(BIN)/python bench/run_all.py

## Compile the engine and the ledger's hot modules now, failing when it cannot (needs mypyc and a C compiler).
compile: $(STAMP)
	$(BIN)/python -m ledger.build
	touch $(COMPILED)

## Back to the pure-Python engine (until an engine source changes or `make compile`).
clean-compiled:
	find engine ledger \( -name "*.so" -o -name "*.pyd" \) -delete
	[ ! -d $(VENV) ] || touch $(COMPILED)

clean: clean-compiled
	rm -rf $(VENV) .ledger .pytest_cache .mypy_cache .ruff_cache
