"""`pathrag index PATH` and `pathrag quickstart`: run the indexing pipeline and report what it built."""

from __future__ import annotations

from pathlib import Path

import click

from pathrag_pipeline.cli.common import console, esc, load_settings, print_table
from pathrag_pipeline.cli.inspect import print_status
from pathrag_pipeline.config import SAMPLE_DOCS, Settings

# Question 1 of data/sample_questions.md: its answer (River Lode) needs three documents in two formats.
SAMPLE_QUESTION = ("On which river lies the birthplace of the first director of the "
                   "Pellingham Institute of Hydrology?")


WARNINGS_SHOWN = 10


def _print_sync(report) -> None:
    plan = report.plan
    print_table(
        ["files", "new", "changed", "same", "deleted", "failed", "docs written", "docs deleted", "chunks written",
         "ingest s"],
        [(len(plan.new) + len(plan.changed) + len(plan.unchanged), len(plan.new), len(plan.changed),
          len(plan.unchanged), len(plan.deleted), len(report.failed), report.documents_written,
          report.documents_deleted, report.chunks_written, f"{report.seconds:.2f}")],
        title=f"Indexed {report.folder}",
    )
    for failed in report.failed:
        for err in failed.errors:
            console.print(f"[yellow]{esc(failed.status)}[/yellow] {esc(failed.rel_path)}: {esc(err)}", highlight=False)
    warnings = report.warnings
    for warning in warnings[:WARNINGS_SHOWN]:
        console.print(f"[yellow]warning[/yellow] {esc(warning)}", highlight=False)
    if len(warnings) > WARNINGS_SHOWN:
        console.print(f"[yellow]and {len(warnings) - WARNINGS_SHOWN} more warning(s)[/yellow]: pathrag sql \"SELECT "
                      "path, warning FROM documents WHERE warning IS NOT NULL\"", highlight=False)
    if report.unsupported_count:
        from pathrag_pipeline.ingest.parsing import SUPPORTED

        more = report.unsupported_count - len(report.unsupported)
        names = ", ".join(report.unsupported) + (f" and {more} more" if more > 0 else "")
        console.print(f"[yellow]skipped {report.unsupported_count} unsupported file(s)[/yellow] "
                      f"(supported: {' '.join(sorted(SUPPORTED))}): {esc(names)}", highlight=False)
    if report.page_sources:
        source, page = next(iter(report.page_sources.items()))
        console.print(f"skipped {len(report.page_sources)} source file(s) of rendered pages, whose page is indexed "
                      f"instead (e.g. {esc(source)}, the source of {esc(page)})", highlight=False)


