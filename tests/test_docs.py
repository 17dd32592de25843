"""The documentation stays true: the pipeline diagrams are the code's, the site builds with strict
link checking, and the README stays a short front page whose links lead somewhere."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from smriti.pipelines import diagram
from smriti.pipelines.pipeline import END, START, Pipeline

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
MKDOCS = Path(sys.executable).parent / "mkdocs"


def test_the_checked_in_pipeline_diagrams_are_the_codes():
    shown: set[str] = set()
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        shown.update(diagram.blocks(text))
        assert diagram.fill(text) == text, (
            f"{page.name}: a pipeline diagram is stale; run: python -m smriti.pipelines.diagram docs/*.md"
        )
    assert shown == set(diagram.PIPELINES)


def test_the_recall_diagram_has_every_step_and_every_edge():
    pipeline = diagram.load("recall")
    chart = diagram.mermaid(pipeline)
    arrows = re.findall(r"^  (\S+) (-->|-\.->) (\S+)$", chart, re.M)
    names = {name.split("(")[0] for source, _, target in arrows for name in (source, target)}
    assert names == set(pipeline.nodes) | {"start", "finish"}
    assert {"episode_context", "bridge"} <= names
    routes = sum(len(ends) for routes in pipeline.branches.values() for _, ends in routes)
    joined = sum(len(sources) for sources, _ in pipeline.joins)
    assert len(arrows) == len(pipeline.edges) + joined + routes
    assert sum(arrow == "-.->" for _, arrow, _ in arrows) == routes


def _first(state, runtime):
    """Start here."""
    return {}


def _second(state, runtime):
    """Then ``this``, by :func:`rule`."""
    return {}


def test_a_small_pipeline_is_drawn_and_listed_exactly():
    """Branches, a join and a route: the edges in step order, the steps with their docstrings."""
    pipeline = Pipeline("toy", dict)
    for name in ("a", "b", "c", "d"):
        pipeline.add_node(name, _first if name == "a" else _second)
    pipeline.add_edge(START, "a")
    pipeline.add_edge("a", "b")
    pipeline.add_edge("a", "c")
    pipeline.add_edge(["b", "c"], "d")
    pipeline.add_conditional_edges("d", lambda state: END, [END])
    assert diagram.mermaid(pipeline) == "\n".join(
        [
            "flowchart TD",
            "  start([start]) --> a",
            "  a --> b",
            "  a --> c",
            "  b --> d",
            "  c --> d",
            "  d -.-> finish([end])",
        ]
    )
    rows = diagram.steps_table(pipeline).splitlines()
    assert rows[2] == f"| 1 | `a` | `{__name__.removeprefix('smriti.')}._first` | Start here. |"
    assert rows[-1].endswith("| Then `this`, by `rule`. |") and rows[-1].startswith("| 4 | `d` |")


def test_a_stale_page_is_reported_then_rewritten(tmp_path):
    page = tmp_path / "page.md"
    stale = "# Store\n\n<!-- pipeline:store:start -->\nvalidate --> write\n<!-- pipeline:store:end -->\n"
    page.write_text(stale)
    assert diagram.main(["--check", str(page)]) == 1
    assert page.read_text() == stale  # --check changes nothing
    assert diagram.main([str(page)]) == 0
    assert "| `queue_analysis` |" in page.read_text()
    assert diagram.main(["--check", str(page)]) == 0


def test_an_unknown_pipeline_name_is_refused():
    with pytest.raises(KeyError, match="unknown pipeline 'remember'"):
        diagram.fill("<!-- pipeline:remember:start -->\n<!-- pipeline:remember:end -->")


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


def test_the_site_builds_with_strict_link_checking(tmp_path):
    built = _build(REPO / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "pipelines" / "index.html").is_file()
    _diagrams_render_offline(tmp_path / "site")


def _diagrams_render_offline(site: Path) -> None:
    """The pages load the vendored Mermaid, after the theme's bundle (which fetches Mermaid from
    unpkg.com only when no global ``mermaid`` is defined) and before the page is loaded; it is
    the major version that bundle asks for, and its licence travels with it."""
    page = (site / "pipelines" / "index.html").read_text(encoding="utf-8")
    scripts = re.findall(r'<script src="([^"]+)"', page)
    bundle = next(i for i, src in enumerate(scripts) if "assets/javascripts/bundle." in src)
    assert scripts.index("../vendor/mermaid/mermaid.min.js") > bundle, scripts
    assert 'class="mermaid"' in page
    vendored = site / "vendor" / "mermaid"
    script = (vendored / "mermaid.min.js").read_text(encoding="utf-8")
    assert script.rstrip().endswith(
        'globalThis["mermaid"] = globalThis.__esbuild_esm_mermaid_nm["mermaid"].default;'
    )
    wanted = re.search(r"unpkg\.com/mermaid@(\d+)/", (site / scripts[bundle].removeprefix("../")).read_text())
    assert wanted is not None and f'version:"{wanted[1]}.' in script
    assert "MIT License" in (vendored / "LICENSE").read_text(encoding="utf-8")


def test_a_broken_link_fails_the_site_build(tmp_path):
    """The strict build is what keeps links true: a link to a missing anchor must fail it."""
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(DOCS, tmp_path / "docs")
    with (tmp_path / "docs" / "cli.md").open("a") as page:
        page.write("\nSee [the tools](tools.md#no-such-section).\n")
    built = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert built.returncode != 0 and "no-such-section" in built.stderr


def test_the_readme_is_a_short_front_page_whose_links_exist():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    assert "make run" in readme and "make test" in readme
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    local = [t for t in targets if not t.startswith(("http://", "https://"))]
    assert {"docs/index.md", "docs/tools.md", "docs/architecture.md"} <= set(local)
    missing = [t for t in local if not (REPO / t).exists()]
    assert not missing, missing
