"""What an index run of a folder would have to do, found without running it (and without Dagster or LanceDB).

`pathrag index` asks this first. When nothing is pending it prints the report and launches no run, the way
a sensor tick that finds no change launches none; otherwise it runs the `index_folder` Dagster job as
always. So that the check can never disagree with the run, every part of it is the run's own decision
code, called on the same tables:

- the folder: ``scan_folder`` + ``plan_changes`` against the stored file hashes, refused by the same
  ``home_folder`` checks (what ``sync_folder`` does: another folder than the home's, or an empty or missing
  one, raises here, before any run is launched); a subfolder it cannot read also counts as work, so the run
  records the error, and so does a folder not yet recorded as the home's (a home made before the record);
- the chunk settings: ``chunking_current`` (what ``ensure_chunking`` checks before rechunking); the parser:
  ``parsing_current`` (a new parser reads every file once); the template lines: ``template_lines.is_current``
  (the set a sync stores after it wrote, recounted);
- extraction and the graph merge: ``extraction_backlog``, the counts of ``plan_extraction``'s own conditions
  (chunks without an ok record by this extractor, failed and empty ones included, since a run retries them;
  records of vanished chunks) plus records a crashed run left unmerged (``graph_dirty``) and a graph merged under
  other merge rules (``graph_rules``: name keys, provenance cap);
- embeddings and aliases: the run's embedding stage records a fingerprint of every row it synced to LanceDB,
  the alias table, the embedder and the alias setting (``embedding_stage.synced_state``) when it ends with
  nothing failed and no alias left to add, and deletes it before it touches LanceDB. The check recomputes the
  fingerprint with the same SQL; equal means the stage would embed, delete and alias nothing. LanceDB is not
  opened: the pipeline's embedding stage is its only writer, and a table folder that went missing counts as work.

``--triples`` and ``--reembed`` always run. The caller holds the home's index lock across the check and the
run that may follow (``storage.run_lock``), so no concurrent writer can change the answer in between.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from pathrag_pipeline.config import Settings
from pathrag_pipeline.index.embedding_stage import (
    SOURCES,
    EmbeddingReport,
    stored_synced_state,
    synced_state,
)
from pathrag_pipeline.index.extraction_stage import ExtractionBacklog, ExtractionStats, extraction_backlog
from pathrag_pipeline.index.pipeline import IndexReport, count_graph, describe_mode, documents_in_error
from pathrag_pipeline.ingest.folder_sync import (
    FolderScan,
    Plan,
    SyncReport,
    chunking_current,
    failed_under_other_limits,
    parsing_current,
    plan_changes,
    scan_folder,
    stored_file_hashes,
)
from pathrag_pipeline.ingest import template_lines
from pathrag_pipeline.ingest.home_folder import check_plan, folder_key, recorded_folder, require_folder
from pathrag_pipeline.ingest.hash_cache import HashCache
from pathrag_pipeline.storage.store import Store, StoreLockedError
from pathrag_pipeline.storage.vector_location import VectorLocation
from pathrag_pipeline.storage.vector_sums import changed_sizes
from pathrag_pipeline.storage.vector_store import SyncStats


@dataclass
class PendingWork:
    """The answer: ``reasons`` is empty when a run would change nothing."""

    scan: FolderScan
    plan: Plan
    reasons: list[str] = field(default_factory=list)
    backlog: ExtractionBacklog | None = None
    rows: dict[str, int] = field(default_factory=dict)   # rows per LanceDB table as last synced
    graph: dict[str, int] = field(default_factory=dict)  # pipeline.count_graph, when nothing is pending
    in_error: list[tuple[str, str]] = field(default_factory=list)   # pipeline.documents_in_error, likewise

    @property
    def nothing_to_do(self) -> bool:
        return not self.reasons


def find_pending_work(settings: Settings, folder: Path, extractor_id: str, embedder_id: str, *,
                      replace_folder: bool = False, retry_key: str = "", retry_failed: bool = False) -> PendingWork:
    """What an index run of ``folder`` with this extractor and embedder would do (see the module docstring).
    Reads the index read-only; never writes. Any doubt (no index yet, an old schema, a locked file) is work.
    Raises ``home_folder.FolderRefused`` / ``FolderMissing`` where the run would refuse the folder."""
    store = Store.for_settings(settings)
    require_folder(store, folder, settings.home)
    scan = scan_folder(folder, max_bytes=settings.max_file_bytes, cache=HashCache.for_home(settings.home, folder))
    if not store.path.exists():
        return PendingWork(scan, plan_changes(scan, {}), ["no index yet"])
    try:
        with store.connect(read_only=True) as con:
            return _pending(con, settings, folder, scan, extractor_id, embedder_id, replace_folder, retry_key,
                            retry_failed)
    except (duckdb.Error, StoreLockedError) as exc:
        return PendingWork(scan, plan_changes(scan, {}), [f"the index could not be checked ({exc})"])


def check_folder(settings: Settings, folder: Path, *, replace_folder: bool = False) -> None:
    """Raise where an index run of ``folder`` would refuse it, without the rest of the check: what
    `pathrag index --triples/--reembed` (which always run) ask before they launch a run."""
    store = Store.for_settings(settings)
    require_folder(store, folder, settings.home)
    if store.path.exists():
        with store.connect(read_only=True) as con:
            _checked_plan(con, settings, folder, scan_folder(folder, max_bytes=settings.max_file_bytes,
                                                             cache=HashCache.for_home(settings.home, folder)),
                          replace_folder)


def _checked_plan(con: duckdb.DuckDBPyConnection, settings: Settings, folder: Path, scan: FolderScan,
                  replace_folder: bool) -> Plan:
    plan = plan_changes(scan, stored_file_hashes(con))
    check_plan(con, scan, plan, folder, settings.home, replace=replace_folder)
    return plan


def _pending(con: duckdb.DuckDBPyConnection, settings: Settings, folder: Path, scan: FolderScan, extractor_id: str,
             embedder_id: str, replace_folder: bool, retry_key: str = "", retry_failed: bool = False) -> PendingWork:
    plan = _checked_plan(con, settings, folder, scan, replace_folder)
    work = PendingWork(scan, plan)
    reasons = work.reasons
    if recorded_folder(con) != folder_key(folder):
        reasons.append("the folder is not yet recorded as the home's")
    for label, files in (("new", plan.new), ("changed", plan.changed), ("deleted", plan.deleted)):
        if files:
            reasons.append(f"{len(files)} {label} file(s)")
    if scan.unreadable_dirs:
        reasons.append(f"{len(scan.unreadable_dirs)} unreadable folder(s) to report")
    if not chunking_current(con, settings):
        reasons.append("the chunk settings changed")
    if not parsing_current(con):
        reasons.append("the parser changed: every file is read again once")
    retry = [p for p in failed_under_other_limits(con, settings) if p in scan]
    if retry:
        reasons.append(f"{len(retry)} file(s) in error to read again under the changed size limits")
    if not template_lines.is_current(con):
        reasons.append("the folder's template lines were not counted for the documents indexed")
    work.backlog = backlog = extraction_backlog(con, extractor_id, retry_key, retry_failed)
    if backlog.pending:
        reasons.append(f"{backlog.pending} chunk(s) to extract (new, changed, failed or empty)")
    if backlog.stale_records:
        reasons.append(f"{backlog.stale_records} extraction record(s) of removed chunks")
    if backlog.graph_dirty:
        reasons.append("extraction records not yet merged into the graph")
    if backlog.rules_stale:
        reasons.append("the graph was merged under other merge rules (name keys or provenance cap): merging it again")
    if reasons:
        return work
    synced = stored_synced_state(con)
    current = synced_state(con, embedder=embedder_id, alias_threshold=settings.alias_embedding_threshold)
    if synced != current:
        reasons.append("embeddings or aliases not confirmed in sync with the graph")
        return work
    state = json.loads(current)
    work.rows = {name: state[name][0] for name in SOURCES}
    location = VectorLocation.for_settings(settings)
    missing = [name for name, n in work.rows.items() if n and not location.has_table(name)]
    if missing:
        reasons.append(f"LanceDB table(s) missing: {', '.join(missing)}")
    elif location.is_local:
        # a stat per vector file, no read: a file cut or removed since it was written is not "up to date"
        # (storage/vector_sums.py); the run that follows meets the damage and names it
        changed = changed_sizes(location.path)
        if changed:
            reasons.append(f"vector file(s) changed since they were written: {', '.join(changed[:3])}")
    work.graph, work.in_error = count_graph(con), documents_in_error(con)
    return work


def up_to_date_report(settings: Settings, folder: Path, *, replace_folder: bool = False,
                      retry_failed: bool = False) -> tuple[IndexReport | None, list[str]]:
    """``(report, [])`` when an index run of ``folder`` would change nothing: the report a run would have
    printed (every stage with nothing done); else ``(None, reasons)``. Launches nothing and writes nothing;
    raises where the run would refuse the folder (ingest/home_folder.py)."""
    started = time.perf_counter()
    mode = describe_mode(settings)
    work = find_pending_work(settings, folder, mode["extractor"], mode["embedder"], replace_folder=replace_folder,
                             retry_key=mode["retry_key"], retry_failed=retry_failed)
    if not work.nothing_to_do:
        return None, work.reasons
    sync = SyncReport("", str(folder), work.plan, [], time.perf_counter() - started, 0,
                      work.scan.unsupported_count, list(work.scan.unsupported), dict(work.scan.page_sources),
                      list(work.scan.linked_dirs), work.scan.ignored_files, work.scan.ignored_folders)
    extraction = ExtractionStats(run_id="", extractor=mode["extractor"], chunks=work.graph["chunks"],
                                 given_up=work.backlog.given_up if work.backlog is not None else 0)
    # dim 0: the vector width is in LanceDB's table metadata, which the check does not open (never printed)
    embeddings = EmbeddingReport(mode["embedder"], 0, {name: SyncStats(0, n, 0, n) for name, n in work.rows.items()})
    return IndexReport({k: mode[k] for k in ("mode", "extractor", "embedder")}, sync, extraction, None,
                       embeddings, None, work.graph, in_error=work.in_error), []
