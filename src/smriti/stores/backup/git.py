"""The ``github`` backup: a git repository per user, driven with the system ``git``.

The remote is ``{GIT_BASE_URL}/{user}-smriti.git``; GIT_BASE_URL may be a local folder, a
``file://`` URL, ``https://`` or ``ssh``/scp syntax (``git@github.com:me``). The repository must
exist (``git init --bare``, or create it on GitHub); an empty one gets its ``main`` branch
on the first push. A working clone lives in ``STORAGE_LOCATION/{user}/backup-git/``; each
changed sync writes ``memory.jsonl`` and ``manifest.json`` there, commits and pushes, so
the history of the repository is the history of the memory.

git never prompts (``GIT_TERMINAL_PROMPT=0``, ssh in batch mode) and every call has a
timeout, so a misconfigured remote fails a sync instead of hanging the server.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from smriti.stores.backup.remote import MANIFEST_NAME, SNAPSHOT_NAME, BackupError, RemoteError

BRANCH = "main"
_IDENTITY = ("-c", "user.name=Smriti", "-c", "user.email=smriti@localhost", "-c", "commit.gpgsign=false")


def repository_url(base: str, user: str) -> str:
    """``{base}/{user}-smriti.git``; a local folder is made absolute (git runs in the clone)."""
    base = base.strip().rstrip("/")
    if "://" not in base and not re.match(r"^[^/]+:", base):  # neither a URL nor scp-like ssh
        base = str(Path(base).expanduser().resolve())
    return f"{base}/{user}-smriti.git"


class GitRemote:
    """Push and fetch the backup files through a local working clone.

    Args:
        base_url: GIT_BASE_URL.
        user: whose repository.
        clone_dir: the working clone (created on first use).
        timeout: seconds allowed for any one git command.
    """

    def __init__(self, base_url: str, user: str, clone_dir: Path, timeout: float = 60.0) -> None:
        self.url = repository_url(base_url, user)
        self.location = self.url
        self.clone_dir = Path(clone_dir)
        self.timeout = timeout
        self.deadline: float | None = None
        if shutil.which("git") is None:
            raise BackupError("BACKUP_TYPE=github needs the `git` command, which is not installed")

    # ------------------------------------------------------------------ plumbing
    def _git(self, *args: str, network: bool = False, stdout: Any = None) -> subprocess.CompletedProcess[str]:
        """Run git in the clone; failures of network commands are retryable RemoteErrors.

        With ``stdout`` (a binary file) the output goes there instead of being captured.
        """
        env = {
            **os.environ,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_SSH_COMMAND": os.environ.get("GIT_SSH_COMMAND", "ssh -o BatchMode=yes"),
            "LC_ALL": "C",
        }
        error_type = RemoteError if network else BackupError
        timeout = self.timeout
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - time.monotonic())
            if timeout <= 0:
                raise error_type(f"git {args[0]} ({self.url}): the sync ran out of time")
        try:
            done = subprocess.run(
                ["git", *_IDENTITY, *args],
                cwd=self.clone_dir,
                env=env,
                stdout=stdout if stdout is not None else subprocess.PIPE,
                stderr=subprocess.PIPE,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise error_type(f"git {args[0]} ({self.url}) timed out after {timeout:.3g}s") from None
        output = done.stdout.decode("utf-8", "replace") if isinstance(done.stdout, bytes) else ""
        if done.returncode != 0:
            message = done.stderr.decode("utf-8", "replace") or output
            detail = " ".join(message.split())[:300]
            raise error_type(f"git {args[0]} ({self.url}) failed: {detail or f'exit {done.returncode}'}")
        return subprocess.CompletedProcess(done.args, done.returncode, output, "")

    def _ok(self, *args: str) -> bool:
        try:
            self._git(*args)
        except BackupError:
            return False
        return True

    def _ensure_clone(self) -> None:
        """A local repository whose ``origin`` is the configured URL (no network needed)."""
        if not (self.clone_dir / ".git").is_dir():
            self.clone_dir.mkdir(parents=True, exist_ok=True)
            self._git("init", "--quiet", "-b", BRANCH)
        if self._ok("remote", "get-url", "origin"):
            self._git("remote", "set-url", "origin", self.url)  # GIT_BASE_URL may have changed
        else:
            self._git("remote", "add", "origin", self.url)

    def _fetch(self) -> bool:
        """Fetch ``origin``; True when the remote has the backup branch."""
        self._git("fetch", "--quiet", "--prune", "origin", network=True)
        return self._ok("rev-parse", "--verify", "--quiet", f"refs/remotes/origin/{BRANCH}")

    # ------------------------------------------------------------------ Remote
    def push(self, snapshot: Path, manifest: dict[str, Any]) -> dict[str, Any]:
        """Commit the snapshot (if it differs from HEAD) and push it as ``main``.

        When the remote moved on without us (another machine, a restore elsewhere), our
        snapshot is committed on top of the remote's head: the newest sync wins and
        the remote's history is kept.
        """
        self._ensure_clone()
        shutil.copyfile(snapshot, self.clone_dir / SNAPSHOT_NAME)
        (self.clone_dir / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        message = "smriti sync: {engrams} engrams, {cues} cues, {edges} edges".format(**manifest["counts"])
        self._git("add", SNAPSHOT_NAME, MANIFEST_NAME)
        if not self._ok("diff", "--cached", "--quiet", "HEAD"):  # also true before the first commit
            self._git("commit", "--quiet", "-m", message)
        if self._fetch():
            remote_head = f"refs/remotes/origin/{BRANCH}"
            if not self._ok("merge-base", "--is-ancestor", remote_head, "HEAD"):
                self._git("reset", "--soft", remote_head)
                if not self._ok("diff", "--cached", "--quiet", "HEAD"):
                    self._git("commit", "--quiet", "-m", message + " (on top of the remote's changes)")
        self._git("push", "--quiet", "origin", f"HEAD:refs/heads/{BRANCH}", network=True)
        return {"revision": self._git("rev-parse", "HEAD").stdout.strip()}

    def fetch(self, target: Path) -> dict[str, Any] | None:
        """The remote branch's ``memory.jsonl`` into ``target``; its manifest (+ revision)."""
        manifest = self.manifest()
        if manifest is None:
            return None
        with target.open("wb") as stream:
            self._git("show", f"origin/{BRANCH}:{SNAPSHOT_NAME}", stdout=stream)
        return manifest

    def manifest(self) -> dict[str, Any] | None:
        self._ensure_clone()
        if not self._fetch():
            return None
        try:
            text = self._git("show", f"origin/{BRANCH}:{MANIFEST_NAME}").stdout
            manifest = json.loads(text)
        except (BackupError, ValueError):
            raise BackupError(f"{self.url} has a {BRANCH} branch but no readable {MANIFEST_NAME}") from None
        manifest["revision"] = self._git("rev-parse", f"refs/remotes/origin/{BRANCH}").stdout.strip()
        return manifest
