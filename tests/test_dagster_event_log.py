"""Our processes' Dagster event log keeps one SQLAlchemy engine per shard (assets/event_log_engines.py, issue 64):
the same files, read by Dagster's own class as the UI reads them, with a bounded number of engines."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

from assets.event_log_engines import KEPT, KeptEnginesSqliteEventLogStorage, keep_engines
from assets.runs import index_folder, instance_for
from pathrag_pipeline.config import SAMPLE_DOCS, Settings


def test_the_event_log_keeps_a_bounded_number_of_engines_and_disposes_of_them(tmp_path):
    instance = instance_for(Settings.from_env(env={}, home=tmp_path / "home", docs=SAMPLE_DOCS))
    storage = instance.event_log_storage
    assert type(storage) is KeptEnginesSqliteEventLogStorage
    for n in range(KEPT + 4):
        with storage.run_connection(f"run-{n:02d}") as conn:
            conn.exec_driver_sql("SELECT 1")
        with storage.run_connection(f"run-{n:02d}") as conn:   # the same shard again: its kept engine
            conn.exec_driver_sql("SELECT 1")
    kept = storage.__dict__["_pathrag_engines"]
    assert list(kept) == [f"run-{n:02d}" for n in range(4, KEPT + 4)]
    instance.dispose()
    assert "_pathrag_engines" not in storage.__dict__


def test_a_kept_shard_keeps_an_idle_connection_so_a_closing_one_does_not_checkpoint(tmp_path):
    """SQLite checkpoints a WAL file into its database and deletes it when the file's last connection closes: with
    the shard's idle connection open, the write-ahead log outlives the writer's connection (no checkpoint, no fsyncs
    per event); the instance's dispose closes it, and the rows are in the database file."""
    import sqlite3

    instance = instance_for(Settings.from_env(env={}, home=tmp_path / "home", docs=SAMPLE_DOCS))
    storage = instance.event_log_storage
    shard = storage.path_for_shard("run-a")
    with storage.run_connection("run-a") as conn:
        conn.exec_driver_sql("CREATE TABLE probe (a INTEGER)")
    with storage.run_connection("run-a") as conn:
        conn.exec_driver_sql("INSERT INTO probe VALUES (1)")
    assert Path(shard + "-wal").stat().st_size > 0
    instance.dispose()
    assert not Path(shard + "-wal").exists()
    with sqlite3.connect(shard) as plain:
        assert plain.execute("SELECT a FROM probe").fetchall() == [(1,)]


def test_the_uis_watcher_of_a_run_sees_its_events_while_the_shard_is_kept(tmp_path):
    """The UI follows a running run by watching its shard file for modifications (Dagster's own class, in the UI's
    process); with no checkpoint at each close, the writer touches the file, so each event still reaches it."""
    import logging
    import threading
    import time

    settings = Settings.from_env(env={}, home=tmp_path / "home", docs=SAMPLE_DOCS)
    ours = instance_for(settings)
    ui = dg.DagsterInstance.from_config(str(settings.dagster_home))
    seen: list[str] = []
    arrived = threading.Event()

    def callback(entry, cursor):
        seen.append(entry.user_message)
        arrived.set()

    def event(message: str) -> dg.EventLogEntry:
        return dg.EventLogEntry(error_info=None, level=logging.INFO, user_message=message, run_id="run-w",
                                timestamp=time.time())

    try:
        ours.event_log_storage.store_event(event("first"))   # the shard exists (and is kept) before the UI watches
        ui.event_log_storage.watch("run-w", None, callback)
        ours.event_log_storage.store_event(event("second"))
        assert arrived.wait(30), "the UI's watcher was not told of the new event"
        assert seen[-2:] == ["first", "second"]
    finally:
        ui.dispose()
        ours.dispose()


def test_another_event_log_storage_is_left_alone():
    instance = dg.DagsterInstance.ephemeral()
    before = type(instance.event_log_storage)
    assert keep_engines(instance).event_log_storage.__class__ is before is not SqliteEventLogStorage


