"""Embeddings stage: keep the LanceDB tables `entities`, `relations` and `chunks` in line with DuckDB.

What gets embedded: an entity's name and description; a relation's keywords, its two endpoint names and its
description (LightRAG's choice); a chunk's document title and text, the passage exactly as BM25 indexes it
(``store.PASSAGE_TEXT_SQL``), so dense and lexical search rank the same text.

Sync by difference (issue 23): the DuckDB table ``vector_rows`` remembers, per LanceDB table and key, a fingerprint
(``FINGERPRINT_SQL``) of the row the stage last wrote there. The writers of embedded rows mark the keys whose rows
they change stale there (storage/vector_ledger.py), so a sync sends the keys the ledger lacks or holds as stale
(and the relations of changed entities whose fingerprint differs: their text holds the entities' names), fetched
and written in batches of ``SYNC_BATCH_ROWS``, and deletes the keys no longer present, without fingerprinting the
other rows: an edit costs what it changed and memory holds one batch, whatever the corpus. A sync that finds
nothing marked compares every row's fingerprint, as does the first sync of a ledger older than the marks
(``EXACT_META``). The ledger is
trusted only while the LanceDB table is the one it was written for (same table id, row count and embedder); otherwise
(a first build, a re-embed into a fresh folder, a crash between a LanceDB write and the ledger update, a table
deleted by hand) every row is sent again, still in batches: the vector store compares a hash of each text with what
it holds, so only rows whose embedded text changed are re-embedded, and keys LanceDB holds that DuckDB does not are
deleted. A home whose chunk vectors embedded the chunk text alone (before the title was added) re-embeds its chunks,
and nothing else, on its next index run.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from pathrag_pipeline.index.aliases import DETECTION_VERSION
from pathrag_pipeline.llm.embedding import Embedder
from pathrag_pipeline.storage import vector_ledger
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

    def then(self, later: EmbeddingReport) -> EmbeddingReport:
        """This sync followed by ``later`` in the same run (the re-sync after aliases re-merged entities), as one
        report: the work of both added up; unchanged, only the rows neither touched (``later`` alone counted what
        this one had just embedded as unchanged, so a first build said "11 embedded, 6913 unchanged"); failed
        and the row count as ``later`` left them."""
        tables = {}
        for name in dict.fromkeys([*self.tables, *later.tables]):
            a, b = self.tables.get(name), later.tables.get(name)
            if a is None or b is None:
                tables[name] = a or b
                continue
            tables[name] = SyncStats(embedded=a.embedded + b.embedded, unchanged=min(a.unchanged, b.unchanged),
                                     deleted=a.deleted + b.deleted, total=b.total,
                                     payload_updated=a.payload_updated + b.payload_updated, failed=b.failed,
                                     errors=(a.errors + b.errors)[:5])
        return EmbeddingReport(later.embedder, later.dim, tables)


def _payload(columns: list[str], rows: list[tuple], extra: int = 0) -> list[tuple]:
    """(key, text, payload dict) of rows (key, text, payload columns..., ``extra`` trailing columns) whose
    columns are named ``columns``."""
    names = columns[2:len(columns) - extra]
    return [(r[0], r[1], dict(zip(names, r[2:2 + len(names)]))) for r in rows]


def embedding_rows(store: Store) -> dict[str, list[tuple]]:
    """The rows each LanceDB table must hold: (key, text, payload). Every row in memory: for tests and benches on
    small homes; the embedding stage syncs by difference, in batches (``sync_embeddings``), and the index run's key
    check compares keys alone (``vector_key_drift``)."""
    out = {}
    with store.connect() as con:
        for name, sql in SOURCES.items():
            cursor = con.execute(sql)
            out[name] = _payload([d[0] for d in cursor.description], cursor.fetchall())
    return out


def vector_key_drift(store: Store, vectors: "VectorStore") -> dict[str, tuple[int, int]]:
    """Per LanceDB table, (keys DuckDB has that LanceDB lacks, keys LanceDB holds that DuckDB has not): LanceDB's key
    column compared with the source's keys inside DuckDB (an Arrow table queried in place), no text read. Every
    index run's check (``assets/graph.py``): reading every row as ``embedding_rows`` does cost sqlite3-doc's home
    0.23 s a run, and grows with the text of the corpus."""
    out = {}
    with store.connect(read_only=True) as con:
        for name, sql in SOURCES.items():
            con.register("_vs_lance_keys", vectors.key_table(name))
            try:
                out[name] = con.execute(
                    f"""SELECT (SELECT count(*) FROM ({sql}) s WHERE s.key NOT IN (SELECT key FROM _vs_lance_keys)),
                               (SELECT count(*) FROM _vs_lance_keys l WHERE l.key NOT IN (SELECT key FROM ({sql})))"""
                ).fetchall()[0]
            finally:
                con.unregister("_vs_lance_keys")
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
EXACT_META = "vector_rows_exact"
"""pathrag_meta key, set ('1') at the end of a sync: from then on no ledger row outlives a change of its row (the
writers mark changed keys stale, storage/vector_ledger.py, and a batch that fails marks its keys stale), so a
trusted plan sends the keys the ledger lacks or holds as stale instead of fingerprinting every row. A ledger
written before that contract (no key) is planned once by fingerprints, which makes it exact."""
RENAMED_ENDPOINTS_SQL = {"relations": """
    SELECT relation_key FROM relations
    WHERE src_key IN (SELECT k FROM _vs_renamed) OR tgt_key IN (SELECT k FROM _vs_renamed)
