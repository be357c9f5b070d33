"""Derive the deduplicated ``entities`` and ``relations`` tables from the per-chunk extraction records.

The ok rows of ``extractions`` are the only source of truth: every graph row is a pure function of the
records that mention its key (names.name_key, resolved through active entity_aliases). ``merge_keys``
recomputes exactly the keys it is given from the current records, upserting the ones still mentioned and
deleting the ones no longer mentioned, so an incremental update gives the same tables as a full rebuild:

    before = keys_for_chunks(con, changed)     # what the old records of the changed chunks mentioned
    ... delete / replace those records ...
    after = keys_for_chunks(con, changed)      # what their new records mention
    merge_keys(con, before_entities | after_entities, before_relations | after_relations,
               changed_chunk_ids=changed)

An incremental merge reads only the records of the chunks that can mention the touched keys (those the
stored rows name, plus the changed chunks), so an edit costs what it touches, not the corpus.
``apply_chunk_changes`` does this in one transaction. Deleting a document removes exactly its contributions;
an entity it shared with other documents is re-aggregated from the remaining records without LLM calls.

The graph is undirected as in LightRAG/PathRAG: a relation's key joins its two endpoint keys in sorted order.
A relation endpoint always exists as an entity: a chunk naming an endpoint only inside a relation counts as a
mention of it (type 'other', no description), and relations whose endpoints resolve to the same key are dropped.

Descriptions merge like LightRAG's: the distinct sentences of all mentions by frequency; when they exceed
``max_description_tokens`` an injected ``summarise`` callable (an LLM) condenses the distinct descriptions,
and the summary is cached in ``description_summaries`` by a hash of its input, so re-aggregating unchanged
input never calls it again. Offline (no summarise and no cached summary) the sentences are cut to the budget.

Aggregation runs in DuckDB over the unnested JSON; Python only touches each distinct name once (to compute
its key) and each recomputed key once (display name, type vote, description and keyword merge).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

if TYPE_CHECKING:
    import numpy as np

import duckdb
import pyarrow as pa

from pathrag_pipeline.index.aliases import (
    AliasStats, alias_map, decide_aliases, find_alias_candidates, pending_alias_changes, read_alias_inputs,
)
from pathrag_pipeline.index.name_index import FALLBACK_TYPE, type_vote
from pathrag_pipeline.index.extraction_records import ExtractionRecord, delete_records, write_records
from pathrag_pipeline.text.names import display_name, name_key
from pathrag_pipeline.storage.store import transaction, utc_now
from pathrag_pipeline.text.tokenizer import count_tokens, truncate_to_tokens

KEY_SEPARATOR = "<|>"
DEFAULT_MAX_DESCRIPTION_TOKENS = 500

Summarise = Callable[[str, str, list[str]], str]
"""summarise(kind, name, descriptions) -> summary; kind is 'entity' or 'relation'."""

_RESULT_SHAPE = json.dumps({
    "entities": [{"name": "VARCHAR", "type": "VARCHAR", "description": "VARCHAR"}],
    "relations": [{"source": "VARCHAR", "target": "VARCHAR", "keywords": "VARCHAR",
                   "description": "VARCHAR", "strength": "DOUBLE"}],
})
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_KEYWORD_SPLIT = re.compile(r"[,;\n]")



@dataclass
class MergeStats:
    """What one merge did. ``summaries_called`` counts calls of the summarise callable (LLM calls)."""

    entities_written: int = 0
    entities_deleted: int = 0
    entities_unchanged: int = 0
    relations_written: int = 0
    relations_deleted: int = 0
    relations_unchanged: int = 0
    summaries_called: int = 0
    summaries_cached: int = 0
    seconds: float = 0.0
    chunks_read: int = 0
    """Chunks whose records the merge read: the corpus for a full rebuild, the touched keys' chunks otherwise."""


def relation_key(a: str, b: str) -> str:
    """The undirected key of the relation between entity keys a and b."""
    lo, hi = sorted((a, b))
    return lo + KEY_SEPARATOR + hi


# ---- mentions --------------------------------------------------------------------------------------------

_RM_SCOPE = f"""AND (least(s.key, t.key) || '{KEY_SEPARATOR}' || greatest(s.key, t.key) IN (SELECT key FROM _gm_scope_r)
                   OR s.key IN (SELECT key FROM _gm_scope_e) OR t.key IN (SELECT key FROM _gm_scope_e))"""


