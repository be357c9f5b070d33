"""The query-time graph: entity and relation rows of DuckDB loaded once per graph version.

Building the ``GraphView`` (name -> id map, CSR adjacency, igraph) and reading every description costs
far more than a query's own path search, so it must not happen per query. The snapshot is cached in
process, keyed on the DuckDB file and a *graph version*: a hash of the row counts and the latest
``updated_at`` of ``entities`` and ``relations``. Any merge that inserts, changes or deletes a row moves
one of them, so a query after a re-index sees the new graph and every other query reuses the old one.
Checking the version is two aggregate queries on a short read-only connection.

Node ``i`` of the view is the entity whose key is ``entity_keys[i]``; edge ``e`` is relation
``relation_keys[e]`` (the view deduplicates edges, so the relation arrays are indexed the same way
through ``edge_rows``).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np

from pathrag_pipeline.query.graph_view import GraphView
from pathrag_pipeline.query.id_lists import IdLists
from pathrag_pipeline.storage.store import Store


@dataclass(frozen=True)
class GraphSnapshot:
    """One version of the entity graph with everything a query needs to render paths."""

    version: str
    view: GraphView
    entity_keys: list[str]
    entity_names: list[str]
    entity_types: list[str]
    entity_descriptions: list[str]
    entity_chunks: IdLists            # per entity, its source chunk ids (a tuple per row)
    entity_documents: IdLists
    relation_keys: list[str]
    relation_src: list[int]           # node id of each relation's src_key
    relation_tgt: list[int]
    relation_keywords: list[str]
    relation_descriptions: list[str]
    relation_strengths: list[float]
    relation_chunks: IdLists
    relation_documents: IdLists
    relation_index: dict[str, int]    # relation_key -> relation row
    edge_rows: list[int]              # view edge id -> relation row

    @property
    def node_count(self) -> int:
        return len(self.entity_keys)

    def node_of(self, entity_key: str) -> int | None:
        return self.view.index.get(entity_key)

    def relation_row_of_edge(self, edge: int) -> int:
        return self.edge_rows[edge]

    def incident_relations(self, node: int) -> list[int]:
        """Relation rows touching ``node``, in the view's adjacency order."""
        lo, hi = self.view.indptr_list[node], self.view.indptr_list[node + 1]
        return [self.edge_rows[int(e)] for e in self.view.slot_edge[lo:hi]]


class EmptyGraphError(RuntimeError):
    """The index has no entities yet, so there is nothing for graph retrieval to walk."""


_cache: dict[str, GraphSnapshot] = {}
_lock = threading.Lock()


def graph_version(con: duckdb.DuckDBPyConnection) -> str:
    """A short hash that changes whenever a row of ``entities`` or ``relations`` is added, changed or removed."""
    ent = con.execute("SELECT count(*), max(updated_at) FROM entities").fetchone()
    rel = con.execute("SELECT count(*), max(updated_at) FROM relations").fetchone()
    raw = f"entities:{ent[0]}:{ent[1]}|relations:{rel[0]}:{rel[1]}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def load_graph(store: Store) -> GraphSnapshot:
    """The current graph of ``store``: the cached snapshot while its version holds, else a fresh load. Queries
    sharing one read block (``Store.reading``: the query service's batches) check the version once."""
    return store.read_once("graph", lambda: _load_graph(store))


def _load_graph(store: Store) -> GraphSnapshot:
    key = str(Path(store.path).resolve())
    with _lock:
        with store.connect(read_only=True) as con:
            version = graph_version(con)
            cached = _cache.get(key)
            if cached is not None and cached.version == version:
                return cached
            snapshot = _read_snapshot(con, version)
        _cache[key] = snapshot
        return snapshot


def clear_cache() -> None:
    """Forget every cached snapshot (tests; or to free memory in a long-lived process)."""
    with _lock:
        _cache.clear()


def _columns(con: duckdb.DuckDBPyConnection, sql: str) -> dict[str, list]:
    """A query's result column by column as Python lists (DuckDB's NumPy result: about twice as fast as building a
    tuple per row with ``fetchall`` on graph tables). Not for list columns: see :func:`_id_lists`."""
    return {name: column.tolist() for name, column in con.execute(sql).fetchnumpy().items()}


