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