def _print_index(report, settings: Settings) -> None:
    _print_sync(report.sync)
    if not report.sync.plan.new and not report.sync.plan.changed and not report.sync.plan.unchanged:
        from pathrag_pipeline.ingest.parsing import SUPPORTED

        console.print(f"[yellow]no supported files found in {esc(report.sync.folder)}[/yellow] "
                      f"(supported: {' '.join(sorted(SUPPORTED))})", highlight=False)
    mode = report.mode
    console.print(f"mode: {mode['mode']} | extractor {mode['extractor']} | embeddings {mode['embedder']}",
                  highlight=False, markup=False)
    rows = []
    if report.extraction is not None:
        x = report.extraction
        rows.append(("extraction", f"{x.pending} chunks pending, {x.cache_hits} from cache, {x.extracted} extracted, "
                                   f"{x.failed} failed, {x.empty} empty"
                                   + (f", {x.trimmed} trimmed to the per-chunk cap" if x.trimmed else "")
                                   + (f", {x.given_up} left alone after failing 3 runs in a row (--retry-failed "
                                      "retries them)" if x.given_up else "")
                                   + (f" in {x.processes} worker processes" if x.processes > 1 else "")
                                   + f"; {x.calls} LLM calls, {x.prompt_tokens + x.completion_tokens} tokens"))
        if x.failed:
            # each failure was printed once as it happened (the extraction stage's warning line); not again here
            console.print(f"[yellow]{x.failed} chunk(s) failed[/yellow] (each one's line is above; all of them: "
                          "pathrag sql \"SELECT chunk_id, error FROM extractions WHERE status = 'failed'\")",
                          highlight=False)
    if report.triples is not None:
        t = report.triples
        rows.append(("triples import", f"{t.triples} triples, {t.matched_documents} documents matched, "
                                       f"{t.records_written} records written, {t.malformed} malformed lines"))
    a = report.aliases
    rows.append(("aliases", f"{a.candidates} near-duplicate names found, {a.new_aliases} new aliases, "
                            + (f"{a.removed_aliases} undone, " if a.removed_aliases else "")
                            + f"{a.entities_remerged} entities re-merged"))
    g = report.graph
    rows.append(("graph", f"{g['entities']} entities ({g['entities_without_description']} without a description), "
                          f"{g['relations']} relations from {g['extractions']} chunk records"
                          + (f" ({g['empty_extractions']} empty: see docs/llm-endpoints.md, Local models)" if g['empty_extractions'] else "")))
    for table, st in report.embeddings.tables.items():
        rows.append((f"embeddings: {table}", f"{st.embedded} embedded, {st.unchanged} unchanged, "
                                             f"{st.deleted} deleted, {st.total} rows"
                                             + (f", {st.failed} failed (retried next run)" if st.failed else "")))
    print_table(["stage", "result"], rows)
    if report.seconds is not None:
        parts = dict(report.stage_seconds)
        # the rest: Dagster's job set-up and run records, the lock and pool waits, the report's own counts
        parts["the run around them"] = max(0.0, report.seconds - sum(parts.values()))
        stages = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in parts.items())
        console.print(f"time: {report.seconds:.1f} s in all ({stages})", highlight=False, markup=False)
    for err in report.embeddings.errors:
        console.print(f"embedding batch failed: {err}", highlight=False, markup=False)
    _print_earlier_failures(settings, report)


def _print_earlier_failures(settings: Settings, report) -> None:
    """Files still in error from an earlier run (unchanged since, so this run did not list them): a failure
    is said on every run until the file is fixed or removed, not only on the run that met it."""
    from pathrag_pipeline.storage.store import Store

    store = Store.for_settings(settings)
    if not store.path.exists():
        return
    listed = {f.rel_path for f in report.sync.failed}
    with store.connect(read_only=True) as con:
        rows = con.execute("SELECT path, error FROM documents WHERE status = 'error' ORDER BY path").fetchall()
    earlier = [(path, error) for path, error in rows if path not in listed]
    if not earlier:
        return
    console.print(f"[yellow]{len(earlier)} file(s) still in error from an earlier run[/yellow] (unchanged since; "
                  "fix or remove them):", highlight=False)
    for path, error in earlier[:10]:
        console.print(f"  {esc(path)}: {esc(' '.join(str(error or '').split())[:200])}", highlight=False)
    if len(earlier) > 10:
        console.print(f"  and {len(earlier) - 10} more: pathrag sql \"SELECT path, error FROM documents WHERE "
                      "status = 'error'\"", highlight=False, markup=False)


def _run_index(settings: Settings, folder: Path, trigger: str, triples: Path | None = None, reembed: bool = False,
               runless: bool = False, replace_folder: bool = False, retry_failed: bool = False):
    # First the no-op check (index/pending_work.py: the run's own change detection, no Dagster, no LanceDB):
    # when nothing is new, changed, deleted or pending, the report is printed and no run is launched, as a
    # sensor tick that finds nothing launches none. Otherwise the index runs as the Dagster job
    # `index_folder`, in this process, recorded in the instance at PATHRAG_HOME/dagster: the UI shows every
    # CLI run that did something, with its materialisations (see assets/runs.py).
    # runless: the stages run without Dagster, and Dagster is imported only afterwards to record the run's
    # materialisations (same assets and metadata as the sensor gives runs made outside Dagster).
    # The home's index lock is held from the check to the end of the run (it is re-entrant), so a concurrent
    # writer can neither change what the check found nor slip in between; the one exception is a live Dagster
    # run holding the duckdb pool: its step takes the index lock next, so the lock is dropped while waiting for
    # it and the check is made again afterwards (assets/runs.py: pool_busy, wait_for_pool). A folder the run would refuse
    # (another than the home's, or empty or missing while the home holds documents: ingest/home_folder.py)
    # is refused by the check, before any run is launched, unless replace_folder (--replace).
    from dataclasses import replace

    settings = replace(settings, docs=folder)
    fresh = not settings.home.exists()
    try:
        while True:
            report = _index_once(settings, folder, trigger, triples, reembed, runless, replace_folder,
                                 retry_failed)
            if report is not None:
                return report
    except BaseException:
        if fresh:
            _drop_empty_home(settings.home)
        raise


