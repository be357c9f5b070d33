"""`pathrag sql` and `pathrag status`: read the index without changing it.

Imports DuckDB and rich only: no Dagster, LanceDB, igraph or model client.
"""

from __future__ import annotations

import csv
import io
import json
import os
import threading

import click
import duckdb

from pathrag_pipeline.cli.common import load_settings, print_table
from pathrag_pipeline.config import DEFAULT_SQL_TIMEOUT, Settings
from pathrag_pipeline.ingest.home_folder import recorded_folder, watched_folder
from pathrag_pipeline.storage.store import KEEP_READING_S, Store

# How long `pathrag sql` and `pathrag status` wait to merge spooled query rows: past a kept read connection's second.
SPOOL_MERGE_WAIT_S = 2 * KEEP_READING_S


def _merge_query_spool(store: Store) -> None:
    """Queries logged while another process held the database wait in the spool: move them into the tables
    first, or say on stderr that they are not in them yet. With rows spooled, the merge waits for the database a
    moment (``SPOOL_MERGE_WAIT_S``): a process that just asked queries keeps it open that long for its next one
    (``KEEP_READING_S``) and its rows wait in the spool meanwhile (``query_log.log_results``)."""
    from pathrag_pipeline.query.query_log import merge_spool_now, spool_dir, spooled

    if store.path.exists() and merge_spool_now(store, wait_s=SPOOL_MERGE_WAIT_S) is None:
        click.echo(f"note: {spooled(store)} batch(es) of query log rows wait in {spool_dir(store)} while another "
                   "process writes the database; queries/path_traces/retrieved_nodes show them once it is done",
                   err=True)


# Rows fetched at a time: output streams, so memory holds one batch, not the result.
FETCH_ROWS = 1000
# The table view (no --json/--csv) shows at most this many rows, then says how to get them all.
MAX_TABLE_ROWS = 1000


class _Rows:
    """Where fetched rows go: streamed as JSON or CSV, or kept for the table up to ``MAX_TABLE_ROWS``."""

    def __init__(self, columns: list[str], as_json: bool, as_csv: bool) -> None:
        self.columns, self.as_json, self.as_csv = columns, as_json, as_csv
        self.shown: list[tuple] = []
        self.count = 0
        self.more = False
        if as_csv:
            self._csv([columns])
        elif as_json:
            click.echo("[", nl=False)

    def _csv(self, rows) -> None:
        buf = io.StringIO()
        csv.writer(buf).writerows(rows)
        click.echo(buf.getvalue(), nl=False)

    def add(self, rows: list[tuple]) -> bool:
        """Write (or keep) a batch; False once the table view is full (stop fetching)."""
        if self.as_csv:
            self._csv(rows)
        elif self.as_json:
            click.echo("".join(("\n" if self.count + i == 0 else ",\n")
                               + json.dumps(dict(zip(self.columns, r)), default=str) for i, r in enumerate(rows)),
                       nl=False)
        else:
            room = MAX_TABLE_ROWS - len(self.shown)
            self.shown += rows[:room]
            if len(rows) > room:
                self.more = True
                return False
        self.count += len(rows)
        return True

    def close(self) -> None:
        if self.as_json:
            click.echo("\n]" if self.count else "]")
        elif not self.as_csv:
            print_table(self.columns, self.shown)
            if self.more:
                click.echo(f"(the first {MAX_TABLE_ROWS} rows; add LIMIT, or give --csv or --json for every row)",
                           err=True)


@click.command()
@click.argument("query")
@click.option("--json", "as_json", is_flag=True, help="Print rows as a JSON list of objects.")
@click.option("--csv", "as_csv", is_flag=True, help="Print rows as CSV with a header.")
@click.option("--timeout", type=click.IntRange(min=0), default=None,
              help="Seconds the statement may run before it is stopped (default PATHRAG_SQL_TIMEOUT, "
                   f"{DEFAULT_SQL_TIMEOUT}; 0: no limit).")
