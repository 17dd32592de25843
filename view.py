"""``smriti view``: the memory graph as one self-contained HTML file.

Memories (circles, coloured by Leiden cluster) and the cues that encode them (grey squares),
with their links: a memory to its cues, associations between memories (blue) and RelatesTo
facts between cues (orange, labelled). The layout is computed here with igraph
(Fruchterman-Reingold, seeded: the same memory draws the same picture) and drawn as SVG; a
little plain JavaScript adds the search box and the panel that shows a memory when it is
clicked. No CDN, no fetch: the file works offline, mailed or opened from disk.

Only the most recently used memories are drawn (``--limit``): a picture of 100,000 nodes shows
nothing, and the layout would take minutes.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from smriti.memory import Memory

WIDTH, HEIGHT, MARGIN = 1100, 800, 30
# Colour-blind-safe palette (Okabe-Ito), then greys for clusters past it and for "no cluster".
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
UNCLUSTERED = "#999999"


@dataclass
class GraphView:
    """What is drawn: node ids in order, their kinds and details, and the edges between them."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)

    def index(self) -> dict[str, int]:
        return {node["key"]: i for i, node in enumerate(self.nodes)}


def collect(memory: Memory, limit: int) -> GraphView:
    """The ``limit`` most recently used memories, their cues, associations and facts."""
    store = memory.context.store
    engrams = store.list_recent(limit)
    ids = [e.id for e in engrams]
    cues = store.cues_of(ids) if ids else {}
    view = GraphView()
    for engram in engrams:
        view.nodes.append(
            {
                "key": f"m:{engram.id}",
                "kind": "memory",
                "id": engram.id,
                "text": engram.content,
                "type": engram.memory_type,
                "cluster": engram.cluster_id,
                "importance": round(engram.importance, 3),
                "access_count": engram.access_count,
                "decay": round(engram.decay_factor, 3),
                "created": engram.created_at.isoformat(),
                "source": engram.source,
                "cues": sorted(c.name for c in cues.get(engram.id, [])),
                "relations": [],
                "facts": engram.fact_list(),  # what the LLM analysis found it states
            }
        )
    cue_names = sorted({c.name for linked in cues.values() for c in linked})
    cue_type = {c.name: c.cue_type for linked in cues.values() for c in linked}
    view.nodes += [
        {"key": f"c:{name}", "kind": "cue", "name": name, "type": cue_type[name]} for name in cue_names
    ]
    for engram_id, linked in cues.items():
        view.edges += [{"a": f"m:{engram_id}", "b": f"c:{c.name}", "kind": "cue"} for c in linked]
    chosen = set(ids)
    seen: set[tuple[str, str]] = set()
    for association in store.neighbours(ids) if ids else []:
        first, second = sorted((association.source_id, association.target_id))
        if first in chosen and second in chosen and (first, second) not in seen:
            seen.add((first, second))
            view.edges.append(
                {
                    "a": f"m:{first}",
                    "b": f"m:{second}",
                    "kind": "association",
                    "strength": association.strength,
                }
            )
    by_key = {node["key"]: node for node in view.nodes}
    for relation in store.relations_of(ids) if ids else []:
        a, b = f"c:{relation.source}", f"c:{relation.target}"
        if a in by_key and b in by_key:
            view.edges.append({"a": a, "b": b, "kind": "relation", "label": relation.relation})
        owner = by_key.get(f"m:{relation.engram_id}")
        if owner is not None:
            owner["relations"].append(f"{relation.source} -{relation.relation}-> {relation.target}")
    return view


def lay_out(view: GraphView, seed: int = 7) -> list[tuple[float, float]]:
    """Node positions in the SVG's coordinates (igraph's Fruchterman-Reingold, seeded)."""
    import random

    import igraph

    if not view.nodes:
        return []
    index = view.index()
    graph = igraph.Graph(n=len(view.nodes), edges=[(index[e["a"]], index[e["b"]]) for e in view.edges])
    random.seed(seed)  # igraph draws its initial positions from Python's random module
    coords = graph.layout_fruchterman_reingold(niter=500).coords
    xs, ys = [x for x, _ in coords], [y for _, y in coords]
    span_x, span_y = (max(xs) - min(xs)) or 1.0, (max(ys) - min(ys)) or 1.0
    return [
        (
            MARGIN + (x - min(xs)) / span_x * (WIDTH - 2 * MARGIN),
            MARGIN + (y - min(ys)) / span_y * (HEIGHT - 2 * MARGIN),
        )
        for x, y in coords
    ]


def colour(cluster: int) -> str:
    return PALETTE[cluster % len(PALETTE)] if cluster >= 0 else UNCLUSTERED


