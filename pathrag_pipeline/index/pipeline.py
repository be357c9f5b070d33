"""The whole indexing pipeline in one call: folder → documents → chunks → extractions → graph → embeddings.

`pathrag index` and `pathrag quickstart` call `run_indexing`; the Dagster assets call the same stages one
by one. Each stage is incremental on its own (content hashes at every step), so a re-run on an unchanged
folder does no parsing, no LLM calls and no embedding.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pathrag_pipeline.index.aliases import AliasStats
from pathrag_pipeline.index.graph_merge import detect_and_apply
from pathrag_pipeline.config import Settings
from pathrag_pipeline.llm.embedding import embedder_from_settings
from pathrag_pipeline.index.embedding_stage import EmbeddingReport, reset_embeddings, sync_embeddings
from pathrag_pipeline.index.llm_extraction import extractor_from_settings
from pathrag_pipeline.index.extraction_stage import ExtractionStats, run_extraction
from pathrag_pipeline.ingest.folder_sync import SyncReport, sync_folder
from pathrag_pipeline.llm.client import llm_from_settings
from pathrag_pipeline.storage.run_lock import index_lock
from pathrag_pipeline.storage.store import Store
from pathrag_pipeline.index.triples_import import ImportStats, import_triples
from pathrag_pipeline.storage.vector_store import VectorStore


@dataclass
class IndexReport:
    mode: dict[str, str]              # which extractor, embedder and LLM produced this index
    sync: SyncReport
    extraction: ExtractionStats | None
    triples: ImportStats | None
    embeddings: EmbeddingReport
    aliases: AliasStats
    graph: dict[str, int]


def describe_mode(settings: Settings) -> dict[str, str]:
    """Which extractor, embedder and answerer the settings select (secrets never included)."""
    llm = llm_from_settings(settings)
    embedder = embedder_from_settings(settings)
    extractor = extractor_from_settings(settings, llm, gleaning=settings.gleaning)
    return {
        "mode": "llm" if llm else "offline",
        "extractor": extractor.identity,
        "embedder": embedder.identity,
        "answers": f"llm:{llm.model}" if llm else "extractive (offline)",
    }


def graph_counts(store: Store) -> dict[str, int]:
    with store.connect() as con:
        return {
            table: con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("documents", "chunks", "extractions", "entities", "relations")
        }


def run_indexing(settings: Settings, *, folder: Path | None = None, trigger: str = "cli",
                 triples: Path | None = None, reembed: bool = False, progress=None) -> IndexReport:
    """Run every indexing stage; with ``triples``, the graph comes from that JSONL file instead of extraction.

    Holds the home's indexing lock for the whole run (``storage.run_lock``): a second run on the same
    PATHRAG_HOME waits for this one, with a message, then processes only what is still left."""
    with index_lock(settings.home):
        return _run_indexing(settings, folder=folder, trigger=trigger, triples=triples, reembed=reembed,
                             progress=progress)


def _run_indexing(settings: Settings, *, folder: Path | None, trigger: str, triples: Path | None, reembed: bool,
                  progress) -> IndexReport:
    store = Store.for_settings(settings)
    sync = sync_folder(settings, store, folder=folder, trigger=trigger)
    llm = llm_from_settings(settings)
    extraction = imported = None
    if triples is not None:
        imported = import_triples(store, triples)
        mode = {"mode": "imported triples", "extractor": imported.extractor}
    else:
        extractor = extractor_from_settings(settings, llm, gleaning=settings.gleaning)
        extraction = run_extraction(store, extractor, max_concurrency=settings.llm_max_concurrency,
                                    progress=progress)
        mode = {"mode": "llm" if llm else "offline", "extractor": extractor.identity}
    embedder = embedder_from_settings(settings)
    vectors = VectorStore(settings.lancedb_path)
    if reembed:
        reset_embeddings(vectors)
    embeddings = sync_embeddings(store, vectors, embedder)
    # Near-duplicate names: string rules always; the embedding method too when a threshold is configured
    # (it compares the entity vectors just synced). New aliases re-merge their entities, then re-embed them.
    entity_vectors = vectors.matrix("entities") if settings.alias_embedding_threshold is not None else None
    aliases = detect_and_apply(store, embeddings=entity_vectors,
                               embedding_threshold=settings.alias_embedding_threshold or 0.95)
    if aliases.entities_remerged:
        embeddings = sync_embeddings(store, vectors, embedder)
    mode["embedder"] = embedder.identity
    return IndexReport(mode, sync, extraction, imported, embeddings, aliases, graph_counts(store))