def _load_mentions(con: duckdb.DuckDBPyConnection, chunk_ids: Iterable[str] | str | None, *,
                   scoped: bool = False) -> None:
    """Fill temp tables _gm_em (entity mentions) and _gm_rm (relation mentions) with resolved keys.

    ``chunk_ids``: None loads every record of the corpus; a string names a temp table with a ``chunk_id``
    column (for chunk sets too large for a parameter); otherwise the chunk ids themselves. ``scoped`` keeps
    only the mentions a merge of the keys in _gm_scope_e / _gm_scope_r needs: entity mentions of those
    entities, relation mentions of those relations or touching those entities (their implicit mentions)."""
    if chunk_ids is None:
        where, params = "", []
    elif isinstance(chunk_ids, str):
        where, params = f"AND chunk_id IN (SELECT chunk_id FROM {chunk_ids})", []
    else:
        where, params = "AND chunk_id IN (SELECT unnest(?::VARCHAR[]))", [sorted(set(chunk_ids))]
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _gm_rec AS
            SELECT chunk_id, document_id, json_transform(result, '{_RESULT_SHAPE}') AS r
            FROM extractions WHERE status = 'ok' AND result IS NOT NULL {where}""",
        params,
    )
    con.execute(
        """CREATE OR REPLACE TEMP TABLE _gm_ent AS
           SELECT chunk_id, document_id, o AS ord, e.name AS name, e.type AS type, e.description AS description
           FROM (SELECT chunk_id, document_id, unnest(r.entities) AS e, generate_subscripts(r.entities, 1) AS o
                 FROM _gm_rec)
           WHERE e.name IS NOT NULL AND trim(e.name) <> ''"""
    )
    con.execute(
        """CREATE OR REPLACE TEMP TABLE _gm_rel AS
           SELECT chunk_id, document_id, o AS ord, x.source AS source, x.target AS target, x.keywords AS keywords,
                  x.description AS description, coalesce(x.strength, 1.0) AS strength
           FROM (SELECT chunk_id, document_id, unnest(r.relations) AS x, generate_subscripts(r.relations, 1) AS o
                 FROM _gm_rec)
           WHERE x.source IS NOT NULL AND trim(x.source) <> '' AND x.target IS NOT NULL AND trim(x.target) <> ''"""
    )
    names = [n for (n,) in con.execute(
        "SELECT name FROM _gm_ent UNION SELECT source FROM _gm_rel UNION SELECT target FROM _gm_rel"
    ).fetchall()]
    aliases = alias_map(con)
    keys = [name_key(n) for n in names]
    keys = [aliases.get(k, k) for k in keys]
    con.register("_gm_names_arrow", pa.table({"name": pa.array(names, pa.string()), "key": pa.array(keys, pa.string())}))
    try:
        con.execute("CREATE OR REPLACE TEMP TABLE _gm_names AS SELECT * FROM _gm_names_arrow")
    finally:
        con.unregister("_gm_names_arrow")
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _gm_rm AS
           SELECT r.chunk_id, r.document_id, r.ord,
                  CASE WHEN s.key < t.key THEN s.key ELSE t.key END AS src_key,
                  CASE WHEN s.key < t.key THEN t.key ELSE s.key END AS tgt_key,
                  CASE WHEN s.key < t.key THEN r.source ELSE r.target END AS src_name,
                  CASE WHEN s.key < t.key THEN r.target ELSE r.source END AS tgt_name,
                  r.keywords, r.description, r.strength,
                  least(s.key, t.key) || '{KEY_SEPARATOR}' || greatest(s.key, t.key) AS relation_key
           FROM _gm_rel r JOIN _gm_names s ON s.name = r.source JOIN _gm_names t ON t.name = r.target
           WHERE s.key <> t.key {_RM_SCOPE if scoped else ""}"""
    )
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _gm_em AS
            WITH explicit AS (
                SELECT e.chunk_id, e.document_id, e.ord, k.key, e.name,
                       nullif(lower(trim(e.type)), '') AS type, e.description
                FROM _gm_ent e JOIN _gm_names k ON k.name = e.name
                {"WHERE k.key IN (SELECT key FROM _gm_scope_e)" if scoped else ""}
            ), endpoints AS (
                SELECT chunk_id, document_id, ord, src_key AS key, src_name AS name FROM _gm_rm
                UNION ALL
                SELECT chunk_id, document_id, ord, tgt_key, tgt_name FROM _gm_rm
            ), implicit AS (
                SELECT chunk_id, any_value(document_id) AS document_id, 1000000 + min(ord) AS ord, key,
                       arg_min(name, ord) AS name, '{FALLBACK_TYPE}' AS type, NULL::VARCHAR AS description
                FROM endpoints p
                WHERE {"p.key IN (SELECT key FROM _gm_scope_e) AND" if scoped else ""} NOT EXISTS (SELECT 1 FROM explicit x WHERE x.chunk_id = p.chunk_id AND x.key = p.key)
                GROUP BY chunk_id, key
            )
            SELECT * FROM explicit UNION ALL SELECT * FROM implicit"""
    )


def _load_scope_mentions(con: duckdb.DuckDBPyConnection, changed_chunk_ids: Iterable[str]) -> int:
    """Load the mentions that the keys in scope (_gm_scope_e, _gm_scope_r) can have, and widen the entity
    scope by the endpoints of the relations in scope; returns how many chunks' records were read.

    Every current mention of a key lives either in a chunk its stored row names (the tables are a function
    of the records at the last merge) or in a chunk written since (``changed_chunk_ids``). Endpoints are
    added before reading (stored relations) and after (relations the changed chunks now produce); the
    chunks of endpoints added after are read in a second pass."""
    con.execute(
        """INSERT INTO _gm_scope_e
           SELECT DISTINCT k FROM (SELECT unnest([src_key, tgt_key]) AS k FROM relations
                                   WHERE relation_key IN (SELECT key FROM _gm_scope_r))
           WHERE k NOT IN (SELECT key FROM _gm_scope_e)"""
    )
    con.register("_gm_chunks_arrow", pa.table({"chunk_id": pa.array(sorted(set(changed_chunk_ids)), pa.string())}))
    try:
        con.execute(
            """CREATE OR REPLACE TEMP TABLE _gm_chunks AS
               SELECT chunk_id FROM _gm_chunks_arrow
               UNION SELECT unnest(source_chunk_ids) FROM entities WHERE entity_key IN (SELECT key FROM _gm_scope_e)
               UNION SELECT unnest(source_chunk_ids) FROM relations WHERE relation_key IN (SELECT key FROM _gm_scope_r)"""
        )
    finally:
        con.unregister("_gm_chunks_arrow")
    _load_mentions(con, "_gm_chunks", scoped=True)
    con.execute(
        """CREATE OR REPLACE TEMP TABLE _gm_more AS
           SELECT DISTINCT k AS key FROM (SELECT unnest([src_key, tgt_key]) AS k FROM _gm_rm
                                          WHERE relation_key IN (SELECT key FROM _gm_scope_r))
           WHERE k NOT IN (SELECT key FROM _gm_scope_e)"""
    )
    if con.execute("SELECT count(*) FROM _gm_more").fetchone()[0]:
        # rare: callers pass the endpoints of the relations they touch (keys_for_chunks includes them)
        con.execute("INSERT INTO _gm_scope_e SELECT key FROM _gm_more")
        con.execute(
            """INSERT INTO _gm_chunks
               SELECT DISTINCT c FROM (SELECT unnest(source_chunk_ids) AS c FROM entities
                                       WHERE entity_key IN (SELECT key FROM _gm_more))
               WHERE c NOT IN (SELECT chunk_id FROM _gm_chunks)"""
        )
        _load_mentions(con, "_gm_chunks", scoped=True)
    return con.execute("SELECT count(*) FROM _gm_rec").fetchone()[0]


def _drop_temp(con: duckdb.DuckDBPyConnection) -> None:
    for table in ("_gm_rec", "_gm_ent", "_gm_rel", "_gm_names", "_gm_rm", "_gm_em", "_gm_scope_e", "_gm_scope_r",
                  "_gm_new", "_gm_changed", "_gm_batch", "_gm_gone", "_gm_gone_e", "_gm_chunks", "_gm_more"):
        con.execute(f"DROP TABLE IF EXISTS {table}")


@contextlib.contextmanager
def _temp_tables(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Drop the merge's temp tables when the block ends. After a failure the drop is best effort and never
    replaces the failure: a statement that fails inside a transaction (DuckDB out of memory, say) aborts it,
    every later statement then fails with "Current transaction is aborted", and that message would hide the
    one saying what went wrong. The caller's rollback, or closing the connection, drops them anyway."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            _drop_temp(con)
        raise
    _drop_temp(con)


def keys_for_chunks(con: duckdb.DuckDBPyConnection, chunk_ids: Iterable[str]) -> tuple[set[str], set[str]]:
    """Entity and relation keys the current ok records of these chunks mention (aliases applied).

    Call it before replacing or deleting the records of changed chunks and again after writing the new
    ones; merging the union of both answers updates the graph for exactly those changes.
    """
    ids = sorted(set(chunk_ids))
    if not ids:
        return set(), set()
    with _temp_tables(con):
        _load_mentions(con, ids)
        entity_keys = {k for (k,) in con.execute("SELECT DISTINCT key FROM _gm_em").fetchall()}
        relation_keys = {k for (k,) in con.execute("SELECT DISTINCT relation_key FROM _gm_rm").fetchall()}
    return entity_keys, relation_keys


def stored_keys_for_chunks(con: duckdb.DuckDBPyConnection, chunk_ids: Iterable[str]) -> tuple[set[str], set[str]]:
    """Entity and relation keys whose stored rows name these chunks (``source_chunk_ids``): what the last merge
    took from their records, read from the graph tables instead of the records.

    For records about to be deleted this is all ``keys_for_chunks`` would be needed for, and it never parses
    them: a record too large to load (the huge_line.txt report) can still be deleted. A record written since
    the last merge contributed nothing to the tables yet, so there is nothing of it to undo."""
    ids = sorted(set(chunk_ids))
    if not ids:
        return set(), set()
    found = []
    for table, key in (("entities", "entity_key"), ("relations", "relation_key")):
        found.append({k for (k,) in con.execute(
            f"""SELECT DISTINCT {key} FROM (SELECT {key}, unnest(source_chunk_ids) AS chunk_id FROM {table})
                WHERE chunk_id IN (SELECT unnest(?::VARCHAR[]))""",
            [ids],
        ).fetchall()})
    return found[0], found[1]


# ---- merging text ------------------------------------------------------------------------------------------

def _ranked(items: Sequence[str], fold: Callable[[str], str]) -> list[str]:
    """Distinct items (compared by fold), most frequent first, then by first appearance."""
    if len(items) <= 1:
        return list(items)
    counts: Counter[str] = Counter()
    first: dict[str, tuple[int, str]] = {}
    for i, item in enumerate(items):
        k = fold(item)
        counts[k] += 1
        first.setdefault(k, (i, item))
    order = sorted(counts, key=lambda k: (-counts[k], first[k][0]))
    return [first[k][1] for k in order]


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def merge_sentences(descriptions: Sequence[str], max_tokens: int) -> tuple[str, bool]:
    """Distinct sentences of the descriptions by frequency, within ``max_tokens``.

    Returns (text, complete): complete is False when sentences had to be dropped or cut to fit.
    """
    sentences = [" ".join(s.split()) for d in descriptions if d for s in _SENTENCE_END.split(d) if s.strip()]
    ranked = _ranked(sentences, _fold)
    text = " ".join(ranked)
    if len(text) <= max_tokens:  # a token is at least one character: no need to count
        return text, True
    kept, used = [], 0
    for sentence in ranked:
        cost = count_tokens((" " if kept else "") + sentence)
        if used + cost > max_tokens:
            if not kept:
                kept.append(truncate_to_tokens(sentence, max_tokens))
            return " ".join(kept), False
        kept.append(sentence)
        used += cost
    text = " ".join(kept)
    if count_tokens(text) > max_tokens:  # joining can merge tokens differently at the seams
        return truncate_to_tokens(text, max_tokens), False
    return text, True


def merge_keywords(keywords: Sequence[str | None]) -> str:
    """Distinct comma/semicolon-separated keywords by frequency (case-insensitive), joined with ', '."""
    parts = [" ".join(p.split()) for k in keywords if k for p in _KEYWORD_SPLIT.split(k) if p.strip()]
    return ", ".join(_ranked(parts, _fold))


def _summary_hash(kind: str, name: str, descriptions: list[str], max_tokens: int) -> str:
    payload = json.dumps([kind, name, descriptions, max_tokens], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


class DeferredSummaries:
    """Stands in for the summariser in a merge that holds the DuckDB file: it records what needs summarising
    (the merge keeps the cut text for now) instead of calling an LLM there. The caller then makes the
    summaries with no connection open (``make_summaries``), stores them (``store_summaries``) and merges the
    same keys again, which now finds them in the cache."""

    def __init__(self) -> None:
        self.requests: dict[str, tuple[str, str, list[str]]] = {}   # input hash -> (kind, name, descriptions)
        self.keys_of: dict[str, set[tuple[str, str]]] = {}            # input hash -> {(kind, graph key)}
        self.entity_keys: set[str] = set()
        self.relation_keys: set[str] = set()


def make_summaries(requests: dict[str, tuple[str, str, list[str]]], summarise: Summarise, max_tokens: int,
                   max_concurrency: int = 4, on_done: Callable[[int], None] | None = None
                   ) -> tuple[dict[str, str], list[str]]:
    """Summaries for deferred requests, made in parallel; returns ({input hash: summary}, errors). A failed
    summary is left out (its key keeps the cut text and is retried at its next change). ``on_done(n)`` is
    called in the caller's thread each time another summary finished (n so far), e.g. to log usage."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    def one(item):
        h, (kind, name, distinct) = item
        try:
            summary = summarise(kind, name, distinct)
        except Exception as exc:  # noqa: BLE001 - an LLM failure must not lose the merge already written
            return h, None, f"summary of {kind} {name!r} failed: {exc}"
        if not isinstance(summary, str) or not summary.strip():
            return h, None, f"summary of {kind} {name!r} was empty"
        return h, truncate_to_tokens(" ".join(summary.split()), max_tokens), None

    out, errors = {}, []
    with ThreadPoolExecutor(max_workers=max(1, max_concurrency)) as pool:
        futures = [pool.submit(one, item) for item in sorted(requests.items())]
        for done, future in enumerate(as_completed(futures), 1):
            h, summary, error = future.result()
            if summary is not None:
                out[h] = summary
            else:
                errors.append(error)
            if on_done is not None:
                on_done(done)
    errors.sort()
    return out, errors


