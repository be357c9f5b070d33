"""DuckDB storage: schema of the public tables and short-lived connections that respect the single-writer rule.

DuckDB allows one read-write process at a time (or many read-only ones, never both). Every Dagster run
is its own process and the CLI is another, so connections here are opened late, held briefly, and
retried with backoff while another process holds the lock. LLM calls and parsing happen outside them. The one
exception is a read connection kept open for a second after a query, for the next one (``KEEP_READING_S``).
Table columns are documented in docs/tables.md; names are stable.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timezone
import os
import random
import re
import shutil
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import duckdb

from pathrag_pipeline.config import DEFAULT_DUCKDB_MEMORY_LIMIT, DEFAULT_SQL_MAX_TEMP, usable_cores
from pathrag_pipeline.errors import PipelineError
from pathrag_pipeline.storage.row_group_merging import SETTLE_AFTER_BYTES, before_close, merging_off, wal_bytes
from pathrag_pipeline.storage.schema import ADDED_COLUMNS, DDL, init_schema, transaction  # noqa: F401 (re-exported)

T = TypeVar("T")

def lock_holder(exc: BaseException) -> str:
    """Who holds the DuckDB file, from DuckDB's lock error ("Conflicting lock is held in PROGRAM (PID N)"): the
    pid and, where /proc shows it, that process's command line; "another process" when the message has none."""
    match = re.search(r"\(PID (\d+)\)", str(exc))
    if not match:
        return "another process"
    pid = match.group(1)
    try:
        command = " ".join(Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace").replace("\0", " ")
                           .split())
    except OSError:
        command = ""
    if len(command) > 120:
        command = command[:117] + "..."
    return f"pid {pid} ({command})" if command else f"pid {pid}"


class StoreLockedError(PipelineError, RuntimeError):
    """Another process holds the DuckDB file for writing and did not release it in time."""


class StoreMemoryError(PipelineError, RuntimeError):
    """DuckDB needed more memory than its limit (PATHRAG_DUCKDB_MEMORY_LIMIT) for a statement on the index."""


_MEMORY_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*")


_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def _bytes(size: str) -> float | None:
    """Bytes of a DuckDB size such as '2GB' or '512MiB' (None when it does not parse)."""
    match = _MEMORY_SIZE.fullmatch(size)
    unit = _UNITS.get(match.group(2).upper()) if match else None
    return float(match.group(1)) * unit if match and unit else None


def out_of_memory_message(path: Path, memory_limit: str, exc: BaseException) -> str:
    """One line for a DuckDB ``OutOfMemoryException``: what ran out (DuckDB's memory limit and its setting),
    DuckDB's own figures, and what to set (four times the limit, with the machine's memory beside it)."""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    match = _MEMORY_SIZE.fullmatch(memory_limit)
    larger = f"{float(match.group(1)) * 4:g}{match.group(2)}" if match else "8GB"
    if (_bytes(larger) or 0) < (_bytes(DEFAULT_DUCKDB_MEMORY_LIMIT) or 0):
        larger = DEFAULT_DUCKDB_MEMORY_LIMIT   # a tiny limit: suggest the default, not 4KB
    ram = _physical_memory()
    machine = f" (this machine has {ram / 2**30:.0f} GiB)" if ram else ""
    return (f"DuckDB ran out of memory on {path}: it may use {memory_limit} (PATHRAG_DUCKDB_MEMORY_LIMIT) and this "
            f"statement needed more ({detail}). Set PATHRAG_DUCKDB_MEMORY_LIMIT higher, e.g. "
            f"PATHRAG_DUCKDB_MEMORY_LIMIT={larger}{machine}, and run the command again")


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def is_lock_error(exc: Exception) -> bool:
    """Whether DuckDB refused a connection because another process (or thread) holds the file."""
    text = str(exc)
    if "Unique file handle conflict" in text:
        # another thread of this process is opening or closing its own connection to the file right now
        return True
    return "lock" in text.lower() and ("Could not set lock" in text or "Conflicting lock" in text or "lock on file" in text)


LockNotice = Callable[[str], None]


