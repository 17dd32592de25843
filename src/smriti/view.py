"""``smriti view``: the memory graph as one self-contained HTML page that reads at 1,000 memories.

What is drawn (:func:`collect`, which the ``memory://graph`` resource returns too): the most
recently used memories, the cues that encode them, associations between memories and RelatesTo
facts between cues.

How it is drawn (:func:`render`, into the template ``view.html``): with cytoscape.js, vendored
in ``vendor/cytoscape/`` (version, licence and hash there) and inlined into the page, so the
file works offline, mailed or opened from disk; nothing is fetched. Leiden clusters are compound
nodes; on a page of more than ``OPEN_ALL_UP_TO`` memories each is closed at first, one node
labelled with its size and its commonest cues (a handful opens at once). A click opens a
cluster, a click on its frame closes it. Memories are labelled with a short summary, cues with
their names; a legend names the node and edge kinds and the clusters' colours; the page has zoom
and pan, a fit button, open/close all and a search box that opens the clusters holding what it
finds.

The layout is computed here with igraph, seeded (the same memory draws the same picture): the
clusters are placed from the graph of links between them and pushed apart until none overlap,
then each cluster's memories and cues are laid out inside its own disc. A cue belongs to the
cluster holding most of its memories; a link between two clusters is drawn when both are open
(two closed clusters are joined by one edge counting their links).
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import random
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from smriti.memory import Memory

# Colour-blind-safe first (Okabe-Ito without black), then Paul Tol's muted scheme; clusters past
# the palette reuse it (the legend names each one), grey is "no cluster".
PALETTE = [
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#56B4E9",
    "#D55E00",
    "#F0E442",
    "#332288",
    "#117733",
    "#882255",
    "#44AA99",
    "#999933",
    "#AA4499",
    "#661100",
]
UNCLUSTERED = "#9a9a9a"
OPEN_ALL_UP_TO = 60  # memories: a page this small opens every cluster at once
LABEL_CHARS = 48
VENDOR = Path(__file__).resolve().parent / "vendor" / "cytoscape"
CYTOSCAPE_VERSION = "3.35.0"
CYTOSCAPE_SHA256 = "71fa9ebec21a7ca2c40cff6aacc30d1f6464e363662ad4b2c197e1adc770cd94"


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
                "summary": engram.summary,
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


def short(text: str, limit: int = LABEL_CHARS) -> str:
    """A one-line label: the first ``limit`` characters, cut at a word, with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] or text[: limit - 1]
    return cut.rstrip(",;:.") + "…"


def colour(cluster: int) -> str:
    return PALETTE[cluster % len(PALETTE)] if cluster >= 0 else UNCLUSTERED


def _groups(view: GraphView) -> dict[str, int]:
    """Each node's cluster: a memory's own, a cue's the one holding most of its memories."""
    group = {n["key"]: n["cluster"] for n in view.nodes if n["kind"] == "memory"}
    votes: dict[str, Counter[int]] = defaultdict(Counter)
    for edge in view.edges:
        if edge["kind"] == "cue":
            votes[edge["b"]][group[edge["a"]]] += 1
    for node in view.nodes:
        if node["kind"] == "cue":
            counted = votes.get(node["key"])
            # The commonest cluster, the smaller id on a tie (deterministic).
            group[node["key"]] = min(counted.items(), key=lambda kv: (-kv[1], kv[0]))[0] if counted else -1
    return group


def _fr(n: int, edges: list[tuple[int, int]], weights: list[float] | None, seed: int) -> list[list[float]]:
    import igraph

    if n == 1:
        return [[0.0, 0.0]]
    random.seed(seed)  # igraph draws its initial positions from Python's random module
    graph = igraph.Graph(n=n, edges=edges)
    return [list(p) for p in graph.layout_fruchterman_reingold(weights=weights, niter=300).coords]