def sql(query: str, as_json: bool, as_csv: bool, timeout: int | None) -> None:
    """Run a read-only SQL QUERY against the index (tables: see docs/tables.md).

    The statement runs under the configured memory cap (PATHRAG_DUCKDB_MEMORY_LIMIT), spills at most
    PATHRAG_SQL_MAX_TEMP to a folder removed when the command ends, cannot change those limits with SET, and
    is stopped after --timeout seconds, fetching and printing included; rows stream (--json, --csv) or the table
    shows the first 1000; Ctrl-C stops it at once."""
    if as_json and as_csv:
        raise click.UsageError("give --json or --csv, not both")
    if not query.strip():
        raise click.UsageError('the query is empty; e.g. pathrag sql "SELECT id, status FROM documents"')
    settings = load_settings()
    limit = settings.sql_timeout if timeout is None else timeout
    store = Store.for_settings(settings)
    _merge_query_spool(store)
    with store.connect(read_only=True, sandboxed=True) as con:
        expired = threading.Event()

        def stop() -> None:
            expired.set()
            con.interrupt()

        timer = threading.Timer(limit, stop) if limit else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            given = len(con.extract_statements(query))
            if given > 1:   # DuckDB would run them all and show the last one's rows only
                raise click.UsageError(f"the query holds {given} statements; give one at a time")
            cursor = con.execute(query)
            if cursor.description is None:
                return
            out = _Rows([d[0] for d in cursor.description], as_json, as_csv)
            while not expired.is_set():
                rows = cursor.fetchmany(FETCH_ROWS)
                if not rows or not out.add(rows):
                    break
            if expired.is_set():
                raise duckdb.InterruptException("timed out")
            out.close()
        except duckdb.OutOfMemoryException:
            raise  # the store says it in one line, naming PATHRAG_DUCKDB_MEMORY_LIMIT
        except duckdb.InterruptException:
            if expired.is_set():
                raise click.ClickException(
                    f"the statement ran longer than {limit}s and was stopped; give --timeout SECONDS (0: no "
                    f"limit) or set PATHRAG_SQL_TIMEOUT") from None
            raise click.ClickException("the statement was interrupted") from None
        except KeyboardInterrupt:
            con.interrupt()
            click.echo("Interrupted: the statement was stopped; the index is unchanged.", err=True)
            raise SystemExit(130) from None
        except duckdb.Error as exc:
            hint = ""
            if "read-only" in str(exc) or "disabled by configuration" in str(exc):
                hint = ("\npathrag sql only reads the index and no other file; the index changes through "
                        "`pathrag index`, the Dagster assets, or `pathrag ask` (query logs).")
            elif "configuration has been locked" in str(exc):
                hint = ("\npathrag sql runs under fixed limits; change them with PATHRAG_DUCKDB_MEMORY_LIMIT, "
                        "PATHRAG_SQL_MAX_TEMP or --timeout.")
            raise click.ClickException(f"SQL error: {exc}{hint}") from None
        finally:
            if timer is not None:
                timer.cancel()


FAILED_FILES_SHOWN = 20


