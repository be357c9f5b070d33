"""`documents` and `chunks`: per-document assets (dynamic partitions keyed by the file's relative path).

Both call the same core functions as `pathrag index`, so a file indexed by the CLI and then by a
sensor-launched run is written once: unchanged content is detected by hash and costs nothing.
"""


import dagster as dg

from assets.resources import PathragResource
from pathrag_pipeline.ingest import folder_sync as ingest
from pathrag_pipeline.storage.store import transaction

DOCUMENT_PARTITIONS = dg.DynamicPartitionsDefinition(name="documents")
DUCKDB_POOL = "duckdb"


def _preview(con, sql: str, params: list) -> dg.MetadataValue:
    cursor = con.execute(sql, params)
    cols = [d[0] for d in cursor.description]
    rows = cursor.fetchall()
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in rows:
        cells = [str(v).replace("|", "\\|").replace("\n", " ")[:120] for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return dg.MetadataValue.md("\n".join(lines))


@dg.asset(
    partitions_def=DOCUMENT_PARTITIONS,
    group_name="ingestion",
    kinds={"duckdb", "python"},
    pool=DUCKDB_POOL,
    description=(
        "One partition per file of the watched folder (PATHRAG_DOCS), keyed by its relative path. "
        "Parses .txt/.md/.html/.pdf/.docx/.jsonl into rows of the DuckDB `documents` table (one row per "
        "document; a JSONL file holds one per record). Bad files get status 'error' with a message; a "
        "previously indexed version is kept. A file that no longer exists is removed."
    ),
)
def documents(context: dg.AssetExecutionContext, pathrag: PathragResource) -> dg.MaterializeResult:
    settings = pathrag.settings()
    rel = context.partition_key
    entry = ingest.scan_file(settings.docs, rel, max_bytes=settings.max_file_bytes)
    store = pathrag.store()
    if entry is None:
        with store.connect() as con, transaction(con):
            removed = ingest.delete_path(con, rel)
        return dg.MaterializeResult(metadata={"status": "deleted", "documents_removed": removed,
                                              "dagster/row_count": 0})
    parsed = ingest.parse_entry(entry, max_bytes=settings.max_file_bytes, max_text_bytes=settings.max_text_bytes)
    with store.connect() as con:
        with transaction(con):
            [result], _ = ingest.write_documents(con, [parsed])
        rows = con.execute("SELECT count(*) FROM documents WHERE path = ?", [rel]).fetchone()[0]
        preview = _preview(con, "SELECT id, title, format, status, error, length(text) AS chars "
                                "FROM documents WHERE path = ? ORDER BY id LIMIT 10", [rel])
    for err in result.errors:
        context.log.warning(f"{rel}: {err}")
    return dg.MaterializeResult(
        metadata={
            "status": result.status,
            "errors": dg.MetadataValue.json(result.errors),
            "documents_written": result.documents_written,
            "documents_deleted": result.documents_deleted,
            "dagster/row_count": rows,
            "preview": preview,
        }
    )


@dg.asset(
    partitions_def=DOCUMENT_PARTITIONS,
    deps=[documents],
    group_name="ingestion",
    kinds={"duckdb", "python"},
    pool=DUCKDB_POOL,
    description=(
        "Token windows over each document of the partition's file (PATHRAG_CHUNK_TOKENS=1200, "
        "PATHRAG_CHUNK_OVERLAP=100 by default), written to the DuckDB `chunks` table with character "
        "offsets into documents.text. Chunk ids derive from content, so unchanged text keeps its ids."
    ),
)
def chunks(context: dg.AssetExecutionContext, pathrag: PathragResource) -> dg.MaterializeResult:
    settings = pathrag.settings()
    rel = context.partition_key
    with pathrag.store().connect() as con:
        texts = ingest.stored_texts(con, path=rel)
        doc_ids = list(texts)
        with transaction(con):
            written = sum(ingest.write_chunks(con, texts, max_tokens=settings.chunk_tokens,
                                              overlap=settings.chunk_overlap).values())
        tokens = con.execute(
            "SELECT coalesce(sum(token_count), 0) FROM chunks WHERE list_contains(?, document_id)", [doc_ids]
        ).fetchone()[0]
        preview = _preview(con, "SELECT id, document_id, ordinal, token_count, char_start, char_end, "
                                "left(text, 80) AS text FROM chunks WHERE list_contains(?, document_id) "
                                "ORDER BY document_id, ordinal LIMIT 10", [doc_ids])
    return dg.MaterializeResult(
        metadata={"dagster/row_count": written, "tokens": int(tokens), "documents": len(doc_ids), "preview": preview}
    )


@dg.op(
    pool=DUCKDB_POOL,
    description="Run the whole indexing pipeline over the folder in one run and sync the `documents` partitions.",
)
def reconcile_folder(context: dg.OpExecutionContext, pathrag: PathragResource) -> dg.Output:
    from pathlib import Path

    from pathrag_pipeline.index.pipeline import run_indexing

    settings = pathrag.settings()
    report = run_indexing(settings, trigger="schedule", triples=Path(pathrag.triples) if pathrag.triples else None)
    plan = report.sync.plan
    sync_partitions(context.instance, sorted(plan.new + plan.changed + plan.unchanged))
    for res in report.sync.results:
        if res.status != "deleted":
            for key in ("documents", "chunks"):
                context.log_event(dg.AssetMaterialization(asset_key=key, partition=res.rel_path,
                                                          metadata={"status": res.status, "via": "reconcile"}))
    for key in ("extractions", "entities", "relations", "embeddings"):
        context.log_event(dg.AssetMaterialization(asset_key=key, metadata={"via": "reconcile"}))
    x = report.extraction
    return dg.Output(
        None,
        metadata={"new": len(plan.new), "changed": len(plan.changed), "deleted": len(plan.deleted),
                  "unchanged": len(plan.unchanged), "failed": len(report.sync.failed),
                  "chunks_written": report.sync.chunks_written, **report.mode, **report.graph,
                  "llm_calls": x.calls if x else 0, "embedded": report.embeddings.embedded},
    )


def sync_partitions(instance: dg.DagsterInstance, paths: list[str]) -> tuple[list[str], list[str]]:
    """Make the `documents` dynamic partitions equal to ``paths``; returns (added, removed)."""
    existing = set(instance.get_dynamic_partitions(DOCUMENT_PARTITIONS.name))
    added = [p for p in paths if p not in existing]
    removed = sorted(existing - set(paths))
    if added:
        instance.add_dynamic_partitions(DOCUMENT_PARTITIONS.name, added)
    for p in removed:
        instance.delete_dynamic_partition(DOCUMENT_PARTITIONS.name, p)
    return added, removed


class RemoveDocumentsConfig(dg.Config):
    paths: list[str]


@dg.op(pool=DUCKDB_POOL, description="Remove the documents and chunks of files deleted from the folder.")
def remove_documents(context: dg.OpExecutionContext, config: RemoveDocumentsConfig, pathrag: PathragResource) -> dg.Output:
    removed = 0
    with pathrag.store().connect() as con, transaction(con):
        for path in config.paths:
            removed += ingest.delete_path(con, path)
    context.log.info(f"removed {removed} documents of {len(config.paths)} deleted files")
    return dg.Output(None, metadata={"files": len(config.paths), "documents_removed": removed})
