"""The mention tables: what every ok extraction record says, one row per mention, kept in step with the
records so the graph merge never parses a record (issue 23: "an edit adds and subtracts its own chunks'
contributions instead of re-reading every chunk that mentions a touched key").

- ``entity_mentions``: one row per entity entry of an ok record whose name has a key (raw ``names.name_key``,
  before aliases), with its position in the record, its name and its cleaned type.
- ``relation_mentions``: one row per relation entry whose endpoints have two different raw keys, with its
  keyword parts and description sentences as lists of (fold, text) (``mention_fields``).
- ``mention_texts``: the description sentences of entity entries, one row each.
  Parts are split, whitespace-normalised and case-folded once, here in Python, so the merge can count and rank
  them in SQL.
- ``entity_names``: every surface form per chunk and raw key with its mention count, the merge's counting at
  the level of raw keys (each entity entry, plus once per chunk a relation endpoint that no entity entry of
  the chunk names, type 'other', named as in its first relation). Alias detection reads it, so the aliases are
  a function of the current records, not of the order documents arrived in ("J. Smith" merged into "John
  Smith" must come apart when a "Jane Smith" arrives, as in a fresh build of the same folder).

``write_records`` and ``delete_records`` call ``refresh_mentions`` / ``forget_mentions`` in the same transaction
as the records they change, so a record's contribution is added and removed exactly. A home made before
these tables existed, or under other name-key or splitting rules (``MENTION_RULES``), has them rebuilt from
the stored records by ``ensure_mentions`` (streamed in batches of chunks) before anything reads them.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Iterable, Mapping

import duckdb
import numpy as np
import pyarrow as pa

from pathrag_pipeline.index import entity_tallies
from pathrag_pipeline.index.mention_fields import ENTITY_DESCRIPTION
from pathrag_pipeline.index.part_rankings import any_kept, forget_all, record_changed_parts, record_parts_of
from pathrag_pipeline.storage.store import get_meta, set_meta
from pathrag_pipeline.text.names import NAME_KEY_VERSION, display_name_counts, name_key

if TYPE_CHECKING:
    from pathrag_pipeline.index.extraction_models import ChunkExtraction

MENTIONS_META = "mention_tables"
"""pathrag_meta key: the MENTION_RULES the mention tables were built under (absent: never built whole)."""
MENTION_RULES = f"{NAME_KEY_VERSION}/split-1/relation-parts-1"
"""Name-key rules, sentence/keyword splitting and where parts are stored: a change rebuilds the tables from the
records (relation-parts-1: relation parts moved from ``mention_texts`` into ``relation_mentions``)."""
FALLBACK_TYPE = "other"
REBUILD_BATCH_CHUNKS = 5_000

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_KEYWORD_SPLIT = re.compile(r"[,;\n]")
_RESULT_SHAPE = json.dumps({
    "entities": [{"name": "VARCHAR", "type": "VARCHAR", "description": "VARCHAR"}],
    "relations": [{"source": "VARCHAR", "target": "VARCHAR", "keywords": "VARCHAR",
                   "description": "VARCHAR", "strength": "DOUBLE"}],
})


def fold(text: str) -> str:
    """What two description sentences or keywords are compared by: whitespace-normalised and case-folded."""
    return " ".join(text.split()).casefold()


def sentences(description: str | None) -> list[str]:
    """The whitespace-normalised sentences of a description (none for an empty or blank one). Joined with
    single spaces they give the description whitespace-normalised."""
    if not description or description.isspace():
        return []
    return [" ".join(s.split()) for s in _SENTENCE_END.split(description) if s.strip()]


def keyword_parts(keywords: str | None) -> list[str]:
    """The whitespace-normalised comma/semicolon/newline-separated parts of a keywords string."""
    if not keywords:
        return []
    return [" ".join(p.split()) for p in _KEYWORD_SPLIT.split(keywords) if p.strip()]


def type_vote(counts: Mapping[str | None, int]) -> str:
    """Majority type; the endpoint filler 'other' only wins when nothing else was said; ties go A-Z."""
    counts = {t: n for t, n in counts.items() if t and n > 0}
    if not counts:
        return FALLBACK_TYPE
    return min(counts, key=lambda t: (t == FALLBACK_TYPE, -counts[t], t))


def _clean_type(kind: str | None) -> str | None:
    kind = (kind or "").strip().lower()
    return kind or None


def _key(name: str | None) -> str:
    return name_key(name) if name and name.strip() else ""


_COLUMNS = {
    "entity_names": ("chunk_id", "name_key", "name", "type", "mentions"),
    "entity_mentions": ("chunk_id", "document_id", "ord", "name_key", "name", "type"),
    "relation_mentions": ("chunk_id", "document_id", "ord", "source_key", "target_key", "source", "target", "strength",
                          "keyword_parts", "description_parts"),
    "mention_texts": ("chunk_id", "ord", "field", "pos", "fold", "text"),
}
_PARTS = pa.list_(pa.struct([("fold", pa.string()), ("text", pa.string())]))
_TYPES = {"ord": pa.int32(), "mentions": pa.int32(), "pos": pa.int32(), "strength": pa.float64(),
          "keyword_parts": _PARTS, "description_parts": _PARTS}


INSERT_ROWS = 100_000
"""Mention rows held in Python before they are inserted: ``refresh_mentions`` and ``rebuild_mentions`` write in
sub-batches of about this many rows (issue 23, flat memory). An extraction record of the offline extractor on
dense text gave ~700 rows (110 entities, 110 relations, 360 sentences and keywords, before the relations' parts
moved into their own rows); built for a whole write batch of 800 records at once, as row tuples and then copied
into columns, they raised a 25 MB build's peak RSS by ~600 MiB. Row counts here are a few hundred thousand
per second of inserting, so the sub-batches cost nothing."""


_ID_COLUMNS = {"entity_names": 1, "entity_mentions": 2, "relation_mentions": 2, "mention_texts": 1}
"""How many leading columns of each table (``_COLUMNS``) say whose rows they are: chunk id, document id."""


class MentionRows:
    """One record's rows for the four tables without their id columns (``_ID_COLUMNS``), as Arrow tables:
    built where the record is made (``prepare_mentions``: in an extraction worker process, beside the record's
    JSON) so the writing process only adds the ids and inserts. Arrow, not Python rows: a write batch holds up
    to thousands of records until it is written (~690 rows, ~66 kB as Arrow, per record of the scale corpus)."""

    __slots__ = ("tables",)

    def __init__(self, tables: dict[str, pa.Table]) -> None:
        self.tables = tables

    def __len__(self) -> int:
        return sum(t.num_rows for t in self.tables.values())

    def __reduce__(self) -> tuple:
        """Pickled (from an extraction worker to the writing process) as one Arrow IPC stream per table: pickling
        four small Arrow tables the default way, column by column with their schemas, cost ~0.3 ms a record to
        write and ~0.2 ms to read, and the writing process reads every record's (measured by hand on 1,500
        records, issue 23); the IPC streams take about a third of that."""
        return (_mention_rows_from_ipc, (tuple(self.tables), tuple(_ipc_bytes(t) for t in self.tables.values())))


def _ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _mention_rows_from_ipc(names: tuple[str, ...], streams: tuple[bytes, ...]) -> MentionRows:
    return MentionRows({name: pa.ipc.open_stream(data).read_all() for name, data in zip(names, streams)})


def _mention_columns(entities: Iterable[tuple], relations: Iterable[tuple]) -> dict[str, tuple[list, ...]]:
    """The rows of one record, as columns without the id columns (see ``_Rows.add``)."""
    en_key, en_name, en_type, en_n = names = ([], [], [], [])
    em_ord, em_key, em_name, em_type = entity_cols = ([], [], [], [])
    relation_cols: tuple[list, ...] = tuple([] for _ in range(8))
    rm_ord, rm_s, rm_t, rm_sname, rm_tname, rm_strength, rm_kw, rm_desc = relation_cols
    mt_ord, mt_field, mt_pos, mt_fold, mt_text = text_cols = ([], [], [], [], [])
    split: dict[tuple[str, str], list[str]] = {}   # a record quotes one sentence many times

    def texts(i: int, field: str, parts: list[str]) -> None:
        n = len(parts)
        if n:
            mt_ord.extend([i] * n)
            mt_field.extend([field] * n)
            mt_pos.extend(range(n))
            mt_fold.extend([part.casefold() for part in parts])
            mt_text.extend(parts)

    def parts_of(text: str | None, kind: str) -> list[str]:
        if not text:
            return []
        hit = split.get((text, kind))
        if hit is None:
            hit = split[(text, kind)] = sentences(text) if kind == "s" else keyword_parts(text)
        return hit

    counts: Counter = Counter()
    explicit: set[str] = set()
    for i, (name, kind, description) in enumerate(entities, 1):
        if not (k := _key(name)):
            continue
        kind = _clean_type(kind)
        counts[(k, name, kind)] += 1
        explicit.add(k)
        em_ord.append(i)
        em_key.append(k)
        em_name.append(name)
        em_type.append(kind)
        texts(i, ENTITY_DESCRIPTION, parts_of(description, "s"))
    implicit: dict[str, str] = {}
    for i, (source, target, keywords, description, strength) in enumerate(relations, 1):
        ks, kt = _key(source), _key(target)
        if not ks or not kt or ks == kt:
            continue
        rm_ord.append(i)
        rm_s.append(ks)
        rm_t.append(kt)
        rm_sname.append(source)
        rm_tname.append(target)
        rm_strength.append(1.0 if strength is None else float(strength))
        rm_kw.append([(part.casefold(), part) for part in parts_of(keywords, "k")])
        rm_desc.append([(part.casefold(), part) for part in parts_of(description, "s")])
        for k, name in ((ks, source), (kt, target)):
            if k not in explicit:
                implicit.setdefault(k, name)
    for k, name in implicit.items():
        counts[(k, name, FALLBACK_TYPE)] += 1
    for (k, name, kind), n in counts.items():
        en_key.append(k)
        en_name.append(name)
        en_type.append(kind)
        en_n.append(n)
    return {"entity_names": names, "entity_mentions": entity_cols, "relation_mentions": relation_cols,
            "mention_texts": text_cols}


def _arrow(table: str, columns: tuple[list, ...], skip: int = 0) -> pa.Table:
    names = _COLUMNS[table][skip:]
    return pa.table({c: pa.array(v, _TYPES.get(c, pa.string())) for c, v in zip(names, columns)})


def prepare_mentions(entities: Iterable[tuple], relations: Iterable[tuple]) -> MentionRows:
    """One record's mention rows, without ids, ready for ``_Rows.add_prepared`` (see ``MentionRows``)."""
    columns = _mention_columns(entities, relations)
    return MentionRows({t: _arrow(t, columns[t], _ID_COLUMNS[t]) for t in _COLUMNS})


