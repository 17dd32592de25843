"""Static bearer tokens of the HTTP server: which token belongs to which user, stored hashed.

Two sources, read together:

* the tokens file (``SMRITI_TOKENS_FILE``, default ``STORAGE_LOCATION/tokens.json``), which
  ``smriti token add USER`` / ``revoke`` / ``list`` maintain: JSON, ``{"version": 1,
  "tokens": [{"id", "user", "sha256", "created_at"}]}``, written atomically with mode 0600;
* ``SMRITI_TOKENS``: ``user:sha256hex`` entries separated by commas, for deployments that
  configure everything through the environment (``printf %s TOKEN | sha256sum`` gives the hash).

Decisions worth knowing:

* Only the SHA-256 of a token is kept: a token is 256 random bits, so a plain hash is as good
  as a slow one, and a leaked file gives nobody a token. The token itself is printed once.
* :meth:`TokenTable.lookup` compares the hash against every entry with
  :func:`hmac.compare_digest` and never stops early, so its timing says nothing about which
  entry (or how much of one) matched.
* The running server re-reads the file when it changes (a ``stat`` per lookup): a revoked
  token stops working at its next request, on every server process that reads the file.
* A file that cannot be read or parsed while the server runs fails closed (no file token is
  accepted) and says so in the log; at start it is a settings error.

Nothing here imports the MCP SDK: the CLI uses it too.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from smriti.errors import InvalidInput, SettingsError, UnsafeUserError
from smriti.stores.base import validate_user_name
from smriti.stores.paths import process_lock

logger = logging.getLogger("smriti.auth")

TOKEN_PREFIX = "smriti_"  # recognisable in a leaked config or log (secret scanners key on prefixes)
FILE_VERSION = 1
_HEX64 = re.compile(r"[0-9a-f]{64}")


def hash_token(token: str) -> str:
    """The SHA-256 of ``token`` as 64 lower-case hex digits (what the file and SMRITI_TOKENS hold)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh token: the prefix and 256 random bits, URL-safe."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class TokenEntry:
    """One accepted token: its short id (for revoking), its user and its hash."""

    id: str
    user: str
    sha256: str
    created_at: str = ""
    source: str = "file"  # "file" or "env": only file tokens can be revoked with the CLI


def _entry(raw: object, where: str) -> TokenEntry:
    if not isinstance(raw, dict):
        raise SettingsError(f"{where}: each token must be an object with id, user and sha256")
    user, digest, id_ = raw.get("user"), raw.get("sha256"), raw.get("id")
    if not isinstance(user, str) or not isinstance(digest, str) or not isinstance(id_, str):
        raise SettingsError(f"{where}: each token needs string fields id, user and sha256")
    if not _HEX64.fullmatch(digest):
        raise SettingsError(f"{where}: token {id_!r} has no valid sha256 (64 lower-case hex digits)")
    try:
        validate_user_name(user)
    except UnsafeUserError as error:
        raise SettingsError(f"{where}: token {id_!r}: {error}") from None
    return TokenEntry(id=id_, user=user, sha256=digest, created_at=str(raw.get("created_at", "")))


def parse_env_tokens(value: str) -> list[TokenEntry]:
    """``user:sha256hex,user2:sha256hex`` (white space ignored) as entries.

    Raises:
        SettingsError: an entry without a user, with an unsafe user name or a malformed hash.
    """
    entries = []
    for number, item in enumerate(part.strip() for part in value.split(",")):
        if not item:
            continue
        user, sep, digest = item.partition(":")
        if not sep:
            raise SettingsError(f"SMRITI_TOKENS: entry {number + 1} is not user:sha256hex")
        raw = {"id": f"env-{number + 1}", "user": user.strip(), "sha256": digest.strip().lower()}
        entries.append(_replace_source(_entry(raw, "SMRITI_TOKENS"), "env"))
    return entries


def _replace_source(entry: TokenEntry, source: str) -> TokenEntry:
    return TokenEntry(**{**asdict(entry), "source": source})


