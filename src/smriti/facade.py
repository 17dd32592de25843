"""What every memory a caller talks to answers, written once: store and recall.

:meth:`MemoryFacade.store` and :meth:`MemoryFacade.recall` check a request where it enters
(``validators.check_store`` / ``check_recall``, with the memory's own limits) and hand the
checked request to ``store_checked`` / ``recall_checked``, which each memory writes:
:class:`~smriti.memory.Memory` runs the pipelines in this process. (The CLI's ``SharedMemory``
sends requests unchecked to the shared server, whose tools check them with the same
validators.)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime
from typing import TYPE_CHECKING, Any

from smriti.validators import RecallRequest, StoreRequest, check_recall, check_store

if TYPE_CHECKING:
    from smriti.config import Settings


class MemoryFacade(ABC):
    """Store and recall, checked once where they enter; subclasses answer checked requests."""

    @property
    @abstractmethod
    def settings(self) -> Settings:
        """The settings whose limits (MAX_CONTENT_CHARS, MEMORY_FABRIC_MAX_RESULTS) check requests."""

    @abstractmethod
    def store_checked(self, request: StoreRequest, created_at: datetime | None = None) -> dict[str, Any]:
        """Store a request already checked with ``validators.check_store``."""

    @abstractmethod
    def recall_checked(self, request: RecallRequest) -> dict[str, Any]:
        """Recall for a request already checked with ``validators.check_recall``."""

    def store(
        self,
        content: str,
        importance: float = 0.5,
        tags: str = "",
        source: str = "",
        created_at: datetime | None = None,
        occurred_at: datetime | None = None,
        supersedes: str = "",
    ) -> dict[str, Any]:
        """Remember ``content``; returns id, memory_type, cues, cluster_id, deduplicated and trace.

        ``occurred_at`` is when the remembered event happened (the memory's time, which recall's
        time windows and recency read); ``created_at`` sets the store time too (imports and
        simulations that replay a past timeline).
        ``supersedes`` names an older memory this one corrects (it is marked ``superseded_by``
        the new one). With a chat model configured the memory is stored with the offline
        analysis and the model's analysis is queued (``Memory.enrich``, or the server's worker).

        Raises:
            InvalidInput: a rule of ``validators.check_store`` is broken (nothing is stored).
            NotFound: ``supersedes`` names no memory (nothing is stored).
        """
        request = check_store(
            content,
            max_chars=self.settings.max_content_chars,
            importance=importance,
            tags=tags,
            source=source,
            occurred_at=occurred_at,
            supersedes=supersedes,
        )
        return self.store_checked(request, created_at=created_at)

    def recall(
        self,
        query: str = "",
        limit: int = 5,
        mode: str = "recall",
        memory_type: str | None = None,
        explain: bool = False,
        include_superseded: bool = False,
    ) -> dict[str, Any]:
        """Recall memories in the unified result format (with the trace when ``explain``).

        Superseded memories (corrected by a newer one) are left out unless
        ``include_superseded``; then they come back ranked below the current facts, with
        ``superseded_by`` set.

        Raises:
            InvalidInput: a rule of ``validators.check_recall`` is broken (nothing is read).
        """
        request = check_recall(
            query,
            max_results=self.settings.memory_fabric_max_results,
            limit=limit,
            mode=mode,
            memory_type=memory_type,
            explain=explain,
            include_superseded=include_superseded,
        )
        return self.recall_checked(request)
