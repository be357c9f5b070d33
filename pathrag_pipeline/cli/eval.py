"""`pathrag eval retrieval` and `pathrag eval winrate`: measure retrieval recall and pairwise answer quality.

Loaded by the root group when used. People get tables; programs get ``--json``. Every
run is also stored (eval_runs/eval_results/eval_questions, winrate_runs/winrate_results/winrate_verdicts).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from pathrag_pipeline.cli.common import esc, plain
from pathrag_pipeline.config import ConfigError, Settings
from pathrag_pipeline.evaluation.bootstrap import RESAMPLES, SEED
from pathrag_pipeline.evaluation.retrieval_eval import (
    ABLATIONS,
    DEFAULT_KS,
    EVAL_MODES,
    GRAPH_SOURCES,
    SAME_OFFLINE,
    MEAN_KEY,
    REFERENCE_RECALL,
    DatasetError,
    RetrievalEvaluation,
    evaluate_retrieval,
    offline_note,
    parse_csv,
    default_workdir,
    load_dataset,
    parse_ks,
    prepare_index,
    save_evaluation,
)
from pathrag_pipeline.query.graph_cache import EmptyGraphError
from pathrag_pipeline.evaluation.judging import (
    JudgingError,
    WinRateRun,
    answer_modes,
    pair_modes,
    judge_pairs,
    load_answers,
    load_eval_questions,
    match_answers,
    no_judge_message,
    save_winrate,
)
from pathrag_pipeline.llm.client import LLMError, llm_from_settings
from pathrag_pipeline.evaluation.prompt_context import DEFAULT_BUDGETS, parse_budgets
from pathrag_pipeline.cli.query_settings import click_type
from pathrag_pipeline.query.params import MODES, SETTINGS, VARIANTS, QueryParams
from pathrag_pipeline.storage.store import Store, StoreLockedError
from pathrag_pipeline.cli.terminal import make_console

_EXPECTED = (ConfigError, DatasetError, JudgingError, EmptyGraphError, LLMError, ValueError, FileNotFoundError,
             StoreLockedError)


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)


@click.group(name="eval")
def eval_group() -> None:
    """Evaluate retrieval (recall@k on a QA dataset), answers (exact match, token F1) and LLM-judged win rates."""


# ---- retrieval ----------------------------------------------------------------------------------

def settings_embedder_semantic() -> bool:
    from pathrag_pipeline.llm.embedding import embedder_from_settings
    from pathrag_pipeline.query.retrieval import is_semantic

    return is_semantic(embedder_from_settings(Settings.from_env()))


def _default_modes(semantic: bool) -> list[str]:
    from pathrag_pipeline.evaluation.retrieval_eval import default_modes

    return default_modes(semantic)


_OUTCOME_STYLE = {"beats": "green", "trails": "red", "ties": ""}


def _delta_cell(interval) -> str:
    """'+0.128 [+0.071, +0.186]', green when the interval lies above zero, red below, plain when it ties."""
    style = _OUTCOME_STYLE[interval.outcome]
    return f"[{style}]{interval.format()}[/{style}]" if style else interval.format()


def _print_retrieval(e: RetrievalEvaluation, console: Console, limit: int | None = None) -> None:
    keys = [f"recall@{k}" for k in e.ks]
    embedder = e.embedder_runtime or e.index.get("embedder")
    table = Table(title=plain(f"Recall on {e.dataset} ({e.questions} questions; graph: {e.graph} ({e.index.get('extractor')}), "
                              f"embedder: {embedder}, llm: {e.llm})"))
    table.add_column("mode")
    for key in keys:
        table.add_column(key.replace("recall", "R"), justify="right")
    table.add_column("mean R", justify="right")
    table.add_column("median ms", justify="right")
    table.add_column("LLM tokens/q", justify="right")
    for mode, outcome in e.modes.items():
        same = SAME_OFFLINE.get(mode) if outcome.note == offline_note(mode, False) else None
        label = esc(mode) + (f" [dim](= {esc(same)} offline)[/dim]" if same else
                             f" [dim]({esc(outcome.note)})[/dim]" if outcome.note else "")
        table.add_row(label, *[f"{outcome.recall[k]:.3f}" for k in keys], f"{outcome.mean_recall:.3f}",
                      f"{outcome.median_ms:.0f}",
                      f"{outcome.llm_tokens:.0f}" + (f" ({outcome.failed} failed)" if outcome.failed else ""))
        for hops, figures in outcome.by_hops.items():
            table.add_row(f"[dim]  {hops}-hop ({figures['questions']:.0f} q)[/dim]",
                          *[f"[dim]{figures[k]:.3f}[/dim]" for k in keys], "", "", "")
    # The references were measured on the whole question set; say so when this run evaluated fewer.
    scope = "whole set" if limit is None or limit > e.questions else f"whole set, not the first {limit}"
    for name, figures in REFERENCE_RECALL.get(e.dataset, {}).items():
        table.add_row(f"[dim]{esc(name)} (README reference, {scope})[/dim]",
                      *[f"[dim]{figures[k]:.3f}[/dim]" if k in figures else "" for k in keys], "", "")
    console.print(table)
    compared = {m: o for m, o in e.modes.items() if o.delta}
    if compared:
        deltas = Table(title=plain(f"Paired differences from the default mode (mean over {e.questions} questions; "
                                   f"95% bootstrap interval, {RESAMPLES:,} resamples, seed {SEED}; green: beats, "
                                   "red: trails, plain: ties)"))
        for col in ("mode", "vs", *[f"Δ {k.replace('recall', 'R')}" for k in keys], "Δ mean R"):
            deltas.add_column(col, justify="left" if col in ("mode", "vs") else "right")
        for mode, o in compared.items():
            deltas.add_row(plain(mode), plain(o.vs), *[_delta_cell(o.delta[k]) for k in [*keys, MEAN_KEY]])
        console.print(deltas)
    _print_prompts(e, console)
    verdict = e.verdict()
    if verdict:
        console.print(plain(verdict), highlight=False)
    if e.prompt_verdict_line():
        console.print(plain(e.prompt_verdict_line() or ""), highlight=False)
    for note in e.notes():
        if not verdict or note not in verdict:   # the verdict line already carries its own notes
            console.print(f"[dim]{esc(note)}[/dim]", highlight=False)
    reused = "reused" if e.documents_indexed == 0 else f"{e.documents_indexed} documents (re)indexed"
    console.print(f"[dim]run {esc(e.run_id)} | index {esc(e.workdir)} ({reused}, {e.index_seconds:.1f} s) | "
                  f"{e.seconds:.1f} s total | stored in eval_runs/eval_results/eval_questions/eval_prompts[/dim]",
                  highlight=False)


def _print_prompts(e: RetrievalEvaluation, console: Console) -> None:
    """What the LLM reads: per mode and budget, the share of questions whose prompt holds a gold answer, and
    the answer-in-context difference from the default mode with its paired interval."""
    measured = {m: o for m, o in e.modes.items() if o.prompts}
    if not measured:
        return
    budgets = [str(b) for b in e.budgets]
    table = Table(title=plain(f"What the LLM reads: each mode's answer prompt at {', '.join(budgets)} tokens "
                              "(answer in context = a gold answer, SQuAD-normalised, occurs in the prompt; quoted = "
                              "recall of the gold passages the prompt quotes)"))
    table.add_column("mode")
    for b in budgets:
        table.add_column(f"in context @{b}", justify="right")
    for b in budgets:
        table.add_column(f"quoted @{b}", justify="right")
    table.add_column(f"tokens @{budgets[-1]}", justify="right")
    table.add_column(f"Δ in context @{budgets[len(budgets) // 2]} vs path", justify="right")
    middle = budgets[len(budgets) // 2]
    for mode, o in measured.items():
        table.add_row(plain(mode), *[f"{o.prompts[b]['answer_in_context']:.2f}" for b in budgets],
                      *[f"{o.prompts[b]['quoted_recall']:.2f}" for b in budgets],
                      f"{o.prompts[budgets[-1]]['median_tokens']:.0f}",
                      _delta_cell(o.prompt_delta[middle]) if middle in o.prompt_delta else "")
    console.print(table)


@eval_group.command()
@click.option("--dataset", "dataset_dir", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Folder with corpus.jsonl, questions.jsonl (and optionally triples.jsonl).")
@click.option("--use-triples", is_flag=True, help="The same as --graph triples.")
@click.option("--graph", type=click.Choice(GRAPH_SOURCES), default="offline", show_default=True,
              help="Where the dataset's graph comes from: the offline rules (even with an LLM endpoint set: the LLM "
                   "then answers but does not extract), the configured LLM extractor (about two calls a passage), or "
                   "the dataset's triples.jsonl.")
@click.option("--modes", default=None,
              help="Comma-separated modes: query modes, the flat baselines (bm25; dense; bm25+dense = both fused "
                   "by RRF, not LightRAG's hybrid mode, and BM25 alone when the embedder is not semantic), "
                   f"ablations path:<name> ({', '.join(EVAL_MODES)}). Default: {','.join(MODES)},bm25,bm25+dense "
                   "and dense with a semantic embedder.")
@click.option("--ablations", is_flag=True, help=f"Also run the path-mode ablations ({', '.join(ABLATIONS)}).")
@click.option("--k", "ks", default=",".join(map(str, DEFAULT_KS)), show_default=True, help="Comma-separated k values.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Evaluate only the first N questions.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Index folder (default: $PATHRAG_HOME/eval/<dataset>-<triples|extractor>).")
@click.option("--top-n", type=click_type(SETTINGS["top_n"]), default=SETTINGS["top_n"].default, show_default=True,
              help="Entity nodes (or chunks, naive) retrieved per query.")
@click.option("--top-k", type=click_type(SETTINGS["top_k"]), default=SETTINGS["top_k"].default, show_default=True,
              help=SETTINGS["top_k"].help)
@click.option("--variant", type=click.Choice(VARIANTS), default="paper", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON (no progress bar).")
@click.option("--per-question", is_flag=True, help="With --json: include each question's ranked passages.")
@click.option("--hop-questions", is_flag=True,
              help="ORACLE decomposition: ask each row's single-hop sub-questions (MuSiQue's own 'hops', '#1' "
                   "replaced by its gold answer) instead of the multi-hop question, on the same passages and index. "
                   "No system gets these at query time: a second check, reported as 'DATASET (oracle hop "
                   "questions)', never used to choose anything.")
@click.option("--budgets", "budget_list", default=",".join(map(str, DEFAULT_BUDGETS)), show_default=True,
              help="Token budgets at which each mode's answer prompt is rendered and scored without an LLM (answer "
                   "in context, quoted passages, tokens; table eval_prompts); '' skips that measurement.")
@click.option("--prompt", "prompt_style", type=click_type(SETTINGS["prompt"]), default=SETTINGS["prompt"].default,
              show_default=True, help="Path mode's answer-prompt layout (see pathrag ask --help).")
def retrieval(dataset_dir: Path, use_triples: bool, graph: str, modes: str | None, ablations: bool, ks: str, limit: int | None, workdir: Path | None,
              top_n: int, top_k: int, variant: str, as_json: bool, per_question: bool, hop_questions: bool,
              budget_list: str, prompt_style: str) -> None:
    """Recall@k of each query mode on a multi-hop QA dataset (one passage = one document).

    Path mode ranks its passages by personalised PageRank over the entity–passage graph (HippoRAG 2-style);
    PathRAG's part is the flow-pruned relational paths in the answer prompt. Each
    baseline and ablation is compared with the default mode question by question (paired 95% bootstrap
    interval of the difference); the verdict compares the best graph mode with the strongest flat baseline.
    """
    console = Console(stderr=True, quiet=as_json)
    try:
        mode_list = parse_csv(modes, "mode", EVAL_MODES) if modes else None
        if ablations:
            mode_list = (mode_list or _default_modes(settings_embedder_semantic())) + [
                a for a in ABLATIONS if a not in (mode_list or [])]
        k_list = parse_ks(ks)
        settings = Settings.from_env()
        params = QueryParams(top_n=top_n, top_k=top_k, variant=variant, prompt=prompt_style)
        budgets = parse_budgets(budget_list)
        with _progress(console) as progress:
            tasks: dict[str, TaskID] = {}

            def advance(mode: str, total: int) -> None:
                if mode not in tasks:
                    tasks[mode] = progress.add_task(f"{mode:>9}", total=total)
                progress.advance(tasks[mode])

            def indexing(done: int, total: int) -> None:
                if "index" not in tasks:
                    tasks["index"] = progress.add_task("extracting", total=total)
                progress.update(tasks["index"], completed=done, total=total)

            evaluation = evaluate_retrieval(settings, dataset_dir, modes=mode_list, ks=k_list, limit=limit,
                                            use_triples=use_triples, graph=graph, workdir=workdir, params=params,
                                            on_question=advance, index_progress=indexing,
                                            hop_level=hop_questions, budgets=budgets)
        save_evaluation(Store.for_settings(settings), evaluation)
    except _EXPECTED as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(evaluation.to_dict(per_question=per_question), indent=1))
    else:
        _print_retrieval(evaluation, make_console(), limit)


# ---- win rates ----------------------------------------------------------------------------------

def _print_winrate(run: WinRateRun, console: Console) -> None:
    table = Table(title=plain(f"Win rates: A = {run.label_a} vs B = {run.label_b} ({run.questions} questions, "
                              f"{run.judgments} judgments, orders: {run.orders}, judge: {run.judge})"))
    for col in ("dimension", "A wins", "B wins", "A %", "B %"):
        table.add_column(col, justify="left" if col == "dimension" else "right")
    for dim, r in run.rates.items():
        table.add_row(plain(dim), str(r.wins_a), str(r.wins_b), f"{100 * r.rate_a:.1f}", f"{100 * r.rate_b:.1f}")
    console.print(table)
    if run.judge_note:
        console.print(f"[yellow]Note: {esc(run.judge_note)}.[/yellow]", highlight=False)
    if run.failed:
        console.print(f"[yellow]{run.failed} judgment(s) failed and are left out (see winrate_verdicts.error)[/yellow]")
    console.print(f"[dim]run {esc(run.run_id)} | {run.seconds:.1f} s | stored in winrate_runs/winrate_results/"
                  "winrate_verdicts[/dim]", highlight=False)


@eval_group.command()
@click.option("--answers-a", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="JSONL of {\"question\", \"answer\"} (optional \"id\") for side A.")
@click.option("--answers-b", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="The same for side B; matched to A by id, else by question text.")
@click.option("--questions", "questions_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="Questions (JSONL with \"question\" and optional \"id\", or one per line) to answer "
                                 "with --mode-a and --mode-b from the current index.")
@click.option("--dataset", "dataset_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="A QA dataset folder (as for `eval answers`): its questions, answered over its own evaluation "
                   "index (built or reused in --workdir, default $PATHRAG_HOME/eval/<dataset>-<graph>).")
@click.option("--use-triples", is_flag=True, help="With --dataset: the same as --graph triples.")
@click.option("--graph", type=click.Choice(GRAPH_SOURCES), default="offline", show_default=True,
              help="With --dataset: where its graph comes from (offline rules, the configured LLM, its triples).")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="With --dataset: the index folder.")
@click.option("--mode-a", type=click.Choice(MODES), default="path", show_default=True)
@click.option("--mode-b", default="hybrid", show_default=True,
              help=f"One mode or several, comma-separated (e.g. hybrid,naive): one judged run per mode, side A's "
                   f"answers shared ({', '.join(MODES)}).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Judge only the first N questions.")
@click.option("--budget", type=click.IntRange(min=200), default=QueryParams.token_budget, show_default=True,
              help="With --questions or --dataset: token budget of the answer prompts.")
@click.option("--both-orders", is_flag=True,
              help="Judge every question twice (A first, then B first) instead of alternating the order.")
@click.option("--json", "as_json", is_flag=True, help="Print the win rates as JSON (a list with several --mode-b).")
def winrate(answers_a: Path | None, answers_b: Path | None, questions_file: Path | None, dataset_dir: Path | None,
            use_triples: bool, graph: str, workdir: Path | None, mode_a: str, mode_b: str, limit: int | None, budget: int,
            both_orders: bool, as_json: bool) -> None:
    """Pairwise LLM judge (PathRAG's five dimensions) of two answer sets: per-dimension win rates of A and B.

    The judging prompt is the papers' (PathRAG's five criteria plus an overall winner); the order of the two
    answers alternates by question to cancel position bias. When the judge is the model that wrote the answers
    (answers generated here with --questions or --dataset) the output says so: a weak judge.
    """
    console = Console(stderr=True, quiet=as_json)
    files = answers_a is not None or answers_b is not None
    if files + (questions_file is not None) + (dataset_dir is not None) != 1:
        raise click.UsageError("give either --answers-a and --answers-b, --questions, or --dataset (the last two "
                               "with --mode-a/--mode-b)")
    if files and (answers_a is None or answers_b is None):
        raise click.UsageError("--answers-a and --answers-b go together")
    modes_b = [m.strip() for m in mode_b.split(",") if m.strip()]
    for m in modes_b:
        if m not in MODES:
            raise click.BadParameter(f"{m!r} is not one of {', '.join(MODES)}", param_hint="--mode-b")
    if not modes_b:
        raise click.BadParameter("give at least one mode", param_hint="--mode-b")
    try:
        settings = Settings.from_env()
        judge = llm_from_settings(settings)
        if judge is None:
            raise click.ClickException(no_judge_message())
        store = Store.for_settings(settings)
        jobs: list[tuple[list, str, str, dict, str | None]] = []
        if files:
            assert answers_a is not None and answers_b is not None
            pairs = match_answers(load_answers(answers_a), load_answers(answers_b))
            jobs.append((pairs[:limit] if limit else pairs, answers_a.name, answers_b.name, {}, None))
        else:
            if dataset_dir is not None:
                dataset = load_dataset(dataset_dir)
                questions = [(q.id, q.question) for q in dataset.questions]
                index = Path(workdir).expanduser().resolve() if workdir else \
                    default_workdir(settings, dataset, use_triples, graph)
                answer_settings, _ = prepare_index(settings, dataset, index, use_triples=use_triples, graph=graph)
            else:
                assert questions_file is not None
                questions = load_eval_questions(questions_file)
                answer_settings = settings
            questions = questions[:limit] if limit else questions
            with _progress(console) as progress:
                task = progress.add_task("answering", total=(1 + len(modes_b)) * len(questions))
                query_params = QueryParams(token_budget=budget)
                answers = answer_modes(answer_settings, questions, [mode_a, *modes_b],
                                       on_answer=lambda: progress.advance(task), params=query_params)
            params = {"query_params": asdict(query_params.resolved())}
            if dataset_dir is not None:
                params["dataset"] = dataset.name
            for m in modes_b:
                jobs.append((pair_modes(questions, answers, mode_a, m), f"mode:{mode_a}", f"mode:{m}", params,
                             judge.model))
        runs = []
        for pairs, label_a, label_b, params, answered_by in jobs:
            with _progress(console) as progress:
                task = progress.add_task(f"judging {label_b}", total=len(pairs) * (2 if both_orders else 1))
                run = judge_pairs(judge, pairs, label_a=label_a, label_b=label_b, both_orders=both_orders,
                                  params=params, on_judgment=lambda: progress.advance(task), answered_by=answered_by)
            save_winrate(store, run)
            runs.append(run)
    except _EXPECTED as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(runs[0].to_dict() if len(runs) == 1 else [r.to_dict() for r in runs], indent=1))
    else:
        for run in runs:
            _print_winrate(run, make_console())


# ---- answers ------------------------------------------------------------------------------------

def _print_answers(e, console: Console) -> None:
    from pathrag_pipeline.evaluation.answer_eval import RECALL_K

    summary = e.summary()
    n = len(e.complete_questions)
    table = Table(title=plain(f"Answers on {e.dataset} ({n} of {e.planned} questions answered in every mode; "
                              f"llm: {e.llm}, embedder: {e.embedder}, graph: {e.graph} ({e.extractor}), prompt budget "
                              f"{e.budget} tokens)"))
    for col in ("mode", "F1", "EM", "in context", "F1 if in context", f"R@{RECALL_K}", "prompt tokens", "LLM calls/q", "LLM tokens/q",
                "median s", "Δ F1 vs", "Δ F1 [95% CI]"):
        table.add_column(col, justify="left" if col in ("mode", "Δ F1 vs") else "right")
    for mode, m in summary.items():
        label = esc(mode) + (f" [dim]({esc(m.note)})[/dim]" if m.note else "")
        table.add_row(label, f"{m.scores['f1']:.3f}", f"{m.scores['exact_match']:.3f}",
                      f"{m.scores['answer_in_context']:.2f}",
                      "" if m.f1_in_context is None else f"{m.f1_in_context:.3f}", f"{m.recall:.3f}",
                      f"{m.median_prompt_tokens:.0f}",
                      f"{m.llm_calls:.1f}", f"{m.llm_tokens:.0f}" + (f" ({m.failed} failed)" if m.failed else ""),
                      f"{m.median_latency_ms / 1000:.1f}", plain(m.vs or ""),
                      _delta_cell(m.delta["f1"]) if m.delta else "")
    console.print(table)
    verdict = e.verdict()
    if verdict:
        console.print(plain(verdict), highlight=False)
    _print_diagnosis(e.diagnosis(), console)
    if e.stopped:
        console.print(f"[yellow]stopped early: {esc(e.stopped)}; run the same command again to resume[/yellow]")
    console.print(f"[dim]run {esc(e.run_id)} | {e.resumed} answers resumed, {e.reused} reused, {e.answered} new | "
                  f"{e.seconds:.1f} s, of which indexing {e.index_seconds:.1f} s | "
                  "stored in eval_answers/eval_answer_runs[/dim]", highlight=False)


def _print_diagnosis(diagnosis: dict, console: Console) -> None:
    """The hop diagnosis (evaluation/answer_diagnosis.py), when the dataset names its hops."""
    if not diagnosis:
        return
    from pathrag_pipeline.evaluation.answer_diagnosis import DIAGNOSIS_COLUMNS, diagnosis_row

    table = Table(title="Where the evidence went (questions with MuSiQue hops)")
    for col in DIAGNOSIS_COLUMNS:
        table.add_column(col, justify="left" if col == "mode" else "right")
    for mode, d in diagnosis.items():
        table.add_row(*(plain(str(c)) for c in diagnosis_row(mode, d)))
    console.print(table)


@eval_group.command()
@click.option("--dataset", "dataset_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Folder with corpus.jsonl and questions.jsonl (with gold \"answers\"), optionally triples.jsonl: "
                   "indexed into its own folder (--workdir).")
@click.option("--questions", "questions_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="Instead of --dataset: your own questions, JSONL rows {\"question\", \"answers\": [...]} "
                                 "(optionally \"id\", and \"source\" naming the document that holds the answer), "
                                 "answered over PATHRAG_HOME as it is indexed.")
@click.option("--use-triples", is_flag=True, help="The same as --graph triples.")
@click.option("--graph", type=click.Choice(GRAPH_SOURCES), default="offline", show_default=True,
              help="Where the dataset's graph comes from: the offline rules (even with an LLM endpoint set: the LLM "
                   "then answers but does not extract), the configured LLM extractor (about two calls a passage), or "
                   "the dataset's triples.jsonl.")
@click.option("--modes", default=None,
              help="Comma-separated evaluated modes (as for `eval retrieval`). Default: path, its prompt layouts "
                   "(path:paper_prompt, path:passages_last_prompt, path:public_prompt, path:passages_prompt, "
                   "path:flat_prompt), hybrid, "
                   "neuropath, naive (= dense), bm25, bm25+dense; with an LLM also neuropath:offline_tracker.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Answer only the first N questions.")
@click.option("--budget", type=click.IntRange(min=200), default=2000, show_default=True,
              help="Token budget of every mode's answer prompt.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Index folder (default: $PATHRAG_HOME/eval/<dataset>-<triples|extractor>).")
@click.option("--top-n", type=click_type(SETTINGS["top_n"]), default=SETTINGS["top_n"].default, show_default=True)
@click.option("--top-k", type=click_type(SETTINGS["top_k"]), default=SETTINGS["top_k"].default, show_default=True)
@click.option("--prompt", "prompt_style", type=click_type(SETTINGS["prompt"]), default=SETTINGS["prompt"].default,
              show_default=True, help="The default path mode's prompt layout (the path:*_prompt rows are the others).")
@click.option("--fresh", is_flag=True, help="Start a new run instead of resuming the newest run with the same "
                                            "configuration.")
@click.option("--time-limit", type=click.FloatRange(min=0.1), default=None,
              help="Minutes of answering (indexing not counted): start no new question after this (the run stays "
                   "resumable).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON (no progress bar).")
@click.option("--per-question", is_flag=True, help="With --json: include every answer (without its prompt).")
def answers(dataset_dir: Path | None, questions_file: Path | None, use_triples: bool, graph: str, modes: str | None, limit: int | None, budget: int,
            workdir: Path | None, top_n: int, top_k: int, prompt_style: str, fresh: bool, time_limit: float | None,
            as_json: bool, per_question: bool) -> None:
    """Answer a QA dataset in every mode with the configured LLM and score the answers (EM, token F1).

    Each mode's own prompt (at --budget tokens) goes to the LLM, which is asked for the answer alone; the answer
    is scored against every gold answer and alias (SQuAD normalisation), with answer-in-context of the prompt,
    recall@5, LLM calls, tokens and latency. Modes are compared with path question by question (paired 95%
    bootstrap). Every answer is stored as it arrives (eval_answers): run the same command again to resume a
    killed or time-limited run. Without an LLM the answers are the offline extractive ones.
    """
    from pathrag_pipeline.evaluation.answer_eval import EndpointDown, evaluate_answers

    if (dataset_dir is None) == (questions_file is None):
        raise click.UsageError("give --dataset DIR (a QA dataset, indexed on its own) or --questions FILE (your own "
                               "questions over PATHRAG_HOME), one of the two")
    console = Console(stderr=True, quiet=as_json)
    try:
        mode_list = parse_csv(modes, "mode", EVAL_MODES) if modes else None
        settings = Settings.from_env()
        params = QueryParams(top_n=top_n, top_k=top_k, prompt=prompt_style)
        with _progress(console) as progress:
            tasks: dict[str, TaskID] = {}

            def advance(mode: str, done: int, total: int) -> None:
                if "answers" not in tasks:
                    tasks["answers"] = progress.add_task("answering", total=total)
                progress.update(tasks["answers"], completed=done, total=total, description=f"{mode:>22}")

            def indexing(done: int, total: int) -> None:
                if "index" not in tasks:
                    tasks["index"] = progress.add_task("indexing", total=total)
                progress.update(tasks["index"], completed=done, total=total)

            evaluation = evaluate_answers(settings, dataset_dir, questions_file=questions_file, modes=mode_list, limit=limit, budget=budget,
                                          use_triples=use_triples, graph=graph, workdir=workdir, params=params,
                                          fresh=fresh,
                                          time_limit=time_limit * 60 if time_limit else None,
                                          on_answer=advance, index_progress=indexing)
    except (*_EXPECTED, EndpointDown) as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(evaluation.to_dict(per_question=per_question), indent=1))
    else:
        _print_answers(evaluation, make_console())
