"""Embeddings stage: keep the LanceDB tables `entities`, `relations` and `chunks` in line with DuckDB.

What gets embedded: an entity's name and description; a relation's keywords, its two endpoint names and its
description (LightRAG's choice); a chunk's document title and text, the passage exactly as BM25 indexes it
(``store.PASSAGE_TEXT_SQL``), so dense and lexical search rank the same text.

Sync by difference (issue 23): the DuckDB table ``vector_rows`` remembers, per LanceDB table and key, a fingerprint
(``FINGERPRINT_SQL``) of the row the stage last wrote there. A sync computes the fingerprints of the current rows in SQL, sends only
the rows whose fingerprint changed (fetched and written in batches of ``SYNC_BATCH_ROWS``) and deletes the keys no
longer present, so an edit costs what it changed and memory holds one batch, whatever the corpus. The ledger is
trusted only while the LanceDB table is the one it was written for (same table id, row count and embedder); otherwise
(a first build, a re-embed into a fresh folder, a crash between a LanceDB write and the ledger update, a table
deleted by hand) every row is sent again, still in batches: the vector store compares a hash of each text with what
it holds, so only rows whose embedded text changed are re-embedded, and keys LanceDB holds that DuckDB does not are
deleted. A home whose chunk vectors embedded the chunk text alone (before the title was added) re-embeds its chunks,
and nothing else, on its next index run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from pathrag_pipeline.index.aliases import DETECTION_VERSION
from pathrag_pipeline.llm.embedding import Embedder
from pathrag_pipeline.storage.store import PASSAGE_TEXT_SQL, Store, get_meta, set_meta, transaction
from pathrag_pipeline.storage.vector_store import SyncStats

if TYPE_CHECKING:   # LanceDB is imported only by what opens a table (about a second of start-up)
    from pathrag_pipeline.storage.vector_store import VectorStore

# Each source gives (key, text, payload columns...): the payload columns are stored beside the vector by name.
ENTITY_SQL = "SELECT entity_key AS key, name || ': ' || coalesce(description, '') AS text, name FROM entities"
RELATION_SQL = """
    SELECT r.relation_key AS key,
           coalesce(r.keywords, '') || ' | ' || s.name || ' - ' || t.name || ': ' || coalesce(r.description, '') AS text,
           s.name AS source, t.name AS target
    FROM relations r JOIN entities s ON s.entity_key = r.src_key JOIN entities t ON t.entity_key = r.tgt_key
