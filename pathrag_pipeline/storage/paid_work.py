"""The paid-work log: every result an LLM was paid for, kept where losing ``pathrag.duckdb`` cannot take it.

An LLM-built home holds hours of paid calls in one DuckDB file: the chunk extractions (table ``extractions``, and
``extraction_cache`` for results since replaced) and the description summaries (``description_summaries``). Each
of them is also appended, as it is made, to ``PATHRAG_HOME/paid_work.jsonl`` (one JSON object a line, flushed and
fsynced with each batch, never rewritten), beside the DuckDB file. When that file is lost or corrupt (``pathrag
status --check --repair`` moves a damaged one aside), the next index run finds the log's results again before it
plans any call: they go into ``extraction_cache`` and ``description_summaries``, whose lookups the run already makes,
so the rebuild costs 0 LLM calls (issue 61).

Lines:

- ``{"kind": "extraction", "extractor": ..., "chunk_hash": ..., "result": <ChunkExtraction JSON>, "calls": ...,
  "prompt_tokens": ..., "completion_tokens": ..., "at": ...}``
- ``{"kind": "summary", "input_hash": ..., "summary": ..., "model": ..., "at": ...}``

Only paid work is logged: extractors and summarisers whose identity starts with ``llm:`` (the offline rules cost
nothing to run again, and an imported ``--triples`` file is its own copy). The DuckDB file records how far into
the log it has read (``pathrag_meta.paid_work_offset``, bytes), so an ordinary run reads only what it has not seen,
and a fresh or replaced DuckDB file reads it all. A line cut short by a crash is skipped (and stays skipped: the
next append starts a new line). A home that predates the log writes what its DuckDB file holds to the log on its
first run (``sync``). On disk it costs what the results themselves cost in DuckDB's ``extractions.result`` (as
JSON text, uncompressed) plus about 250 bytes a line for the keys, counts and time: ``SELECT sum(length(result))
FROM extractions WHERE extractor LIKE 'llm:%'`` gives a home's figure before it is built.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from pathrag_pipeline.storage.store import get_meta, set_meta, utc_now

FILE_NAME = "paid_work.jsonl"
OFFSET_KEY = "paid_work_offset"
PAID_PREFIX = "llm:"
BATCH = 1000   # log lines read into DuckDB per statement


def is_paid(identity: str | None) -> bool:
    return bool(identity) and str(identity).startswith(PAID_PREFIX)


def log_path(home: Path) -> Path:
    return Path(home) / FILE_NAME


def _stamp(at: datetime | None) -> str:
    return (at or utc_now()).isoformat()


def append(home: Path, lines: Iterable[dict[str, Any]]) -> int:
    """Append these entries to the log, flushed and fsynced; returns how many."""
    text = "".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n" for line in lines)
    if not text:
        return 0
    path = log_path(home)
    with open(path, "a+b") as out:
        out.seek(0, os.SEEK_END)
        if out.tell():   # a line cut short by a crash must not swallow the first new one
            out.seek(-1, os.SEEK_END)
            if out.read(1) != b"\n":
                out.write(b"\n")
        out.write(text.encode("utf-8"))
        out.flush()
        os.fsync(out.fileno())
    return text.count("\n")


def extraction_lines(records: Iterable[Any]) -> list[dict[str, Any]]:
    """Log entries of the paid ``ok`` extraction records among these (``extraction_records.ExtractionRecord``)."""
    out = []
    for r in records:
        if r.status != "ok" or not is_paid(r.extractor) or not r.calls:
            continue   # a result replayed from a cache was logged when it was paid for
        result = r.result_json if r.result_json is not None else r.result.model_dump_json()
        out.append({"kind": "extraction", "extractor": r.extractor, "chunk_hash": r.chunk_hash, "result": result,
                    "calls": r.calls, "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
                    "at": _stamp(r.created_at)})
    return out


def summary_lines(summaries: dict[str, str], model: str | None) -> list[dict[str, Any]]:
    if not is_paid(model):
        return []
    at = _stamp(None)
    return [{"kind": "summary", "input_hash": h, "summary": text, "model": model, "at": at}
            for h, text in summaries.items()]


def _read_from(path: Path, offset: int) -> Iterator[tuple[dict[str, Any], int]]:
    """(entry, byte offset after its line) of each whole line from ``offset``; a line cut short is skipped."""
    with open(path, "rb") as handle:
        handle.seek(offset)
        at = offset
        for raw in handle:
            at += len(raw)
            if not raw.endswith(b"\n"):
                return   # being written, or cut short: read again next time
            try:
                entry = json.loads(raw)
            except ValueError:
                continue   # a line cut short by a crash, then followed by a new one
            if isinstance(entry, dict):
                yield entry, at


def sync(con: duckdb.DuckDBPyConnection, home: Path) -> dict[str, int]:
    """Bring the DuckDB file and the log level: results in the log that DuckDB has not read go into
    ``extraction_cache`` / ``description_summaries`` (those it already holds are left alone); a home whose log does
    not exist yet writes its paid results there first. Returns {"extractions": n, "summaries": n} read in."""
    path = log_path(home)
    read = {"extractions": 0, "summaries": 0}
    if not path.exists():
        _backfill(con, home)
    if not path.exists():
        return read
    offset = int(get_meta(con, OFFSET_KEY) or 0)
    size = path.stat().st_size
    if offset > size:
        offset = 0   # the log was replaced: read it whole (existing results are kept, nothing is doubled)
    if offset == size:
        return read
    extractions: list[list[Any]] = []
    summaries: list[list[Any]] = []
    end = offset
    for entry, end in _read_from(path, offset):
        if entry.get("kind") == "extraction":
            extractions.append([entry["chunk_hash"], entry["extractor"], entry["result"], entry.get("calls"),
                                entry.get("prompt_tokens"), entry.get("completion_tokens"), entry["at"]])
        elif entry.get("kind") == "summary":
            summaries.append([entry["input_hash"], entry["summary"], entry.get("model"), entry["at"]])
        if len(extractions) + len(summaries) >= BATCH:
            read["extractions"] += _insert_extractions(con, extractions)
            read["summaries"] += _insert_summaries(con, summaries)
            extractions, summaries = [], []
    read["extractions"] += _insert_extractions(con, extractions)
    read["summaries"] += _insert_summaries(con, summaries)
    set_meta(con, OFFSET_KEY, str(end))
    return read


def mark_read(con: duckdb.DuckDBPyConnection, home: Path) -> None:
    """Record the log as read up to its end: what this run appended is in DuckDB already."""
    path = log_path(home)
    if path.exists():
        set_meta(con, OFFSET_KEY, str(path.stat().st_size))


def _insert_extractions(con: duckdb.DuckDBPyConnection, rows: list[list[Any]]) -> int:
    if not rows:
        return 0
    before = con.execute("SELECT count(*) FROM extraction_cache").fetchone()[0]
    con.executemany(
        """INSERT INTO extraction_cache SELECT $1, $2, $3, $4, $5, $6, $7::TIMESTAMP
           WHERE NOT EXISTS (SELECT 1 FROM extraction_cache WHERE chunk_hash = $1 AND extractor = $2)
             AND NOT EXISTS (SELECT 1 FROM extractions WHERE chunk_hash = $1 AND extractor = $2 AND status = 'ok')""",
        rows)
    return con.execute("SELECT count(*) FROM extraction_cache").fetchone()[0] - before


def _insert_summaries(con: duckdb.DuckDBPyConnection, rows: list[list[Any]]) -> int:
    if not rows:
        return 0
    before = con.execute("SELECT count(*) FROM description_summaries").fetchone()[0]
    con.executemany(
        """INSERT INTO description_summaries SELECT $1, $2, $3, $4::TIMESTAMP
           WHERE NOT EXISTS (SELECT 1 FROM description_summaries WHERE input_hash = $1)""", rows)
    return con.execute("SELECT count(*) FROM description_summaries").fetchone()[0] - before


def _backfill(con: duckdb.DuckDBPyConnection, home: Path) -> None:
    """A home that predates the log: its paid results, as DuckDB holds them, become the log's first lines."""
    paid = PAID_PREFIX + "%"
    rows = con.execute(
        """SELECT 'extraction', extractor, chunk_hash, arg_max(result, created_at)::VARCHAR, max(calls),
                  max(prompt_tokens), max(completion_tokens), max(created_at)
           FROM (SELECT extractor, chunk_hash, result, calls, prompt_tokens, completion_tokens, created_at
                 FROM extractions WHERE status = 'ok' AND extractor LIKE $p
                 UNION ALL
                 SELECT extractor, chunk_hash, result, calls, prompt_tokens, completion_tokens, created_at
                 FROM extraction_cache WHERE extractor LIKE $p)
           GROUP BY extractor, chunk_hash
           UNION ALL
           SELECT 'summary', model, input_hash, summary, NULL, NULL, NULL, created_at
           FROM description_summaries WHERE model LIKE $p""", {"p": paid}).fetchall()
    if not rows:
        return
    lines = []
    for kind, who, key, text, calls, prompt, completion, at in rows:
        if kind == "extraction":
            lines.append({"kind": kind, "extractor": who, "chunk_hash": key, "result": text, "calls": calls,
                          "prompt_tokens": prompt, "completion_tokens": completion, "at": _stamp(at)})
        else:
            lines.append({"kind": kind, "input_hash": key, "summary": text, "model": who, "at": _stamp(at)})
    append(home, lines)
    mark_read(con, home)
