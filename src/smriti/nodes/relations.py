"""Following entities: the Memory Fabric relation traversal, and the bridge to what a memory names.

**Relation traversal** (off by default): entity -> relation -> entity, to depth 2, with the path.

Memories record facts between entities as RelatesTo edges between cues ("database-engineer
-recommends-> cursor-pagination", written by the memory that said it). The direct branches
find memories that share words, cues or meaning with the query; this stage follows the facts
instead. From the query's entities it reads the RelatesTo edges touching them (either
direction, one store read per depth for the whole frontier), reaches the entities at their
other ends, and repeats up to ``RELATION_DEPTH``. Each reached entity brings back:

1. the memory that recorded the edge that reached it (the fact itself), and
2. the memories the reached entity encodes (EncodedBy; what else is known about it),

each with the path that explains why it came back. A memory that recorded an edge of the
walk is explained by the walk up to that edge (``database-engineer -recommends->
cursor-pagination -relies_on-> opaque``) rather than by the entity it encodes; an edge walked
against its direction reads ``x <-relation- y``. The path ends up in the result's
``graph_relations`` (kind ``path``).

Bounded work: at most ``RELATION_SEEDS`` query cues start it, each depth reads at most
``RELATION_MAX_EDGES`` edges (newest first) and at most ``RELATION_NEW`` memories join the
candidates (shallower first). A traversal candidate's relevance is the larger of its own
fused signals and ``best direct relevance * RELATION_WEIGHT ** depth``, and it counts as
``depth`` hops for the scoring profile's hop and cluster penalties, so a fact reached through
the graph ranks below the direct hits it explains unless it matches the query itself.

**The bridge** (on): a memory that names an entity leads to the memories *about* that entity,
its subject (``candidates.memory_subject``: the entity cue the text starts with). "Where was the
director of Doctor Strange raised?" finds the film's memory, which names Scott Derrickson; the
memory that says where he was raised shares few words with the question and is about him. From
the best ``BRIDGE_SEEDS`` candidates (3) the step follows each entity they name (their entity
cues, and the names their text holds past the ``MAX_CUES`` a store keeps), except a
seed's own subject and entities linked to more than ``BRIDGE_MAX_LINKS`` memories (a speaker's
name is linked to all their turns), rarest first while ``BRIDGE_BUDGET`` linked memories last,
and raises every memory about one of them:

    relevance'(m) = relevance(m) + BRIDGE_WEIGHT * relevance(best seed naming m's subject)

adding it as a candidate when the direct branches missed it. It runs before focus, so the
query's own factors still apply. Chosen on HotpotQA's first half (0.5 among 0.3-1.0), it adds
about 10 points of supporting-passage R@5 on the second (bench/RESULTS.md); on LoCoMo, whose
only subjects are the two speakers, it changes nothing. Three store reads (the cues' counts,
the linked memories, the new candidates' rows), bounded by the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from smriti.nodes.candidates import (
    best_with_ties,
    load_candidates,
    memory_subject,
    query_vector,
    score_relevance,
)
from smriti.nodes.graph_relations import MAX_PATHS
from smriti.nodes.scoring import hub_ceiling
from smriti.nodes.state import Candidate, MemoryContext, RecallState, trace_scores, traced
from smriti.providers.heuristic import text_names
from smriti.stores.base import GraphStore, Relation, normalise_cue_name

if TYPE_CHECKING:
    from langgraph.runtime import Runtime


@dataclass(frozen=True, slots=True)
class Step:
    """One edge of a path, as stored (``source -relation-> target``), and which way it was walked."""

    source: str
    relation: str
    target: str
    forward: bool  # walked source -> target; False: reached the source from the target

    @property
    def start(self) -> str:
        return self.source if self.forward else self.target

    @property
    def end(self) -> str:
        return self.target if self.forward else self.source


def render_path(steps: Sequence[Step]) -> str:
    """``a -r1-> b -r2-> c``; an edge ``a -r-> b`` walked from b to a reads ``b <-r- a``."""
    if not steps:
        return ""
    text = steps[0].start
    for step in steps:
        text += f" -{step.relation}-> {step.end}" if step.forward else f" <-{step.relation}- {step.end}"
    return text


def path_entry(steps: Sequence[Step]) -> dict[str, Any]:
    """A ``graph_relations`` entry for a traversal path: from the query's entity to the reached one,
    the relations in order, the rendered path and its depth."""
    return {
        "from": steps[0].start,
        "relation": "/".join(step.relation for step in steps),
        "to": steps[-1].end,
        "kind": "path",
        "path": render_path(steps),
        "depth": len(steps),
    }


Path = tuple[Step, ...]


@dataclass(slots=True)
class Reached:
    """What the traversal found: per memory, the shortest path(s) that lead to it."""

    facts: dict[str, list[Path]]  # engram id -> the walk up to each edge it recorded, shortest
    entities: dict[str, Path]  # reached entity -> the path that reached it first
    edges: int  # edges read
    encoded: dict[str, list[Path]] = field(default_factory=dict)  # engram id -> paths to its entities

    def paths(self, engram_id: str) -> list[Path]:
        """The memory's explanation: the facts it recorded on the walk, else its reached entities."""
        return self.facts.get(engram_id) or self.encoded.get(engram_id, [])

    def memories(self) -> set[str]:
        return set(self.facts) | set(self.encoded)


