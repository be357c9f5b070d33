"""Derive the deduplicated ``entities`` and ``relations`` tables from the per-chunk extraction records.

The ok rows of ``extractions`` are the only source of truth: every graph row is a pure function of the
records that mention its key (names.name_key, resolved through active entity_aliases). ``merge_keys``
recomputes exactly the keys it is given from the current records, upserting the ones still mentioned and
deleting the ones no longer mentioned, so an incremental update gives the same tables as a full rebuild:

    before = keys_for_chunks(con, changed)     # what the old records of the changed chunks mentioned
    ... delete / replace those records ...
    after = keys_for_chunks(con, changed)      # what their new records mention
    merge_keys(con, before_entities | after_entities, before_relations | after_relations)

An incremental merge reads only the mentions of the touched keys, from the mention tables that
``write_records`` keeps in step with the records (``mention_index``), so an edit parses only its own records
and aggregates only the keys it touches, not the corpus (issue 23). A merge by difference reads not even those
for the entities with many mentions: their counts and chunk lists are kept and updated from the mention rows
written and deleted since (``entity_tallies``), their description rankings from the parts that changed
(``part_rankings``).
``apply_chunk_changes`` does this in one transaction. Deleting a document removes exactly its contributions;
an entity it shared with other documents is re-aggregated from the remaining records without LLM calls.

The graph is undirected as in LightRAG/PathRAG: a relation's key joins its two endpoint keys in sorted order.
A relation endpoint always exists as an entity: a chunk naming an endpoint only inside a relation counts as a
mention of it (type 'other', no description), and relations whose endpoints resolve to the same key are dropped.

Descriptions merge like LightRAG's: the distinct sentences of all mentions by frequency; when they exceed
``max_description_tokens`` an injected ``summarise`` callable (an LLM) condenses the distinct descriptions,
and the summary is cached in ``description_summaries`` by a hash of its input, so re-aggregating unchanged
input never calls it again. Offline (no summarise and no cached summary) the sentences are cut to the budget.

Aggregation runs in DuckDB over the mention tables, key batch by key batch: it counts names, types, sentences
and keywords and lists the chunks and documents; Python sees each recomputed key once, with its distinct
names and types and at most ``max_description_tokens + 1`` ranked sentences (display name, type vote,
description within budget). Memory is bounded by the batch, whatever the corpus.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
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
from pathrag_pipeline.index.mention_fields import ENTITY_DESCRIPTION, RELATION_DESCRIPTION, RELATION_KEYWORDS, parts_of
from pathrag_pipeline.index.mention_index import (
    FALLBACK_TYPE, chunks_with_mentions, ensure_mentions, fold, keyword_parts, sentences, type_vote,
)
from pathrag_pipeline.index.extraction_records import ExtractionRecord, delete_records, write_records
from pathrag_pipeline.index import entity_tallies, part_rankings
from pathrag_pipeline.text.names import display_name_counts
from pathrag_pipeline.storage import vector_ledger
from pathrag_pipeline.storage.store import transaction, utc_now
from pathrag_pipeline.text.tokenizer import count_tokens, truncate_to_tokens

KEY_SEPARATOR = "<|>"
DEFAULT_MAX_DESCRIPTION_TOKENS = 500
MAX_SOURCE_IDS = 300
"""Chunk ids kept in an entity's or relation's ``source_chunk_ids`` (and its ``document_ids``: the documents of
those chunks); 0 keeps them all. LightRAG caps the same lists at 300 per entity and per relation by default
(``DEFAULT_MAX_SOURCE_IDS_PER_ENTITY`` / ``_PER_RELATION``) and PathRAG inherits its indexing; the papers keep
them all. Without a cap a name found all over a corpus carries every chunk id in its row: at 100 MB of generated
text an entity held up to 20,271 (2.4 million over 583 entities), a one-file edit rewrote such lists for the 113 keys
it touched (merge, write and DuckDB checkpoint), and every query loads them. Which ids stay is our choice, not LightRAG's: its
``FIFO`` keeps the newest (an order of arrival), which would make the table depend on the history of the home;
here it is the ``MAX_SOURCE_IDS`` smallest chunk ids, a pure function of the current records (equal to a
rebuild's, issue 23) and, chunk ids being hashes, an even sample over the documents. ``mention_count`` still counts
every mention, and ``entity_mentions`` / ``relation_mentions`` keep the complete provenance."""

Summarise = Callable[[str, str, list[str]], str]
"""summarise(kind, name, descriptions) -> summary; kind is 'entity' or 'relation'."""


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
    """Chunks whose mentions the merge aggregated: the corpus for a full rebuild, the touched keys' chunks
    otherwise. No extraction record is parsed by a merge (the mention tables hold what they say)."""
    mentions_read: int = 0
    """Entity and relation mention rows the merge read."""
    entities_tallied: int = 0
    """Entities merged by difference from their kept tallies (``entity_tallies``): their mentions are in neither
    figure above."""
    tally_changes_read: int = 0
    """Logged mention changes those tallies were updated from."""


def relation_key(a: str, b: str) -> str:
    """The undirected key of the relation between entity keys a and b."""
    lo, hi = sorted((a, b))
    return lo + KEY_SEPARATOR + hi


# ---- mentions --------------------------------------------------------------------------------------------

def _load_aliases(con: duckdb.DuckDBPyConnection) -> None:
    """Temp table _gm_alias (raw, key): every raw name key an active alias merges into another key."""
    aliases = alias_map(con)
    _temp_table(con, "_gm_alias", pa.table({"raw": pa.array(list(aliases), pa.string()),
                                            "key": pa.array(list(aliases.values()), pa.string())}))


def _temp_table(con: duckdb.DuckDBPyConnection, name: str, rows: pa.Table) -> None:
    """Temp table ``name`` holding ``rows``. Registered as a reader, not as the table: DuckDB keeps a registered
    table (its Arrow memory) alive until the transaction ends, and a merge writes every batch in one transaction
    (a 300 MB build's merge peaked ~300 MiB higher holding them, issue 23)."""
    con.register("_gm_arrow", pa.RecordBatchReader.from_batches(rows.schema, iter(rows.to_batches())))
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM _gm_arrow")
    finally:
        con.unregister("_gm_arrow")


def _load_mentions(con: duckdb.DuckDBPyConnection, *, scoped: bool = False, chunks: str | None = None,
                   entity_scope: str = "_gm_scope_e") -> None:
    """Fill temp tables _gm_em (entity mentions) and _gm_rm (relation mentions) with resolved keys, from the
    mention tables (``mention_index``): no extraction record is parsed here.

    ``scoped`` keeps only the mentions a merge of the keys in _gm_scope_e / _gm_scope_r needs: entity
    mentions of those entities, relation mentions touching them (a relation's own mentions, and the implicit
    mentions of its endpoints). ``chunks`` names a temp table with a ``chunk_id`` column to read only those
    chunks' mentions; neither reads every mention (a full rebuild). ``entity_scope``: the temp table of the
    entity keys whose mentions _gm_em gets, when scoped (a subset of _gm_scope_e: the keys merged from all their
    mentions, not from their tallies)."""
    ensure_mentions(con)
    _load_aliases(con)
    if scoped:
        con.execute(
            """CREATE OR REPLACE TEMP TABLE _gm_raw AS
               SELECT key AS raw FROM _gm_scope_e UNION SELECT raw FROM _gm_alias WHERE key IN (SELECT key FROM _gm_scope_e)"""
        )
        e_where = "WHERE m.name_key IN (SELECT raw FROM _gm_raw)"
        r_where = "WHERE (m.source_key IN (SELECT raw FROM _gm_raw) OR m.target_key IN (SELECT raw FROM _gm_raw))"
    elif chunks is not None:
        e_where = r_where = f"WHERE m.chunk_id IN (SELECT chunk_id FROM {chunks})"
    else:
        e_where = r_where = ""
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _gm_rm AS
            SELECT chunk_id, document_id, ord, least(s, t) AS src_key, greatest(s, t) AS tgt_key,
                   CASE WHEN s < t THEN source ELSE target END AS src_name,
                   CASE WHEN s < t THEN target ELSE source END AS tgt_name,
                   strength, least(s, t) || '{KEY_SEPARATOR}' || greatest(s, t) AS relation_key,
                   keyword_parts, description_parts
            FROM (SELECT m.chunk_id, m.document_id, m.ord, m.source, m.target, m.strength, m.keyword_parts,
                         m.description_parts, coalesce(a.key, m.source_key) AS s, coalesce(b.key, m.target_key) AS t
                  FROM relation_mentions m LEFT JOIN _gm_alias a ON a.raw = m.source_key
                  LEFT JOIN _gm_alias b ON b.raw = m.target_key {r_where})
            WHERE s <> t"""
    )
    in_scope = f"WHERE key IN (SELECT key FROM {entity_scope})" if scoped else ""
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _gm_em AS
            WITH explicit AS (
                SELECT * FROM (SELECT m.chunk_id, m.document_id, m.ord, coalesce(a.key, m.name_key) AS key, m.name,
                                      m.type
                               FROM entity_mentions m LEFT JOIN _gm_alias a ON a.raw = m.name_key {e_where})
                {in_scope}
            ), endpoints AS (
                SELECT chunk_id, document_id, ord, src_key AS key, src_name AS name FROM _gm_rm
                UNION ALL
                SELECT chunk_id, document_id, ord, tgt_key, tgt_name FROM _gm_rm
            ), implicit AS (
                SELECT chunk_id, any_value(document_id) AS document_id, 1000000 + min(ord) AS ord, key,
                       arg_min(name, ord) AS name, '{FALLBACK_TYPE}' AS type
                FROM (SELECT * FROM endpoints {in_scope}) p
                WHERE NOT EXISTS (SELECT 1 FROM explicit x WHERE x.chunk_id = p.chunk_id AND x.key = p.key)
                GROUP BY chunk_id, key
            )
            SELECT * FROM explicit UNION ALL SELECT * FROM implicit"""
    )


def _mentions_read(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(chunks, mention rows) the loaded mentions come from."""
    return con.execute(
        """SELECT count(DISTINCT chunk_id), count(*) FROM (SELECT chunk_id FROM _gm_em UNION ALL
                                                           SELECT chunk_id FROM _gm_rm)"""
    ).fetchall()[0]


def _widen_scope(con: duckdb.DuckDBPyConnection) -> None:
    """Widen the entity scope by the endpoints of the relations in scope (a relation's mentions are found
    through its endpoints' raw keys), and load the active aliases (_gm_alias).

    Endpoints come from the stored relations; a relation not stored yet has them in its key, which splits
    unambiguously unless a key holds the separator itself (a name made of '<|>'): those few are found by
    resolving every relation mention."""
    con.execute(
        """INSERT INTO _gm_scope_e
           SELECT DISTINCT k FROM (SELECT unnest([src_key, tgt_key]) AS k FROM relations
                                   WHERE relation_key IN (SELECT key FROM _gm_scope_r))
           WHERE k NOT IN (SELECT key FROM _gm_scope_e)"""
    )
    new = [k for (k,) in con.execute(
        "SELECT key FROM _gm_scope_r WHERE key NOT IN (SELECT relation_key FROM relations)").fetchall()]
    ends, unclear = set(), []
    for key in new:
        parts = key.split(KEY_SEPARATOR)
        if len(parts) == 2 and all(parts):
            ends.update(parts)
        else:
            unclear.append(key)
    if unclear:
        _load_mentions(con)
        ends.update(k for (k,) in con.execute(
            """SELECT DISTINCT unnest([src_key, tgt_key]) FROM _gm_rm
               WHERE relation_key IN (SELECT unnest(?::VARCHAR[]))""", [unclear]).fetchall())
    if ends:
        _set_scope(con, "_gm_more", ends)
        con.execute("INSERT INTO _gm_scope_e SELECT key FROM _gm_more WHERE key NOT IN (SELECT key FROM _gm_scope_e)")
    ensure_mentions(con)
    _load_aliases(con)


def _load_scope_mentions(con: duckdb.DuckDBPyConnection, entity_scope: str) -> None:
    """Load the mentions the keys in scope have (after ``_widen_scope``): of the relations in _gm_scope_r, and of
    the entities in ``entity_scope``."""
    if con.execute("""SELECT count(*) FROM _gm_alias WHERE raw IN (SELECT key FROM _gm_scope_e)
                      OR key IN (SELECT key FROM _gm_scope_e)""").fetchall()[0][0]:
        _load_mentions(con, scoped=True, entity_scope=entity_scope)
    else:
        _load_alias_free_scope(con, entity_scope)


def _load_alias_free_scope(con: duckdb.DuckDBPyConnection, entity_scope: str = "_gm_scope_e") -> None:
    """``_load_mentions(scoped=True)`` for a scope no alias touches (no key in _gm_scope_e merges another raw key
    or is merged into one): the same _gm_em and _gm_rm rows the merge reads, built without resolving every
    relation mention that touches a key in scope (issue 23: for the places named all over a corpus that an edit
    touches, those were millions of rows, ~2 s of a one-file edit at 100 MB).

    Without aliases a key's raw key is itself, so _gm_rm needs only the mentions of the relations in scope, and
    the implicit mentions of a key (a relation endpoint its chunk names in no entity entry) are the rows of
    ``entity_names`` without an entity mention of the key in their chunk: ``mention_index`` counts them there the
    way ``_load_mentions`` derives them, which for raw keys without aliases is the same (its ``ord`` only needs to
    miss every mention text, as 1,000,000 + the relation's ord does there).

    The relation mentions are found by their (source, target) key pairs, both ways round: one hash join of
    ``relation_mentions``' two key columns instead of filtering it by each endpoint and then by the relation key
    each row spells (the scope of a one-file edit at 100 MB, 2.5 million mentions: median 0.19 -> 0.15 s; most of
    what is left is reading the ~20,000 matched rows' lists, spread over every row group). A relation key holding
    the separator once splits into its two keys exactly; the rare one that holds it more often (a name made of
    '<|>', as in ``_widen_scope``) is matched by the key it spells, as before."""
    single = f"length(key) - length(replace(key, '{KEY_SEPARATOR}', '')) = {len(KEY_SEPARATOR)}"
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _gm_pairs AS
            SELECT DISTINCT * FROM (
                SELECT split_part(key, '{KEY_SEPARATOR}', 1) AS s, split_part(key, '{KEY_SEPARATOR}', 2) AS t
                FROM _gm_scope_r WHERE {single}
                UNION ALL
                SELECT split_part(key, '{KEY_SEPARATOR}', 2), split_part(key, '{KEY_SEPARATOR}', 1)
                FROM _gm_scope_r WHERE {single})"""
    )
    columns = f"""chunk_id, document_id, ord, least(source_key, target_key) AS src_key,
                   greatest(source_key, target_key) AS tgt_key,
                   CASE WHEN source_key < target_key THEN source ELSE target END AS src_name,
                   CASE WHEN source_key < target_key THEN target ELSE source END AS tgt_name,
                   strength, least(source_key, target_key) || '{KEY_SEPARATOR}' || greatest(source_key, target_key)
                       AS relation_key, keyword_parts, description_parts"""
    unclear = ""
    if con.execute(f"SELECT count(*) FROM _gm_scope_r WHERE NOT ({single})").fetchall()[0][0]:
        unclear = f"""UNION ALL SELECT {columns} FROM relation_mentions
                      WHERE least(source_key, target_key) || '{KEY_SEPARATOR}' || greatest(source_key, target_key)
                            IN (SELECT key FROM _gm_scope_r WHERE NOT ({single}))"""
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _gm_rm AS
            SELECT {columns} FROM relation_mentions m JOIN _gm_pairs p ON m.source_key = p.s AND m.target_key = p.t
            {unclear}"""
    )
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _gm_em AS
            WITH explicit AS (
                SELECT chunk_id, document_id, ord, name_key AS key, name, type FROM entity_mentions
                WHERE name_key IN (SELECT key FROM {entity_scope})
            ), implicit AS (
                SELECT n.chunk_id, x.document_id, 1000000 AS ord, n.name_key AS key, n.name, '{FALLBACK_TYPE}' AS type
                FROM entity_names n JOIN extractions x ON x.chunk_id = n.chunk_id
                WHERE n.name_key IN (SELECT key FROM {entity_scope}) AND n.type = '{FALLBACK_TYPE}'
                  AND NOT EXISTS (SELECT 1 FROM explicit e WHERE e.chunk_id = n.chunk_id AND e.key = n.name_key)
            )
            SELECT * FROM explicit UNION ALL SELECT * FROM implicit"""
    )


def _drop_temp(con: duckdb.DuckDBPyConnection) -> None:
    for table in ("_gm_alias", "_gm_raw", "_gm_rm", "_gm_em", "_gm_scope_e", "_gm_scope_r", "_gm_new",
                  "_gm_changed", "_gm_batch", "_gm_bm", "_gm_gone", "_gm_gone_e", "_gm_chunks", "_gm_more",
                  "_gm_pairs", "_pr_dirty", "_pr_done", "_pr_c", "_pr_r", "_pr_k", "_pr_f", "_pr_hot", "_pr_m",
                  "_gm_scope_em",
                  *entity_tallies.TEMP_TABLES):
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
    """Entity and relation keys the current ok records of these chunks mention (aliases applied), read from
    the mention tables, so even a record too large to parse again costs nothing here.

    Call it before replacing or deleting the records of changed chunks and again after writing the new
    ones; merging the union of both answers updates the graph for exactly those changes.

    Only the key columns are read (issue 23: loading the chunks' mention rows whole, as the merge does, was
    ~0.1 s of a one-file edit at 100 MB, and every write of a full build paid it for chunks that had no record
    yet): the entity keys are those of the chunks' ``entity_names`` rows, which name every raw key an entity
    entry or a relation endpoint of the chunk has. That is the merge's set (``_load_mentions``: explicit
    mentions, and the endpoints of relations whose two ends stay apart under the aliases) plus, at most, the
    key two aliased endpoints share, which merging again leaves as it is. Chunks without an ok record have no
    mention rows and are not looked for.
    """
    ensure_mentions(con)
    ids = chunks_with_mentions(con, chunk_ids)
    if not ids:
        return set(), set()
    with _temp_tables(con):
        _load_aliases(con)
        entity_keys = {k for (k,) in con.execute(
            """SELECT DISTINCT coalesce(a.key, n.name_key) FROM entity_names n
               LEFT JOIN _gm_alias a ON a.raw = n.name_key
               WHERE n.chunk_id IN (SELECT unnest(?::VARCHAR[]))""", [ids]).fetchall()}
        relation_keys = {k for (k,) in con.execute(
            f"""SELECT DISTINCT least(s, t) || '{KEY_SEPARATOR}' || greatest(s, t) FROM (
                    SELECT coalesce(a.key, m.source_key) AS s, coalesce(b.key, m.target_key) AS t
                    FROM relation_mentions m LEFT JOIN _gm_alias a ON a.raw = m.source_key
                    LEFT JOIN _gm_alias b ON b.raw = m.target_key
                    WHERE m.chunk_id IN (SELECT unnest(?::VARCHAR[])))
                WHERE s <> t""", [ids]).fetchall()}
    return entity_keys, relation_keys


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


_piece_tokens = functools.lru_cache(maxsize=1 << 16)(count_tokens)
"""``count_tokens`` of a sentence (with its joining space) while fitting: the same sentences recur across the keys
of a merge (counting them was ~1.6 s of a 6.8 s full merge at 10 MB of generated text)."""


def fit_sentences(ranked: Sequence[str], max_tokens: int) -> tuple[str, bool]:
    """Distinct sentences, already ranked, joined within ``max_tokens``.

    Returns (text, complete): complete is False when sentences had to be dropped or cut to fit. A sentence
    costs at least one token, so the first ``max_tokens + 1`` of the ranking decide the result: the merge
    never needs more of them."""
    text, complete, _ = _fit(ranked, max_tokens)
    return text, complete


def _fit(ranked: Sequence[str], max_tokens: int) -> tuple[str, bool, int | None]:
    """``fit_sentences``, with the text's token count when fitting counted it (None when it did not need to)."""
    text = " ".join(ranked)
    if len(text) <= max_tokens:  # a token is at least one character: no need to count
        return text, True, None
    kept, used = [], 0
    for sentence in ranked:
        cost = _piece_tokens((" " if kept else "") + sentence)
        if used + cost > max_tokens:
            if not kept:
                kept.append(truncate_to_tokens(sentence, max_tokens))
                return kept[0], False, None
            return " ".join(kept), False, None
        kept.append(sentence)
        used += cost
    # ``used`` is the joined text's count: sentences are whitespace-normalised and joined by one space, and no
    # token of the tokenizer spans a space except as its first character, so each sentence with its joining
    # space tokenises alone as it does in the text (tests/test_graph_merge.py checks it on hostile sentences)
    return " ".join(kept), True, used


def merge_sentences(descriptions: Sequence[str | None], max_tokens: int) -> tuple[str, bool]:
    """Distinct sentences of the descriptions by frequency (case-insensitive), then first appearance, within
    ``max_tokens``: what a merged description is. The merge ranks the same way in SQL over ``mention_texts``."""
    return fit_sentences(_ranked([s for d in descriptions for s in sentences(d)], fold), max_tokens)


def merge_keywords(keywords: Sequence[str | None]) -> str:
    """Distinct comma/semicolon-separated keywords by frequency (case-insensitive), joined with ', '."""
    return ", ".join(_ranked([p for k in keywords for p in keyword_parts(k)], fold))


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
                 model: str | None, stats: MergeStats, by_difference: bool = False):
        self.con, self.summarise, self.max_tokens, self.model, self.stats = con, summarise, max_tokens, model, stats
        self.by_difference = by_difference   # kept part rankings are updated from dirty_parts (part_rankings)
        self.pending: dict[int, tuple[str, str, str]] = {}   # slot -> (kind, name, key)
        self.tokens: dict[str, int] = {}   # token counts of texts ``merge`` made, while their batch is written
        self._summaries_exist: bool | None = None

    def _any_summary(self) -> bool:
        if self._summaries_exist is None:
            self._summaries_exist = bool(self.con.execute(
                "SELECT count(*) FROM (SELECT 1 FROM description_summaries LIMIT 1)").fetchall()[0][0])
        return self._summaries_exist

    def merge(self, slot: int, kind: str, name: str, ranked: list[str], key: str) -> str:
        """The merged text of one key from its ranked distinct sentences; over budget, the slot is queued
        for ``resolve``. ``name`` is what the summariser sees."""
        text, complete, tokens = _fit(ranked, self.max_tokens)
        if tokens is not None:
            self.tokens[text] = tokens
        if not complete:
            self.pending[slot] = (kind, name, key)
        return text

    def resolve(self, distinct_of: Callable[[list[str]], dict[str, list[str]]]) -> dict[int, str]:
        """Summaries for the over-budget slots: cached, freshly made, or (offline) none, keeping the cut text.
        ``distinct_of(keys)`` gives each key's distinct whole descriptions, ranked: the summariser's input."""
        if not self.pending:
            return {}
        if self.summarise is None and not self._any_summary():
            # offline, in a home no summary was ever made for: no summary can apply, so the cut text stays and
            # the summariser's input (every distinct description of the key) is not gathered
            self.pending.clear()
            return {}
        distinct = distinct_of(sorted({key for _, _, key in self.pending.values()}))
        pending = {slot: (_summary_hash(kind, name, distinct.get(key, []), self.max_tokens), kind, name,
                          distinct.get(key, []), key)
                   for slot, (kind, name, key) in self.pending.items()}
        self.pending.clear()
        hashes = sorted({p[0] for p in pending.values()})
        cached = dict(self.con.execute(
            "SELECT input_hash, summary FROM description_summaries WHERE input_hash IN (SELECT unnest(?::VARCHAR[]))",
            [hashes],
        ).fetchall())
        fresh = []
        out = {}
        for slot, (h, kind, name, texts, key) in sorted(pending.items()):
            if h in cached:
                self.stats.summaries_cached += 1
            elif isinstance(self.summarise, DeferredSummaries):
                self.summarise.requests[h] = (kind, name, texts)
                self.summarise.keys_of.setdefault(h, set()).add((kind, key))
                continue
            elif self.summarise is not None:
                summary = self.summarise(kind, name, texts)
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

def _set_scope(con: duckdb.DuckDBPyConnection, table: str, keys: Iterable[str], column: str = "key") -> None:
    _temp_table(con, table, pa.table({column: pa.array(sorted(set(keys)), pa.string())}))


_COMPARED = {
    "entities": ("name", "type", "description", "description_tokens", "mention_count", "source_chunk_ids", "document_ids"),
    "relations": ("src_key", "tgt_key", "keywords", "description", "description_tokens", "strength", "mention_count",
                  "source_chunk_ids", "document_ids"),
}


MERGE_BATCH_ROWS = 2_000_000
"""Mentions aggregated at a time: the merge walks the keys in batches of about this many mention rows. DuckDB
counts, ranks and lists them (within its memory limit, spilling past it); Python sees per key its distinct
names and types and at most ``max_description_tokens + 1`` ranked sentences, plus one float per relation mention
(strengths, summed exactly), so its memory is bounded by the batch, not the corpus. Each batch scans the mention
tables again, so fewer, larger batches are faster: 200,000 made a one-file edit at 100 MB walk 15 batches."""


def _write(con: duckdb.DuckDBPyConnection, table: str, key_col: str, rows: pa.Table) -> int:
    """Upsert ``rows`` into ``table``; rows whose content is unchanged keep their updated_at.
    Returns the number of rows written (new or changed)."""
    _temp_table(con, "_gm_new", rows)
    differs = " OR ".join(f"n.{c} IS DISTINCT FROM o.{c}" for c in _COMPARED[table])
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _gm_changed AS
            SELECT n.* FROM _gm_new n LEFT JOIN {table} o ON o.{key_col} = n.{key_col}
            WHERE o.{key_col} IS NULL OR {differs}"""
    )
    written = con.execute("SELECT count(*) FROM _gm_changed").fetchall()[0][0]
    if written:   # their vectors are sent again (storage/vector_ledger.py)
        vector_ledger.mark_stale(con, table, f"SELECT {key_col} FROM _gm_changed")
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


def _by_key(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> dict[str, list[tuple]]:
    """Rows of ``sql`` (key first) grouped by key, in the query's order."""
    out: dict[str, list[tuple]] = {}
    for row in con.execute(sql, params or []).fetchall():
        out.setdefault(row[0], []).append(row[1:])
    return out


STREAM_ROWS = 50_000
"""Rows fetched at a time from a merge query whose answer Python reduces key by key (``_ranked_parts``)."""


def _by_key_streamed(result: duckdb.DuckDBPyConnection) -> Iterator[tuple[str, list[str]]]:
    """(key, [text, ...]) from a query result of (key, text) rows ordered by key, ``STREAM_ROWS`` rows at a time."""
    key, parts = None, []
    while rows := result.fetchmany(STREAM_ROWS):
        for k, text in rows:
            if k != key:
                if key is not None:
                    yield key, parts
                key, parts = k, []
            parts.append(text)
    if key is not None:
        yield key, parts


def _ranked_parts(con: duckdb.DuckDBPyConnection, field: str, limit: int | None,
                  by_difference: bool = False) -> Iterator[tuple[str, list[str]]]:
    """Per key of the batch's mentions (_gm_bm), its distinct ``field`` parts (``mention_texts``) by count,
    then first appearance in (chunk, entry, position) order; at most ``limit`` of them. Yields (key, parts) in
    key order, fetching ``STREAM_ROWS`` rows at a time, so the caller can reduce each key's parts to its text
    and Python never holds the batch's parts at once (a batch of relations has millions: issue 23).
    With a ``limit``, the rankings of keys with many parts are kept and, ``by_difference``, updated from the
    parts that changed instead of ranked again (``part_rankings``)."""
    if limit is not None:
        result = con.execute(part_rankings.rank_batch(con, field, int(limit), by_difference))
    else:
        result = con.execute(f"""
            WITH g AS (
                SELECT t.key, t.fold, count(*) AS n, arg_min(t.text, (t.chunk_id, t.ord, t.pos)) AS text,
                       min((t.chunk_id, t.ord, t.pos)) AS first
                FROM ({parts_of(field, "_gm_bm")}) t
                GROUP BY t.key, t.fold
            )
            SELECT key, text FROM (SELECT key, text, n, first,
                                          row_number() OVER (PARTITION BY key ORDER BY n DESC, first) AS rn FROM g)
            ORDER BY key, rn""")
    yield from _by_key_streamed(result)


def _distinct_descriptions(con: duckdb.DuckDBPyConnection, field: str, keys: list[str],
                           mentions: str = "_gm_bm") -> dict[str, list[str]]:
    """Per key, its mentions' distinct whole descriptions (whitespace-normalised; compared case-folded) by
    count, then first appearance: what a summary is made from. ``mentions``: where the keys' mentions are."""
    return {k: [r[0] for r in v] for k, v in _by_key(con, f"""
        WITH d AS (
            SELECT t.key, t.chunk_id, t.ord, string_agg(t.text, ' ' ORDER BY t.pos) AS text,
                   string_agg(t.fold, ' ' ORDER BY t.pos) AS fold
            FROM ({parts_of(field, f"(SELECT * FROM {mentions} WHERE key IN (SELECT unnest(?::VARCHAR[])))")}) t
            GROUP BY t.key, t.chunk_id, t.ord
        ), g AS (
            SELECT key, fold, count(*) AS n, arg_min(text, (chunk_id, ord)) AS text, min((chunk_id, ord)) AS first
            FROM d GROUP BY key, fold
        )
        SELECT key, text FROM g ORDER BY key, n DESC, first""", [keys]).items()}


def _counts(con: duckdb.DuckDBPyConnection, column: str) -> dict[str, dict]:
    """Per key of the batch's mentions, how often each value of ``column`` occurs."""
    return {k: dict(v) for k, v in _by_key(
        con, f"SELECT key, {column}, count(*) FROM _gm_bm GROUP BY ALL ORDER BY key").items()}


def _provenance(con: duckdb.DuckDBPyConnection, max_source_ids: int, extra: str = "") -> pa.Table:
    """Per key of the batch's mentions, sorted by key: mention count, its ``max_source_ids`` smallest distinct
    chunk ids (all of them for 0) and the distinct documents of those chunks, both sorted."""
    kept = f"WHERE rn <= {int(max_source_ids)}" if max_source_ids > 0 else ""
    return con.sql(
        f"""WITH chunks AS (
                SELECT key, chunk_id, any_value(document_id) AS document_id,
                       row_number() OVER (PARTITION BY key ORDER BY chunk_id) AS rn
                FROM _gm_bm GROUP BY key, chunk_id
            ), sources AS (
                SELECT key, list(chunk_id ORDER BY chunk_id) AS source_chunk_ids,
                       list_sort(list_distinct(list(document_id))) AS document_ids
                FROM chunks {kept} GROUP BY key
            )
            SELECT m.*, s.source_chunk_ids, s.document_ids
            FROM (SELECT key, count(*)::INTEGER AS mention_count {extra} FROM _gm_bm GROUP BY key) m
            JOIN sources s USING (key) ORDER BY m.key"""
    ).to_arrow_table()


def _merge_batched(con, full: bool, descriptions: _Descriptions, *, mentions: str, key: str, scope: str,
                   table: str, table_key: str, to_rows: Callable[[], pa.Table]) -> tuple[int, int, int, set[str]]:
    """Recompute ``table`` from its ``mentions`` key batch by key batch (bounded memory), then drop rows no
    mention names any more. Returns (written, deleted, unchanged, deleted keys)."""
    written = total = 0
    for b in _key_batches(con, mentions, key, full, scope):
        alias = "" if key == "key" else f", {key} AS key"      # the batch's mentions always carry a ``key``
        con.execute(f"""CREATE OR REPLACE TEMP TABLE _gm_bm AS SELECT *{alias} FROM {mentions}
                        WHERE {key} IN (SELECT key FROM _gm_batch WHERE b = {b})""")
        rows = to_rows()
        written += _write(con, table, table_key, rows)
        total += rows.num_rows
    deleted = _delete_unmentioned(con, table, table_key, mentions, key, full, scope)
    return written, len(deleted), total - written, deleted


def _with_descriptions(out: dict[str, list], descriptions: _Descriptions, field: str,
                       mentions: str = "_gm_bm") -> list[str]:
    """The description column: the cut text, or the summary resolved for an over-budget key."""
    for slot, summary in descriptions.resolve(
            lambda keys: _distinct_descriptions(descriptions.con, field, keys, mentions)).items():
        out["description"][slot] = summary
    return out["description"]


def _described(base: pa.Table, description: list[str], descriptions: _Descriptions,
               **between: pa.Array) -> dict[str, pa.Array]:
    """The columns every merged entity and relation ends with: its description, then (after ``between``) how
    often it was extracted and from where. Token counts the fitting already made are used (and let go)."""
    counted, descriptions.tokens = descriptions.tokens, {}
    return {"description": pa.array(description, pa.string()),
            "description_tokens": pa.array([counted.get(d) or count_tokens(d) for d in description], pa.int32()),
            **between,
            "mention_count": base.column("mention_count"),
            "source_chunk_ids": base.column("source_chunk_ids"),
            "document_ids": base.column("document_ids")}


def _entity_rows(con: duckdb.DuckDBPyConnection, descriptions: _Descriptions, max_source_ids: int) -> pa.Table:
    limit = descriptions.max_tokens + 1
    rows = _entity_table(_provenance(con, max_source_ids), _counts(con, "name"), _counts(con, "type"), descriptions,
                         _ranked_parts(con, ENTITY_DESCRIPTION, limit, descriptions.by_difference))
    entity_tallies.keep(con, part_rankings.buffer_size(limit), max_source_ids)
    return rows


_TALLIED_MENTIONS = "(SELECT name_key AS key, chunk_id, ord FROM entity_mentions)"
"""Where the explicit mentions of a tallied entity are: a tallied key has no alias (its implicit mentions, the
relation endpoints no entity entry names, have no description)."""


def _merge_tallied(con: duckdb.DuckDBPyConnection, descriptions: _Descriptions,
                   max_source_ids: int) -> tuple[int, int, int]:
    """Merge by difference the entities in scope whose tallies are kept and give them exactly (``entity_tallies``;
    their description rankings updated by ``part_rankings``), reading none of their mentions but those holding a
    changed description part. Returns (written, unchanged, tally changes read); the keys merged are in temp table
    _et_ok, and every other key in scope is left to the merge from all its mentions."""
    entity_tallies.update(con, "_gm_scope_e", max_source_ids)
    if not con.execute("SELECT count(*) FROM _et_ok").fetchall()[0][0]:
        return 0, 0, 0
    limit = descriptions.max_tokens + 1
    # the changed parts' rows in these keys' mentions: all the update counts again (found by their folds, one
    # scan of mention_texts, not by joining every mention of the keys with it: ~0.3 s of an edit at 100 MB)
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _et_m AS
                    SELECT m.name_key AS key, t.chunk_id, t.ord, t.pos, t.fold, t.text
                    FROM (SELECT * FROM mention_texts
                          WHERE field = '{ENTITY_DESCRIPTION}' AND fold IN (
                              SELECT fold FROM _pr_dirty
                              WHERE field = '{ENTITY_DESCRIPTION}' AND key IN (SELECT key FROM _et_ok))) t
                    JOIN entity_mentions m ON m.chunk_id = t.chunk_id AND m.ord = t.ord
                    WHERE m.name_key IN (SELECT key FROM _et_ok)""")
    ranked = con.execute(part_rankings.update_kept_only(con, ENTITY_DESCRIPTION, limit, "SELECT key FROM _et_ok",
                                                        "_et_m"))
    ranked_rows = list(_by_key_streamed(ranked))    # at most ``limit`` parts per key
    con.execute("DELETE FROM _et_ok WHERE key NOT IN (SELECT key FROM _pr_done)")
    base = con.sql(f"""
        WITH counts AS (SELECT key, sum(n)::INTEGER AS mention_count FROM _et_n
                        WHERE key IN (SELECT key FROM _et_ok) GROUP BY key),
             sources AS (SELECT key, list(chunk_id ORDER BY chunk_id) AS source_chunk_ids,
                                list_sort(list_distinct(list(document_id))) AS document_ids
                         FROM _et_c WHERE key IN (SELECT key FROM _et_ok) AND rn <= {int(max_source_ids)} GROUP BY key)
        SELECT c.key, c.mention_count, s.source_chunk_ids, s.document_ids FROM counts c JOIN sources s USING (key)
        ORDER BY c.key""").to_arrow_table()
    if not base.num_rows:
        return 0, 0, 0
    counted = "SELECT key, {0}, sum(n) FROM _et_n WHERE key IN (SELECT key FROM _et_ok) GROUP BY ALL ORDER BY key"
    names = {k: dict(v) for k, v in _by_key(con, counted.format("name")).items()}
    types = {k: dict(v) for k, v in _by_key(con, counted.format("type")).items()}
    done = set(base.column("key").to_pylist())
    rows = _entity_table(base, names, types, descriptions, ((k, p) for k, p in ranked_rows if k in done),
                         mentions=_TALLIED_MENTIONS)
    written = _write(con, "entities", "entity_key", rows)
    entity_tallies.store_updated(con, max_source_ids)
    changes = con.execute("SELECT count(*) FROM _et_log WHERE name_key IN (SELECT key FROM _et_ok)").fetchall()[0][0]
    return written, rows.num_rows - written, changes


def _entity_table(base: pa.Table, names: dict[str, dict], types: dict[str, dict], descriptions: _Descriptions,
                  ranked: Iterable[tuple[str, list[str]]], mentions: str = "_gm_bm") -> pa.Table:
    """Entity rows from their provenance (``_provenance``), name and type counts and ranked description parts
    (key by key, in key order); ``mentions``: where their mentions are, for a summary's input."""
    keys = base.column("key").to_pylist()
    slot_of = {key: slot for slot, key in enumerate(keys)}
    out: dict[str, list] = {"name": [display_name_counts(names[key]) for key in keys],
                            "type": [type_vote(types[key]) for key in keys],
                            "description": [""] * len(keys)}   # a key without a description sentence
    for key, parts in ranked:
        slot = slot_of[key]
        out["description"][slot] = descriptions.merge(slot, "entity", out["name"][slot], parts, key)
    description = _with_descriptions(out, descriptions, ENTITY_DESCRIPTION, mentions)
    return pa.table({
        "entity_key": base.column("key"),
        "name": pa.array(out["name"], pa.string()),
        "type": pa.array(out["type"], pa.string()),
        **_described(base, description, descriptions),
    })


def _merge_entities(con, full: bool, descriptions: _Descriptions,
                    max_source_ids: int) -> tuple[int, int, int, set[str]]:
    return _merge_batched(con, full, descriptions, mentions="_gm_em", key="key", scope="_gm_scope_em",
                          table="entities", table_key="entity_key",
                          to_rows=lambda: _entity_rows(con, descriptions, max_source_ids))


def _relation_rows(con: duckdb.DuckDBPyConnection, descriptions: _Descriptions, max_source_ids: int) -> pa.Table:
    base = _provenance(con, max_source_ids,
                       ", any_value(src_key) AS src_key, any_value(tgt_key) AS tgt_key, list(strength) AS strengths")
    keys = base.column("key").to_pylist()
    slot_of = {key: slot for slot, key in enumerate(keys)}
    src_names, tgt_names = _counts(con, "src_name"), _counts(con, "tgt_name")
    out: dict[str, list] = {"keywords": [""] * len(keys), "description": [""] * len(keys),
                            "strength": [math.fsum(s) for s in base.column("strengths").to_pylist()]}
    for key, parts in _ranked_parts(con, RELATION_KEYWORDS, None):
        out["keywords"][slot_of[key]] = ", ".join(parts)
    for key, ranked in _ranked_parts(con, RELATION_DESCRIPTION, descriptions.max_tokens + 1,
                                     descriptions.by_difference):
        slot = slot_of[key]
        label = f"{display_name_counts(src_names[key])} <-> {display_name_counts(tgt_names[key])}"
        out["description"][slot] = descriptions.merge(slot, "relation", label, ranked, key)
    description = _with_descriptions(out, descriptions, RELATION_DESCRIPTION)
    return pa.table({
        "relation_key": base.column("key"),
        "src_key": base.column("src_key"),
        "tgt_key": base.column("tgt_key"),
        "keywords": pa.array(out["keywords"], pa.string()),
        **_described(base, description, descriptions, strength=pa.array(out["strength"], pa.float64())),
    })


def _merge_relations(con, full: bool, descriptions: _Descriptions,
                     max_source_ids: int) -> tuple[int, int, int, set[str]]:
    return _merge_batched(con, full, descriptions, mentions="_gm_rm", key="relation_key", scope="_gm_scope_r",
                          table="relations", table_key="relation_key",
                          to_rows=lambda: _relation_rows(con, descriptions, max_source_ids))


def merge_keys(con: duckdb.DuckDBPyConnection, entity_keys: set[str] | None, relation_keys: set[str] | None, *,
               summarise: Summarise | None = None,
               max_description_tokens: int = DEFAULT_MAX_DESCRIPTION_TOKENS,
               summary_model: str | None = None, max_source_ids: int | None = None,
               by_difference: bool = False) -> MergeStats:
    """Recompute these entity and relation keys from the current ok extraction records.

    A key still mentioned is upserted (rows whose content did not change are left alone); a key no longer
    mentioned is deleted. ``None`` for both means a full rebuild of both tables. The endpoints of the given
    relations are recomputed too, and so is every stored relation touching an entity that disappears, so no
    relation is ever left without its endpoints. Runs in the caller's transaction, if any; wrap it in
    ``store.transaction`` for atomicity. ``summary_model`` is recorded with new summaries for inspection.
    ``max_source_ids`` caps each row's chunk and document lists (None: ``MAX_SOURCE_IDS``; 0: the papers' full
    lists).

    An incremental merge reads only the mentions of the touched keys from the mention tables
    (``mention_index``), never an extraction record, so its cost follows the touched keys, not the corpus.
    ``by_difference``: the keys' description rankings kept in ``ranked_parts`` are updated from the parts that
    records written since changed (``dirty_parts``) instead of ranked again, and the entities whose tallies are
    kept are updated from the mention rows written and deleted since (``tally_changes``) without reading their
    mentions; only for keys whose raw keys are the same as when their rankings were kept (record changes, not
    alias changes: ``part_rankings``, ``entity_tallies``).
    """
    if max_source_ids is None:
        max_source_ids = MAX_SOURCE_IDS
    if max_source_ids < 0:
        raise ValueError(f"max_source_ids={max_source_ids} must be 0 (keep every chunk id) or more")
    if max_description_tokens < 1:
        raise ValueError(f"max_description_tokens={max_description_tokens} must be at least 1")
    if (entity_keys is None) != (relation_keys is None):
        raise ValueError("pass None for both entity_keys and relation_keys (full rebuild) or sets for both")
    started = time.perf_counter()
    stats = MergeStats()
    full = entity_keys is None
    descriptions = _Descriptions(con, summarise, max_description_tokens, summary_model, stats,
                                 by_difference=by_difference and not full)
    with _temp_tables(con):
        tallied = (0, 0, 0)
        if full:
            part_rankings.forget_all(con)
            entity_tallies.forget_all(con)
            _load_mentions(con)
        else:
            _set_scope(con, "_gm_scope_r", relation_keys)
            _set_scope(con, "_gm_scope_e", entity_keys)
            _widen_scope(con)
            rest = "SELECT key FROM _gm_scope_e"
            if by_difference:
                part_rankings.load_dirty(con, KEY_SEPARATOR)
                if max_source_ids > 0:   # (a tally cannot bound a list of every chunk)
                    tallied = _merge_tallied(con, descriptions, max_source_ids)
                    rest += " WHERE key NOT IN (SELECT key FROM _et_ok)"
            con.execute(f"CREATE OR REPLACE TEMP TABLE _gm_scope_em AS {rest}")
            _load_scope_mentions(con, "_gm_scope_em")
        stats.chunks_read, stats.mentions_read = _mentions_read(con)
        stats.entities_written, stats.entities_deleted, stats.entities_unchanged, gone = \
            _merge_entities(con, full, descriptions, max_source_ids)
        stats.entities_written += tallied[0]
        stats.entities_unchanged += tallied[1]
        stats.entities_tallied, stats.tally_changes_read = tallied[0] + tallied[1], tallied[2]
        part_rankings.forget_keys(con, ENTITY_DESCRIPTION, gone)
        entity_tallies.forget_keys(con, gone)
        if not full and gone:
            _set_scope(con, "_gm_gone_e", gone)
            con.execute(
                """INSERT INTO _gm_scope_r
                   SELECT DISTINCT relation_key FROM relations
                   WHERE (src_key IN (SELECT key FROM _gm_gone_e) OR tgt_key IN (SELECT key FROM _gm_gone_e))
                     AND relation_key NOT IN (SELECT key FROM _gm_scope_r)"""
            )
        stats.relations_written, stats.relations_deleted, stats.relations_unchanged, gone_r = \
            _merge_relations(con, full, descriptions, max_source_ids)
        part_rankings.forget_keys(con, RELATION_DESCRIPTION, gone_r)
        if not full:
            part_rankings.consume_dirty(con, KEY_SEPARATOR, {ENTITY_DESCRIPTION: "_gm_scope_e",
                                                            RELATION_DESCRIPTION: "_gm_scope_r"})
            entity_tallies.consume(con, "_gm_scope_e")
    stats.seconds = time.perf_counter() - started
    return stats


def relation_keys_touching(con: duckdb.DuckDBPyConnection, entity_keys: Iterable[str]) -> set[str]:
    """Stored relations with an endpoint among these keys, plus those the current records would produce.

    Read from the mention tables: the relation mentions whose endpoints resolve to one of these keys."""
    keys = sorted(set(entity_keys))
    if not keys:
        return set()
    stored = {k for (k,) in con.execute(
        """SELECT relation_key FROM relations
           WHERE src_key IN (SELECT unnest(?::VARCHAR[])) OR tgt_key IN (SELECT unnest(?::VARCHAR[]))""",
        [keys, keys],
    ).fetchall()}
    with _temp_tables(con):
        _set_scope(con, "_gm_scope_e", keys)
        _load_mentions(con, scoped=True)
        produced = {k for (k,) in con.execute(
            """SELECT DISTINCT relation_key FROM _gm_rm
               WHERE src_key IN (SELECT key FROM _gm_scope_e) OR tgt_key IN (SELECT key FROM _gm_scope_e)"""
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
                        max_description_tokens: int = DEFAULT_MAX_DESCRIPTION_TOKENS,
                        max_source_ids: int | None = None) -> MergeStats:
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
        return merge_keys(con, before_e | after_e, before_r | after_r, summarise=summarise,
                          max_description_tokens=max_description_tokens, max_source_ids=max_source_ids,
                          by_difference=True)


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