class _Rows:
    """Rows for the four tables, as columns in ``_COLUMNS`` order, inserted into ``con`` whenever they
    reach ``INSERT_ROWS`` (and by ``insert`` at the end): memory is bounded whatever the batch."""

    def __init__(self, con: duckdb.DuckDBPyConnection, *, record_parts: bool = False,
                 record_tallies: bool = False) -> None:
        """``record_parts``: also record the description parts of the rows inserted as changed (kept part
        rankings count them again: ``part_rankings``); ``record_tallies``: log the rows of tallied entities
        inserted (``entity_tallies``)."""
        self.con = con
        self.record_parts = record_parts
        self.record_tallies = record_tallies
        self.cols: dict[str, tuple[list, ...]] = {t: tuple([] for _ in c) for t, c in _COLUMNS.items()}
        # prepared records' rows without ids, and per record (chunk id, document id, rows): ``_with_ids``
        self.prepared: dict[str, list[pa.Table]] = {t: [] for t in _COLUMNS}
        self.prepared_ids: dict[str, list[tuple[str, str, int]]] = {t: [] for t in _COLUMNS}
        self.held = 0

    def add(self, chunk_id: str, document_id: str, entities: Iterable[tuple], relations: Iterable[tuple]) -> None:
        """One record's rows, from its (name, type, description) entities and (source, target, keywords,
        description, strength) relations; ``ord`` is the 1-based position of the entry in its list."""
        for table, columns in _mention_columns(entities, relations).items():
            n = len(columns[0])
            if not n:
                continue
            target = self.cols[table]
            target[0].extend([chunk_id] * n)
            if _ID_COLUMNS[table] == 2:
                target[1].extend([document_id] * n)
            for into, values in zip(target[_ID_COLUMNS[table]:], columns):
                into.extend(values)
            self.held += n
        self._maybe_insert()

    def add_prepared(self, chunk_id: str, document_id: str, rows: MentionRows) -> None:
        """One record's rows as ``prepare_mentions`` made them (the same rows ``add`` makes from its entries).
        Their id columns are made at ``insert``, for all the records held at once (``_with_ids``)."""
        for table, part in rows.tables.items():
            n = part.num_rows
            if not n:
                continue
            self.prepared[table].append(part)
            self.prepared_ids[table].append((chunk_id, document_id, n))
            self.held += n
        self._maybe_insert()

    def _maybe_insert(self) -> None:
        if self.held >= INSERT_ROWS:
            self.insert()

    def insert(self) -> None:
        """Insert the rows held and let them go."""
        batches = {}
        for table in _COLUMNS:
            values = self.cols[table]
            parts = [_with_ids(table, self.prepared[table], self.prepared_ids[table])] if self.prepared[table] else []
            if values[0]:
                parts.append(_arrow(table, values))
            batches[table] = pa.concat_tables(parts) if parts else _arrow(table, values)
            for v in values:
                v.clear()
            self.prepared[table].clear()
            self.prepared_ids[table].clear()
        self.held = 0
        if not any(batch.num_rows for batch in batches.values()):
            return
        for table, batch in batches.items():
            self.con.register(f"_mentions_{table}", batch)
        try:
            for table, columns in _COLUMNS.items():
                if batches[table].num_rows:
                    names = ", ".join(columns)
                    self.con.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM _mentions_{table}")
            if self.record_parts:
                record_parts_of(self.con, "_mentions_mention_texts", "_mentions_entity_mentions",
                                "_mentions_relation_mentions")
            if self.record_tallies and batches["entity_names"].num_rows:
                entity_tallies.record_added(self.con, "_mentions_entity_names")
        finally:
            for table in batches:
                self.con.unregister(f"_mentions_{table}")


