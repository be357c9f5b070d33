"""Write connections checkpoint without merging DuckDB row groups, except one in MERGE_EVERY_WRITES
(storage/row_group_merging.py): a small write must not pay for rewriting a table's last row group."""

import pytest

from pathrag_pipeline.storage import row_group_merging
from pathrag_pipeline.storage.store import Store, get_meta


def _row_groups(store: Store, table: str = "t") -> int:
    with store.connect(read_only=True) as con:
        return con.execute(f"SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('{table}')").fetchall()[0][0]


def _unmerged(store: Store) -> int:
    with store.connect(read_only=True) as con:
        return int(get_meta(con, row_group_merging.UNMERGED_WRITES_META) or 0)


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(row_group_merging, "MERGE_EVERY_WRITES", 4)
    store = Store(tmp_path / "x.duckdb")
    with store.connect() as con:
        con.execute("CREATE TABLE t (i INTEGER, s VARCHAR)")
        con.execute("INSERT INTO t SELECT i, repeat('x', 100) FROM range(5000) r(i)")
    return store


def _append(store: Store, i: int) -> None:
    with store.connect() as con:
        con.execute("INSERT INTO t VALUES (?, 'y')", [i])


def test_small_writes_keep_their_own_row_groups_until_every_nth_write_merges_them(store):
    assert _unmerged(store) == 1 and _row_groups(store) == 1
    counts = []
    for i in range(3):
        _append(store, i)
        counts.append(_row_groups(store))
    # writes 2 and 3 append a row group each (DuckDB's default folds each into the last one, leaving 1 or 2);
    # write 4 is the MERGE_EVERY_WRITES-th and merges them
    assert counts[:2] == [2, 3]
    assert counts[2] < counts[1]
    assert store.row_group_merges == 1 and _unmerged(store) == 0
    with store.connect(read_only=True) as con:
        assert con.execute("SELECT count(*), sum(i) FILTER (WHERE s = 'y') FROM t").fetchall() == [(5003, 3)]


def test_a_write_connection_that_changes_nothing_is_not_counted(store):
    with store.connect() as con:
        con.execute("SELECT count(*) FROM t").fetchall()
    assert _unmerged(store) == 1
    _append(store, 1)
    assert _unmerged(store) == 2


def test_the_count_is_kept_in_the_file_so_every_store_of_it_shares_it(store):
    _append(store, 1)
    other = Store(store.path)
    _append(other, 2)
    _append(other, 3)
    assert other.row_group_merges == 1 and _unmerged(other) == 0


def test_a_failed_write_is_rolled_back_and_not_counted(store):
    with pytest.raises(ZeroDivisionError):
        with store.connect() as con:
            con.execute("BEGIN")
            con.execute("INSERT INTO t VALUES (-1, 'z')")
            raise ZeroDivisionError
    assert _unmerged(store) == 1
    with store.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM t WHERE s = 'z'").fetchall() == [(0,)]


def test_a_store_whose_writes_logged_much_merges_when_settled(store, monkeypatch):
    monkeypatch.setattr(row_group_merging, "MERGE_EVERY_WRITES", 100)
    monkeypatch.setattr("pathrag_pipeline.storage.store.SETTLE_AFTER_BYTES", 1 << 20)
    _append(store, 1)
    assert not store.settle_row_groups()            # a few kB logged since the table was made: not yet
    with store.connect() as con:                    # ~2 MB more
        con.execute("INSERT INTO t SELECT -i, repeat('z', 100) FROM range(20000) r(i)")
    grown = _row_groups(store)
    assert store.settle_row_groups() and store.row_group_merges == 1
    assert _row_groups(store) < grown and _unmerged(store) == 0
    assert not store.settle_row_groups()            # nothing left to merge: no write at all
    with store.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM t").fetchall() == [(25001,)]


def test_an_index_run_whose_stages_wrote_much_merges_at_their_ends_and_an_edit_does_not(tmp_path, monkeypatch):
    """The index stages call settle_row_groups: with the threshold at one byte every stage that wrote merges; at
    DuckDB's 16 MiB a one-file edit of a small home merges nothing (the 64th-write rule is moved out of reach)."""
    from pathrag_pipeline.config import Settings
    from pathrag_pipeline.index.pipeline import run_indexing

    monkeypatch.setattr(row_group_merging, "MERGE_EVERY_WRITES", 10_000)
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(6):
        (docs / f"doc{i}.md").write_text(f"# Doc {i}\n\nAgnes Morrow{i} visited Hesketh Mill{i % 3}.\n")
    settings = Settings.from_env(home=tmp_path / "home", docs=docs)
    monkeypatch.setattr("pathrag_pipeline.storage.store.SETTLE_AFTER_BYTES", 1)
    assert run_indexing(settings).row_group_merges == 3       # ingest, extraction, embeddings
    monkeypatch.setattr("pathrag_pipeline.storage.store.SETTLE_AFTER_BYTES", 16 << 20)
    (docs / "doc1.md").write_text("# Doc 1\n\nAgnes Morrow1 visited Corran Ford.\n")
    edit = run_indexing(settings)
    assert edit.sync.documents_written == 1 and edit.row_group_merges == 0