def traverse(
    store: GraphStore,
    seeds: Sequence[str],
    depth: int,
    max_edges: int,
    max_frontier: int,
    ceiling: int | None = None,
) -> Reached:
    """Breadth-first over RelatesTo from the seed cue names, to ``depth``.

    An entity is expanded once (at the depth it was first reached); a memory keeps every path
    of the shortest length that reached it (up to MAX_PATHS), so the explanation is the most
    direct one. Hubs are not expanded: an entity encoding more than ``ceiling`` memories (see
    :func:`hub_ceiling`; a speaker's name in a conversation) relates to everything, so its newest
    edges would crowd out the query's real subject. Pure graph work: no memory is loaded here.
    """
    facts: dict[str, list[Path]] = {}
    entities: dict[str, Path] = {name: () for name in seeds}
    frontier = list(seeds)
    edges = 0
    for _ in range(depth):
        if ceiling is not None and frontier:
            frontier = not_hubs(store, frontier, ceiling)
        if not frontier:
            break
        relations = store.related_entities(frontier, max_edges)
        edges += len(relations)
        here = set(frontier)
        next_frontier: list[str] = []
        for relation in relations:
            for step in _steps(relation, here):
                path = (*entities[step.start], step)
                if relation.engram_id:
                    add_path(facts, relation.engram_id, path)
                if step.end not in entities:
                    entities[step.end] = path
                    next_frontier.append(step.end)
        frontier = next_frontier[:max_frontier]
    return Reached(facts, entities, edges)


def not_hubs(store: GraphStore, names: Sequence[str], ceiling: int) -> list[str]:
    """``names`` without the entities that encode more than ``ceiling`` memories (one read)."""
    counts = store.cue_engram_counts(names)
    return [name for name in names if counts.get(name, 0) <= ceiling]


def _steps(relation: Relation, frontier: set[str]) -> Iterable[Step]:
    """The ways ``relation`` leads out of the frontier: forward from its source, backward from
    its target (both when both ends are in the frontier)."""
    if relation.source in frontier:
        yield Step(relation.source, relation.relation, relation.target, True)
    if relation.target in frontier:
        yield Step(relation.source, relation.relation, relation.target, False)


def add_path(paths: dict[str, list[Path]], engram_id: str, path: Path) -> None:
    """Keep the shortest paths to a memory (at most MAX_PATHS): a shorter one replaces them."""
    known = paths.setdefault(engram_id, [])
    if known and len(path) < len(known[0]):
        known.clear()
    if (not known or len(path) == len(known[0])) and path not in known and len(known) < MAX_PATHS:
        known.append(path)


def query_entities(parsed: dict[str, Any], limit: int) -> list[str]:
    """The cue names the traversal starts from: entity hints first (they name the query's
    subject), then the other cues, normalised, without repeats, at most ``limit``."""
    names = [normalise_cue_name(n) for n in [*parsed.get("entity_hints", []), *parsed.get("cues", [])]]
    return list(dict.fromkeys(n for n in names if n))[:limit]


