"""IdLists: the graph snapshot's per-row chunk and document ids as integer codes, read as tuples."""

from __future__ import annotations

from datetime import datetime

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from pathrag_pipeline.query import graph_cache
from pathrag_pipeline.query.id_lists import IdLists
from pathrag_pipeline.query.ranking import PassageGraph
from pathrag_pipeline.storage.store import Store, transaction

ROWS = [("c2", "c1"), (), ("c1", "c3", "c2"), ("c4",), ()]


def test_rows_read_back_as_tuples_with_codes_in_first_appearance_order():
    lists = IdLists.from_rows(ROWS)
    assert len(lists) == 5 and list(lists) == ROWS
    assert [lists[i] for i in range(5)] == ROWS and lists[-3] == ROWS[2] and lists[-1] == ()
    assert lists.names == ["c2", "c1", "c3", "c4"]
    assert lists.codes.tolist() == [0, 1, 1, 2, 0, 3] and lists.offsets.tolist() == [0, 2, 2, 5, 6, 6]
    assert lists.rows().tolist() == [0, 0, 2, 2, 2, 3]
    for bad in (5, -6):
        with pytest.raises(IndexError):
            lists[bad]
    assert list(IdLists.from_rows([None, ("a",)])) == [(), ("a",)]
    assert len(IdLists.from_rows([])) == 0 and list(IdLists.from_rows([])) == []


def test_taken_rows_keep_their_ids_and_renumber_like_a_fresh_build():
    lists = IdLists.from_rows(ROWS)
    order = [3, 0, 2]
    taken = lists.take(np.asarray(order))
    assert list(taken) == [ROWS[i] for i in order] and not taken.first_seen
    fresh = IdLists.from_rows([ROWS[i] for i in order])
    again = taken.renumbered()
    assert again.first_seen and list(again) == list(fresh)
    assert again.names == fresh.names == ["c4", "c2", "c1", "c3"]
    assert again.codes.tolist() == fresh.codes.tolist() and again.offsets.tolist() == fresh.offsets.tolist()
    assert lists.renumbered() is lists and list(lists.take(np.asarray([], dtype=np.int64))) == []
    # the passage graph numbers passages by first appearance whichever it is given
    rows = [ROWS[i] for i in order] + [()]
    a = PassageGraph(4, [0, 1], [1, 2], lists.take(np.asarray(order + [1])))
    b = PassageGraph(4, [0, 1], [1, 2], rows)
    assert a.chunk_keys == b.chunk_keys and np.array_equal(a.src, b.src) and np.array_equal(a.dst, b.dst)


def test_arrow_lists_of_every_shape_equal_the_python_rows():
    rows = [list(r) for r in ROWS]
    expected = IdLists.from_rows(ROWS)
    for column in (pa.array(rows, pa.list_(pa.string())),
                   pa.chunked_array([pa.array(rows[:2], pa.list_(pa.string())),
                                     pa.array(rows[2:], pa.list_(pa.string()))]),
                   pa.array([["zz"]] + rows, pa.list_(pa.string())).slice(1),     # offsets past 0, extra values
                   pa.array(rows, pa.large_list(pa.string()))):
        lists = IdLists.from_arrow(column)
        assert list(lists) == ROWS, column
        assert lists.names == expected.names and lists.codes.tolist() == expected.codes.tolist()
    with_null = IdLists.from_arrow(pa.array([["a"], None, ["b", "a"]], pa.list_(pa.string())))
    assert list(with_null) == [("a",), (), ("b", "a")]
    assert list(IdLists.from_arrow(pa.chunked_array([], pa.list_(pa.string())))) == []


def test_duckdb_list_column_through_arrow_equals_fetchall(tmp_path):
    con = duckdb.connect(str(tmp_path / "t.duckdb"))
    # 5,000 rows of 0-11 ids each, made in SQL (inserting them row by row took seconds)
    con.execute("""CREATE TABLE t AS SELECT i AS k, ['chunk-' || ((i * 7 + j * 13) % 500) FOR j IN range(i % 12)] AS ids
                   FROM range(5000) r(i)""")
    data = [r for (r,) in con.execute("SELECT ids FROM t ORDER BY k").fetchall()]
    lists = IdLists.from_arrow(con.sql("SELECT ids FROM t ORDER BY k").to_arrow_table().column("ids"))
    assert list(lists) == [tuple(r) for r in data] and sum(map(len, data)) > 20_000
    assert len(lists.names) == len({c for r in data for c in r}) and lists.reference_count() == sum(map(len, data))


