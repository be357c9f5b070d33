"""Per-chunk extraction records (table ``extractions``) and the content-addressed extraction cache.

A record holds what extraction produced for one chunk; the graph tables are derived from the ok records
only (see ``graph_merge``), so replacing or deleting a record is how the graph changes. Results are found by
(chunk text hash, extractor identity) rather than chunk id, so a chunk whose id changed but whose text did
not (a document renamed, a paragraph moved) costs zero LLM calls.

Where a result is found (``cached_results``): the ok records of ``extractions`` themselves, and
``extraction_cache``, which holds the ok results of records that were replaced or deleted (moved there as they
go: ``_keep_results``). Before issue 23 every ok result was written to both tables as it was made: each record's
JSON twice, written to the log, checkpointed and merged twice, ~3% of a 100 MB offline build (253.6 s against
260.5 s, one run each; the extraction stage 167.4 s against 175.4 s).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterable

import duckdb
import pyarrow as pa

from pathrag_pipeline.index.extraction_models import ChunkExtraction
from pathrag_pipeline.index.mention_index import (MentionRows, chunks_with_mentions, ensure_mentions, forget_mentions,
                                                  refresh_mentions)
from pathrag_pipeline.storage.store import utc_now

STATUSES = ("ok", "failed", "empty")  # empty: nothing extracted from a chunk with content (see extraction_stage)



@dataclass(frozen=True)
class ExtractionRecord:
    """What extraction produced for one chunk: a result when status is 'ok', an error when 'failed', an
    empty result and the reason when 'empty'. Only 'ok' results are cached and merged."""

    chunk_id: str
    chunk_hash: str
    document_id: str
    extractor: str
    status: str = "ok"
    result: ChunkExtraction | None = None
    error: str | None = None
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    created_at: datetime = field(default_factory=utc_now)
    failed_runs: int | None = None   # failed/empty: runs in a row (this one included) with the same text, extractor, retry_key
    retry_key: str = ""
    result_json: str | None = None
    """The result already serialised (``ChunkExtraction.model_dump_json``), instead of ``result``: what the
    extraction stage holds while a write batch fills. A parsed result of dense text (110 entities and 110
    relations as pydantic models) costs ~0.5 MB of Python memory, its JSON ~34 KB: a batch of a thousand
    records held as models raised a 25 MB build's peak RSS by ~500 MiB (issue 23, flat memory)."""
    mentions: MentionRows | None = None
    """The result's mention rows when they were made with it (``prepare_mentions``, in an extraction worker
    process); else they are derived from the result when the record is written."""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"extraction status {self.status!r} for chunk {self.chunk_id!r} must be one of {STATUSES}")
        if self.status == "ok" and self.result is None and self.result_json is None:
            raise ValueError(f"extraction record for chunk {self.chunk_id!r} has status 'ok' but no result; "
                             "pass result=ChunkExtraction(...) or status='failed' with an error")
        if self.result is not None and self.result_json is not None:
            raise ValueError(f"extraction record for chunk {self.chunk_id!r}: pass result or result_json, not both")

    def serialised(self) -> str | None:
        """The result as stored in ``extractions.result`` (JSON), or None."""
        if self.result_json is not None:
            return self.result_json
        return self.result.model_dump_json() if self.result is not None else None


def write_records(con: duckdb.DuckDBPyConnection, records: Iterable[ExtractionRecord]) -> int:
    """Insert or replace the records (one per chunk id; the last wins) and cache the successful results.

    Rows go through one Arrow batch, not row-by-row inserts: a corpus writes tens of thousands of records.
    Returns the number of records written.
    """
    latest = {r.chunk_id: r for r in records}
    if not latest:
        return 0
    recs = list(latest.values())
    ensure_mentions(con)   # a home made before the mention tables gets them whole before they change
    existing = chunks_with_mentions(con, latest)
    batch = pa.table({
        "chunk_id": [r.chunk_id for r in recs],
        "chunk_hash": [r.chunk_hash for r in recs],
        "document_id": [r.document_id for r in recs],
        "extractor": [r.extractor for r in recs],
        "status": [r.status for r in recs],
        "error": pa.array([r.error for r in recs], pa.string()),
        "result": pa.array([r.serialised() for r in recs], pa.string()),
        "calls": pa.array([r.calls for r in recs], pa.int32()),
        "prompt_tokens": pa.array([r.prompt_tokens for r in recs], pa.int32()),
        "completion_tokens": pa.array([r.completion_tokens for r in recs], pa.int32()),
        "created_at": pa.array([r.created_at for r in recs], pa.timestamp("us")),
        "failed_runs": pa.array([r.failed_runs for r in recs], pa.int32()),
        "retry_key": pa.array([r.retry_key for r in recs], pa.string()),
    })
    _keep_results(con, existing)   # the results these records replace stay findable by their text
    con.register("_extraction_batch", batch)
    try:
        columns = ", ".join(batch.column_names)   # by name: homes made before a column was added hold it last
        con.execute(f"INSERT OR REPLACE INTO extractions ({columns}) SELECT {columns} FROM _extraction_batch")
    finally:
        con.unregister("_extraction_batch")
    refresh_mentions(con, {r.chunk_id: (r.document_id, _mention_source(r) if r.status == "ok" else None)
                           for r in recs}, existing=existing)
    return len(recs)