"""}
"""Per table, the keys whose embedded text holds another table's rows: a relation's holds its endpoints' names
(``RELATION_SQL``). ``_vs_renamed`` holds the entity keys whose ledger row is missing or stale (changed since the
last sync); these relations have their fingerprints compared, the others are trusted."""
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
                    batch_rows: int = SYNC_BATCH_ROWS, *, forget_synced: bool = False,
                    release_while_embedding: bool = False) -> EmbeddingReport:
    """Make each LanceDB table hold exactly its DuckDB rows, sending only what changed since the last sync.

    A sync whose tables each send at most ``batch_rows`` rows (an edit) plans every table and fetches their rows
    on one DuckDB connection, and records what it wrote on one more, after LanceDB holds every table's rows
    (issue 23: an edit opened and closed the file nine times here, ~0.05 s each). A crash between the two leaves
    the rows it wrote unrecorded: the next run sends them again (every row of a table whose LanceDB row count
    or id no longer matches its ledger), and the vector store re-embeds none whose text it already holds.
    Larger syncs fetch and record batch by batch. ``forget_synced``: delete the stage's no-op record (``forget_synced_state``) on the
    plan's connection, before LanceDB is touched. ``release_while_embedding``: a caller holding the file
    (``Store.holding``) lets go of it while the tables are embedded and written (an embedding model or endpoint
    may take a while), and holds it again for the ledger."""
    plans = _plan_all(store, vectors, embedder, tables, batch_rows, forget_synced=forget_synced)
    ledger: list[tuple[str, list[tuple[str, str]], list[str]]] = []   # (table, written, deleted) to record
    # nothing to embed (a delete's plan that only removes rows, say): the model is not called, so the file is kept
    releasing = release_while_embedding and any(plan.send for plan in plans.values())
    with store.released() if releasing else contextlib.nullcontext():
        stats = {name: _sync_table(store, vectors, embedder, name, batch_rows, plans[name], ledger)
                 for name in tables}
    if ledger:
        with store.connect() as con, transaction(con):
            for name, written, deleted in ledger:
                _remember(con, vectors, embedder, name, written=written, deleted=deleted)
            if set(tables) >= set(SOURCES):   # every table planned: its ledger now keeps the writers' contract
                set_meta(con, EXACT_META, "1")
    return EmbeddingReport(embedder.identity, _stored_dim(vectors, embedder, tables) or embedder.dim, stats)


def _stored_dim(vectors: VectorStore, embedder: Embedder, tables: tuple[str, ...]) -> int | None:
    """The dimension the tables record for this embedder, so a report costs no probe request: a remote embedder
    learns its dimension by embedding a text, which built its client (importing openai, about 1 s in a fresh
    process) for a delete that embedded nothing (issue 64: 3.1 s of an 8 s one-file delete)."""
    for name in tables:
        meta = vectors.meta(name)
        if meta is not None and meta.embedder == embedder.identity and meta.dim:
            return meta.dim
    return None


def _ledger_state(vectors: VectorStore, name: str, embedder: Embedder) -> dict | None:
    identity = vectors.identity(name)
    return None if identity is None else {"table_id": identity[0], "rows": identity[1], "embedder": embedder.identity}


@dataclass
class _Plan:
    send: list[str]                 # keys whose row changed (or every key, untrusted)
    gone: list[str]                 # keys LanceDB holds that the table no longer has
    rows: int                       # rows the table has
    trusted: bool                   # whether the ledger described the LanceDB table
    fetched: list[tuple] | None     # the rows of ``send`` with their fingerprints, when they fit one batch
    columns: list[str] | None       # the cursor's column names for ``fetched``


def _plan_all(store: Store, vectors: VectorStore, embedder: Embedder, tables: tuple[str, ...], batch_rows: int,
              *, forget_synced: bool) -> dict[str, _Plan]:
    states = {name: _ledger_state(vectors, name, embedder) for name in tables}
    with store.connect() as con:
        if forget_synced:
            _forget_synced(con)
        _convert_ledger(con)
        exact = get_meta(con, EXACT_META) == "1"
        plans = {name: _plan(con, vectors, name, states[name], batch_rows, exact=exact) for name in tables}
        if exact and not any(plan.send or plan.gone for plan in plans.values()):
            # Nothing changed by the writers' account. A run with nothing to do is rare (`pathrag index` skips
            # it when the tables' state equals the last sync's, index/pending_work.py): it checks every
            # fingerprint, so a row changed behind the writers' back (an UPDATE by hand) is sent all the same.
            plans = {name: _plan(con, vectors, name, states[name], batch_rows, exact=False) for name in tables}
        return plans


def _plan(con: duckdb.DuckDBPyConnection, vectors: VectorStore, name: str, state: dict | None,
          batch_rows: int, *, exact: bool = False) -> _Plan:
    """What to send and delete for one table; a trusted plan of at most ``batch_rows`` rows fetches them too.
    ``exact``: the ledger keeps the writers' contract (``EXACT_META``): send the keys it lacks or holds as stale,
    and the relations of changed entities whose fingerprint differs, without fingerprinting the other rows."""
    meta_key = f"{LEDGER_META}:{name}"
    current = _FINGERPRINTED.format(sql=SOURCES[name])
    stored = get_meta(con, meta_key)
    trusted = state is not None and stored is not None and json.loads(stored) == state
    rows = con.execute(f"SELECT count(*) FROM ({SOURCES[name]})").fetchall()[0][0]
    if trusted:
        if exact:
            send, gone = _changes(con, name)
        else:
            send = [k for (k,) in con.execute(
                f"""SELECT n.key FROM ({current}) n
                    LEFT JOIN vector_rows v ON v.table_name = ? AND v.key = n.key
                    WHERE v.fingerprint IS DISTINCT FROM n.fingerprint ORDER BY n.key""", [name]).fetchall()]
            gone = [k for (k,) in con.execute(
                f"""SELECT key FROM vector_rows WHERE table_name = ?
                    AND key NOT IN (SELECT key FROM ({SOURCES[name]})) ORDER BY key""", [name]).fetchall()]
        fetched = columns = None
        if 0 < len(send) <= batch_rows:
            fetched, columns = _fetch(con, name, send)
        return _Plan(send, gone, rows, True, fetched, columns)
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
    return _Plan(send, gone, rows, False, None, None)


def _changes(con: duckdb.DuckDBPyConnection, name: str) -> tuple[list[str], list[str]]:
    """(send, gone) of a table by the writers' account (storage/vector_ledger.py), both sorted: send the keys the
    ledger lacks or holds as stale, and the rows holding a changed row of another table (``RENAMED_ENDPOINTS_SQL``)
    whose fingerprint differs; delete the keys it holds that the table has not. One join of the table's keys with
    its ledger rows; only those other rows are fingerprinted."""
    send, gone = set(), []
    for key, held in con.execute(
            f"""SELECT coalesce(n.key, v.key), n.key IS NULL
                FROM (SELECT key FROM ({SOURCES[name]})) n
                FULL JOIN (SELECT key, fingerprint FROM vector_rows WHERE table_name = ?) v ON v.key = n.key
                WHERE n.key IS NULL OR v.key IS NULL OR v.fingerprint = '{vector_ledger.STALE}'""", [name]).fetchall():
        if held:
            gone.append(key)
        else:
            send.add(key)
    if name in RENAMED_ENDPOINTS_SQL:
        con.execute(f"""CREATE OR REPLACE TEMP TABLE _vs_renamed AS
                        SELECT n.key AS k FROM (SELECT key FROM ({ENTITY_SQL})) n
                        LEFT JOIN vector_rows v ON v.table_name = 'entities' AND v.key = n.key
                        WHERE v.key IS NULL OR v.fingerprint = '{vector_ledger.STALE}'""")
        try:
            if con.execute("SELECT count(*) FROM _vs_renamed").fetchall()[0][0]:
                send.update(k for (k,) in con.execute(
                    f"""SELECT n.key FROM ({_FINGERPRINTED.format(sql=SOURCES[name])}) n
                        JOIN vector_rows v ON v.table_name = ? AND v.key = n.key
                        WHERE n.key IN ({RENAMED_ENDPOINTS_SQL[name]}) AND v.fingerprint <> n.fingerprint""",
                    [name]).fetchall())
        finally:
            con.execute("DROP TABLE IF EXISTS _vs_renamed")
    return sorted(send), sorted(gone)


def _fetch(con: duckdb.DuckDBPyConnection, name: str, keys: list[str]) -> tuple[list[tuple], list[str]]:
    """The rows of ``keys`` (key, text, payload columns..., fingerprint) and their column names."""
    cursor = con.execute(f"{_FINGERPRINTED.format(sql=SOURCES[name])} WHERE t.key IN (SELECT unnest(?::VARCHAR[]))",
                         [keys])
    fetched = cursor.fetchall()
    return fetched, [d[0] for d in cursor.description]


def _remember(con: duckdb.DuckDBPyConnection, vectors: VectorStore, embedder: Embedder, name: str, *,
              written: list[tuple[str, str]] = (), deleted: list[str] = ()) -> None:
    """Record rows now in LanceDB (key, fingerprint) and keys deleted from it, with the table's new identity
    (inside the caller's transaction)."""
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


def _sync_table(store: Store, vectors: VectorStore, embedder: Embedder, name: str, batch_rows: int, plan: _Plan,
                ledger: list) -> SyncStats:
    """Send one table's changed rows and delete its gone keys. A plan that fetched its rows leaves what to record
    in ``ledger`` (recorded by the caller once every table is written); larger sends record batch by batch."""
    send = plan.send
    # Sending every row (an untrusted ledger): what LanceDB holds is read once, not looked up batch by batch. A
    # trusted ledger sends the changes only, looked up by key.
    known = None if plan.trusted or len(send) <= batch_rows else vectors.stored_state(name)
    embedded = unchanged = payload_updated = failed = deleted = 0
    errors: list[str] = []
    written: list[tuple[str, str]] = []
    for start in range(0, len(send), batch_rows):
        if plan.fetched is not None:
            fetched, columns = plan.fetched, plan.columns
        else:
            with store.connect() as con:
                fetched, columns = _fetch(con, name, send[start:start + batch_rows])
        result = vectors.upsert(name, _payload(columns, fetched, extra=1), embedder, known=known)
        embedded += result.embedded
        unchanged += result.unchanged
        payload_updated += result.payload_updated
        failed += result.failed
        errors.extend(result.errors)
        # A batch with failures is sent whole again next run: its keys are recorded stale (kept in the ledger, so
        # a key among them deleted from DuckDB meanwhile has its vector deleted, were it written).
        batch = [(r[0], vector_ledger.STALE if result.failed else r[-1]) for r in fetched]
        if plan.fetched is not None:
            written = batch
        else:
            with store.connect() as con, transaction(con):
                _remember(con, vectors, embedder, name, written=batch)
        del fetched
    plan.fetched = None
    if plan.gone:
        deleted = vectors.delete(name, plan.gone)
    ledger.append((name, written, plan.gone))   # also records the table's identity after its writes
    return SyncStats(embedded=embedded, unchanged=plan.rows - len(send) + unchanged, deleted=deleted,
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
        _forget_synced(con)


def _forget_synced(con: duckdb.DuckDBPyConnection) -> None:
    if get_meta(con, SYNCED_STATE_META) is not None:
        con.execute("DELETE FROM pathrag_meta WHERE key = ?", [SYNCED_STATE_META])


UNEMBEDDED_META = "embeddings_unembedded"
"""pathrag_meta key: JSON {table: rows} of the rows the last embedding stage left without vectors (their batch
failed after its retries; the next index run embeds them); absent when it left none. `pathrag status` reports it
and `pathrag ask` says its answer comes from the rest (issue 61: partial is partial)."""


def record_unembedded(store: Store, report: EmbeddingReport) -> None:
    """Remember which rows this stage left without vectors (or that it left none)."""
    left = {name: stats.failed for name, stats in report.tables.items() if stats.failed}
    with store.connect() as con:
        if left:
            set_meta(con, UNEMBEDDED_META, json.dumps(left, sort_keys=True))
        elif get_meta(con, UNEMBEDDED_META) is not None:
            con.execute("DELETE FROM pathrag_meta WHERE key = ?", [UNEMBEDDED_META])


def unembedded_rows(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """{table: rows} the last embedding stage left without vectors; empty when it left none."""
    recorded = get_meta(con, UNEMBEDDED_META)
    return json.loads(recorded) if recorded else {}


def unembedded_note(left: dict[str, int]) -> str:
    """One line saying what an answer cannot see; empty when nothing is missing."""
    if not left:
        return ""
    rows = ", ".join(f"{n} {table}" for table, n in sorted(left.items()))
    return (f"partial index: {rows} row(s) have no vectors (an embedding batch failed in the last index run), so "
            "vector search cannot find them; `pathrag index` embeds them")


def remember_synced_state(store: Store, *, embedder: str, alias_threshold: float | None) -> None:
    """Called after a sync that failed nowhere and left no alias to add: the ledger then describes the rows."""
    with store.connect() as con:
        set_meta(con, SYNCED_STATE_META, ledger_synced_state(con, embedder=embedder, alias_threshold=alias_threshold))
