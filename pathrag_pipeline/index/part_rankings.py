"""Description-part rankings kept by difference for keys with many parts (issue 23: "per-key aggregates
updated by difference ... the result stays equal to a rebuild").

A merged description is made of the key's distinct parts (sentences) ranked by how many of its mentions hold
them, then by first appearance in (chunk, entry, position) order; the first ``limit`` of the ranking
(``max_description_tokens + 1``) decide the text (``graph_merge.fit_sentences``). Ranking from scratch costs a
pass over every part of every mention of the key: a place named all over the 100 MB scale corpus has ~35,000
distinct sentences, and the ~120 such keys a one-file edit touches made the ranking 2.2 s of its 6 s merge.

So for every key with at least ``buffer_size(limit)`` mentions and more distinct parts than that, the merge
stores the top ``buffer_size`` of its ranking (``ranked_parts``: count, first appearance, text) and a bound (``ranked_parts_keys``): the rank of
the last part kept, every part not kept ranking strictly below it (or, for a key with at most that many parts,
a note that the kept ranking is complete). The mention tables record, in the transaction
that changes them, the parts of every mention written or deleted (``dirty_parts``, by raw key: aliases are applied
when it is read). A merge by difference (``by_difference``) then counts again, exactly and from the live mention
tables, only the changed parts of a kept key, puts them in place of their old entries, and keeps whatever ranks at
or above the bound: the true top of the ranking, since every other part of the key kept its count and first
appearance and ranked below the bound already. When fewer than ``limit`` parts remain above it (deletions pushed
top parts down), the key is ranked in full again, as is every key without a stored ranking, every key of a full
merge and every key a merge that is not by difference recomputes (an alias change: the key's raw keys changed,
which ``dirty_parts`` does not describe). A key with that many mentions and no part at all keeps an empty, complete
ranking, so it too is updated by difference. ``update_kept_only`` is the update alone, for the entities the merge
updates from their tallies (``entity_tallies``), counting their changed parts from those parts' own rows. Keyword
rankings are never kept (a relation has few distinct keywords, and all of them are used). Equal to the full ranking always: tested against rebuilds over random histories with
rankings small enough to be kept and cut.
"""

from __future__ import annotations

from typing import Iterable

import duckdb

from pathrag_pipeline.index.mention_fields import ENTITY_DESCRIPTION, PARTS_COLUMN, RELATION_DESCRIPTION, parts_of

BUFFER_FACTOR = 2
"""A kept ranking holds ``BUFFER_FACTOR * limit`` parts, where ``limit`` is what a description can use: the margin
lets deletions remove top parts without a full ranking, while a kept ranking stays a small share of the key's parts
(1,002 of ~35,000 for the hot keys of the scale corpus)."""

FIRST = "{'c': t.chunk_id, 'o': t.ord, 'p': t.pos}"
"""A part occurrence's position, compared field by field: chunk id, entry, position in the entry."""
_STORED_FIRST = "{'c': first_chunk, 'o': first_ord, 'p': first_pos}"
_TABLES = ("ranked_parts", "ranked_parts_keys", "dirty_parts")


def buffer_size(limit: int) -> int:
    return BUFFER_FACTOR * limit


def forget_all(con: duckdb.DuckDBPyConnection) -> None:
    """Drop every kept ranking and change record (a full merge, or mention tables rebuilt under new rules)."""
    for table in _TABLES:
        con.execute(f"DELETE FROM {table}")


def any_kept(con: duckdb.DuckDBPyConnection) -> bool:
    return bool(con.execute("SELECT count(*) FROM (SELECT 1 FROM ranked_parts_keys LIMIT 1)").fetchall()[0][0])


def record_changed_parts(con: duckdb.DuckDBPyConnection, chunk_ids: Iterable[str]) -> None:
    """Record the description parts of these chunks' current mentions as changed: called on the rows about to
    be deleted (the rows just written record theirs as they are inserted: ``record_parts_of``). Nothing is
    recorded while no ranking is kept (a first build)."""
    ids = sorted(set(chunk_ids))
    if not ids or not any_kept(con):
        return
    record_parts_of(con, "mention_texts", "entity_mentions", "relation_mentions", chunk_ids=ids)


