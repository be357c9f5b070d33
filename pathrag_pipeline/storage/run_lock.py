"""One indexing run per PATHRAG_HOME at a time: an OS file lock held for the whole run.

Two `pathrag index` runs on one home would both extract every pending chunk (twice the LLM calls) and then
race on LanceDB's tables. ``index_lock`` takes an exclusive ``fcntl.flock`` on ``PATHRAG_HOME/index.lock``;
a second run *waits* for the first to finish and says so once (who holds it, since when), then does its own,
now incremental, pass, which usually finds nothing left to do. The OS drops the lock when the process ends,
even on a crash or kill, so a stale lock file never blocks anyone. Queries, `pathrag sql` and `status` do not
take this lock: they only wait (visibly) for DuckDB's own file lock, which writers hold briefly.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

LOCK_NAME = "index.lock"

# Re-entrant within a thread: a run holding the lock (e.g. `pathrag index` around its in-process Dagster job)
# calls stages that take it again. flock locks belong to the open file, so a second open in the same thread
# would deadlock on itself; homes this thread already holds are counted here instead. Other threads open the
# file themselves and wait like another process would.
_held = threading.local()


def _counts() -> dict[Path, int]:
    if not hasattr(_held, "counts"):
        _held.counts = {}
    return _held.counts


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def index_lock(home: Path | str, *, on_wait: Callable[[str], None] | None = _stderr,
               what: str = "indexing") -> Iterator[None]:
    """Hold the indexing lock of ``home`` for the body; wait (with one notice) while another run holds it."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system: no OS lock; DuckDB's file lock still serialises the writes
        yield
        return
    home = Path(home).resolve()
    held = _counts()
    if held.get(home):
        held[home] += 1
        try:
            yield
        finally:
            held[home] -= 1
        return
    home.mkdir(parents=True, exist_ok=True)
    path = home / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
            if on_wait is not None:
                on_wait(f"waiting: another indexing run holds {path} ({holder}); this {what} starts when it "
                        "finishes (one indexing run per PATHRAG_HOME at a time; Ctrl-C to give up)")
            started = time.monotonic()
            fcntl.flock(fd, fcntl.LOCK_EX)
            if on_wait is not None:
                on_wait(f"the other indexing run finished after {time.monotonic() - started:.0f}s; {what} starts now")
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, {what} since {stamp}\n".encode(), 0)
        held[home] = 1
        try:
            yield
        finally:
            held.pop(home, None)
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def held_here(home: Path | str) -> bool:
    """Whether this thread already holds the indexing lock of ``home`` (an outer caller took it)."""
    return bool(_counts().get(Path(home).resolve()))
