"""`documents` and `chunks`: the folder's files parsed and chunked, in one step per run (not one run per file).

Each run syncs the whole folder (`ingest_stage`, the same call `run_indexing` makes): only new or changed
files are parsed, deleted ones are removed, unchanged ones cost a hash. Files that fail to parse are listed
in the materialisation's metadata, in the run's tags and by the `documents_parse_cleanly` asset check, which
fails (red in the UI) while any file of the folder is in error.

There are no per-file partitions: 10,000 files would mean 10,000 partition keys for the sensor to add, the
asset page to load and, with one run per partition, 10,000 run start-ups (see docs/scaling.md for figures).
"""

import dagster as dg

from assets.failures import one_line_failures

from assets.resources import PathragResource, RunReports
from pathrag_pipeline.index.pipeline import holds_file, ingest_stage

DUCKDB_POOL = "duckdb"
TRIGGER_TAG = "pathrag/trigger"
FAILED_FILES_TAG = "pathrag/failed_files"
FAILED_FILES_SHOWN = 50


def trigger_of(tags: dict[str, str]) -> str:
    """What started the run, for `ingest_runs.trigger`: cli, quickstart, python, sensor, schedule or dagster (UI)."""
    if TRIGGER_TAG in tags:
        return tags[TRIGGER_TAG]
    if "dagster/sensor_name" in tags:
        return "sensor"
    if "dagster/schedule_name" in tags:
        return "schedule"
    return "dagster"


