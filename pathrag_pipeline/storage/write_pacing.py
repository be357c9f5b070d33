"""How often a long stage writes its results: as often as it can, as long as writing stays a small share of its time.

A stage that produces rows for minutes (the ingest parsing files, the extraction stage extracting chunks) writes them
in batches, each a short DuckDB connection, so a reader gets the file between batches and a killed run keeps what
was written. Each connection's close checkpoints, and that fixed cost grows with the home and with the number of
small commits it has seen: a 25 MB offline build spent 40 of its 160 s extraction closing 70 one-second batches,
the last ones 0.6-1.4 s each; with ten-second batches the same closes took 0.03-0.06 s each (measured by hand,
issue 23). ``WritePacer`` times the fixed part of each write (opening the connection, and closing it) and makes the
next batch wait until ``fixed cost x (1 / share - 1)`` has passed, never less than the stage's own minimum: cheap
writes keep batches small, costly ones make them larger in proportion, so writing costs about ``share`` of the
stage whatever the size of the home.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    import duckdb

    from pathrag_pipeline.storage.store import Store

WRITE_OVERHEAD_SHARE = 0.1
"""At most about this share of a stage's wall time goes to the fixed cost of its batch writes."""


class WritePacer:
    """Times a stage's batch writes and says when the next one is due (see the module docstring)."""

    def __init__(self, min_seconds: float, share: float | None = WRITE_OVERHEAD_SHARE) -> None:
        """``share`` None: every write is due after ``min_seconds``, whatever it cost (tests that count writes)."""
        if share is not None and not 0 < share < 1:
            raise ValueError(f"share={share} must be between 0 and 1")
        self.min_seconds = min_seconds
        self.share = share
        self.interval = min_seconds
        self.last = time.monotonic()
        self.writes = 0

    def since(self) -> float:
        """Seconds since the last write ended (or the pacer was made)."""
        return time.monotonic() - self.last

    def due(self) -> bool:
        """Whether the next write is due: ``interval`` seconds passed since the last one ended."""
        return self.since() >= self.interval

    @contextlib.contextmanager
    def write(self, store: Store) -> Iterator[duckdb.DuckDBPyConnection]:
        """``store.connect()`` for one batch write, timing its open and close to set the next interval."""
        opened = time.monotonic()
        with store.connect() as con:
            started = time.monotonic()
            yield con
            closing = time.monotonic()
        self.last = time.monotonic()
        fixed = (started - opened) + (self.last - closing)
        if self.share is not None:
            self.interval = max(self.min_seconds, fixed * (1 / self.share - 1))
        self.writes += 1