def store_summaries(con: duckdb.DuckDBPyConnection, summaries: dict[str, str], model: str | None) -> None:
    if summaries:
        con.executemany("INSERT OR REPLACE INTO description_summaries VALUES (?, ?, ?, ?)",
                        [[h, text, model, utc_now()] for h, text in summaries.items()])


class _Descriptions:
    """Collects the descriptions of every recomputed key, then resolves the over-budget ones in one batch:
    cached summaries first, the summarise callable for the rest."""

    def __init__(self, con: duckdb.DuckDBPyConnection, summarise: Summarise | None, max_tokens: int,
                 model: str | None, stats: MergeStats):
        self.con, self.summarise, self.max_tokens, self.model, self.stats = con, summarise, max_tokens, model, stats
        self.pending: dict[int, tuple[str, str, str, list[str], str]] = {}   # slot -> (hash, kind, name, distinct, key)

    def merge(self, slot: int, kind: str, name_of: Callable[[], str], descriptions: list[str | None],
              key: str = "") -> str:
        """The merged text of one key; over budget, the slot is queued for ``resolve``. ``name_of`` gives the
        name the summariser sees; it is only computed when a summary is needed."""
        descriptions = [d for d in descriptions if d and not d.isspace()]
        text, complete = merge_sentences(descriptions, self.max_tokens)
        if not complete:
            distinct = _ranked([" ".join(d.split()) for d in descriptions], _fold)
            name = name_of()
            self.pending[slot] = (_summary_hash(kind, name, distinct, self.max_tokens), kind, name, distinct, key)
        return text

    def resolve(self) -> dict[int, str]:
        """Summaries for the over-budget slots: cached, freshly made, or (offline) none, keeping the cut text."""
        if not self.pending:
            return {}
        hashes = sorted({p[0] for p in self.pending.values()})
        cached = dict(self.con.execute(
            "SELECT input_hash, summary FROM description_summaries WHERE input_hash IN (SELECT unnest(?::VARCHAR[]))",
            [hashes],
        ).fetchall())
        fresh = []
        out = {}
        for slot, (h, kind, name, distinct, key) in sorted(self.pending.items()):
            if h in cached:
                self.stats.summaries_cached += 1
            elif isinstance(self.summarise, DeferredSummaries):
                self.summarise.requests[h] = (kind, name, distinct)
                self.summarise.keys_of.setdefault(h, set()).add((kind, key))
                continue
            elif self.summarise is not None:
                summary = self.summarise(kind, name, distinct)
                if not isinstance(summary, str) or not summary.strip():
                    raise ValueError(f"summarise returned {summary!r} for {kind} {name!r}; it must return non-empty text")
                cached[h] = truncate_to_tokens(" ".join(summary.split()), self.max_tokens)
                fresh.append([h, cached[h], self.model, utc_now()])
                self.stats.summaries_called += 1
            else:
                continue
            out[slot] = cached[h]
        if fresh:
            self.con.executemany("INSERT OR REPLACE INTO description_summaries VALUES (?, ?, ?, ?)", fresh)
        return out