def _with_ids(table: str, parts: list[pa.Table], ids: list[tuple[str, str, int]]) -> pa.Table:
    """Records' rows without ids (``MentionRows``) as one table of ``table``'s columns: each record's chunk id (and
    document id) repeated over its rows, contiguous. Made here for all of them at once, not per record: a table
    of a few rows per record, each with its own id arrays, cost the writing process ~1 ms a record (thousands of
    small Arrow tables, then as many chunks for DuckDB to insert; issue 23, measured by hand)."""
    body = pa.concat_tables(parts).combine_chunks()
    counts = [n for _, _, n in ids]

    def repeated(values: list[str]) -> pa.Array:
        # numpy, not Arrow's take: that imports pyarrow.compute, ~0.06 s of a one-file edit that uses it nowhere else
        return pa.array(np.repeat(np.array(values, dtype=object), counts), pa.string())

    columns = [repeated([c for c, _, _ in ids])]
    if _ID_COLUMNS[table] == 2:
        columns.append(repeated([d for _, d, _ in ids]))
    return pa.Table.from_arrays([*columns, *body.columns], names=list(_COLUMNS[table]))


MENTION_TABLES = ("entity_names", "entity_mentions", "relation_mentions", "mention_texts")


def forget_mentions(con: duckdb.DuckDBPyConnection, chunk_ids: Iterable[str]) -> None:
    """Remove what these chunks' records contributed."""
    ids = sorted(set(chunk_ids))
    if ids:
        record_changed_parts(con, ids)   # what kept part rankings must count again (part_rankings)
        entity_tallies.record_removed(con, ids)   # what kept entity tallies must subtract
        for table in MENTION_TABLES:
            con.execute(f"DELETE FROM {table} WHERE chunk_id IN (SELECT unnest(?::VARCHAR[]))", [ids])