@pytest.mark.e2e
def test_a_run_recorded_with_kept_engines_reads_back_through_dagsters_own_class(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLE_DOCS, docs)
    settings = Settings.from_env(env={}, home=tmp_path / "home", docs=docs)
    report = index_folder(settings, trigger="cli")
    plain = dg.DagsterInstance.from_config(str(settings.dagster_home))   # as the UI opens it
    try:
        assert type(plain.event_log_storage) is SqliteEventLogStorage
        run = plain.get_run_by_id(report.dagster_run_id)
        assert run is not None and run.is_success
        records = plain.get_records_for_run(report.dagster_run_id).records
        types = {r.event_log_entry.dagster_event_type for r in records if r.event_log_entry.is_dagster_event}
        assert {dg.DagsterEventType.RUN_SUCCESS, dg.DagsterEventType.ASSET_MATERIALIZATION,
                dg.DagsterEventType.ASSET_CHECK_EVALUATION} <= types
        for key in ("documents", "entities", "embeddings"):   # the cross-run index the asset pages read
            event = plain.get_latest_materialization_event(dg.AssetKey(key))
            assert event is not None and event.run_id == report.dagster_run_id
    finally:
        plain.dispose()
    assert Path(settings.dagster_home, "history", "runs", f"{report.dagster_run_id}.db").exists()   # its shard


def _schema(path: str) -> dict:
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(path)) as con:
        return {"objects": sorted(con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall(),
                                  key=repr),
                "alembic": con.execute("SELECT version_num FROM alembic_version").fetchall(),
                "journal_mode": con.execute("PRAGMA journal_mode").fetchone()[0],
                "user_version": con.execute("PRAGMA user_version").fetchone()[0]}


def test_a_new_run_shard_is_a_copy_of_one_dagster_initialised_and_an_existing_one_is_never_replaced(tmp_path):
    """A new run's shard starts from the template (an empty shard made by Dagster's own _initdb, once per version):
    same tables, indexes, alembic revision and WAL mode as Dagster's own initialisation gives a shard."""
    import sqlite3
    from contextlib import closing

    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    instance = instance_for(Settings.from_env(env={}, home=tmp_path / "home", docs=SAMPLE_DOCS))
    storage = instance.event_log_storage
    with storage.run_connection("run-b") as conn:
        conn.exec_driver_sql("SELECT 1")
    templates = list(Path(storage._base_dir).glob(".pathrag-run-shard-*.sqlite"))
    assert [t.name for t in templates] == [f".pathrag-run-shard-{dg.__version__}.sqlite"]
    plain = SqliteEventLogStorage(str(tmp_path / "plain"))   # Dagster's own class, its own init
    engine = create_engine(plain.conn_string_for_shard("run-b"), poolclass=NullPool)
    plain._initdb(engine)
    engine.dispose()
    theirs = _schema(plain.path_for_shard("run-b"))
    assert theirs["objects"] and theirs["alembic"] and theirs["journal_mode"] == "wal"
    assert _schema(storage.path_for_shard("run-b")) == theirs
    # a shard another process made first (here: with a row in it) is used as it is, never replaced by the template
    existing = storage.path_for_shard("run-c")
    shutil.copy(plain.path_for_shard("run-b"), existing)
    with closing(sqlite3.connect(existing)) as con, con:
        con.execute("CREATE TABLE marker (a INTEGER)")
    with storage.run_connection("run-c") as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM marker").scalar() == 0
    instance.dispose()


def test_a_damaged_template_is_made_again_and_the_run_shard_is_whole(tmp_path):
    settings = Settings.from_env(env={}, home=tmp_path / "home", docs=SAMPLE_DOCS)
    instance = instance_for(settings)
    base = Path(instance.event_log_storage._base_dir)
    base.mkdir(parents=True, exist_ok=True)
    template = base / f".pathrag-run-shard-{dg.__version__}.sqlite"
    template.write_bytes(b"SQLite format 3\x00" + b"\x00" * 50)   # cut short (a disk filled up, say)
    from assets.event_log_engines import _RunShardTemplate

    _RunShardTemplate._cache.clear()   # this process may hold one from another test
    with instance.event_log_storage.run_connection("run-d") as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM event_logs").scalar() == 0
    assert template.stat().st_size > 4096   # made again, whole
    instance.dispose()