# ---- aggregation ------------------------------------------------------------------------------------------

def _type_vote(types: Iterable[str | None]) -> str:
    """Majority type; the endpoint filler 'other' only wins when nothing else was said; ties go A-Z."""
    return type_vote(Counter(types))


def _set_scope(con: duckdb.DuckDBPyConnection, table: str, keys: Iterable[str]) -> None:
    con.register("_gm_scope_arrow", pa.table({"key": pa.array(sorted(set(keys)), pa.string())}))
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT key FROM _gm_scope_arrow")
    finally:
        con.unregister("_gm_scope_arrow")


_COMPARED = {
    "entities": ("name", "type", "description", "description_tokens", "mention_count", "source_chunk_ids", "document_ids"),
    "relations": ("src_key", "tgt_key", "keywords", "description", "description_tokens", "strength", "mention_count",
                  "source_chunk_ids", "document_ids"),
}


MERGE_BATCH_ROWS = 200_000
"""Mentions aggregated in Python at a time: the merge walks the keys in batches of about this many mention
rows, so its Python memory is bounded by the batch, not the corpus (DuckDB spills the rest to disk)."""


def _write(con: duckdb.DuckDBPyConnection, table: str, key_col: str, rows: pa.Table) -> int:
    """Upsert ``rows`` into ``table``; rows whose content is unchanged keep their updated_at.
    Returns the number of rows written (new or changed)."""
    con.register("_gm_new_arrow", rows)
    try:
        con.execute("CREATE OR REPLACE TEMP TABLE _gm_new AS SELECT * FROM _gm_new_arrow")
    finally:
        con.unregister("_gm_new_arrow")
    differs = " OR ".join(f"n.{c} IS DISTINCT FROM o.{c}" for c in _COMPARED[table])
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _gm_changed AS
            SELECT n.* FROM _gm_new n LEFT JOIN {table} o ON o.{key_col} = n.{key_col}
            WHERE o.{key_col} IS NULL OR {differs}"""
    )
    written = con.execute("SELECT count(*) FROM _gm_changed").fetchone()[0]
    con.execute(f"DELETE FROM {table} WHERE {key_col} IN (SELECT {key_col} FROM _gm_changed)")
    con.execute(f"INSERT INTO {table} SELECT *, ?::TIMESTAMP FROM _gm_changed", [utc_now()])
    con.execute("DROP TABLE _gm_changed")
    con.execute("DROP TABLE _gm_new")
    return written


def _delete_unmentioned(con: duckdb.DuckDBPyConnection, table: str, key_col: str, source: str, source_key: str,
                        full: bool, scope_table: str) -> set[str]:
    """Delete the stored keys in scope (every key when ``full``) that no current record mentions."""
    in_scope = "true" if full else f"{key_col} IN (SELECT key FROM {scope_table})"
    deleted = {k for (k,) in con.execute(
        f"""SELECT {key_col} FROM {table} WHERE {in_scope}
            AND {key_col} NOT IN (SELECT DISTINCT {source_key} FROM {source})"""
    ).fetchall()}
    if deleted:
        _set_scope(con, "_gm_gone", deleted)
        con.execute(f"DELETE FROM {table} WHERE {key_col} IN (SELECT key FROM _gm_gone)")
        con.execute("DROP TABLE _gm_gone")
    return deleted


def _key_batches(con: duckdb.DuckDBPyConnection, source: str, source_key: str, full: bool,
                 scope_table: str) -> list[int]:
    """Split the mentioned keys in scope into batches of about MERGE_BATCH_ROWS mention rows (temp table
    _gm_batch: key, b); returns the batch numbers. A key's mentions always stay in one batch, so a batch
    can exceed the budget by at most one key's mentions."""
    scope = "" if full else f"WHERE {source_key} IN (SELECT key FROM {scope_table})"
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _gm_batch AS
            SELECT key, (sum(n) OVER (ORDER BY key ROWS UNBOUNDED PRECEDING) - n) // {int(MERGE_BATCH_ROWS)} AS b
            FROM (SELECT {source_key} AS key, count(*) AS n FROM {source} {scope} GROUP BY 1)"""
    )
    return [b for (b,) in con.execute("SELECT DISTINCT b FROM _gm_batch ORDER BY b").fetchall()]


def _groups(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[dict[str, list], list[tuple[int, int]]]:
    """Run ``sql`` (rows sorted by their first column, the key) and return its columns as lists plus the
    [start, end) row range of each key. One sorted scan is much cheaper than ordered list aggregates."""
    table = con.sql(sql).to_arrow_table()
    cols = {name: table.column(name).to_pylist() for name in table.column_names}
    del table
    keys = cols["key"]
    bounds, start = [], 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or keys[i] != keys[start]:
            bounds.append((start, i))
            start = i
    return cols, bounds


def _distinct_sorted(values: list[str]) -> list[str]:
    return sorted(set(values))


def _merge_batched(con, full: bool, *, mentions: str, key: str, scope: str, columns: str, table: str,
                   table_key: str, to_rows: Callable[[dict[str, list], list[tuple[int, int]]], pa.Table]
                   ) -> tuple[int, int, int, set[str]]:
    """Recompute ``table`` from its ``mentions`` key batch by key batch (bounded memory), then drop rows no
    mention names any more. Returns (written, deleted, unchanged, deleted keys)."""
    written = total = 0
    for b in _key_batches(con, mentions, key, full, scope):
        cols, bounds = _groups(con, f"""SELECT {columns} FROM {mentions}
                                        WHERE {key} IN (SELECT key FROM _gm_batch WHERE b = {b})
                                        ORDER BY {key}, chunk_id, ord""")
        rows = to_rows(cols, bounds)
        del cols, bounds
        written += _write(con, table, table_key, rows)
        total += rows.num_rows
    deleted = _delete_unmentioned(con, table, table_key, mentions, key, full, scope)
    return written, len(deleted), total - written, deleted


def _merge_entities(con, full: bool, descriptions: _Descriptions) -> tuple[int, int, int, set[str]]:
    return _merge_batched(con, full, mentions="_gm_em", key="key", scope="_gm_scope_e",
                          columns="key, name, type, description, chunk_id, document_id",
                          table="entities", table_key="entity_key",
                          to_rows=lambda cols, bounds: _entity_rows(cols, bounds, descriptions))


def _entity_rows(cols: dict[str, list], bounds: list[tuple[int, int]], descriptions: _Descriptions) -> pa.Table:
    out: dict[str, list] = {c: [] for c in ("entity_key", "name", "type", "description", "mention_count",
                                            "source_chunk_ids", "document_ids")}
    for slot, (a, b) in enumerate(bounds):
        names = cols["name"][a:b]
        name = display_name(names) if b - a > 1 else " ".join(names[0].split())
        out["entity_key"].append(cols["key"][a])
        out["name"].append(name)
        out["type"].append(_type_vote(cols["type"][a:b]))
        out["description"].append(descriptions.merge(slot, "entity", lambda: name, cols["description"][a:b],
                                                    cols["key"][a]))
        _append_provenance(out, cols, a, b)
    _apply_summaries(out, descriptions)
    return pa.table({
        "entity_key": pa.array(out["entity_key"], pa.string()),
        "name": pa.array(out["name"], pa.string()),
        "type": pa.array(out["type"], pa.string()),
        "description": pa.array(out["description"], pa.string()),
        "description_tokens": pa.array([count_tokens(d) for d in out["description"]], pa.int32()),
        "mention_count": pa.array(out["mention_count"], pa.int32()),
        "source_chunk_ids": pa.array(out["source_chunk_ids"], pa.list_(pa.string())),
        "document_ids": pa.array(out["document_ids"], pa.list_(pa.string())),
    })


def _append_provenance(out: dict[str, list], cols: dict[str, list], a: int, b: int) -> None:
    """The columns every merged entity and relation carries: how often it was extracted, and from where."""
    out["mention_count"].append(b - a)
    out["source_chunk_ids"].append(_distinct_sorted(cols["chunk_id"][a:b]))
    out["document_ids"].append(_distinct_sorted(cols["document_id"][a:b]))


def _apply_summaries(out: dict[str, list], descriptions: _Descriptions) -> None:
    """Put the summaries resolved for this merge's over-budget descriptions in place of the cut text."""
    for slot, summary in descriptions.resolve().items():
        out["description"][slot] = summary
    descriptions.pending.clear()


