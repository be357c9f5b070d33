"""Jobs, the sensor that watches the document folder, and the nightly schedule.

Every job that writes DuckDB runs its steps in the run's own process (in-process executor): the steps
serialise on the DuckDB file anyway, and a subprocess per step costs seconds of Python and Dagster start-up.
"""

import hashlib
import json

import dagster as dg

from assets.ingestion import TRIGGER_TAG
from assets.resources import PathragResource
from assets.stale_runs import release_dead_runs
from pathrag_pipeline.dagster_home import DUCKDB_TAG
from pathrag_pipeline.ingest import folder_sync as ingest
from pathrag_pipeline.ingest.hash_cache import HashCache
from pathrag_pipeline.storage.store import Store, StoreLockedError

RUN_TAGS = {DUCKDB_TAG: "write"}

index_job = dg.define_asset_job(
    "index_folder",
    selection=dg.AssetSelection.groups("ingestion", "graph"),
    executor_def=dg.in_process_executor,
    tags=RUN_TAGS,
    description="The whole indexing pipeline over the folder in one run: sync new, changed and deleted files "
                "into documents and chunks, extract only new or changed chunks, merge the graph, sync the "
                "embeddings. What `pathrag index`, the sensor, the schedule and the UI all run.",
)

graph_job = dg.define_asset_job(
    "index_graph",
    selection=dg.AssetSelection.groups("graph"),
    executor_def=dg.in_process_executor,
    tags=RUN_TAGS,
    description="Extract new or changed chunks, merge the graph, sync the embeddings (all incremental).",
)

PENDING = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING]


@dg.sensor(
    job=index_job,
    minimum_interval_seconds=30,
    description=(
        "Watches the home's folder (PATHRAG_DOCS when set). When any file is new, changed or deleted since the "
        "last tick, requests ONE "
        "`index_folder` run for the whole batch of changes (the run itself works out which files changed). "
        "While an `index_folder` run is still queued, further changes join it instead of queueing another. "
        "Index runs made outside Dagster (`run_indexing` from Python) are reported as runless "
        "materialisations of the same assets, so the asset pages still show them."
    ),
)
def document_folder_sensor(context: dg.SensorEvaluationContext, pathrag: PathragResource) -> dg.SensorResult:
    # a run whose process died keeps the duckdb pool's slot and would block the run requested here forever
    for line in release_dead_runs(context.instance):
        context.log.warning(line)
    settings = pathrag.settings()
    scan = ingest.scan_folder(settings.docs, max_bytes=settings.max_file_bytes,
                              cache=HashCache.for_home(settings.home, settings.docs))
    queued = bool(context.instance.get_run_ids(
        dg.RunsFilter(job_name=index_job.name, statuses=PENDING), limit=1))
    state = json.loads(context.cursor) if context.cursor else {}
    reported = reported_outside_runs(context.instance)
    events, seen = outside_runs(Store(settings.duckdb_path, lock_timeout=1.0), state.get("ingest_seen"),
                                lambda run_id: run_id in reported or context.instance.get_run_by_id(run_id) is not None)
    result = evaluate_folder(scan, context.cursor, run_pending=queued)
    if result.run_requests and not context.cursor and _already_indexed(settings):
        # the first tick after the sensor is turned on has no cursor to compare with: a folder the home already
        # holds up to date gets no run (as `pathrag index` launches none), only a cursor
        result = dg.SensorResult(skip_reason=dg.SkipReason(
            f"the folder's {len(scan)} files are already indexed (nothing new, changed, deleted or pending); "
            "watching for changes from now"), cursor=result.cursor)
    cursor = json.loads(result.cursor) if result.cursor else dict(state)
    cursor["ingest_seen"] = seen
    events += asks_outside_runs(context.instance, Store(settings.duckdb_path, lock_timeout=1.0),
                                "document_folder_sensor")
    return dg.SensorResult(run_requests=result.run_requests, skip_reason=result.skip_reason,
                           asset_events=events, cursor=json.dumps(cursor, sort_keys=True))


def _already_indexed(settings) -> bool:
    """Whether an index run of the folder would change nothing (``pending_work``, read-only; False when it
    cannot tell, e.g. another process is writing: then the run is requested and finds out itself)."""
    from pathrag_pipeline.errors import PipelineError
    from pathrag_pipeline.index.pending_work import up_to_date_report

    if not settings.duckdb_path.exists():
        return False
    try:
        report, _ = up_to_date_report(settings, settings.docs)
    except (PipelineError, OSError):
        return False
    return report is not None


INDEX_ASSETS = ("documents", "chunks", "extractions", "entities", "relations", "embeddings")
ROW_COUNT = "dagster/row_count"
MAX_PROCESSES_SHOWN = 10


def asks_outside_runs(instance: dg.DagsterInstance, store: Store, reporter: str) -> list[dg.AssetMaterialization]:
    """Runless materialisations of the query tables for the asks logged since the catalog last recorded them
    (`pathrag ask`, Python, `pathrag serve`; the `ask_questions` job records its own, with the same row counts),
    so they show in the asset catalog with their row counts and who reported them. Costs an ask nothing: the
    sensor's tick and `pathrag dev`'s start read the log once for all of them. Nothing while another process
    writes the DuckDB file (the next tick catches up)."""
    from pathrag_pipeline.query.query_log import QUERY_TABLES, log_growth

    latest = instance.fetch_materializations(dg.AssetKey("queries"), limit=1).records
    mark = latest[0].asset_materialization.metadata.get(ROW_COUNT) if latest else None
    try:
        growth = log_growth(store, int(mark.value) if mark is not None else 0)
    except StoreLockedError:
        return []
    if growth is None:
        return []
    common = {"asks_since_last_report": growth["asks"], "modes": ", ".join(growth["modes"]),
              "answered_by": ", ".join(growth["models"]), "last_asked_at": growth["last_asked_at"],
              "reported_by": reporter,
              "asked_from": ", ".join(f"{source}: {n}" for source, n in growth["asked_from"].items()),
              "processes": ", ".join(growth["processes"][:MAX_PROCESSES_SHOWN])
              + (f" and {len(growth['processes']) - MAX_PROCESSES_SHOWN} more"
                 if len(growth["processes"]) > MAX_PROCESSES_SHOWN else "")}
    return [dg.AssetMaterialization(asset_key=table, metadata={**common, ROW_COUNT: growth["rows"][table]})
            for table in QUERY_TABLES]


