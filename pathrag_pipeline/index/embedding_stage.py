"""Embeddings stage: keep the LanceDB tables `entities`, `relations` and `chunks` in line with DuckDB.

What gets embedded: an entity's name and description; a relation's keywords, its two endpoint names and its
description (LightRAG's choice); a chunk's document title and text, the passage exactly as BM25 indexes it
(``store.PASSAGE_TEXT_SQL``), so dense and lexical search rank the same text. The vector store compares a hash of
each text with what it holds, so only rows whose embedded text changed are re-embedded and removed rows are
deleted: a home whose chunk vectors embedded the chunk text alone (before the title was added) re-embeds its
chunks, and nothing else, on its next index run.
The DuckDB reads happen in one short read connection before any embedding work.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import duckdb

from pathrag_pipeline.index.aliases import DETECTION_VERSION
from pathrag_pipeline.llm.embedding import Embedder
from pathrag_pipeline.storage.store import PASSAGE_TEXT_SQL, Store, get_meta, set_meta
from pathrag_pipeline.storage.vector_store import SyncStats

if TYPE_CHECKING:   # LanceDB is imported only by what opens a table (about a second of start-up)
    from pathrag_pipeline.storage.vector_store import VectorStore

ENTITY_SQL = "SELECT entity_key, name || ': ' || coalesce(description, ''), name FROM entities"
RELATION_SQL = """
    SELECT r.relation_key,
           coalesce(r.keywords, '') || ' | ' || s.name || ' - ' || t.name || ': ' || coalesce(r.description, ''),
           s.name, t.name
    FROM relations r JOIN entities s ON s.entity_key = r.src_key JOIN entities t ON t.entity_key = r.tgt_key
"""
CHUNK_SQL = f"SELECT c.id, {PASSAGE_TEXT_SQL}, c.document_id FROM chunks c LEFT JOIN documents d ON d.id = c.document_id"
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


def embedding_rows(store: Store) -> dict[str, list[tuple]]:
    """The rows each LanceDB table must hold: (key, text, payload)."""
    with store.connect() as con:
        entities = [(k, text, {"name": name}) for k, text, name in con.execute(ENTITY_SQL).fetchall()]
        relations = [(k, text, {"source": s, "target": t}) for k, text, s, t in con.execute(RELATION_SQL).fetchall()]
        chunks = [(k, text, {"document_id": d}) for k, text, d in con.execute(CHUNK_SQL).fetchall()]
    return {"entities": entities, "relations": relations, "chunks": chunks}


def sync_embeddings(store: Store, vectors: VectorStore, embedder: Embedder,
                    tables: tuple[str, ...] = ("entities", "relations", "chunks")) -> EmbeddingReport:
    rows = embedding_rows(store)
    stats = {name: vectors.sync(name, rows[name], embedder) for name in tables}
    return EmbeddingReport(embedder.identity, embedder.dim, stats)


# ---- the synced state --------------------------------------------------------------------------------

SYNCED_STATE_META = "embeddings_synced"
"""pathrag_meta key: ``synced_state`` of the tables when the embedding stage last ended with LanceDB holding
exactly their rows (nothing failed) and no alias left to add (``new_alias_candidates`` is zero after a pass that
re-merged entities). The stage deletes it before it touches LanceDB, so a stage that crashes or fails
part-way leaves none."""


def synced_state(con: duckdb.DuckDBPyConnection, *, embedder: str, alias_threshold: float | None) -> str:
    """A fingerprint of everything the embedding stage reads: every column of the rows each LanceDB table must
    hold (``SOURCES``, the same SQL ``embedding_rows`` runs), the alias table, the embedder identity and the
    alias setting. Equal fingerprints: the stage would embed nothing, delete nothing and find no new alias."""
    state: dict[str, object] = {"embedder": embedder, "alias_embedding_threshold": alias_threshold,
                                "alias_detection": DETECTION_VERSION}
    for name, sql in {**SOURCES, "entity_aliases": ALIAS_SQL}.items():
        rows, digest = con.execute(
            f"SELECT count(*), md5(coalesce(string_agg(h, '' ORDER BY h), '')) "
            f"FROM (SELECT md5(CAST(t AS VARCHAR)) AS h FROM ({sql}) t)").fetchone()
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
    with store.connect() as con:
        set_meta(con, SYNCED_STATE_META, synced_state(con, embedder=embedder, alias_threshold=alias_threshold))
