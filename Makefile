# Two entry points for a bare machine with Python 3.11+: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
COMPILED := $(VENV)/.engine-built
ENGINE_SOURCES := $(shell find engine -name '*.py' -not -path '*/__pycache__/*')

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


## The engine's hot modules compiled with mypyc when a C compiler is there (pure Python otherwise);
## rebuilt whenever an engine source changes. `LEDGER_ENGINE=pure` runs the sources beside a build.
$(COMPILED): $(STAMP) $(ENGINE_SOURCES)
	@echo "[make] compiling the engine with mypyc (about 30 s; pure Python if no C compiler)"
	$(BIN)/python -m engine.build --if-possible
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
	$(BIN)/mypy engine ledger consumers api devstack cli

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

## Compile the engine now, failing when it cannot (needs mypyc and a C compiler).
compile: $(STAMP)
	$(BIN)/python -m engine.build
	touch $(COMPILED)

## Back to the pure-Python engine (until an engine source changes or `make compile`).
clean-compiled:
	find engine \( -name "*.so" -o -name "*.pyd" \) -delete
	[ ! -d $(VENV) ] || touch $(COMPILED)

clean: clean-compiled
	rm -rf $(VENV) .ledger .pytest_cache .mypy_cache .ruff_cache