def _drop_empty_home(home: Path) -> None:
    """A run refused before it wrote anything (a missing folder, say) leaves no home behind that this call
    created: only its lock file would be in it (issue 62)."""
    from pathrag_pipeline.storage.run_lock import LOCK_NAME

    try:
        if home.is_dir() and {p.name for p in home.iterdir()} <= {LOCK_NAME}:
            (home / LOCK_NAME).unlink(missing_ok=True)
            home.rmdir()
    except OSError:
        pass   # another process got there first: the home is theirs


def _index_once(settings: Settings, folder: Path, trigger: str, triples: Path | None, reembed: bool,
                runless: bool, replace_folder: bool, retry_failed: bool = False):
    """One attempt of ``_run_index``: None when a live Dagster run held the duckdb pool, after waiting for it
    outside the index lock (its step takes that lock next: waiting inside it would deadlock both)."""
    from pathrag_pipeline.storage.run_lock import index_lock

    with index_lock(settings.home):
        if triples is not None or reembed:
            from pathrag_pipeline.index.pending_work import check_folder

            check_folder(settings, folder, replace_folder=replace_folder)
        else:
            from pathrag_pipeline.index.pending_work import up_to_date_report

            report, _reasons = up_to_date_report(settings, folder, replace_folder=replace_folder,
                                                 retry_failed=retry_failed)
            if report is not None:
                _print_index(report, settings)
                console.print(f"Up to date, no run launched: nothing new, changed, deleted or pending in {esc(folder)} "
                              "(the last run's results stand; `pathrag dev` shows it)", highlight=False)
                return report
        if runless:
            from pathrag_pipeline.index.pipeline import run_indexing

            with console.status(f"indexing {esc(folder)} ..."):
                report = run_indexing(settings, folder=folder, trigger=trigger, triples=triples, reembed=reembed,
                                      replace_folder=replace_folder, retry_failed=retry_failed)
            from assets.runs import record_runless

            recorded = record_runless(settings, report)
            _print_index(report, settings)
            console.print(f"Recorded as {recorded} materialisations of run {report.sync.run_id} (no Dagster run; "
                          f"Dagster home {settings.dagster_home}; `pathrag dev` shows them on the asset pages)",
                          highlight=False)
            return report
        from assets.runs import index_folder, instance_for, pool_busy, wait_for_pool

        instance = instance_for(settings)
        try:
            busy = pool_busy(instance) is not None
            if not busy:
                with console.status(f"indexing {esc(folder)} ..."):
                    report = index_folder(settings, trigger=trigger, triples=triples, reembed=reembed,
                                          replace_folder=replace_folder, instance=instance,
                                          retry_failed=retry_failed)
        except BaseException:
            instance.dispose()
            raise
        if not busy:
            instance.dispose()
    if busy:
        try:
            wait_for_pool(instance)
        finally:
            instance.dispose()
        return None
    _print_index(report, settings)
    console.print(f"Dagster run {report.dagster_run_id} (Dagster home {settings.dagster_home}; `pathrag dev` shows it)",
                  highlight=False)
    return report


REPLACE_HELP = ("Index this folder in place of the one PATHRAG_HOME holds (its documents not found here are "
                "deleted), or an empty folder; refused without it. To keep both, use one PATHRAG_HOME per folder.")