# ----------------------------------------------------------------------------- the file
class TokenFile:
    """The tokens file: read, add, revoke. Writers hold an exclusive lock on ``<file>.lock``,
    so two ``smriti token add`` at once both land."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> list[TokenEntry]:
        """The file's entries ([] when it does not exist).

        Raises:
            SettingsError: the file is unreadable or not a tokens file.
        """
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as error:
            raise SettingsError(f"cannot read the tokens file {self.path}: {error.strerror}") from None
        try:
            data = json.loads(text) if text.strip() else {"tokens": []}
        except json.JSONDecodeError as error:
            raise SettingsError(f"the tokens file {self.path} is not valid JSON: {error}") from None
        if not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
            raise SettingsError(f'the tokens file {self.path} has no "tokens" list')
        return [_entry(raw, str(self.path)) for raw in data["tokens"]]

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with process_lock(self.path.with_name(self.path.name + ".lock")):
            yield

    def _write(self, entries: list[TokenEntry]) -> None:
        tokens = [{k: v for k, v in asdict(e).items() if k != "source"} for e in entries]
        text = json.dumps({"version": FILE_VERSION, "tokens": tokens}, indent=2) + "\n"
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        # 0600 from the first byte: the hashes do not grant access, but the user list is private.
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, self.path)  # readers see the old file or the new one, never half

    def add(self, user: str) -> tuple[TokenEntry, str]:
        """Create a token for ``user``; returns its entry and the token (shown once, never stored).

        Raises:
            UnsafeUserError: the user name cannot be used.
        """
        validate_user_name(user)
        token = new_token()
        with self._locked():
            entries = self.read()
            taken = {e.id for e in entries}
            id_ = secrets.token_hex(4)
            while id_ in taken:  # 32 bits: a clash is rare, but must not shadow an entry
                id_ = secrets.token_hex(4)
            created = datetime.now(UTC).isoformat(timespec="seconds")
            entry = TokenEntry(id=id_, user=user, sha256=hash_token(token), created_at=created)
            self._write([*entries, entry])
        return entry, token

    def revoke(self, user_or_id: str) -> list[TokenEntry]:
        """Remove the token with this id, or every token of this user; returns what was removed.

        Raises:
            InvalidInput: no token has this id and no token belongs to a user of this name.
        """
        with self._locked():
            entries = self.read()
            gone = [e for e in entries if e.id == user_or_id] or [e for e in entries if e.user == user_or_id]
            if not gone:
                raise InvalidInput(f"no token with id {user_or_id!r} and no token of a user {user_or_id!r}")
            self._write([e for e in entries if e not in gone])
        return gone


# ----------------------------------------------------------------------------- lookups
class TokenTable:
    """Every accepted token (file and environment), for the server's token verifier.

    Args:
        path: the tokens file, or None for environment tokens only.
        env_entries: the entries of SMRITI_TOKENS.
    """

    def __init__(self, path: Path | None, env_entries: list[TokenEntry]) -> None:
        self.file = TokenFile(path) if path is not None else None
        self.env_entries = env_entries
        self._guard = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._file_entries: list[TokenEntry] = []
        if self.file is not None:
            self._file_entries = self.file.read()  # at start a bad file is a settings error
            self._stamp = self._stat()

    def _stat(self) -> tuple[int, int, int] | None:
        assert self.file is not None
        try:
            info = self.file.path.stat()
        except FileNotFoundError:
            return None
        return (info.st_mtime_ns, info.st_size, info.st_ino)

    def _current(self) -> list[TokenEntry]:
        """The file's entries, re-read when its stamp (mtime, size, inode) changed."""
        if self.file is None:
            return []
        with self._guard:
            stamp = self._stat()
            if stamp != self._stamp:
                try:
                    self._file_entries = self.file.read()
                except SettingsError as error:  # fail closed: a broken file admits nobody
                    logger.error("%s; no token of the file is accepted until it is fixed", error)
                    self._file_entries = []
                self._stamp = stamp
            return self._file_entries

    def entries(self) -> list[TokenEntry]:
        return [*self._current(), *self.env_entries]

    def lookup(self, token: str) -> TokenEntry | None:
        """The entry of ``token``, or None; compares against every entry in constant time each."""
        digest = hash_token(token).encode()
        found: TokenEntry | None = None
        for entry in self.entries():
            if hmac.compare_digest(digest, entry.sha256.encode()) and found is None:
                found = entry
        return found