def render(view: GraphView, user: str) -> str:
    """The page: SVG drawn here, details in an embedded JSON block, ~40 lines of JavaScript."""
    positions = lay_out(view)
    index = view.index()
    parts = []
    for edge in view.edges:
        (x1, y1), (x2, y2) = positions[index[edge["a"]]], positions[index[edge["b"]]]
        parts.append(
            f'<line class="edge {edge["kind"]}" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}"/>'
        )
        if edge["kind"] == "relation":
            label = html.escape(edge["label"])
            parts.append(
                f'<text class="label" x="{(x1 + x2) / 2:.1f}" y="{(y1 + y2) / 2:.1f}">{label}</text>'
            )
    for node, (x, y) in zip(view.nodes, positions, strict=True):
        key = html.escape(node["key"], quote=True)
        if node["kind"] == "memory":
            radius = 5 + 6 * node["importance"]
            title = html.escape(node["text"][:120])
            parts.append(
                f'<circle class="node memory" data-key="{key}" cx="{x:.1f}" cy="{y:.1f}" r="{radius:.1f}" '
                f'fill="{colour(node["cluster"])}"><title>{title}</title></circle>'
            )
        else:
            name = html.escape(node["name"])
            parts.append(
                f'<rect class="node cue" data-key="{key}" x="{x - 4:.1f}" y="{y - 4:.1f}" '
                'width="8" height="8">'
                f"<title>{name} ({html.escape(node['type'])})</title></rect>"
                f'<text class="cue-name" x="{x + 6:.1f}" y="{y + 3:.1f}">{name}</text>'
            )
    details = json.dumps({n["key"]: n for n in view.nodes}, ensure_ascii=False).replace("</", "<\\/")
    memories = sum(1 for n in view.nodes if n["kind"] == "memory")
    return _PAGE.format(
        title=html.escape(f"Smriti memory of {user}"),
        summary=html.escape(
            f"{memories} memories, {len(view.nodes) - memories} cues, {len(view.edges)} links"
        ),
        width=WIDTH,
        height=HEIGHT,
        svg="\n".join(parts),
        details=details,
    )


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 0; display: flex; height: 100vh; }}
#graph {{ flex: 1; overflow: auto; }}
#side {{ width: 340px; padding: 12px; border-left: 1px solid #ddd; overflow: auto; }}
.edge {{ stroke: #ccc; stroke-width: 0.7; }}
.edge.association {{ stroke: #56B4E9; stroke-width: 1.4; }}
.edge.relation {{ stroke: #E69F00; stroke-width: 1.6; }}
.label {{ font-size: 9px; fill: #B06000; }}
.cue {{ fill: #bbb; cursor: pointer; }}
.cue-name {{ font-size: 9px; fill: #666; pointer-events: none; }}
.memory {{ stroke: #fff; stroke-width: 1; cursor: pointer; }}
.dim {{ opacity: 0.12; }}
.hit {{ stroke: #000; stroke-width: 2.5; }}
#search {{ width: 100%; box-sizing: border-box; padding: 6px; margin-bottom: 8px; }}
dt {{ font-weight: 600; margin-top: 6px; }}
</style></head>
<body>
<div id="graph"><svg id="svg" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}"
 viewBox="0 0 {width} {height}">
{svg}
</svg></div>
<div id="side">
<h2>{title}</h2><p id="summary">{summary}</p>
<input id="search" type="search" placeholder="Search memories and cues">
<div id="detail"><p>Click a memory for its text, cues, relations and scores.</p></div>
</div>
<script id="data" type="application/json">{details}</script>
<script>
const data = JSON.parse(document.getElementById("data").textContent);
const nodes = Array.from(document.querySelectorAll(".node"));
const detail = document.getElementById("detail");
function esc(s) {{ const d = document.createElement("div"); d.textContent = String(s); return d.innerHTML; }}
function show(key) {{
  const n = data[key];
  if (!n) return;
  if (n.kind !== "memory") {{ document.getElementById("search").value = n.name; filter(n.name); return; }}
  const rows = [["Memory", n.text], ["Id", n.id], ["Type", n.type], ["Cluster", n.cluster],
    ["Cues", n.cues.join(", ") || "none"], ["Relations", n.relations.join("; ") || "none"],
    ["Facts", n.facts.join("; ") || "none"],
    ["Importance", n.importance], ["Accessed", n.access_count + " times"], ["Decay", n.decay],
    ["Created", n.created], ["Source", n.source || "memory"]];
  detail.innerHTML = '<dl id="memory-detail">' +
    rows.map(([k, v]) => "<dt>" + esc(k) + "</dt><dd>" + esc(v) + "</dd>").join("") + "</dl>";
  nodes.forEach(el => el.classList.toggle("hit", el.dataset.key === key));
}}
function filter(q) {{
  q = q.trim().toLowerCase();
  nodes.forEach(el => {{
    const n = data[el.dataset.key];
    const text = n.kind === "memory" ? n.text + " " + n.cues.join(" ") : n.name;
    el.classList.toggle("dim", q !== "" && !text.toLowerCase().includes(q));
  }});
}}
nodes.forEach(el => el.addEventListener("click", () => show(el.dataset.key)));
document.getElementById("search").addEventListener("input", e => filter(e.target.value));
// ?click=<memory id> clicks that memory once loaded (a link to a memory; the tests use it).
const wanted = new URLSearchParams(location.search).get("click");
if (wanted) {{
  const el = document.querySelector('[data-key="m:' + CSS.escape(wanted) + '"]');
  if (el) el.dispatchEvent(new MouseEvent("click", {{bubbles: true}}));
}}
</script>
</body></html>
"""
