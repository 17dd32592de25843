"""``smriti view``: a self-contained HTML page drawn with the vendored cytoscape.js, opened in
headless Chromium: a handful of memories, and a store of 1,000 with realistic cues."""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from smriti import view as view_module
from smriti.cli import app
from tests.envs import offline_env

MEMORIES = [
    "Alice recommends cursor-pagination for the orders API.",
    "Cursor-pagination relies on opaque tokens instead of page numbers.",
    "Bob deploys the Atlas project every Friday evening.",
]

# A team's working memory over eight topics: people, tools, places and projects recur within a
# topic (and a few across), which is what gives Leiden its clusters.
TOPICS = {
    "payments": (["Alice", "Priya", "Marco"], ["Stripe", "Postgres", "Kafka", "ledger", "refunds"],
                 ["Berlin"], ["the billing service", "the checkout flow", "the refund queue"]),
    "search": (["Bob", "Chen"], ["Elasticsearch", "pgvector", "BM25", "embeddings", "reranker"],
               ["Lisbon"], ["the search API", "the ranking pipeline", "query autocomplete"]),
    "mobile": (["Dana", "Eve"], ["Kotlin", "SwiftUI", "Firebase", "push notifications"],
               ["Toronto"], ["the Android app", "the iOS release", "offline sync"]),
    "infra": (["Farid", "Grace"], ["Kubernetes", "Terraform", "Prometheus", "Grafana", "Helm"],
              ["Frankfurt"], ["the staging cluster", "the on-call rota", "the backup job"]),
    "hiring": (["Hana", "Ivan"], ["Greenhouse", "interview loop", "take-home exercise"],
               ["London"], ["the platform team", "the graduate programme", "the recruiter sync"]),
    "research": (["Jun", "Kavya"], ["PyTorch", "LoRA", "evaluation harness", "GPU quota"],
                 ["Zurich"], ["the summarisation model", "the benchmark suite", "the paper draft"]),
    "travel": (["Leo", "Mia"], ["Lufthansa", "Airbnb", "rail pass"],
               ["Kyoto", "Osaka"], ["the offsite", "the conference trip", "the visa appointment"]),
    "home": (["Nora", "Omar"], ["heat pump", "solar panels", "Home Assistant"],
             ["the allotment"], ["the kitchen renovation", "the garden shed", "the energy bill"]),
}  # fmt: skip
VERBS = ["recommends", "prefers", "decided to use", "warned about", "benchmarked", "rejected"]
WHEN = ["on Monday", "on Tuesday", "on Thursday", "last week", "in March", "in April", "yesterday"]
SHAPES = [
    "{p} {v} {t} for {o} {w}.",
    "{p} said {t} keeps {o} fast, but {t2} is still needed in {pl}.",
    "Meeting in {pl} {w}: {p} and {p2} agreed that {o} moves to {t}.",
    "{p2} found a bug in {o} caused by {t}; {p} will fix it {w}.",
    "Decision {w}: {o} uses {t} and {t2}, owned by {p}.",
]


def realistic(n: int, seed: int = 11) -> list[str]:
    """``n`` distinct memories, deterministic."""
    rng = random.Random(seed)
    topics = sorted(TOPICS)
    out: dict[str, None] = {}
    while len(out) < n:
        people, tools, places, things = TOPICS[topics[len(out) % len(topics)]]
        t, t2 = rng.sample(tools, 2)
        p, p2 = rng.sample(people, 2)
        text = rng.choice(SHAPES).format(
            p=p, p2=p2, v=rng.choice(VERBS), t=t, t2=t2, o=rng.choice(things), pl=rng.choice(places),
            w=rng.choice(WHEN),
        )  # fmt: skip
        out[text] = None
    return list(out)


def _write_view(env: dict[str, str], output: Path, *extra: str) -> str:
    done = CliRunner().invoke(app, ["view", "--output", str(output), *extra], env=env)
    assert done.exit_code == 0, done.output
    return output.read_text(encoding="utf-8")


@pytest.fixture
def page(tmp_path):
    env = offline_env(tmp_path / "store", COLUMNS="200")
    runner = CliRunner()
    for text in MEMORIES:
        assert runner.invoke(app, ["store", text], env=env).exit_code == 0
    assert runner.invoke(app, ["consolidate"], env=env).exit_code == 0
    return _write_view(env, tmp_path / "graph.html")


@pytest.fixture(scope="module")
def thousand(tmp_path_factory):
    """A real SQLite store of 1,000 memories stored through the pipeline, consolidated (Leiden)."""
    from smriti.memory import Memory

    root = tmp_path_factory.mktemp("thousand")
    env = offline_env(root / "store", COLUMNS="200")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        memory = Memory.open()
        try:
            for text in realistic(1000):
                memory.store(text)
            memory.consolidate()
        finally:
            memory.close()
    started = time.perf_counter()
    html = _write_view(env, root / "graph.html")
    return root / "graph.html", html, time.perf_counter() - started


def test_the_page_is_self_contained_and_carries_the_library(page):
    # Nothing is fetched: no scripts, styles, fonts or images from elsewhere.
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", page)
    assert "@import" not in page and "<link" not in page and "<script src" not in page
    library = (view_module.VENDOR / "cytoscape.min.js").read_text(encoding="utf-8")
    assert hashlib.sha256(library.encode()).hexdigest() == view_module.CYTOSCAPE_SHA256
    assert library[-2000:] in page  # inlined, whole
    assert (view_module.VENDOR / "LICENSE").read_text().startswith("Copyright")
    data = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', page).group(1))
    kinds = [e["data"].get("kind") for e in data["elements"]]
    assert kinds.count("memory") == len(MEMORIES) and "cue" in kinds
    assert data["openAll"]  # a handful is shown open
    assert 'id="search"' in page and 'id="fit"' in page and 'id="legend"' in page
    for text in MEMORIES:
        assert text[:40] in page