def _spread(centres: list[list[float]], radii: list[float], gap: float) -> None:
    """Push overlapping discs apart (in place) until none overlap: a few dozen clusters at most."""
    for _ in range(400):
        moved = False
        for i in range(len(centres)):
            for j in range(i + 1, len(centres)):
                dx, dy = centres[j][0] - centres[i][0], centres[j][1] - centres[i][1]
                dist = math.hypot(dx, dy) or 1e-6
                need = radii[i] + radii[j] + gap
                if dist < need:
                    push = (need - dist) / 2 + 0.5
                    ux, uy = (dx, dy) if dist > 1e-6 else (1.0, 0.0)
                    ux, uy = ux / (math.hypot(ux, uy) or 1), uy / (math.hypot(ux, uy) or 1)
                    centres[i][0] -= ux * push
                    centres[i][1] -= uy * push
                    centres[j][0] += ux * push
                    centres[j][1] += uy * push
                    moved = True
        if not moved:
            return


def lay_out(view: GraphView, seed: int = 7) -> tuple[dict[str, tuple[float, float]], dict[int, Any]]:
    """Positions of every node, and each cluster's centre and radius (in page pixels at zoom 1)."""
    group = _groups(view)
    members: dict[int, list[str]] = defaultdict(list)
    for node in view.nodes:
        members[group[node["key"]]].append(node["key"])
    ids = sorted(members)
    slot = {g: i for i, g in enumerate(ids)}
    between: Counter[tuple[int, int]] = Counter()
    for edge in view.edges:
        ga, gb = group[edge["a"]], group[edge["b"]]
        if ga != gb:
            between[(min(slot[ga], slot[gb]), max(slot[ga], slot[gb]))] += 1
    # Room for a label per node: about 130 px by 130 px each.
    radii = [max(80.0, 75.0 * math.sqrt(len(members[g]))) for g in ids]
    pairs = sorted(between)
    centres = _fr(len(ids), pairs, [float(between[p]) for p in pairs] or None, seed)
    span = max((math.hypot(x, y) for x, y in centres), default=1.0) or 1.0
    scale = 1.5 * math.sqrt(sum(r * r for r in radii)) / span  # compact, then pull overlaps apart
    centres = [[x * scale, y * scale] for x, y in centres]
    _spread(centres, radii, gap=80.0)
    positions: dict[str, tuple[float, float]] = {}
    for g, (cx, cy), radius in zip(ids, centres, radii, strict=True):
        keys = members[g]
        local = {k: i for i, k in enumerate(keys)}
        inside = [(local[e["a"]], local[e["b"]]) for e in view.edges if e["a"] in local and e["b"] in local]
        coords = _fr(len(keys), inside, None, seed + g)
        mx = sum(x for x, _ in coords) / len(coords)
        my = sum(y for _, y in coords) / len(coords)
        reach = max((math.hypot(x - mx, y - my) for x, y in coords), default=1.0) or 1.0
        for key, (x, y) in zip(keys, coords, strict=True):
            positions[key] = (cx + (x - mx) / reach * radius, cy + (y - my) / reach * radius)
    clusters = {
        g: {"x": c[0], "y": c[1], "r": r, "size": len(members[g])}
        for g, c, r in zip(ids, centres, radii, strict=True)
    }
    return positions, clusters


def _library() -> str:
    code = (VENDOR / "cytoscape.min.js").read_bytes()
    digest = hashlib.sha256(code).hexdigest()
    if digest != CYTOSCAPE_SHA256:
        raise RuntimeError(f"{VENDOR / 'cytoscape.min.js'} is not cytoscape {CYTOSCAPE_VERSION} ({digest})")
    return code.decode("utf-8").replace("</", "<\\/")


