"""Embeddings stage: keep the LanceDB tables `entities`, `relations` and `chunks` in line with DuckDB.

What gets embedded (LightRAG's choice): an entity's name and description; a relation's keywords, its
two endpoint names and its description; a chunk's text. The vector store compares a hash of each text
with what it holds, so only rows whose embedded text changed are re-embedded and removed rows are deleted.
The DuckDB reads happen in one short read connection before any embedding work.
"""

from __future__ import annotations

from dataclasses import dataclass

from pathrag_pipeline.llm.embedding import Embedder
from pathrag_pipeline.storage.store import Store
from pathrag_pipeline.storage.vector_store import SyncStats, VectorStore

ENTITY_SQL = "SELECT entity_key, name || ': ' || coalesce(description, ''), name FROM entities"
RELATION_SQL = """
    SELECT r.relation_key,
           coalesce(r.keywords, '') || ' | ' || s.name || ' - ' || t.name || ': ' || coalesce(r.description, ''),
           s.name, t.name
    FROM relations r JOIN entities s ON s.entity_key = r.src_key JOIN entities t ON t.entity_key = r.tgt_key
"""
CHUNK_SQL = "SELECT id, text, document_id FROM chunks"


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


def reset_embeddings(vectors: VectorStore, tables: tuple[str, ...] = ("entities", "relations", "chunks")) -> None:
    """Drop the tables so the next sync re-embeds everything (after changing the embedding model)."""
    for name in tables:
        vectors.reset(name)