def entries(result: "ChunkExtraction | str") -> tuple[Iterable[tuple], Iterable[tuple]]:
    """(name, type, description) entities and (source, target, keywords, description, strength) relations of a
    result, parsed or as its stored JSON."""
    if isinstance(result, str):
        data = json.loads(result)
        return (((e.get("name"), e.get("type"), e.get("description")) for e in data.get("entities") or []),
                ((r.get("source"), r.get("target"), r.get("keywords"), r.get("description"), r.get("strength"))
                 for r in data.get("relations") or []))
    return (((e.name, e.type, e.description) for e in result.entities),
            ((r.source, r.target, r.keywords, r.description, r.strength) for r in result.relations))


def chunks_with_mentions(con: duckdb.DuckDBPyConnection, chunk_ids: Iterable[str]) -> list[str]:
    """Those of these chunks that may have mention rows: the ones with an ok record (rows exist for no other,
    since they are written and removed with the records). A lookup in ``extractions`` (a row per chunk), not
    in the mention tables (``mention_texts`` alone: ~140 rows per chunk at 100 MB of dense text)."""
    ids = sorted(set(chunk_ids))
    if not ids:
        return []
    return [c for (c,) in con.execute(
        "SELECT chunk_id FROM extractions WHERE status = 'ok' AND chunk_id IN (SELECT unnest(?::VARCHAR[]))",
        [ids]).fetchall()]


