"""The append-only query log: every question asked, its retained paths and its retrieved nodes.

Tables ``queries``, ``path_traces`` and ``retrieved_nodes`` (DDL in ``schema.DDL``, documented in
docs/tables.md) make queries inspectable and comparable with plain SQL, e.g. which paths a question got,
how long each stage took, or how answers changed across graph versions. Rows are only ever inserted.
Questions and answers are bound as parameters, never spliced into SQL. A batch of results is written on
one short connection, after every LLM call of the batch has returned, so the DuckDB file is never held
while a model is thinking; when another process holds the file, the rows wait in a spool folder instead of
the query waiting for the lock (``write_results``). A query of the Python API whose process keeps the file open
for its next query spools its rows too, merged once that connection closes (``log_results``).
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from pathrag_pipeline.storage.store import Store, StoreLockedError, transaction

if TYPE_CHECKING:
    from pathrag_pipeline.query.results import QueryResult

# The three tables' columns, in the order ``_rows`` builds them, with the Arrow type each is inserted as: a batch
# goes in as one Arrow table per log table (DuckDB's ``executemany`` runs one statement per row: 25 ms a query's
# rows, a quarter of an offline ask's work in the query service). Types by name, so importing this module (as
# `pathrag status` and `pathrag sql` do, to merge the spool) does not import pyarrow.
_COLUMNS: dict[str, list[tuple[str, str]]] = {
    "queries": [("query_id", "string"), ("asked_at", "timestamp"), ("question", "string"), ("mode", "string"),
                ("params", "string"), ("keywords", "string"), ("provider", "string"), ("model", "string"),
                ("answer_kind", "string"), ("tokens", "string"), ("ms", "string"), ("total_ms", "float"),
                ("answer", "string"), ("chunk_ids", "strings"), ("document_ids", "strings"), ("tracking", "string"),
                ("llm_calls", "int"), ("llm_tokens", "int"), ("error", "string"), ("asked_from", "string"),
                ("process", "string"), ("citations", "string")],
    "path_traces": [("query_id", "string"), ("rank", "int"), ("reliability", "float"), ("hops", "int"),
                    ("node_names", "strings"), ("edge_ids", "strings"), ("text", "string"), ("chunk_ids", "strings"),
                    ("document_ids", "strings")],
    "retrieved_nodes": [("query_id", "string"), ("keyword", "string"), ("rank", "int"), ("entity_key", "string"),
                        ("entity_name", "string"), ("similarity", "float")],
}

SPOOL_DIR = "query_spool"
_HOST = socket.gethostname()
MERGE_BATCH = 200   # spool files merged per transaction: bounded memory however many asks were spooled


def spool_dir(store: Store) -> Path:
    """Where a query's log rows wait while another process holds the DuckDB file (beside it, in the home)."""
    return store.path.parent / SPOOL_DIR


def _rows(results: Sequence["QueryResult"]) -> dict[str, list[list]]:
    queries, paths, nodes = [], [], []
    for r in results:
        queries.append([
            r.query_id, r.asked_at, r.question, r.mode, json.dumps(r.params, sort_keys=True),
            json.dumps(r.keywords), r.provider, r.model, r.answer_kind, json.dumps(r.tokens),
            json.dumps(r.timings_ms), r.total_ms, r.answer, list(r.chunk_ids), list(r.document_ids),
            json.dumps(r.tracking) if r.tracking is not None else None, r.llm_calls, r.llm_tokens, r.error,
            r.asked_from, f"{_HOST}:{os.getpid()}", json.dumps(r.citations),
        ])
        paths.extend(
            [r.query_id, p.rank, p.reliability, p.hops, list(p.nodes), list(p.edge_ids), p.text,
             list(p.chunk_ids), list(p.document_ids)]
            for p in r.paths
        )
        nodes.extend(
            [r.query_id, n.keyword, n.rank, n.entity_key, n.entity_name, n.similarity]
            for n in r.retrieved
        )
    return {"queries": queries, "path_traces": paths, "retrieved_nodes": nodes}


