"""Per-entity tallies kept by difference for entities with many mentions (issue 23: "Keep per-key mention counts,
description parts and source lists so an edit adds and subtracts its own chunks' contributions instead of
re-reading every chunk that mentions a touched key").

An entity row's name, type, mention count and provenance lists are functions of its mentions: how often each
(name, type) occurs, and its distinct chunks (the ``MAX_SOURCE_IDS`` smallest are listed, with their documents).
Recomputing them reads every mention of the key: a place named all over the 100 MB scale corpus has ~20,000
chunks, and the ~120 such keys a one-file edit touches made the merge aggregate ~790,000 mention rows from all
22,073 chunks.

So for every entity key with at least ``part_rankings.buffer_size(limit)`` mentions (the keys whose description
ranking is kept, the same bound) that no alias touches, the merge keeps:

- ``entity_tallies``: its mentions counted per (name, type): the name and type votes and the mention count;
- ``entity_tally_chunks``: its smallest ``CHUNK_BUFFER_FACTOR * max_source_ids`` distinct chunks with their
  documents, and in ``entity_tally_keys`` whether those are all of them (``complete``); otherwise every chunk not
  kept is larger than the last kept one (the bound).

The mention tables log, in the transaction that changes them, every ``entity_names`` row of a tallied key they
insert (+1) or delete (-1) (``tally_changes``; ``entity_names`` holds per chunk and raw key exactly what the
merge counts, implicit endpoint mentions included). A merge by difference then adds the logged rows to the
counts, and rebuilds the chunk list from the kept chunks and the logged chunks that still hold the key
(looked up in ``entity_names``): below the bound every chunk of the key is one of those two, so when at least
``max_source_ids`` remain there, or the kept list was complete, the listed chunks are exact; otherwise the key
is merged from all its mentions again. Description parts are updated by difference by ``part_rankings`` from
the key's mention rows holding a changed part only. A key that gains or loses an alias, and every key of a
merge that is not by difference, is recomputed from all its mentions, and its tallies made again from them.
Equal to a rebuild always: tested against rebuilds over random histories with small caps.
"""

from __future__ import annotations

from typing import Iterable

import duckdb

CHUNK_BUFFER_FACTOR = 2
"""A tally keeps ``CHUNK_BUFFER_FACTOR * max_source_ids`` chunks: the margin lets deletions remove listed chunks
without a full recount (as ``part_rankings.BUFFER_FACTOR`` for description parts)."""

TABLES = ("entity_tallies", "entity_tally_chunks", "entity_tally_keys", "tally_changes")
TEMP_TABLES = ("_et_k", "_et_log", "_et_n", "_et_cc", "_et_c", "_et_ok", "_et_m")


def chunk_buffer(max_source_ids: int) -> int:
    return CHUNK_BUFFER_FACTOR * max_source_ids


def any_kept(con: duckdb.DuckDBPyConnection) -> bool:
    return bool(con.execute("SELECT count(*) FROM (SELECT 1 FROM entity_tally_keys LIMIT 1)").fetchall()[0][0])


def forget_all(con: duckdb.DuckDBPyConnection) -> None:
    """Drop every tally and change record (a full merge, or mention tables rebuilt under new rules)."""
    for table in TABLES:
        con.execute(f"DELETE FROM {table}")


def forget_keys(con: duckdb.DuckDBPyConnection, keys: Iterable[str]) -> None:
    """Drop the tallies of these keys (keys no longer mentioned)."""
    keys = sorted(set(keys))
    if keys:
        for table in TABLES[:3]:
            con.execute(f"DELETE FROM {table} WHERE key IN (SELECT unnest(?::VARCHAR[]))", [keys])


