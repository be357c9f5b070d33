"""`pathrag ask QUESTION`: answer one question from the index, with the paths that support the answer.

Loaded by the root group when used. People get the answer, then the retained paths
(reliability, nodes, source documents); programs get ``--json`` (``QueryResult.to_json``).
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from pathrag_pipeline.cli.common import query_process_threads
from pathrag_pipeline.config import ConfigError, Settings
from pathrag_pipeline.query.params import (
    DEFAULT_NP_CANDIDATES,
    DEFAULT_NP_COREF_THRESHOLD,
    DEFAULT_NP_MAX_HOPS,
    DEFAULT_NP_TOKEN_BUDGET,
    DEFAULT_TOKEN_BUDGET,
    DEFAULT_TOP_N,
    MODES,
    NP_VARIANTS,
    ORDERINGS,
    PASSAGE_ORDERS,
    PATH_POOLINGS,
    PATH_SEEDS,
    POOL_VARIANTS,
    PRESETS,
    PROMPT_STYLES,
    SEED_QUERIES,
    VARIANTS,
    QueryParams,
)
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

    console.print(f"[bold]Answer[/bold] ({esc(result.answer_kind)}, {esc(result.model)}, mode {esc(result.mode)}):",
                  highlight=False)
    # the heading already says "extractive, offline": the stored answer's own label is not repeated under it
    answer = result.answer
    if answer.startswith(EXTRACTIVE_LABEL):
        answer = answer[len(EXTRACTIVE_LABEL):].lstrip()
    console.print(answer, highlight=False, markup=False)
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
        console.print("Sources: " + ", ".join(result.document_ids[:10]), highlight=False, markup=False)
    stages = ", ".join(f"{k} {v:.0f}" for k, v in result.timings_ms.items())
    console.print(f"[dim]query {esc(result.query_id)} | {result.total_ms:.0f} ms ({esc(stages)})[/dim]", highlight=False)


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
        data = service_client.ask(settings.home, settings.public(), question, mode, options)
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


# the ask options whose click parameter is named otherwise than the QueryParams field
_PARAM_NAMES = {"prompt": "prompt_style"}


@click.command()
@click.argument("question")
@click.option("--mode", type=click.Choice(MODES), default="path", show_default=True,
              help="path = PathRAG; neuropath = NeuroPath path tracking; naive/local/global/hybrid = LightRAG baselines.")
@click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON.")
@click.option("--top-n", type=click.IntRange(min=1), default=DEFAULT_TOP_N, show_default=True,
              help="Entity nodes retrieved from the keywords.")
@click.option("--top-k", type=click.IntRange(min=1), default=15, show_default=True, help="Paths kept after pruning.")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True), default=0.8, show_default=True,
              help="Decay rate of the resource flow.")
@click.option("--theta", type=click.FloatRange(0, 1), default=None,
              help="Early-stop threshold (default: 0.05 paper, 0.3 reference).")
@click.option("--max-hops", type=click.IntRange(min=1), default=None,
              help="Longest path in edges (default: 4 paper, 3 reference).")
@click.option("--variant", type=click.Choice(VARIANTS), default="paper", show_default=True,
              help="paper = the paper's pruning (theta 0.05, up to 4 hops); reference = the authors' public code "
                   "(theta 0.3, up to 3 hops, its own path order).")
@click.option("--ordering", type=click.Choice(ORDERINGS), default="reliability", show_default=True,
              help="How kept paths are ranked (the others are the paper's ablations).")
@click.option("--prompt", "prompt_style", type=click.Choice(PROMPT_STYLES), default=QueryParams.prompt,
              show_default=True,
              help="Path mode's answer-prompt layout: passages_paths = the top-ranked passages, then only the 5 "
                   "most reliable paths (PathRAG-lt's K; chosen by answer F1, docs/methods.md); paths_passages = "
                   "the passages, then every kept path in ascending reliability (5:4 budget split as the public "
                   "code); passages_last = the same paths, then the passages best last; paths = the paper's (paths "
                   "only); public = the public code's entities + paths + sources; passages = passages only "
                   "(ablation); flat = deduplicated nodes and edges without path structure (the paper's ablation).")
@click.option("--passage-order", type=click.Choice(PASSAGE_ORDERS), default=QueryParams.passage_order,
              show_default=True,
              help="Order of the passages a path prompt quotes: rank = the ranker's; question = most similar to "
                   "the question first (which passages is the ranker's choice either way).")
@click.option("--token-budget", type=click.IntRange(min=200), default=DEFAULT_TOKEN_BUDGET, show_default=True,
              help="Tokens of retrieved context in the answer prompt; the least reliable paths are dropped first.")
@click.option("--excerpts", is_flag=True, help="Quote source sentences under each path in the prompt.")
@click.option("--path-seeds", type=click.Choice(PATH_SEEDS), default=QueryParams.path_seeds, show_default=True,
              help="Between which seeds the paths are pruned: all = the top-N (the paper); standing = only the "
                   "seeds that stand out of their keyword's background (the passages are ranked from all N).")
@click.option("--seed-query", type=click.Choice(SEED_QUERIES), default=QueryParams.seed_query, show_default=True,
              help="How the keywords find the seed entities: each = one search per keyword, merged round-robin; "
                   "joined = one search for the keywords joined, as the public PathRAG code does.")
@click.option("--path-pooling", type=click.Choice(PATH_POOLINGS), default="off", show_default=True,
              help="Path Pooling (Wang et al. 2025) of path mode's paths: rerank them, or reselect the top-k from a "
                   "larger pruned pool, by pooled relation scores.")
@click.option("--pool-variant", type=click.Choice(POOL_VARIANTS), default=QueryParams.pool_variant, show_default=True,
              help="With --path-pooling: our smoothing formula, or the paper's Algorithm 1 (query/path_pooling.py).")
@click.option("--np-max-hops", type=click.IntRange(1, 10), default=DEFAULT_NP_MAX_HOPS, show_default=True,
              help="neuropath: hop cap of path tracking.")
@click.option("--np-candidates", type=click.IntRange(1, 500), default=DEFAULT_NP_CANDIDATES, show_default=True,
              help="neuropath: candidate paths per hop shown to the tracker.")
@click.option("--np-token-budget", type=click.IntRange(min=1), default=DEFAULT_NP_TOKEN_BUDGET, show_default=True,
              help="neuropath: LLM tokens for keywords and tracking of one query.")
@click.option("--np-coref-threshold", type=click.FloatRange(0, 1, min_open=True), default=DEFAULT_NP_COREF_THRESHOLD,
              show_default=True, help="neuropath: name-embedding similarity of coreferent entities.")
@click.option("--np-variant", type=click.Choice(NP_VARIANTS), default=QueryParams.np_variant, show_default=True,
              help="neuropath: the paper's method (per-hop coreference, re-judged paths, whole-path pruning, "
                   "union with a dense completion, its prompts) or our earlier variant.")
@click.option("--preset", type=click.Choice(sorted(PRESETS)), default=None,
              help="A paper's method end to end: 'paper' is PathRAG as published (paths-only prompt, the paths' own "
                   "passages, none of our tuned departures). Options given beside it win.")
@click.option("--local", is_flag=True,
              help="Answer in this process even when a query service (`pathrag serve`) runs for the home.")
def ask(question: str, mode: str, as_json: bool, top_n: int, top_k: int, alpha: float, theta: float | None,
        max_hops: int | None, variant: str, ordering: str, prompt_style: str, passage_order: str,
        token_budget: int, excerpts: bool, path_seeds: str, seed_query: str, path_pooling: str, pool_variant: str,
        np_max_hops: int, np_candidates: int, np_token_budget: int, np_coref_threshold: float, np_variant: str,
        preset: str | None, local: bool) -> None:
    """Answer QUESTION from the index; the query is logged in the queries/path_traces tables.

    When `pathrag serve` runs for the home with the same settings, the question goes to it (no start-up cost)."""
    path_only = {"--variant": variant != "paper", "--ordering": ordering != "reliability",
                 "--prompt": prompt_style != QueryParams.prompt,
                 "--passage-order": passage_order != QueryParams.passage_order, "--theta": theta is not None, "--max-hops": max_hops is not None,
                 "--path-seeds": path_seeds != QueryParams.path_seeds, "--seed-query": seed_query != QueryParams.seed_query,
                 "--path-pooling": path_pooling != "off", "--pool-variant": pool_variant != QueryParams.pool_variant}
    if mode != "path" and any(path_only.values()):
        given = ", ".join(name for name, set_ in path_only.items() if set_)
        raise click.UsageError(f"{given} shape path mode only (its pruning and prompt); drop them or use --mode path")
    if not question.strip():
        raise click.UsageError('the question is empty; e.g. pathrag ask "Who founded Aldermere University?"')
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    options = dict(top_n=top_n, top_k=top_k, alpha=alpha, theta=theta, max_hops=max_hops, variant=variant,
                   ordering=ordering, prompt=prompt_style, passage_order=passage_order, token_budget=token_budget,
                   excerpts=excerpts, path_seeds=path_seeds, seed_query=seed_query,
                   path_pooling=path_pooling, pool_variant=pool_variant, np_max_hops=np_max_hops,
                   np_candidates=np_candidates, np_token_budget=np_token_budget,
                   np_coref_threshold=np_coref_threshold, np_variant=np_variant)
    if preset is not None:
        if mode != "path":
            raise click.UsageError(f"--preset {preset} is a path-mode method; drop --mode {mode} or the preset")
        ctx = click.get_current_context()
        given = {name for name in options
                 if ctx.get_parameter_source(_PARAM_NAMES.get(name, name)) == ParameterSource.COMMANDLINE}
        options.update({k: (list(v) if isinstance(v, tuple) else v)
                        for k, v in PRESETS[preset].items() if k not in given})
    if not local and _ask_service(settings, question, mode, options, as_json):
        return
    from pathrag_pipeline.llm.client import LLMError
    from pathrag_pipeline.query.engine import PathRAG
    from pathrag_pipeline.query.graph_cache import EmptyGraphError
    from pathrag_pipeline.storage.store import StoreLockedError

    try:
        result = PathRAG(settings).query(question, mode, **options)
    except (ConfigError, EmptyGraphError, LLMError, ValueError, FileNotFoundError, StoreLockedError) as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(result.to_json(indent=1))
    else:
        from pathrag_pipeline.cli.terminal import make_console

        print_result(result, make_console())
    _say_what_is_missing(settings)
    if result.error:
        raise click.ClickException(f"query {result.query_id} failed: {result.error}")


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