def _insert(con, rows: dict[str, list[list]]) -> None:
    """Append ``rows`` (``_rows``' lists, in ``_COLUMNS`` order) to the three tables, one statement per table."""
    import pyarrow as pa

    types = {"string": pa.string(), "timestamp": pa.timestamp("us"), "float": pa.float64(), "int": pa.int64(),
             "strings": pa.list_(pa.string())}
    for table, columns in _COLUMNS.items():
        if not rows[table]:
            continue
        names = [name for name, _ in columns]
        # a spool file written before a column was added has shorter rows: the column is NULL for them
        data = pa.table([pa.array([row[i] if i < len(row) else None for row in rows[table]], type=types[kind])
                         for i, (_, kind) in enumerate(columns)], names=names)
        con.register("_log_rows", data)
        try:
            con.execute(f"INSERT INTO {table} ({', '.join(names)}) SELECT {', '.join(names)} FROM _log_rows")
        finally:
            con.unregister("_log_rows")


def write_results(store: Store, results: Sequence["QueryResult"]) -> str:
    """Append ``results`` to the three log tables in one transaction on one short connection; returns
    "written" or "spooled".

    A query never waits for a writer to log its rows: when another process holds the DuckDB file (an index
    run, another ask logging), the rows go to one JSON file in ``PATHRAG_HOME/query_spool/`` instead (written
    to a temporary name and renamed, so a reader never sees half a file), and the next process that gets the
    file (an ask, ``pathrag sql``, ``pathrag status``) moves them into the tables first (``merge_spool``).
    50 asks at once used to queue for the write lock one by one (issue 22 item 6)."""
    if not results:
        return "written"
    rows = _rows(results)
    try:
        with store.connect(wait=False) as con:
            with transaction(con):
                _insert(con, rows)
            merge_spool(con, spool_dir(store))
        return "written"
    except StoreLockedError:
        _spool(spool_dir(store), rows)
        return "spooled"


def log_results(store: Store, results: Sequence["QueryResult"]) -> str:
    """Log ``results`` as a query of the Python API does: with ``write_results``, unless this process keeps the
    DuckDB file open for its next query (``store.KEEP_READING_S``), which a write would close (the next query
    would then open it again: about half of a logged offline query's own time). Then the rows go to the spool
    (``spool_results``, a millisecond) and are merged into the tables once the kept connection is closed: idle,
    ``PathRAG.close()``, the process's exit, or before this process opens the file otherwise (so its own reads
    see them); `pathrag sql` and `pathrag status` merge the spool before they read. Returns "written" or
    "spooled"."""
    if results and store.keeps_reads():
        spool_results(store, results)
        store.after_reads("query_log", lambda: merge_spool_now(store))
        return "spooled"
    return write_results(store, results)


def spool_results(store: Store, results: Sequence["QueryResult"]) -> str:
    """Put ``results`` in the query spool without touching the DuckDB file (a file write and a rename: about a
    millisecond, where a transaction costs tens). The query service logs this way while more asks wait, and writes
    the spool into the tables when it is idle; `pathrag sql` and `pathrag status` merge it before they read, so
    they see every answered ask either way. Returns "spooled"."""
    if results:
        _spool(spool_dir(store), _rows(results))
    return "spooled"