def _id_lists(table) -> dict[str, IdLists]:
    """An Arrow table's ``VARCHAR[]`` columns as :class:`IdLists`: no Python string per reference (a list column
    through NumPy came back as one object array per row, then a tuple of new strings per row)."""
    return {name: IdLists.from_arrow(table.column(name)) for name in table.column_names if name != "row_id"}


# Relations both of whose entities exist, in key order, with their endpoints' node ids (nodes numbered in key order,
# as the snapshot's entity rows). A relation whose endpoint is missing cannot be walked: the merge never writes one,
# but a half-written graph must not crash queries.
_WALKABLE_RELATIONS = """
    WITH nodes AS (SELECT entity_key, row_number() OVER (ORDER BY entity_key) - 1 AS node FROM entities)
    SELECT r.rowid AS row_id, r.relation_key, s.node AS src, t.node AS tgt, r.keywords, r.description, r.strength
    FROM relations r JOIN nodes s ON s.entity_key = r.src_key JOIN nodes t ON t.entity_key = r.tgt_key
    ORDER BY r.relation_key"""


def _relation_lists(con: duckdb.DuckDBPyConnection, row_ids: np.ndarray) -> dict[str, IdLists]:
    """The chunk and document lists of the relations ``row_ids`` (DuckDB row ids), in that order. Read in the
    table's own order and put in key order as integer codes (``IdLists.take``): sorting rows that carry their lists
    made DuckDB copy every list (~2x the read on a 100 MB folder's 2.3M chunk references). The caller holds the
    file's read lock, so the rows cannot change between this read and the one ``row_ids`` came from; a mismatch
    is a bug, and says so."""
    table = con.sql("SELECT rowid AS row_id, source_chunk_ids, document_ids FROM relations").to_arrow_table()
    scanned = table.column("row_id").to_numpy()
    by_id = np.argsort(scanned, kind="stable")
    found = np.searchsorted(scanned, row_ids, sorter=by_id)
    positions = by_id[np.minimum(found, max(len(scanned) - 1, 0))] if len(scanned) else found
    if len(row_ids) and not np.array_equal(scanned[positions], row_ids):
        raise RuntimeError("the relations table changed while the graph was being read; ask again")
    return {name: lists.take(positions) for name, lists in _id_lists(table).items()}


def _read_snapshot(con: duckdb.DuckDBPyConnection, version: str) -> GraphSnapshot:
    entities = _columns(con, "SELECT entity_key, name, type, description FROM entities ORDER BY entity_key")
    keys = entities["entity_key"]
    if not keys:
        raise EmptyGraphError(
            "the graph has no entities yet: index documents and build the graph first "
            "(`pathrag index PATH`), or use --mode naive for plain chunk retrieval"
        )
    entity_lists = _id_lists(
        con.sql("SELECT source_chunk_ids, document_ids FROM entities ORDER BY entity_key").to_arrow_table())
    relations = con.execute(_WALKABLE_RELATIONS).fetchnumpy()
    relation_lists = _relation_lists(con, relations["row_id"])
    src, dst = relations["src"].astype(np.int64), relations["tgt"].astype(np.int64)
    relation_keys = relations["relation_key"].tolist()
    view = GraphView.from_edges(keys, src, dst, edge_ids=relation_keys, version=version)
    relation_index = {k: i for i, k in enumerate(relation_keys)}
    edge_rows = [relation_index[k] for k in (view.edge_ids or [])]
    return GraphSnapshot(
        version=version,
        view=view,
        entity_keys=keys,
        entity_names=entities["name"],
        entity_types=entities["type"],
        entity_descriptions=entities["description"],
        entity_chunks=entity_lists["source_chunk_ids"],
        entity_documents=entity_lists["document_ids"],
        relation_keys=relation_keys,
        relation_src=src.tolist(),
        relation_tgt=dst.tolist(),
        relation_keywords=relations["keywords"].tolist(),
        relation_descriptions=relations["description"].tolist(),
        relation_strengths=relations["strength"].astype(np.float64).tolist(),
        relation_chunks=relation_lists["source_chunk_ids"],
        relation_documents=relation_lists["document_ids"],
        relation_index=relation_index,
        edge_rows=edge_rows,
    )
