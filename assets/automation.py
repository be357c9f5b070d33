"""The sensor that watches the document folder and the schedule that reconciles it."""


import json

import dagster as dg

from assets.ingestion import DOCUMENT_PARTITIONS, reconcile_folder, remove_documents
from assets.resources import PathragResource
from pathrag_pipeline.ingest import folder_sync as ingest
from pathrag_pipeline.dagster_home import DUCKDB_TAG

RUN_TAGS = {DUCKDB_TAG: "write"}

ingest_job = dg.define_asset_job(
    "ingest_documents",
    selection=dg.AssetSelection.groups("ingestion"),
    partitions_def=DOCUMENT_PARTITIONS,
    tags=RUN_TAGS,
    description="Parse and chunk one document file (one partition).",
)


graph_job = dg.define_asset_job(
    "index_graph",
    selection=dg.AssetSelection.groups("graph"),
    tags=RUN_TAGS,
    description="Extract new or changed chunks, merge the graph, sync the embeddings (all incremental).",
)


query_job = dg.define_asset_job(
    "ask_questions",
    selection=dg.AssetSelection.groups("query"),
    tags=RUN_TAGS,
    description="Answer one question or a batch (run config: question / questions / questions_file, mode, "
                "PathRAG parameters); appends to queries, path_traces and retrieved_nodes.",
)


@dg.job(tags=RUN_TAGS, description="Remove the documents and chunks of files deleted from the folder.")
def remove_deleted_documents():
    remove_documents()


@dg.job(tags=RUN_TAGS, description="Index every new or changed file of the folder and drop deleted ones, in one run.")
def reconcile_documents():
    reconcile_folder()


@dg.sensor(
    jobs=[ingest_job, remove_deleted_documents, graph_job],
    minimum_interval_seconds=30,
    description=(
        "Watches PATHRAG_DOCS. New file: adds a `documents` partition and requests its run. Changed file: "
        "requests a run (the run key holds the content hash and a change counter, so an unchanged file never "
        "re-runs). Deleted file: removes its partition and requests a removal run. After any change, an "
        "`index_graph` run follows, which extracts only the changed chunks and re-embeds only changed rows."
    ),
)
def document_folder_sensor(context: dg.SensorEvaluationContext, pathrag: PathragResource) -> dg.SensorResult:
    settings = pathrag.settings()
    scan = ingest.scan_folder(settings.docs, max_bytes=settings.max_file_bytes)
    return evaluate_folder(scan, context.cursor, set(context.instance.get_dynamic_partitions(DOCUMENT_PARTITIONS.name)))


def evaluate_folder(scan: dict[str, ingest.FileEntry], cursor: str | None, partitions: set[str]) -> dg.SensorResult:
    """The sensor's decision as a pure function of the folder, the cursor and the known partitions.

    The cursor is {"files": {path: hash}, "seq": n}. Run keys carry the content hash and the cursor's
    sequence number: a retried tick (cursor not yet advanced) yields the same keys, so Dagster drops the
    duplicates, while a file edited back to an earlier version still gets a new run.
    """
    state = json.loads(cursor) if cursor else {}
    files: dict[str, str] = dict(state.get("files", {}))
    seq = int(state.get("seq", 0))
    runs: list[dg.RunRequest] = []
    for rel, entry in sorted(scan.items()):
        if files.get(rel) == entry.file_hash and rel in partitions:
            continue
        files[rel] = entry.file_hash
        runs.append(dg.RunRequest(
            job_name=ingest_job.name,
            partition_key=rel,
            run_key=f"{rel}@{entry.file_hash[:16]}#{seq}",
            tags=RUN_TAGS,
        ))
    # A file inside a subfolder the scan could not list is not known to be gone: keep it (and its partition).
    hidden = getattr(scan, "hidden_by_unreadable_dir", lambda _p: False)
    deleted = sorted(p for p in (set(files) | partitions) - set(scan) if not hidden(p))
    requests = []
    new_partitions = sorted(set(scan) - partitions)
    if new_partitions:
        requests.append(DOCUMENT_PARTITIONS.build_add_request(new_partitions))
    if deleted:
        gone = [p for p in deleted if p in partitions]
        if gone:
            requests.append(DOCUMENT_PARTITIONS.build_delete_request(gone))
        runs.append(dg.RunRequest(
            job_name=remove_deleted_documents.name,
            run_key=f"delete#{seq}",
            run_config={"ops": {"remove_documents": {"config": {"paths": deleted}}}},
            tags=RUN_TAGS,
        ))
        for p in deleted:
            files.pop(p, None)
    if runs:
        # Queued after the per-file runs (runs tagged pathrag/duckdb run one at a time, in order).
        runs.append(dg.RunRequest(job_name=graph_job.name, run_key=f"graph#{seq}", tags=RUN_TAGS))
        seq += 1
    return dg.SensorResult(run_requests=runs, dynamic_partitions_requests=requests,
                           cursor=json.dumps({"files": files, "seq": seq}, sort_keys=True))


reconcile_schedule = dg.ScheduleDefinition(
    name="reconcile_documents_nightly",
    job=reconcile_documents,
    cron_schedule="0 3 * * *",
    description=(
        "Every night at 03:00, reconcile the whole folder with the index in one run: catches anything the "
        "sensor missed (e.g. while it was off) and updates the `documents` partitions."
    ),
)
