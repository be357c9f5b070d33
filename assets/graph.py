"""Graph indexing assets: extractions → entities/relations (one multi-asset) → embeddings, with asset checks.

These are unpartitioned: the extraction stage reconciles the per-chunk records with the current `chunks`
table (only new or changed chunks are extracted, records of deleted chunks are dropped), and the merge
recomputes only the entity and relation keys those chunks touched.
"""

import dagster as dg

from assets.ingestion import DUCKDB_POOL, chunks
from assets.resources import PathragResource
from pathrag_pipeline.llm.embedding import embedder_from_settings
from pathrag_pipeline.index.embedding_stage import embedding_rows, sync_embeddings
from pathrag_pipeline.index.llm_extraction import extractor_from_settings
from pathrag_pipeline.index.extraction_stage import run_extraction
from pathrag_pipeline.llm.client import llm_from_settings
from pathrag_pipeline.index.triples_import import import_triples
from pathrag_pipeline.storage.vector_store import VectorStore


def _md_table(con, sql: str) -> dg.MetadataValue:
    cursor = con.execute(sql)
    cols = [d[0] for d in cursor.description]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in cursor.fetchall():
        lines.append("| " + " | ".join(str(v).replace("|", "\\|").replace("\n", " ")[:100] for v in row) + " |")
    return dg.MetadataValue.md("\n".join(lines))


@dg.multi_asset(
    specs=[
        dg.AssetSpec("extractions", deps=[chunks], group_name="graph", kinds={"duckdb"},
                     description="Per-chunk extraction records (source of truth of the graph), cached by "
                                 "(chunk hash, extractor identity); failed chunks are retried next run."),
        dg.AssetSpec("entities", deps=["extractions"], group_name="graph", kinds={"duckdb"},
                     description="One row per real-world thing: normalised key, majority type, merged "
                                 "description, source chunk ids."),
        dg.AssetSpec("relations", deps=["extractions", "entities"], group_name="graph", kinds={"duckdb"},
                     description="One row per undirected link between two entities: merged keywords and "
                                 "descriptions, summed strength, source chunk ids."),
    ],
    pool=DUCKDB_POOL,
    description="Extract entities and relations from new or changed chunks (LLM or offline rules) and merge "
                "the graph; or import triples when the resource sets `triples`.",
)
def graph(context: dg.AssetExecutionContext, pathrag: PathragResource):
    settings = pathrag.settings()
    store = pathrag.store()
    if pathrag.triples:
        stats = import_triples(store, pathrag.triples)
        cost = {"mode": "imported triples", "extractor": stats.extractor, "records_written": stats.records_written,
                "malformed_lines": stats.malformed, "llm_calls": 0}
    else:
        llm = llm_from_settings(settings)
        extractor = extractor_from_settings(settings, llm, gleaning=settings.gleaning)
        stats = run_extraction(store, extractor, max_concurrency=settings.llm_max_concurrency,
                               run_id=context.run_id[:12])
        cost = {"mode": "llm" if llm else "offline", "extractor": stats.extractor, "pending_chunks": stats.pending,
                "llm_calls": stats.calls, "prompt_tokens": stats.prompt_tokens,
                "completion_tokens": stats.completion_tokens, "cache_hits": stats.cache_hits,
                "cache_hit_rate": round(stats.cache_hit_rate, 3), "failed_chunks": stats.failed,
                "empty_chunks": stats.empty, "summary_calls": stats.summary_calls}
        if llm is not None:
            cost["llm_concurrency_at_end"] = llm.concurrency_limit
        for err in stats.errors:
            context.log.warning(f"extraction failed: {err}")
    with store.connect() as con:
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
    yield dg.MaterializeResult(asset_key="extractions", metadata={**cost, "dagster/row_count": counts["extractions"]})
    yield dg.MaterializeResult(asset_key="entities", metadata={
        "dagster/row_count": counts["entities"], "preview": previews["entities"],
        "entities_without_description": undescribed})
    yield dg.MaterializeResult(asset_key="relations", metadata={
        "dagster/row_count": counts["relations"], "preview": previews["relations"]})


@dg.asset(
    deps=["entities", "relations", chunks],
    group_name="graph",
    kinds={"lancedb"},
    pool=DUCKDB_POOL,
    description="LanceDB tables `entities`, `relations`, `chunks`: only rows whose embedded text changed are "
                "re-embedded; removed rows are deleted; each table records its model and dimension.",
)
def embeddings(context: dg.AssetExecutionContext, pathrag: PathragResource) -> dg.MaterializeResult:
    settings = pathrag.settings()
    embedder = embedder_from_settings(settings)
    report = sync_embeddings(pathrag.store(), VectorStore(settings.lancedb_path), embedder)
    meta = {"embedder": report.embedder, "dim": report.dim, "embedded": report.embedded}
    for table, st in report.tables.items():
        meta[f"{table}_rows"] = st.total
        meta[f"{table}_embedded"] = st.embedded
        meta[f"{table}_deleted"] = st.deleted
        meta[f"{table}_failed"] = st.failed
    for err in report.errors:
        context.log.warning(f"embedding batch failed (retried next run): {err}")
    meta["dagster/row_count"] = sum(st.total for st in report.tables.values())
    return dg.MaterializeResult(metadata=meta)


@dg.asset_check(asset="relations", description="No relation points to a missing entity.")
def relations_have_entities(pathrag: PathragResource) -> dg.AssetCheckResult:
    with pathrag.store().connect() as con:
        orphans = con.execute(
            "SELECT count(*) FROM relations r WHERE r.src_key NOT IN (SELECT entity_key FROM entities) "
            "OR r.tgt_key NOT IN (SELECT entity_key FROM entities)").fetchone()[0]
    return dg.AssetCheckResult(passed=orphans == 0, metadata={"orphan_relations": orphans})


@dg.asset_check(asset="entities", description="Every entity and relation names the chunks it came from.")
def graph_has_provenance(pathrag: PathragResource) -> dg.AssetCheckResult:
    with pathrag.store().connect() as con:
        missing = {
            t: con.execute(f"SELECT count(*) FROM {t} WHERE source_chunk_ids IS NULL OR len(source_chunk_ids) = 0"
                           ).fetchone()[0]
            for t in ("entities", "relations")
        }
    return dg.AssetCheckResult(passed=not any(missing.values()),
                               metadata={f"{t}_without_provenance": n for t, n in missing.items()})


@dg.asset_check(asset=embeddings, description="LanceDB keys equal DuckDB keys for entities, relations and chunks.")
def embedding_keys_match(pathrag: PathragResource) -> dg.AssetCheckResult:
    settings = pathrag.settings()
    vectors = VectorStore(settings.lancedb_path)
    expected = embedding_rows(pathrag.store())
    meta, passed = {}, True
    for table, rows in expected.items():
        duck = {r[0] for r in rows}
        lance = vectors.keys(table)
        meta[f"{table}_missing_in_lancedb"] = len(duck - lance)
        meta[f"{table}_stale_in_lancedb"] = len(lance - duck)
        passed = passed and duck == lance
    return dg.AssetCheckResult(passed=passed, metadata=meta)