def md_table(columns: list[str], rows: list[tuple], width: int | None = 120) -> dg.MetadataValue:
    """A markdown table for asset metadata; cells cut at ``width`` characters (None: whole, the UI wraps them)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = (str(v).replace("|", "\\|").replace("\n", " ") for v in row)
        lines.append("| " + " | ".join(c if width is None else c[:width] for c in cells) + " |")
    return dg.MetadataValue.md("\n".join(lines))


def _preview(con, sql: str, params: list | None = None) -> dg.MetadataValue:
    cursor = con.execute(sql, params or [])
    return md_table([d[0] for d in cursor.description], cursor.fetchall())


class IngestConfig(dg.Config):
    # Index the folder in place of the one the home holds (its documents not in the new folder are deleted),
    # or an empty folder while the home holds documents: refused without it (pathrag_pipeline/ingest/home_folder.py).
    replace: bool = False


@dg.multi_asset(
    specs=[
        dg.AssetSpec("documents", group_name="ingestion", kinds={"duckdb", "python"},
                     description="One row per document of the home's folder (PATHRAG_DOCS names a new "
                                 "home's): .txt/.md/.html/.pdf/.docx, and one per record of a .jsonl. Bad files "
                                 "get status 'error' with a message (the `documents_parse_cleanly` check fails); "
                                 "a previously indexed version is kept. Files gone from the folder are removed."),
        dg.AssetSpec("chunks", deps=["documents"], group_name="ingestion", kinds={"duckdb", "python"},
                     description="Token windows over each document (PATHRAG_CHUNK_TOKENS=1200, "
                                 "PATHRAG_CHUNK_OVERLAP=100 by default) with character offsets into "
                                 "documents.text. Chunk ids derive from content, so unchanged text keeps its ids."),
    ],
    check_specs=[dg.AssetCheckSpec(
        "documents_parse_cleanly", asset="documents",
        description="Every file of the folder parsed: fails, naming each file and its error, while any document "
                    "has status 'error' (broken PDF, empty file, malformed JSONL record ...).")],
    pool=DUCKDB_POOL,
    description="Sync the folder into `documents` and `chunks`: parse and chunk only new or changed files, "
                "remove deleted ones; one step for the whole batch of changes. The parse check runs in the same "
                "step (a separate check step costs a second of event writes per run). Fails, changing nothing, "
                "on a folder other than the one the home indexes or on an empty or missing folder while the "
                "home holds documents, unless the config sets `replace: true`.",
)
@one_line_failures
def ingest(context: dg.AssetExecutionContext, config: IngestConfig, pathrag: PathragResource,
           reports: dg.ResourceParam[RunReports]):
    settings = pathrag.settings()
    # the sync's plan, a small change's writes and the reads below on one connection (``RunReports.holding``:
    # `pathrag index` keeps it open for the next steps when the change is small)
    with reports.holding(pathrag.store()) as store:
        sync = ingest_stage(settings, store, trigger=trigger_of(context.run.tags),
                            run_id=context.run_id, replace_folder=config.replace)
        results = _results(context, store, sync, reports)
    if not holds_file(sync, triples=pathrag.triples_path()):
        reports.release()   # a large change: the next steps keep short connections and let readers in between
    yield from results   # Dagster records them (the connection closed, or kept for a small change's next steps)


def _results(context: dg.AssetExecutionContext, store, sync, reports: RunReports) -> list:
    """What the step reports: the two assets' materialisations (counts, previews) and the parse check."""
    reports.put("sync", sync)
    plan = sync.plan
    failed = [(r.rel_path, r.status, "; ".join(r.errors)) for r in sync.failed]
    for path, status, error in failed[:FAILED_FILES_SHOWN]:
        context.log.warning(f"{status}: {path}: {error}")
    if failed:
        context.instance.add_run_tags(context.run_id, {FAILED_FILES_TAG: str(len(failed))})
    for warning in sync.warnings[:FAILED_FILES_SHOWN]:
        context.log.warning(warning)
    with store.reading():   # the step's reads and its check on one read connection
        with store.connect(read_only=True) as con:
            docs = con.execute("SELECT count(*) FROM documents").fetchone()[0]
            chunks = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
            doc_preview = _preview(con, "SELECT id, title, format, status, left(error, 80) AS error, length(text) AS chars "
                                        "FROM documents ORDER BY updated_at DESC, id LIMIT 10")
            chunk_preview = _preview(con, "SELECT id, document_id, ordinal, section, token_count, left(text, 80) AS text "
                                          "FROM chunks ORDER BY document_id, ordinal LIMIT 10")
            template_count = con.execute("SELECT count(*) FROM template_lines").fetchone()[0]
        check = documents_parse_cleanly(store)
    documents = dg.MaterializeResult(asset_key="documents", metadata={
        "trigger": trigger_of(context.run.tags),
        "folder": sync.folder,
        "files_new": len(plan.new), "files_changed": len(plan.changed), "files_deleted": len(plan.deleted),
        "files_unchanged": len(plan.unchanged), "files_failed": len(failed),
        "failed_files": md_table(["file", "status", "error"], failed[:FAILED_FILES_SHOWN]) if failed
        else dg.MetadataValue.md("none"),
        "documents_written": sync.documents_written,
        "files_with_warnings": len(sync.warnings),
        "dagster/row_count": docs,
        "preview": doc_preview,
    })
    chunks_result = dg.MaterializeResult(asset_key="chunks", metadata={
        "chunks_written": sync.chunks_written, "dagster/row_count": chunks, "template_lines": template_count,
        "preview": chunk_preview})
    return [documents, chunks_result, check]


def documents_parse_cleanly(store) -> dg.AssetCheckResult:
    """The `documents_parse_cleanly` check's result for the documents table as it is now."""
    with store.connect(read_only=True) as con:
        rows = con.execute("SELECT path, id, error, text IS NOT NULL FROM documents WHERE status = 'error' "
                           "ORDER BY path, id").fetchall()
        total = con.execute("SELECT count(*) FROM documents").fetchone()[0]
    shown = [(path, doc_id, error, "yes" if kept else "no") for path, doc_id, error, kept in rows[:FAILED_FILES_SHOWN]]
    return dg.AssetCheckResult(
        asset_key="documents",
        check_name="documents_parse_cleanly",
        passed=not rows,
        severity=dg.AssetCheckSeverity.ERROR,
        description=(f"{len(rows)} of {total} documents failed to parse" if rows else f"all {total} documents parsed"),
        metadata={
            "failed_documents": len(rows),
            "failed_files": dg.MetadataValue.json(sorted({r[0] for r in rows})[:FAILED_FILES_SHOWN]),
            # whole messages (a cut one hides what to do): the UI wraps long cells
            "errors": md_table(["file", "document", "error", "last good version kept"], shown, width=None) if rows
            else dg.MetadataValue.md("none"),
        },
    )
