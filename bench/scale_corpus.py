"""The corpus of ``bench/scale_mcp.py``: N distinct, cue-rich memories and realistic questions.

Base texts are the LoCoMo dialogue turns (``"Speaker: text"``, as ``bench/locomo.py`` stores
them) and the HotpotQA passages (deduplicated by title), shuffled together with a seed.
Past the ~7,000 base texts, variants are made deterministically: a base text followed by a
sentence of another text of the same family (another turn, another passage's first
sentence), redrawn until the text is new. Every text is analysed by the project's offline
analyser (``smriti.providers.heuristic``) into the cues, co-occurrences and relations the
store pipeline would write (``smriti.nodes.link.memory_cues``), and gets AssociatedWith
edges to its most similar memories (cosine of the hashing embeddings, >= the default
``associate_min_similarity``) and to the two previous memories of its source, as the
pipeline's ``associate`` step would. Above :data:`EXACT_ASSOCIATION_LIMIT` memories the
similar ones are searched in a fixed sample of that many candidates, to keep generation in
minutes.

The records follow ``smriti.stores.records`` (the format of ``smriti export``), engram
embeddings included (the hashing embedder's, as the server computes them): the import rate
is the store's, with given embeddings, as the scale issue asks (~17 KB a memory at 1,536 dims).
"""

from __future__ import annotations

import json
import random
import re
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import orjson

EXACT_ASSOCIATION_LIMIT = 20_000
ASSOCIATE_TOP_K = 5  # Settings.associate_top_k
ASSOCIATE_MIN_SIMILARITY = 0.3  # Settings.associate_min_similarity
SAME_SOURCE_NEIGHBOURS = 2
SAME_SOURCE_STRENGTH = 0.5
RECENT_DAYS = 20  # last access spread over the last 20 days (decay half-life: 30 days)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass
class Base:
    text: str
    family: str  # "locomo" or "hotpotqa"
    source: str  # conversation session or passage title
    when: datetime


@dataclass
class Corpus:
    texts: list[str]
    sources: list[str]
    times: list[datetime]
    queries: list[str]
    extra: list[str] = field(default_factory=list)  # distinct texts for the store phase