def status_summary(settings: Settings) -> dict:
    from pathrag_pipeline.index.embedding_stage import unembedded_rows

    store = Store.for_settings(settings)
    _merge_query_spool(store)
    with store.connect(read_only=True) as con:
        by_status = dict(con.execute(
            "SELECT CASE WHEN status = 'error' AND text IS NOT NULL THEN 'error, last good version kept' "
            "ELSE status END AS s, count(*) FROM documents GROUP BY s ORDER BY s").fetchall())
        chunks = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
        graph = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                 for t in ("extractions", "entities", "relations", "entity_aliases")}
        failed = con.execute("SELECT count(*) FROM extractions WHERE status = 'failed'").fetchone()[0]
        given_up = _given_up(con)
        usage = con.execute(
            "SELECT stage, extractor, sum(calls), sum(prompt_tokens + completion_tokens), sum(cache_hits) "
            "FROM llm_usage GROUP BY stage, extractor ORDER BY stage, extractor").fetchall()
        cols = ["run_id", "started_at", "trigger", "files_new", "files_changed", "files_deleted",
                "files_failed", "documents", "chunks", "seconds"]
        folder = recorded_folder(con)
        unembedded = unembedded_rows(con)
        failing = con.execute(
            "SELECT path, error, text IS NOT NULL FROM documents WHERE status = 'error' ORDER BY path LIMIT ?",
            [FAILED_FILES_SHOWN]).fetchall()
        runs = con.execute(
            "SELECT run_id, strftime(started_at, '%Y-%m-%d %H:%M:%S'), trigger, files_new, files_changed, files_deleted, "
            "files_failed, documents, chunks, round(seconds, 2) FROM ingest_runs ORDER BY started_at DESC LIMIT 5"
        ).fetchall()
    watched, mismatch = watched_folder(folder, os.environ.get("PATHRAG_DOCS"), settings.docs)
    return {
        "home": str(settings.home),
        "folder": folder,     # the folder this home indexes (None until a sync records it)
        # what the Dagster sensor, schedule and UI launches index, and why their runs would be refused (or None)
        "dagster_folder": watched, "dagster_folder_mismatch": mismatch,
        "documents": by_status,
        "chunks": chunks,
        # rows the last index run left without vectors, by table ({} when none): the index is partial
        "unembedded": unembedded,
        # given up: failed (or came back empty) MAX_FAILED_RUNS runs in a row; `pathrag index --retry-failed`
        "graph": {**graph, "failed_extractions": failed, "given_up_extractions": given_up},
        # the files that failed, first FAILED_FILES_SHOWN by path, with their whole error message
        "failed_files": [{"path": path, "error": error, "last_good_version_kept": kept}
                         for path, error, kept in failing],
        "llm_usage": [dict(zip(["stage", "extractor", "calls", "tokens", "cache_hits"], r)) for r in usage],
        "last_runs": [dict(zip(cols, r)) for r in runs],
        "dagster": dagster_summary(settings),
        "query_service": service_summary(settings),
    }


def service_summary(settings: Settings) -> dict | None:
    """The home's query service (`pathrag serve`) if its process runs: URL, process, start; never the token."""
    from pathrag_pipeline.query.service_client import live_service

    info = live_service(settings.home)
    return None if info is None else {"url": info.url, "process": info.process, "started_at": info.started_at,
                                      "background": info.background}


def _given_up(con) -> int:
    """Chunks the extraction stage leaves alone after failing MAX_FAILED_RUNS runs in a row (0 in a home made
    before failures were counted: its next index run adds the column)."""
    import duckdb

    from pathrag_pipeline.index.extraction_stage import MAX_FAILED_RUNS

    try:
        return con.execute("SELECT count(*) FROM extractions WHERE status IN ('failed', 'empty') "
                           "AND coalesce(failed_runs, 0) >= ?", [MAX_FAILED_RUNS]).fetchone()[0]
    except duckdb.BinderException:
        return 0


def dagster_summary(settings: Settings) -> dict:
    """Sensor and schedule state and the last runs of every job, read from the instance's SQLite files
    (no Dagster import: see pathrag_pipeline/dagster_state.py)."""
    from pathrag_pipeline import dagster_state

    home = settings.dagster_home
    age = dagster_state.daemon_heartbeat_age(home)
    return {
        "home": str(home),
        "storage": dagster_state.storage_kind(home),
        "daemon_heartbeat_seconds_ago": None if age is None else round(age, 1),
        "automation": dagster_state.automation_state(home),
        "runs": dagster_state.last_runs(home),
    }