def elements(view: GraphView) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Cytoscape's elements (clusters, memories, cues, edges) and the legend's cluster rows."""
    positions, clusters = lay_out(view)
    group = _groups(view)
    memories = Counter(group[n["key"]] for n in view.nodes if n["kind"] == "memory")
    cue_links: dict[int, Counter[str]] = defaultdict(Counter)
    degree: Counter[str] = Counter()
    names = {n["key"]: n.get("name", "") for n in view.nodes}
    for edge in view.edges:
        degree[edge["a"]] += 1
        degree[edge["b"]] += 1
        if edge["kind"] == "cue":
            cue_links[group[edge["a"]]][names[edge["b"]]] += 1
    out: list[dict[str, Any]] = []
    legend = []
    spread = Counter(name for counted in cue_links.values() for name in counted)
    for g, place in sorted(clusters.items(), key=lambda kv: (-memories[kv[0]], kv[0])):
        # A cluster is named by the cues it uses most that few other clusters use.
        weight = {n: c * math.log(1 + len(clusters) / spread[n]) for n, c in cue_links[g].items()}
        top = [name for name, _ in sorted(weight.items(), key=lambda kv: (-kv[1], kv[0]))[:3]]
        name = f"Cluster {g}" if g >= 0 else "No cluster"
        count = memories[g]
        summary = f"{name} · {count} memor{'y' if count == 1 else 'ies'}" + (
            "\n" + ", ".join(top) if top else ""
        )
        out.append(
            {
                "group": "nodes",
                "data": {"id": f"k:{g}", "kind": "cluster", "cluster": g, "label": name, "color": colour(g)},
            }
        )
        out.append(
            {
                "group": "nodes",
                "position": {"x": round(place["x"], 1), "y": round(place["y"], 1)},
                "data": {
                    "id": f"s:{g}",
                    "kind": "summary",
                    "cluster": g,
                    "label": summary,
                    "color": colour(g),
                    # As large as the open cluster's disc, its label readable at "fit".
                    "size": round(1.1 * place["r"], 1),
                    "font": round(50 + place["r"] / 7, 1),
                },
            }
        )
        legend.append({"cluster": g, "name": name, "memories": count, "cues": top, "color": colour(g)})
    for node in view.nodes:
        x, y = positions[node["key"]]
        home = group[node["key"]]
        data = {**node, "id": node["key"], "parent": f"k:{home}", "cluster_of": home}
        if node["kind"] == "memory":
            data.update(
                label=short(node["summary"] or node["text"]),
                color=colour(node["cluster"]),
                size=round(14 + 14 * node["importance"], 1),
            )
        else:
            data.update(label=node["name"], size=round(10 + 2.5 * math.sqrt(degree[node["key"]]), 1))
        out.append({"group": "nodes", "position": {"x": round(x, 1), "y": round(y, 1)}, "data": data})
    between: Counter[tuple[int, int]] = Counter()
    for i, edge in enumerate(view.edges):
        data = {"id": f"e{i}", "source": edge["a"], "target": edge["b"], "kind": edge["kind"]}
        if edge["kind"] == "relation":
            data["label"] = edge["label"]
        if edge["kind"] == "association":
            data["strength"] = round(float(edge.get("strength") or 0.0), 3)
        out.append({"group": "edges", "data": data})
        ga, gb = group[edge["a"]], group[edge["b"]]
        if ga != gb:
            between[(min(ga, gb), max(ga, gb))] += 1
    for (ga, gb), count in sorted(between.items()):
        out.append(
            {
                "group": "edges",
                "data": {
                    "id": f"x:{ga}:{gb}",
                    "source": f"s:{ga}",
                    "target": f"s:{gb}",
                    "kind": "between",
                    "count": count,
                    "width": round(1 + math.log1p(count), 2),
                },
            }
        )
    return out, legend


def render(view: GraphView, user: str) -> str:
    """The page: the library, the elements with their positions, the legend and the controls."""
    items, legend = elements(view)
    memories = sum(1 for n in view.nodes if n["kind"] == "memory")
    payload = {
        "elements": items,
        "legend": legend,
        "openAll": memories <= OPEN_ALL_UP_TO,
        "summary": f"{memories} memories, {len(view.nodes) - memories} cues, {len(view.edges)} links",
    }
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    values = {
        "TITLE": html.escape(f"Smriti memory of {user}"),
        "SUMMARY": html.escape(str(payload["summary"])),
        "VERSION": CYTOSCAPE_VERSION,
        "DATA": data,
        "CYTOSCAPE": _library(),
    }
    # One pass: a memory that happens to contain a placeholder's name is left as it is.
    template = (Path(__file__).resolve().parent / "view.html").read_text(encoding="utf-8")
    return re.sub(r"__(TITLE|SUMMARY|VERSION|DATA|CYTOSCAPE)__", lambda m: values[m.group(1)], template)
