"""`pathrag ask QUESTION`: answer one question from the index, with the paths that support the answer.

Loaded by the root group when used. People get the answer, then the retained paths
(reliability, nodes, source documents); programs get ``--json`` (``QueryResult.to_json``).

Two lists of documents follow an answer and are labelled so they are not confused: "Cited:", what each [n] of the
answer quotes (the extractive answer's own "Sources:" line, said from ``QueryResult.citations``), and "Retrieved
documents:", the documents of every passage retrieval ranked, cited or not.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import click

from pathrag_pipeline.cli.common import query_process_threads
from pathrag_pipeline.config import ConfigError, Settings
from pathrag_pipeline.cli.query_settings import given_settings, not_read_by, query_setting_options
from pathrag_pipeline.query.params import MODES, SETTINGS
query_process_threads()


if TYPE_CHECKING:
    from rich.console import Console

    from pathrag_pipeline.query.results import QueryResult


def print_result(result: QueryResult, console: Console, max_paths: int | None = None) -> None:
    """The answer, its paths and where they come from, for people (``result`` may also be ``served_result``'s
    view of a query service's reply: the same attributes)."""
    from rich.table import Table

    from pathrag_pipeline.cli.common import esc, plain

    from pathrag_pipeline.query.params import EXTRACTIVE_LABEL

    changed = _changed_settings(result.mode, getattr(result, "params", None) or {})
    settings = f", with {', '.join(changed)}" if changed else ""
    console.print(f"[bold]Answer[/bold] ({esc(result.answer_kind)}, {esc(result.model)}, mode {esc(result.mode)}"
                  f"{esc(settings)}):", highlight=False)
    # the heading already says "extractive, offline": the stored answer's own label is not repeated under it
    answer = result.answer
    if answer.startswith(EXTRACTIVE_LABEL):
        answer = answer[len(EXTRACTIVE_LABEL):].lstrip()
    citations = getattr(result, "citations", None) or []   # (a service of older code replies without them)
    if citations:
        # the answer's closing "Sources:" line is said as "Cited:", from the citations, so it is never mistaken for
        # the retrieved documents' line below
        answer = answer.rpartition("\nSources: ")[0] or answer
    console.print(answer, highlight=False, markup=False)
    if citations:
        console.print("Cited: " + "; ".join(f"[{c['n']}] {c['source']}" for c in citations),
                      highlight=False, markup=False)
    if result.paths:
        pooled = (getattr(result, "params", None) or {}).get("path_pooling", "off") not in ("off", None)
        order = ("the tracker's best (deepest hop first)" if result.mode == "neuropath" else
                 "best by Path Pooling" if pooled else "most reliable")
        shown = len(result.paths[:max_paths])
        count = (f"showing {shown} of {len(result.paths)} kept" if shown < len(result.paths)
                 else f"{len(result.paths)} kept")
        caption = None
        if result.mode == "path":
            # reliability above 1 surprised users: say what the number is (PathRAG Eq. 4, query/pruning.py)
            caption = ("reliability: PathRAG's Eq. 4, the flow resource reaching the path's nodes (the start node "
                       "holds 1) per edge; higher is more reliable, compared within one question only")
        table = Table(title=plain(f"Paths (rank 1 = {order}; {count}; documents: the edges' sources first)"),
                      caption=caption, show_lines=False)
        for col in ("rank", "reliability", "hops", "nodes", "documents"):
            table.add_column(col, overflow="fold")
        for p in result.paths[:max_paths]:
            docs = ", ".join(p.document_ids[:3]) + (f" (+{len(p.document_ids) - 3} more)" if len(p.document_ids) > 3 else "")
            table.add_row(str(p.rank), f"{p.reliability:.4f}", str(p.hops), plain(" -> ".join(p.nodes)), plain(docs))
        console.print(table)
    elif result.mode == "path":
        seeds = getattr(result, "retrieved", None) or getattr(result, "retrieved_nodes", None)
        console.print("No relational path joins the retrieved entities." if seeds else
                      "No entity of the index stands out for this question's terms, so no path is shown.",
                      style="yellow")
    tracking = getattr(result, "tracking", None)
    if tracking is not None:
        hops = ", ".join(f"hop {h['hop']}: {h['shown']} shown, {len(h.get('valid', []))} valid, "
                         f"{h['calls']} calls, {h['prompt_tokens'] + h['completion_tokens']} tokens"
                         for h in tracking["hops"])
        console.print(f"NeuroPath tracker {tracking['tracker']} (stopped: {tracking['stop_reason']}); "
                      f"{hops or 'no hop'}", highlight=False, markup=False)
        if tracking.get("tracker_error"):
            console.print(f"The tracker's answer stayed invalid, so no path was tracked and the passages come from "
                          f"the completion retrieval alone: {tracking['tracker_error']}", highlight=False, markup=False)
    if result.document_ids:
        more = len(result.document_ids) - 10
        console.print("Retrieved documents: " + ", ".join(result.document_ids[:10]) + (f" (+{more} more)" if more > 0
                      else ""), highlight=False, markup=False)
    stages = ", ".join(f"{k} {v:.0f}" for k, v in result.timings_ms.items())
    console.print(f"[dim]query {esc(result.query_id)} | {result.total_ms:.0f} ms ({esc(stages)})[/dim]", highlight=False)


CHANGED_SHOWN = 6   # settings named in an answer's heading (the rest counted)


def _changed_settings(mode: str, params: dict[str, Any]) -> list[str]:
    """``name=value`` of each query setting of ``params`` (a result's, as logged) that differs from the mode's
    default, so two answers made with other settings (``--preset paper``, ``--set``) never carry the same heading."""
    from pathrag_pipeline.query.params import QueryParams, mode_params

    def plain(value: Any) -> Any:
        return list(value) if isinstance(value, (list, tuple)) else value

    defaults = mode_params(mode, QueryParams().resolved())
    changed = [f"{name}={'+'.join(map(str, value)) if isinstance(value, list) else value}"
               for name, value in ((n, plain(v)) for n, v in params.items())
               if name in defaults and value != plain(defaults[name])]
    if len(changed) > CHANGED_SHOWN:
        changed = changed[:CHANGED_SHOWN] + [f"{len(changed) - CHANGED_SHOWN} more setting(s)"]
    return changed


def served_result(data: dict[str, Any]) -> SimpleNamespace:
    """A query service's reply (``QueryResult.to_dict()``) with the attributes ``print_result`` reads, without
    importing the engine (the point of asking the service is not paying its imports)."""
    return SimpleNamespace(**{**data, "paths": [SimpleNamespace(**p) for p in data.get("paths", [])],
                              "tracking": data.get("tracking"), "error": data.get("error")})


def _ask_service(settings: Settings, question: str, mode: str, options: dict[str, Any],
                 as_json: bool) -> bool:
    """Answer through the home's query service (``pathrag serve``) if one runs with these settings; False when
    the caller must answer itself (one stderr line says why when a service exists but cannot be used)."""
    from pathrag_pipeline.query import service_client

    try:
        data = service_client.ask(settings, question, mode, options)
    except service_client.ServiceUnavailable as exc:
        if not exc.quiet:
            click.echo(f"{exc}; answering in this process", err=True)
        return False
    except service_client.ServiceError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(data, indent=1, ensure_ascii=False))
    else:
        from pathrag_pipeline.cli.terminal import make_console

        console = make_console()
        print_result(served_result(data), console)
        console.print("[dim]answered by the query service (`pathrag serve`); --local answers in this process[/dim]",
                      highlight=False)
    if data.get("error"):
        raise click.ClickException(f"query {data['query_id']} failed: {data['error']}")
    return True


