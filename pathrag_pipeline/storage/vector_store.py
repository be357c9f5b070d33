"""The LanceDB vector store: embedded entities, relations and chunks, kept in sync incrementally.

Each table holds one row per key: the embedded ``text``, its ``text_hash``, the ``vector`` and any
payload columns the caller supplies (entity name, document id, ...). ``sync`` re-embeds only rows whose
text is new or changed and deletes keys that are gone, so re-indexing after a small edit costs a few
embedding calls, not thousands.

The embedding model's identity and dimension are written into each table's schema metadata: vectors of
two models are not comparable, so mixing them raises ``EmbeddingMismatchError`` instead of returning
silently wrong neighbours. Writes are serialised per store path within the process, because concurrent
``merge_insert`` calls on one LanceDB table can duplicate keys; across processes the caller (the
Dagster run queue) must run one writer at a time.
"""

from __future__ import annotations

import contextlib
import functools

import hashlib
import math
import shutil
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import numpy as np
import pyarrow as pa

from pathrag_pipeline.llm.embedding import Embedder, EmbeddingError, l2_normalise
from pathrag_pipeline.storage.vector_location import VectorLocation

if TYPE_CHECKING:
    from pathrag_pipeline.config import Settings

META_EMBEDDER = b"pathrag.embedder"
META_DIM = b"pathrag.dim"
META_TABLE_ID = b"pathrag.table_id"  # new for every created table, so a dropped-and-rebuilt table is never confused with its predecessor
RESERVED_COLUMNS = frozenset({"key", "text", "text_hash", "vector", "_distance", "_rowid", "_score"})
# Every write (each embedding batch, each delete) makes a new table version, and LanceDB keeps the files of every
# old version until they are cleaned up: without cleanup the folder grows with the number of writes (a 100k-record
# file left 186 versions of `relations`, 7.5 GB), not with the data. After each sync that wrote anything, versions
# older than this are removed. A reader loads a table version whole (``_Snapshot``) in well under this, so none
# is cut off; the last few versions of the run stay until the next sync that writes.
VERSION_RETENTION = timedelta(minutes=1)
# How long tables opened for reading may be reused across queries (``pinned(keep_in=...)``) before they are opened
# again: a tenth of VERSION_RETENTION, so a version a kept table reads is never one a writer's cleanup removes.
PINNED_FOR_S = VERSION_RETENTION.total_seconds() / 10
# Tidying (``optimize``) compacts too, and compaction rewrites every fragment under LanceDB's target size (a million
# rows): the whole table, however small the change (the relations of a 10 MB corpus are 220 MB of vectors; an edit
# of one file rewrote them all, a cost that grows with the corpus: issue 23). So a sync tidies a table only when
# what accumulated since it was last compacted is worth a rewrite (``_needs_tidy``): TIDY_FRAGMENTS fragments
# written since (each add or upsert writes one per batch), dead rows (deleted or replaced, still on disk) reaching
# TIDY_DEAD_SHARE of the rows on disk, or TIDY_VERSIONS versions old enough to remove. The dead-row share bounds
# the disk at 1 / (1 - share) of the live rows and makes the rewrite amortised: a table of T rows is rewritten
# after at least share x T rows changed, about 1 / share rows rewritten per row changed, whatever the corpus.
# Counting versions alone (the rule before) fired again on the run after a compaction, because the versions younger
# than VERSION_RETENTION survive it: a one-file edit just after a build rewrote every table.
TIDY_FRAGMENTS = 16
TIDY_DEAD_SHARE = 0.2
TIDY_VERSIONS = 64
LANCE_FRAGMENT_ROWS = 1024 * 1024  # LanceDB's compaction target: a compacted table has one fragment per this many rows
DELETE_BATCH = 2000  # keys per ``key IN (...)`` filter, to keep predicates a reasonable size

Payload = Mapping[str, Any]
Rows = Union[Mapping[str, str], Iterable[Union[tuple[str, str], tuple[str, str, Payload]]]]


class EmbeddingMismatchError(RuntimeError):
    """A table holds vectors of another embedding model or dimension than the one configured."""


@dataclass(frozen=True)
class SyncStats:
    """What a sync/upsert did: rows embedded (new or changed text), rows whose payload alone was
    rewritten (vector reused), rows left alone, rows deleted, and rows in the table afterwards."""

    embedded: int
    unchanged: int
    deleted: int
    total: int
    payload_updated: int = 0
    failed: int = 0                                   # rows whose batch the embedder could not embed
    errors: tuple[str, ...] = ()                      # the first few EmbeddingError messages


@dataclass(frozen=True)
class Hit:
    key: str
    similarity: float  # cosine similarity in [-1, 1]
    text: str
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TableMeta:
    table: str
    embedder: str
    dim: int
    rows: int


@dataclass(frozen=True)
class _Row:
    key: str
    text: str
    text_hash: str
    payload: dict[str, Any]