def _relation_label(src_names: list[str], tgt_names: list[str]) -> str:
    return f"{display_name(src_names)} <-> {display_name(tgt_names)}"


def _merge_relations(con, full: bool, descriptions: _Descriptions) -> tuple[int, int, int, set[str]]:
    return _merge_batched(con, full, mentions="_gm_rm", key="relation_key", scope="_gm_scope_r",
                          columns="relation_key AS key, src_key, tgt_key, src_name, tgt_name, keywords, "
                                  "description, strength, chunk_id, document_id",
                          table="relations", table_key="relation_key",
                          to_rows=lambda cols, bounds: _relation_rows(cols, bounds, descriptions))


def _relation_rows(cols: dict[str, list], bounds: list[tuple[int, int]], descriptions: _Descriptions) -> pa.Table:
    out: dict[str, list] = {c: [] for c in ("relation_key", "src_key", "tgt_key", "keywords", "description",
                                            "strength", "mention_count", "source_chunk_ids", "document_ids")}
    for slot, (a, b) in enumerate(bounds):
        out["relation_key"].append(cols["key"][a])
        out["src_key"].append(cols["src_key"][a])
        out["tgt_key"].append(cols["tgt_key"][a])
        out["keywords"].append(merge_keywords(cols["keywords"][a:b]))
        label = functools.partial(_relation_label, cols["src_name"][a:b], cols["tgt_name"][a:b])
        out["description"].append(descriptions.merge(slot, "relation", label, cols["description"][a:b],
                                                    cols["key"][a]))
        out["strength"].append(math.fsum(cols["strength"][a:b]))
        _append_provenance(out, cols, a, b)
    _apply_summaries(out, descriptions)
    return pa.table({
        "relation_key": pa.array(out["relation_key"], pa.string()),
        "src_key": pa.array(out["src_key"], pa.string()),
        "tgt_key": pa.array(out["tgt_key"], pa.string()),
        "keywords": pa.array(out["keywords"], pa.string()),
        "description": pa.array(out["description"], pa.string()),
        "description_tokens": pa.array([count_tokens(d) for d in out["description"]], pa.int32()),
        "strength": pa.array(out["strength"], pa.float64()),
        "mention_count": pa.array(out["mention_count"], pa.int32()),
        "source_chunk_ids": pa.array(out["source_chunk_ids"], pa.list_(pa.string())),
        "document_ids": pa.array(out["document_ids"], pa.list_(pa.string())),
    })


