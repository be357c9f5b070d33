"""Dagster's SQLite event log with one SQLAlchemy engine kept per shard, in pathrag's own processes.

Dagster's ``SqliteEventLogStorage`` makes a SQLAlchemy engine for every connection to a shard (the run's own SQLite
file, the index file) and disposes of it after: a one-file edit's run made and disposed of 151 engines, about a
quarter of the 1.2 s its run spends around the stages (issue 64, measured with the peer benchmark's corpus). Kept
engines still use Dagster's ``NullPool``: every use opens and closes its own SQLite connection, exactly as before, so
nothing stays open between uses and the UI and daemon processes (which keep Dagster's class) see the same files.
Only the engine object is reused, for the last ``KEPT`` shards (a long-lived `pathrag serve` runs many runs).

``keep_engines`` applies it to an instance whose event log is exactly Dagster's SQLite one (``runs.instance_for``);
a user's own event log storage (Postgres, another class in dagster.yaml) is left alone.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
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
            engine = engines.pop(shard, None)
            if engine is None:
                engine = create_engine(self.conn_string_for_shard(shard), poolclass=NullPool,
                                       connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
            engines[shard] = engine
            while len(engines) > KEPT:
                engines.popitem(last=False)[1].dispose()
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn:
                with conn.begin():
                    yield conn

    def dispose(self) -> None:
        super().dispose()
        with self._db_lock:
            for engine in self.__dict__.pop("_pathrag_engines", {}).values():
                engine.dispose()


def keep_engines(instance: dg.DagsterInstance) -> dg.DagsterInstance:
    """``instance`` with its event log's engines kept, when that log is exactly Dagster's SQLite one."""
    storage = instance.event_log_storage
    if type(storage) is SqliteEventLogStorage:
        storage.__class__ = KeptEnginesSqliteEventLogStorage
    return instance