def record_removed(con: duckdb.DuckDBPyConnection, chunk_ids: list[str]) -> None:
    """Log the ``entity_names`` rows of tallied keys these chunks hold (called on the rows about to be deleted)."""
    if chunk_ids and any_kept(con):
        con.execute("""INSERT INTO tally_changes
                       SELECT -1, chunk_id, name_key, name, type, mentions FROM entity_names
                       WHERE chunk_id IN (SELECT unnest(?::VARCHAR[]))
                         AND name_key IN (SELECT key FROM entity_tally_keys)""", [chunk_ids])


def record_added(con: duckdb.DuckDBPyConnection, names: str) -> None:
    """Log the rows of tallied keys in ``names`` (a batch of ``entity_names`` rows being inserted)."""
    con.execute(f"""INSERT INTO tally_changes SELECT 1, chunk_id, name_key, name, type, mentions FROM {names}
                    WHERE name_key IN (SELECT key FROM entity_tally_keys)""")


def consume(con: duckdb.DuckDBPyConnection, scope: str) -> None:
    """Delete the change records of the keys a merge just recomputed (temp table ``scope`` of merged keys; raw
    keys an active alias merges into one of them count as that key: temp table _gm_alias)."""
    if not con.execute("SELECT count(*) FROM (SELECT 1 FROM tally_changes LIMIT 1)").fetchall()[0][0]:
        return
    con.execute(f"""DELETE FROM tally_changes WHERE name_key IN (SELECT key FROM {scope})
                    OR name_key IN (SELECT raw FROM _gm_alias WHERE key IN (SELECT key FROM {scope}))""")


def keep(con: duckdb.DuckDBPyConnection, min_mentions: int, max_source_ids: int) -> None:
    """Make the tallies of the keys of a batch merged from all their mentions (temp table _gm_bm: key, chunk_id,
    document_id, name, type; aliases in _gm_alias) again: dropped for every key of the batch, kept for those with
    at least ``min_mentions`` mentions that no alias touches (none when ``max_source_ids`` is 0: every chunk is
    listed then, which a tally cannot bound)."""
    con.execute("CREATE OR REPLACE TEMP TABLE _et_k AS SELECT DISTINCT key FROM _gm_bm")
    if any_kept(con):
        for table in TABLES[:3]:
            con.execute(f"DELETE FROM {table} WHERE key IN (SELECT key FROM _et_k)")
    if max_source_ids <= 0:
        return
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _et_k AS SELECT key FROM _gm_bm
                    WHERE key NOT IN (SELECT raw FROM _gm_alias) AND key NOT IN (SELECT key FROM _gm_alias)
                    GROUP BY key HAVING count(*) >= {int(min_mentions)}""")
    if not con.execute("SELECT count(*) FROM _et_k").fetchall()[0][0]:
        return
    size = chunk_buffer(max_source_ids)
    con.execute("""INSERT INTO entity_tallies SELECT key, name, type, count(*) FROM _gm_bm
                   WHERE key IN (SELECT key FROM _et_k) GROUP BY ALL""")
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _et_c AS
                    SELECT key, chunk_id, any_value(document_id) AS document_id,
                           row_number() OVER (PARTITION BY key ORDER BY chunk_id) AS rn
                    FROM _gm_bm WHERE key IN (SELECT key FROM _et_k) GROUP BY key, chunk_id""")
    con.execute(f"INSERT INTO entity_tally_chunks SELECT key, chunk_id, document_id FROM _et_c WHERE rn <= {size}")
    con.execute(f"INSERT INTO entity_tally_keys SELECT key, max(rn) <= {size} FROM _et_c GROUP BY key")


