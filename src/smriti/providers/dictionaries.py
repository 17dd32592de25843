"""simplemma's lemma dictionaries, decoded once per machine instead of at every start.

simplemma ships each language's dictionary front-coded and lzma-compressed; decoding the English
one into its lookup table is a pure-Python loop of 180k records (0.18 s, holding the GIL), and a
cold shared server paid it before its first recall could parse the query. The decoded table is
kept in the user's cache folder (``$XDG_CACHE_HOME/smriti`` or ``~/.cache/smriti``) as a
``marshal`` file, which loads in ~40 ms. Lookups are simplemma's own
(``MappingStrToByteString`` over the same bytes), so every lemma is the one simplemma gives.

The file is named after simplemma's version and the marshal format, written atomically (a
temporary file, then a rename), and read only when this OS user owns it. Anything wrong
with it (absent, unreadable, corrupt, an unwritable folder) falls back to simplemma's decoder:
the cache changes how fast a lemma comes, never which.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import marshal
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import simplemma
from simplemma.strategies.dictionaries.dictionary_factory import (
    DefaultDictionaryFactory,
    MappingStrToByteString,
)

logger = logging.getLogger(__name__)


def cache_folder() -> Path:
    """Where decoded dictionaries are kept (the XDG cache convention)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "smriti"


class CachedDictionaries:
    """A simplemma ``DictionaryFactory`` whose decoded tables persist in ``folder``."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder if folder is not None else cache_folder()
        # simplemma's own attribute: importlib.metadata.version() scans the installed packages (40 ms)
        self.stem = f"simplemma-{simplemma.__version__}-m{marshal.version}"

    def path(self, lang: str) -> Path:
        return self.folder / f"{self.stem}-{lang}.marshal"

    @functools.cache  # noqa: B019 -- one factory per process (cue_words'); its tables live as long
    def get_dictionary(self, lang: str) -> Mapping[str, str]:
        table = self._read(lang)
        if table is None:
            try:
                table = _decode(lang)
            except AttributeError:  # a simplemma whose tables are laid out otherwise: no cache
                logger.debug("simplemma %s: its dictionaries are not cached", simplemma.__version__)
                return DefaultDictionaryFactory().get_dictionary(lang)
            self._write(lang, table)
        return MappingStrToByteString(table)

    def _read(self, lang: str) -> dict[bytes, bytes] | None:
        path = self.path(lang)
        try:
            with path.open("rb") as file:
                if not _owned(file.fileno()):
                    return None  # marshal data is trusted: only this user's own file
                data = file.read()
            table = marshal.loads(data)  # marshal.load on a file reads in small pieces: 10x slower
        except FileNotFoundError:
            return None
        except (OSError, EOFError, ValueError, TypeError) as error:
            logger.debug("ignoring the cached dictionary %s: %s", path, error)
            return None
        if not isinstance(table, dict):
            return None
        return table

    def _write(self, lang: str, table: dict[bytes, bytes]) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, temporary = tempfile.mkstemp(dir=self.folder, prefix=f".{lang}-", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as file:
                    marshal.dump(table, file)
                os.replace(temporary, self.path(lang))
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except OSError as error:  # a read-only home: decode again next time
            logger.debug("cannot keep the decoded dictionary in %s: %s", self.folder, error)


def _owned(fd: int) -> bool:
    """True when this OS user owns the open file (always, where there are no user ids)."""
    getuid = getattr(os, "getuid", None)  # POSIX only
    return getuid is None or os.fstat(fd).st_uid == getuid()


def _decode(lang: str) -> dict[bytes, bytes]:
    """simplemma's own decoding of ``lang``'s dictionary, as the bytes table it looks words up in."""
    mapping = DefaultDictionaryFactory(cache_max_size=0).get_dictionary(lang)
    if isinstance(mapping, MappingStrToByteString):
        return dict(mapping._dict)  # its table as it is (simplemma 2: bytes -> bytes)
    return {key.encode(): value.encode() for key, value in mapping.items()}
