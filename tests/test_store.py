"""DuckDB's single-writer rule: a second process waits for the lock instead of failing, up to a limit."""

import subprocess
import sys

import duckdb
import pytest

from pathrag_pipeline.dagster_home import DUCKDB_TAG, ensure_dagster_yaml
from pathrag_pipeline.storage.store import Store, StoreLockedError, transaction

HOLD = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
con.close()
"""


def hold_lock(path, seconds):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


@pytest.mark.e2e
def test_waits_for_another_writer_then_succeeds(tmp_path):
    path = tmp_path / "x.duckdb"
    proc = hold_lock(path, 1.5)
    try:
        with Store(path, lock_timeout=30).connect() as con:
            assert con.execute("SELECT count(*) FROM documents").fetchone() == (0,)
    finally:
        proc.wait()


def test_gives_up_with_a_clear_error_after_the_timeout(tmp_path):
    path = tmp_path / "x.duckdb"
    proc = hold_lock(path, 5)
    try:
        with pytest.raises(StoreLockedError, match=rf"locked by pid {proc.pid} \(.*python.*\)"):   # names it
            with Store(path, lock_timeout=0.5).connect():
                pass
    finally:
        proc.kill()
        proc.wait()


def test_read_only_without_an_index_says_how_to_build_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="pathrag index"):
        with Store(tmp_path / "none.duckdb").connect(read_only=True):
            pass


def test_dagster_yaml_limits_duckdb_runs_to_one_and_keeps_user_edits(tmp_path):
    import yaml

    path = ensure_dagster_yaml(tmp_path / "dh")
    config = yaml.safe_load(path.read_text())
    assert config["concurrency"]["runs"]["tag_concurrency_limits"] == [{"key": DUCKDB_TAG, "limit": 1}]
    assert config["concurrency"]["pools"]["default_limit"] == 1
    path.write_text("telemetry:\n  enabled: true\n")
    ensure_dagster_yaml(tmp_path / "dh")
    assert path.read_text() == "telemetry:\n  enabled: true\n"


def start_writer(store: Store, value: int, *, after):
    """A thread that waits for the event ``after``, then inserts ``value`` into t: (thread, wrote event, errors)."""
    import threading

    wrote, errors = threading.Event(), []

    def write() -> None:
        after.wait()
        try:
            with store.connect() as con:
                con.execute("INSERT INTO t VALUES (?)", [value])
            wrote.set()
        except Exception as exc:  # noqa: BLE001 - the caller's assertion reports it
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    return writer, wrote, errors


def test_threads_of_one_process_mix_read_and_write_connections_without_a_configuration_error(tmp_path):
    """DuckDB refuses a read-only and a read-write connection to one file at once in one process; the store makes
    a writing thread wait for a reading one (the query service: one worker reads while another logs)."""
    import threading

    store = Store(tmp_path / "t.duckdb")
    with store.connect() as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    reading = threading.Event()
    writer, wrote, errors = start_writer(store, 1, after=reading)
    with store.reading():
        reading.set()
        assert not wrote.wait(0.5)   # the writer waits while this thread reads
        with store.connect(read_only=True) as con:   # reads inside the session share its connection
            assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    writer.join(timeout=30)
    assert not errors and wrote.is_set()
    with store.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 1


def test_a_write_inside_a_read_session_of_the_same_thread_is_refused_not_deadlocked(tmp_path):
    store = Store(tmp_path / "t.duckdb")
    with store.connect() as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    with store.reading():
        with pytest.raises(RuntimeError, match="inside a read-only one"):
            with store.connect() as con:
                pass


def counting_opens(monkeypatch) -> list[bool]:
    opened: list[bool] = []
    real = Store._open

    def counting(self, read_only, config=None, wait=True):
        opened.append(read_only)
        return real(self, read_only, config, wait)

    monkeypatch.setattr(Store, "_open", counting)
    return opened


def test_connections_inside_holding_share_one_open_and_keep_their_own_transactions(tmp_path, monkeypatch):
    store = Store(tmp_path / "t.duckdb")
    with store.connect() as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    opened = counting_opens(monkeypatch)
    with store.holding():
        with store.connect() as con:
            con.execute("INSERT INTO t VALUES (1)")
            con.execute("CREATE TEMP TABLE scratch AS SELECT 1 AS y")
        with pytest.raises(ValueError):
            with store.connect() as con, transaction(con):
                con.execute("INSERT INTO t VALUES (2)")
                raise ValueError("a failed write rolls back its own transaction only")
        with store.connect(read_only=True) as con:
            assert con.execute("SELECT list(x) FROM t").fetchone()[0] == [1]
            # a temp table belongs to its connection block, as with separate connections
            with pytest.raises(duckdb.CatalogException):
                con.execute("SELECT * FROM scratch")
        with store.reading(), store.connect(read_only=True) as con:   # a read block inside reuses it too
            assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 1
    assert opened == [False]
    # closed at the end of the block: this process can open the file read-only again (DuckDB refuses that
    # while a read-write connection to it is open here)
    with store.reading(), store.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 1


def test_another_thread_waits_for_a_holding_block_then_writes(tmp_path):
    import threading

    store = Store(tmp_path / "t.duckdb")
    with store.connect() as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    holding = threading.Event()
    writer, wrote, errors = start_writer(store, 2, after=holding)
    with store.holding():
        with store.connect() as con:
            con.execute("INSERT INTO t VALUES (1)")
        holding.set()
        assert not wrote.wait(0.5)   # the other thread waits while the connection is held
    writer.join(timeout=30)
    assert not errors and wrote.is_set()
    with store.connect(read_only=True) as con:
        assert sorted(r[0] for r in con.execute("SELECT x FROM t").fetchall()) == [1, 2]


def test_a_held_connection_settles_its_row_groups_when_its_writes_logged_enough(tmp_path, monkeypatch):
    store = Store(tmp_path / "t.duckdb")
    with store.connect() as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    monkeypatch.setattr("pathrag_pipeline.storage.store.SETTLE_AFTER_BYTES", 1)
    with store.holding():
        with store.connect() as con:
            con.execute("INSERT INTO t SELECT range FROM range(1000)")
        assert store.settle_row_groups()          # counts what the open connection logged, merges at its close
        assert store.row_group_merges == 1
        with store.connect() as con:              # the block goes on, on a new connection
            assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 1000


def test_the_schema_is_created_once_and_again_when_the_code_expects_another(tmp_path):
    """A write connection that finds this code's schema fingerprint skips the ~100 statements that create the
    tables (issue 64: 35 ms per store, four stores per index run); another fingerprint runs them again."""
    import duckdb

    from pathrag_pipeline.storage.schema import ADDED_COLUMNS, SCHEMA_FINGERPRINT, SCHEMA_META, init_schema

    path = tmp_path / "pathrag.duckdb"
    table, column, _ = ADDED_COLUMNS[-1]
    with duckdb.connect(str(path)) as con:
        init_schema(con)
        assert con.execute("SELECT value FROM pathrag_meta WHERE key = ?", [SCHEMA_META]).fetchall() == \
            [(SCHEMA_FINGERPRINT,)]
        con.execute("DROP TABLE ingest_runs")
        init_schema(con)   # recorded as created: not looked at again
        assert not con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'ingest_runs'"
                               ).fetchone()[0]
        con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        con.execute("UPDATE pathrag_meta SET value = 'older code' WHERE key = ?", [SCHEMA_META])
        init_schema(con)
        assert con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'ingest_runs'"
                           ).fetchone()[0] == 1
        assert con.execute("SELECT count(*) FROM information_schema.columns WHERE table_name = ? AND column_name = ?",
                           [table, column]).fetchone()[0] == 1
        assert con.execute("SELECT value FROM pathrag_meta WHERE key = ?", [SCHEMA_META]).fetchone()[0] == \
            SCHEMA_FINGERPRINT


# ---- the read connection kept between read blocks (store.KEEP_READING_S) ----------------------------------------

TRY_WRITE = """
import sys, duckdb
try:
    duckdb.connect(sys.argv[1]).close()
    print("wrote")
