"""``smriti view``: a self-contained HTML graph, opened in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from typer.testing import CliRunner

from smriti.cli import app
from tests.envs import offline_env

MEMORIES = [
    "Alice recommends cursor-pagination for the orders API.",
    "Cursor-pagination relies on opaque tokens instead of page numbers.",
    "Bob deploys the Atlas project every Friday evening.",
]


@pytest.fixture
def page(tmp_path):
    env = offline_env(tmp_path / "store", COLUMNS="200")
    runner = CliRunner()
    for text in MEMORIES:
        assert runner.invoke(app, ["store", text], env=env).exit_code == 0
    assert runner.invoke(app, ["consolidate"], env=env).exit_code == 0
    output = tmp_path / "graph.html"
    done = runner.invoke(app, ["view", "--output", str(output)], env=env)
    assert done.exit_code == 0, done.output
    return output.read_text(encoding="utf-8")


def test_the_page_is_self_contained_and_holds_the_graph(page):
    # Nothing is fetched: no scripts, styles, fonts or images from elsewhere.
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", page)
    assert "@import" not in page and "<link" not in page
    assert page.count('class="node memory"') == len(MEMORIES)
    assert 'class="node cue"' in page and 'class="edge cue"' in page
    assert 'id="search"' in page
    for text in MEMORIES:
        assert text[:40] in page


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None:
        pytest.skip("Chromium is not installed (.ci/run installs Debian's chromium)")
    return found


def _headless(browser: str, *args: str) -> subprocess.CompletedProcess:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,900",
    ]
    return subprocess.run([browser, *flags, *args], capture_output=True, text=True, timeout=120)


def test_chromium_draws_it_and_a_click_shows_the_memory(page, tmp_path):
    browser = _chromium()
    path = tmp_path / "graph.html"
    path.write_text(page, encoding="utf-8")
    shot = tmp_path / "graph.png"
    _headless(browser, f"--screenshot={shot}", path.as_uri())
    assert shot.exists() and shot.stat().st_size > 10_000  # a drawn graph, not a blank page
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    memory_id = re.search(r'data-key="m:([^"]+)"', page).group(1)
    clicked = _headless(browser, "--dump-dom", f"{path.as_uri()}?click={memory_id}").stdout
    detail = re.search(r'<dl id="memory-detail">(.*?)</dl>', clicked, re.DOTALL)
    assert detail is not None, clicked[-2000:]
    assert memory_id in detail.group(1) and "Cues" in detail.group(1)
    assert any(text in detail.group(1) for text in MEMORIES)
    untouched = _headless(browser, "--dump-dom", path.as_uri()).stdout
    assert '<dl id="memory-detail">' not in untouched.split('id="detail"', 1)[1].split("</div>", 1)[0]
