"""Graph indexing assets: extractions → entities/relations (one multi-asset) → embeddings, with asset checks.

These are unpartitioned: the extraction stage reconciles the per-chunk records with the current `chunks`
table (only new or changed chunks are extracted, records of deleted chunks are dropped), and the merge
recomputes only the entity and relation keys those chunks touched.
"""

import contextlib

import dagster as dg

from assets.failures import one_line_failures

from assets.ingestion import DUCKDB_POOL, md_table
from assets.resources import PathragResource, RunReports
from pathrag_pipeline.index.embedding_stage import vector_key_drift
from pathrag_pipeline.index.pipeline import embedding_stage, graph_stage, holds_file
from pathrag_pipeline.storage.vector_store import VectorStore


def _md_table(con, sql: str) -> dg.MetadataValue:
    cursor = con.execute(sql)
    return md_table([d[0] for d in cursor.description], cursor.fetchall(), width=100)


def extraction_cost(mode: dict, x) -> dict:
    """What an extraction run cost, as the `extractions` materialisation shows it (also extract_fanout's)."""
    return {**mode, "pending_chunks": x.pending, "llm_calls": x.calls, "prompt_tokens": x.prompt_tokens,
            "completion_tokens": x.completion_tokens, "cache_hits": x.cache_hits,
            "cache_hit_rate": round(x.cache_hit_rate, 3), "failed_chunks": x.failed,
            "empty_chunks": x.empty, "trimmed_chunks": x.trimmed, "summary_calls": x.summary_calls,
            "given_up_chunks": x.given_up, "extract_processes": x.processes}


def graph_metadata(store, cost: dict) -> dict[str, dict]:
    """The metadata of the `extractions`, `entities` and `relations` materialisations after a write: row counts,
    previews and, on `extractions`, ``cost``. index_folder's `graph` asset and extract_fanout's write step record
    the same, so both show alike in the assets' history."""
    with store.connect(read_only=True) as con:
        counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for t in ("extractions", "entities", "relations")}
        undescribed = con.execute(
            "SELECT count(*) FROM entities WHERE coalesce(trim(description), '') = ''").fetchone()[0]
        previews = {
            "entities": _md_table(con, "SELECT name, type, mention_count, left(description, 80) AS description "
                                       "FROM entities ORDER BY mention_count DESC, name LIMIT 10"),
            "relations": _md_table(con, "SELECT s.name AS source, t.name AS target, r.keywords, r.strength "
                                        "FROM relations r JOIN entities s ON s.entity_key = r.src_key "
                                        "JOIN entities t ON t.entity_key = r.tgt_key "
                                        "ORDER BY r.strength DESC LIMIT 10"),
        }
    return {
        "extractions": {**cost, "dagster/row_count": counts["extractions"]},
        "entities": {"dagster/row_count": counts["entities"], "preview": previews["entities"],
                     "entities_without_description": undescribed},
        "relations": {"dagster/row_count": counts["relations"], "preview": previews["relations"]},
    }


@dg.multi_asset(
    specs=[
        dg.AssetSpec("extractions", deps=["chunks"], group_name="graph", kinds={"duckdb"},
                     description="Per-chunk extraction records (source of truth of the graph), cached by "
                                 "(chunk hash, extractor identity); failed chunks are retried next run."),
        dg.AssetSpec("entities", deps=["extractions"], group_name="graph", kinds={"duckdb"},
                     description="One row per real-world thing: normalised key, majority type, merged "
                                 "description, source chunk ids."),
        dg.AssetSpec("relations", deps=["extractions", "entities"], group_name="graph", kinds={"duckdb"},
                     description="One row per undirected link between two entities: merged keywords and "
                                 "descriptions, summed strength, source chunk ids."),
    ],
    check_specs=[
        dg.AssetCheckSpec("relations_have_entities", asset="relations",
                          description="No relation points to a missing entity."),
        dg.AssetCheckSpec("graph_has_provenance", asset="entities",
                          description="Every entity and relation names the chunks it came from."),
    ],
    pool=DUCKDB_POOL,
    description="Extract entities and relations from new or changed chunks (LLM or offline rules) and merge "
                "the graph; or import triples when the resource sets `triples`. Its checks run in the same step.",
)
@one_line_failures
def graph(context: dg.AssetExecutionContext, pathrag: PathragResource, reports: dg.ResourceParam[RunReports]):
    settings = pathrag.settings()
    with _held(pathrag.store(), reports, triples=pathrag.triples_path()) as store:
        yield from _graph(context, pathrag, reports, settings, store)


def _held(store, reports: RunReports, *, triples=None, reembed: bool = False):
    """The step's store in a block holding one DuckDB connection for its many short ones (``RunReports.holding``:
    `pathrag index` keeps the run's open across its steps) on the terms ``run_indexing`` holds it: a run whose
    ingest wrote few chunks (``pipeline.holds_file``), told by the ingest report of this in-process run;
    otherwise ``store`` as it is, after closing the run's connection if one is open. A run launched from the UI,
    sensor or schedule keeps no reports and holds nothing, as before."""
    sync = reports.get("sync")
    if sync is None or not holds_file(sync, triples=triples, reembed=reembed):
        reports.release()
        return contextlib.nullcontext(store)
    return reports.holding(store)