def refresh_mentions(con: duckdb.DuckDBPyConnection,
                     results: Mapping[str, tuple[str, "ChunkExtraction | str | MentionRows | None"]], *,
                     existing: Iterable[str] | None = None) -> None:
    """Replace the rows of these chunks (chunk id -> (document id, result)) by what their new records say
    (result None: a record that is not ok; a string: the result's JSON; MentionRows: its rows, prepared).
    ``existing``: the chunks among them that may have rows now (``chunks_with_mentions``, asked before their
    records were replaced); None: any may. The chunks of an edit are new, so an edit scans no mention table to
    remove rows that are not there."""
    forget_mentions(con, results if existing is None else existing)
    rows = _Rows(con, record_parts=any_kept(con), record_tallies=entity_tallies.any_kept(con))
    for chunk_id, (document_id, result) in results.items():
        if isinstance(result, MentionRows):
            rows.add_prepared(chunk_id, document_id, result)
        elif result is not None:
            rows.add(chunk_id, document_id, *entries(result))
    rows.insert()


def rebuild_mentions(con: duckdb.DuckDBPyConnection) -> None:
    """All four tables again from the ok records, in batches of chunks (bounded memory)."""
    for table in MENTION_TABLES:
        con.execute(f"DELETE FROM {table}")
    forget_all(con)   # kept part rankings and tallies describe the old rows
    entity_tallies.forget_all(con)
    chunk_ids = [c for (c,) in con.execute(
        "SELECT chunk_id FROM extractions WHERE status = 'ok' AND result IS NOT NULL ORDER BY chunk_id").fetchall()]
    for start in range(0, len(chunk_ids), REBUILD_BATCH_CHUNKS):
        batch = chunk_ids[start:start + REBUILD_BATCH_CHUNKS]
        records = con.execute(
            f"""SELECT chunk_id, document_id, r.entities, r.relations
                FROM (SELECT chunk_id, document_id, json_transform(result, '{_RESULT_SHAPE}') AS r FROM extractions
                      WHERE chunk_id IN (SELECT unnest(?::VARCHAR[])))""",
            [batch],
        ).fetchall()
        rows = _Rows(con)
        for chunk_id, document_id, entities, relations in records:
            rows.add(chunk_id, document_id,
                     ((e["name"], e["type"], e["description"]) for e in entities or []),
                     ((r["source"], r["target"], r["keywords"], r["description"], r["strength"])
                      for r in relations or []))
        rows.insert()
    set_meta(con, MENTIONS_META, MENTION_RULES)


def ensure_mentions(con: duckdb.DuckDBPyConnection) -> None:
    """Rebuild the tables when they were never built whole under the current rules."""
    if get_meta(con, MENTIONS_META) != MENTION_RULES:
        rebuild_mentions(con)


def raw_entities(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, int, str]]:
    """(name_key, display name, mentions, type vote) of every name key the current records mention, by key."""
    ensure_mentions(con)
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
