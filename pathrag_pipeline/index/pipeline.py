"""The whole indexing pipeline in one call: folder → documents → chunks → extractions → graph → embeddings.

The three stages (``ingest_stage``, ``graph_stage``, ``embedding_stage``) are what the Dagster assets
`documents`+`chunks`, `extractions`+`entities`+`relations` and `embeddings` run, one each; ``run_indexing``
runs them in order without Dagster (evaluation and benchmarks use it; `pathrag index` runs the Dagster job,
see assets/runs.py). Each stage is incremental on its own (content hashes at every step), so a re-run on an unchanged
folder does no parsing, no LLM calls and no embedding.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from pathrag_pipeline.index.aliases import AliasStats
from pathrag_pipeline.index.graph_merge import detect_and_apply, new_alias_candidates
from pathrag_pipeline.config import Settings, usable_cores
from pathrag_pipeline.llm.embedding import EmbeddingError, embedder_from_settings
from pathrag_pipeline.llm.embedding import is_offline as is_offline_embedder
from pathrag_pipeline.index.embedding_stage import (
    EmbeddingReport,
    forget_synced_state,
    record_unembedded,
    remember_synced_state,
    sync_embeddings,
)
from pathrag_pipeline.index.llm_extraction import extractor_from_settings
from pathrag_pipeline.index.extraction_stage import ExtractionStats, run_extraction
from pathrag_pipeline.ingest.folder_sync import SyncReport, sync_folder
from pathrag_pipeline.llm.client import llm_from_settings
from pathrag_pipeline.storage.run_lock import index_lock
from pathrag_pipeline.storage.store import Store
from pathrag_pipeline.storage.vector_sums import record as record_vector_sums
from pathrag_pipeline.index.triples_import import ImportStats, import_triples


@dataclass
class IndexReport:
    mode: dict[str, str]              # which extractor, embedder and LLM produced this index
    sync: SyncReport
    extraction: ExtractionStats | None
    triples: ImportStats | None
    embeddings: EmbeddingReport
    aliases: AliasStats | None        # None: no alias pass ran (the no-op check's report: nothing changed)
    graph: dict[str, int]
    dagster_run_id: str | None = None  # set when the run was recorded in the Dagster instance (assets/runs.py)
    row_group_merges: int | None = None  # run_indexing's write connections that merged DuckDB row groups
                                         # (one write in 64 does: storage/row_group_merging); None: not counted
    stage_seconds: dict[str, float] = field(default_factory=dict)   # ingest, graph, embeddings: wall time each
    seconds: float | None = None      # the whole run's wall time (Dagster's start-up included when it ran the job)
    in_error: list[tuple[str, str]] = field(default_factory=list)   # (path, error) of the files in error after
                                                                    # the run, read with ``graph``


def describe_mode(settings: Settings) -> dict[str, str]:
    """Which extractor, embedder and answerer the settings select (secrets never included)."""
    llm = llm_from_settings(settings)
    embedder = embedder_from_settings(settings)
    extractor = extractor_from_settings(settings, llm, gleaning=settings.gleaning)
    return {
        "mode": "llm" if llm else "offline",
        "extractor": extractor.identity,
        "retry_key": getattr(extractor, "retry_key", ""),
        "embedder": embedder.identity,
        "answers": f"llm:{llm.model}" if llm else "extractive (offline)",
    }


def documents_in_error(con) -> list[tuple[str, str]]:
    """(path, error) of every file the last runs could not read, by path (the CLI says them on every run)."""
    return [(path, error or "") for path, error in
            con.execute("SELECT path, error FROM documents WHERE status = 'error' ORDER BY path").fetchall()]


def count_graph(con) -> dict[str, int]:
    """Rows per table, plus two signs of a model too small for extraction: chunk records with status 'empty'
    and entities without a description (named only as a relation endpoint that said nothing about them). A
    read-only connection is enough."""
    counts = {
        table: con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for table in ("documents", "chunks", "extractions", "entities", "relations")
    }
    counts["empty_extractions"] = con.execute(
        "SELECT count(*) FROM extractions WHERE status = 'empty'").fetchone()[0]
    counts["entities_without_description"] = con.execute(
        "SELECT count(*) FROM entities WHERE coalesce(trim(description), '') = ''").fetchone()[0]
    return counts


def ingest_stage(settings: Settings, store: Store, *, folder: Path | None = None, trigger: str = "cli",
                 run_id: str | None = None, replace_folder: bool = False) -> SyncReport:
    """Folder → documents and chunks (only new or changed files; deleted ones removed); logs ``ingest_runs``.
    A folder other than the home's, or an empty or missing one while the home holds documents, is refused
    unless ``replace_folder`` (ingest/home_folder.py).

    Every stage holds the home's indexing lock (``storage.run_lock``, re-entrant within a process): a second
    indexing run on the same PATHRAG_HOME waits, with a message, instead of extracting the same chunks twice."""
    with index_lock(settings.home):
        return sync_folder(settings, store, folder=folder, trigger=trigger, run_id=run_id,
                           replace_folder=replace_folder)


@dataclass
class GraphStage:
    mode: dict[str, str]
    extraction: ExtractionStats | None
    triples: ImportStats | None
    seconds: float = 0.0              # the stage's wall time


def graph_stage(settings: Settings, store: Store, *, triples: Path | None = None, run_id: str | None = None,
                progress=None, retry_failed: bool = False) -> GraphStage:
    """Chunks → extractions → entities and relations (or the triples import when ``triples`` is given);
    ``retry_failed``: also the chunks left alone after failing several runs in a row."""
    started = time.perf_counter()
    with index_lock(settings.home):
        stage = _graph_stage(settings, store, triples=triples, run_id=run_id, progress=progress,
                             retry_failed=retry_failed)
    stage.seconds = time.perf_counter() - started
    return stage


def _graph_stage(settings: Settings, store: Store, *, triples: Path | None, run_id: str | None,
                 progress, retry_failed: bool = False) -> GraphStage:
    if triples is not None:
        imported = import_triples(store, triples)
        store.settle_row_groups()   # the import's batches merge their row groups now (storage/row_group_merging)
        return GraphStage({"mode": "imported triples", "extractor": imported.extractor}, None, imported)
    llm = llm_from_settings(settings)
    extractor = extractor_from_settings(settings, llm, gleaning=settings.gleaning)
    extraction = run_extraction(store, extractor, max_concurrency=settings.llm_max_concurrency,
                                processes=settings.extract_processes or usable_cores(),
                                progress=progress, run_id=run_id, retry_failed=retry_failed)
    return GraphStage({"mode": "llm" if llm else "offline", "extractor": extractor.identity}, extraction, None)


@dataclass
class EmbeddingStage:
    embedder: str
    embeddings: EmbeddingReport
    aliases: AliasStats
    seconds: float = 0.0              # the stage's wall time


def embedding_stage(settings: Settings, store: Store, *, reembed: bool = False) -> EmbeddingStage:
    """Graph and chunks → LanceDB vectors (only changed rows), then near-duplicate names become aliases."""
    started = time.perf_counter()
    with index_lock(settings.home):
        stage = _embedding_stage(settings, store, reembed=reembed)
        store.settle_row_groups()   # a large sync merges the row groups it wrote (storage/row_group_merging)
    stage.seconds = time.perf_counter() - started
    return stage


def _embedding_stage(settings: Settings, store: Store, *, reembed: bool) -> EmbeddingStage:
    from pathrag_pipeline.storage.vector_store import VectorStore   # LanceDB: only when the stage runs

    embedder = embedder_from_settings(settings)
    if reembed:
        forget_synced_state(store)
        embeddings = _reembed(settings, store, embedder)
    vectors = VectorStore.for_settings(settings)
    remote = not is_offline_embedder(settings)   # a model or an endpoint embeds with the file free (``Store.released``)
    if not reembed:   # deletes the no-op record on its first connection, before LanceDB is written
        embeddings = sync_embeddings(store, vectors, embedder, forget_synced=True, release_while_embedding=remote)
    # Near-duplicate names: string rules always; the embedding method too when a threshold is configured
    # (it compares the entity vectors just synced). New aliases re-merge their entities, then re-embed them.
    by_embedding = settings.alias_embedding_threshold is not None
    entity_vectors = vectors.matrix("entities") if by_embedding else None
    aliases = detect_and_apply(store, embeddings=entity_vectors,
                               embedding_threshold=settings.alias_embedding_threshold or 0.95)
    settled = True
    if aliases.entities_remerged:
        embeddings = embeddings.then(sync_embeddings(store, vectors, embedder, release_while_embedding=remote))
        # Re-merged entities may make new near-duplicates: left to the next run, as before, but looked for
        # (not applied) so that a run that leaves none can vouch for the index below.
        settled = not new_alias_candidates(store, embeddings=vectors.matrix("entities") if by_embedding else None,
                                           embedding_threshold=settings.alias_embedding_threshold or 0.95)
    record_unembedded(store, embeddings)
    if settled and not embeddings.failed:
        # LanceDB now holds exactly the rows of these tables and an alias pass would add nothing: recorded, so
        # `pathrag index` can tell a later no-op without LanceDB or Dagster (index/pending_work.py).
        remember_synced_state(store, embedder=embedder.identity, alias_threshold=settings.alias_embedding_threshold)
    if vectors.path is not None:   # the files this run wrote, hashed once: `status --check` sees one damaged in place
        record_vector_sums(vectors.path)
    return EmbeddingStage(embedder.identity, embeddings, aliases)


def _reembed(settings: Settings, store: Store, embedder) -> EmbeddingReport:
    """Every row embedded again into a store beside the vector store, which replaces it only once complete: a
    re-embed that fails (an endpoint down half-way, a killed run) leaves the previous vectors in place. A folder
    is renamed into place; on an object store (PATHRAG_LANCEDB_URI) each table is overwritten in one commit."""
    from pathrag_pipeline.storage.vector_location import VectorLocation
    from pathrag_pipeline.storage.vector_store import VectorStore

    location = VectorLocation.for_settings(settings)
    if not location.is_local:
        staging = VectorStore(location.sibling(".reembed"))
        staging.drop_all()                              # a killed re-embed's leftovers
        report = sync_embeddings(store, staging, embedder)
        if not report.failed:
            VectorStore(location).replace_all(staging)
        staging.drop_all()
        if report.failed:
            raise _reembed_failed(report, embedder, location.uri)
        return report
    live = location.path
    staging_path = live.with_name(live.name + ".reembed")
    shutil.rmtree(staging_path, ignore_errors=True)          # a killed re-embed's leftovers
    report = sync_embeddings(store, VectorStore(staging_path), embedder)
    if report.failed:
        shutil.rmtree(staging_path, ignore_errors=True)
        raise _reembed_failed(report, embedder, live)
    retired = live.with_name(live.name + ".replaced")
    shutil.rmtree(retired, ignore_errors=True)
    if live.exists():
        live.rename(retired)
    staging_path.rename(live)
    shutil.rmtree(retired, ignore_errors=True)
    return report


def _reembed_failed(report: EmbeddingReport, embedder, live) -> EmbeddingError:
    first = report.errors[0] if report.errors else "see the log"
    return EmbeddingError(
        f"re-embedding with {embedder.identity} left {report.failed} rows without vectors ({first}); the "
        f"previous vectors in {live} are kept unchanged: fix the embedder and run `pathrag index --reembed` "
        "again")


def assemble_report(sync: SyncReport, graph: GraphStage, embed: EmbeddingStage, store: Store,
                    row_group_merges: int | None = None, seconds: float | None = None) -> IndexReport:
    mode = {**graph.mode, "embedder": embed.embedder}
    stage_seconds = {"ingest": sync.seconds, "graph": graph.seconds, "embeddings": embed.seconds}
    with store.connect(read_only=True) as con:   # one connection for the counts and the files in error
        counts, in_error = count_graph(con), documents_in_error(con)
    return IndexReport(mode, sync, graph.extraction, graph.triples, embed.embeddings, embed.aliases,
                       counts, row_group_merges=row_group_merges, stage_seconds=stage_seconds,
                       seconds=seconds, in_error=in_error)


HOLD_MAX_CHUNKS = 64
"""A run whose ingest wrote at most this many chunks keeps one DuckDB connection open for its graph and embedding
stages (``Store.holding``): a one-file edit's ~11 short connections cost ~0.5 s of opens and closes at 100 MB
(issue 23). While it is open, other processes wait for the file (as they do for the merge's own connection), so
larger runs keep their short connections and let readers in between them, and the connection is closed while an
LLM extracts or summarises (``Store.released``) and for an embedding model's stage."""


def holds_file(sync: SyncReport, *, triples: Path | None = None, reembed: bool = False) -> bool:
    """Whether ``run_indexing`` keeps one connection for the graph and embedding stages (``HOLD_MAX_CHUNKS``).
    With an LLM too: the extraction stage lets go of it while the model works (``Store.released``), so a one-file
    edit opens the file about a dozen times fewer (issue 64: 22 opens, 0.7 s of a warm 2.9 s edit). The settings
    (model or not) no longer decide it."""
    return triples is None and not reembed and sync.chunks_written <= HOLD_MAX_CHUNKS


def run_indexing(settings: Settings, *, folder: Path | None = None, trigger: str = "cli",
                 triples: Path | None = None, reembed: bool = False, progress=None,
                 run_id: str | None = None, replace_folder: bool = False,
                 retry_failed: bool = False) -> IndexReport:
    """Run every indexing stage in this process, without Dagster; with ``triples``, the graph comes from that
    JSONL file instead of extraction. ``run_id`` (default: a fresh id) goes to ``ingest_runs`` and ``llm_usage``.
    ``replace_folder``: index ``folder`` in place of the one the home holds (see ``ingest_stage``).
    Holds the home's indexing lock for the whole run."""
    started = time.perf_counter()
    with index_lock(settings.home):
        store = Store.for_settings(settings)
        with contextlib.ExitStack() as hold:
            # the ingest's connection (its plan, and a small change's writes: ingest/folder_sync.py) stays open for
            # the stages and the report's counts when the change is small, as `pathrag index` keeps it across its
            # Dagster steps (assets/resources.py RunReports.holding)
            hold.enter_context(store.holding())
            sync = ingest_stage(settings, store, folder=folder, trigger=trigger, run_id=run_id,
                                replace_folder=replace_folder)
            if not holds_file(sync, triples=triples, reembed=reembed):
                hold.close()
            graph = graph_stage(settings, store, triples=triples, run_id=run_id or sync.run_id, progress=progress,
                                retry_failed=retry_failed)
            embed = embedding_stage(settings, store, reembed=reembed)
            report = assemble_report(sync, graph, embed, store, seconds=time.perf_counter() - started)
        report.row_group_merges = store.row_group_merges   # counted when the held connection has closed
        return report