except duckdb.Error as exc:
    print("refused", type(exc).__name__)
"""


def _write_from_another_process(path) -> str:
    return subprocess.run([sys.executable, "-c", TRY_WRITE, str(path)], capture_output=True, text=True,
                          timeout=60).stdout.strip()


def _table_with(path, *values) -> Store:
    store = Store(path)
    with store.connect() as con:
        con.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
        for v in values:
            con.execute("INSERT INTO t VALUES (?)", [v])
    return store


def test_the_next_read_block_reuses_the_kept_connection_and_its_memo_and_a_write_closes_it(tmp_path, monkeypatch):
    store = _table_with(tmp_path / "t.duckdb", 1)
    opened = counting_opens(monkeypatch)
    loads: list[int] = []
    for _ in range(3):
        with store.reading(), store.connect(read_only=True) as con:
            assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 1
            assert store.read_once("k", lambda: loads.append(1) or "loaded") == "loaded"
    assert opened == [True] and loads == [1]        # one open, one load for three blocks
    with store.connect() as con:                    # a write of this process closes it and goes at once
        con.execute("INSERT INTO t VALUES (2)")
    with store.reading(), store.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 2   # the write is seen
        store.read_once("k", lambda: loads.append(1) or "loaded")
    assert opened == [True, False, True] and loads == [1, 1]              # reopened, memo loaded afresh


def test_a_file_replaced_at_the_same_path_is_read_afresh(tmp_path):
    store = _table_with(tmp_path / "t.duckdb", 1)
    with store.reading(), store.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 1
    rebuilt = tmp_path / "rebuilt.duckdb"
    _table_with(rebuilt, 1, 2, 3)   # another path: another store's lock, so the kept connection stays
    rebuilt.replace(store.path)
    with store.reading(), store.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 3


def test_a_read_block_that_raised_closes_its_connection(tmp_path, monkeypatch):
    store = _table_with(tmp_path / "t.duckdb", 1)
    opened = counting_opens(monkeypatch)
    with pytest.raises(ZeroDivisionError):
        with store.reading():
            1 / 0
    with store.reading():
        pass
    assert opened == [True, True]


def test_a_sandboxed_connection_after_a_read_block_is_not_refused(tmp_path):
    store = _table_with(tmp_path / "t.duckdb", 1)
    with store.reading(), store.connect(read_only=True) as con:
        con.execute("SELECT 1").fetchall()
    # DuckDB refuses a second connection to one file with other settings while the first is open
    with store.connect(read_only=True, sandboxed=True) as con:
        assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 1


def test_the_kept_connection_holds_the_file_until_closed(tmp_path, monkeypatch):
    from pathrag_pipeline.storage import store as store_module

    store = _table_with(tmp_path / "t.duckdb", 1)
    monkeypatch.setattr(store_module, "KEEP_READING_S", 3600.0)
    with store.reading():
        pass
    assert _write_from_another_process(store.path).startswith("refused")   # kept: the read lock is held
    store_module.close_kept_reads(store.path)
    assert _write_from_another_process(store.path) == "wrote"


def test_the_kept_connection_is_closed_once_idle(tmp_path, monkeypatch):
    import time

    from pathrag_pipeline.storage import store as store_module

    store = _table_with(tmp_path / "t.duckdb", 1)
    monkeypatch.setattr(store_module, "KEEP_READING_S", 0.05)
    with store.reading():
        pass
    lock = store_module._mode_lock(store.path)
    deadline = time.monotonic() + 30   # a bound on waiting, not a timing assertion
    while (lock._kept is not None or lock._reaper is not None) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert lock._kept is None and lock._reaper is None
    assert _write_from_another_process(store.path) == "wrote"


def test_closing_the_kept_connection_ends_its_keeper_thread_at_once(tmp_path, monkeypatch):
    """The exit hook closes the kept connection and waits for the keeper thread, which a close wakes: it is not left
    sleeping out the kept time, to wake inside DuckDB while the interpreter stops (an abort: "FATAL: exception not
    rethrown", seen at the exit of test workers)."""
    from pathrag_pipeline.storage import store as store_module

    store = _table_with(tmp_path / "t.duckdb", 1)
    monkeypatch.setattr(store_module, "KEEP_READING_S", 3600.0)
    with store.reading():
        pass
    lock = store_module._mode_lock(store.path)
    keeper = lock._reaper
    assert keeper is not None and keeper.is_alive()
    store_module.close_kept_reads(store.path)
    lock.stop_keeper(timeout=30)   # a bound on waiting, not a timing assertion: an hour's sleep would exceed it
    assert not keeper.is_alive() and lock._reaper is None


def _statements_with(monkeypatch, marker: str):
    """From now on, count the DuckDB statements whose SQL holds ``marker``: a function returning the count."""
    executed: list[str] = []
    real = duckdb.DuckDBPyConnection.execute
    monkeypatch.setattr(duckdb.DuckDBPyConnection, "execute",
                        lambda self, sql, *a: executed.append(sql) or real(self, sql, *a))
    return lambda: sum(marker in sql for sql in executed)


def test_passages_read_in_one_read_block_are_not_read_again_in_the_next_until_a_write(tmp_path, monkeypatch):
    from pathrag_pipeline.query.engine import fetch_chunks

    store = Store(tmp_path / "t.duckdb")
    with store.connect() as con:
        con.execute("INSERT INTO documents (id, path, title, status, content_hash, created_at, updated_at) "
                    "VALUES ('d', 'd.txt', 'Doc', 'indexed', 'h', now(), now())")
        for i in range(3):
            con.execute("INSERT INTO chunks (id, document_id, ordinal, text, token_count, char_start, char_end, "
                        "content_hash) VALUES (?, 'd', ?, ?, 2, 0, 9, 'h')", [f"c{i}", i, f"passage {i}"])
    reads = _statements_with(monkeypatch, "FROM chunks c")
    with store.reading():
        assert {c: s.text for c, s in fetch_chunks(store, ["c0", "c1", "gone"]).items()} == \
            {"c0": "passage 0", "c1": "passage 1"}
    with store.reading():   # the kept connection's memo: only c2 is read
        assert list(fetch_chunks(store, ["c1", "gone", "c2"])) == ["c1", "c2"]
        assert list(fetch_chunks(store, ["c2", "c0"])) == ["c2", "c0"]
    assert reads() == 2
    with store.connect() as con:
        con.execute("UPDATE chunks SET text = 'changed' WHERE id = 'c0'")
    with store.reading():
        assert fetch_chunks(store, ["c0"])["c0"].text == "changed"
    assert fetch_chunks(store, ["c1"])["c1"].text == "passage 1"   # outside a block: read every time
    assert reads() == 4


def test_a_block_that_loaded_the_chunk_index_takes_its_passages_from_memory_as_the_file_gives_them(tmp_path,
                                                                                                   monkeypatch):
    """``fetch_chunks`` inside a block that built or found the chunk BM25 index: the passages it read to build
    itself, exactly what the file read returns (a document without a title is titled by its id), no statement;
    a chunks version written by ingest makes the next block read the new text; above ``KEPT_PASSAGES`` passages
    none are kept and the file is read as before."""
    from pathrag_pipeline.query import lexical
    from pathrag_pipeline.query.engine import fetch_chunks
    from pathrag_pipeline.storage import store as store_module
    from pathrag_pipeline.storage.store import PASSAGE_TEXT_SQL, bump_chunks_version

    lexical.clear_cache()
    store = Store(tmp_path / "t.duckdb")
    with store.connect() as con:
        for doc, title in (("d", "Doc"), ("u", None), ("e", "")):
            con.execute("INSERT INTO documents (id, path, title, status, content_hash, created_at, updated_at) "
                        "VALUES (?, ?, ?, 'indexed', 'h', now(), now())", [doc, doc + ".txt", title])
        for i, doc in enumerate("dddue"):
            con.execute("INSERT INTO chunks (id, document_id, ordinal, text, token_count, char_start, char_end, "
                        "content_hash) VALUES (?, ?, ?, ?, 2, 0, 9, 'h')", [f"c{i}", doc, i, f"passage {i} zebra"])
        bump_chunks_version(con)
        indexed = dict(con.execute(f"SELECT c.id, {PASSAGE_TEXT_SQL} FROM chunks c "
                                   "LEFT JOIN documents d ON d.id = c.document_id").fetchall())
    wanted = ["c4", "c0", "gone", "c3", "c0"]
    from_file = fetch_chunks(store, wanted)   # outside a block: the file's answer
    assert list(from_file) == ["c4", "c0", "c3"] and from_file["c3"].title == "u" and from_file["c4"].title == ""
    reads = _statements_with(monkeypatch, "WHERE c.id IN")
    with store.reading():
        index = lexical.chunk_index(store)
        assert {k: lexical.passage_text(t, x) for k, (_, t, x) in index.passages.items()} == indexed
        assert fetch_chunks(store, wanted) == from_file
    assert reads() == 0
    with store.connect() as con:
        con.execute("UPDATE chunks SET text = 'changed' WHERE id = 'c0'")
        bump_chunks_version(con)
    with store.reading():
        lexical.chunk_index(store)   # brought up to date from the block before's: the changed passage read alone
        assert fetch_chunks(store, ["c0"])["c0"].text == "changed"
    assert reads() == 1              # so the block reads what it quotes from the file
    with store.reading():
        assert lexical.chunk_index(store).passages is not None   # used again: it keeps every passage
        assert fetch_chunks(store, ["c0", "c1"])["c1"].text == "passage 1 zebra"
    assert reads() == 1
    monkeypatch.setattr(lexical, "KEPT_PASSAGES", 4)
    lexical.clear_cache()
    store_module.close_kept_reads(store.path)   # and the kept connection's memo with it
    with store.reading():
        assert lexical.chunk_index(store).passages is None
        assert fetch_chunks(store, ["c1", "c4"])["c4"].text == "passage 4 zebra"
    assert reads() == 2


def test_a_write_deferred_for_the_kept_connection_runs_when_it_closes_or_at_once_without_one(tmp_path, monkeypatch):
    """``after_reads``: a write waits while a read connection is kept for the next block, and runs when it is closed
    (``close_kept_reads``, or a connection of this process opening the file otherwise); with none kept (the keeper
    closed it between the caller's look and its call) it runs at once."""
    from pathrag_pipeline.storage import store as store_module

    monkeypatch.setattr(store_module, "KEEP_READING_S", 3600.0)
    store = _table_with(tmp_path / "d.duckdb", 1)
    ran: list[str] = []
    with store.reading():
        with store.connect(read_only=True) as con:
            con.execute("SELECT count(*) FROM t").fetchone()
    assert store.keeps_reads()
    store.after_reads("a", lambda: ran.append("a"))
    assert ran == []
    store_module.close_kept_reads(store.path)
    assert ran == ["a"] and not store.keeps_reads()
    store.after_reads("b", lambda: ran.append("b"))   # nothing kept: at once
    assert ran == ["a", "b"]
    with store.reading():
        pass
    store.after_reads("c", lambda: ran.append("c"))
    with store.connect(read_only=True) as con:        # another connection of this process: the write goes first
        assert ran == ["a", "b", "c"]
        assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 1