def _spool(folder: Path, rows: dict[str, list[list]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for row in rows["queries"]:
        row[1] = row[1].isoformat() if isinstance(row[1], datetime) else row[1]
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    path = folder / f"{stamp}-{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(rows))
    os.replace(tmp, path)
    return path


def spooled(store: Store) -> int:
    """How many spooled files wait to be merged."""
    folder = spool_dir(store)
    return sum(1 for _ in folder.glob("*.json")) if folder.is_dir() else 0


TABLES = ("queries", "path_traces", "retrieved_nodes")
STALE_TMP_SECONDS = 3600   # a .tmp older than this was left by a process killed while writing it


def _load(path: Path) -> dict[str, list[list]] | None:
    """A spool file's rows, or None when it is not one (unreadable, not JSON, not the three tables' rows)."""
    try:
        rows = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(rows, dict) or any(not isinstance(rows.get(t), list) for t in TABLES):
        return None
    if any(not isinstance(row, list) or not row for t in TABLES for row in rows[t]):
        return None
    return rows


def merge_spool(con, folder: Path) -> int:
    """Move the spooled rows into the log tables, oldest first, and delete each file once its rows are in; returns
    the queries merged. The files read together (at most ``MERGE_BATCH``: bounded memory) go in as one transaction
    (the query service spools an answer per file under load: one transaction each made the next idle write wait
    about a second for 50). A query already in ``queries`` (a merge whose file was not yet deleted when its
    process died) is not inserted twice. A file that is not a spool file, or whose rows the tables refuse, is
    renamed ``.bad`` and left for the user: it never blocks the others or the ask that found it (when the batch's
    transaction is refused, its files are retried one by one to find it)."""
    if not folder.is_dir():
        return 0
    now = datetime.now().timestamp()
    for tmp in folder.glob("*.tmp"):
        try:
            if now - tmp.stat().st_mtime > STALE_TMP_SECONDS:
                tmp.unlink(missing_ok=True)
        except OSError:
            pass
    merged, refused = 0, _refused()
    while True:
        files = sorted(folder.glob("*.json"))[:MERGE_BATCH]
        if not files:
            return merged
        loaded = []
        for path in files:
            rows = _load(path)
            if rows is None:
                path.replace(path.with_suffix(".bad"))
            else:
                loaded.append((path, rows))
        try:
            merged += _merge_files(con, loaded)
        except refused:
            for path, rows in loaded:
                try:
                    merged += _merge_files(con, [(path, rows)])
                except refused:
                    path.replace(path.with_suffix(".bad"))


def _refused() -> tuple[type[BaseException], ...]:
    import duckdb

    # what malformed spooled rows raise on their way in: DuckDB's errors, Arrow's (ValueError / TypeError
    # subclasses), a row too short for its table, a time that is not one
    return (duckdb.Error, ValueError, TypeError, IndexError, KeyError)


def _merge_files(con, loaded: list[tuple[Path, dict[str, list[list]]]]) -> int:
    """Insert the rows of ``loaded`` spool files not already in ``queries`` in one transaction, then delete the
    files; the number of queries inserted."""
    ids = [row[0] for _, rows in loaded for row in rows["queries"]]
    present = {r[0] for r in con.execute(
        "SELECT query_id FROM queries WHERE query_id IN (SELECT unnest(?))", [ids]).fetchall()} if ids else set()
    fresh = set(ids) - present
    if fresh:
        combined = {t: [row for _, rows in loaded for row in rows[t] if row[0] in fresh] for t in TABLES}
        for row in combined["queries"]:
            row[1] = datetime.fromisoformat(row[1]) if isinstance(row[1], str) else row[1]
        with transaction(con):
            _insert(con, combined)
    for path, _ in loaded:
        path.unlink(missing_ok=True)
    return len(fresh)


def merge_spool_now(store: Store, wait_s: float = 0.0) -> int | None:
    """Merge the spool if the DuckDB file is free right now, or within ``wait_s`` seconds; None when it is not."""
    if not spooled(store):
        return 0
    try:
        with store.connect(wait=wait_s) as con:
            return merge_spool(con, spool_dir(store))
    except StoreLockedError:
        return None


# ---- what the log gained, for the Dagster catalog -------------------------------------------------------------

QUERY_TABLES = ("queries", "path_traces", "retrieved_nodes")


def log_rows(con) -> dict[str, int]:
    """The rows each log table holds."""
    return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in QUERY_TABLES}


def log_growth(store: Store, reported_asks: int) -> dict | None:
    """What the log holds beyond its first ``reported_asks`` rows of ``queries`` (the row count the catalog last
    recorded): the rows of each log table now, how many asks came since and, among the newest of them, the modes
    and models that answered and when the last was asked. None when nothing came (or the home has no database
    yet); an index run writing the file meanwhile raises ``StoreLockedError``. The tables are append-only, so a row
    count is the mark; asks a busy file spooled count once they are merged, however old their ``asked_at``."""
    if not store.path.exists():
        return None
    with store.connect(read_only=True) as con:
        rows = log_rows(con)
        asks = rows["queries"] - reported_asks if rows["queries"] >= reported_asks else rows["queries"]
        if asks <= 0:
            return None
        modes, models, last, processes = con.execute(
            "SELECT list(DISTINCT mode ORDER BY mode), list(DISTINCT model ORDER BY model), "
            "strftime(max(asked_at), '%Y-%m-%d %H:%M:%S'), list(DISTINCT process ORDER BY process) "
            "FROM (SELECT mode, model, asked_at, process FROM queries ORDER BY asked_at DESC LIMIT ?)",
            [asks]).fetchone()
        sources = con.execute(
            "SELECT coalesce(asked_from, 'not recorded'), count(*) FROM (SELECT asked_from FROM queries "
            "ORDER BY asked_at DESC LIMIT ?) GROUP BY 1 ORDER BY 2 DESC, 1", [asks]).fetchall()
    return {"rows": rows, "asks": asks, "modes": modes, "models": models, "last_asked_at": last,
            "asked_from": dict(sources), "processes": [p for p in processes if p]}
