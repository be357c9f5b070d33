"""The extraction stage: bring the per-chunk extraction records and the graph in line with the chunks table.

Why it is shaped this way:
- Work is planned from the tables, not from what changed in this run: a chunk is pending when it has no
  record by the current extractor identity for its current text, or its record failed. Unchanged re-runs
  therefore cost nothing, a new model or prompt version re-extracts everything, and failed chunks are
  retried on the next run (and only they).
- DuckDB admits one writer process, so no connection is held while the LLM works: planning, each batch of
  results and the final graph merge each use their own short connection. (A small offline run may share one
  held connection between them: ``Store.holding``, decided by ``pipeline.run_indexing``.)
- Results are written batch by batch, each batch in one transaction that also records which graph keys it
  made stale (``pathrag_meta`` key ``graph_dirty``). A crash loses at most the batch in flight; the next run
  does not repeat finished chunks and still merges the keys the crashed run left dirty.
- The same text under another chunk id (a renamed file, a repeated paragraph) is served from the stored results
  (an ok record of ``extractions``, or ``extraction_cache`` for records since replaced or deleted:
  ``extraction_records.cached_results``) with zero calls; within a run each distinct text is extracted once.
- A chunk whose output stays invalid (``LLMOutputError``), or whose extractor raises anything else, is
  recorded ``failed`` with its error and the rest of the run goes on. An endpoint that stays unreachable for several chunks in a row aborts the run instead
  of failing every remaining chunk; what finished is kept. When the LLM client itself stops (repeated
  timeouts against a serial server, an unsupported response_format: ``LLMStoppedError``) the run stops at
  once, without waiting for the chunks in flight to run through their retries, and says what to set.
- A chunk with content from which the model extracted nothing, even when asked again, is recorded
  ``empty`` (counted in ``ExtractionStats.empty``) and retried on the next run like a failed one.
- LLM usage is written to ``llm_usage`` as the calls are made (the run's row is rewritten with each batch of
  results, at least every ``min_flush_seconds``), so a killed run's calls are not missing from it.
- Each failed chunk gives one warning line on the ``pathrag_pipeline.index`` logger, no more.
- A CPU-bound extractor (the offline rules: ``cpu_bound``) runs in ``processes`` worker processes instead of
  threads, which the GIL would hold to one core (issue 23), once a run has ``PROCESS_MIN_TEXTS`` texts per
  process to extract (a smaller run would spend longer starting them). Records, cache and graph are written by
  this process as with threads, so the tables are the same as one process gives. Should the worker processes
  stop (one killed for memory, say), the texts they held and the rest are extracted in this process, one warning
  says so, and the run goes on.
- What one chunk stores is capped, whatever the extractor (``extraction_models.result_cap``): a larger result
  keeps its first entities and relations that fit, the record says so in its ``error`` column (status stays
  'ok'), the chunk is counted in ``ExtractionStats.trimmed`` and one warning names the chunk and its document.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Callable, Iterator, Literal

import duckdb

from pathrag_pipeline.index.llm_extraction import Extractor, ExtractionOutcome, LLMExtractor, LLMSummariser
from pathrag_pipeline.index.extraction_models import (
    RESULT_BYTES_PER_TEXT_BYTE,
    RESULT_MIN_CAP_BYTES,
    ChunkExtraction,
    result_cap,
)
from pathrag_pipeline.index.extraction_records import ExtractionRecord, cached_results, delete_records, write_records
from pathrag_pipeline.index.mention_index import MentionRows, entries, prepare_mentions
from pathrag_pipeline.index.graph_merge import (
    DEFAULT_MAX_DESCRIPTION_TOKENS,
    DeferredSummaries,
    MergeStats,
    Summarise,
    keys_for_chunks,
    make_summaries,
    merge_keys,
    store_summaries,
)
from pathrag_pipeline.llm.client import LLMClient, LLMError, LLMStoppedError, LLMUnavailableError, Usage
from pathrag_pipeline.storage import paid_work
from pathrag_pipeline.storage.store import Store, get_meta, set_meta, transaction, utc_now
from pathrag_pipeline.storage.write_pacing import WRITE_OVERHEAD_SHARE, WritePacer
from pathrag_pipeline.text.names import NAME_KEY_VERSION
from pathrag_pipeline.worker_processes import worker_pool

GRAPH_DIRTY_META = "graph_dirty"
"""pathrag_meta key: JSON {"chunks", "entities", "relations"} of records written but not yet merged."""
NAME_KEYS_META = "name_key_version"
"""pathrag_meta key: the merge rules the graph tables were last merged under (``graph_rules``: the
``names.NAME_KEY_VERSION`` and the provenance cap)."""


def graph_rules() -> str:
    """The rules a merged row depends on beyond its records: the name-key version and ``MAX_SOURCE_IDS``. A graph
    merged under other rules is merged again in full (homes made before the cap hold every chunk id)."""
    from pathrag_pipeline.index import graph_merge

    return f"{NAME_KEY_VERSION}/sources:{graph_merge.MAX_SOURCE_IDS}"

Progress = Callable[[int, int], None]
EXTRACT_STAGES = ("extract", "extract-gleaning")
log = logging.getLogger("pathrag_pipeline.index")



@dataclass(frozen=True)
class PendingChunk:
    chunk_id: str
    chunk_hash: str
    document_id: str
    text: str | None         # None until loaded: ``run_extraction`` reads texts batch by batch (``_with_texts``)
    title: str | None
    failed_runs: int = 0     # runs in a row this text already failed with this extractor and retry key


@dataclass
class ExtractionPlan:
    """What a run must do: chunks to extract (cached results already attached) and records to drop."""

    chunks: int                                 # chunks in the table
    pending: list[PendingChunk]
    cached: set[str]                             # chunk hashes with a cached result for the current extractor
    removed_chunk_ids: list[str]                 # records whose chunk no longer exists
    replaced: int                                # pending chunks whose old record came from another extractor
    given_up: int = 0                            # chunks not retried: failed MAX_FAILED_RUNS runs in a row


@dataclass
class ExtractionStats:
    run_id: str
    extractor: str
    chunks: int = 0
    pending: int = 0
    cache_hits: int = 0
    extracted: int = 0
    failed: int = 0
    empty: int = 0                                 # chunks with content the model extracted nothing from
    trimmed: int = 0                               # chunks whose result was cut to the per-chunk cap (result_cap)
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    removed_chunks: int = 0
    replaced: int = 0
    merge: MergeStats | None = None
    summary_calls: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)   # the first few failure messages, chunk id first
    given_up: int = 0                              # chunks left alone: failed MAX_FAILED_RUNS runs in a row
    processes: int = 1                             # processes the extractor ran in (1: this one, with threads)

    @property
    def cache_hit_rate(self) -> float:
        """Share of pending chunks answered without calling the extractor (0.0 when nothing was pending)."""
        return self.cache_hits / self.pending if self.pending else 0.0


# ---- planning ------------------------------------------------------------------------------------------

# A chunk is pending when it has no record by this extractor ($extractor) for its current text, or its
# record is not 'ok' (failed or empty: retried), unless that text already failed MAX_FAILED_RUNS runs in a row
# with this extractor and retry key ($give_up: the limit, or never with --retry-failed). A record is stale
# when its chunk is gone.
MAX_FAILED_RUNS = 3
MAX_BATCH_RECORDS = 4096
"""A batch is written once it holds this many records, however cheap its last write was: bounded memory."""
MAX_BATCH_MENTION_ROWS = 300_000
"""... or once its records' prepared mention rows (``PreparedOutcome.mentions``) reach this many: ~29 MB as Arrow
(~96 bytes a row, ~690 rows per record of the offline extractor on the scale corpus)."""
TEXT_BATCH = 1024
"""Pending chunks whose texts are read (``_with_texts``) or whose cached results are written at a time: a run
holds the ids of every pending chunk, never the text of more than this many (issue 23, flat memory: the whole
corpus's text, held from the plan to the end of a full build, was 300 MB of Python strings for 300 MB)."""
_SAME_FAILURE = """e.status IN ('failed', 'empty') AND e.extractor = $extractor AND e.chunk_hash = c.content_hash
                   AND coalesce(e.retry_key, '') = $retry_key"""
_GIVEN_UP = f"coalesce({_SAME_FAILURE} AND coalesce(e.failed_runs, 0) >= $give_up, false)"
_JOINS = """FROM chunks c
           LEFT JOIN documents d ON d.id = c.document_id
           LEFT JOIN extractions e ON e.chunk_id = c.id"""
_PENDING_FROM = f"""{_JOINS}
           WHERE (e.chunk_id IS NULL OR e.extractor <> $extractor OR e.chunk_hash <> c.content_hash
                  OR e.status <> 'ok') AND NOT {_GIVEN_UP}"""
_STALE_RECORDS = "FROM extractions WHERE chunk_id NOT IN (SELECT id FROM chunks)"


def _params(extractor_id: str, retry_key: str, retry_failed: bool) -> dict:
    return {"extractor": extractor_id, "retry_key": retry_key,
            "give_up": 2**31 - 1 if retry_failed else MAX_FAILED_RUNS}


def plan_extraction(con: duckdb.DuckDBPyConnection, extractor_id: str, retry_key: str = "",
                    retry_failed: bool = False, *, texts: bool = True) -> ExtractionPlan:
    """Find pending chunks, stale records and cache hits for ``extractor_id``; chunks whose text failed
    ``MAX_FAILED_RUNS`` runs in a row with this extractor and ``retry_key`` (the LLM mode and output cap) are
    left alone (counted in ``given_up``) unless ``retry_failed``: a model that cannot extract a chunk would
    otherwise spend the same calls on it every run, forever. ``texts`` False leaves the chunks' texts unread
    (None): ``run_extraction`` reads them batch by batch."""
    params = _params(extractor_id, retry_key, retry_failed)
    rows = con.execute(
        f"""SELECT c.id, c.content_hash, c.document_id, {'c.text' if texts else 'NULL'}, d.title,
                  e.chunk_id IS NOT NULL AS has_record, e.extractor,
                  CASE WHEN {_SAME_FAILURE} THEN coalesce(e.failed_runs, 0) ELSE 0 END
           {_PENDING_FROM}
           ORDER BY c.document_id, c.ordinal""",
        params,
    ).fetchall()
    pending = [PendingChunk(r[0], r[1], r[2], r[3], r[4], r[7]) for r in rows]
    given_up = con.execute(f"SELECT count(*) {_JOINS} WHERE {_GIVEN_UP}", params).fetchone()[0]
    replaced = sum(1 for r in rows if r[5] and r[6] != extractor_id)
    removed = [r[0] for r in con.execute(f"SELECT chunk_id {_STALE_RECORDS} ORDER BY chunk_id").fetchall()]
    hashes = sorted({p.chunk_hash for p in pending})
    cached = set(cached_results(con, extractor_id, hashes, results=False))
    total = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
    return ExtractionPlan(total, pending, cached, removed, replaced, given_up)


@dataclass(frozen=True)
class ExtractionBacklog:
    """What the extraction stage would find to do, counted without loading any text."""

    pending: int            # chunks to extract (new, changed, by another extractor, failed or empty)
    stale_records: int      # records whose chunk is gone
    graph_dirty: bool       # records written but not yet merged into entities/relations (a crashed run)
    given_up: int = 0       # chunks left alone after failing MAX_FAILED_RUNS runs in a row (not work)
    rules_stale: bool = False   # the graph was merged under other merge rules (``graph_rules``): merged again

    @property
    def empty(self) -> bool:
        return not (self.pending or self.stale_records or self.graph_dirty or self.rules_stale)


def extraction_backlog(con: duckdb.DuckDBPyConnection, extractor_id: str, retry_key: str = "",
                       retry_failed: bool = False) -> ExtractionBacklog:
    """Counts of ``plan_extraction``'s work (same conditions) plus unmerged records: zero means
    ``run_extraction`` would extract nothing, drop nothing and merge nothing."""
    params = _params(extractor_id, retry_key, retry_failed)
    pending = con.execute(f"SELECT count(*) {_PENDING_FROM}", params).fetchone()[0]
    given_up = con.execute(f"SELECT count(*) {_JOINS} WHERE {_GIVEN_UP}", params).fetchone()[0]
    stale = con.execute(f"SELECT count(*) {_STALE_RECORDS}").fetchone()[0]
    return ExtractionBacklog(pending, stale, any(_load_dirty(con).values()), given_up, graph_rules_stale(con))


# ---- persisting ---------------------------------------------------------------------------------------

def _load_dirty(con: duckdb.DuckDBPyConnection) -> dict[str, set[str]]:
    raw = get_meta(con, GRAPH_DIRTY_META)
    data = json.loads(raw) if raw else {}
    return {k: set(data.get(k, [])) for k in ("chunks", "entities", "relations")}


def persist_changes(con: duckdb.DuckDBPyConnection, removed_chunk_ids: list[str],
                    records: list[ExtractionRecord]) -> None:
    """Write records and delete stale ones in one transaction, remembering the graph keys this makes stale.

    The keys the old records mentioned are captured before they are overwritten (from the mention tables, so
    no record is parsed: a record too large to load can still be deleted); the chunks are remembered so the keys
    of their new records can be found at merge time. ``merge_dirty`` consumes both.
    """
    touched = set(removed_chunk_ids) | {r.chunk_id for r in records}
    if not touched:
        return
    with transaction(con):
        before_e, before_r = keys_for_chunks(con, touched)
        delete_records(con, removed_chunk_ids)
        write_records(con, records)
        mark_dirty(con, chunks=touched, entities=before_e, relations=before_r)


def mark_dirty(con: duckdb.DuckDBPyConnection, *, chunks: set[str] = frozenset(), entities: set[str] = frozenset(),
               relations: set[str] = frozenset()) -> None:
    """Remember chunks whose records changed and graph keys to merge again at the next ``merge_dirty`` (in the
    caller's transaction)."""
    dirty = _load_dirty(con)
    dirty["chunks"] |= chunks
    dirty["entities"] |= entities
    dirty["relations"] |= relations
    set_meta(con, GRAPH_DIRTY_META, json.dumps({k: sorted(v) for k, v in dirty.items()}))


def graph_rules_stale(con: duckdb.DuckDBPyConnection) -> bool:
    """The graph was merged under other rules (``graph_rules``; none stored: before they were recorded). An
    empty graph is never stale. Reads only (``pending_work`` asks it on a read-only connection)."""
    if get_meta(con, NAME_KEYS_META) == graph_rules():
        return False
    return con.execute("SELECT count(*) FROM entities").fetchone()[0] > 0


def _rules_stale_or_recorded(con: duckdb.DuckDBPyConnection) -> bool:
    """``graph_rules_stale``; an empty graph records the current rules."""
    if graph_rules_stale(con):
        return True
    if get_meta(con, NAME_KEYS_META) != graph_rules():
        set_meta(con, NAME_KEYS_META, graph_rules())
    return False


def merge_dirty(con: duckdb.DuckDBPyConnection, summarise: Summarise | None = None, *,
                max_description_tokens: int = DEFAULT_MAX_DESCRIPTION_TOKENS,
                summary_model: str | None = None) -> MergeStats | None:
    """Recompute the graph keys that records written since the last merge touched; None when none were.
    A graph merged under other name-key rules is merged again in full (from the stored records, no
    extraction), so an entity keyed by the old rules is replaced by the one the current rules give."""
    with transaction(con):
        dirty = _load_dirty(con)
        if _rules_stale_or_recorded(con):
            log.info("the merge rules changed since this graph was merged (name keys and provenance cap %s, were "
                     "%s): merging the whole graph again from its extraction records", graph_rules(),
                     get_meta(con, NAME_KEYS_META))
            stats = merge_keys(con, None, None, summarise=summarise, max_description_tokens=max_description_tokens,
                               summary_model=summary_model)
            if isinstance(summarise, DeferredSummaries):
                summarise.entity_keys |= {k for (k,) in con.execute("SELECT entity_key FROM entities").fetchall()}
                summarise.relation_keys |= {k for (k,) in con.execute("SELECT relation_key FROM relations").fetchall()}
            set_meta(con, NAME_KEYS_META, graph_rules())
            con.execute("DELETE FROM pathrag_meta WHERE key = ?", [GRAPH_DIRTY_META])
            return stats
        if not any(dirty.values()):
            return None
        after_e, after_r = keys_for_chunks(con, dirty["chunks"])
        entity_keys, relation_keys = dirty["entities"] | after_e, dirty["relations"] | after_r
        if isinstance(summarise, DeferredSummaries):
            summarise.entity_keys |= entity_keys
            summarise.relation_keys |= relation_keys
        stats = merge_keys(con, entity_keys, relation_keys, summarise=summarise,
                           max_description_tokens=max_description_tokens, summary_model=summary_model,
                           by_difference=True)
        con.execute("DELETE FROM pathrag_meta WHERE key = ?", [GRAPH_DIRTY_META])
    return stats


def record_usage(con: duckdb.DuckDBPyConnection, *, run_id: str, stage: str, extractor: str, items: int,
                 calls: int, prompt_tokens: int, completion_tokens: int, cache_hits: int, failed: int,
                 seconds: float) -> None:
    """Write the llm_usage row of this run and stage (one per run and stage: a later write replaces it, so
    the row can be kept current while the run goes on)."""
    con.execute("DELETE FROM llm_usage WHERE run_id = ? AND stage = ?", [run_id, stage])
    con.execute(
        "INSERT INTO llm_usage VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [run_id, stage, extractor, items, calls, prompt_tokens, completion_tokens, cache_hits, failed, seconds, utc_now()],
    )


# ---- the run ------------------------------------------------------------------------------------------

def _record(chunk: PendingChunk, extractor_id: str, *, result: ChunkExtraction | None = None,
            error: str | None = None, calls: int = 0, prompt_tokens: int = 0,
            completion_tokens: int = 0, status: str | None = None, retry_key: str = "",
            counts: bool = True, result_json: str | None = None,
            mentions: MentionRows | None = None) -> ExtractionRecord:
    """The record of ``chunk``; a failed or empty one carries the runs in a row it failed (``counts``: False for
    a failure that is not the chunk's, an unreachable or stopped endpoint, which keeps the count). The result
    is held as JSON until written (``result_json``, as given for a cached one)."""
    status = status or ("failed" if error is not None else "ok")
    failed_runs = None if status == "ok" else chunk.failed_runs + (1 if counts else 0)
    return ExtractionRecord(
        chunk_id=chunk.chunk_id, chunk_hash=chunk.chunk_hash, document_id=chunk.document_id,
        extractor=extractor_id, status=status,
        result_json=result.model_dump_json() if result is not None else result_json,
        error=error,
        calls=calls, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
        failed_runs=failed_runs, retry_key=retry_key, mentions=mentions,
    )


@dataclass(frozen=True)
class PreparedOutcome:
    """An extractor's outcome for one text made ready to write: the result cut to the chunk's cap, as JSON, with
    its mention rows (``prepare_mentions``). Made where the extraction ran, so with worker processes the JSON and
    the ~700 mention rows of a dense chunk are built on every core, not by the one process that writes (it spent
    a third of a 10 MB build's extraction stage building them while the workers waited for it)."""

    status: str                     # 'ok' or 'empty' (ExtractionOutcome.status)
    note: str | None                # ExtractionOutcome.note
    calls: int
    prompt_tokens: int
    completion_tokens: int
    result_json: str
    trimmed: str | None             # what the cap cut, when it cut
    mentions: MentionRows | None    # for 'ok' results


def _prepared(outcome: ExtractionOutcome, text: str) -> PreparedOutcome:
    """``outcome`` cut to the cap of a chunk of ``text`` (``result_cap``: what one record may store, whatever the
    extractor; what was cut becomes the record's note and is logged), serialised, with its mention rows."""
    status = getattr(outcome, "status", "ok")
    extraction = outcome.extraction
    result_json = extraction.model_dump_json()
    cap = result_cap(text)
    trimmed = None
    if len(result_json.encode("utf-8")) > cap:
        kept, size = extraction.capped(cap)
        trimmed = (f"result trimmed to the per-chunk cap: {size:,} bytes of JSON for {len(text.encode()):,} "
                   f"bytes of text, over {cap:,} ({RESULT_BYTES_PER_TEXT_BYTE} per byte of text, at least "
                   f"{RESULT_MIN_CAP_BYTES:,}); kept the first {len(kept.entities)} of {len(extraction.entities)} "
                   f"entities and {len(kept.relations)} of {len(extraction.relations)} relations")
        extraction, result_json = kept, kept.model_dump_json()
    mentions = prepare_mentions(*entries(extraction)) if status == "ok" else None
    return PreparedOutcome(status, outcome.note, outcome.calls, outcome.prompt_tokens, outcome.completion_tokens,
                           result_json, trimmed, mentions)


def _extract_prepared(extractor: Extractor, text: str, title: str | None) -> PreparedOutcome:
    return _prepared(extractor.extract(text, title), text)


def summariser_for(extractor: Extractor, max_description_tokens: int = DEFAULT_MAX_DESCRIPTION_TOKENS
                   ) -> LLMSummariser | None:
    """The description summariser matching the extractor: its LLM when it has one, else None (offline)."""
    if isinstance(extractor, LLMExtractor):
        return LLMSummariser(extractor.client, max_tokens=max_description_tokens)
    return None


PROCESS_MIN_TEXTS = 32
"""Texts to extract per worker process below which a CPU-bound extractor runs in threads instead: starting a
process (spawned, importing the package) costs about a second."""

PROCESS_QUEUE_PER_WORKER = 256
"""Texts submitted ahead per worker process (threads: 2 per call in flight). The process that writes the records
submits no text while it writes a batch, and at 100 MB a batch write takes ~0.7-1 s; the workers must not run dry
meanwhile. With 2 texts queued per worker they idled through every write, and with 32 (~0.3 s of offline
extraction per worker) still through most of each: `pathrag bench scale` on 82bb804 against the run before it,
the 100 MB build's extraction stage 203.4 -> 186.4 s; with 256 (~2 s of work per worker) it went 167.4 -> 156.0 s
(one run each, same machine, issue 23). Offline extraction never aborts on an endpoint, so a deeper queue wastes
nothing; it holds a text (~5 kB) and, once done, its result (~100 kB with its mention rows) per slot until this
process collects it: at most ~50 MB with two workers, whatever the corpus."""

_WORKER_EXTRACTOR: Extractor | None = None


def _start_worker(extractor: Extractor) -> None:
    global _WORKER_EXTRACTOR
    _WORKER_EXTRACTOR = extractor


PROCESS_TASK_TEXTS = 8
"""Texts per task sent to a worker process: each task costs the writing process a submit (pickling, waking the
pool's thread) and a result to collect, ~0.3 ms, against ~8 ms to extract a dense chunk offline (issue 23). One text
a task -> 8: a 100 MB build's extraction stage 149.9 -> 131.2 s; 32 gave 131.7 s (one run each, same machine)."""


@dataclass(frozen=True)
class _Raised:
    """What the extractor raised on one text in a worker process, sent back in place of its outcome: the texts
    of a task fail one by one, as in threads, and an exception need not survive pickling."""

    kind: str
    message: str


def _extract_in_worker(items: list[tuple[str, str | None]]) -> list[PreparedOutcome | _Raised]:
    assert _WORKER_EXTRACTOR is not None
    out: list[PreparedOutcome | _Raised] = []
    for text, title in items:
        try:
            out.append(_extract_prepared(_WORKER_EXTRACTOR, text, title))
        except Exception as exc:  # noqa: BLE001 - one text's crash fails that text only
            out.append(_Raised(type(exc).__name__, str(exc)))
    return out


def _executor(extractor: Extractor, texts: int, max_concurrency: int, processes: int
              ) -> tuple[ThreadPoolExecutor | ProcessPoolExecutor, int, bool]:
    """(pool, calls in flight it runs at once, whether it is a process pool) for this extractor and run size."""
    workers = min(processes, texts // PROCESS_MIN_TEXTS) if getattr(extractor, "cpu_bound", False) else 1
    if workers > 1:
        return worker_pool(workers, _start_worker, (extractor,)), workers, True
    return ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="extract"), max_concurrency, False


def run_extraction(store: Store, extractor: Extractor, *, max_concurrency: int = 4, batch_size: int = 16,
                   progress: Progress | None = None, summarise: Summarise | None | Literal["auto"] = "auto",
                   max_description_tokens: int = DEFAULT_MAX_DESCRIPTION_TOKENS,
                   abort_after_unavailable: int = 8, min_flush_seconds: float = 1.0,
                   run_id: str | None = None, retry_failed: bool = False, processes: int = 1,
                   write_share: float | None = WRITE_OVERHEAD_SHARE) -> ExtractionStats:
    """Extract every pending chunk, write the records in batches, merge the touched graph keys, log usage.

    ``summarise`` condenses descriptions past ``max_description_tokens``; "auto" uses the extractor's LLM
    (``summariser_for``), None cuts them to the budget instead. ``progress(done, total)`` is called after each
    written batch. ``abort_after_unavailable`` consecutive chunks failing with an unreachable endpoint stop
    the run with ``LLMUnavailableError`` (finished chunks are kept). A batch is written once it holds
    ``batch_size`` records and ``min_flush_seconds`` passed since the last write, or longer when writes are
    costly, so their fixed cost stays about ``write_share`` of the time (``storage.write_pacing``; None: never
    longer); a batch of MAX_BATCH_RECORDS is written at once. Each write costs a DuckDB open and checkpoint,
    negligible next to LLM calls but dominant for the offline extractor.
    ``processes``: worker processes for a CPU-bound extractor (see the module docstring).
    """
    if max_concurrency < 1 or batch_size < 1:
        raise ValueError(f"max_concurrency={max_concurrency} and batch_size={batch_size} must both be at least 1")
    started = time.perf_counter()
    if summarise == "auto":
        summarise = summariser_for(extractor, max_description_tokens)
    identity = extractor.identity
    stats = ExtractionStats(run_id=run_id or uuid.uuid4().hex[:12], extractor=identity)
    client = getattr(extractor, "client", None)
    meter = _UsageMeter(client if isinstance(client, LLMClient) else None, stats, started)
    if meter.client is not None:
        meter.client.resume()  # a new run tries the endpoint again even if an earlier run stopped it
    retry_key = getattr(extractor, "retry_key", "")
    with store.connect() as con:
        # paid results the DuckDB file does not hold (it was lost, damaged and moved aside, or predates them) come
        # back from the paid-work log first: the plan below then finds them cached (storage/paid_work.py)
        restored = paid_work.sync(con, store.path.parent)
        plan = plan_extraction(con, identity, retry_key, retry_failed, texts=False)
    if restored["extractions"] or restored["summaries"]:
        log.warning("read %d extraction result(s) and %d summary(ies) back from %s: no LLM call is made for them",
                    restored["extractions"], restored["summaries"], paid_work.FILE_NAME)
    stats.chunks, stats.pending, stats.given_up = plan.chunks, len(plan.pending), plan.given_up
    if plan.given_up:
        log.warning("%d chunk(s) failed %d runs in a row with this model and settings and are not retried until "
                    "their text, the model or the settings change; `pathrag index --retry-failed` retries them",
                    plan.given_up, MAX_FAILED_RUNS)
    stats.removed_chunks, stats.replaced = len(plan.removed_chunk_ids), plan.replaced

    # Cache hits and stale records first, in one connection (a transaction per TEXT_BATCH records, the stored
    # JSON passed through unparsed): no extractor call needed for them.
    hits = [c for c in plan.pending if c.chunk_hash in plan.cached]
    if hits or plan.removed_chunk_ids:
        with store.connect() as con:
            persist_changes(con, plan.removed_chunk_ids, [])
            for start in range(0, len(hits), TEXT_BATCH):
                batch = hits[start:start + TEXT_BATCH]
                stored = cached_results(con, identity, {c.chunk_hash for c in batch})
                persist_changes(con, [], [_record(c, identity, result_json=stored[c.chunk_hash]) for c in batch])
    stats.cache_hits = len(hits)

    # One extractor call per distinct text; its result serves every pending chunk with that text.
    by_hash: dict[str, list[PendingChunk]] = {}
    for chunk in plan.pending:
        if chunk.chunk_hash not in plan.cached:
            by_hash.setdefault(chunk.chunk_hash, []).append(chunk)
    stats.cache_hits += sum(len(group) - 1 for group in by_hash.values())
    abort = None
    if by_hash:
        # a caller holding the file (``Store.holding``: a small run) lets go of it while a model extracts, which
        # may take minutes; the plan before and the merge after use the held connection (the offline rules keep it).
        # Texts read in one go (at most TEXT_BATCH) are read before letting go, and the records the loop has not
        # written by its end are written after taking it back: on the held connection, not on two of their own
        # (a one-file edit: two DuckDB opens and a write's close fewer, ~30 ms). Paid results reach the paid-work
        # log as each batch ends, before any DuckDB write, as before.
        releasing = meter.client is not None
        batch = _Batch(store, meter, min_flush_seconds, write_share)
        texts = (iter(list(_with_texts(store, iter(by_hash.values())))) if releasing and len(by_hash) <= TEXT_BATCH
                 else _with_texts(store, iter(by_hash.values())))
        with store.released() if releasing else contextlib.nullcontext():
            abort, done = _extract_all(extractor, texts, len(by_hash), batch, stats,
                                       max_concurrency=max_concurrency, batch_size=batch_size, progress=progress,
                                       abort_after_unavailable=abort_after_unavailable, meter=meter,
                                       processes=processes, last_write=not releasing)
        if releasing:
            batch.flush()   # what the loop left, on the held connection again (nothing left: no connection)
            if progress:
                progress(done, len(by_hash))

    merge_started = time.perf_counter()
    summary_meter = _SummaryMeter(summarise, stats, merge_started)
    # LLM summaries are never made while the DuckDB file is held: the merge records what needs one, the
    # summaries are made with no connection open, then the same keys are merged again from the cache.
    deferred = DeferredSummaries() if summarise is not None else None
    with store.connect() as con:
        stats.merge = merge_dirty(con, deferred, max_description_tokens=max_description_tokens)
    if deferred is not None and deferred.requests:
        summary_meter.items = len(deferred.requests)
        last_write = [time.perf_counter()]

        def summary_progress(done: int) -> None:
            # keep the 'summarise' row current as calls are made, like 'extract' (a killed run keeps them)
            if time.perf_counter() - last_write[0] >= min_flush_seconds and summary_meter.changed():
                with store.connect() as con:
                    summary_meter.write(con)
                last_write[0] = time.perf_counter()

        with store.released():
            summaries, errors = make_summaries(deferred.requests, summarise, max_description_tokens, max_concurrency,
                                               on_done=summary_progress)
        stats.errors.extend(errors[:5])
        model = getattr(summarise, "identity", None)
        paid = paid_work.append(store.path.parent, paid_work.summary_lines(summaries, model))
        with store.connect() as con:
            store_summaries(con, summaries, model)
            if paid:
                paid_work.mark_read(con, store.path.parent)
            with transaction(con):
                second = merge_keys(con, deferred.entity_keys, deferred.relation_keys,
                                    max_description_tokens=max_description_tokens, by_difference=True)
                # A key whose summary failed keeps the cut text for now and stays dirty, so the next run asks
                # for its summary again and ends where a rebuild would (issue 23), not at the key's next change.
                failed = [k for h in deferred.requests if h not in summaries for k in deferred.keys_of.get(h, ())]
                if failed:
                    mark_dirty(con, entities={k for kind, k in failed if kind == "entity"},
                               relations={k for kind, k in failed if kind == "relation"})
        stats.merge.summaries_called += len(deferred.requests) - len(errors)
        stats.merge.summaries_cached = second.summaries_cached - len(summaries)
    store.settle_row_groups()   # a large run merges the row groups its batches wrote (storage/row_group_merging)
    stats.seconds = time.perf_counter() - started
    with store.connect() as con:
        meter.write(con, final=True)
        if stats.merge is not None and (stats.merge.summaries_called or stats.merge.summaries_cached
                                        or summary_meter.written is not None):
            summary_meter.items = stats.merge.summaries_called + stats.merge.summaries_cached
            summary_meter.cache_hits = stats.merge.summaries_cached
            summary_meter.write(con, final=True)
            stats.summary_calls = summary_meter.written.calls
    if isinstance(abort, LLMStoppedError):
        raise type(abort)(
            f"extraction stopped: {abort.last_error}. {stats.extracted} chunks finished and are kept in the "
            "graph; run again to continue.",
            stage=abort.stage, model=abort.model, last_error=abort.last_error, usage=abort.usage,
        )
    if abort is not None:
        raise LLMUnavailableError(
            f"extraction stopped: {abort_after_unavailable} chunks in a row could not reach the LLM endpoint "
            f"(last error: {abort.last_error}). {stats.extracted} chunks finished and are kept in the graph; fix "
            "the endpoint (PATHRAG_LLM_BASE_URL: is the server up?) and run again to continue.",
            stage=abort.stage, model=abort.model, last_error=abort.last_error, usage=abort.usage,
        )
    return stats


class _UsageMeter:
    """Keeps the run's 'extract' row of llm_usage current while the run goes on.

    With an LLM client the figures are the client's own running totals for the extraction stages (every
    HTTP request counted when it is made, failed and abandoned calls included), so a run killed midway
    leaves its calls in the table; without one (offline) they are the stage's sums."""

    def __init__(self, client: LLMClient | None, stats: ExtractionStats, started: float) -> None:
        self.client = client
        self.stats = stats
        self.started = started
        self.base = self._client_usage()
        self.written: Usage | None = None

    def _client_usage(self) -> Usage:
        if self.client is None:
            return Usage()
        by_stage = self.client.usage_by_stage()
        return sum((by_stage.get(s, Usage()) for s in EXTRACT_STAGES), Usage())

    def usage(self) -> Usage:
        if self.client is None:
            s = self.stats
            return Usage(calls=s.calls, prompt_tokens=s.prompt_tokens, completion_tokens=s.completion_tokens)
        now = self._client_usage()
        return Usage(calls=now.calls - self.base.calls, prompt_tokens=now.prompt_tokens - self.base.prompt_tokens,
                     completion_tokens=now.completion_tokens - self.base.completion_tokens)

    def changed(self) -> bool:
        return self.client is not None and self.usage() != self.written

    def write(self, con: duckdb.DuckDBPyConnection, *, final: bool = False) -> None:
        usage = self.usage()
        if not final and usage == self.written:
            return
        s = self.stats
        record_usage(con, run_id=s.run_id, stage="extract", extractor=s.extractor, items=s.pending,
                     calls=usage.calls, prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                     cache_hits=s.cache_hits, failed=s.failed + s.empty,
                     seconds=s.seconds if final else time.perf_counter() - self.started)
        self.written = usage


class _SummaryMeter:
    """Keeps the run's 'summarise' row of llm_usage current while summaries are made.

    With an LLM summariser the figures are its client's running totals for the 'summarise' stage (every HTTP
    request counted when it is made, failed ones included), so a run killed while summarising leaves its
    calls in the table; another summarise callable reports its own ``usage`` if it keeps one."""

    def __init__(self, summarise: Summarise | None, stats: ExtractionStats, started: float) -> None:
        self.summarise = summarise
        client = getattr(summarise, "client", None)
        self.client = client if isinstance(client, LLMClient) else None
        self.stats = stats
        self.started = started
        self.items = 0
        self.cache_hits = 0
        self.base = self._now()
        self.written: Usage | None = None

    def _now(self) -> Usage:
        if self.client is not None:
            return self.client.usage_by_stage().get("summarise", Usage())
        usage = getattr(self.summarise, "usage", None)
        return Usage(calls=usage.calls, prompt_tokens=usage.prompt_tokens,
                     completion_tokens=usage.completion_tokens) if usage is not None else Usage()

    def usage(self) -> Usage:
        now = self._now()
        return Usage(calls=now.calls - self.base.calls, prompt_tokens=now.prompt_tokens - self.base.prompt_tokens,
                     completion_tokens=now.completion_tokens - self.base.completion_tokens)

    def changed(self) -> bool:
        return self.usage() != self.written

    def write(self, con: duckdb.DuckDBPyConnection, *, final: bool = False) -> None:
        usage = self.usage()
        record_usage(con, run_id=self.stats.run_id, stage="summarise",
                     extractor=getattr(self.summarise, "identity", None) or "summarise", items=self.items,
                     calls=usage.calls, prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                     cache_hits=self.cache_hits, failed=0, seconds=time.perf_counter() - self.started)
        self.written = usage


def _with_texts(store: Store, groups: Iterator[list[PendingChunk]]) -> Iterator[list[PendingChunk]]:
    """The groups (chunks of one text) with their first chunk's text read, ``TEXT_BATCH`` groups per short
    read-only connection. A chunk gone since the plan (none is, while this run holds the index lock) is skipped."""
    while batch := list(itertools.islice(groups, TEXT_BATCH)):
        with store.connect(read_only=True) as con:
            texts = dict(con.execute("SELECT id, text FROM chunks WHERE id IN (SELECT unnest(?::VARCHAR[]))",
                                     [[g[0].chunk_id for g in batch]]).fetchall())
        for group in batch:
            if group[0].chunk_id in texts:
                yield [dataclasses.replace(group[0], text=texts[group[0].chunk_id]), *group[1:]]
        del batch, texts


_Outcome = tuple[list[PendingChunk], "PreparedOutcome | None", "Exception | _Raised | None"]


class _Tasks:
    """The extraction tasks in flight: a thread pool (one text a task) or worker processes (PROCESS_TASK_TEXTS
    texts a task), fed lazily from ``queue`` (at most 2 x the pool's width in flight, PROCESS_QUEUE_PER_WORKER per
    worker process) so an abort or crash leaves little work running. When the worker processes stop (one killed
    for memory, say: the pool is broken and takes no task) extraction goes on in this process, one text at a
    time, as a run too small for processes would."""

    def __init__(self, extractor: Extractor, queue: Iterator[list[PendingChunk]], total: int, max_concurrency: int,
                 processes: int, stats: ExtractionStats) -> None:
        self.extractor, self.queue, self.stats = extractor, queue, stats
        self.pool, in_flight, self.in_processes = _executor(extractor, total, max_concurrency, processes)
        stats.processes = in_flight if self.in_processes else 1
        self.window = (PROCESS_QUEUE_PER_WORKER if self.in_processes else 2) * in_flight   # groups in flight
        self.per_task = PROCESS_TASK_TEXTS if self.in_processes else 1
        self.running: dict[Future, list[list[PendingChunk]]] = {}   # each task's groups (one with threads)
        self.in_queue = 0   # groups in flight

    def _submit(self, groups: list[list[PendingChunk]]) -> Future:
        if self.in_processes:   # their outcomes come back as a list
            return self.pool.submit(_extract_in_worker, [(group[0].text, group[0].title) for group in groups])
        return self.pool.submit(_extract_prepared, self.extractor, groups[0][0].text, groups[0][0].title)

    def in_this_process(self, exc: BaseException) -> None:
        if self.in_processes:
            log.warning("extraction goes on in this process: its worker processes stopped (%s)", exc)
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool, self.in_processes = ThreadPoolExecutor(max_workers=1, thread_name_prefix="extract"), False
            self.window, self.per_task = 2, 1
            self.stats.processes = 1

    def put(self, groups: list[list[PendingChunk]]) -> None:
        try:
            future = self._submit(groups)
        except BrokenProcessPool as exc:
            self.in_this_process(exc)
            future = self._submit(groups)
        self.running[future] = groups
        self.in_queue += len(groups)

    def refill(self) -> None:
        while self.in_queue < self.window:
            groups = list(itertools.islice(self.queue, min(self.per_task, self.window - self.in_queue)))
            if not groups:
                return
            self.put(groups)

    def finished(self, timeout: float) -> Iterator[tuple[Future, list[list[PendingChunk]]]]:
        """The tasks that ended within ``timeout``, each with its groups; a task the broken process pool lost is
        put again, in this process, and not returned."""
        done, _ = wait(self.running, timeout=timeout, return_when=FIRST_COMPLETED)
        for future in done:
            groups = self.running.pop(future)
            self.in_queue -= len(groups)
            if future.cancelled():
                continue
            broken = future.exception()
            if isinstance(broken, BrokenProcessPool):
                self.in_this_process(broken)   # its texts are extracted again, here
                for group in groups:
                    self.put([group])
                continue
            yield future, groups

    def cancel_queued(self) -> None:
        for queued in self.running:
            queued.cancel()   # not started yet: left for the next run


def _outcomes(future: Future, groups: list[list[PendingChunk]]) -> Iterator[_Outcome]:
    """(group, outcome, or what was raised instead) for each group of a finished task."""
    try:
        value = future.result()
    except Exception as exc:  # noqa: BLE001 - the task's failure is each of its groups' (handled by the caller)
        for group in groups:
            yield group, None, exc
        return
    # a list from a worker process (a task finished there may be collected after the fall-back to threads)
    for group, item in zip(groups, value if isinstance(value, list) else [value]):
        yield (group, None, item) if isinstance(item, _Raised) else (group, item, None)


def _llm_failure_records(group: list[PendingChunk], exc: LLMError, identity: str, retry_key: str,
                         stats: ExtractionStats) -> list[ExtractionRecord]:
    """A chunk the LLM call failed for: counted, said, and recorded as failed (retried on the next run)."""
    usage = exc.usage
    stats.calls += usage.calls
    stats.prompt_tokens += usage.prompt_tokens
    stats.completion_tokens += usage.completion_tokens
    stats.failed += len(group)
    message = f"{exc}; it is retried on the next run"
    if len(stats.errors) < 5:
        stats.errors.append(f"{group[0].chunk_id}: {exc}")
    if not isinstance(exc, LLMStoppedError):  # a stop is said once, by the run's error
        log.warning("extraction of chunk %s failed: %s", group[0].chunk_id, " ".join(str(exc).split())[:500])
    own = not isinstance(exc, (LLMStoppedError, LLMUnavailableError))   # not the endpoint's
    return [_record(c, identity, error=message, calls=usage.calls if i == 0 else 0,
                    prompt_tokens=usage.prompt_tokens if i == 0 else 0,
                    completion_tokens=usage.completion_tokens if i == 0 else 0, retry_key=retry_key, counts=own)
            for i, c in enumerate(group)]


def _crash_records(group: list[PendingChunk], exc: Exception | _Raised, identity: str, retry_key: str,
                   stats: ExtractionStats) -> list[ExtractionRecord]:
    """One chunk's crash (a rule bug, bad text) never stops the run: the chunk is recorded as failed."""
    kind, said = (exc.kind, exc.message) if isinstance(exc, _Raised) else (type(exc).__name__, str(exc))
    stats.failed += len(group)
    message = (f"extractor {identity} raised {kind}: {said}; the chunk is retried on the next run (report it if it "
               "persists)")
    if len(stats.errors) < 5:
        stats.errors.append(f"{group[0].chunk_id}: {message}")
    return [_record(c, identity, error=message, retry_key=retry_key) for c in group]


def _outcome_records(group: list[PendingChunk], outcome: PreparedOutcome, identity: str, retry_key: str,
                     stats: ExtractionStats) -> tuple[list[ExtractionRecord], int]:
    """An extracted (or empty) chunk: its records and how many mention rows they carry."""
    empty = outcome.status == "empty"
    if empty:
        stats.empty += len(group)
        log.warning("extraction of chunk %s is empty: %s", group[0].chunk_id, outcome.note)
    else:
        stats.extracted += len(group)
    stats.calls += outcome.calls
    stats.prompt_tokens += outcome.prompt_tokens
    stats.completion_tokens += outcome.completion_tokens
    trimmed = outcome.trimmed
    if trimmed:
        stats.trimmed += len(group)
        log.warning("extraction of chunk %s (document %s): %s", group[0].chunk_id, group[0].document_id, trimmed)
    note = outcome.note if empty else "; ".join(n for n in (outcome.note, trimmed) if n) or None
    rows = len(outcome.mentions) * len(group) if outcome.mentions is not None else 0
    return [_record(c, identity, result_json=outcome.result_json, mentions=outcome.mentions,
                    status="empty" if empty else "ok", error=note, retry_key=retry_key,
                    calls=outcome.calls if i == 0 else 0, prompt_tokens=outcome.prompt_tokens if i == 0 else 0,
                    completion_tokens=outcome.completion_tokens if i == 0 else 0)
            for i, c in enumerate(group)], rows


class _Batch:
    """The records waiting to be written, written together with the run's llm_usage row; larger batches when
    writes are costly (storage/write_pacing.py)."""

    def __init__(self, store: Store, meter: _UsageMeter | None, min_flush_seconds: float,
                 write_share: float | None) -> None:
        self.store, self.meter = store, meter
        self.records: list[ExtractionRecord] = []
        self.rows = 0   # the batch's prepared mention rows
        self.pacer = WritePacer(min_flush_seconds, write_share)

    def add(self, records: list[ExtractionRecord], rows: int = 0) -> None:
        self.records.extend(records)
        self.rows += rows

    def full(self, batch_size: int) -> bool:
        return ((len(self.records) >= batch_size and self.pacer.due()) or len(self.records) >= MAX_BATCH_RECORDS
                or self.rows >= MAX_BATCH_MENTION_ROWS)

    def flush(self) -> None:
        if self.records or (self.meter is not None and self.meter.changed()):
            # paid results go to the paid-work log before DuckDB: a crash between the two loses no paid call
            paid = paid_work.append(self.store.path.parent, paid_work.extraction_lines(self.records))
            with self.pacer.write(self.store) as con:
                persist_changes(con, [], self.records)
                if paid:
                    paid_work.mark_read(con, self.store.path.parent)
                if self.meter is not None:
                    self.meter.write(con)
            self.records.clear()
            self.rows = 0
        else:
            self.pacer.last = time.monotonic()   # nothing to write: the next batch waits from now, as after a write

    def write_usage_if_due(self) -> None:
        """Only the run's llm_usage row: calls are on record while the records wait for a full batch."""
        if self.pacer.due() and self.meter is not None and self.meter.changed():
            with self.pacer.write(self.store) as con:
                self.meter.write(con)


def _extract_all(extractor: Extractor, texts: Iterator[list[PendingChunk]], total: int, batch: _Batch,
                 stats: ExtractionStats, *, max_concurrency: int, batch_size: int, progress: Progress | None,
                 abort_after_unavailable: int, meter: _UsageMeter | None = None, processes: int = 1,
                 last_write: bool = True) -> tuple[LLMUnavailableError | None, int]:
    """Run the extractor over each distinct text (``texts``: the ``total`` groups with their text, from
    ``_with_texts``) with bounded concurrency; write results every batch, and what is left at the end unless
    ``last_write`` is False (the caller writes ``batch`` then).

    Returns the endpoint error that stopped the run early, if one did, and how many groups finished. An exception
    from the extractor on one chunk fails that chunk only; an interrupt (KeyboardInterrupt) propagates after the
    finished results are written."""
    identity = extractor.identity
    retry_key = getattr(extractor, "retry_key", "")
    done = 0
    unavailable_streak = 0
    abort: LLMUnavailableError | None = None
    tasks = _Tasks(extractor, texts, total, max_concurrency, processes, stats)
    stopped = False
    try:
        tasks.refill()
        while tasks.running and not stopped:
            # The timeout lets usage reach llm_usage while long calls run, not only when chunks finish.
            for future, groups in tasks.finished(timeout=max(batch.pacer.min_seconds, 1.0)):
                done += len(groups)
                for group, outcome, exc in _outcomes(future, groups):
                    if isinstance(exc, LLMError):
                        batch.add(_llm_failure_records(group, exc, identity, retry_key, stats))
                        if isinstance(exc, LLMStoppedError) and abort is None:
                            abort, stopped = exc, True  # the client stopped: do not wait for calls in flight
                            tasks.cancel_queued()
                        if isinstance(exc, LLMUnavailableError):
                            unavailable_streak += 1
                            if unavailable_streak >= abort_after_unavailable and abort is None:
                                abort = exc
                                tasks.cancel_queued()
                    elif exc is not None:
                        batch.add(_crash_records(group, exc, identity, retry_key, stats))
                    else:
                        unavailable_streak = 0
                        batch.add(*_outcome_records(group, outcome, identity, retry_key, stats))
            if batch.full(batch_size):
                batch.flush()
                if progress:
                    progress(done, total)
            else:
                batch.write_usage_if_due()
            if abort is None:
                tasks.refill()
        if last_write:
            batch.flush()
            if progress:
                progress(done, total)
    except BaseException as exc:
        tasks.pool.shutdown(wait=False, cancel_futures=True)
        try:
            batch.flush()  # keep what finished, so the next run resumes after it
        except Exception as flush_exc:  # noqa: BLE001 - the error that stopped the run is the one to report
            log.warning("could not write the finished chunks after %s: %s", type(exc).__name__,
                        " ".join(str(flush_exc).split())[:500])
        raise
    # After a client stop the calls still in flight fail at their next attempt; they are not waited for.
    tasks.pool.shutdown(wait=not stopped, cancel_futures=stopped)
    return abort, done
