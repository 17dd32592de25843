"""An import's progress on stderr: what is done, the rate and the time left, from the first batch.

An import does two kinds of work per memory: its content is embedded (ahead, in batches, in
child processes for a local model) and then stored. Counting stored memories only left a bar at
0 while the first batches were embedded (~40 s with MiniLM, issue 44), so both count: a memory
is two units, one when its content is embedded and one when it is stored (an export's records,
embedded already, are one unit each).

The rate is measured on the work itself, not on the wall clock between lumps of progress
(rich's speed, the last 30 s of units, swung 3x either way as 256-content batches landed): the
embedder's own seconds per content (its batches run side by side in ``workers`` processes) and
the store pipeline's seconds per memory. The two run as a pipeline, so memories go at the slower
of the two rates, and the time left is what remains at it; the start-up of the embedder's
processes is said ("starting the embedder"), not averaged in. On a terminal it is a bar;
elsewhere (a pipe, a log) a line at every tenth of the work. The last line is the whole run's
rate: memories over the seconds from start to end.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from smriti.cli.render import err


class ImportProgress:
    """Counts units done and shows them (a context manager: the bar lives while it is entered).

    Args:
        total: memories to import.
        what: what is imported, for the lines ("memories", "records").
        embedding: whether each memory is embedded here (two units) or arrives embedded (one).
        clock: seconds (tests pass their own).
    """

    def __init__(
        self,
        total: int,
        what: str = "memories",
        embedding: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total, self.what = total, what
        self.per_memory = 2 if embedding else 1
        self.units = total * self.per_memory
        self.clock = clock
        self.embedded = self.stored = 0
        self.embed_seconds = self.store_seconds = 0.0  # the work's own seconds (see rate)
        self.workers = 1
        self.started = clock()
        self.console = err()
        self.lines = not self.console.is_terminal
        self._next_tenth = 1
        self._lock = threading.Lock()
        self._bar: Any = None
        self._task: Any = None

    # ------------------------------------------------------------------------- counting
    @property
    def done(self) -> int:
        return self.embedded + self.stored if self.per_memory == 2 else self.stored

    def add_embedded(self, count: int, seconds: float = 0.0, workers: int = 1) -> None:
        """``count`` contents embedded in ``seconds`` of the embedder's time, by one of
        ``workers`` side by side (may be called from another thread)."""
        with self._lock:
            self.embedded += count
            self.embed_seconds += seconds
            self.workers = max(1, workers)
            self._changed()

    def add_stored(self, count: int = 1, seconds: float | None = None) -> None:
        """``count`` memories (or records) stored, in ``seconds`` of storing (None: not timed)."""
        with self._lock:
            self.stored += count
            if seconds is not None:
                self.store_seconds += seconds
            self._changed()

    def store_one(self, seconds: float) -> None:
        """One memory stored in ``seconds`` (the store pipeline's callback)."""
        self.add_stored(1, seconds)

    def rate(self) -> float | None:
        """Memories a second: the slower of the embedder's and the stores' own rates (an export's
        records: stored over the seconds since the start). None until there is a measure."""
        rates = []
        if self.embedded and self.embed_seconds > 0:
            rates.append(self.embedded / (self.embed_seconds / self.workers))
        if self.stored and self.store_seconds > 0:
            rates.append(self.stored / self.store_seconds)
        if self.per_memory == 1 and self.stored:
            rates.append(self.stored / max(self.clock() - self.started, 1e-9))
        return min(rates) if rates else None

    def eta(self) -> float | None:
        """Seconds left at :meth:`rate`: the memories not yet stored."""
        rate = self.rate()
        return None if rate is None else (self.total - self.stored) / rate

    def percent(self) -> int:
        return 100 if self.units == 0 else int(100 * self.done / self.units)

    def summary(self) -> str:
        """Where the work stands, in one line (``imported 300/1000 memories (40%, 500 embedded),
        12.5 memories/s, eta 0:56``)."""
        embedded = f", {self.embedded} embedded" if self.per_memory == 2 else ""
        line = f"imported {self.stored}/{self.total} {self.what} ({self.percent()}%{embedded})"
        rate, eta = self.rate(), self.eta()
        if rate is not None and eta is not None:
            line += f", {rate:,.1f} {self.what}/s, eta {_duration(eta)}"
        return line

    def final(self) -> str:
        """The whole run's figure: memories over the seconds from start to now."""
        seconds = max(self.clock() - self.started, 1e-9)
        rate = self.stored / seconds
        return f"imported {self.stored} {self.what} in {seconds:.1f} s ({rate:,.1f} {self.what}/s)"

    def _changed(self) -> None:
        if self.lines:
            tenth = 10 * self.done // self.units if self.units else 10
            if tenth >= self._next_tenth:
                self._next_tenth = tenth + 1
                self.console.print(self.summary(), markup=False, highlight=False)
        elif self._bar is not None:
            description = (
                f"embedded {self.embedded}, stored {self.stored}" if self.per_memory == 2 else "importing"
            )
            self._bar.update(self._task, completed=self.done, description=description)

    # ------------------------------------------------------------------------- showing
    def __enter__(self) -> ImportProgress:
        self.started = self.clock()
        if self.lines:  # a line at each tenth of the work (see _changed)
            return self
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            _Figures(self),
            TimeElapsedColumn(),
            console=self.console,
        )
        self._bar.__enter__()
        starting = "starting the embedder" if self.per_memory == 2 else "importing"
        self._task = self._bar.add_task(starting, total=self.units)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
            self._bar = None


def _Figures(progress: ImportProgress) -> Any:  # a column, built where rich is imported
    from rich.progress import ProgressColumn
    from rich.text import Text

    class Figures(ProgressColumn):
        """The rate and time left of :class:`ImportProgress` (not rich's 30 s window of bytes)."""

        def render(self, task: Any) -> Text:
            rate, eta = progress.rate(), progress.eta()
            if rate is None or eta is None:
                return Text("measuring…", style="progress.data.speed")
            return Text(f"{rate:,.1f} {progress.what}/s  eta {_duration(eta)}", style="progress.data.speed")

    return Figures()


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"