def _locomo(folder: Path) -> tuple[list[Base], list[str]]:
    data = json.loads((folder / "locomo_public.json").read_text())
    bases, questions = [], []
    for sample in data:
        conversation = sample["conversation"]
        for key in conversation:
            if not re.fullmatch(r"session_\d+", key):
                continue
            stamp = conversation.get(f"{key}_date_time", "")
            try:
                when = datetime.strptime(stamp, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
            except ValueError:
                when = datetime(2023, 1, 1, tzinfo=UTC)
            for turn in conversation[key]:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [image: {turn['blip_caption']}]"
                bases.append(Base(text, "locomo", f"{sample['sample_id']}:{key}", when))
        questions += [q["question"] for q in sample["qa"] if q.get("category") in (1, 2, 3, 4)]
    return bases, questions


def _hotpotqa(folder: Path) -> tuple[list[Base], list[str]]:
    bases, questions, seen = [], [], set()
    when = datetime(2024, 6, 1, tzinfo=UTC)
    with (folder / "hotpotqa_500.jsonl").open() as lines:
        for line in lines:
            item = json.loads(line)
            questions.append(item["question"])
            for chunk in item["chunks"]:
                if chunk["title"] not in seen:
                    seen.add(chunk["title"])
                    bases.append(Base(chunk["chunk"], "hotpotqa", f"wiki:{chunk['title']}", when))
    return bases, questions


def _first_sentence(text: str) -> str:
    body = text.split(": ", 1)[1] if ": " in text[:60] else text
    return _SENTENCE.split(body.strip(), maxsplit=1)[0]


def make_texts(folder: Path, n: int, seed: int = 0, extra: int = 0) -> Corpus:
    """``n`` distinct texts (plus ``extra`` more for stores), their sources, times and questions."""
    rnd = random.Random(seed)
    locomo, locomo_q = _locomo(folder)
    hotpot, hotpot_q = _hotpotqa(folder)
    bases = locomo + hotpot
    rnd.shuffle(bases)
    by_family = {"locomo": locomo, "hotpotqa": hotpot}
    seen: set[str] = set()
    texts, sources, times = [], [], []
    i = 0
    while len(texts) < n + extra:
        base = bases[i % len(bases)]
        i += 1
        text, when = base.text, base.when
        if text in seen:  # a repeat round: append a sentence of another text of the same family
            while text in seen:
                other = rnd.choice(by_family[base.family])
                text = f"{base.text} {_first_sentence(other.text)}"
            when = base.when + timedelta(days=rnd.randint(1, 365))
        seen.add(text)
        texts.append(text)
        sources.append(base.source)
        times.append(when + timedelta(seconds=len(texts)))
    queries = [q for pair in zip(locomo_q, hotpot_q, strict=False) for q in pair]
    rnd.shuffle(queries)
    return Corpus(texts[:n], sources[:n], times[:n], queries, texts[n:])


def _id(rnd: random.Random) -> str:
    return str(uuid.UUID(int=rnd.getrandbits(128), version=4))


def embed_matrix(texts: list[str], dims: int) -> np.ndarray:
    """The hashing embeddings the server computes, as a float32 matrix (rows L2-normalised)."""
    from smriti.providers.hashing import HashingEmbeddings

    embedder = HashingEmbeddings(dims)
    matrix = np.empty((len(texts), dims), dtype=np.float32)
    for row, text in enumerate(texts):
        matrix[row] = embedder.embed_query(text)
    return matrix


def _similar(matrix: np.ndarray, rnd: random.Random) -> list[list[tuple[int, float]]]:
    """Per row, up to ASSOCIATE_TOP_K earlier-or-later rows with cosine >= the minimum."""
    n = len(matrix)
    if n > EXACT_ASSOCIATION_LIMIT:
        candidates = np.array(sorted(rnd.sample(range(n), EXACT_ASSOCIATION_LIMIT)))
    else:
        candidates = np.arange(n)
    pool = matrix[candidates]
    out: list[list[tuple[int, float]]] = []
    for start in range(0, n, 1024):
        block = matrix[start : start + 1024] @ pool.T
        for offset, scores in enumerate(block):
            row = start + offset
            k = min(ASSOCIATE_TOP_K + 1, len(scores))
            top = np.argpartition(-scores, k - 1)[:k]
            picked = [
                (int(candidates[j]), float(scores[j]))
                for j in top[np.argsort(-scores[top])]
                if candidates[j] != row and scores[j] >= ASSOCIATE_MIN_SIMILARITY
            ]
            out.append(picked[:ASSOCIATE_TOP_K])
    return out


def association_rows(
    sources: list[str], matrix: np.ndarray, rnd: random.Random
) -> list[tuple[int, int, float, str]]:
    """The AssociatedWith edges the store pipeline's ``associate`` step would make, as (row, other
    row, strength, relation_type): each memory's most similar ones and the previous memories of
    its source (``rnd`` samples the candidates above :data:`EXACT_ASSOCIATION_LIMIT` rows)."""
    rows: list[tuple[int, int, float, str]] = []
    recent: dict[str, list[int]] = defaultdict(list)
    for row, similar in enumerate(_similar(matrix, rnd)):
        links = {j: (score, "similar") for j, score in similar}
        for j in recent[sources[row]]:
            links.setdefault(j, (SAME_SOURCE_STRENGTH, "same_source"))
        recent[sources[row]] = [row, *recent[sources[row]]][:SAME_SOURCE_NEIGHBOURS]
        rows.extend((row, j, round(strength, 4), kind) for j, (strength, kind) in links.items())
    return rows


def write_records(corpus: Corpus, matrix: np.ndarray, path: Path, seed: int = 0) -> dict[str, int]:
    """Write the JSONL import file; returns counts per record kind."""
    from smriti.nodes.link import memory_cues
    from smriti.providers import heuristic
    from smriti.stores.base import Cue, cooccurring_pairs, normalise_cue_name

    rnd = random.Random(seed + 1)
    ids = [_id(rnd) for _ in corpus.texts]
    cue_types: dict[str, str] = {}
    encoded: list[tuple[str, str]] = []
    cooccurs: dict[tuple[str, str], float] = defaultdict(float)
    relations: list[dict[str, Any]] = []
    engrams: list[dict[str, Any]] = []
    now = datetime.now(UTC)
    for engram_id, text, source, when in zip(ids, corpus.texts, corpus.sources, corpus.times, strict=True):
        analysis = heuristic.analyze_offline(text).model_dump()
        cues = memory_cues(analysis, "")
        for cue in cues:
            cue_types.setdefault(cue["name"], cue["type"])
            encoded.append((engram_id, cue["name"]))
        # The store pipeline's rule, on the types the cues are stored with (the first one seen).
        for a, b, delta in cooccurring_pairs(Cue(c["name"], cue_types[c["name"]]) for c in cues):
            cooccurs[(a, b)] += delta
        for rel in analysis.get("relations", []):
            a, b = normalise_cue_name(rel["source"]), normalise_cue_name(rel["target"])
            if a and b and a != b and rel["relation"].strip():
                cue_types.setdefault(a, "concept")
                cue_types.setdefault(b, "concept")
                relations.append(
                    {
                        "kind": "relates_to",
                        "source": a,
                        "relation": rel["relation"],
                        "target": b,
                        "engram_id": engram_id,
                        "created_at": when.isoformat(),
                    }
                )
        engrams.append(
            {
                "kind": "engram",
                "id": engram_id,
                "content": text,
                "summary": analysis["summary"],
                "memory_type": analysis["memory_type"],
                "importance": 0.5,
                "access_count": 0,
                "created_at": when.isoformat(),
                # Used within the last weeks, as a live store's memories are: the dialogue
                # dates are years old, and a first consolidation would prune such a store.
                "last_accessed_at": (now - timedelta(hours=rnd.uniform(0, 24 * RECENT_DAYS))).isoformat(),
                "decay_factor": 1.0,
                "embedding": None,
                "source": source,
                "tags": "",
                "cluster_id": -1,
            }
        )
    associations = [
        {
            "kind": "associated_with",
            "source_id": ids[row],
            "target_id": ids[j],
            "strength": strength,
            "relation_type": kind,
            "created_at": corpus.times[row].isoformat(),
        }
        for row, j, strength, kind in association_rows(corpus.sources, matrix, rnd)
    ]
    counts = {
        "engram": len(engrams),
        "cue": len(cue_types),
        "encoded_by": len(encoded),
        "associated_with": len(associations),
        "co_occurs": len(cooccurs),
        "relates_to": len(relations),
    }
    with path.open("w", encoding="utf-8") as out:
        for row, record in enumerate(engrams):
            # the embedding the server would compute, given: the import measures the store, not
            # the embedder (orjson: 1,536 floats a line, 100k lines)
            line = orjson.dumps({**record, "embedding": matrix[row]}, option=orjson.OPT_SERIALIZE_NUMPY)
            out.write(line.decode() + "\n")
        for name, cue_type in cue_types.items():
            record = {"kind": "cue", "id": _id(rnd), "name": name, "cue_type": cue_type, "embedding": None}
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
        for engram_id, name in encoded:
            out.write(json.dumps({"kind": "encoded_by", "engram_id": engram_id, "cue": name}) + "\n")
        for record in associations:
            out.write(json.dumps(record) + "\n")
        for (a, b), strength in cooccurs.items():
            out.write(
                json.dumps({"kind": "co_occurs", "source": a, "target": b, "strength": strength}) + "\n"
            )
        for record in relations:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return counts