def _mention_source(record: ExtractionRecord) -> ChunkExtraction | str | MentionRows | None:
    if record.mentions is not None:
        return record.mentions
    return record.result if record.result is not None else record.result_json


def delete_records(con: duckdb.DuckDBPyConnection, chunk_ids: Iterable[str]) -> int:
    """Delete the records of these chunks (``extraction_cache`` keeps their results for when the text comes back)."""
    ids = sorted(set(chunk_ids))
    if not ids:
        return 0
    ensure_mentions(con)
    forget_mentions(con, ids)
    _keep_results(con, ids)
    return con.execute("DELETE FROM extractions WHERE chunk_id IN (SELECT unnest(?::VARCHAR[]))", [ids]).fetchone()[0]


def _keep_results(con: duckdb.DuckDBPyConnection, chunk_ids: Iterable[str]) -> None:
    """Copy the ok results of these chunks' records into ``extraction_cache`` before the records are replaced or
    deleted, so a text that comes back (a renamed file, an edit undone) is served without a call."""
    ids = sorted(set(chunk_ids))
    if ids:
        con.execute(
            f"""INSERT OR REPLACE INTO extraction_cache ({_CACHE_COLUMNS})
                SELECT chunk_hash, extractor, arg_max(result, created_at), arg_max(calls, created_at),
                       arg_max(prompt_tokens, created_at), arg_max(completion_tokens, created_at), max(created_at)
                FROM extractions WHERE status = 'ok' AND chunk_id IN (SELECT unnest(?::VARCHAR[]))
                GROUP BY chunk_hash, extractor""", [ids])


_CACHE_COLUMNS = "chunk_hash, extractor, result, calls, prompt_tokens, completion_tokens, created_at"


def cached_results(con: duckdb.DuckDBPyConnection, extractor: str, chunk_hashes: Iterable[str], *,
                   results: bool = True) -> dict[str, str | None]:
    """The stored result (JSON) of each of these texts by this extractor that has one: from an ok record of
    ``extractions`` (the same text under another chunk id) or from ``extraction_cache`` (a record since replaced or
    deleted); the latest when both hold one. ``results=False``: only which texts have one (values None, no JSON
    read)."""
    hashes = sorted(set(chunk_hashes))
    if not hashes:
        return {}
    value = "arg_max(result, created_at)" if results else "NULL"
    return dict(con.execute(
        f"""SELECT chunk_hash, {value} FROM (
                SELECT chunk_hash, result, created_at FROM extractions
                WHERE status = 'ok' AND extractor = $e AND chunk_hash IN (SELECT unnest($h::VARCHAR[]))
                UNION ALL
                SELECT chunk_hash, result, created_at FROM extraction_cache
                WHERE extractor = $e AND chunk_hash IN (SELECT unnest($h::VARCHAR[])))
            GROUP BY chunk_hash""", {"e": extractor, "h": hashes}).fetchall())


def cached_extraction(con: duckdb.DuckDBPyConnection, chunk_hash: str, extractor: str) -> ChunkExtraction | None:
    """The stored result for this text and extractor (``cached_results``), or None: a hit means no LLM call is
    needed."""
    found = cached_results(con, extractor, [chunk_hash]).get(chunk_hash)
    return ChunkExtraction.model_validate_json(found) if found else None


