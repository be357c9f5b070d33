"""The `pathrag` command line: quickstart, index, sql, status, dev, bench.

Each command is a thin shell over the core modules; they read settings from the environment
(see `pathrag_pipeline.config`) and print tables for people or JSON/CSV for programs.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sys
from pathlib import Path

import click
import duckdb
from rich.console import Console
from rich.table import Table

from pathrag_pipeline.cli_bench_pruning import pruning
from pathrag_pipeline.config import SAMPLE_DOCS, ConfigError, Settings
from pathrag_pipeline.store import Store, StoreLockedError

console = Console()


def _settings(**overrides) -> Settings:
    try:
        return Settings.from_env(**overrides)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def print_table(columns: list[str], rows: list[tuple], title: str | None = None) -> None:
    table = Table(title=title, show_lines=False)
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*["" if v is None else str(v) for v in row])
    console.print(table)


class _Errors(click.Group):
    """Turn the pipeline's expected failures into one clear line and exit code 1, not a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (ConfigError, FileNotFoundError, StoreLockedError) as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=_Errors)
@click.version_option(package_name="pathrag-pipeline")
def main() -> None:
    """PathRAG graph-RAG pipeline. Settings come from PATHRAG_* environment variables (see README)."""


# ---- indexing ----------------------------------------------------------------------------------

def _print_sync(report, settings: Settings) -> None:
    plan = report.plan
    print_table(
        ["files", "new", "changed", "same", "deleted", "failed", "docs written", "chunks written", "s"],
        [(len(plan.new) + len(plan.changed) + len(plan.unchanged), len(plan.new), len(plan.changed),
          len(plan.unchanged), len(plan.deleted), len(report.failed), report.documents_written,
          report.chunks_written, f"{report.seconds:.2f}")],
        title=f"Indexed {report.folder}",
    )
    for failed in report.failed:
        for err in failed.errors:
            console.print(f"[yellow]{failed.status}[/yellow] {failed.rel_path}: {err}", highlight=False)


def _run_index(settings: Settings, folder: Path, trigger: str):
    from pathrag_pipeline.ingest import sync_folder

    with console.status(f"indexing {folder} ..."):
        report = sync_folder(settings, folder=folder, trigger=trigger)
    _print_sync(report, settings)
    return report


@main.command()
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
def index(path: Path) -> None:
    """Index the documents under PATH (only new or changed files are processed; deleted ones are removed)."""
    settings = _settings(docs=path.resolve())
    _run_index(settings, path.resolve(), "cli")
    console.print(f"Stored in {settings.duckdb_path}. Query it with: pathrag sql \"SELECT * FROM documents\"")


@main.command()
def quickstart() -> None:
    """Index the bundled sample documents offline and show what was built and where."""
    settings = _settings(docs=SAMPLE_DOCS)
    console.print(f"[bold]PathRAG quickstart[/bold]: sample documents in {SAMPLE_DOCS}")
    console.print(f"mode: {describe_mode(settings)}")
    _run_index(settings, SAMPLE_DOCS, "quickstart")
    _print_status(settings)
    console.print(
        f"\nWhere things are: DuckDB {settings.duckdb_path}, LanceDB {settings.lancedb_path}, "
        f"Dagster home {settings.dagster_home}.\n"
        "Next: `pathrag sql \"SELECT title, status FROM documents\"`, `pathrag status`, or `pathrag dev` for the Dagster UI."
    )


def describe_mode(settings: Settings) -> str:
    if settings.llm_base_url or settings.llm_api_key:
        return f"LLM endpoint {settings.llm_base_url or 'OpenAI'} model {settings.llm_model or 'default'}"
    return "offline (no LLM endpoint configured: rule-based extraction, hashing embeddings, extractive answers)"


# ---- inspection --------------------------------------------------------------------------------

@main.command()
@click.argument("query")
@click.option("--json", "as_json", is_flag=True, help="Print rows as a JSON list of objects.")
@click.option("--csv", "as_csv", is_flag=True, help="Print rows as CSV with a header.")
def sql(query: str, as_json: bool, as_csv: bool) -> None:
    """Run a read-only SQL QUERY against the index (tables: see docs/tables.md)."""
    settings = _settings()
    store = Store(settings.duckdb_path)
    with store.connect(read_only=True) as con:
        try:
            cursor = con.execute(query)
        except duckdb.Error as exc:
            raise click.ClickException(f"SQL error: {exc}") from None
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
    store = Store(settings.duckdb_path)
    with store.connect(read_only=True) as con:
        by_status = dict(con.execute("SELECT status, count(*) FROM documents GROUP BY status ORDER BY status").fetchall())
        chunks = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
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
        "last_runs": [dict(zip(cols, r)) for r in runs],
    }


def _print_status(settings: Settings) -> None:
    summary = status_summary(settings)
    print_table(["documents by status", "count"], sorted(summary["documents"].items()) + [("chunks", summary["chunks"])],
                title=f"Index at {summary['home']}")
    if summary["last_runs"]:
        cols = ["started (UTC)", "trigger", "new", "changed", "deleted", "failed", "docs", "chunks", "s"]
        print_table(cols, [tuple(r.values()) for r in summary["last_runs"]], title="Last runs")


@main.command()
@click.option("--json", "as_json", is_flag=True)
def status(as_json: bool) -> None:
    """Documents by status, chunks, and the last runs."""
    settings = _settings()
    if as_json:
        click.echo(json.dumps(status_summary(settings), default=str, indent=1))
    else:
        _print_status(settings)


@main.command()
@click.argument("dg_args", nargs=-1)
def dev(dg_args: tuple[str, ...]) -> None:
    """Open the Dagster UI (`dg dev`) with DAGSTER_HOME in PATHRAG_HOME, so runs and sensor cursors persist."""
    settings = _settings()
    settings.dagster_home.mkdir(parents=True, exist_ok=True)
    from pathrag_pipeline.dagster_home import ensure_dagster_yaml

    ensure_dagster_yaml(settings.dagster_home)
    env = dict(os.environ, DAGSTER_HOME=str(settings.dagster_home))
    dg = shutil.which("dg")
    if dg is None:
        raise click.ClickException("`dg` was not found; install the project with `pip install -e .`")
    os.chdir(Path(__file__).resolve().parent.parent)
    os.execvpe(dg, [dg, "dev", *dg_args], env)


# ---- benchmarks --------------------------------------------------------------------------------

@main.group()
def bench() -> None:
    """Benchmarks whose results go to docs/benchmarks.md."""


@bench.command("ingest")
@click.option("--docs", "n_docs", default=1000, show_default=True, help="Number of generated documents.")
@click.option("--repeats", default=3, show_default=True, help="Runs per measurement (the median is reported).")
@click.option("--workdir", type=click.Path(path_type=Path), default=None, help="Where to generate (default: a temp dir).")
@click.option("--json", "as_json", is_flag=True)
def bench_ingest(n_docs: int, repeats: int, workdir: Path | None, as_json: bool) -> None:
    """Generate a corpus and measure full ingest and re-ingest after one file changed."""
    from pathrag_pipeline.bench_ingest import run_ingest_bench

    result = run_ingest_bench(n_docs=n_docs, repeats=repeats, workdir=workdir)
    if as_json:
        click.echo(json.dumps(result, indent=1))
    else:
        print_table(list(result["rows"][0]), [tuple(r.values()) for r in result["rows"]], title=result["title"])


bench.add_command(pruning)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