def _graph(context, pathrag: PathragResource, reports: RunReports, settings, store):
    stage = graph_stage(settings, store, triples=pathrag.triples_path(), run_id=context.run_id,
                        retry_failed=pathrag.retry_failed)
    reports.put("graph", stage)
    if stage.triples is not None:
        t = stage.triples
        cost = {**stage.mode, "records_written": t.records_written, "malformed_lines": t.malformed, "llm_calls": 0}
    else:
        cost = extraction_cost(stage.mode, stage.extraction)
        for err in stage.extraction.errors:
            context.log.warning(f"extraction failed: {err}")
    for key, metadata in graph_metadata(store, cost).items():
        yield dg.MaterializeResult(asset_key=key, metadata=metadata)
    yield relations_have_entities(store)
    yield graph_has_provenance(store)


class EmbeddingsConfig(dg.Config):
    reembed: bool = False   # drop the LanceDB tables and embed everything again (after an embedding-model change)


@dg.asset(
    deps=["entities", "relations", "chunks"],
    group_name="graph",
    kinds={"lancedb"},
    check_specs=[dg.AssetCheckSpec("embedding_keys_match", asset="embeddings",
                                    description="LanceDB keys equal DuckDB keys for entities, relations and chunks.")],
    pool=DUCKDB_POOL,
    description="LanceDB tables `entities`, `relations`, `chunks`: only rows whose embedded text changed are "
                "re-embedded; removed rows are deleted; each table records its model and dimension. Then "
                "near-duplicate entity names become aliases (their entities are re-merged and re-embedded).",
)
@one_line_failures
def embeddings(context: dg.AssetExecutionContext, config: EmbeddingsConfig, pathrag: PathragResource,
               reports: dg.ResourceParam[RunReports]):
    settings = pathrag.settings()
    with _held(pathrag.store(), reports, reembed=config.reembed) as store:
        yield from _embeddings(context, config, pathrag, reports, settings, store)


def _embeddings(context, config: EmbeddingsConfig, pathrag: PathragResource, reports: RunReports, settings, store):
    stage = embedding_stage(settings, store, reembed=config.reembed)
    reports.put("embeddings", stage)
    report = stage.embeddings
    meta = {"embedder": report.embedder, "dim": report.dim, "embedded": report.embedded,
            "alias_candidates": stage.aliases.candidates, "new_aliases": stage.aliases.new_aliases,
            "removed_aliases": stage.aliases.removed_aliases}
    for table, st in report.tables.items():
        meta[f"{table}_rows"] = st.total
        meta[f"{table}_embedded"] = st.embedded
        meta[f"{table}_deleted"] = st.deleted
        meta[f"{table}_failed"] = st.failed
    for err in report.errors:
        context.log.warning(f"embedding batch failed (retried next run): {err}")
    meta["dagster/row_count"] = sum(st.total for st in report.tables.values())
    yield dg.MaterializeResult(metadata=meta)
    yield embedding_keys_match(pathrag, store)   # on the run's held connection, when it holds one


def relations_have_entities(store) -> dg.AssetCheckResult:
    """No relation points to a missing entity."""
    with store.connect(read_only=True) as con:
        orphans = con.execute(
            "SELECT count(*) FROM relations r WHERE r.src_key NOT IN (SELECT entity_key FROM entities) "
            "OR r.tgt_key NOT IN (SELECT entity_key FROM entities)").fetchone()[0]
    return dg.AssetCheckResult(asset_key="relations", check_name="relations_have_entities", passed=orphans == 0,
                               metadata={"orphan_relations": orphans})


def graph_has_provenance(store) -> dg.AssetCheckResult:
    """Every entity and relation names the chunks it came from."""
    with store.connect(read_only=True) as con:
        missing = {
            t: con.execute(f"SELECT count(*) FROM {t} WHERE source_chunk_ids IS NULL OR len(source_chunk_ids) = 0"
                           ).fetchone()[0]
            for t in ("entities", "relations")
        }
    return dg.AssetCheckResult(asset_key="entities", check_name="graph_has_provenance",
                               passed=not any(missing.values()),
                               metadata={f"{t}_without_provenance": n for t, n in missing.items()})


def embedding_keys_match(pathrag: PathragResource, store=None) -> dg.AssetCheckResult:
    """LanceDB keys equal DuckDB keys for entities, relations and chunks."""
    drift = vector_key_drift(store or pathrag.store(), VectorStore.for_settings(pathrag.settings()))
    meta = {}
    for table, (missing, stale) in drift.items():
        meta[f"{table}_missing_in_lancedb"] = missing
        meta[f"{table}_stale_in_lancedb"] = stale
    passed = not any(missing or stale for missing, stale in drift.values())
    return dg.AssetCheckResult(asset_key="embeddings", check_name="embedding_keys_match", passed=passed,
                               metadata=meta)