def test_labels_are_short_and_the_layout_is_deterministic():
    assert view_module.short("word " * 40).endswith("…")
    assert len(view_module.short("word " * 40)) <= view_module.LABEL_CHARS
    assert view_module.short("Alice likes tea.") == "Alice likes tea."


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None:
        pytest.skip("Chromium is not installed (.ci/run installs Debian's chromium)")
    return found


def _headless(browser: str, *args: str, budget: int | None = 20000) -> subprocess.CompletedProcess:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,900",
        "--enable-logging=stderr",
        "--v=0",
    ]
    if budget:
        flags.append(f"--virtual-time-budget={budget}")  # let the canvas draw before the dump
    return subprocess.run([browser, *flags, *args], capture_output=True, text=True, timeout=240)


def _status(done: subprocess.CompletedProcess) -> dict:
    found = re.search(r'<pre id="status"[^>]*>(.*?)</pre>', done.stdout, re.DOTALL)
    assert found is not None, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def _console_problems(done: subprocess.CompletedProcess) -> list[str]:
    """What the page said on the console (cytoscape warns there about bad styles too)."""
    return [line for line in done.stderr.splitlines() if "CONSOLE" in line]


def test_chromium_draws_a_handful_and_a_click_shows_the_memory(page, tmp_path):
    browser = _chromium()
    path = tmp_path / "graph.html"
    shot = tmp_path / "graph.png"
    drawn = _headless(browser, f"--screenshot={shot}", path.as_uri())
    assert shot.exists() and shot.stat().st_size > 10_000  # a drawn graph, not a blank page
    assert not _console_problems(drawn), _console_problems(drawn)

    data = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', page).group(1))
    memory_id = next(e["data"]["id"][2:] for e in data["elements"] if e["data"].get("kind") == "memory")
    clicked = _headless(browser, "--dump-dom", f"{path.as_uri()}?click={memory_id}")
    status = _status(clicked)
    assert status["errors"] == [] and status["library"] == view_module.CYTOSCAPE_VERSION
    assert status["selected"] == [f"m:{memory_id}"]
    detail = re.search(r'<dl id="memory-detail">(.*?)</dl>', clicked.stdout, re.DOTALL)
    assert detail is not None, clicked.stdout[-2000:]
    assert memory_id in detail.group(1) and "Cues" in detail.group(1)
    assert any(text in detail.group(1) for text in MEMORIES)
    untouched = _status(_headless(browser, "--dump-dom", path.as_uri()))
    assert untouched["selected"] == [] and untouched["open"]  # a handful is open, nothing chosen


def test_a_thousand_memories_read_closed_then_open_a_cluster(thousand, tmp_path):
    browser = _chromium()
    path, html, write_seconds = thousand
    assert write_seconds < 60, write_seconds
    data = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', html).group(1))
    memories = [e for e in data["elements"] if e["data"].get("kind") == "memory"]
    # The store's dedupe merges a few near-identical ones (same words, another day).
    assert 950 <= len(memories) <= 1000 and not data["openAll"]
    clusters = data["legend"]
    assert len(clusters) >= 4, clusters  # Leiden found topics
    assert all(len(e["data"]["label"]) <= view_module.LABEL_CHARS for e in memories)
    # Cue nodes are labelled with their names, whole words (not stems).
    cue_labels = {
        e["data"]["label"] for e in data["elements"] if e["group"] == "nodes" and e["data"]["kind"] == "cue"
    }
    assert {"kubernetes", "stripe", "lisbon"} <= cue_labels, sorted(cue_labels)[:40]

    # Time to a usable page, wall clock: Chromium starts, parses 3 MB, runs cytoscape, dumps.
    started = time.perf_counter()
    closed = _headless(browser, "--dump-dom", path.as_uri(), budget=None)
    page_seconds = time.perf_counter() - started
    status = _status(closed)
    print(
        f"\n1,000 memories: smriti view {write_seconds:.1f} s, page usable {page_seconds:.1f} s in Chromium"
    )
    assert status["ready"] and status["errors"] == [] and not _console_problems(closed)
    assert status["nodes"] == len(data["elements"]) - sum(
        1 for e in data["elements"] if e["group"] == "edges"
    )
    assert status["open"] == [] and status["visibleNodes"] == len(clusters)  # one node per cluster

    biggest = clusters[0]["cluster"]
    opened = _headless(browser, "--dump-dom", f"{path.as_uri()}?open={biggest}")
    status = _status(opened)
    assert status["open"] == [biggest] and status["errors"] == []
    assert status["visibleNodes"] > len(clusters) + clusters[0]["memories"]  # its memories, cues, frame

    found = _status(_headless(browser, "--dump-dom", f"{path.as_uri()}?q=kubernetes"))
    assert found["open"] and found["errors"] == []

    for name, query in (("closed", ""), ("open", f"?open={biggest}")):
        target = tmp_path / f"{name}.png"
        done = _headless(browser, f"--screenshot={target}", path.as_uri() + query)
        assert target.stat().st_size > 30_000, done.stderr[-2000:]
        assert not _console_problems(done), _console_problems(done)