def merge_keys(con: duckdb.DuckDBPyConnection, entity_keys: set[str] | None, relation_keys: set[str] | None, *,
               changed_chunk_ids: Iterable[str] = (), summarise: Summarise | None = None,
               max_description_tokens: int = DEFAULT_MAX_DESCRIPTION_TOKENS,
               summary_model: str | None = None) -> MergeStats:
    """Recompute these entity and relation keys from the current ok extraction records.

    A key still mentioned is upserted (rows whose content did not change are left alone); a key no longer
    mentioned is deleted. ``None`` for both means a full rebuild of both tables. The endpoints of the given
    relations are recomputed too, and so is every stored relation touching an entity that disappears, so no
    relation is ever left without its endpoints. Runs in the caller's transaction, if any; wrap it in
    ``store.transaction`` for atomicity. ``summary_model`` is recorded with new summaries for inspection.

    An incremental merge reads only the records of the chunks that can mention the keys: the chunks the
    stored rows of those keys name (``source_chunk_ids``, i.e. what the last merge saw) plus
    ``changed_chunk_ids``, every chunk whose records were written since the tables were last merged (chunks
    whose records were only deleted need not be listed). So its cost follows the touched keys, not the corpus.
    """
    if max_description_tokens < 1:
        raise ValueError(f"max_description_tokens={max_description_tokens} must be at least 1")
    if (entity_keys is None) != (relation_keys is None):
        raise ValueError("pass None for both entity_keys and relation_keys (full rebuild) or sets for both")
    started = time.perf_counter()
    stats = MergeStats()
    full = entity_keys is None
    descriptions = _Descriptions(con, summarise, max_description_tokens, summary_model, stats)
    with _temp_tables(con):
        if full:
            _load_mentions(con, None)
            stats.chunks_read = con.execute("SELECT count(*) FROM _gm_rec").fetchone()[0]
        else:
            _set_scope(con, "_gm_scope_r", relation_keys)
            _set_scope(con, "_gm_scope_e", entity_keys)
            stats.chunks_read = _load_scope_mentions(con, changed_chunk_ids)
        stats.entities_written, stats.entities_deleted, stats.entities_unchanged, gone = \
            _merge_entities(con, full, descriptions)
        if not full and gone:
            _set_scope(con, "_gm_gone_e", gone)
            con.execute(
                """INSERT INTO _gm_scope_r
                   SELECT DISTINCT relation_key FROM relations
                   WHERE (src_key IN (SELECT key FROM _gm_gone_e) OR tgt_key IN (SELECT key FROM _gm_gone_e))
                     AND relation_key NOT IN (SELECT key FROM _gm_scope_r)"""
            )
        stats.relations_written, stats.relations_deleted, stats.relations_unchanged, _ = \
            _merge_relations(con, full, descriptions)
    stats.seconds = time.perf_counter() - started
    return stats


