"""The ``entity_names`` table: every surface form the current extraction records give each name key, before
any alias is applied. Alias detection reads it, so the aliases are a function of the current records, not of
the order documents arrived in (issue 23: "J. Smith" merged into "John Smith" must come apart when a
"Jane Smith" arrives, as in a fresh build of the same folder).

Rows are per chunk, so a record's contribution is added and removed exactly: ``write_records`` and
``delete_records`` call ``refresh_names`` / ``forget_names`` in the same transaction as the records they
change. Mentions are counted as the graph merge counts them, at the level of raw name keys: each entity entry
of an ok record with a non-empty key, plus, once per chunk, a relation endpoint whose key no entity entry of
that chunk has (type 'other', named as in its first relation; relations joining a key to itself give none).

A home made before this table existed, or under other name-key rules (``names.NAME_KEY_VERSION``), has it
rebuilt from the stored records by ``ensure_names`` (streamed in batches of chunks) before aliases are read.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Iterable, Mapping

import duckdb
import pyarrow as pa

from pathrag_pipeline.storage.store import get_meta, set_meta
from pathrag_pipeline.text.names import NAME_KEY_VERSION, display_name_counts, name_key

if TYPE_CHECKING:
    from pathrag_pipeline.index.extraction_models import ChunkExtraction

NAMES_META = "entity_names_keys"
"""pathrag_meta key: the NAME_KEY_VERSION the entity_names table was built under (absent: never built whole)."""
FALLBACK_TYPE = "other"
REBUILD_BATCH_CHUNKS = 5_000

_NAMES_SHAPE = json.dumps({
    "entities": [{"name": "VARCHAR", "type": "VARCHAR"}],
    "relations": [{"source": "VARCHAR", "target": "VARCHAR"}],
})


def type_vote(counts: Mapping[str | None, int]) -> str:
    """Majority type; the endpoint filler 'other' only wins when nothing else was said; ties go A-Z."""
    counts = {t: n for t, n in counts.items() if t and n > 0}
    if not counts:
        return FALLBACK_TYPE
    return min(counts, key=lambda t: (t == FALLBACK_TYPE, -counts[t], t))


def _clean_type(kind: str | None) -> str | None:
    kind = (kind or "").strip().lower()
    return kind or None


def chunk_names(entities: Iterable[tuple[str | None, str | None]],
                relations: Iterable[tuple[str | None, str | None]]) -> Counter:
    """(name_key, name, type) -> mentions of one chunk's record, from its (name, type) entity entries and
    (source, target) relations."""
    out: Counter = Counter()
    explicit: set[str] = set()
    for name, kind in entities:
        if name and name.strip() and (k := name_key(name)):
            out[(k, name, _clean_type(kind))] += 1
            explicit.add(k)
    implicit: dict[str, str] = {}
    for source, target in relations:
        if not (source and source.strip() and target and target.strip()):
            continue
        ks, kt = name_key(source), name_key(target)
        if not ks or not kt or ks == kt:
            continue
        for k, name in ((ks, source), (kt, target)):
            if k not in explicit:
                implicit.setdefault(k, name)
    for k, name in implicit.items():
        out[(k, name, FALLBACK_TYPE)] += 1
    return out


def _insert(con: duckdb.DuckDBPyConnection, rows: list[tuple[str, str, str, str | None, int]]) -> None:
    if not rows:
        return
    table = pa.table({
        "chunk_id": pa.array([r[0] for r in rows], pa.string()),
        "name_key": pa.array([r[1] for r in rows], pa.string()),
        "name": pa.array([r[2] for r in rows], pa.string()),
        "type": pa.array([r[3] for r in rows], pa.string()),
        "mentions": pa.array([r[4] for r in rows], pa.int32()),
    })
    con.register("_names_batch", table)
    try:
        con.execute("INSERT INTO entity_names SELECT * FROM _names_batch")
    finally:
        con.unregister("_names_batch")


def forget_names(con: duckdb.DuckDBPyConnection, chunk_ids: Iterable[str]) -> None:
    """Remove what these chunks' records contributed."""
    ids = sorted(set(chunk_ids))
    if ids:
        con.execute("DELETE FROM entity_names WHERE chunk_id IN (SELECT unnest(?::VARCHAR[]))", [ids])


def refresh_names(con: duckdb.DuckDBPyConnection, results: Mapping[str, "ChunkExtraction | None"]) -> None:
    """Replace the rows of these chunks by what their new records say (None: a record that is not ok)."""
    forget_names(con, results)
    rows = []
    for chunk_id, result in results.items():
        if result is None:
            continue
        counts = chunk_names(((e.name, e.type) for e in result.entities),
                             ((r.source, r.target) for r in result.relations))
        rows.extend((chunk_id, k, name, kind, n) for (k, name, kind), n in counts.items())
    _insert(con, rows)


def rebuild_names(con: duckdb.DuckDBPyConnection) -> None:
    """The whole table again from the ok records, in batches of chunks (bounded memory)."""
    con.execute("DELETE FROM entity_names")
    chunk_ids = [c for (c,) in con.execute(
        "SELECT chunk_id FROM extractions WHERE status = 'ok' AND result IS NOT NULL ORDER BY chunk_id").fetchall()]
    for start in range(0, len(chunk_ids), REBUILD_BATCH_CHUNKS):
        batch = chunk_ids[start:start + REBUILD_BATCH_CHUNKS]
        records = con.execute(
            f"""SELECT chunk_id, r.entities, r.relations
                FROM (SELECT chunk_id, json_transform(result, '{_NAMES_SHAPE}') AS r FROM extractions
                      WHERE chunk_id IN (SELECT unnest(?::VARCHAR[])))""",
            [batch],
        ).fetchall()
        rows = []
        for chunk_id, entities, relations in records:
            counts = chunk_names(((e["name"], e["type"]) for e in entities or []),
                                 ((r["source"], r["target"]) for r in relations or []))
            rows.extend((chunk_id, k, name, kind, n) for (k, name, kind), n in counts.items())
        _insert(con, rows)
    set_meta(con, NAMES_META, NAME_KEY_VERSION)


def ensure_names(con: duckdb.DuckDBPyConnection) -> None:
    """Rebuild the table when it was never built whole for the current name-key rules."""
    if get_meta(con, NAMES_META) != NAME_KEY_VERSION:
        rebuild_names(con)


def raw_entities(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, int, str]]:
    """(name_key, display name, mentions, type vote) of every name key the current records mention, by key."""
    ensure_names(con)
    rows = con.execute(
        """SELECT name_key, name, type, sum(mentions)::BIGINT FROM entity_names
           GROUP BY ALL ORDER BY name_key, name, type NULLS FIRST"""
    ).fetchall()
    out = []
    by_name: dict[str, int] = defaultdict(int)
    by_type: dict[str | None, int] = defaultdict(int)
    for i, (key, name, kind, n) in enumerate(rows):
        by_name[name] += n
        by_type[kind] += n
        if i + 1 == len(rows) or rows[i + 1][0] != key:
            out.append((key, display_name_counts(by_name), sum(by_name.values()), type_vote(by_type)))
            by_name.clear()
            by_type.clear()
    return out