def print_status(settings: Settings) -> None:
    from pathrag_pipeline.cli.common import console
    from pathrag_pipeline.index.embedding_stage import unembedded_note

    summary = status_summary(settings)
    folder = summary["folder"] or "a folder not recorded yet (the next `pathrag index` records it)"
    # one line, never wrapped, so the paths can be copied
    console.print(f"Home {summary['home']} indexes {folder}", markup=False, highlight=False, soft_wrap=True)
    if summary["unembedded"]:
        console.print(f"warning: {unembedded_note(summary['unembedded'])}", style="yellow", markup=False,
                      highlight=False, soft_wrap=True)
    if summary["dagster_folder_mismatch"]:
        console.print(f"warning: {summary['dagster_folder_mismatch']}", style="yellow", markup=False,
                      highlight=False, soft_wrap=True)
    print_table(["table", "rows"],
                [(f"documents ({k})", v) for k, v in sorted(summary["documents"].items())]
                + [("chunks", summary["chunks"])] + sorted(summary["graph"].items()),
                title=f"Index at {summary['home']}")
    if summary["failed_files"]:
        total = sum(v for k, v in summary["documents"].items() if k.startswith("error"))
        shown = len(summary["failed_files"])
        more = f"; the first {shown} by path, all with pathrag sql \"SELECT path, error FROM documents WHERE " \
               "status = 'error'\"" if total > shown else ""
        print_table(["file", "error", "last good version kept"],
                    [(f["path"], f["error"], "yes" if f["last_good_version_kept"] else "no")
                     for f in summary["failed_files"]], title=f"Files that failed ({total}{more})")
    if summary["llm_usage"]:
        cols = list(summary["llm_usage"][0])
        print_table(cols, [tuple(r.values()) for r in summary["llm_usage"]], title="LLM usage (all runs)")
    if summary["last_runs"]:
        cols = ["run id", "started (UTC)", "trigger", "new", "changed", "deleted", "failed", "docs", "chunks", "s"]
        print_table(cols, [tuple(r.values()) for r in summary["last_runs"]], title="Last ingest runs (all entry points)")
    svc = summary["query_service"]
    console.print("Query service: " + (f"running at {svc['url']} since {svc['started_at']} ({svc['process']}"
                                       f"{', started in the background' if svc.get('background') else ''}); "
                                       "`pathrag ask` and `pathrag index` use it (`pathrag serve --stop` stops it)"
                                       if svc else "not running (`pathrag serve` starts one)"),
                  markup=False, highlight=False, soft_wrap=True)
    dag = summary["dagster"]
    age = dag["daemon_heartbeat_seconds_ago"]
    daemon = ("not seen (sensors and schedules run only under `pathrag dev` or `dagster-daemon run`)" if age is None
              else f"last heartbeat {age:.0f} s ago" + (" (not running?)" if age > 120 else ""))
    idle = age is None or age > 120
    print_table(["sensor / schedule", "kind", "status", "last tick (UTC)", "tick result"],
                [(a["name"], a["kind"],
                  a["status"] + (" (but no daemon is running: it does not tick)" if idle and a["status"] == "RUNNING"
                                 else ""),
                  a["last_tick"], a["last_tick_status"]) for a in dag["automation"]],
                title=f"Dagster at {dag['home']}: daemon {daemon}")
    if dag["storage"] == "configured":
        console.print("Dagster storage is configured in dagster.yaml (not the default SQLite): run history not "
                      "shown here; see the UI.", highlight=False)
    if dag["runs"]:
        print_table(["run id", "job", "status", "trigger", "started (UTC)", "s", "failed files"],
                    [(r["run_id"], r["job"], r["status"], r["trigger"], r["started"], r["seconds"], r["failed_files"])
                     for r in dag["runs"]], title="Last Dagster runs")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.option("--check", is_flag=True,
              help="Read every stored byte (DuckDB tables, LanceDB tables, Dagster storage) and name each damaged "
                   "part with the command that repairs it; exits 1 when one is damaged.")
@click.option("--repair", is_flag=True,
              help="With --check: repair what it found (a damaged file or folder is moved aside, never deleted), "
                   "then check again.")