SQL_SESSION_PREFIX = "sql-"


def _remove_dead_sessions(temp_directory: Path) -> None:
    """Spill folders of `pathrag sql` sessions whose process is gone (killed before it could remove them)."""
    if not temp_directory.is_dir():
        return
    for folder in temp_directory.glob(f"{SQL_SESSION_PREFIX}*"):
        try:
            pid = int(folder.name[len(SQL_SESSION_PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            pass   # alive under another user: not ours to remove


def _stderr_notice(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class _ModeLock:
    """Within one process, DuckDB refuses a read-only and a read-write connection to the same file at once
    ("a different configuration than existing connections"). Threads of one process (the query service's
    workers, one answering while another logs) take this before opening one: read-only connections share it,
    read-write ones hold it alone; a waiting writer goes before new readers. Re-entrant in the thread that holds
    it; a thread asking for a read-write connection while it holds a read-only one is a bug and says so."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer: int | None = None
        self._writer_depth = 0
        self._waiting_writers = 0
        self._local = threading.local()
        # the read connection ``Store.reading`` keeps open between read blocks (``KEEP_READING_S``): (connection,
        # memo, file signature, when parked); a reaper thread closes it once it has been idle that long
        self._kept: tuple | None = None
        self._reaper: threading.Thread | None = None
        # what waits for the kept connection to be closed (``after_kept``): key -> callable
        self._after_kept: dict[str, Callable[[], None]] = {}

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        depth = getattr(self._local, "depth", 0)
        if depth or self._writer == threading.get_ident():
            self._local.depth = depth + 1
            try:
                yield
            finally:
                self._local.depth = depth
            return
        with self._cond:
            while self._writer is not None or self._waiting_writers:
                self._cond.wait()
            self._readers += 1
        self._local.depth = 1
        try:
            yield
        finally:
            self._local.depth = 0
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        me = threading.get_ident()
        if self._writer == me:
            self._writer_depth += 1
            try:
                yield
            finally:
                self._writer_depth -= 1
            return
        if getattr(self._local, "depth", 0):
            raise RuntimeError("a read-write DuckDB connection was asked for inside a read-only one of the same "
                               "thread (Store.reading or connect(read_only=True)); close the read-only one first")
        with self._cond:
            self._waiting_writers += 1
            try:
                while self._writer is not None or self._readers:
                    self._cond.wait()
            finally:
                self._waiting_writers -= 1
            self._writer, self._writer_depth = me, 1
        try:
            self.drop_kept()   # no reader is in a block now: the kept connection is idle (DuckDB refuses both)
            yield
        finally:
            with self._cond:
                self._writer, self._writer_depth = None, 0
                self._cond.notify_all()

    # ---- the kept read connection -------------------------------------------------------------------
    def take_kept(self, signature: tuple) -> tuple | None:
        """The kept read connection and its memo, taken out of the slot for this read block; None when none is
        kept or the file changed under it (deleted and rebuilt: another inode; written: another mtime or size),
        in which case it is closed. Call with ``shared()`` held."""
        with self._cond:
            kept, self._kept = self._kept, None
        if kept is None:
            return None
        if kept[2] != signature:
            _close_quietly(kept[0])
            return None
        return kept[0], kept[1]

    def park(self, con, memo: dict, signature: tuple) -> None:
        """Keep ``con`` open for the next read block of this process, for ``KEEP_READING_S`` after this one; closed
        now when a writer of this process is waiting (it goes first) or another block already parked one."""
        with self._cond:
            if self._kept is None and not self._waiting_writers and self._writer is None:
                self._kept = (con, memo, signature, time.monotonic())
                if self._reaper is None:
                    self._reaper = threading.Thread(target=self._reap, name="pathrag-read-keeper", daemon=True)
                    self._reaper.start()
                return
        _close_quietly(con)

    def drop_kept(self) -> None:
        """Close the kept read connection now (a writer, or a connection of another configuration, is next)."""
        with self._cond:
            kept, self._kept = self._kept, None
            self._cond.notify_all()   # the keeper, waiting for the kept connection's time, finds none and ends
        if kept is not None:
            _close_quietly(kept[0])

    def stop_keeper(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) for the keeper thread to end, once nothing is kept: at the process's exit, so
        that it is not inside DuckDB when the interpreter stops its daemon threads (a thread stopped in DuckDB's C++
        aborts the process: "FATAL: exception not rethrown")."""
        with self._cond:
            reaper = self._reaper
        if reaper is not None and reaper is not threading.current_thread():
            reaper.join(timeout)

    def keeps(self) -> bool:
        """Whether a read connection is kept for the next block now."""
        with self._cond:
            return self._kept is not None

    def after_kept(self, key: str, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the kept read connection is closed: by the keeper once it is idle, by
        ``close_kept_reads``, before another connection of this process opens the file (``Store.connect``), or at
        the process's exit. One callback per ``key`` waits (a later one replaces it). When no connection is kept
        any more (the keeper closed it between the caller's look and now), it runs at once."""
        _flush_at_exit()
        with self._cond:
            self._after_kept[key] = callback
            kept = self._kept is not None
        if not kept:
            self.run_after_kept()

    def waiting_after_kept(self) -> bool:
        return bool(self._after_kept)

    def run_after_kept(self) -> None:
        """Run (and forget) what waits for the kept connection, which must be closed by now. Not in a thread that
        holds a read-only connection to the file (the callbacks may write): they wait for the next chance."""
        if getattr(self._local, "depth", 0):
            return
        with self._cond:
            callbacks, self._after_kept = list(self._after_kept.values()), {}
        for callback in callbacks:
            try:
                callback()
            except Exception as exc:  # noqa: BLE001 - a deferred write says so and the rest goes on
                _stderr_notice(f"pathrag: a write deferred while a query kept {type(exc).__name__}: {exc}")

    def _reap(self) -> None:
        while True:
            with self._cond:
                if self._kept is None:
                    self._reaper = None
                    return
                left = self._kept[3] + KEEP_READING_S - time.monotonic()
                if left <= 0:
                    kept, self._kept = self._kept, None
                    self._readers += 1   # a writer of this process waits until the file is closed
            if left > 0:
                with self._cond:   # woken early when the connection is taken or dropped (``drop_kept``)
                    if self._kept is not None:
                        self._cond.wait(left)
                continue
            try:
                _close_quietly(kept[0])
            finally:
                with self._cond:
                    self._readers -= 1
                    self._cond.notify_all()
            self.run_after_kept()   # the writes deferred while it was kept (a query's log rows)
            # and round again: a block that parked while this closed found this thread still its keeper


KEEP_READING_S = 1.0
"""How long ``Store.reading`` keeps its read connection open after a read block ends, for the next one of this
process: opening and closing the DuckDB file costs ~35 ms, about a third of a path query's own work. Queries asked
back to back (a script's loop, a batch, the query service) pay it once. While kept, the file's read lock is held:
a write of this process closes it first and goes at once; a writer in another process waits up to this long more
(its connect retries); a query whose answer takes longer than this (most real models) closes it during the answer
as before. The file is checked on every reuse (inode, size, mtime), so a home rebuilt at the same path is read
afresh. A latency-for-lock-time trade chosen, not tuned on a benchmark: one second is well under the index run
that would wait behind it and longer than a fast model's answer call."""


def _close_quietly(con) -> None:
    with contextlib.suppress(duckdb.Error):
        con.close()


def _file_signature(path: Path) -> tuple:
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


_mode_locks: dict[str, _ModeLock] = {}
_mode_locks_guard = threading.Lock()


def _mode_lock(path: Path) -> _ModeLock:
    key = os.path.abspath(path)
    with _mode_locks_guard:
        return _mode_locks.setdefault(key, _ModeLock())


def close_kept_reads(path: Path | str) -> None:
    """Close the read connection ``Store.reading`` keeps open for the file at ``path`` in this process, if any, and
    make the writes that waited for it (``after_kept``): before opening the file with another configuration (DuckDB
    refuses one file open twice in a process with different settings), as ``pathrag check`` does."""
    lock = _mode_lock(Path(path))
    lock.drop_kept()
    lock.run_after_kept()


_exit_flush_registered = False


def _flush_at_exit() -> None:
    """At the process's exit, close every kept read connection and make the writes that waited for it (once)."""
    global _exit_flush_registered
    with _mode_locks_guard:
        if _exit_flush_registered:
            return
        _exit_flush_registered = True

    def flush() -> None:
        with _mode_locks_guard:
            paths = list(_mode_locks)
        for path in paths:
            close_kept_reads(path)
            _mode_lock(path).stop_keeper(timeout=5.0)

    import atexit

    atexit.register(flush)


class Store:
    """The DuckDB file of one PATHRAG_HOME. Open connections with ``with store.connect() as con:``.

    Every connection gets an explicit ``memory_limit`` (DuckDB's own default is 80% of RAM) and a
    ``temp_directory`` next to the file, so statements that scale with the corpus spill to disk instead of
    growing without bound. While another process holds the file, ``connect`` retries and, after
    ``notice_after`` seconds, says so once through ``on_wait`` (stderr by default): waits are never silent.
    A statement that needs more than the memory limit raises ``StoreMemoryError`` (a ``PipelineError``: one
    line naming PATHRAG_DUCKDB_MEMORY_LIMIT) out of the ``with`` block, DuckDB's own exception chained to it.
    """

    def __init__(self, path: Path | str, lock_timeout: float = 120.0, *, memory_limit: str = DEFAULT_DUCKDB_MEMORY_LIMIT,
                 temp_directory: Path | str | None = None, on_wait: LockNotice | None = _stderr_notice,
                 notice_after: float = 1.0, sql_max_temp: str = DEFAULT_SQL_MAX_TEMP):
        self.path = Path(path)
        self.sql_max_temp = sql_max_temp
        self.lock_timeout = lock_timeout
        self.memory_limit = memory_limit
        self.temp_directory = Path(temp_directory) if temp_directory else self.path.parent / "duckdb_tmp"
        self.on_wait = on_wait
        self.notice_after = notice_after
        self._initialised = False
        self._reading = threading.local()   # this thread's connection while inside ``reading()``
        self._holding = threading.local()   # this thread's write connection while inside ``holding()``
        self.row_group_merges = 0   # write connections of this store that let DuckDB merge row groups
        self._unmerged_bytes = 0    # write-ahead log its writes left since this store last merged
        self._merge_next = False

    @classmethod
    def for_settings(cls, settings, **options) -> "Store":
        """The store of ``settings.home`` with its configured memory limit (PATHRAG_DUCKDB_MEMORY_LIMIT)."""
        return cls(settings.duckdb_path, memory_limit=settings.duckdb_memory_limit,
                   sql_max_temp=settings.sql_max_temp, **options)

    @contextlib.contextmanager
    def connect(self, read_only: bool = False, *, sandboxed: bool = False,
                wait: bool | float = True) -> Iterator[duckdb.DuckDBPyConnection]:
        """A short-lived connection; ``wait=False`` raises ``StoreLockedError`` at once, without a notice, when
        another process holds the file (a caller with somewhere else to put its rows: the query log spool); a number
        waits that many seconds at most. ``sandboxed`` (with read_only, for user SQL) also disables access to
        other files (COPY ... TO, read_csv('/etc/...')), so the connection can only read the index, and locks
        its limits for the session (``lock_configuration``: a statement cannot ``SET memory_limit`` past the
        configured cap, nor threads or the spill folder): it spills at most ``sql_max_temp`` to a folder of its
        own, removed when the connection closes (and, for a session that was killed, by the next one)."""
        if read_only and not self.path.exists():
            raise FileNotFoundError(
                f"no index at {self.path}: run `pathrag index PATH` or `pathrag quickstart` first"
            )
        if getattr(self._holding, "active", False) and not sandboxed:
            with self._held_cursor(wait) as cursor:   # takes the exclusive lock for the held connection
                yield cursor
            return
        lock = _mode_lock(self.path)
        if lock.waiting_after_kept() and getattr(self._reading, "con", None) is None:
            close_kept_reads(self.path)   # writes deferred while a query kept the file go first: this reads them
        with lock.shared() if read_only else lock.exclusive():
            if sandboxed:
                lock.drop_kept()   # its settings differ from the kept read connection's, which DuckDB refuses
            with self._connect(read_only, sandboxed, wait) as con:
                yield con

    @contextlib.contextmanager
    def _connect(self, read_only: bool, sandboxed: bool,
                 wait: bool | float) -> Iterator[duckdb.DuckDBPyConnection]:
        anchor = getattr(self._reading, "con", None)
        if anchor is not None and read_only and not sandboxed:
            # inside ``reading()``: a cursor on the connection already open (opening the file costs ~10 ms)
            with self._cursor_on(anchor) as cursor:
                yield cursor
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        config: dict = {"memory_limit": self.memory_limit}
        spill: Path | None = None
        if sandboxed:
            _remove_dead_sessions(self.temp_directory)
            # DuckDB makes the session's folder, not its parent: without this a statement that spills fails
            self.temp_directory.mkdir(parents=True, exist_ok=True)
            spill = self.temp_directory / f"{SQL_SESSION_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
            config.update(enable_external_access=False, temp_directory=str(spill), threads=usable_cores())
        else:
            config["temp_directory"] = str(self.temp_directory)
        con = self._open(read_only, config, wait=wait)
        try:
            if sandboxed:
                # set here, not in the connect config: DuckDB 2.0 shows a max_temp_directory_size given at
                # connect but does not enforce it (a 1MB cap let a statement spill 780MB; SET enforces it)
                con.execute("SET max_temp_directory_size = ?", [self.sql_max_temp])
                con.execute("SET enable_progress_bar = false")   # never on stdout, where --json rows go
                con.execute("SET lock_configuration = true")
            if not read_only and not self._initialised:
                init_schema(con)
                self._initialised = True
            if not read_only:
                merging_off(con)   # set, not a connect option: connections to one file in a process share those
            yield con
            if not read_only:
                self._before_close(con)
        except duckdb.OutOfMemoryException as exc:
            # an expected failure the user can act on: one line naming the setting, never a traceback
            message = out_of_memory_message(self.path, self.memory_limit, exc)
            if sandboxed:
                message += f" (a `pathrag sql` statement may also spill {self.sql_max_temp} to disk: PATHRAG_SQL_MAX_TEMP)"
            raise StoreMemoryError(message) from exc
        finally:
            con.close()
            if spill is not None:
                shutil.rmtree(spill, ignore_errors=True)

    def _before_close(self, con: duckdb.DuckDBPyConnection) -> None:
        """Row-group merging at this write's checkpoint (``row_group_merging``). Best effort: a write whose
        block ended normally but left its transaction unusable is closed (and rolled back) as before."""
        logged = wal_bytes(self.path)
        try:
            merged = before_close(con, logged, merge=self._merge_next)
        except duckdb.Error:
            return
        if merged:
            self.row_group_merges += 1
            self._unmerged_bytes = 0
        elif merged is not None:
            self._unmerged_bytes += logged

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Within this block, this thread's ``connect()`` calls (read or write, not sandboxed) are cursors on one
        write connection, opened by the first of them and closed (its checkpoint, row-group merging counted as
        for one write) when the block ends: a run of many short connections pays one open and one close
        (issue 23: an offline one-file edit at 100 MB opened the file 14 times, ~0.05 s each with its close).
        While the connection is open no other process can open the file and other threads of this one wait,
        so hold it only around work that is short and uses no LLM (``pipeline.run_indexing`` decides). Each
        cursor has its own transactions and temp tables, as separate connections do. Nested blocks reuse the
        outer one."""
        if getattr(self._holding, "active", False):
            yield
            return
        self._holding.active, self._holding.con, self._holding.locked = True, None, None
        try:
            yield
        finally:
            try:
                self._release_held()
            finally:
                self._holding.active = False

    @contextlib.contextmanager
    def released(self) -> Iterator[None]:
        """Within ``holding()``: close the held connection for this block, whose ``connect()`` calls open their own
        as outside it (work that waits on a model: the file stays free for other processes meanwhile); the block
        after it holds again (reopened by its first ``connect()``). Outside ``holding()``: nothing."""
        if not getattr(self._holding, "active", False):
            yield
            return
        self._release_held()
        self._holding.active = False
        try:
            yield
        finally:
            self._holding.active = True

    @contextlib.contextmanager
    def _held_cursor(self, wait: bool | float) -> Iterator[duckdb.DuckDBPyConnection]:
        if self._holding.con is None:
            locked = contextlib.ExitStack()
            locked.enter_context(_mode_lock(self.path).exclusive())
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                con = self._open(False, {"memory_limit": self.memory_limit,
                                         "temp_directory": str(self.temp_directory)}, wait=wait)
            except BaseException:
                locked.close()
                raise
            try:
                if not self._initialised:
                    init_schema(con)
                    self._initialised = True
                merging_off(con)
            except BaseException as exc:
                con.close()
                locked.close()
                if isinstance(exc, duckdb.OutOfMemoryException):   # one line naming the setting, as ``_connect``
                    raise StoreMemoryError(out_of_memory_message(self.path, self.memory_limit, exc)) from exc
                raise
            self._holding.con, self._holding.locked = con, locked
        with self._cursor_on(self._holding.con) as cursor:
            yield cursor

    @contextlib.contextmanager
    def _cursor_on(self, con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor on an open connection (its own transactions and temp tables), closed when the block ends."""
        cursor = con.cursor()
        try:
            yield cursor
        except duckdb.OutOfMemoryException as exc:
            raise StoreMemoryError(out_of_memory_message(self.path, self.memory_limit, exc)) from exc
        finally:
            cursor.close()

    def _release_held(self) -> None:
        """Close the connection ``holding()`` opened, if any (row-group merging as at any write's close)."""
        con, locked = getattr(self._holding, "con", None), getattr(self._holding, "locked", None)
        if con is None:
            return
        self._holding.con = self._holding.locked = None
        try:
            self._before_close(con)
        finally:
            con.close()
            locked.close()

    def settle_row_groups(self) -> bool:
        """Merge row groups now if this store's writes logged ``SETTLE_AFTER_BYTES`` or more since it last merged
        (a large run's batches), so that run pays for merging them rather than a later small write. Returns
        whether it merged."""
        unmerged = self._unmerged_bytes
        if getattr(self._holding, "con", None) is not None:
            unmerged += wal_bytes(self.path)   # what the connection ``holding()`` keeps open logged so far
        if unmerged < SETTLE_AFTER_BYTES:
            return False
        self._merge_next = True
        try:
            with self.connect():
                pass
            self._release_held()   # inside ``holding()``: its connection's close is the one that merges
        finally:
            self._merge_next = False
        return self._unmerged_bytes == 0

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Within this block, this thread's read-only ``connect()`` calls share one open connection: a query reads
        the graph version, the lexical index version and its passages on three connections, and opening the file
        is most of what each costs. Keep the block short (one query): while it is open this process holds the
        file's read lock, so a writer (an index run) waits for its end. Nested blocks reuse the outer one.
        When the block ends the connection, and what its readers kept in ``read_memo()``, stay open for the next
        block of this process for ``KEEP_READING_S`` (a writer of this process closes it first); a block that
        raised closes it."""
        if getattr(self._reading, "con", None) is not None or getattr(self._holding, "active", False):
            yield   # inside ``holding()``, reads are cursors on its connection already
            return
        if not self.path.exists():
            raise FileNotFoundError(
                f"no index at {self.path}: run `pathrag index PATH` or `pathrag quickstart` first"
            )
        lock = _mode_lock(self.path)
        with lock.shared():
            signature = _file_signature(self.path)
            kept = lock.take_kept(signature)
            if kept is None:
                con = self._open(True, {"memory_limit": self.memory_limit,
                                        "temp_directory": str(self.temp_directory)})
                memo: dict = {}
            else:
                con, memo = kept
            self._reading.con, self._reading.memo = con, memo
            finished = False
            try:
                yield
                finished = True
            finally:
                self._reading.con = self._reading.memo = None
                if finished:
                    lock.park(con, memo, signature)   # open for the next block a moment more (KEEP_READING_S)
                else:
                    con.close()

    def keeps_reads(self) -> bool:
        """Whether this process keeps a read connection to the file open for its next query (``reading``)."""
        return _mode_lock(self.path).keeps()

    def after_reads(self, key: str, callback: Callable[[], None]) -> None:
        """Defer a write until the read connection kept for the next query is closed (``_ModeLock.after_kept``): a
        write now would close it, and the next query would open the file again."""
        _mode_lock(self.path).after_kept(key, callback)

    def read_memo(self) -> dict | None:
        """Inside ``reading()``, a dict this thread's readers may keep what they read from the file in (the graph
        snapshot, the lexical index: what a version check would only confirm), valid until the block ends: while
        it is open this process holds the file's read lock, so no writer can change a row. None outside a block."""
        if getattr(self._reading, "con", None) is None:
            return None
        return self._reading.memo

    def read_once(self, key: str, load: Callable[[], T]) -> T:
        """``load()``, kept under ``key`` in ``read_memo()`` for the rest of the read block (so its queries load or
        check it once); outside a block, ``load()`` every time."""
        memo = self.read_memo()
        if memo is None:
            return load()
        if key not in memo:
            memo[key] = load()
        return memo[key]

    def _open(self, read_only: bool, config: dict | None = None,
              wait: bool | float = True) -> duckdb.DuckDBPyConnection:
        started = time.monotonic()
        limit = self.lock_timeout if wait is True else float(wait)   # False: 0, a number: that many seconds
        deadline = started + limit
        delay = 0.05
        told = False
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=read_only, config=config or {})
            except (duckdb.IOException, duckdb.ResourceInUseException) as exc:  # busy elsewhere: retry
                if not is_lock_error(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise StoreLockedError(
                        f"{self.path} is locked by {lock_holder(exc)} (a running Dagster run or pathrag command) "
                        f"for more than {limit:.0f}s; wait for it to finish and retry"
                    ) from exc
                if not told and self.on_wait is not None and time.monotonic() - started >= self.notice_after:
                    told = True
                    self.on_wait(f"waiting for {self.path}: {lock_holder(exc)} is writing to it (a `pathrag "
                                 f"index`, Dagster run or another command); retrying for up to "
                                 f"{self.lock_timeout:.0f}s ...")
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 2.0)


def utc_now() -> datetime:
    """Timestamps in every table are naive UTC."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def get_meta(con: duckdb.DuckDBPyConnection, key: str) -> str | None:
    # fetchall, not fetchone: a result left unfinished blocks con.register on this connection (DuckDB 1.5)
    rows = con.execute("SELECT value FROM pathrag_meta WHERE key = ?", [key]).fetchall()
    return rows[0][0] if rows else None


def set_meta(con: duckdb.DuckDBPyConnection, key: str, value: str) -> None:
    con.execute("INSERT OR REPLACE INTO pathrag_meta VALUES (?, ?)", [key, value])


CHUNKS_VERSION_META = "chunks_version"
"""pathrag_meta key: a fresh random token written whenever ingest changes chunks or document titles, so readers
that cache something built from the chunks (the BM25 index) check one row instead of hashing every chunk. A
token rather than a counter: a home deleted and rebuilt at the same path never repeats an old value."""


def bump_chunks_version(con: duckdb.DuckDBPyConnection) -> None:
    set_meta(con, CHUNKS_VERSION_META, uuid.uuid4().hex)


PASSAGE_TEXT_SQL = "coalesce(d.title, '') || ' ' || c.text"
"""A passage as every text retriever sees it, over ``chunks c LEFT JOIN documents d ON d.id = c.document_id``: its
document's title, then the chunk text (a passage's title is part of the passage). BM25 indexes it
(query/lexical.py) and the ``chunks`` vector table embeds it (index/embedding_stage.py), so dense and BM25 search,
naive mode and path mode's text hits all rank the same text."""
