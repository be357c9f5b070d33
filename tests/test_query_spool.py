"""A query never waits for a writer to log its rows (issue 22 item 6): while another process holds the DuckDB file,
the rows wait in PATHRAG_HOME/query_spool and the next process that gets the file moves them into the tables."""

from __future__ import annotations

import json
import subprocess
import time
import sys

import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import main
from pathrag_pipeline.query.engine import PathRAG
from pathrag_pipeline.query.query_log import merge_spool, spool_dir, spooled, write_results
from pathrag_pipeline.storage.store import Store, StoreLockedError, close_kept_reads
from tests.query_fixtures import tiny_index_home

QUESTIONS = ["Who founded Aldermere University?", "Which sea does the Varne River flow into?"]


@pytest.fixture
def settings(tmp_path, monkeypatch):
    return tiny_index_home(tmp_path, monkeypatch)


class Holder:
    """Another process holding the DuckDB file for writing until told to let go."""

    def __init__(self, path):
        close_kept_reads(path)   # this process's last query keeps the file open a moment (KEEP_READING_S): free it
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('held', flush=True); "
                                   "sys.stdin.readline()", str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "held"

    def release(self):
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=30)


def logged(settings) -> list[str]:
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        return [r[0] for r in con.execute("SELECT question FROM queries ORDER BY asked_at").fetchall()]


def test_rows_are_spooled_while_another_process_writes_and_merged_by_the_next_sql(settings):
    results = PathRAG(settings, record=False).query_many(QUESTIONS)
    holder = Holder(settings.duckdb_path)
    try:
        assert write_results(Store.for_settings(settings), results) == "spooled"   # no wait for the lock
        assert spooled(Store.for_settings(settings)) == 1
        with pytest.raises(StoreLockedError, match=f"pid {holder.proc.pid}"):       # the holder is named
            with Store(settings.duckdb_path, lock_timeout=0.2, on_wait=None).connect(read_only=True):
                pass
    finally:
        holder.release()

    out = CliRunner().invoke(main, ["sql", "SELECT question, mode FROM queries ORDER BY asked_at", "--json"])
    assert out.exit_code == 0, out.output
    assert [row["question"] for row in json.loads(out.output)] == QUESTIONS
    assert spooled(Store.for_settings(settings)) == 0
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        traces = con.execute("SELECT count(*) FROM path_traces").fetchone()[0]
    assert traces == sum(len(r.paths) for r in results)


def test_a_free_database_gets_the_rows_at_once_and_the_spool_is_merged_with_them(settings):
    store = Store.for_settings(settings)
    first = PathRAG(settings, record=False).query_many(QUESTIONS[:1])
    holder = Holder(settings.duckdb_path)
    try:
        assert write_results(store, first) == "spooled"
    finally:
        holder.release()
    rag = PathRAG(settings)
    rag.query(QUESTIONS[1])              # logged directly, and the spooled row merged with it
    assert sorted(logged(settings)) == sorted(QUESTIONS)
    assert spooled(store) == 0


def test_a_merge_interrupted_before_its_files_were_deleted_inserts_nothing_twice(settings):
    store = Store.for_settings(settings)
    results = PathRAG(settings, record=False).query_many(QUESTIONS)
    holder = Holder(settings.duckdb_path)
    try:
        write_results(store, results)
    finally:
        holder.release()
    saved = {p: p.read_text() for p in spool_dir(store).glob("*.json")}
    with store.connect() as con:
        assert merge_spool(con, spool_dir(store)) == 2
    for path, text in saved.items():     # as if the merging process died after its commit
        path.write_text(text)
    (spool_dir(store) / "0-broken.json").write_text('{"queries": [["cut')
    with store.connect() as con:
        assert merge_spool(con, spool_dir(store)) == 0
    assert sorted(logged(settings)) == sorted(QUESTIONS)
    assert [p.name for p in spool_dir(store).iterdir()] == ["0-broken.bad"]   # kept for the user, not retried


def test_spool_files_that_are_not_spool_rows_are_set_aside_and_never_block_the_others(settings):
    store = Store.for_settings(settings)
    results = PathRAG(settings, record=False).query_many(QUESTIONS[:1])
    holder = Holder(settings.duckdb_path)
    try:
        write_results(store, results)
    finally:
        holder.release()
    folder = spool_dir(store)
    (folder / "0-shape.json").write_text('{"queries": "not a list"}')
    (folder / "1-columns.json").write_text('{"queries": [["q-x", "not a time", "q"]], "path_traces": [], '
                                           '"retrieved_nodes": []}')
    (folder / "2-short.json").write_text('{"queries": [["q-y", "2026-01-01T00:00:00", "q"]], "path_traces": [], '
                                         '"retrieved_nodes": []}')
    with store.connect() as con:
        assert merge_spool(con, folder) == 1          # the real one
    assert sorted(p.name for p in folder.iterdir()) == ["0-shape.bad", "1-columns.bad", "2-short.bad"]
    assert logged(settings) == QUESTIONS[:1]


def test_spooled_files_read_together_go_in_as_one_transaction(settings, monkeypatch):
    """The query service spools one file per answer under load; merging them must not cost a transaction each."""
    from pathrag_pipeline.query import query_log

    store = Store.for_settings(settings)
    results = PathRAG(settings, record=False).query_many(QUESTIONS * 3)
    for result in results:
        query_log.spool_results(store, [result])
    assert spooled(store) == len(results)
    inserts: list[int] = []
    real = query_log._insert
    monkeypatch.setattr(query_log, "_insert", lambda con, rows: inserts.append(len(rows["queries"])) or real(con, rows))
    with store.connect() as con:
        assert merge_spool(con, spool_dir(store)) == len(results)
    assert inserts == [len(results)] and spooled(store) == 0
    assert sorted(logged(settings)) == sorted(QUESTIONS * 3)