def status(as_json: bool, check: bool, repair: bool) -> None:
    """Documents by status, chunks, the last runs, and the Dagster sensor, schedule and runs."""
    settings = load_settings()
    if repair and not check:
        raise click.UsageError("--repair repairs what --check finds: give both (`pathrag status --check --repair`)")
    if check:
        _check(settings, as_json, repair)
        return
    if as_json:
        click.echo(json.dumps(status_summary(settings), default=str, indent=1))
    else:
        print_status(settings)


def _check(settings: Settings, as_json: bool, repair: bool = False) -> None:
    """`status --check`: every part of the home read in full (storage/home_check.py); exit 1 when one is damaged.
    With ``repair``, what is damaged is repaired (``_repair``) and the home checked again."""
    from pathrag_pipeline.ingest.home_folder import home_folder
    from pathrag_pipeline.storage.home_check import check_home
    from pathrag_pipeline.storage.vector_location import VectorLocation

    try:
        folder = home_folder(settings) or "FOLDER"
    except Exception:  # noqa: BLE001 - a damaged home may not say its folder; the repairs then name FOLDER
        folder = "FOLDER"
    parts = check_home(settings.duckdb_path, VectorLocation.for_settings(settings),
                       settings.dagster_home, folder)
    damaged = [p for p in parts if not p.ok]
    if as_json and damaged and repair:
        pass   # one JSON object: the check after the repair
    elif as_json:
        click.echo(json.dumps({"ok": not damaged, "parts": [p.__dict__ for p in parts]}, indent=1))
    else:
        for part in parts:
            click.echo(part.line())
        click.echo(f"{len(damaged)} of {len(parts)} parts damaged" if damaged else
                   f"all {len(parts)} parts read whole")
    if damaged and repair:
        if folder == "FOLDER":
            raise click.ClickException("the home does not say which folder it indexes: repair by hand, as each line "
                                       "above says, with the folder's path")
        _repair(settings, folder, {p.part for p in damaged}, as_json)
        _check(settings, as_json)
        return
    if damaged:
        raise SystemExit(1)


def _repair(settings: Settings, folder: str, parts: set[str], as_json: bool) -> None:
    """Move the damaged DuckDB file and Dagster folder aside (never deleted: their names end in ``.damaged-TIME``),
    index the folder again (offline extraction is free; an LLM-built index pays its extraction again), and re-embed
    when a vector table is damaged (from DuckDB, no LLM call). Each step is a `pathrag index` process, as a user
    would run it."""
    import shutil
    import subprocess
    import sys
    import time

    stamp = time.strftime("%Y%m%d-%H%M%S")
    say = (lambda _: None) if as_json else (lambda text: click.echo(text, err=True))
    if "dagster" in parts and settings.dagster_home.exists():
        aside = settings.dagster_home.with_name(f"dagster.damaged-{stamp}")
        shutil.move(str(settings.dagster_home), str(aside))
        say(f"repair: moved {settings.dagster_home} to {aside} (its run history; the index is kept)")
    if "duckdb" in parts:
        for path in (settings.duckdb_path, settings.duckdb_path.with_name(settings.duckdb_path.name + ".wal")):
            if path.exists():
                aside = path.with_name(f"{path.name}.damaged-{stamp}")
                shutil.move(str(path), str(aside))
                say(f"repair: moved {path} to {aside}")
    steps = ([["index", folder]] if parts & {"duckdb", "dagster"} else []) + \
        ([["index", "--reembed", folder]] if "lancedb" in parts else [])
    for step in steps:
        say(f"repair: pathrag {' '.join(step)}")
        proc = subprocess.run([sys.executable, "-m", "pathrag_pipeline.cli", *step], capture_output=True, text=True)
        if proc.returncode != 0:
            last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:]
            raise click.ClickException(f"the repair step `pathrag {' '.join(step)}` failed: {' '.join(last)}")