def record_parts_of(con: duckdb.DuckDBPyConnection, texts: str, entities: str, relations: str, *,
                    chunk_ids: list[str] | None = None) -> None:
    """Record as changed the description parts of the mention rows in these tables (the mention tables, or a
    batch of rows being inserted into them: a batch's own rows, so a write does not scan the mention tables of a
    100 MB home, millions of rows, to find what it just wrote), only those of ``chunk_ids`` when given."""
    chunks = "" if chunk_ids is None else " AND {alias}.chunk_id IN (SELECT unnest($ids::VARCHAR[]))"
    column = PARTS_COLUMN[RELATION_DESCRIPTION]
    con.execute(
        f"""INSERT INTO dirty_parts
            SELECT DISTINCT t.field, m.name_key, NULL, t.fold
            FROM {texts} t JOIN {entities} m ON m.chunk_id = t.chunk_id AND m.ord = t.ord
            WHERE t.field = '{ENTITY_DESCRIPTION}'{chunks.format(alias="t")}
            UNION
            SELECT DISTINCT '{RELATION_DESCRIPTION}', source_key, target_key, part.fold
            FROM (SELECT m.source_key, m.target_key, unnest(m.{column}) AS part FROM {relations} m
                  WHERE true{chunks.format(alias="m")})""",
        {} if chunk_ids is None else {"ids": chunk_ids})


def _resolved_dirty(separator: str) -> str:
    """``dirty_parts`` with aliases applied (temp table _gm_alias): (field, key, fold)."""
    return f"""
        SELECT d.field, coalesce(a.key, d.source_key) AS key, d.fold
        FROM dirty_parts d LEFT JOIN _gm_alias a ON a.raw = d.source_key WHERE d.field = '{ENTITY_DESCRIPTION}'
        UNION ALL
        SELECT field, least(s, t) || '{separator}' || greatest(s, t), fold
        FROM (SELECT d.field, d.fold, coalesce(a.key, d.source_key) AS s, coalesce(b.key, d.target_key) AS t
              FROM dirty_parts d LEFT JOIN _gm_alias a ON a.raw = d.source_key
              LEFT JOIN _gm_alias b ON b.raw = d.target_key WHERE d.field = '{RELATION_DESCRIPTION}')
        WHERE s <> t"""


