"""Helpers for the notebooks and examples: demo settings, traces as tables, cluster pictures,
and an offline stand-in for a tool-calling chat model.

Everything here is importable without a notebook; pandas and matplotlib are imported only by
the functions that draw or tabulate (they are dev extras, not runtime dependencies).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from itertools import zip_longest
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

if TYPE_CHECKING:
    import pandas as pd

    from smriti.config import Settings
    from smriti.memory import Memory


# ----------------------------------------------------------------------------- settings
def demo_settings(
    user: str = "alice", storage_location: str | Path | None = None, **overrides: Any
) -> Settings:
    """Offline settings (heuristic analysis, 64-dim hashing embedder) on a throwaway folder.

    The folder is ``storage_location`` when given; otherwise a fresh temporary directory
    inside ``$STORAGE_LOCATION`` (or the system's temporary folder), so every notebook run
    starts empty and nothing is written into the user's real ``~/.smriti``.
    """
    from smriti.config import Settings

    if storage_location is None:
        parent = os.environ.get("STORAGE_LOCATION")
        if parent:
            Path(parent).mkdir(parents=True, exist_ok=True)
        storage_location = tempfile.mkdtemp(prefix="smriti-demo-", dir=parent or None)
    location = storage_location
    values: dict[str, Any] = {
        "storage_location": Path(location),
        "accessing_user": user,
        "llm_provider": "heuristic",
        "embedding_provider": "hashing",
        "embedding_dims": 64,
        "consolidation_interval": 0,
        "backup_sync_interval": 0,
        **overrides,
    }
    return Settings(**values)


def open_demo_memory(
    user: str = "alice", storage_location: str | Path | None = None, **overrides: Any
) -> Memory:
    """A :class:`~smriti.memory.Memory` on :func:`demo_settings` (offline models)."""
    from smriti.memory import Memory
    from smriti.providers.hashing import HashingEmbeddings

    settings = demo_settings(user, storage_location, **overrides)
    return Memory.open(settings, llm=None, embedder=HashingEmbeddings(settings.embedding_dims))


# A small corpus on a few topics, with words shared inside each topic so the association
# graph has communities for Leiden to find.
DEMO_CORPUS: dict[str, list[str]] = {
    "database": [
        "Alice chose PostgreSQL for the billing service because it needs transactions.",
        "The billing service PostgreSQL database uses cursor pagination for invoices.",
        "PostgreSQL vacuum runs nightly on the billing database.",
        "Kuzu is the embedded graph database behind Smriti memory.",
        "Graph database queries in Kuzu use openCypher with parameters.",
        "The analytics team moved reporting queries from PostgreSQL to DuckDB.",
        "DuckDB reads Parquet files for the analytics reporting database.",
        "Database migrations for billing run with Alembic before each deploy.",
    ],
    "travel": [
        "Alice flies to Lisbon in March for the Python conference.",
        "The Lisbon hotel for the Python conference is near the river.",
        "Alice prefers window seats on long flights.",
        "The Python conference in Lisbon has a workshop on LangGraph agents.",
        "Alice booked a train from Lisbon to Porto after the conference.",
        "Porto trip: visit the bookshop and the river cellars.",
        "Travel budget for the Lisbon conference trip is 1500 euros.",
    ],
    "cooking": [
        "Alice is vegetarian and likes spicy food.",
        "The best vegetarian curry recipe uses chickpeas, spinach and coconut milk.",
        "Spicy chickpea curry needs toasted cumin and fresh chillies.",
        "Alice bakes sourdough bread every Sunday with a rye starter.",
        "The sourdough starter needs feeding with rye flour twice a week.",
        "Coconut milk curry freezes well for weekday dinners.",
        "Alice dislikes mushrooms in any recipe.",
    ],
    "health": [
        "Alice runs five kilometres on Tuesday and Thursday mornings.",
        "The running plan adds one kilometre each week before the half marathon.",
        "Alice's half marathon is in October in Berlin.",
        "Stretching after running helps Alice's knee.",
        "Alice sleeps better without coffee after two in the afternoon.",
        "Yoga on Saturday mornings helps with running recovery.",
    ],
}


def demo_corpus() -> list[tuple[str, str]]:
    """``[(content, topic)]`` of :data:`DEMO_CORPUS`, topics interleaved."""
    columns = [[(text, topic) for text in texts] for topic, texts in DEMO_CORPUS.items()]
    return [row for group in zip_longest(*columns) for row in group if row is not None]


# ----------------------------------------------------------------------------- tables
def _texts(memory: Memory, ids: Sequence[str]) -> dict[str, str]:
    return {e.id: e.content for e in memory.context.store.get_engrams(list(ids))}


def candidates_frame(memory: Memory, candidates: Sequence[dict[str, Any]], width: int = 70) -> pd.DataFrame:
    """A trace entry's ``[{"id", "score"}]`` as a table with each memory's text."""
    import pandas as pd

    texts = _texts(memory, [c["id"] for c in candidates])
    rows = [
        {"id": c["id"][:8], "score": round(c["score"], 4), "text": texts.get(c["id"], "")[:width]}
        for c in candidates
    ]
    return pd.DataFrame(rows, columns=["id", "score", "text"])


def trace_frame(trace: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """One row per pipeline step: node, milliseconds, number of candidates, best one, notes."""
    import pandas as pd

    rows = [
        {
            "node": entry["node"],
            "ms": entry["ms"],
            "candidates": len(entry["candidates"]),
            "best": entry["candidates"][0]["score"] if entry["candidates"] else None,
            "notes": entry["notes"],
        }
        for entry in trace
    ]
    return pd.DataFrame(rows, columns=["node", "ms", "candidates", "best", "notes"])


def results_frame(result: dict[str, Any], width: int = 60) -> pd.DataFrame:
    """A recall result as a table; with ``explain`` results, one column per score component."""
    import pandas as pd

    rows = []
    for item in result.get("results", []):
        row = {"id": item["id"][:8], "score": item["score"], "text": item["text"][:width]}
        row.update(item.get("components", {}))
        row["retrieved_by"] = ",".join(item["metadata"]["retrieved_by"])
        row["hops"] = item["metadata"]["hops"]
        rows.append(row)
    return pd.DataFrame(rows)


def step_through(graph: Any, payload: dict[str, Any], memory: Memory) -> Iterator[tuple[str, dict[str, Any]]]:
    """Run ``graph`` a node at a time: yields ``(step, trace_entry)`` for each step as its node finishes.

    Uses ``stream(stream_mode="updates")``. The production graphs run in stages (a node runs
    several steps in order, ``smriti.pipelines.stages``): each update's ``trace`` has an entry per
    step, named after the step. Parallel branches (the recall graph's cue, vector and full-text
    searches) arrive as separate nodes.
    """
    for chunk in graph.stream(payload, context=memory.context, stream_mode="updates"):
        for update in chunk.values():
            for entry in (update or {}).get("trace", []):
                yield entry["node"], entry


def states_frame(memory: Memory) -> pd.DataFrame:
    """Every engram's consolidation state (importance, accesses, decay, cluster) with its text."""
    import pandas as pd

    states = memory.context.store.engram_states()
    texts = _texts(memory, [s.id for s in states])
    return pd.DataFrame(
        [
            {
                "id": s.id,
                "text": texts.get(s.id, "")[:50],
                "importance": s.importance,
                "access_count": s.access_count,
                "last_accessed_at": s.last_accessed_at,
                "decay_factor": s.decay_factor,
                "cluster_id": s.cluster_id,
            }
            for s in states
        ]
    )


# ----------------------------------------------------------------------------- pictures
def draw_cluster_graph(memory: Memory, ax: Any = None, seed: int = 7, label_width: int = 18) -> Any:
    """Draw the AssociatedWith graph, nodes coloured by Leiden cluster (igraph layout).

    Edge width follows association strength; grey nodes have no cluster yet (-1). Each node is
    labelled with the start of its memory, wrapped onto at most two lines of ``label_width``
    characters and cut at a word; a legend names the cluster of each colour. Returns the axes.
    """
    import random
    import textwrap

    import igraph as ig
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    store = memory.context.store
    states = store.engram_states()
    index = {s.id: i for i, s in enumerate(states)}
    edges = [(a.source_id, a.target_id, a.strength) for a in store.all_associations()]
    edges = [(index[s], index[t], w) for s, t, w in edges if s in index and t in index]
    graph = ig.Graph(n=len(states), edges=[(s, t) for s, t, _ in edges])
    graph.es["weight"] = [w for _, _, w in edges]
    random.seed(seed)  # igraph's layouts draw from Python's random generator
    layout = graph.layout_fruchterman_reingold(weights="weight" if edges else None) if states else []
    coords = list(layout)

    if ax is None:
        _, ax = plt.subplots(figsize=(11, 8))
    cmap = plt.get_cmap("tab10")

    def colour(cluster_id: int) -> Any:
        return "#cccccc" if cluster_id < 0 else cmap(cluster_id % 10)

    for s, t, w in edges:
        (x1, y1), (x2, y2) = coords[s], coords[t]
        ax.plot([x1, x2], [y1, y2], color="#999999", linewidth=0.5 + 2.5 * w, alpha=0.5, zorder=1)
    texts = _texts(memory, [s.id for s in states])
    for i, state in enumerate(states):
        x, y = coords[i]
        fill = colour(state.cluster_id)
        ax.scatter([x], [y], s=220, color=fill, edgecolors="black", linewidths=0.5, zorder=2)
        lines = textwrap.wrap(texts.get(state.id, ""), label_width)
        if len(lines) > 2:  # two lines at most, cut at a word
            lines = [lines[0], lines[1] + " …"]
        ax.annotate(
            "\n".join(lines), (x, y), xytext=(0, 8), textcoords="offset points", fontsize=7, ha="center"
        )
    clusters = sorted({s.cluster_id for s in states})
    legend = [
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            markersize=9,
            markerfacecolor=colour(c),
            markeredgecolor="black",
            label="no cluster" if c < 0 else f"cluster {c}",
        )
        for c in clusters
    ]
    if legend:
        ax.legend(handles=legend, title="Leiden cluster", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    found = sum(1 for c in clusters if c >= 0)
    ax.set_title(f"{len(states)} memories, {len(edges)} associations, {found} Leiden clusters")
    ax.margins(0.12)  # room inside the axes for the labels of the outermost nodes
    ax.set_axis_off()
    ax.figure.tight_layout()  # the legend outside the axes and the title stay in the figure
    return ax


def plot_decay(history: pd.DataFrame, ax: Any = None) -> Any:
    """Plot ``decay_factor`` per memory over simulated days (``history``: day, id, decay_factor)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    for _, rows in history.groupby("id"):
        ax.plot(rows["day"], rows["decay_factor"], marker="o", linewidth=1, alpha=0.7)
    ax.set_xlabel("simulated days")
    ax.set_ylabel("decay factor")
    ax.set_title("Decay over simulated time (one line per memory)")
    return ax


# ----------------------------------------------------------------------------- offline agent model
class ScriptedChatModel(BaseChatModel):
    """An offline, deterministic stand-in for a tool-calling chat model.

    With ``script`` it replays those AI messages in order (tests). Without one it follows
    three rules, enough to drive an agent through Smriti's tools:

    * a user message starting with "remember" calls ``remember`` with the rest of the message;
    * any other user message calls ``recall`` with the message as the query;
    * after tool results it answers in text, quoting what the tools returned.

    ``bind_tools`` returns the model itself, so ``create_react_agent`` accepts it.
    """

    script: list[AIMessage] | None = None
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "smriti-scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.calls += 1
        if self.script is not None:
            if not self.script:
                raise RuntimeError("ScriptedChatModel ran out of scripted messages")
            message = self.script.pop(0)
        else:
            message = self._reply(messages)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        call_id = f"call_{len(messages)}"
        if isinstance(last, ToolMessage):
            results = []
            for message in reversed(messages):
                if not isinstance(message, ToolMessage):
                    break
                results.insert(0, str(message.content))
            return AIMessage(content="\n".join(results))
        if isinstance(last, HumanMessage):
            text = str(last.content).strip()
            lowered = text.lower()
            if lowered.startswith("remember"):
                content = text[len("remember") :].lstrip(" :,")
                if content.lower().startswith("that "):
                    content = content[5:]
                return AIMessage(
                    content="",
                    tool_calls=[{"name": "remember", "args": {"content": content}, "id": call_id}],
                )
            return AIMessage(
                content="", tool_calls=[{"name": "recall", "args": {"query": text}, "id": call_id}]
            )
        return AIMessage(content="I have nothing to add.")


def agent_chat_model() -> BaseChatModel:
    """``ChatOpenAI`` when ``LLM_API_KEY`` is set (``LLM_MODEL``, ``LLM_BASE_URL``), else the
    offline :class:`ScriptedChatModel`."""
    key = os.environ.get("LLM_API_KEY")
    if not key:
        return ScriptedChatModel()
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=os.environ.get("LLM_MODEL", "gpt-4o-mini"),
        base_url=os.environ.get("LLM_BASE_URL") or None,
        api_key=key,
        temperature=0,
    )
