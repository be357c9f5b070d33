"""Dagster's SQLite event log with one SQLAlchemy engine kept per shard, in pathrag's own processes.

Dagster's ``SqliteEventLogStorage`` makes a SQLAlchemy engine for every connection to a shard (the run's own SQLite
file, the index file) and disposes of it after: a one-file edit's run made and disposed of 151 engines, about a
quarter of the 1.2 s its run spends around the stages (issue 64, measured with the peer benchmark's corpus). Kept
engines still use Dagster's ``NullPool``: every use opens and closes its own SQLite connection, exactly as before, so
nothing stays open between uses and the UI and daemon processes (which keep Dagster's class) see the same files.
Only the engine object is reused, for the last ``KEPT`` shards (a long-lived `pathrag serve` runs many runs).

Each kept shard also keeps one idle SQLite connection of its own open (``_anchor``): a connection that has read the
file, outside any transaction. Dagster opens its shards in WAL mode, and SQLite checkpoints the write-ahead log into
the database file and deletes it whenever the last connection to the file closes: with ``NullPool`` every use closed
the file's only connection, so every event written (about 40 in a one-file edit's run) paid a checkpoint and its
fsyncs, ~1 ms on an idle disk and ~20 ms on a busy one (issue 64: the run around a served edit's
stages took 0.4 s idle and 2 s while another process wrote to the disk). With the anchor open, a connection's close
is only a close; the log is checkpointed as SQLite does it anyway, when it grows past its threshold, and once more
when the anchor closes with its engine. It holds no lock while idle: other processes (the UI, the daemon) read and
write the file as before. The UI follows a run's events live by watching its shard file for modifications (Dagster's
``SqliteEventLogStorageWatchdog``), which the checkpoints made: a connection that wrote to a run's shard now sets the
file's modification time itself (``os.utime``: no write, no fsync), so the UI sees each event as it did.

``keep_engines`` applies it to an instance whose event log is exactly Dagster's SQLite one (``runs.instance_for``);
a user's own event log storage (Postgres, another class in dagster.yaml) is left alone.
"""

from __future__ import annotations

import os
import sqlite3
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import dagster as dg
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME, SqliteEventLogStorage
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool

KEPT = 8   # shards whose engine is kept: the index file and the last few runs'


class KeptEnginesSqliteEventLogStorage(SqliteEventLogStorage):
    """``SqliteEventLogStorage`` whose ``_connect`` reuses one engine per shard (see the module docstring)."""

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:   # Dagster 1.13's, without the engine per call
        with self._db_lock:
            engines = self.__dict__.setdefault("_pathrag_engines", OrderedDict())
            kept = engines.pop(shard, None)
            if kept is None:
                kept = (create_engine(self.conn_string_for_shard(shard), poolclass=NullPool,
                                      connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS}), None)
            engines[shard] = kept
            while len(engines) > KEPT:
                _close(*engines.popitem(last=False)[1])
            engine, anchor = kept
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            if anchor is None:   # after _initdb: the file exists and is in WAL mode
                engines[shard] = (engine, _anchor(self.path_for_shard(shard)))
            with engine.connect() as conn:
                with conn.begin():
                    yield conn
                wrote = conn.connection.dbapi_connection.total_changes
            if wrote and shard != INDEX_SHARD_NAME:
                with suppress(OSError):
                    os.utime(self.path_for_shard(shard))   # what the UI's watcher of this run waits for

    def dispose(self) -> None:
        super().dispose()
        with self._db_lock:
            for engine, anchor in self.__dict__.pop("_pathrag_engines", {}).values():
                _close(engine, anchor)


def _anchor(path: str) -> sqlite3.Connection | None:
    """An idle connection to the shard at ``path`` that has read it (so it holds the log's shared memory open, which
    is what keeps the other connections' closes from checkpointing; see the module docstring). None when it cannot be
    opened: the shard then works as Dagster's own class does."""
    try:
        anchor = sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_SECONDS, check_same_thread=False)
    except sqlite3.Error:
        return None
    try:
        anchor.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except sqlite3.Error:
        anchor.close()
        return None
    return anchor


def _close(engine, anchor: sqlite3.Connection | None) -> None:
    engine.dispose()
    if anchor is not None:
        with suppress(sqlite3.Error):
            anchor.close()


def keep_engines(instance: dg.DagsterInstance) -> dg.DagsterInstance:
    """``instance`` with its event log's engines kept, when that log is exactly Dagster's SQLite one."""
    storage = instance.event_log_storage
    if type(storage) is SqliteEventLogStorage:
        storage.__class__ = KeptEnginesSqliteEventLogStorage
    return instance
