"""`pathrag sql` and `pathrag status`: read the index without changing it.

Imports DuckDB and rich only: no Dagster, LanceDB, igraph or model client.
"""

from __future__ import annotations

import csv
import io
import json

import click
import duckdb

from pathrag_pipeline.cli.common import load_settings, print_table
from pathrag_pipeline.config import Settings
from pathrag_pipeline.storage.store import Store


@click.command()
@click.argument("query")
@click.option("--json", "as_json", is_flag=True, help="Print rows as a JSON list of objects.")
@click.option("--csv", "as_csv", is_flag=True, help="Print rows as CSV with a header.")
def sql(query: str, as_json: bool, as_csv: bool) -> None:
    """Run a read-only SQL QUERY against the index (tables: see docs/tables.md)."""
    if as_json and as_csv:
        raise click.UsageError("give --json or --csv, not both")
    if not query.strip():
        raise click.UsageError('the query is empty; e.g. pathrag sql "SELECT id, status FROM documents"')
    settings = load_settings()
    store = Store.for_settings(settings)
    with store.connect(read_only=True, sandboxed=True) as con:
        try:
            cursor = con.execute(query)
        except duckdb.Error as exc:
            hint = ""
            if "read-only" in str(exc) or "disabled by configuration" in str(exc):
                hint = ("\npathrag sql only reads the index and no other file; the index changes through "
                        "`pathrag index`, the Dagster assets, or `pathrag ask` (query logs).")
            raise click.ClickException(f"SQL error: {exc}{hint}") from None
        if cursor.description is None:
            return
        columns = [d[0] for d in cursor.description]
        rows = cursor.fetchall()
    if as_json:
        click.echo(json.dumps([dict(zip(columns, r)) for r in rows], default=str, indent=1))
    elif as_csv:
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(columns)
        writer.writerows(rows)
        click.echo(buf.getvalue(), nl=False)
    else:
        print_table(columns, rows)


def status_summary(settings: Settings) -> dict:
    store = Store.for_settings(settings)
    with store.connect(read_only=True) as con:
        by_status = dict(con.execute(
            "SELECT CASE WHEN status = 'error' AND text IS NOT NULL THEN 'error, last good version kept' "
            "ELSE status END AS s, count(*) FROM documents GROUP BY s ORDER BY s").fetchall())
        chunks = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
        graph = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                 for t in ("extractions", "entities", "relations", "entity_aliases")}
        failed = con.execute("SELECT count(*) FROM extractions WHERE status = 'failed'").fetchone()[0]
        usage = con.execute(
            "SELECT stage, extractor, sum(calls), sum(prompt_tokens + completion_tokens), sum(cache_hits) "
            "FROM llm_usage GROUP BY stage, extractor ORDER BY stage, extractor").fetchall()
        cols = ["started_at", "trigger", "files_new", "files_changed", "files_deleted",
                "files_failed", "documents", "chunks", "seconds"]
        runs = con.execute(
            "SELECT strftime(started_at, '%Y-%m-%d %H:%M:%S'), trigger, files_new, files_changed, files_deleted, "
            "files_failed, documents, chunks, round(seconds, 2) FROM ingest_runs ORDER BY started_at DESC LIMIT 5"
        ).fetchall()
    return {
        "home": str(settings.home),
        "documents": by_status,
        "chunks": chunks,
        "graph": {**graph, "failed_extractions": failed},
        "llm_usage": [dict(zip(["stage", "extractor", "calls", "tokens", "cache_hits"], r)) for r in usage],
        "last_runs": [dict(zip(cols, r)) for r in runs],
    }


def print_status(settings: Settings) -> None:
    summary = status_summary(settings)
    print_table(["table", "rows"],
                [(f"documents ({k})", v) for k, v in sorted(summary["documents"].items())]
                + [("chunks", summary["chunks"])] + sorted(summary["graph"].items()),
                title=f"Index at {summary['home']}")
    if summary["llm_usage"]:
        cols = list(summary["llm_usage"][0])
        print_table(cols, [tuple(r.values()) for r in summary["llm_usage"]], title="LLM usage (all runs)")
    if summary["last_runs"]:
        cols = ["started (UTC)", "trigger", "new", "changed", "deleted", "failed", "docs", "chunks", "s"]
        print_table(cols, [tuple(r.values()) for r in summary["last_runs"]], title="Last runs")


@click.command()
@click.option("--json", "as_json", is_flag=True)
def status(as_json: bool) -> None:
    """Documents by status, chunks, and the last runs."""
    settings = load_settings()
    if as_json:
        click.echo(json.dumps(status_summary(settings), default=str, indent=1))
    else:
        print_status(settings)
