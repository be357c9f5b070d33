"""`pathrag index PATH` and `pathrag quickstart`: run the indexing pipeline and report what it built."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import click

from pathrag_pipeline.cli.common import esc, load_settings, print_table
from pathrag_pipeline.config import SAMPLE_DOCS, Settings

# Question 1 of data/sample_questions.md: its answer (River Lode) needs three documents in two formats.
SAMPLE_QUESTION = ("On which river lies the birthplace of the first director of the "
                   "Pellingham Institute of Hydrology?")


WARNINGS_SHOWN = 10
LINKED_SHOWN = 5   # linked folders named in the report (the count is always complete)


def _print_sync(report, out) -> None:
    plan = report.plan
    print_table(
        ["files", "new", "changed", "same", "deleted", "failed", "docs written", "docs deleted", "chunks written",
         "ingest s"],
        [(len(plan.new) + len(plan.changed) + len(plan.unchanged), len(plan.new), len(plan.changed),
          len(plan.unchanged), len(plan.deleted), len(report.failed), report.documents_written,
          report.documents_deleted, report.chunks_written, f"{report.seconds:.2f}")],
        title=f"Indexed {report.folder}", out=out,
    )
    for failed in report.failed:
        for err in failed.errors:
            out.print(f"[yellow]{esc(failed.status)}[/yellow] {esc(failed.rel_path)}: {esc(err)}", highlight=False)
    warnings = report.warnings
    for warning in warnings[:WARNINGS_SHOWN]:
        out.print(f"[yellow]warning[/yellow] {esc(warning)}", highlight=False)
    if len(warnings) > WARNINGS_SHOWN:
        out.print(f"[yellow]and {len(warnings) - WARNINGS_SHOWN} more warning(s)[/yellow]: pathrag sql \"SELECT "
                      "path, warning FROM documents WHERE warning IS NOT NULL\"", highlight=False)
    if report.unsupported_count:
        from pathrag_pipeline.ingest.parsing import SUPPORTED_SAID

        more = report.unsupported_count - len(report.unsupported)
        names = ", ".join(report.unsupported) + (f" and {more} more" if more > 0 else "")
        out.print(f"[yellow]skipped {report.unsupported_count} unsupported file(s)[/yellow] "
                      f"(supported: {SUPPORTED_SAID}): {esc(names)}", highlight=False)
    if report.ignored_files or report.ignored_folders:
        from pathrag_pipeline.ingest.ignore_file import IGNORE_FILE

        folders = f" and {report.ignored_folders} folder(s)" if report.ignored_folders else ""
        out.print(f"ignored {report.ignored_files} file(s){folders} listed in {IGNORE_FILE}", highlight=False)
    if report.linked_dirs:
        shown = ", ".join(report.linked_dirs[:LINKED_SHOWN])
        more = len(report.linked_dirs) - LINKED_SHOWN
        out.print(f"[yellow]skipped {len(report.linked_dirs)} linked folder(s)[/yellow], symlinks that are not "
                  f"followed (one could lead outside the folder, or back into it): {esc(shown)}"
                  f"{f' and {more} more' if more > 0 else ''}; copy the folder in, or index its target",
                  highlight=False)
    from pathrag_pipeline.ingest.page_sources import sources_of_deleted_pages

    uncovered = sources_of_deleted_pages(report.plan.new, report.plan.deleted)
    if uncovered:
        source, page = next(iter(sorted(uncovered.items())))
        out.print(f"indexed {len(uncovered)} source file(s) of pages deleted in this run, skipped while their page "
                  f"was there (e.g. {esc(source)}, the source of {esc(page)}); to drop the page for good, delete its "
                  "source too or list it in .pathragignore", highlight=False)
    if report.page_sources:
        source, page = next(iter(report.page_sources.items()))
        out.print(f"skipped {len(report.page_sources)} source file(s) of rendered pages, whose page is indexed "
                      f"instead (e.g. {esc(source)}, the source of {esc(page)})", highlight=False)


def _print_index(report, settings: Settings, out) -> None:
    _print_sync(report.sync, out)
    if not report.sync.plan.new and not report.sync.plan.changed and not report.sync.plan.unchanged:
        from pathrag_pipeline.ingest.parsing import SUPPORTED_SAID

        out.print(f"[yellow]no supported files found in {esc(report.sync.folder)}[/yellow] "
                      f"(supported: {SUPPORTED_SAID})", highlight=False)
    mode = report.mode
    out.print(f"mode: {mode['mode']} | extractor {mode['extractor']} | embeddings {mode['embedder']}",
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
            out.print(f"[yellow]{x.failed} chunk(s) failed[/yellow] (each one's line is above; all of them: "
                          "pathrag sql \"SELECT chunk_id, error FROM extractions WHERE status = 'failed'\")",
                          highlight=False)
    if report.triples is not None:
        t = report.triples
        rows.append(("triples import", f"{t.triples} triples, {t.matched_documents} documents matched, "
                                       f"{t.records_written} records written, {t.malformed} malformed lines"))
    a = report.aliases
    rows.append(("aliases", "as the last run left them (no name changed since)" if a is None else
                 f"{a.candidates} near-duplicate names found, {a.new_aliases} new aliases, "
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
    print_table(["stage", "result"], rows, out=out)
    if report.seconds is not None:
        parts = dict(report.stage_seconds)
        # the rest: Dagster's job set-up and run records, the lock and pool waits, the report's own counts
        parts["the run around them"] = max(0.0, report.seconds - sum(parts.values()))
        stages = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in parts.items())
        out.print(f"time: {report.seconds:.1f} s in all ({stages})", highlight=False, markup=False)
    for err in report.embeddings.errors:
        out.print(f"embedding batch failed: {err}", highlight=False, markup=False)
    _print_earlier_failures(report, out)


def _print_earlier_failures(report, out) -> None:
    """Files still in error from an earlier run (unchanged since, so this run did not list them): a failure
    is said on every run until the file is fixed or removed, not only on the run that met it."""
    listed = {f.rel_path for f in report.sync.failed}
    # read with the report's graph counts (pipeline.documents_in_error): no DuckDB open of its own
    earlier = [(path, error) for path, error in report.in_error if path not in listed]
    if not earlier:
        return
    out.print(f"[yellow]{len(earlier)} file(s) still in error from an earlier run[/yellow] (unchanged since; "
                  "fix or remove them):", highlight=False)
    for path, error in earlier[:10]:
        out.print(f"  {esc(path)}: {esc(' '.join(str(error or '').split())[:200])}", highlight=False)
    if len(earlier) > 10:
        out.print(f"  and {len(earlier) - 10} more: pathrag sql \"SELECT path, error FROM documents WHERE "
                      "status = 'error'\"", highlight=False, markup=False)


def _run_index(settings: Settings, folder: Path, trigger: str, triples: Path | None = None, reembed: bool = False,
               runless: bool = False, replace_folder: bool = False, retry_failed: bool = False, *, out=None,
               instance=None):
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
                                 retry_failed, out=out if out is not None else _console(), instance=instance)
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
                runless: bool, replace_folder: bool, retry_failed: bool = False, *, out, instance=None):
    """One attempt of ``_run_index``: None when a live Dagster run held the duckdb pool, after waiting for it
    outside the index lock (its step takes that lock next: waiting inside it would deadlock both). ``out``: the
    console the report is printed to; ``instance``: a Dagster instance the caller keeps (the query service's),
    else one is opened and disposed of here."""
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
                _print_index(report, settings, out)
                out.print(f"Up to date, no run launched: nothing new, changed, deleted or pending in {esc(folder)} "
                              "(the last run's results stand; `pathrag dev` shows it)", highlight=False)
                return report
        if runless:
            from pathrag_pipeline.index.pipeline import run_indexing

            with _status(out, f"indexing {esc(folder)} ..."):
                report = run_indexing(settings, folder=folder, trigger=trigger, triples=triples, reembed=reembed,
                                      replace_folder=replace_folder, retry_failed=retry_failed)
            from assets.runs import record_runless

            recorded = record_runless(settings, report)
            _print_index(report, settings, out)
            out.print(f"Recorded as {recorded} materialisations of run {report.sync.run_id} (no Dagster run; "
                          f"Dagster home {settings.dagster_home}; `pathrag dev` shows them on the asset pages)",
                          highlight=False)
            return report
        from assets.runs import index_folder, instance_for, pool_busy, wait_for_pool

        own = instance is None
        instance = instance if instance is not None else instance_for(settings)
        try:
            busy = pool_busy(instance) is not None
            if not busy:
                with _status(out, f"indexing {esc(folder)} ..."):
                    report = index_folder(settings, trigger=trigger, triples=triples, reembed=reembed,
                                          replace_folder=replace_folder, instance=instance,
                                          retry_failed=retry_failed)
        except BaseException:
            if own:
                instance.dispose()
            raise
        if not busy and own:
            instance.dispose()
    if busy:
        try:
            wait_for_pool(instance)
        finally:
            if own:
                instance.dispose()
        return None
    _print_index(report, settings, out)
    out.print(f"Dagster run {report.dagster_run_id} (Dagster home {settings.dagster_home}; `pathrag dev` shows it)",
                  highlight=False)
    return report


def _console():
    from pathrag_pipeline.cli.common import console

    return console


def _status(out, text: str):
    """The spinner while a run works, on the terminal's own console only: the query service renders its report
    into text for the caller, where a spinner's frames would be written out too."""
    import contextlib

    return out.status(text) if out is _console() else contextlib.nullcontext()


class ServiceIndexer:
    """`pathrag index` run inside the home's query service (`pathrag serve`), which ``pathrag index`` hands its
    run to when one runs with the same settings (``POST /index``, ``query/service.py``).

    Why: a one-file edit in a new process spent about 7 of its 9.5 s before and around the work (imports of
    Dagster, openai and LanceDB, the Dagster instance, DuckDB's first opens), and the same edit in a process
    that had them took 2.9 s (issue 64). The run is the same Dagster run (`index_folder`, trigger ``cli``) with
    the same no-op check, lock and report; the service keeps one Dagster instance for its runs and renders the
    report as the CLI would print it, for the caller's terminal (width, colour). One run at a time; asks keep
    being answered meanwhile (they wait for the file only while the run writes it, as they would from another
    process)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._instance = None

    def warm(self) -> None:
        """Import the job and the model client and open the instance before the first request (the service calls
        this in a thread after it starts answering asks): the first edit otherwise paid them, 6.8 s against 3.5.
        The first run still pays the rest of its first use (Dagster's, LanceDB's, pydantic's schemas): about a
        second more than the next ones at 200 files (issue 64)."""
        with self._lock:
            self._kept_instance()
            from pathrag_pipeline.llm.client import llm_from_settings

            llm = llm_from_settings(self.settings)
            if llm is not None:
                llm.prepare()   # openai, instructor and its provider code: 0.3-1 s of a first run otherwise
            from pathrag_pipeline.slim_imports import import_lancedb

            import_lancedb()   # the vector stage's: ~1 s of a first run otherwise (an offline service imports it to warm)

    def _kept_instance(self):
        if self._instance is None:
            from assets.runs import instance_for

            self._instance = instance_for(self.settings)
        return self._instance

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        from io import StringIO

        from rich.console import Console

        from pathrag_pipeline.cli.lazy import expected_failure
        from pathrag_pipeline.errors import PipelineError

        folder = Path(str(request["folder"]))
        color = bool(request.get("color"))
        try:
            width = max(40, min(int(request.get("width") or 200), 1000))
        except (TypeError, ValueError):
            raise PipelineError(f"width {request.get('width')!r} is not a number of columns") from None
        buffer = StringIO()
        out = Console(file=buffer, width=width, force_terminal=color, color_system="standard" if color else None,
                      highlight=False)
        with self._lock:
            try:
                report = _run_index(self.settings, folder, "cli", replace_folder=bool(request.get("replace")),
                                    retry_failed=bool(request.get("retry_failed")), out=out,
                                    instance=self._kept_instance())
            except Exception as exc:
                message = expected_failure(exc)
                if message is not None:   # the caller prints it as its own one-line error
                    raise PipelineError(message) from None
                if self._instance is not None:   # a broken instance is not kept for the next run
                    self._instance.dispose()
                    self._instance = None
                raise
        return {"printed": buffer.getvalue(), "unembedded": _unembedded(report),
                "dagster_run_id": getattr(report, "dagster_run_id", None)}

    def close(self) -> None:
        with self._lock:
            if self._instance is not None:
                self._instance.dispose()
                self._instance = None


def _unembedded(report) -> int:
    return report.embeddings.failed if report is not None and report.embeddings is not None else 0


def _index_in_service(settings: Settings, folder: Path, replace_folder: bool, retry_failed: bool) -> dict | None:
    """The reply of the home's query service after it ran this index (``ServiceIndexer``), or None when the caller
    must run it itself: no service, one with other settings (one stderr line says so) or one that cannot index."""
    import os
    import shutil

    from pathrag_pipeline.cli.terminal import PIPED_WIDTH
    from pathrag_pipeline.query import service_client

    tty = sys.stdout.isatty()
    request = {"folder": str(folder), "replace": replace_folder, "retry_failed": retry_failed,
               "width": shutil.get_terminal_size().columns if tty else PIPED_WIDTH,
               "color": tty and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"}
    try:
        return service_client.index(settings, request)
    except service_client.ServiceUnavailable as exc:
        if not exc.quiet:
            click.echo(f"{exc}; indexing in this process", err=True)
        return None
    except service_client.ServiceError as exc:
        if str(exc).startswith("no /index"):   # a service started before it could index
            return None
        raise click.ClickException(str(exc)) from None


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
@click.option("--local", is_flag=True,
              help="Index in this process even when a query service (`pathrag serve`) runs for the home.")
def index(path: Path, triples: Path | None, reembed: bool, runless: bool, replace_folder: bool,
          retry_failed: bool, local: bool) -> None:
    """Index the documents under PATH: only new or changed files are processed, deleted ones are removed.

    A PATHRAG_HOME indexes one folder: another folder, or an empty one, is refused unless --replace. When a
    query service (`pathrag serve`) runs for the home with the same settings, it runs the index (the same
    Dagster run, without this process's start-up); --local, --runless, --triples and --reembed run it here.
    Run at a terminal, it then starts one in the background for the next command (PATHRAG_AUTO_SERVE)."""
    settings = load_settings(docs=path.resolve())
    served = None
    plain = not (local or runless or triples or reembed)   # what a service can run for this process
    if plain:
        served = _index_in_service(settings, path.resolve(), replace_folder, retry_failed)
    if served is not None:
        sys.stdout.write(served["printed"])
        sys.stdout.flush()
        click.echo("indexed by the query service (`pathrag serve`); --local indexes in this process", err=True)
        unembedded = int(served.get("unembedded") or 0)
    else:
        report = _run_index(settings, path.resolve(), "cli", triples=triples, reembed=reembed, runless=runless,
                            replace_folder=replace_folder, retry_failed=retry_failed)
        unembedded = _unembedded(report)
    click.echo(f"Stored in {settings.duckdb_path} and {settings.lancedb_location}. "
               "Query it with: pathrag sql \"SELECT name, type FROM entities LIMIT 10\"")
    if plain and served is None:
        from pathrag_pipeline.cli.background_service import start_for_next_command

        start_for_next_command(settings)
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
    from pathrag_pipeline.cli.inspect import print_status
    from pathrag_pipeline.index.pipeline import describe_mode

    console = _console()
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