"""
CHUNK_SQL = (f"SELECT c.id AS key, {PASSAGE_TEXT_SQL} AS text, c.document_id "
             "FROM chunks c LEFT JOIN documents d ON d.id = c.document_id")
ALIAS_SQL = "SELECT alias_key, canonical_key, disabled FROM entity_aliases"
SOURCES = {"entities": ENTITY_SQL, "relations": RELATION_SQL, "chunks": CHUNK_SQL}


@dataclass
class EmbeddingReport:
    embedder: str
    dim: int
    tables: dict[str, SyncStats]

    @property
    def embedded(self) -> int:
        return sum(s.embedded for s in self.tables.values())

    @property
    def failed(self) -> int:
        """Rows left unembedded this run (their batch failed after retries); the next run embeds them."""
        return sum(s.failed for s in self.tables.values())

    @property
    def errors(self) -> list[str]:
        return [f"{name}: {e}" for name, s in self.tables.items() for e in s.errors]


def _payload_rows(cursor: duckdb.DuckDBPyConnection, rows: list[tuple], extra: int = 0) -> list[tuple]:
    """(key, text, payload dict) of rows (key, text, payload columns..., ``extra`` trailing columns)."""
    names = [d[0] for d in cursor.description][2:len(cursor.description) - extra]
    return [(r[0], r[1], dict(zip(names, r[2:2 + len(names)]))) for r in rows]


def embedding_rows(store: Store) -> dict[str, list[tuple]]:
    """The rows each LanceDB table must hold: (key, text, payload). Every row in memory: for checks and benches
    on small homes; the embedding stage itself syncs by difference, in batches (``sync_embeddings``)."""
    out = {}
    with store.connect() as con:
        for name, sql in SOURCES.items():
            cursor = con.execute(sql)
            out[name] = _payload_rows(cursor, cursor.fetchall())
    return out


SYNC_BATCH_ROWS = 20_000
"""Rows fetched from DuckDB and written to LanceDB at a time by the embedding stage."""
LEDGER_META = "vector_rows"
"""pathrag_meta key prefix ('vector_rows:entities', ...): JSON {table_id, rows, embedder} of the LanceDB table the
ledger rows of ``vector_rows`` describe, as of their last update."""
FINGERPRINT_SQL = "hash(t)::VARCHAR"
"""A row's fingerprint: DuckDB's 64-bit hash of the whole row (key, embedded text, payload columns). It was the md5
of the row cast to text, which made the plan of a one-file edit at 100 MB cost ~1 s (md5 of every chunk's text and
every relation's row, issue 23); hashing the row is 4-7x faster. A change of row that keeps its hash is a 2^-64
chance. DuckDB does not promise ``hash`` stays the same across its versions: if an upgrade changes it, every
fingerprint differs once and the next sync sends every row again (the vector store re-embeds none whose text is
unchanged), then the ledger holds the new values."""
FINGERPRINT_META = "vector_rows_fingerprint"
"""pathrag_meta key naming the fingerprint the ledger holds ('hash'); a ledger without it holds md5 fingerprints
and is converted once, exactly (``_convert_ledger``)."""
_FINGERPRINTED = "SELECT t.*, " + FINGERPRINT_SQL + " AS fingerprint FROM ({sql}) t"
_MD5_FINGERPRINTED = "SELECT t.key, md5(CAST(t AS VARCHAR)) AS md5, " + FINGERPRINT_SQL + " AS fingerprint FROM ({sql}) t"


def _convert_ledger(con: duckdb.DuckDBPyConnection) -> None:
    """A ledger written with md5 fingerprints gets hash fingerprints for the rows that still match what it
    recorded (so they are not sent again); a row that changed since keeps its md5, matches nothing, and is sent."""
    if get_meta(con, FINGERPRINT_META) == "hash":
        return
    with transaction(con):
        for name, sql in SOURCES.items():
            con.execute(
                f"""UPDATE vector_rows v SET fingerprint = n.fingerprint FROM ({_MD5_FINGERPRINTED.format(sql=sql)}) n
                    WHERE v.table_name = ? AND v.key = n.key AND v.fingerprint = n.md5""", [name])
        set_meta(con, FINGERPRINT_META, "hash")


def sync_embeddings(store: Store, vectors: VectorStore, embedder: Embedder,
                    tables: tuple[str, ...] = ("entities", "relations", "chunks"),
                    batch_rows: int = SYNC_BATCH_ROWS) -> EmbeddingReport:
    """Make each LanceDB table hold exactly its DuckDB rows, sending only what changed since the last sync."""
    stats = {name: _sync_table(store, vectors, embedder, name, batch_rows) for name in tables}
    return EmbeddingReport(embedder.identity, embedder.dim, stats)


def _ledger_state(vectors: VectorStore, name: str, embedder: Embedder) -> dict | None:
    identity = vectors.identity(name)
    return None if identity is None else {"table_id": identity[0], "rows": identity[1], "embedder": embedder.identity}


def _plan(store: Store, vectors: VectorStore, embedder: Embedder, name: str) -> tuple[list[str], list[str], int, bool]:
    """(keys to send, keys to delete, current rows, ledger trusted) for one table."""
    meta_key = f"{LEDGER_META}:{name}"
    state = _ledger_state(vectors, name, embedder)
    current = _FINGERPRINTED.format(sql=SOURCES[name])
    with store.connect() as con:
        _convert_ledger(con)
        stored = get_meta(con, meta_key)
        trusted = state is not None and stored is not None and json.loads(stored) == state
        rows = con.execute(f"SELECT count(*) FROM ({SOURCES[name]})").fetchall()[0][0]
        if trusted:
            send = [k for (k,) in con.execute(
                f"""SELECT n.key FROM ({current}) n
                    LEFT JOIN vector_rows v ON v.table_name = ? AND v.key = n.key
                    WHERE v.fingerprint IS DISTINCT FROM n.fingerprint ORDER BY n.key""", [name]).fetchall()]
            gone = [k for (k,) in con.execute(
                f"""SELECT key FROM vector_rows WHERE table_name = ?
                    AND key NOT IN (SELECT key FROM ({SOURCES[name]})) ORDER BY key""", [name]).fetchall()]
            return send, gone, rows, True
        with transaction(con):
            con.execute("DELETE FROM vector_rows WHERE table_name = ?", [name])
            con.execute("DELETE FROM pathrag_meta WHERE key = ?", [meta_key])
        send = [k for (k,) in con.execute(f"SELECT key FROM ({SOURCES[name]}) ORDER BY key").fetchall()]
        con.register("_vs_lance_keys", vectors.key_table(name))
        try:
            gone = [k for (k,) in con.execute(
                f"SELECT key FROM _vs_lance_keys WHERE key NOT IN (SELECT key FROM ({SOURCES[name]})) ORDER BY key"
            ).fetchall()]
        finally:
            con.unregister("_vs_lance_keys")
    return send, gone, rows, False


def _remember(store: Store, vectors: VectorStore, embedder: Embedder, name: str, *,
              written: list[tuple[str, str]] = (), deleted: list[str] = ()) -> None:
    """Record rows now in LanceDB (key, fingerprint) and keys deleted from it, with the table's new identity."""
    with store.connect() as con, transaction(con):
        if written:
            con.register("_vs_written", pa.table({"table_name": pa.array([name] * len(written), pa.string()),
                                                  "key": pa.array([k for k, _ in written], pa.string()),
                                                  "fingerprint": pa.array([f for _, f in written], pa.string())}))
            try:
                con.execute("INSERT OR REPLACE INTO vector_rows SELECT table_name, key, fingerprint FROM _vs_written")
            finally:
                con.unregister("_vs_written")
        if deleted:
            con.execute("DELETE FROM vector_rows WHERE table_name = ? AND key IN (SELECT unnest(?::VARCHAR[]))",
                        [name, list(deleted)])
        state = _ledger_state(vectors, name, embedder)
        if state is not None:
            set_meta(con, f"{LEDGER_META}:{name}", json.dumps(state, sort_keys=True))


def _sync_table(store: Store, vectors: VectorStore, embedder: Embedder, name: str, batch_rows: int) -> SyncStats:
    send, gone, rows, trusted = _plan(store, vectors, embedder, name)
    # Sending every row (an untrusted ledger): what LanceDB holds is read once, not looked up batch by batch. A
    # trusted ledger sends the changes only, looked up by key.
    known = None if trusted or len(send) <= batch_rows else vectors.stored_state(name)
    embedded = unchanged = payload_updated = failed = deleted = 0
    errors: list[str] = []
    for start in range(0, len(send), batch_rows):
        keys = send[start:start + batch_rows]
        with store.connect() as con:
            cursor = con.execute(f"{_FINGERPRINTED.format(sql=SOURCES[name])} WHERE t.key IN (SELECT unnest(?::VARCHAR[]))",
                                 [keys])
            fetched = cursor.fetchall()
            batch = _payload_rows(cursor, fetched, extra=1)
        result = vectors.upsert(name, batch, embedder, known=known)
        embedded += result.embedded
        unchanged += result.unchanged
        payload_updated += result.payload_updated
        failed += result.failed
        errors.extend(result.errors)
        if not result.failed:   # a batch with failures is sent whole again next run (its rows are not recorded)
            _remember(store, vectors, embedder, name, written=[(r[0], r[-1]) for r in fetched])
        del fetched, batch
    if gone:
        deleted = vectors.delete(name, gone)
        _remember(store, vectors, embedder, name, deleted=gone)
    elif not send:
        _remember(store, vectors, embedder, name)
    return SyncStats(embedded=embedded, unchanged=rows - len(send) + unchanged, deleted=deleted,
                     total=vectors.count(name), payload_updated=payload_updated, failed=failed,
                     errors=tuple(errors[:5]))


# ---- the synced state --------------------------------------------------------------------------------

SYNCED_STATE_META = "embeddings_synced"
"""pathrag_meta key: ``synced_state`` of the tables when the embedding stage last ended with LanceDB holding
exactly their rows (nothing failed) and no alias left to add (``new_alias_candidates`` is zero after a pass that
re-merged entities). The stage deletes it before it touches LanceDB, so a stage that crashes or fails
part-way leaves none."""


def synced_state(con: duckdb.DuckDBPyConnection, *, embedder: str, alias_threshold: float | None) -> str:
    """A fingerprint of everything the embedding stage reads: every column of the rows each LanceDB table must
    hold (``SOURCES``, the same SQL ``embedding_rows`` runs), the alias table, the embedder identity and the
    alias setting. Equal fingerprints: the stage would embed nothing, delete nothing and find no new alias.
    Per table: the row count and the XOR of each row's fingerprint (``FINGERPRINT_SQL``, what ``vector_rows``
    records), so :func:`ledger_synced_state` can compute the same value from the ledger alone."""
    return _state(con, embedder, alias_threshold, {
        name: f"SELECT count(*), coalesce(bit_xor(({FINGERPRINT_SQL})::UBIGINT), 0)::VARCHAR FROM ({sql}) t"
        for name, sql in SOURCES.items()})


def ledger_synced_state(con: duckdb.DuckDBPyConnection, *, embedder: str, alias_threshold: float | None) -> str:
    """:func:`synced_state` computed from the ``vector_rows`` ledger instead of the tables' rows (one pass over
    every row saved at the end of each run, issue 23). Equal to it whenever the ledger holds exactly the
    fingerprints of the current rows: right after a sync that sent every changed row without failure, the only
    time it is called (``remember_synced_state``). Were it ever wrong, the next no-op check, computed from the
    tables, would differ and run the stage again: never a skipped change."""
    return _state(con, embedder, alias_threshold, {
        name: ("SELECT count(*), coalesce(bit_xor(TRY_CAST(fingerprint AS UBIGINT)), 0)::VARCHAR FROM vector_rows "
               f"WHERE table_name = '{name}'") for name in SOURCES})


def _state(con: duckdb.DuckDBPyConnection, embedder: str, alias_threshold: float | None,
           digests: dict[str, str]) -> str:
    state: dict[str, object] = {"embedder": embedder, "alias_embedding_threshold": alias_threshold,
                                "alias_detection": DETECTION_VERSION}
    # XOR of the rows' 128-bit md5: order-free, so no sort of the whole table (keys make rows distinct)
    digests = {**digests, "entity_aliases": (f"SELECT count(*), coalesce(bit_xor(md5_number(md5(CAST(t AS VARCHAR)))), "
                                             f"0)::VARCHAR FROM ({ALIAS_SQL}) t")}
    for name, sql in digests.items():
        rows, digest = con.execute(sql).fetchall()[0]
        state[name] = [rows, digest]
    return json.dumps(state, sort_keys=True)


def stored_synced_state(con: duckdb.DuckDBPyConnection) -> str | None:
    return get_meta(con, SYNCED_STATE_META)


def forget_synced_state(store: Store) -> None:
    """Called before LanceDB is touched: until the stage ends cleanly, nothing vouches for it."""
    with store.connect() as con:
        if get_meta(con, SYNCED_STATE_META) is not None:
            con.execute("DELETE FROM pathrag_meta WHERE key = ?", [SYNCED_STATE_META])


def remember_synced_state(store: Store, *, embedder: str, alias_threshold: float | None) -> None:
    """Called after a sync that failed nowhere and left no alias to add: the ledger then describes the rows."""
    with store.connect() as con:
        set_meta(con, SYNCED_STATE_META, ledger_synced_state(con, embedder=embedder, alias_threshold=alias_threshold))