def relation_keys_touching(con: duckdb.DuckDBPyConnection, entity_keys: Iterable[str]) -> set[str]:
    """Stored relations with an endpoint among these keys, plus those the current records would produce.

    A relation mention always comes with a mention of both endpoints in the same chunk, so the records
    that can produce such a relation are those of the chunks the stored entities of these keys name."""
    keys = sorted(set(entity_keys))
    if not keys:
        return set()
    stored = {k for (k,) in con.execute(
        """SELECT relation_key FROM relations
           WHERE src_key IN (SELECT unnest(?::VARCHAR[])) OR tgt_key IN (SELECT unnest(?::VARCHAR[]))""",
        [keys, keys],
    ).fetchall()}
    chunks = [c for (c,) in con.execute(
        "SELECT DISTINCT unnest(source_chunk_ids) FROM entities WHERE entity_key IN (SELECT unnest(?::VARCHAR[]))",
        [keys],
    ).fetchall()]
    if not chunks:
        return stored
    with _temp_tables(con):
        _load_mentions(con, chunks)
        produced = {k for (k,) in con.execute(
            """SELECT DISTINCT relation_key FROM _gm_rm
               WHERE src_key IN (SELECT unnest(?::VARCHAR[])) OR tgt_key IN (SELECT unnest(?::VARCHAR[]))""",
            [keys, keys],
        ).fetchall()}
    return stored | produced


