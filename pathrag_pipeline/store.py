"""DuckDB storage: schema of the public tables and short-lived connections that respect the single-writer rule.

DuckDB allows one read-write process at a time (or many read-only ones, never both). Every Dagster run
is its own process and the CLI is another, so connections here are opened late, held briefly, and
retried with backoff while another process holds the lock. LLM calls and parsing happen outside them.
Table columns are documented in docs/tables.md; names are stable.
"""

from __future__ import annotations

import contextlib
import random
import time
from pathlib import Path
from typing import Iterator

import duckdb

SCHEMA_VERSION = 1

DDL = [
    """
    CREATE TABLE IF NOT EXISTS documents (
        id            VARCHAR PRIMARY KEY,   -- relative path, or 'path#record-id' for a JSONL record
        path          VARCHAR NOT NULL,      -- file path relative to the indexed folder (= Dagster partition key)
        title         VARCHAR,
        format        VARCHAR,               -- txt, md, html, pdf, docx, jsonl
        content_hash  VARCHAR,               -- sha256 of this document's source bytes (the file, or the JSONL line)
        file_hash     VARCHAR,               -- sha256 of the whole file (change detection per file)
        size_bytes    BIGINT,
        status        VARCHAR NOT NULL,      -- 'indexed' or 'error'
        error         VARCHAR,               -- what went wrong and what to do, when status = 'error'
        text          VARCHAR,               -- extracted plain text; chunk offsets point into it
        created_at    TIMESTAMP NOT NULL,
        updated_at    TIMESTAMP NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS chunks (
        id            VARCHAR PRIMARY KEY,   -- 'chunk-' + hash(document id, text, repeat index): stable for unchanged text
        document_id   VARCHAR NOT NULL,
        ordinal       INTEGER NOT NULL,      -- 0-based position in the document
        text          VARCHAR NOT NULL,
        token_count   INTEGER NOT NULL,
        char_start    INTEGER NOT NULL,      -- offsets into documents.text: text = documents.text[char_start:char_end]
        char_end      INTEGER NOT NULL,
        content_hash  VARCHAR NOT NULL       -- sha256 of the chunk text alone (the extraction cache key)
    )
    """,
    "CREATE INDEX IF NOT EXISTS chunks_document ON chunks(document_id)",
    """
    CREATE TABLE IF NOT EXISTS pathrag_meta (
        key           VARCHAR PRIMARY KEY,   -- e.g. 'chunking': the chunk settings the chunks table was built with
        value         VARCHAR
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS ingest_runs (
        run_id        VARCHAR NOT NULL,      -- pathrag run id, or the Dagster run id
        started_at    TIMESTAMP NOT NULL,
        finished_at   TIMESTAMP,
        trigger       VARCHAR,               -- cli, quickstart, sensor, schedule, dagster
        folder        VARCHAR,
        files_seen    INTEGER,
        files_new     INTEGER,
        files_changed INTEGER,
        files_deleted INTEGER,
        files_unchanged INTEGER,
        files_failed  INTEGER,
        documents     INTEGER,               -- documents (re)written by this run
        chunks        INTEGER,               -- chunks (re)written by this run
        seconds       DOUBLE
    )
    """,
]


class StoreLockedError(RuntimeError):
    """Another process holds the DuckDB file for writing and did not release it in time."""


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc)
    return "lock" in text.lower() and ("Could not set lock" in text or "Conflicting lock" in text or "lock on file" in text)


class Store:
    """The DuckDB file of one PATHRAG_HOME. Open connections with ``with store.connect() as con:``."""

    def __init__(self, path: Path | str, lock_timeout: float = 120.0):
        self.path = Path(path)
        self.lock_timeout = lock_timeout
        self._initialised = False

    @contextlib.contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        if read_only and not self.path.exists():
            raise FileNotFoundError(
                f"no index at {self.path}: run `pathrag index PATH` or `pathrag quickstart` first"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = self._open(read_only)
        try:
            if not read_only and not self._initialised:
                init_schema(con)
                self._initialised = True
            yield con
        finally:
            con.close()

    def _open(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.05
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=read_only)
            except duckdb.IOException as exc:
                if not _is_lock_error(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise StoreLockedError(
                        f"{self.path} is locked by another process (a running Dagster run or pathrag command) "
                        f"for more than {self.lock_timeout:.0f}s; wait for it to finish and retry"
                    ) from exc
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 2.0)


def init_schema(con: duckdb.DuckDBPyConnection) -> None:
    for statement in DDL:
        con.execute(statement)


def get_meta(con: duckdb.DuckDBPyConnection, key: str) -> str | None:
    row = con.execute("SELECT value FROM pathrag_meta WHERE key = ?", [key]).fetchone()
    return row[0] if row else None


def set_meta(con: duckdb.DuckDBPyConnection, key: str, value: str) -> None:
    con.execute("INSERT OR REPLACE INTO pathrag_meta VALUES (?, ?)", [key, value])


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
