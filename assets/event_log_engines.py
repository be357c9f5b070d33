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

A new run's shard starts as a copy of an empty shard Dagster itself initialised (``_RunShardTemplate``): Dagster's
``_initdb`` builds each run's SQLite file from scratch (alembic loads its ~90 revision files to check the file's
revision, creates the tables, stamps the head), ~50 ms of every run on this machine, a twentieth of a served edit.
The template is made once per Dagster version by that same ``_initdb`` on a file of its own
(``.pathrag-run-shard-<version>.sqlite`` beside the shards: Dagster lists shards as ``*.db``), checkpointed, and
copied into place for each new run (written to a temporary file, synced, then linked to the shard's name, which fails
if the file appeared meanwhile: then Dagster's own ``_initdb`` runs on it, as before). A shard that exists, the index
shard, or any failure to make or read the template goes through ``_initdb`` unchanged.

``keep_engines`` applies it to an instance whose event log is exactly Dagster's SQLite one (``runs.instance_for``);
a user's own event log storage (Postgres, another class in dagster.yaml) is left alone.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress

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
                if shard == INDEX_SHARD_NAME or not _RunShardTemplate.place(self, self.path_for_shard(shard)):
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


class _RunShardTemplate:
    """An empty run shard as Dagster's ``_initdb`` leaves it, kept as a file per Dagster version (module docstring)."""

    _cache: dict[str, bytes] = {}
    _lock = threading.Lock()

    @classmethod
    def place(cls, storage: SqliteEventLogStorage, path: str) -> bool:
        """Create the run shard at ``path`` as a copy of the template; False (nothing done) when the file exists or
        the template cannot be had: the caller then initialises it as Dagster does."""
        if os.path.exists(path):
            return False
        try:
            data = cls._bytes(storage)
        except Exception:  # noqa: BLE001 - no template (a full disk, an alembic error): Dagster's own init runs
            return False
        if data is None:
            return False
        temporary = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            with open(temporary, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.link(temporary, path)   # never over a shard another process made meanwhile
        except OSError:
            return False
        finally:
            with suppress(OSError):
                os.unlink(temporary)
        return True

    @classmethod
    def _bytes(cls, storage: SqliteEventLogStorage) -> bytes | None:
        name = os.path.join(storage._base_dir, f".pathrag-run-shard-{dg.__version__}.sqlite")
        with cls._lock:
            data = cls._cache.get(name)
            if data is None:
                data = _read_template(name)
                if data is None:
                    data = _make_template(storage, name)
                if data is not None:
                    cls._cache[name] = data
            return data


def _read_template(name: str) -> bytes | None:
    try:
        with open(name, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    return data if _looks_whole(data) else None


def _looks_whole(data: bytes) -> bool:
    """A whole SQLite file in WAL mode: its header, and as many pages as the header says."""
    if len(data) < 100 or not data.startswith(b"SQLite format 3\x00") or data[18:20] != b"\x02\x02":
        return False
    page_size = int.from_bytes(data[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    return page_size > 0 and len(data) == int.from_bytes(data[28:32], "big") * page_size


def _make_template(storage: SqliteEventLogStorage, name: str) -> bytes | None:
    """Initialise an empty shard with Dagster's own ``_initdb`` on a file of its own, checkpoint it, keep its bytes."""
    scratch = f"{name}.{os.getpid()}.{threading.get_ident()}.tmp"
    for leftover in (scratch, f"{scratch}-wal", f"{scratch}-shm"):
        with suppress(OSError):
            os.unlink(leftover)
    engine = create_engine(f"sqlite:///{scratch}", poolclass=NullPool)
    try:
        storage._initdb(engine)
    finally:
        engine.dispose()
    with closing(sqlite3.connect(scratch)) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = _read_template(scratch)
    if data is not None:
        os.replace(scratch, name)
    for leftover in (scratch, f"{scratch}-wal", f"{scratch}-shm"):
        with suppress(OSError):
            os.unlink(leftover)
    return data


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