def remerge_entities(con: duckdb.DuckDBPyConnection, entity_keys: Iterable[str], *, summarise: Summarise | None = None,
                     max_description_tokens: int = DEFAULT_MAX_DESCRIPTION_TOKENS) -> MergeStats:
    """Recompute these entities and every relation touching them, in one transaction: what an alias change
    (aliases.add_alias / set_alias_disabled / delete_alias / save_candidates return the keys) needs."""
    keys = set(entity_keys)
    with transaction(con):
        return merge_keys(con, keys, relation_keys_touching(con, keys), summarise=summarise,
                          max_description_tokens=max_description_tokens)


def apply_chunk_changes(con: duckdb.DuckDBPyConnection, removed_chunk_ids: Iterable[str],
                        upsert_records: Sequence[ExtractionRecord], summarise: Summarise | None = None, *,
                        max_description_tokens: int = DEFAULT_MAX_DESCRIPTION_TOKENS) -> MergeStats:
    """Delete the records of removed chunks, write new or replaced records, and merge exactly the keys
    their old and new records mention, all in one transaction."""
    removed = set(removed_chunk_ids)
    touched = removed | {r.chunk_id for r in upsert_records}
    with transaction(con):
        before_e, before_r = keys_for_chunks(con, touched)
        delete_records(con, removed)
        write_records(con, upsert_records)
        written = {r.chunk_id for r in upsert_records}
        after_e, after_r = keys_for_chunks(con, written)
        return merge_keys(con, before_e | after_e, before_r | after_r, changed_chunk_ids=written,
                          summarise=summarise, max_description_tokens=max_description_tokens)


def new_alias_candidates(store, *, string_threshold: float = 0.95,
                         embeddings: tuple[Sequence[str], np.ndarray] | None = None,
                         embedding_threshold: float = 0.95) -> int:
    """How many detected alias rows ``detect_and_apply`` would add, change or remove now, without doing it:
    after a pass that re-merged entities, zero means the aliases have settled."""
    with store.connect() as con:
        candidates = find_alias_candidates(read_alias_inputs(con), string_threshold=string_threshold,
                                           embeddings=embeddings, embedding_threshold=embedding_threshold)
        return pending_alias_changes(con, candidates)


def detect_and_apply(store, *, string_threshold: float = 0.95,
                     embeddings: tuple[Sequence[str], np.ndarray] | None = None,
                     embedding_threshold: float = 0.95) -> AliasStats:
    """Re-decide the detected aliases from the names the current records mention (``aliases.decide_aliases``)
    and re-merge the entities whose merge changes, in one transaction.

    Rows a user made or disabled are never overridden, so an un-merge sticks. ``embeddings`` = (entity keys,
    unit vectors) adds the embedding method. ``new_aliases`` counts rows added or changed.
    """
    with store.connect() as con:
        with transaction(con):
            candidates = find_alias_candidates(read_alias_inputs(con), string_threshold=string_threshold,
                                               embeddings=embeddings, embedding_threshold=embedding_threshold)
            before = set(con.execute("SELECT alias_key, canonical_key, method FROM entity_aliases").fetchall())
            changed = decide_aliases(con, candidates)
            after = set(con.execute("SELECT alias_key, canonical_key, method FROM entity_aliases").fetchall())
            if changed:
                merge_keys(con, changed, relation_keys_touching(con, changed))
    removed = {row[0] for row in before} - {row[0] for row in after}
    return AliasStats(len(candidates), len(after - before), len(changed), len(removed))
