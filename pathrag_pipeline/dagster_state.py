"""What the Dagster instance in PATHRAG_HOME/dagster knows, read without importing Dagster.

`pathrag status` must start in a fraction of a second, and importing dagster costs ~2.5 s of CPU. The
instance's default storage is SQLite: ``history/runs.db`` (tables ``runs``, ``run_tags``,
``daemon_heartbeats``) and ``schedules/schedules.db`` (``instigators``: one row per sensor or schedule
ever turned on or off, with its status; ``job_ticks``). This module reads them read-only with sqlite3.
It is a reader of Dagster's storage layout (stable across 1.x, but not a public API): every read is
guarded and an unknown layout yields "unknown" rather than an error. A user-configured non-SQLite
storage (Postgres in dagster.yaml) is reported as such, not read.
"""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path

SENSORS = ("document_folder_sensor",)
SCHEDULES = ("reconcile_documents_nightly",)
TRIGGER_TAG = "pathrag/trigger"


def _connect(path: Path) -> sqlite3.Connection | None:
    if not path.exists():
        return None
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2.0)


def _utc(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def automation_state(dagster_home: Path) -> list[dict]:
    """Sensors and schedules: name, kind, status ('RUNNING', 'STOPPED'; 'STOPPED (default)' when never
    toggled) and the last tick's time and outcome."""
    names = {**{n: "sensor" for n in SENSORS}, **{n: "schedule" for n in SCHEDULES}}
    state = {n: {"name": n, "kind": k, "status": "STOPPED (default)", "last_tick": None, "last_tick_status": None}
             for n, k in names.items()}
    con = _connect(dagster_home / "schedules" / "schedules.db")
    if con is None:
        return list(state.values())
    with closing(con):
        try:
            rows = con.execute("SELECT selector_id, status, instigator_body FROM instigators").fetchall()
        except sqlite3.Error:
            return list(state.values())
        for selector_id, status, body in rows:
            try:
                name = json.loads(body)["origin"]["job_name"]
            except (ValueError, KeyError, TypeError):
                continue
            if name not in state:
                continue
            state[name]["status"] = status
            try:
                tick = con.execute("SELECT timestamp, status FROM job_ticks WHERE selector_id = ? "
                                   "ORDER BY id DESC LIMIT 1", [selector_id]).fetchone()
            except sqlite3.Error:
                tick = None
            if tick:
                state[name]["last_tick"] = str(tick[0])[:19]
                state[name]["last_tick_status"] = tick[1]
    return list(state.values())


def daemon_heartbeat_age(dagster_home: Path) -> float | None:
    """Seconds since the Dagster daemon (which runs sensors and schedules) last reported; None if never."""
    con = _connect(dagster_home / "history" / "runs.db")
    if con is None:
        return None
    with closing(con):
        try:
            row = con.execute("SELECT max(timestamp) FROM daemon_heartbeats").fetchone()
        except sqlite3.Error:
            return None
    if not row or row[0] is None:
        return None
    stamp = row[0]
    if isinstance(stamp, str):
        stamp = datetime.fromisoformat(stamp).replace(tzinfo=timezone.utc).timestamp()
    return max(0.0, time.time() - float(stamp))


def last_runs(dagster_home: Path, limit: int = 5) -> list[dict]:
    """The latest runs of every job, newest first: whole run id, job, status, trigger, start and seconds."""
    con = _connect(dagster_home / "history" / "runs.db")
    if con is None:
        return []
    with closing(con):
        try:
            rows = con.execute(
                "SELECT run_id, pipeline_name, status, start_time, end_time, create_timestamp FROM runs "
                "ORDER BY id DESC LIMIT ?", [limit]).fetchall()
            tags: dict[str, dict[str, str]] = {}
            for run_id, key, value in con.execute(
                    f"SELECT run_id, key, value FROM run_tags WHERE run_id IN ({','.join('?' * len(rows))})",
                    [r[0] for r in rows]).fetchall():
                tags.setdefault(run_id, {})[key] = value
        except sqlite3.Error:
            return []
    out = []
    for run_id, job, status, start, end, created in rows:
        t = tags.get(run_id, {})
        trigger = t.get(TRIGGER_TAG) or ("sensor" if "dagster/sensor_name" in t else
                                         "schedule" if "dagster/schedule_name" in t else "dagster")
        out.append({"run_id": run_id, "job": job, "status": status, "trigger": trigger,
                    "started": _utc(start) or str(created)[:19],
                    "seconds": round(end - start, 2) if start and end else None,
                    "failed_files": t.get("pathrag/failed_files")})
    return out


def storage_kind(dagster_home: Path) -> str:
    """'sqlite' (the default, readable here), 'configured' (dagster.yaml names another storage) or 'none'."""
    yaml = dagster_home / "dagster.yaml"
    if yaml.exists() and any(word in yaml.read_text() for word in ("postgres", "mysql", "storage:")):
        return "configured"
    return "sqlite" if (dagster_home / "history" / "runs.db").exists() else "none"