@traced
def relation_traverse(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Follow RelatesTo from the query's entities (RELATION_TRAVERSAL, RELATION_DEPTH); bring back the
    memories behind the reached facts and entities as candidates, each with its path."""
    context = runtime.context
    settings = context.settings
    candidates = list(state.get("candidates", []))
    seeds = query_entities(state.get("parsed", {}), settings.relation_seeds)
    if not settings.relation_traversal or settings.relation_depth == 0 or not seeds:
        return {"_notes": "off" if not settings.relation_traversal else "no entities to start from"}
    reached = traverse(
        context.store,
        seeds,
        settings.relation_depth,
        settings.relation_max_edges,
        settings.relation_seeds,
        ceiling := hub_ceiling(context.store.count_engrams()),
    )
    # 2. Memories encoded by the reached entities (not the seeds: cue traversal found those; not
    # the hubs: any ten of a speaker's turns explain nothing).
    far = [name for name, path in reached.entities.items() if path]
    far = not_hubs(context.store, far, ceiling) if far else []
    if far and settings.relation_new:
        for hit in context.store.engrams_by_cues(far, settings.relation_new):
            for name in hit.cues:
                if name in reached.entities:
                    add_path(reached.encoded, hit.engram_id, reached.entities[name])
    known = {c.id: c for c in candidates}
    best = max((c.relevance for c in candidates if not c.hops), default=1.0)
    weight = settings.relation_weight
    updated: dict[str, Candidate] = {}
    for engram_id in sorted(reached.memories() & set(known)):
        # Already a candidate: it gains the explanation, and at least what the walk passes on.
        paths = reached.paths(engram_id)
        item = known[engram_id].copy()
        item.relation_paths = [*item.relation_paths, *(path_entry(p) for p in paths)][:MAX_PATHS]
        item.relevance = max(item.relevance, best * weight ** len(paths[0]))
        item.origins = [*item.origins, "relation"]
        updated[engram_id] = item
    # New memories: the recorded facts first, then the shallower, then by id (stable).
    fresh = sorted(
        reached.memories() - set(known),
        key=lambda i: (i not in reached.facts, len(reached.paths(i)[0]), i),
    )
    query = query_vector(state)
    new = load_candidates(context, fresh[: settings.relation_new], {}, state.get("memory_type"), query)
    for candidate in new:
        paths = reached.paths(candidate.id)
        depth = len(paths[0])
        score_relevance(candidate, state.get("branch_scores", {}), state["mode"], context.fusion)
        candidate.relevance = max(candidate.relevance, best * weight**depth)
        candidate.hops, candidate.origins = depth, ["relation"]
        candidate.relation_paths = [path_entry(p) for p in paths]
    merged = [updated.get(c.id, c) for c in candidates] + new
    return {
        "candidates": merged,
        "_candidates": trace_scores([*updated.values(), *new]),
        "_notes": (
            f"from {seeds}: {reached.edges} edge(s), {len(reached.entities) - len(seeds)} entities reached; "
            f"{len(new)} memories added, {len(updated)} explained"
        ),
    }


# ----------------------------------------------------------------------------- bridge
# The most memories one bridge reads to find those about the entities its seeds name: each is
# a row to load, and the rarest entities (read first) are the likeliest to be what a seed is
# about (a film's director, not the country it was made in).
BRIDGE_BUDGET = 60


def bridge_links(
    seeds: Sequence[Candidate],
    subject_of: Callable[[Candidate], str],
    counts: Mapping[str, int],
    limit: int,
    names_of: Callable[[Candidate], Iterable[str]] | None = None,
) -> dict[str, list[str]]:
    """Entity -> the seeds that name it, for the entities worth following out of ``seeds``.

    A seed's own subject is left out (the seed is already about it), and so is any entity linked
    to more than ``limit`` memories or unknown to the store (``counts``: name -> memories linked):
    a speaker's name leads to all their turns, which says nothing about this question.
    """
    named: dict[str, list[str]] = {}
    for seed in seeds:
        own = subject_of(seed)
        for name in names_of(seed) if names_of else seed.entities:
            if name == own or seed.entity_types.get(name) == "keyword":
                continue
            if 0 < counts.get(name, 0) <= limit:
                named.setdefault(name, []).append(seed.id)
    return named


def rarest_within(names: Iterable[str], counts: Mapping[str, int], budget: int) -> list[str]:
    """The rarest of ``names`` (fewest memories linked, then by name) while their memories add up
    to at most ``budget``."""
    chosen, used = [], 0
    for name in sorted(names, key=lambda n: (counts[n], n)):
        if used + counts[name] > budget:
            break
        chosen.append(name)
        used += counts[name]
    return chosen


def bridged_relevance(
    seeds: Mapping[str, float], named: Mapping[str, Sequence[str]], subject: str, weight: float
) -> tuple[float, str]:
    """What a memory about ``subject`` gains, and from which seed: ``weight`` x the relevance of
    the best seed that names the subject (ties to the smaller id, so order never matters)."""
    via = min(named.get(subject, ()), key=lambda seed: (-seeds[seed], seed), default="")
    return (seeds[via] * weight if via else 0.0), via


def bridged_total(own: float, gain: float, seed: float, below_seed: bool) -> float:
    """own + gain; with ``below_seed``, a memory raised by the bridge rises to the seed that named
    it at most (max(own, min(own + gain, seed))): the second hop joins the first, it does not
    replace it. Notes about a service an answer names ("payments-api retries twice", raised by
    "Priya owns payments-api ...") had outranked the answer itself."""
    if not below_seed:
        return own + gain
    return max(own, min(own + gain, seed))


@traced
def bridge(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """A memory that names an entity leads to the memories about that entity (see the module doc)."""
    context = runtime.context
    settings = context.settings
    candidates = list(state.get("candidates", []))
    if settings.bridge_weight <= 0 or not candidates:
        return {"_notes": "bridge off" if candidates else "no candidates"}
    seeds = best_with_ties(candidates, settings.bridge_seeds)
    subjects: dict[str, str] = {}

    def subject_of(candidate: Candidate) -> str:
        if candidate.id not in subjects:
            subjects[candidate.id] = memory_subject(
                candidate.text, candidate.entities, candidate.entity_types
            )
        return subjects[candidate.id]

    def names_of(seed: Candidate) -> list[str]:
        # Its entity cues, and every name its text holds: a store keeps MAX_CUES cues a memory,
        # so a passage naming twenty people is linked to the first twelve (held out on HotpotQA,
        # the names past them: +1.4 R@5 / +2.4 both@5; docs/recall.md).
        cued = [n for n in seed.entities if seed.entity_types.get(n) != "keyword"]
        return list(dict.fromkeys([*cued, *text_names(seed.text)]))

    names = sorted({n for s in seeds for n in names_of(s)})
    counts = context.store.cue_engram_counts(names) if names else {}
    named = bridge_links(seeds, subject_of, counts, settings.bridge_max_links, names_of)
    if not named:
        return {"_notes": f"no entity to follow from {len(seeds)} seed(s)"}
    # Every memory linked to a followed entity is read; only those about it (their subject) rise.
    followed = rarest_within(named, counts, BRIDGE_BUDGET)
    named = {name: named[name] for name in followed}
    reach = sum(counts[name] for name in followed)
    linked = [hit.engram_id for hit in context.store.engrams_by_cues(followed, reach)] if followed else []
    by_id = {c.id: c for c in candidates}
    missing = sorted(i for i in linked if i not in by_id)
    query = query_vector(state)
    for candidate in load_candidates(context, missing, {}, state.get("memory_type"), query):
        score_relevance(candidate, state.get("branch_scores", {}), state["mode"], context.fusion)
        candidate.origins = []
        by_id[candidate.id] = candidate
    relevance = {s.id: s.relevance for s in seeds}
    raised: list[Candidate] = []
    for engram_id in sorted(set(linked) & set(by_id)):
        candidate = by_id[engram_id]
        gain, via = bridged_relevance(relevance, named, subject_of(candidate), settings.bridge_weight)
        if gain <= 0 or via == engram_id:
            continue
        item = candidate.copy()
        item.relevance = bridged_total(candidate.relevance, gain, relevance[via], settings.bridge_below_seed)
        item.origins = [*item.origins, "bridge"]
        item.via = item.via or via
        # Explained by the walk it took: the seed memory names the entity this one is about.
        entry = {"from": via, "relation": "names", "to": subject_of(candidate), "kind": "bridge"}
        item.relation_paths = [*item.relation_paths, entry][:MAX_PATHS]
        by_id[engram_id] = item
        raised.append(item)
    kept = {c.id for c in candidates} | {c.id for c in raised}
    out = sorted((c for i, c in by_id.items() if i in kept), key=lambda c: (-c.relevance, c.tie))
    return {
        "candidates": out,
        "_candidates": trace_scores(raised),
        "_notes": f"followed {len(named)} entit(ies) from {len(seeds)} seed(s): {len(linked)} linked, "
        f"{len(raised)} about them raised ({len(kept) - len(candidates)} new)",
    }
