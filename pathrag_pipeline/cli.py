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
from rich.table import Table

from pathrag_pipeline.cli_ask import ask
from pathrag_pipeline.cli_bench import indexing as bench_indexing
from pathrag_pipeline.cli_bench import query as bench_query
from pathrag_pipeline.cli_bench import report as bench_report
from pathrag_pipeline.cli_bench_pruning import pruning
from pathrag_pipeline.cli_eval import eval_group
from pathrag_pipeline.config import SAMPLE_DOCS, ConfigError, Settings
from pathrag_pipeline.store import Store, StoreLockedError
from pathrag_pipeline.terminal import make_console

console = make_console()

# Question 1 of data/sample_questions.md: its answer (River Lode) needs three documents in two formats.
SAMPLE_QUESTION = ("On which river lies the birthplace of the first director of the "
                   "Pellingham Institute of Hydrology?")


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

def _print_sync(report) -> None:
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


def _print_index(report) -> None:
    _print_sync(report.sync)
    if not report.sync.plan.new and not report.sync.plan.changed and not report.sync.plan.unchanged:
        from pathrag_pipeline.parsing import SUPPORTED

        console.print(f"[yellow]no supported files found in {report.sync.folder}[/yellow] "
                      f"(supported: {' '.join(sorted(SUPPORTED))})", highlight=False)
    mode = report.mode
    console.print(f"mode: {mode['mode']} | extractor {mode['extractor']} | embeddings {mode['embedder']}",
                  highlight=False)
    rows = []
    if report.extraction is not None:
        x = report.extraction
        rows.append(("extraction", f"{x.pending} chunks pending, {x.cache_hits} from cache, {x.extracted} extracted, "
                                   f"{x.failed} failed; {x.calls} LLM calls, {x.prompt_tokens + x.completion_tokens} tokens"))
        for err in x.errors:
            console.print(f"[yellow]extraction failed[/yellow] {err}", highlight=False)
    if report.triples is not None:
        t = report.triples
        rows.append(("triples import", f"{t.triples} triples, {t.matched_documents} documents matched, "
                                       f"{t.records_written} records written, {t.malformed} malformed lines"))
    a = report.aliases
    rows.append(("aliases", f"{a.candidates} near-duplicate names found, {a.new_aliases} new aliases, "
                            f"{a.entities_remerged} entities re-merged"))
    g = report.graph
    rows.append(("graph", f"{g['entities']} entities, {g['relations']} relations from {g['extractions']} chunk records"))
    for table, st in report.embeddings.tables.items():
        rows.append((f"embeddings: {table}", f"{st.embedded} embedded, {st.unchanged} unchanged, "
                                             f"{st.deleted} deleted, {st.total} rows"))
    print_table(["stage", "result"], rows)


def _run_index(settings: Settings, folder: Path, trigger: str, triples: Path | None = None, reembed: bool = False):
    from pathrag_pipeline.pipeline import run_indexing

    with console.status(f"indexing {folder} ..."):
        report = run_indexing(settings, folder=folder, trigger=trigger, triples=triples, reembed=reembed)
    _print_index(report)
    return report


@main.command()
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--triples", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Build the graph from this JSONL of {doc_id, subject, predicate, object} instead of extraction.")
@click.option("--reembed", is_flag=True,
              help="Drop the LanceDB tables and embed everything again (after changing the embedding model).")
def index(path: Path, triples: Path | None, reembed: bool) -> None:
    """Index the documents under PATH: only new or changed files are processed, deleted ones are removed."""
    settings = _settings(docs=path.resolve())
    _run_index(settings, path.resolve(), "cli", triples=triples, reembed=reembed)
    console.print(f"Stored in {settings.duckdb_path} and {settings.lancedb_path}. "
                  "Query it with: pathrag sql \"SELECT name, type FROM entities LIMIT 10\"", highlight=False)


@main.command()
def quickstart() -> None:
    """Index the bundled sample documents offline and show what was built and where."""
    from pathrag_pipeline.pipeline import describe_mode

    settings = _settings(docs=SAMPLE_DOCS)
    console.print(f"[bold]PathRAG quickstart[/bold]: sample documents in {SAMPLE_DOCS}")
    mode = describe_mode(settings)
    console.print(f"mode: {mode['mode']} (extractor {mode['extractor']}, embeddings {mode['embedder']}, "
                  f"answers {mode['answers']})", highlight=False)
    _run_index(settings, SAMPLE_DOCS, "quickstart")
    _print_status(settings)
    from pathrag_pipeline.cli_ask import print_result
    from pathrag_pipeline.query import PathRAG

    console.print(f"\n[bold]Sample question[/bold] (mode path): {SAMPLE_QUESTION}", highlight=False)
    print_result(PathRAG(settings).query(SAMPLE_QUESTION), console, max_paths=5)
    console.print(
        f"\nWhere things are: DuckDB {settings.duckdb_path}, LanceDB {settings.lancedb_path}, "
        f"Dagster home {settings.dagster_home}.\n"
        "Next: `pathrag ask \"...\" [--mode naive|local|global|hybrid]`, "
        "`pathrag sql \"SELECT question, total_ms FROM queries\"`, `pathrag status`, or `pathrag dev` for the Dagster UI.",
        highlight=False,
    )


# ---- inspection --------------------------------------------------------------------------------

@main.command()
@click.argument("query")
@click.option("--json", "as_json", is_flag=True, help="Print rows as a JSON list of objects.")
@click.option("--csv", "as_csv", is_flag=True, help="Print rows as CSV with a header.")
def sql(query: str, as_json: bool, as_csv: bool) -> None:
    """Run a read-only SQL QUERY against the index (tables: see docs/tables.md)."""
    if as_json and as_csv:
        raise click.UsageError("give --json or --csv, not both")
    if not query.strip():
        raise click.UsageError('the query is empty; e.g. pathrag sql "SELECT id, status FROM documents"')
    settings = _settings()
    store = Store(settings.duckdb_path)
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
    store = Store(settings.duckdb_path)
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


def _print_status(settings: Settings) -> None:
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


@main.command()
@click.option("--json", "as_json", is_flag=True)
def status(as_json: bool) -> None:
    """Documents by status, chunks, and the last runs."""
    settings = _settings()
    if as_json:
        click.echo(json.dumps(status_summary(settings), default=str, indent=1))
    else:
        _print_status(settings)


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("dg_args", nargs=-1, type=click.UNPROCESSED)
def dev(dg_args: tuple[str, ...]) -> None:
    """Open the Dagster UI (`dg dev`) with DAGSTER_HOME in PATHRAG_HOME, so runs and sensor cursors persist.

    Extra arguments go to `dg dev` (e.g. `pathrag dev -p 3001`)."""
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
bench.add_command(bench_indexing)
bench.add_command(bench_query)
bench.add_command(bench_report)
main.add_command(ask)
main.add_command(eval_group)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