def outside_runs(store: Store, since: str | None, is_dagster_run, limit: int = 50
                 ) -> tuple[list[dg.AssetMaterialization], str | None]:
    """Runless materialisations for the index runs in `ingest_runs` after ``since`` that Dagster did not run
    (`run_indexing` called from Python); returns them and the new high-water mark. Skips quietly while
    another process writes the DuckDB file (the next tick catches up)."""
    if not store.path.exists():
        return [], since
    try:
        with store.connect(read_only=True) as con:
            rows = con.execute(
                f"SELECT {_RUN_COLUMNS} FROM ingest_runs "
                "WHERE started_at > coalesce(?::TIMESTAMP, TIMESTAMP '1970-01-01') ORDER BY started_at LIMIT ?",
                [since, limit]).fetchall()
    except StoreLockedError:
        return [], since
    events = []
    for row in rows:
        if not is_dagster_run(row[0]):
            events.extend(_materialisations(row))
    return events, (rows[-1][1] if rows else since)


_RUN_COLUMNS = ("run_id, strftime(started_at, '%Y-%m-%d %H:%M:%S.%f'), trigger, folder, files_new, files_changed, "
                "files_deleted, files_failed, documents, chunks")


def _materialisations(row: tuple) -> list[dg.AssetMaterialization]:
    run_id, started, trigger, folder, new, changed, deleted, failed, docs, chunks = row
    meta = {"indexed_outside_dagster": True, "pathrag_run_id": run_id, "trigger": trigger, "started_at": started,
            "folder": folder or "", "files_new": new, "files_changed": changed, "files_deleted": deleted,
            "files_failed": failed, "documents_written": docs, "chunks_written": chunks}
    return [dg.AssetMaterialization(asset_key=key, metadata=meta) for key in INDEX_ASSETS]


def materialisations_of_run(store: Store, run_id: str) -> list[dg.AssetMaterialization]:
    """The runless materialisations of one index run in `ingest_runs` (what `pathrag index --runless` reports)."""
    with store.connect(read_only=True) as con:
        row = con.execute(f"SELECT {_RUN_COLUMNS} FROM ingest_runs WHERE run_id = ?", [run_id]).fetchone()
    return _materialisations(row) if row else []


def reported_outside_runs(instance: dg.DagsterInstance, limit: int = 200) -> set[str]:
    """pathrag run ids already reported as runless materialisations (by `pathrag index --runless`)."""
    records = instance.fetch_materializations(dg.AssetKey("documents"), limit=limit).records
    out = set()
    for record in records:
        mat = record.asset_materialization
        value = mat.metadata.get("pathrag_run_id") if mat is not None else None
        if value is not None:
            out.add(getattr(value, "value", value))
    return out


def folder_digest(scan: dict[str, ingest.FileEntry]) -> str:
    """One hash over every (path, content hash) of the folder: equal digests, same folder contents."""
    digest = hashlib.sha256()
    for rel in sorted(scan):
        digest.update(f"{rel}\0{scan[rel].file_hash}\n".encode())
    return digest.hexdigest()


def evaluate_folder(scan: dict[str, ingest.FileEntry], cursor: str | None, *,
                    run_pending: bool = False) -> dg.SensorResult:
    """The sensor's decision as a pure function of the folder scan and the cursor.

    The cursor is {"digest": folder digest, "files": count, "seq": n}: a few bytes whatever the folder's
    size. A changed digest requests one run whose key holds the digest and the sequence number, so a
    retried tick (cursor not yet advanced) yields the same key and Dagster drops the duplicate, while a
    folder edited back to an earlier state still gets a new run. When an index run is already queued
    (``run_pending``) it will see the change when it starts: the cursor advances, no run is added.
    """
    state = json.loads(cursor) if cursor else {}
    seq = int(state.get("seq", 0))
    digest = folder_digest(scan)
    if digest == state.get("digest"):
        return dg.SensorResult(skip_reason=dg.SkipReason(f"no change in {len(scan)} files"))
    new_cursor = json.dumps({"digest": digest, "files": len(scan), "seq": seq + 1}, sort_keys=True)
    if run_pending:
        return dg.SensorResult(skip_reason=dg.SkipReason("an index_folder run is already queued; it picks up "
                                                         "this change"), cursor=new_cursor)
    run = dg.RunRequest(run_key=f"folder@{digest[:16]}#{seq}", tags={**RUN_TAGS, TRIGGER_TAG: "sensor"})
    return dg.SensorResult(run_requests=[run], cursor=new_cursor)


@dg.schedule(
    name="reconcile_documents_nightly",
    job=index_job,
    cron_schedule="0 3 * * *",
    description=(
        "Every night at 03:00, one `index_folder` run over the whole folder: catches anything the sensor "
        "missed (e.g. while it was off). Runs left behind by a dead process are released first."
    ),
)
def reconcile_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    for line in release_dead_runs(context.instance):
        context.log.warning(line)
    return dg.RunRequest(tags={**RUN_TAGS, TRIGGER_TAG: "schedule"})