class _PinnedTable:
    """A table opened inside ``VectorStore.pinned()``: it reads the version it was opened at (LanceDB's tables do not
    look for newer versions unless asked), so its schema, version and row count are asked of LanceDB once (each
    ~1.3 ms, five to ten times a query) and everything else goes to the table itself."""

    def __init__(self, table: Any) -> None:
        self._table = table
        self._rows: int | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)

    @functools.cached_property
    def schema(self) -> pa.Schema:
        return self._table.schema

    @functools.cached_property
    def version(self) -> int:
        return self._table.version

    def count_rows(self, filter: str | None = None) -> int:
        if filter is not None:
            return self._table.count_rows(filter)
        if self._rows is None:
            self._rows = self._table.count_rows()
        return self._rows


class _Snapshot:
    """A table version's rows held in memory for matrix-product search."""

    def __init__(self, version: tuple[bytes, int], columns: dict[str, list], matrix: np.ndarray) -> None:
        self.version = version
        self.matrix = matrix
        self._columns = columns   # column name -> its values, row by row (the vector and text hash left out)
        self._payload = [n for n in columns if n not in RESERVED_COLUMNS]

    @property
    def keys(self) -> list[str]:
        return self._columns["key"]

    @functools.cached_property
    def row_of(self) -> dict[str, int]:
        return {key: i for i, key in enumerate(self._columns["key"])}

    def hit(self, i: int, similarity: float) -> Hit:
        c = self._columns
        return Hit(c["key"][i], similarity, c["text"][i], {n: c[n][i] for n in self._payload})


_PATH_LOCKS: dict[str, threading.RLock] = {}
_PATH_LOCKS_GUARD = threading.Lock()


def _lock_for(where: str) -> threading.RLock:
    with _PATH_LOCKS_GUARD:
        return _PATH_LOCKS.setdefault(where, threading.RLock())


def longest_first(texts: Iterable[str]) -> list[str]:
    """The distinct texts, longest first (equal lengths keep their order): the order the stage batches them in."""
    return sorted(dict.fromkeys(texts), key=len, reverse=True)


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def _width(data: Any) -> int:
    """The vector width of an Arrow table's fixed-size ``vector`` column (known even when it has no row)."""
    return int(data.schema.field("vector").type.list_size)


def _vector_matrix(data: Any) -> np.ndarray:
    """An Arrow table's ``vector`` column as one (rows, width) float32 array; the column's own width, not -1, so a
    table with no row (every batch of a run failed) reshapes too."""
    flat = data.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return np.ascontiguousarray(flat, dtype=np.float32).reshape(data.num_rows, _width(data))


SNAPSHOT_BATCH_ROWS = 2048
"""Rows read at a time into a snapshot's matrix (8 MiB of 1024-wide vectors)."""


def _rows_and_matrix(tbl: Any) -> tuple[dict[str, list], np.ndarray]:
    """A table's rows without their vectors and text hashes, as Python lists per column, and its vectors as one
    (rows, width) float32 matrix, read a batch at a time into that matrix. Reading the whole table first
    (``to_arrow``) held its vectors twice more while the matrix was made (Arrow's table, then the combined column):
    1.1 GiB at the peak for the 93k relations of python3-doc's home (1024-wide offline vectors, 362 MiB as a matrix).
    A batch's other columns are turned into lists at once, not kept as Arrow: a batch holds its vectors in the same
    allocation, which a kept column would keep alive. The same rows in the same order: the same matrix to the bit."""
    names = [name for name in tbl.schema.names if name not in ("vector", "text_hash")]
    columns: dict[str, list] = {name: [] for name in names}
    width = _width(tbl)
    expected = tbl.count_rows()
    matrix = np.empty((expected, width), dtype=np.float32)
    extra: list[np.ndarray] = []
    filled = 0
    for batch in tbl.search().select([*names, "vector"]).limit(None).to_batches(SNAPSHOT_BATCH_ROWS):
        vectors = batch.column("vector").flatten().to_numpy(zero_copy_only=False).reshape(batch.num_rows, width)
        if filled + len(vectors) <= expected:
            matrix[filled:filled + len(vectors)] = vectors
        else:   # more rows than counted (not expected of one version): kept all the same
            extra.append(np.array(vectors, dtype=np.float32))
        filled += len(vectors)
        for name in names:
            columns[name].extend(batch.column(name).to_pylist())
        del batch, vectors
    matrix = np.vstack([matrix, *extra]) if extra else matrix[:filled]
    return columns, matrix


def _table_version(tbl: Any) -> tuple[bytes, int]:
    """What identifies a table's rows: its id (a table made again gets a new one) and its LanceDB version."""
    return ((tbl.schema.metadata or {}).get(META_TABLE_ID, b""), tbl.version)


def _sql_list(keys: Sequence[str]) -> str:
    return ", ".join("'" + k.replace("'", "''") + "'" for k in keys)