def test_each_ask_records_the_command_and_process_that_asked_and_an_older_spool_file_still_merges(settings):
    """Issue 62: queries.asked_from / queries.process say which command (or Dagster run) and process asked; a spool
    file written before those columns existed (shorter rows) merges with them NULL."""
    import os
    import socket

    result = CliRunner().invoke(main, ["ask", QUESTIONS[0], "--local"])
    assert result.exit_code == 0, result.output
    with PathRAG(settings) as rag:   # its close writes the row it spooled while it kept the file (log_results)
        rag.query(QUESTIONS[1])
    old = PathRAG(settings, record=False).query_many(["Who designed the Corran Ford Bridge?"])
    store = Store.for_settings(settings)
    from pathrag_pipeline.query import query_log

    rows = query_log._rows(old)
    columns = [name for name, _ in query_log._COLUMNS["queries"]]
    # as an older version spooled them: no asked_from, process nor anything added after them
    rows["queries"] = [row[:columns.index("asked_from")] for row in rows["queries"]]
    query_log._spool(spool_dir(store), rows)
    with store.connect() as con:
        assert merge_spool(con, spool_dir(store)) == 1
        got = con.execute("SELECT question, asked_from, process, citations FROM queries ORDER BY asked_at").fetchall()
    assert got[0][1] == "pathrag ask" and got[0][2].startswith(socket.gethostname() + ":")
    assert got[1][1:3] == ("python", f"{socket.gethostname()}:{os.getpid()}") and got[1][3] is not None
    assert got[2] == ("Who designed the Corran Ford Bridge?", None, None, None)


# ---- the Python API's log while the file is kept for the next query (query_log.log_results) ------------------

def _questions_from_another_process(path) -> list[str]:
    probe = ("import duckdb, json, sys; c = duckdb.connect(sys.argv[1], read_only=True); "
             "print(json.dumps([r[0] for r in c.execute('SELECT question FROM queries').fetchall()]))")
    done = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_back_to_back_logged_queries_open_the_file_once_and_this_process_reads_their_rows(settings, monkeypatch):
    """A logged query (``record=True``, the default) whose process keeps the file for its next query spools its
    rows instead of closing the file to write them; reading the file in this process merges them first."""
    from pathrag_pipeline.storage import store as store_module

    monkeypatch.setattr(store_module, "KEEP_READING_S", 3600.0)
    opened: list[bool] = []
    real = Store._open
    monkeypatch.setattr(Store, "_open", lambda self, read_only, *a, **k: opened.append(read_only) or
                        real(self, read_only, *a, **k))
    store = Store.for_settings(settings)
    with PathRAG(settings) as rag:
        rag.query(QUESTIONS[0])
        first = len(opened)
        rag.query(QUESTIONS[1])
        assert len(opened) == first                    # the second query opened nothing, read or write
        assert spooled(store) == 2                     # each query's rows wait in the spool
        assert sorted(logged(settings)) == sorted(QUESTIONS)   # this process's read merged them first
        assert spooled(store) == 0


def test_the_keeper_merges_the_spool_once_the_file_is_idle(settings, monkeypatch):
    from pathrag_pipeline.storage import store as store_module

    monkeypatch.setattr(store_module, "KEEP_READING_S", 0.05)
    store = Store.for_settings(settings)
    rag = PathRAG(settings)
    rag.query(QUESTIONS[0])
    deadline = time.monotonic() + 30
    while spooled(store) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert spooled(store) == 0
    assert _questions_from_another_process(settings.duckdb_path) == [QUESTIONS[0]]


def test_a_process_that_exits_with_the_file_kept_leaves_its_rows_in_the_tables(settings):
    script = ("import sys; from pathrag_pipeline.storage import store; store.KEEP_READING_S = 3600.0\n"
              "from pathrag_pipeline.config import Settings; from pathrag_pipeline.query.engine import PathRAG\n"
              "rag = PathRAG(Settings.from_env()); rag.query(sys.argv[1])\n"
              "assert store.Store.for_settings(rag.settings).keeps_reads()\n")
    done = subprocess.run([sys.executable, "-c", script, QUESTIONS[1]], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert spooled(Store.for_settings(settings)) == 0
    assert _questions_from_another_process(settings.duckdb_path) == [QUESTIONS[1]]


def test_pathrag_sql_waits_out_a_kept_connection_to_merge_the_spool(settings, monkeypatch):
    """Another process that just asked keeps the file open for a second, its rows spooled: `pathrag sql` waits for
    the database a moment (``SPOOL_MERGE_WAIT_S``) and shows them, rather than noting they are not there yet."""
    from pathrag_pipeline.storage import store as store_module

    monkeypatch.setattr(store_module, "KEEP_READING_S", 0.5)
    store = Store.for_settings(settings)
    results = PathRAG(settings, record=False).query_many(QUESTIONS[:1])   # this process now keeps the file
    assert store.keeps_reads()
    from pathrag_pipeline.query.query_log import spool_results

    spool_results(store, results)   # rows spooled with no merge waiting for the kept connection
    done = subprocess.run([sys.executable, "-c", "import sys; from pathrag_pipeline.cli import main; sys.exit(main())",
                           "sql", "SELECT question FROM queries", "--json"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert [row["question"] for row in json.loads(done.stdout)] == QUESTIONS[:1], done.stderr
    assert "wait in" not in done.stderr and spooled(store) == 0
