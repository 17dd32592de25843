"""Podman for the container tests: the tools, a local base image, the build and a stdio session.

No container registry is reachable where the suite runs, so the Dockerfile's default base
(python:3.12-slim) cannot be pulled: the base is bootstrapped here from Debian packages
(debootstrap) with the Python 3.12 that runs the tests copied into /usr/local, as in the official
image, and passed to the build as BASE. It is cached by its inputs, as a podman image and as a
tar under the user's cache folder, so only the first run on a machine pays for it (~2 min).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from filelock import FileLock

ROOT = Path(__file__).resolve().parents[1]

# runc, not Debian's default crun: crun refuses a host with cgroups v1 and v2 mounted side by
# side ("cgroups in hybrid mode not supported"), which is how this machine is set up.
APT_PACKAGES = ("podman", "runc", "debootstrap")
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
# What Python's own extension modules link to, beyond a minimal Debian.
BASE_PACKAGES = (
    "ca-certificates,libssl3,libsqlite3-0,libffi8,libbz2-1.0,liblzma5,zlib1g,libreadline8,"
    "libncursesw6,libuuid1,libnsl2"
)
# The base recipe's version: change it when the steps below change, so the cache is rebuilt.
RECIPE = "1"
# The host's trust store goes into the base: this machine reaches PyPI through a TLS-inspecting
# proxy whose authority is only in the host's bundle (pip's own bundle does not know it).
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


def ensure_tools() -> None:
    """Install podman, runc and debootstrap from Debian when missing; fail, never skip.

    Root is needed either way: debootstrap, chroot and a podman that owns the files it mounts.
    """
    if os.geteuid() != 0:
        raise RuntimeError("the container tests run as root (rootful podman, debootstrap)")
    missing = [name for name in APT_PACKAGES if shutil.which(name) is None]
    if not missing:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *missing]):
        subprocess.run(command, env=env, check=True, capture_output=True, timeout=600)


def podman(*args: str) -> list[str]:
    return ["podman", "--runtime", "runc", *args]


def limits() -> list[str]:
    """Resource limits a container may have here: podman's defaults (a million open files)
    exceed this machine's hard limits, and the runtime then refuses to start the container."""
    files = min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 65536)
    return ["--ulimit", f"nofile={files}:{files}", "--ulimit", "nproc=4096:4096"]


def cache_dir() -> Path:
    """Outside the clone, so a fresh clone on the same machine (CI) reuses it."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    path = Path(root) / "smriti-tests"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _python_home() -> Path:
    """The Python 3.12 installation running the tests (pyenv's), to copy into the base."""
    home = Path(sys.base_prefix)
    if sys.version_info[:2] != (3, 12) or not (home / "lib" / "libpython3.12.so.1.0").exists():
        raise RuntimeError(
            f"the container test copies a relocatable Python 3.12 (pyenv's) into its base image; "
            f"{home} is not one"
        )
    return home


def base_image() -> str:
    """A local image standing in for python:3.12-slim, made once per machine and inputs."""
    with FileLock(cache_dir() / "base.lock"):
        return _base_image()


def _base_image() -> str:
    home = _python_home()
    inputs = [RECIPE, SUITE, MIRROR, BASE_PACKAGES, sys.version, str(home), CA_BUNDLE.read_bytes().hex()]
    key = hashlib.sha256("\n".join(inputs).encode()).hexdigest()[:16]
    tag = f"localhost/smriti-test-base:{key}"
    if subprocess.run(podman("image", "exists", tag)).returncode == 0:
        return tag
    tar = cache_dir() / f"container-base-{key}.tar"
    if not tar.exists():
        _bootstrap(home, tar)
    changes = [
        "ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ENV LANG=C.UTF-8",
        f"ENV PIP_CERT={CA_BUNDLE}",
        'CMD ["python3"]',
    ]
    flags = [flag for change in changes for flag in ("--change", change)]
    subprocess.run(podman("import", *flags, str(tar), tag), check=True, capture_output=True, timeout=300)
    return tag


def _bootstrap(home: Path, tar: Path) -> None:
    with tempfile.TemporaryDirectory(dir=cache_dir()) as work:
        rootfs = Path(work) / "rootfs"
        try:
            bootstrap = ["debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES}"]
            subprocess.run(
                [*bootstrap, SUITE, str(rootfs), MIRROR],
                check=True,
                capture_output=True,
                timeout=900,
            )
        finally:  # a failed debootstrap can leave the host's /proc and /sys mounted inside
            for mount in ("dev/pts", "proc", "sys"):
                if os.path.ismount(rootfs / mount):
                    subprocess.run(["umount", "--lazy", str(rootfs / mount)], check=False)
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for item in (rootfs / cache).glob("*"):
                if item.is_file():
                    item.unlink()
        # Python's tests, IDLE and Tk are 130 MB that a server never imports.
        skip = shutil.ignore_patterns("test", "idlelib", "tkinter", "turtledemo")
        shutil.copytree(home, rootfs / "usr" / "local", ignore=skip, symlinks=True, dirs_exist_ok=True)
        shutil.copyfile(CA_BUNDLE, rootfs / CA_BUNDLE.relative_to("/"))
        subprocess.run(["chroot", str(rootfs), "ldconfig"], check=True, timeout=60)  # finds libpython
        partial = tar.with_suffix(".partial")
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(partial), "."], check=True, timeout=300)
        partial.rename(tar)


def build(base: str, tag: str) -> float:
    """``podman build`` of the repository's Dockerfile on ``base``; returns the seconds it took.

    One build at a time on a machine: test workers that each need the image wait for the first,
    whose layers the next build then reuses.
    """
    started = time.monotonic()
    with FileLock(cache_dir() / "build.lock"):
        done = subprocess.run(
            podman("build", *limits(), "--build-arg", f"BASE={base}", "-t", tag, str(ROOT)),
            capture_output=True,
            text=True,
            timeout=1200,
        )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return time.monotonic() - started


def inspect(tag: str) -> dict[str, Any]:
    out = subprocess.run(podman("image", "inspect", tag), check=True, capture_output=True, text=True)
    return json.loads(out.stdout)[0]


class StdioSession:
    """A container run with ``podman run -i`` spoken to in raw JSON-RPC lines, one at a time."""

    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        pumps = ((self.process.stdout, self.lines.put), (self.process.stderr, self.stderr.append))
        for stream, sink in pumps:
            threading.Thread(target=self._pump, args=(stream, sink), daemon=True).start()
        self.next_id = 0

    @staticmethod
    def _pump(stream, sink) -> None:
        for line in stream:
            sink(line)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None, timeout: float = 90) -> Any:
        """Send one request and wait for its answer (notifications in between are skipped)."""
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}})
        deadline = time.monotonic() + timeout
        while True:
            ended = self.process.poll() is not None  # before the wait: its last lines still come
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                if ended or time.monotonic() > deadline:
                    why = f"the container exited {self.process.returncode}" if ended else f"{timeout} s"
                    raise AssertionError(f"no answer to {method} ({why}): {''.join(self.stderr)}") from None
                continue
            message = json.loads(line)
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return message["result"]

    def initialize(self) -> dict[str, Any]:
        client = {"name": "container-test", "version": "1"}
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
        result = self.request("initialize", params)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        assert not result.get("isError"), result
        return result["structuredContent"]

    def close(self, timeout: float = 60) -> int:
        """Close stdin, as a client does at its end, and wait for the container to exit."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait(timeout=30)