def update(con: duckdb.DuckDBPyConnection, scope: str, min_source_ids: int) -> None:
    """The tallies of the keys in temp table ``scope`` updated by their logged changes, where that gives them
    exactly: temp table _et_ok (key) lists those keys, _et_n (key, name, type, n) their counts and _et_c (key,
    chunk_id, document_id, rn) their smallest chunks in order (at least ``min_source_ids`` of them, or all). Keys
    without a tally, touched by an alias (temp table _gm_alias), no longer mentioned, or whose chunks below the
    bound fell short are left out: the caller merges them from all their mentions. Nothing is stored until
    ``store_updated``."""
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _et_k AS
                    SELECT k.key, k.complete, (SELECT max(c.chunk_id) FROM entity_tally_chunks c WHERE c.key = k.key)
                           AS bound
                    FROM entity_tally_keys k WHERE k.key IN (SELECT key FROM {scope})
                      AND k.key NOT IN (SELECT raw FROM _gm_alias) AND k.key NOT IN (SELECT key FROM _gm_alias)""")
    con.execute("""CREATE OR REPLACE TEMP TABLE _et_log AS
                   SELECT * FROM tally_changes WHERE name_key IN (SELECT key FROM _et_k)""")
    con.execute("""CREATE OR REPLACE TEMP TABLE _et_n AS
                   SELECT key, name, type, sum(n)::BIGINT AS n FROM (
                       SELECT key, name, type, n FROM entity_tallies WHERE key IN (SELECT key FROM _et_k)
                       UNION ALL SELECT name_key, name, type, sign * n FROM _et_log)
                   GROUP BY ALL HAVING sum(n) <> 0""")
    # the logged chunks, and those of them that hold the key now (with their document)
    con.execute("CREATE OR REPLACE TEMP TABLE _et_cc AS SELECT DISTINCT name_key AS key, chunk_id FROM _et_log")
    con.execute("""CREATE OR REPLACE TEMP TABLE _et_c AS
                   WITH live AS (
                       SELECT DISTINCT n.name_key AS key, n.chunk_id, x.document_id
                       FROM entity_names n JOIN extractions x ON x.chunk_id = n.chunk_id
                       WHERE n.chunk_id IN (SELECT chunk_id FROM _et_cc) AND n.name_key IN (SELECT key FROM _et_k)
                   ), candidates AS (
                       SELECT c.key, c.chunk_id, c.document_id FROM entity_tally_chunks c
                       WHERE c.key IN (SELECT key FROM _et_k)
                         AND NOT EXISTS (SELECT 1 FROM _et_cc d WHERE d.key = c.key AND d.chunk_id = c.chunk_id)
                       UNION ALL SELECT key, chunk_id, document_id FROM live
                   )
                   SELECT c.key, c.chunk_id, c.document_id,
                          row_number() OVER (PARTITION BY c.key ORDER BY c.chunk_id) AS rn
                   FROM candidates c JOIN _et_k k ON k.key = c.key
                   WHERE k.complete OR c.chunk_id <= k.bound""")
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _et_ok AS
                    SELECT k.key FROM _et_k k
                    WHERE k.key IN (SELECT key FROM _et_n)
                      AND (SELECT count(*) FROM _et_c c WHERE c.key = k.key) >= CASE WHEN k.complete THEN 1
                                                                                      ELSE {int(min_source_ids)} END""")


def store_updated(con: duckdb.DuckDBPyConnection, max_source_ids: int) -> None:
    """Store the updated tallies of the keys in _et_ok (``update``)."""
    size = chunk_buffer(max_source_ids)
    for table in ("entity_tallies", "entity_tally_chunks"):
        con.execute(f"DELETE FROM {table} WHERE key IN (SELECT key FROM _et_ok)")
    con.execute("INSERT INTO entity_tallies SELECT * FROM _et_n WHERE key IN (SELECT key FROM _et_ok)")
    con.execute(f"""INSERT INTO entity_tally_chunks SELECT key, chunk_id, document_id FROM _et_c
                    WHERE key IN (SELECT key FROM _et_ok) AND rn <= {size}""")
    con.execute(f"""UPDATE entity_tally_keys k SET complete = k.complete AND c.total <= {size}
                    FROM (SELECT key, max(rn) AS total FROM _et_c GROUP BY key) c
                    WHERE c.key = k.key AND k.key IN (SELECT key FROM _et_ok)""")