@click.command()
@click.argument("path", type=click.Path(file_okay=False, path_type=Path))
@click.option("--triples", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Build the graph from this JSONL of {doc_id, subject, predicate, object} instead of extraction.")
@click.option("--reembed", is_flag=True,
              help="Embed everything again (after changing the embedding model), into a folder beside the vector "
                   "store that replaces it once every row is embedded: a re-embed that fails keeps the old vectors.")
@click.option("--runless", is_flag=True,
              help="Record the index in the Dagster instance as materialisations of its assets, not as a job run: "
                   "lighter (no job machinery, Dagster imported after the work).")
@click.option("--replace", "replace_folder", is_flag=True, help=REPLACE_HELP)
@click.option("--retry-failed", is_flag=True,
              help="Also extract the chunks that failed 3 runs in a row with this model and settings (left alone "
                   "otherwise until their text, the model or the LLM mode or output cap change).")
def index(path: Path, triples: Path | None, reembed: bool, runless: bool, replace_folder: bool,
          retry_failed: bool) -> None:
    """Index the documents under PATH: only new or changed files are processed, deleted ones are removed.

    A PATHRAG_HOME indexes one folder: another folder, or an empty one, is refused unless --replace."""
    settings = load_settings(docs=path.resolve())
    report = _run_index(settings, path.resolve(), "cli", triples=triples, reembed=reembed, runless=runless,
                        replace_folder=replace_folder, retry_failed=retry_failed)
    console.print(f"Stored in {settings.duckdb_path} and {settings.lancedb_location}. "
                  "Query it with: pathrag sql \"SELECT name, type FROM entities LIMIT 10\"", highlight=False, markup=False)
    unembedded = report.embeddings.failed if report is not None and report.embeddings is not None else 0
    if unembedded:
        # partial is partial (issue 61): the rows are kept and embedded by the next run, but this one did not finish
        raise click.ClickException(f"partial: {unembedded} row(s) were left unembedded (their batches failed, "
                                   "listed above); run `pathrag index` again to embed them")


@click.command()
@click.option("--replace", "replace_folder", is_flag=True,
              help="Index the sample in place of the folder PATHRAG_HOME holds (its documents are deleted); refused "
                   "without it. To keep both, set PATHRAG_HOME to a new folder for the sample.")
def quickstart(replace_folder: bool) -> None:
    """Index the bundled sample documents offline and show what was built and where.

    Refused when PATHRAG_HOME holds another folder: set PATHRAG_HOME to a new folder for the sample, or
    pass --replace."""
    from pathrag_pipeline.index.pipeline import describe_mode

    settings = load_settings(docs=SAMPLE_DOCS)
    console.print(f"[bold]PathRAG quickstart[/bold]: sample documents in {esc(SAMPLE_DOCS)}")
    mode = describe_mode(settings)
    console.print(f"mode: {mode['mode']} (extractor {mode['extractor']}, embeddings {mode['embedder']}, "
                  f"answers {mode['answers']})", highlight=False, markup=False)
    _run_index(settings, SAMPLE_DOCS, "quickstart", replace_folder=replace_folder)
    print_status(settings)
    from pathrag_pipeline.cli.ask import print_result
    from pathrag_pipeline.query.engine import PathRAG

    console.print(f"\n[bold]Sample question[/bold] (mode path): {esc(SAMPLE_QUESTION)}", highlight=False)
    print_result(PathRAG(settings, asked_from="pathrag quickstart").query(SAMPLE_QUESTION), console, max_paths=5)
    console.print(
        f"\nWhere things are: DuckDB {settings.duckdb_path}, LanceDB {settings.lancedb_location}, "
        f"Dagster home {settings.dagster_home}.\n"
        "Next: `pathrag ask \"...\" [--mode naive|local|global|hybrid|neuropath]`, "
        "`pathrag sql \"SELECT question, total_ms FROM queries\"`, `pathrag status`, or `pathrag dev` for the Dagster UI.",
        highlight=False, markup=False,
    )