def load_dirty(con: duckdb.DuckDBPyConnection, separator: str) -> None:
    """Temp table _pr_dirty (field, key, fold): the changed parts, by merged key."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE _pr_dirty AS SELECT DISTINCT * FROM ({_resolved_dirty(separator)})")


def consume_dirty(con: duckdb.DuckDBPyConnection, separator: str, scopes: dict[str, str]) -> None:
    """Delete the change records of the keys a merge just recomputed (``scopes``: field -> temp table of keys)."""
    if not any_kept(con) and not con.execute("SELECT count(*) FROM (SELECT 1 FROM dirty_parts LIMIT 1)").fetchall()[0][0]:
        return
    for field, scope in scopes.items():
        if field == ENTITY_DESCRIPTION:
            con.execute(f"""DELETE FROM dirty_parts d WHERE d.field = '{field}'
                            AND coalesce((SELECT a.key FROM _gm_alias a WHERE a.raw = d.source_key), d.source_key)
                                IN (SELECT key FROM {scope})""")
        else:
            con.execute(f"""DELETE FROM dirty_parts d WHERE d.field = '{field}' AND (
                            SELECT least(s, t) || '{separator}' || greatest(s, t) FROM (
                                SELECT coalesce((SELECT a.key FROM _gm_alias a WHERE a.raw = d.source_key), d.source_key) AS s,
                                       coalesce((SELECT a.key FROM _gm_alias a WHERE a.raw = d.target_key), d.target_key) AS t))
                            IN (SELECT key FROM {scope})""")


def forget_keys(con: duckdb.DuckDBPyConnection, field: str, keys: Iterable[str]) -> None:
    """Drop the kept rankings of these keys (keys no longer mentioned)."""
    keys = sorted(set(keys))
    if keys:
        for table in ("ranked_parts", "ranked_parts_keys"):
            con.execute(f"DELETE FROM {table} WHERE field = ? AND key IN (SELECT unnest(?::VARCHAR[]))", [field, keys])


def rank_batch(con: duckdb.DuckDBPyConnection, field: str, limit: int, by_difference: bool) -> str:
    """Rank ``field``'s parts for every key of the batch's mentions (temp table _gm_bm: key, chunk_id, ord),
    keeping the rankings of keys with many parts; returns a query of (key, text) rows, the top ``limit`` parts
    of each key in rank order, ordered by key.

    With ``by_difference`` (the change records in _pr_dirty), a key with a kept ranking is updated from its
    changed parts; any other key, or one whose kept parts fall short, is ranked from all its mentions."""
    size = buffer_size(limit)
    _start(con)
    if by_difference:
        _update_kept(con, field, limit, size)
    # Every other key of the batch is ranked from all its mentions. A key with at least ``size`` mentions has
    # its ranking materialised and its top ``size`` parts kept; the rest stream as they are ranked
    # (a batch of relations has millions of parts, nearly all of keys with a few mentions: issue 23, memory).
    # (The mentions of each group are selected first: filtered after the join with mention_texts, an empty
    # group still cost a scan of every part of the corpus.)
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _pr_hot AS SELECT key FROM _gm_bm
                    WHERE key NOT IN (SELECT key FROM _pr_done) GROUP BY key HAVING count(*) >= {size}""")
    parts = f", {PARTS_COLUMN[field]}" if field in PARTS_COLUMN else ""   # a relation field: its parts list
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _pr_m AS SELECT key, chunk_id, ord{parts},
                           key IN (SELECT key FROM _pr_hot) AS hot
                    FROM _gm_bm WHERE key NOT IN (SELECT key FROM _pr_done)""")
    con.execute(f"CREATE OR REPLACE TEMP TABLE _pr_r AS {_full_ranking(field, True)} WHERE rn <= {size}")
    con.execute(f"""DELETE FROM ranked_parts WHERE field = '{field}'
                    AND key IN (SELECT key FROM _gm_bm WHERE key NOT IN (SELECT key FROM _pr_done))""")
    con.execute(f"""DELETE FROM ranked_parts_keys WHERE field = '{field}'
                    AND key IN (SELECT key FROM _gm_bm WHERE key NOT IN (SELECT key FROM _pr_done))""")
    con.execute(f"""INSERT INTO ranked_parts SELECT '{field}', key, fold, n, first.c, first.o, first.p, text
                    FROM _pr_r""")
    con.execute(f"""INSERT INTO ranked_parts_keys SELECT '{field}', key, n, first.c, first.o, first.p, total <= {size}
                    FROM _pr_r WHERE rn = least(total, {size})""")
    # a key with many mentions and no part: its (empty) ranking is complete, so it is updated by difference too
    con.execute(f"""INSERT INTO ranked_parts_keys SELECT '{field}', key, 0, '', 0, 0, true FROM _pr_hot
                    WHERE key NOT IN (SELECT key FROM _pr_r)""")
    return f"""SELECT key, text FROM (SELECT key, text, rn FROM ({_full_ranking(field, False)}) WHERE rn <= {limit}
                                      UNION ALL SELECT key, text, rn FROM _pr_r WHERE rn <= {limit}
                                      UNION ALL SELECT key, text, rn FROM _pr_c WHERE rn <= {limit})
               ORDER BY key, rn"""


def _full_ranking(field: str, hot: bool) -> str:
    """The complete ranking of ``field`` parts of the batch's keys not done yet (temp table _pr_m), the hot keys
    or the others: (key, fold, n, text, first, rn, total distinct parts)."""
    return f"""
        WITH m AS (SELECT * FROM _pr_m WHERE hot = {str(hot).lower()}), g AS (
            SELECT t.key, t.fold, count(*) AS n, arg_min(t.text, {FIRST}) AS text, min({FIRST}) AS first
            FROM ({parts_of(field, "m")}) t
            GROUP BY t.key, t.fold
        )
        SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY key ORDER BY n DESC, first) AS rn,
                              count(*) OVER (PARTITION BY key) AS total FROM g)"""


def update_kept_only(con: duckdb.DuckDBPyConnection, field: str, limit: int, keys: str, parts: str) -> str:
    """``rank_batch`` by difference for the keys of ``keys`` (SQL of a one-column query) only, counting their
    changed parts in ``parts`` (a table of the (key, chunk_id, ord, pos, fold, text) rows of ``parts_of``: at least
    those of the keys' mentions holding a changed part): no key is ranked in full. Returns a query of (key, text)
    rows, the top ``limit`` parts of each key updated, in rank order; the keys updated are in temp table _pr_done,
    any other (its kept parts fell short, or no ranking is kept) is left to the caller."""
    _start(con)
    _update_kept(con, field, limit, buffer_size(limit), keys=keys, parts=parts)
    return f"SELECT key, text FROM _pr_c WHERE rn <= {limit} ORDER BY key, rn"


def _start(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE OR REPLACE TEMP TABLE _pr_done (key VARCHAR)")
    con.execute("CREATE OR REPLACE TEMP TABLE _pr_c (key VARCHAR, fold VARCHAR, n BIGINT, "
                "first STRUCT(c VARCHAR, o INTEGER, p INTEGER), text VARCHAR, changed BOOLEAN, rn BIGINT)")


def _update_kept(con: duckdb.DuckDBPyConnection, field: str, limit: int, size: int,
                 keys: str = "SELECT key FROM _gm_bm", parts: str | None = None) -> None:
    """The kept rankings of the batch's keys (``keys``) updated from their changed parts, counted again over
    the batch's mentions, or the ``parts`` given (``update_kept_only``) (into _pr_c; keys in _pr_done)."""
    if parts is None:
        parts = f"({parts_of(field, '_gm_bm', folds='SELECT fold FROM _pr_f')})"
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _pr_k AS
                    SELECT key, n AS w_n, {_STORED_FIRST} AS w_first, complete FROM ranked_parts_keys
                    WHERE field = '{field}' AND key IN ({keys})""")
    if not con.execute("SELECT count(*) FROM _pr_k").fetchall()[0][0]:
        return
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _pr_f AS
                    SELECT DISTINCT key, fold FROM _pr_dirty WHERE field = '{field}' AND key IN (SELECT key FROM _pr_k)""")
    # the changed parts counted again from the live mentions of their key (a part no longer held: no row)
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE _pr_c AS
        WITH counted AS (
            SELECT t.key, t.fold, count(*) AS n, arg_min(t.text, {FIRST}) AS text, min({FIRST}) AS first
            FROM {parts} t
            JOIN _pr_f f ON f.key = t.key AND f.fold = t.fold
            GROUP BY t.key, t.fold
        ), candidates AS (
            SELECT key, fold, n, {_STORED_FIRST} AS first, text, false AS changed FROM ranked_parts b
            WHERE field = '{field}' AND key IN (SELECT key FROM _pr_k)
              AND NOT EXISTS (SELECT 1 FROM _pr_f f WHERE f.key = b.key AND f.fold = b.fold)
            UNION ALL
            SELECT key, fold, n, first, text, true FROM counted
        )
        SELECT c.key, c.fold, c.n, c.first, c.text, c.changed,
               row_number() OVER (PARTITION BY c.key ORDER BY c.n DESC, c.first) AS rn
        FROM candidates c JOIN _pr_k k ON k.key = c.key
        WHERE k.complete OR c.n > k.w_n OR (c.n = k.w_n AND c.first <= k.w_first)""")
    # done: keys whose kept ranking was complete (it still is, unless cut below) and keys that still have
    # ``limit`` parts at or above their bound; the others are ranked in full
    con.execute(f"""INSERT INTO _pr_done SELECT key FROM _pr_k WHERE complete
                    UNION SELECT key FROM _pr_c WHERE rn = {limit}""")
    con.execute("DELETE FROM _pr_c WHERE key NOT IN (SELECT key FROM _pr_done)")
    # only the rows that change are written: the changed parts' old rows go, and so do parts cut past the size;
    # the changed parts still kept come in (the other kept parts, most of them, stay as they are)
    con.execute(f"""DELETE FROM ranked_parts b WHERE field = '{field}' AND key IN (SELECT key FROM _pr_done)
                    AND (EXISTS (SELECT 1 FROM _pr_f f WHERE f.key = b.key AND f.fold = b.fold)
                         OR EXISTS (SELECT 1 FROM _pr_c c WHERE c.key = b.key AND c.fold = b.fold AND c.rn > {size}))""")
    con.execute(f"""INSERT INTO ranked_parts SELECT '{field}', key, fold, n, first.c, first.o, first.p, text
                    FROM _pr_c WHERE changed AND rn <= {size}""")
    # a ranking that grew past its size is cut there: the bound moves up to its new last part, and a complete
    # one is complete no more; a complete one within its size keeps its last part as the bound
    con.execute(f"""UPDATE ranked_parts_keys k SET n = c.n, first_chunk = c.first.c, first_ord = c.first.o,
                           first_pos = c.first.p, complete = k.complete AND c.total <= {size}
                    FROM (SELECT *, count(*) OVER (PARTITION BY key) AS total FROM _pr_c) c
                    WHERE k.field = '{field}' AND c.key = k.key AND c.rn = least(c.total, {size})""")