def _graph_home(tmp_path):
    store = Store(tmp_path / "g.duckdb")
    now = datetime(2026, 1, 1)
    with store.connect() as con, transaction(con):
        for key, chunks in (("a", ["c1", "c2"]), ("b", ["c2"]), ("c", []), ("d", ["c3", "c1"])):
            con.execute("INSERT INTO entities VALUES (?, ?, 't', 'desc', 1, 1, ?, ?, ?)",
                        [key, key.upper(), chunks, [f"doc-{c}" for c in chunks], now])
        for src, tgt, chunks in (("a", "b", ["c2"]), ("a", "zz", ["c9"]), ("b", "d", ["c3", "c4"])):
            con.execute("INSERT INTO relations VALUES (?, ?, ?, 'kw', 'desc', 1, 1.0, 1, ?, ?, ?)",
                        [f"{src}<|>{tgt}", src, tgt, chunks, [f"doc-{c}" for c in chunks], now])
    return store


def test_snapshot_rows_stay_aligned_when_a_relation_cannot_be_walked(tmp_path):
    """A relation whose endpoint is missing (a half-written graph) is left out: the rows after it keep their own
    chunk and document lists."""
    store = _graph_home(tmp_path)
    graph_cache.clear_cache()
    snapshot = graph_cache.load_graph(store)
    assert snapshot.entity_keys == ["a", "b", "c", "d"]
    assert list(snapshot.entity_chunks) == [("c1", "c2"), ("c2",), (), ("c3", "c1")]
    assert snapshot.entity_documents[3] == ("doc-c3", "doc-c1")
    assert snapshot.relation_keys == ["a<|>b", "b<|>d"]
    assert list(snapshot.relation_chunks) == [("c2",), ("c3", "c4")]
    assert list(snapshot.relation_documents) == [("doc-c2",), ("doc-c3", "doc-c4")]
    graph = PassageGraph(snapshot.node_count, snapshot.relation_src, snapshot.relation_tgt, snapshot.entity_chunks)
    assert graph.chunk_keys == ["c1", "c2", "c3"]
    same = PassageGraph(snapshot.node_count, snapshot.relation_src, snapshot.relation_tgt, list(snapshot.entity_chunks))
    assert graph.chunk_keys == same.chunk_keys
    assert np.array_equal(graph.src, same.src) and np.array_equal(graph.dst, same.dst)
    graph_cache.clear_cache()


def test_a_graph_without_walkable_relations_loads_with_empty_relation_lists(tmp_path):
    store = Store(tmp_path / "g.duckdb")
    with store.connect() as con, transaction(con):
        con.execute("INSERT INTO entities VALUES ('a', 'A', 't', 'd', 1, 1, ['c1'], ['d1'], ?)", [datetime(2026, 1, 1)])
    graph_cache.clear_cache()
    snapshot = graph_cache.load_graph(store)
    assert snapshot.relation_keys == [] and len(snapshot.relation_chunks) == 0 and list(snapshot.entity_chunks) == [("c1",)]
    with store.connect() as con, transaction(con):   # only a relation to a missing entity
        con.execute("INSERT INTO relations VALUES ('a<|>z', 'a', 'z', 'k', 'd', 1, 1.0, 1, ['c1'], ['d1'], ?)",
                    [datetime(2026, 1, 2)])
    snapshot = graph_cache.load_graph(store)
    assert snapshot.relation_keys == [] and list(snapshot.relation_documents) == []
    assert PassageGraph(snapshot.node_count, snapshot.relation_src, snapshot.relation_tgt,
                        snapshot.entity_chunks).chunk_keys == ["c1"]
    graph_cache.clear_cache()