@click.command()
@click.argument("question", required=False)
@click.option("--mode", type=click.Choice(MODES), default="path", show_default=True,
              help="path = PathRAG; neuropath = NeuroPath path tracking; naive/local/global/hybrid = LightRAG baselines.")
@click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON.")
@click.option("--html", "html_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the answer as one self-contained page: its paths drawn, its passages quoted.")
@click.option("--show", "show_id", metavar="QUERY_ID", default=None,
              help="Draw a logged ask (its query id) instead of asking: with --html FILE.")
@query_setting_options
@click.option("--local", is_flag=True,
              help="Answer in this process even when a query service (`pathrag serve`) runs for the home.")
def ask(question: str | None, mode: str, as_json: bool, html_file: Path | None, show_id: str | None, local: bool,
        **values: Any) -> None:
    """Answer QUESTION from the index; the query is logged in the queries/path_traces tables.

    When `pathrag serve` runs for the home with the same settings, the question goes to it (no start-up cost);
    run at a terminal, an ask answered here starts one in the background for the next (PATHRAG_AUTO_SERVE).
    Every query setting is declared once (docs/configuration.md): the common ones are options below, any other
    is `--set NAME=VALUE` (`--settings` lists them). `--html FILE` writes the answer as a page (answered in this
    process); `--show QUERY_ID --html FILE` draws an ask from the log."""
    if show_id is not None:
        if question or html_file is None:
            raise click.UsageError("--show QUERY_ID draws a logged ask: give --html FILE and no question")
        _write_page(Settings.from_env(), html_file, query_id=show_id)
        return
    if question is None:
        raise click.UsageError('give a QUESTION, e.g. pathrag ask "Who founded Aldermere University?"')
    if values.get("preset") is not None and mode != "path":
        raise click.UsageError(f"--preset {values['preset']} is a path-mode method; drop --mode {mode} or the preset")
    options = given_settings(values)
    wrong = not_read_by(mode, options)
    if wrong:
        scopes = sorted({SETTINGS[o[2:].replace("-", "_")].scope for o in wrong})
        raise click.UsageError(f"{', '.join(wrong)} shape {'/'.join(scopes)} mode only (its pruning, prompt or "
                               f"tracking); drop them or use --mode {scopes[0]}")
    if not question.strip():
        raise click.UsageError('the question is empty: give it in quotes, e.g. pathrag ask "How do I enable '
                               'logging?" (any question about your documents)')
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    if not local and html_file is None and _ask_service(settings, question, mode, options, as_json):
        return
    from pathrag_pipeline.llm.client import LLMError
    from pathrag_pipeline.query.engine import PathRAG
    from pathrag_pipeline.query.graph_cache import EmptyGraphError
    from pathrag_pipeline.storage.store import StoreLockedError

    try:
        result = PathRAG(settings, asked_from="pathrag ask").query(question, mode, **options)
    except (ConfigError, EmptyGraphError, LLMError, ValueError, FileNotFoundError, StoreLockedError) as exc:
        raise click.ClickException(str(exc)) from None
    # the page first: printing the answer to a pipe that closes early (`| head`) ends the command, and the page
    # must not be lost with it; a page that cannot be written is said after the answer
    page_error = None
    if html_file is not None:
        try:
            _write_page(settings, html_file, result=result)
        except click.ClickException as exc:
            page_error = exc
    if as_json:
        click.echo(result.to_json(indent=1))
    else:
        from pathrag_pipeline.cli.terminal import make_console

        print_result(result, make_console())
    if page_error is not None:
        raise page_error
    _say_what_is_missing(settings)
    if result.error:
        raise click.ClickException(f"query {result.query_id} failed: {result.error}")
    if not local:
        from pathrag_pipeline.cli.background_service import start_for_next_command

        start_for_next_command(settings)


