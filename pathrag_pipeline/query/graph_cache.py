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
    entity_chunks: list[tuple[str, ...]]
    entity_documents: list[tuple[str, ...]]
    relation_keys: list[str]
    relation_src: list[int]           # node id of each relation's src_key
    relation_tgt: list[int]
    relation_keywords: list[str]
    relation_descriptions: list[str]
    relation_strengths: list[float]
    relation_chunks: list[tuple[str, ...]]
    relation_documents: list[tuple[str, ...]]
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
    tuple per row with ``fetchall`` on graph tables; a list column comes back as one array per row)."""
    return {name: column.tolist() for name, column in con.execute(sql).fetchnumpy().items()}


def _tuples(column: list) -> list[tuple[str, ...]]:
    return [() if ids is None else tuple(ids) for ids in column]


def _read_snapshot(con: duckdb.DuckDBPyConnection, version: str) -> GraphSnapshot:
    entities = _columns(con, "SELECT entity_key, name, type, description, source_chunk_ids, document_ids "
                             "FROM entities ORDER BY entity_key")
    relations = _columns(con, "SELECT relation_key, src_key, tgt_key, keywords, description, strength, "
                              "source_chunk_ids, document_ids FROM relations ORDER BY relation_key")
    keys = entities["entity_key"]
    if not keys:
        raise EmptyGraphError(
            "the graph has no entities yet: index documents and build the graph first "
            "(`pathrag index PATH`), or use --mode naive for plain chunk retrieval"
        )
    index = {k: i for i, k in enumerate(keys)}
    # Relations whose endpoint is missing from entities cannot be walked; the merge never writes them,
    # but a half-written graph must not crash queries.
    walkable = [i for i, (a, b) in enumerate(zip(relations["src_key"], relations["tgt_key"]))
                if a in index and b in index]
    if len(walkable) < len(relations["relation_key"]):
        relations = {name: [column[i] for i in walkable] for name, column in relations.items()}
    src = np.fromiter((index[k] for k in relations["src_key"]), dtype=np.int64, count=len(walkable))
    dst = np.fromiter((index[k] for k in relations["tgt_key"]), dtype=np.int64, count=len(walkable))
    relation_keys = relations["relation_key"]
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
        entity_chunks=_tuples(entities["source_chunk_ids"]),
        entity_documents=_tuples(entities["document_ids"]),
        relation_keys=relation_keys,
        relation_src=src.tolist(),
        relation_tgt=dst.tolist(),
        relation_keywords=relations["keywords"],
        relation_descriptions=relations["description"],
        relation_strengths=[float(x) for x in relations["strength"]],
        relation_chunks=_tuples(relations["source_chunk_ids"]),
        relation_documents=_tuples(relations["document_ids"]),
        relation_index=relation_index,
        edge_rows=edge_rows,
    )
