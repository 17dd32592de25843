"""Checkpointing Smriti's pipelines: the state types LangGraph's serializer must know.

Recall's state carries typed :class:`~smriti.nodes.state.Candidate` records, which a
checkpointer stores with LangGraph's msgpack serializer. LangGraph deserializes only the types
it is told about: an unregistered type is a deprecation warning today and is refused under
``LANGGRAPH_STRICT_MSGPACK=true`` (and will be by default). Registration is LangGraph's
documented ``allowed_msgpack_modules``; :func:`checkpointer` is an ``InMemorySaver`` with
Smriti's types registered, for stepping through a pipeline (``interrupt_before``) and resuming:

```python
from smriti.pipelines.checkpoint import checkpointer
from smriti.pipelines.recall import build_recall_graph

paused = build_recall_graph(checkpointer=checkpointer(), interrupt_before=["score"])
```

A saver of your own (SQLite, Postgres) takes ``serde=serializer(*your_types)``.
(The compiled graph registers the types of its state schema by itself only in strict mode.)
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

# Every class a pipeline's checkpointed state holds beyond msgpack's and LangGraph's safe types
# (tests/test_checkpoint_serde.py checks this list against the state schemas).
SERDE_TYPES: tuple[tuple[str, str], ...] = (("smriti.nodes.state", "Candidate"),)


def serializer(*extra: tuple[str, ...] | type) -> JsonPlusSerializer:
    """LangGraph's serializer with Smriti's state types (and ``extra``: yours) registered."""
    return JsonPlusSerializer(allowed_msgpack_modules=[*SERDE_TYPES, *extra])


def checkpointer(*extra: tuple[str, ...] | type, **options: Any) -> InMemorySaver:
    """An in-memory checkpointer whose serializer knows Smriti's state types (and ``extra``)."""
    return InMemorySaver(serde=serializer(*extra), **options)