def _write_page(settings: Settings, path: Path, *, result: QueryResult | None = None,
                query_id: str | None = None) -> None:
    """The answer page (query/answer_page.py) of ``result``, or of the logged ask ``query_id``, written to ``path``."""
    from pathrag_pipeline.query.answer_page import UnknownQuery, render, view_of_logged, view_of_result
    from pathrag_pipeline.storage.store import Store

    store = Store.for_settings(settings)
    if not store.path.exists():
        raise click.ClickException(f"no index in {settings.home}: run `pathrag index FOLDER` first")
    with store.connect(read_only=True) as con:
        try:
            view = view_of_result(result, con) if result is not None else view_of_logged(con, str(query_id))
        except UnknownQuery as exc:
            raise click.ClickException(str(exc)) from None
    try:
        path.write_text(render(view), encoding="utf-8")
    except OSError as exc:
        raise click.ClickException(f"cannot write the page to {path}: {exc.strerror or exc}") from None
    click.echo(f"page written: {path} (open it in a browser; it needs no network)", err=True)


def _say_what_is_missing(settings: Settings) -> None:
    """On stderr, when the last index run left rows without vectors: the answer came from the rest."""
    from pathrag_pipeline.index.embedding_stage import unembedded_note, unembedded_rows
    from pathrag_pipeline.storage.store import Store, StoreLockedError

    try:
        with Store.for_settings(settings).connect(read_only=True) as con:
            note = unembedded_note(unembedded_rows(con))
    except StoreLockedError:
        return   # an index run writes the file now: it is the one that will say
    if note:
        click.echo(f"note: {note}; this answer comes from the rest", err=True)