def _arrow_type(value: Any) -> pa.DataType:
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int):
        return pa.int64()
    if isinstance(value, float):
        return pa.float64()
    if value is None or isinstance(value, str):
        return pa.utf8()
    raise TypeError(
        f"payload value {value!r} has type {type(value).__name__}; use str, int, float, bool or None"
    )


EMBED_BATCH_ROWS = 4096
"""Rows embedded and written to LanceDB at a time by ``sync``/``upsert``: memory holds one slice of vectors."""


class VectorStore:
    """Embedding tables in one LanceDB database: a folder (``Settings.lancedb_path``) or an object-store URI
    (``PATHRAG_LANCEDB_URI``; see ``vector_location``)."""

    def __init__(self, where: "str | Path | VectorLocation") -> None:
        self.location = VectorLocation.of(where)
        # a folder keeps its resolved path (messages, the leftover clean-up of `reset`); an object store has none
        self.path: Path | None = self.location.path if self.location.is_local else None
        self._db = self.location.connect()   # imports lancedb here, not at module level: about a second, and
        # `SyncStats` or `text_hash` users (the no-op check of `pathrag index`) never open a table
        self._lock = _lock_for(self.location.uri)
        self._snapshots: dict[str, _Snapshot] = {}
        self._rows_read: dict[str, tuple[bytes, int]] = {}   # table -> the version ``similarities`` read rows of
        self._pinned = threading.local()   # this thread's open tables while inside ``pinned()``

    @classmethod
    def for_settings(cls, settings: "Settings") -> "VectorStore":
        """The store PATHRAG_LANCEDB_URI names (default: the home's ``lancedb/`` folder)."""
        return cls(VectorLocation.for_settings(settings))

    def __repr__(self) -> str:
        return f"VectorStore({self.location.uri!r})"

    # ---- reading -------------------------------------------------------------------------------
    def tables(self) -> list[str]:
        return sorted(self._db.list_tables().tables)

    @contextlib.contextmanager
    def pinned(self, keep_in: dict | None = None) -> Iterator[None]:
        """Within this block, this thread opens each table once and keeps reading that version: the query
        service answers a batch of queued asks in one such block, where each ask alone would list the tables and
        open them about five times (a third of an offline ask's CPU in the service). Keep it to reads: a write
        in the block would not be seen by the block's reads. Nested blocks reuse the outer one.

        ``keep_in``: a dict that outlives the block (``Store.read_memo()``: the DuckDB read connection a query
        keeps for the next one, ``KEEP_READING_S``) where the opened tables are kept, so back-to-back queries open
        each table once, not once per query (~7 ms of a ~40 ms offline path query's own work). They read the
        version they opened, which suits that memo: a writer in another process writes its vectors, then the
        DuckDB file, which waits while this process keeps it open, so the tables and the DuckDB rows a query
        reads are of one state (opened afresh, a table could be newer than the rows). Kept tables are opened
        again after ``PINNED_FOR_S`` whatever happens, well inside ``VERSION_RETENTION``, so a writer's cleanup
        never removes a version a kept table still reads."""
        if getattr(self._pinned, "tables", None) is not None:
            yield
            return
        self._pinned.tables = self._kept_tables(keep_in) if keep_in is not None else {}
        try:
            yield
        finally:
            self._pinned.tables = None

    def _kept_tables(self, memo: dict) -> dict:
        key = ("vector_tables", self.location.uri)
        now = time.monotonic()
        kept = memo.get(key)
        if kept is None or now - kept[0] > PINNED_FOR_S:
            kept = memo[key] = (now, {})
        return kept[1]

    def _open(self, table: str) -> Any | None:
        pinned = getattr(self._pinned, "tables", None)
        if pinned is not None and table in pinned:
            return pinned[table]
        try:
            tbl = self._db.open_table(table)   # one call where listing the tables first was two
        except ValueError:   # LanceDB's "Table '...' was not found"; anything else about a listed table is raised
            if table in self._db.list_tables().tables:
                raise
            tbl = None
        if pinned is not None:
            pinned[table] = tbl = _PinnedTable(tbl) if tbl is not None else None
        return tbl

    def meta(self, table: str) -> TableMeta | None:
        """Model identity, dimension and row count of ``table``; None if it does not exist yet."""
        tbl = self._open(table)
        if tbl is None:
            return None
        md = tbl.schema.metadata or {}
        return TableMeta(
            table=table,
            embedder=md.get(META_EMBEDDER, b"unknown").decode(),
            dim=int(md.get(META_DIM, b"0")),
            rows=tbl.count_rows(),
        )

    def identity(self, table: str) -> tuple[str, int] | None:
        """(table id, rows) of ``table``, None without it. The id is new for every created table, so a table that
        was dropped, re-embedded or replaced by another folder's is never mistaken for the one a caller saw."""
        tbl = self._open(table)
        if tbl is None:
            return None
        return (tbl.schema.metadata or {}).get(META_TABLE_ID, b"").decode(), tbl.count_rows()

    def key_table(self, table: str) -> pa.Table:
        """The keys of ``table`` as one Arrow column ``key`` (empty without the table)."""
        tbl = self._open(table)
        if tbl is None:
            return pa.table({"key": pa.array([], pa.string())})
        return tbl.search().select(["key"]).limit(None).to_arrow()

    def count(self, table: str) -> int:
        tbl = self._open(table)
        return 0 if tbl is None else tbl.count_rows()

    def keys(self, table: str) -> set[str]:
        tbl = self._open(table)
        if tbl is None:
            return set()
        return set(tbl.search().select(["key"]).limit(None).to_arrow().column("key").to_pylist())

    def search(
        self,
        table: str,
        query: str | np.ndarray | Sequence[float],
        k: int = 10,
        embedder: Embedder | None = None,
        where: str | None = None,
    ) -> list[Hit]:
        """The ``k`` rows most similar to ``query`` (a text, embedded with ``embedder``, or a vector),
        best first, by exact cosine similarity. ``where`` is an optional SQL filter on payload columns
        (e.g. ``"document_id = 'd1'"``), run as a LanceDB scan (slower: tens to hundreds of ms at 20k
        rows); without it the search is a matrix product (see ``search_many``). An absent table has
        no hits."""
        if where is None:
            return self.search_many(table, [query] if isinstance(query, str) else np.asarray([query]), k, embedder)[0]
        tbl, vectors = self._query_vectors(table, [query] if isinstance(query, str) else np.asarray([query]), k, embedder)
        if tbl is None:
            return []
        result = (
            tbl.search(vectors[0], vector_column_name="vector")
            .distance_type("cosine")
            .where(where, prefilter=True)
            .limit(k)
            .to_arrow()
        )
        payload_cols = self._payload_columns(tbl.schema)
        columns = {name: result.column(name).to_pylist() for name in ["key", "text", "_distance", *payload_cols]}
        return [
            Hit(
                key=columns["key"][i],
                similarity=1.0 - float(columns["_distance"][i]),
                text=columns["text"][i],
                payload={name: columns[name][i] for name in payload_cols},
            )
            for i in range(result.num_rows)
        ]

    def search_many(
        self,
        table: str,
        queries: Sequence[str] | np.ndarray,
        k: int = 10,
        embedder: Embedder | None = None,
    ) -> list[list[Hit]]:
        """``search`` for several queries at once (texts, or a (n, dim) array), one hit list per query.

        Exact cosine over an in-memory copy of the table's vectors, reloaded only when the table
        version changes: a LanceDB flat scan costs ~80 ms per query at 20k x 1024 on 2 cores, a
        matrix product ~9 ms, and a batch of keyword queries shares one product.
        """
        snapshot, tops = self._top(table, queries, k, embedder)
        return [[snapshot.hit(i, sim) for i, sim in top] for top in tops]

    def nearest(
        self,
        table: str,
        queries: Sequence[str] | np.ndarray,
        k: int = 10,
        embedder: Embedder | None = None,
    ) -> list[list[tuple[str, float]]]:
        """``search_many``'s (key, cosine) pairs alone, without the rows' text and payload: what retrieval ranks
        by (a ``Hit`` per row cost about as much as the search itself)."""
        snapshot, tops = self._top(table, queries, k, embedder)
        if not tops:
            return []
        keys = snapshot.keys if snapshot is not None else []
        return [[(keys[i], sim) for i, sim in top] for top in tops]

    def _top(self, table: str, queries: Sequence[str] | np.ndarray, k: int,
             embedder: Embedder | None) -> tuple["_Snapshot | None", list[list[tuple[int, float]]]]:
        """Per query, the row indices and cosines of its ``k`` nearest rows, best first."""
        if len(queries) == 0:
            return None, []
        tbl, vectors = self._query_vectors(table, queries, k, embedder)
        if tbl is None:
            return None, [[] for _ in range(len(queries))]
        snapshot = self._snapshot(table, tbl)
        if snapshot.matrix.shape[0] == 0:
            return snapshot, [[] for _ in range(len(vectors))]
        sims = vectors @ snapshot.matrix.T
        k = min(k, sims.shape[1])
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        results = []
        for qi in range(len(vectors)):
            order = top[qi][np.argsort(-sims[qi, top[qi]], kind="stable")]
            results.append(list(zip(order.tolist(), sims[qi, order].tolist())))
        return snapshot, results

    def _query_vectors(
        self, table: str, queries: Sequence[str] | np.ndarray, k: int, embedder: Embedder | None
    ) -> tuple[Any | None, np.ndarray]:
        """Open ``table`` and turn queries into unit vectors, checking model and dimension."""
        if k < 1:
            raise ValueError(f"search k={k} must be at least 1")
        tbl = self._open(table)
        if tbl is None:
            return None, np.zeros((0, 0), dtype=np.float32)
        stored = self._stored_meta(tbl)
        if len(queries) and all(isinstance(q, str) for q in queries):
            if embedder is None:
                raise ValueError(f"searching {table!r} by text needs the embedder that built it ({stored[0]})")
            self._check_identity(table, stored, embedder)
            vectors = embedder.embed(list(queries))
        else:
            vectors = l2_normalise(np.asarray(queries, dtype=np.float32).reshape(len(queries), -1))
        if vectors.shape[1] != stored[1]:
            raise EmbeddingMismatchError(
                f"query vector has {vectors.shape[1]} dimensions but table {table!r} in {self.location} holds "
                f"{stored[1]}-dimensional vectors from {stored[0]}"
            )
        return tbl, vectors

    def similarities(self, table: str, vector: np.ndarray | Sequence[float], keys: Iterable[str]) -> dict[str, float]:
        """Cosine similarity of ``vector`` to the stored rows of ``keys`` (keys not in the table are absent).

        From the in-memory copy of the table when this process holds a current one; else the first call for a table
        version reads those rows alone (a LanceDB filter on ``key``, ~5 ms), and the next loads the copy: a new
        `pathrag ask` process weighs a few passages without reading every vector (~0.4 s for a 100 MB folder's
        22k chunks), a long-lived one keeps the copy. Both ways compute the same products on the same rows."""
        tbl, vectors = self._query_vectors(table, np.asarray([vector]), 1, None)
        wanted = list(dict.fromkeys(keys))
        if tbl is None or not wanted:
            return {}
        version = _table_version(tbl)
        cached = self._snapshots.get(table)
        if (cached is None or cached.version != version) and self._rows_read.get(table) != version:
            self._rows_read[table] = version
            found = self._vectors_of(tbl, wanted)
            present = [key for key in wanted if key in found]
            if not present:
                return {}
            sims = np.stack([found[key] for key in present]) @ vectors[0]
            return {key: float(sim) for key, sim in zip(present, sims)}
        snap = self._snapshot(table, tbl)
        rows = [(key, snap.row_of[key]) for key in wanted if key in snap.row_of]
        if not rows:
            return {}
        sims = snap.matrix[[i for _, i in rows]] @ vectors[0]
        return {key: float(sim) for (key, _), sim in zip(rows, sims)}

    def matrix(self, table: str) -> tuple[list[str], np.ndarray]:
        """All keys of ``table`` and their unit vectors (row i belongs to key i); empty when no table."""
        tbl = self._open(table)
        if tbl is None:
            return [], np.zeros((0, 0), dtype=np.float32)
        snap = self._snapshot(table, tbl)
        return snap.keys, snap.matrix

    def _snapshot(self, table: str, tbl: Any) -> "_Snapshot":
        version = _table_version(tbl)
        cached = self._snapshots.get(table)
        if cached is None or cached.version != version:
            cached = _Snapshot(version, *_rows_and_matrix(tbl))
            self._snapshots[table] = cached
        return cached

    # ---- writing -------------------------------------------------------------------------------
    def sync(self, table: str, rows: Rows, embedder: Embedder) -> SyncStats:
        """Make ``table`` hold exactly ``rows``: embed new or changed texts, delete absent keys."""
        return self._write(table, rows, embedder, delete_missing=True)

    def upsert(self, table: str, rows: Rows, embedder: Embedder, *,
               known: Mapping[str, tuple[str, tuple]] | None = None) -> SyncStats:
        """Add or update ``rows`` (unchanged texts are not re-embedded); other keys stay as they are. The rows'
        stored hashes are looked up by key, or taken from ``known`` (``stored_state``, read once by a caller
        that sends a whole table in batches: one scan instead of one lookup per batch)."""
        return self._write(table, rows, embedder, delete_missing=False, known=known)

    def stored_state(self, table: str) -> dict[str, tuple[str, tuple]]:
        """key -> (text hash, payload values in the table's column order) of every row of ``table``."""
        tbl = self._open(table)
        if tbl is None:
            return {}
        columns = ["key", "text_hash", *self._payload_columns(tbl.schema)]
        current = tbl.search().select(columns).limit(None).to_arrow()
        cols = [current.column(n).to_pylist() for n in columns]
        return {k: (h, tuple(p)) for k, h, *p in zip(*cols)}

    def delete(self, table: str, keys: Iterable[str]) -> int:
        """Delete ``keys`` from ``table``; returns how many rows were removed."""
        keys = sorted(set(keys))
        with self._lock:
            tbl = self._open(table)
            if tbl is None or not keys:
                return 0
            before = tbl.count_rows()
            self._delete_keys(tbl, keys)
            return before - tbl.count_rows()

    def reset(self, table: str) -> None:
        """Drop ``table`` (e.g. to re-embed everything with another model)."""
        with self._lock:
            if self._open(table) is not None:
                self._db.drop_table(table)
            leftover = self.path / f"{table}.lance" if self.path is not None else None
            if leftover is not None and leftover.exists():
                shutil.rmtree(leftover)

    def replace_all(self, source: "VectorStore") -> None:
        """Make this store hold exactly ``source``'s tables (their rows, vectors and schema metadata), each table
        replaced in one commit (LanceDB's overwrite: a reader sees the old version or the new one). For an object
        store, where a folder cannot be renamed into place; a table is read into memory whole to be copied."""
        with self._lock:
            wanted = source.tables()
            for table in wanted:
                data = source._db.open_table(table).to_arrow()
                self._db.create_table(table, data=data, schema=data.schema, mode="overwrite")
                self._snapshots.pop(table, None)
            for table in set(self.tables()) - set(wanted):
                self._db.drop_table(table)

    def drop_all(self) -> None:
        """Drop every table (the staging store of a finished or failed re-embed on an object store)."""
        with self._lock:
            for table in self.tables():
                self._db.drop_table(table)

    def optimize(self, table: str, cleanup_older_than: timedelta = VERSION_RETENTION) -> None:
        """Compact the small fragments incremental writes leave behind and drop versions older than
        ``cleanup_older_than`` (recent ones stay, so a concurrent reader is not cut off)."""
        with self._lock:
            tbl = self._open(table)
            if tbl is not None:
                tbl.optimize(cleanup_older_than=cleanup_older_than)

    def versions(self, table: str) -> int:
        """How many versions of ``table`` are kept on disk (0 without the table)."""
        tbl = self._open(table)
        return len(tbl.list_versions()) if tbl is not None else 0

    @staticmethod
    def _needs_tidy(tbl: Any) -> bool:
        """Whether what the table accumulated since its last compaction is worth compacting it (see TIDY_FRAGMENTS):
        read from its latest version's manifest statistics and the versions' times, no data file is read."""
        versions = tbl.list_versions()
        stats = versions[-1]["metadata"]
        on_disk, dead = int(stats.get("total_data_file_rows", 0)), int(stats.get("total_deletion_file_rows", 0))
        compacted = max(1, math.ceil((on_disk - dead) / LANCE_FRAGMENT_ROWS))
        if int(stats.get("total_fragments", 0)) - compacted >= TIDY_FRAGMENTS:
            return True
        if on_disk and dead >= TIDY_DEAD_SHARE * on_disk:
            return True
        old = [v["timestamp"] for v in versions[:-1]]
        if not old:
            return False
        cutoff = datetime.now(old[0].tzinfo) - VERSION_RETENTION   # LanceDB 0.40 gives naive local times
        return sum(1 for t in old if t < cutoff) >= TIDY_VERSIONS

    @staticmethod
    def _tidy(tbl: Any) -> None:
        """Compact the table and remove versions older than ``VERSION_RETENTION`` (when ``_needs_tidy``). LanceDB's
        pruning alone (``cleanup_old_versions``) needs the separate ``pylance`` package, so this is ``optimize``,
        which also compacts: it rewrites the fragments smaller than LanceDB's target (a million rows), i.e. a
        table of that size or less, which `pathrag bench vectors` measures."""
        tbl.optimize(cleanup_older_than=VERSION_RETENTION)

    # ---- internals -----------------------------------------------------------------------------
    @staticmethod
    def _payload_columns(schema: pa.Schema) -> list[str]:
        return [name for name in schema.names if name not in RESERVED_COLUMNS]

    @staticmethod
    def _stored_meta(tbl: Any) -> tuple[str, int]:
        md = tbl.schema.metadata or {}
        return md.get(META_EMBEDDER, b"unknown").decode(), int(md.get(META_DIM, b"0"))

    def _mismatch(self, table: str, stored: tuple[str, int], identity: str, dim: int | str) -> EmbeddingMismatchError:
        return EmbeddingMismatchError(
            f"table {table!r} in {self.location} holds vectors from {stored[0]} (dim {stored[1]}), but the "
            f"configured embedder is {identity} (dim {dim}). Vectors of different models cannot be "
            f"compared: re-embed with `pathrag index --reembed`, delete {self.location.table_uri(table)}, "
            f"or set PATHRAG_EMBED_MODEL / PATHRAG_EMBED_BASE_URL back to the model that built it."
        )

    def _check_identity(self, table: str, stored: tuple[str, int], embedder: Embedder) -> None:
        if stored[0] != embedder.identity:
            try:
                dim: int | str = embedder.dim
            except Exception:  # an unreachable endpoint must not hide the mismatch itself
                dim = "unknown"
            raise self._mismatch(table, stored, embedder.identity, dim)

    def _embed_batches(self, rows: list[_Row], embedder: Embedder
                       ) -> tuple[list[_Row], np.ndarray | None, int, list[str]]:
        """Embed ``rows`` batch by batch; returns the rows embedded, their vectors, rows failed, errors.

        Identical texts are embedded once and share the vector (entities and relations often repeat a
        description word for word; issue 23: nothing embedded twice). The distinct texts are batched longest
        first, so each batch holds texts of about one length: a transformer pads a batch to its longest text,
        and batches in arrival order (a 480-character passage among 100-character relation texts) cost
        all-MiniLM-L6-v2 3.5 to 4 times the work on CPU (`pathrag bench embedder`)."""
        # One request per batch for endpoint embedders; the offline embedder cannot fail per batch: one call.
        texts = longest_first(r.text for r in rows)
        position = {text: i for i, text in enumerate(texts)}
        size = int(getattr(embedder, "batch_size", 0) or 0) or max(len(texts), 1)
        vectors: np.ndarray | None = None
        embedded = np.zeros(len(texts), dtype=bool)
        errors: list[str] = []
        for start in range(0, len(texts), size):
            batch = texts[start:start + size]
            try:
                part = l2_normalise(embedder.embed(batch))
            except EmbeddingError as exc:
                errors.append(str(exc))
                continue
            if vectors is None:
                vectors = np.empty((len(texts), part.shape[1]), dtype=part.dtype)
            vectors[start:start + len(batch)] = part
            embedded[start:start + len(batch)] = True
        done = [r for r in rows if embedded[position[r.text]]]
        out = vectors[[position[r.text] for r in done]] if vectors is not None and done else None
        return done, out, len(rows) - len(done), errors

    @staticmethod
    def _normalise_rows(rows: Rows) -> list[_Row]:
        items = rows.items() if isinstance(rows, Mapping) else rows
        out: dict[str, _Row] = {}
        for item in items:
            if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
                raise TypeError(f"a row must be (key, text) or (key, text, payload dict); got {item!r:.120}")
            key, text = item[0], item[1]
            payload = dict(item[2]) if len(item) == 3 and item[2] is not None else {}
            if not isinstance(key, str) or not key:
                raise ValueError(f"row key {key!r} must be a non-empty string")
            if not isinstance(text, str):
                raise TypeError(f"row {key!r}: text must be a string, got {type(text).__name__}")
            bad = RESERVED_COLUMNS.intersection(payload)
            if bad:
                raise ValueError(f"row {key!r}: payload names {sorted(bad)} are reserved; rename them")
            row = _Row(key, text, text_hash(text), payload)
            previous = out.get(key)
            if previous is not None and previous != row:
                raise ValueError(f"key {key!r} appears twice with different text or payload; keys must be unique")
            out[key] = row
        return list(out.values())

    def _schema(self, rows: list[_Row], dim: int, identity: str) -> pa.Schema:
        """Payload column types come from the first non-null value seen (all-null columns are strings)."""
        types: dict[str, pa.DataType | None] = {}
        for row in rows:
            for name, value in row.payload.items():
                if value is None:
                    types.setdefault(name, None)
                    continue
                t = _arrow_type(value)
                if types.get(name) is None:
                    types[name] = t
                elif types[name] != t:
                    raise ValueError(
                        f"payload column {name!r} mixes {types[name]} and {t} values (row {row.key!r}); "
                        "give every row the same type"
                    )
        fields = [
            pa.field("key", pa.utf8(), nullable=False),
            pa.field("text", pa.utf8()),
            pa.field("text_hash", pa.utf8()),
            pa.field("vector", pa.list_(pa.float32(), dim)),
            *(pa.field(name, t or pa.utf8()) for name, t in types.items()),
        ]
        metadata = {META_EMBEDDER: identity.encode(), META_DIM: str(dim).encode(), META_TABLE_ID: uuid.uuid4().hex.encode()}
        return pa.schema(fields, metadata=metadata)

    def _write(self, table: str, rows: Rows, embedder: Embedder, *, delete_missing: bool,
               known: Mapping[str, tuple[str, tuple]] | None = None) -> SyncStats:
        wanted = self._normalise_rows(rows)
        with self._lock:
            tbl = self._open(table)
            stored: tuple[str, int] | None = None
            existing: dict[str, tuple[str, tuple]] = {}
            payload_cols: list[str] = []
            if tbl is not None:
                stored = self._stored_meta(tbl)
                self._check_identity(table, stored, embedder)
                payload_cols = self._payload_columns(tbl.schema)
                unknown = sorted({n for r in wanted for n in r.payload} - set(payload_cols))
                if unknown:
                    raise ValueError(
                        f"rows carry payload columns {unknown} that table {table!r} lacks (it has "
                        f"{payload_cols}); rebuild it with `pathrag index --reembed`"
                    )
                columns = ["key", "text_hash", *payload_cols]
                if known is not None:
                    existing = {r.key: known[r.key] for r in wanted if r.key in known}
                else:
                    if delete_missing:
                        parts = [tbl.search().select(columns).limit(None).to_arrow()]
                    else:   # an upsert looks up only its own keys: its cost follows the rows given, not the table
                        keys = [r.key for r in wanted]
                        parts = [tbl.search().where(f"key IN ({_sql_list(keys[i:i + DELETE_BATCH])})")
                                 .select(columns).limit(None).to_arrow() for i in range(0, len(keys), DELETE_BATCH)]
                    for current in parts:
                        cols = [current.column(n).to_pylist() for n in columns]
                        existing.update((k, (h, tuple(p))) for k, h, *p in zip(*cols))

            def payload_tuple(row: _Row) -> tuple:
                return tuple(row.payload.get(n) for n in payload_cols)

            to_embed = [r for r in wanted if r.key not in existing or existing[r.key][0] != r.text_hash]
            payload_only = [
                r
                for r in wanted
                if r.key in existing and existing[r.key][0] == r.text_hash and existing[r.key][1] != payload_tuple(r)
            ]
            stale = sorted(set(existing) - {r.key for r in wanted}) if delete_missing else []
            unchanged = len(wanted) - len(to_embed) - len(payload_only)

            # Embedded and written in slices of EMBED_BATCH_ROWS, so memory holds one slice of vectors, not the
            # corpus's. Stored unit-length whatever the embedder returns, so cosine equals the dot product. A batch
            # the embedder fails on (EmbeddingError, after its own retries) is left out: those rows keep their old
            # vector or stay absent, and are embedded on the next sync; the other batches are written.
            embedded: list[_Row] = []
            failed, errors = 0, []
            for start in range(0, len(to_embed), EMBED_BATCH_ROWS):
                part, vectors, part_failed, part_errors = self._embed_batches(
                    to_embed[start:start + EMBED_BATCH_ROWS], embedder)
                failed += part_failed
                errors += part_errors
                if vectors is None:
                    continue
                if stored is not None and vectors.shape[1] != stored[1]:
                    raise self._mismatch(table, stored, embedder.identity, vectors.shape[1])
                if tbl is None:
                    schema = self._schema(wanted, vectors.shape[1], embedder.identity)
                    tbl = self._db.create_table(table, schema=schema)
                    payload_cols = self._payload_columns(schema)
                self._put(tbl, part, vectors.astype(np.float32, copy=False), upsert=bool(existing))
                embedded += part
                del vectors
            if tbl is None and failed:
                try:
                    dim = embedder.dim  # create the table even when nothing could be embedded this time
                except EmbeddingError:
                    dim = None
                if dim:
                    schema = self._schema(wanted, dim, embedder.identity)
                    tbl = self._db.create_table(table, schema=schema)
                    payload_cols = self._payload_columns(schema)
            to_embed = embedded
            if payload_only:
                reused = self._vectors_of(tbl, [r.key for r in payload_only])
                dim = int(tbl.schema.field("vector").type.list_size)
                matrix = np.empty((len(payload_only), dim), dtype=np.float32)
                for i, r in enumerate(payload_only):
                    matrix[i] = reused[r.key]
                self._put(tbl, payload_only, matrix, upsert=True)
            write_rows = to_embed + payload_only
            if stale:
                self._delete_keys(tbl, stale)
            if tbl is not None and (write_rows or stale) and self._needs_tidy(tbl):
                self._tidy(tbl)
            total = tbl.count_rows() if tbl is not None else 0
            return SyncStats(
                failed=failed, errors=tuple(errors[:5]),
                embedded=len(to_embed),
                unchanged=unchanged,
                deleted=len(stale),
                total=total,
                payload_updated=len(payload_only),
            )

    def _put(self, tbl: Any, rows: list[_Row], matrix: np.ndarray, *, upsert: bool) -> None:
        data = self._arrow(tbl.schema, rows, matrix)
        if upsert:
            tbl.merge_insert("key").when_matched_update_all().when_not_matched_insert_all().execute(data)
        else:
            tbl.add(data)

    @staticmethod
    def _arrow(schema: pa.Schema, rows: list[_Row], matrix: np.ndarray) -> pa.Table:
        dim = matrix.shape[1]
        columns: dict[str, pa.Array] = {
            "key": pa.array([r.key for r in rows], pa.utf8()),
            "text": pa.array([r.text for r in rows], pa.utf8()),
            "text_hash": pa.array([r.text_hash for r in rows], pa.utf8()),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1), pa.float32()), dim),
        }
        for f in schema:
            if f.name not in columns:
                try:
                    columns[f.name] = pa.array([r.payload.get(f.name) for r in rows], f.type)
                except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                    raise ValueError(f"payload column {f.name!r} must hold {f.type} values: {exc}") from None
        return pa.table(columns, schema=schema)

    @staticmethod
    def _vectors_of(tbl: Any, keys: list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for i in range(0, len(keys), DELETE_BATCH):
            part = (
                tbl.search()
                .where(f"key IN ({_sql_list(keys[i : i + DELETE_BATCH])})")
                .select(["key", "vector"])
                .limit(None)
                .to_arrow()
            )
            out.update(zip(part.column("key").to_pylist(), _vector_matrix(part)))
        return out

    @staticmethod
    def _delete_keys(tbl: Any, keys: list[str]) -> None:
        for i in range(0, len(keys), DELETE_BATCH):
            tbl.delete(f"key IN ({_sql_list(keys[i : i + DELETE_BATCH])})")
