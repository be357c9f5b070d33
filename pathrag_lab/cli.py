"""Benchmarks whose results go to docs/benchmarks.md (the lab, pathrag_lab: `pathrag bench ...`).

All logic lives in ``pathrag_lab.bench``; each command imports its benchmark module when it runs, so
``pathrag bench --help`` starts at once. The product's ``pathrag`` finds this group through the
``pathrag.commands`` entry point (pyproject.toml); it never imports the lab.
"""

from __future__ import annotations

import json
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import click

from pathrag_lab.bench.local_models import DEFAULT_LOCAL_MODEL, LOCAL_MODELS
from pathrag_pipeline.cli.common import console, esc, print_table
from pathrag_pipeline.config import BENCH_DIR

MUSIQUE = BENCH_DIR / "musique-100"


@click.group()
def bench() -> None:
    """Benchmarks whose results go to docs/benchmarks.md."""


def _table(columns: list[str], rows: list[list], title: str) -> None:
    print_table(columns, [tuple(r) for r in rows], title=title)


_update_docs_option = click.option(
    "--update-docs", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="Splice the results into this report as its section (e.g. docs/benchmarks.md).")
_json_option = click.option("--json", "as_json", is_flag=True)


def _dataset_option(files: str):
    """``--dataset``: an existing dataset folder holding ``files``, musique-100 by default."""
    return click.option("--dataset", "dataset_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
                        default=MUSIQUE, show_default=True, help=f"Dataset folder ({files}).")


def _measured(started: float) -> str:
    """A section's closing line: when, on what, and how long the section took."""
    from pathrag_lab.bench.report import machine_info

    m = machine_info()
    return (f"_Measured {m['date']} on {m['usable_cores']} cores ({m['cpu']}, Python {m['python']}); this section ran "
            f"{time.perf_counter() - started:.0f} s._")


def _publish(section: str, heading: str, update_docs: Path | None, as_json: bool, json_text: str,
             before: str | None = None) -> None:
    """A long benchmark's output: its ``## heading`` section spliced into ``update_docs`` (when given), then
    the JSON or the section printed."""
    if update_docs is not None:
        from pathrag_lab.bench.report import machine_info, machine_stamp
        from pathrag_lab.bench.report_sections import splice

        stamped = section if "_Measured " in section else (
            f"{section.rstrip()}\n\n_Measured {machine_stamp(machine_info())}._\n\n")   # where and when, always
        splice(update_docs, heading, stamped, before=before)
    if as_json:
        click.echo(json_text)
    else:
        console.print(section, highlight=False, markup=False)


def _log(as_json: bool):
    return (lambda _: None) if as_json else (lambda msg: console.print(f"[dim]{esc(msg)}[/dim]", highlight=False))


def _print_indexing(result: dict) -> None:
    from pathrag_lab.bench.indexing import STAGES

    off = result.get("offline")
    if off:
        _table(["stage", "full build s", "re-index after 1 edit s"],
               [[s, off["full_s"][s], off["incremental_s"][s]] for s in (*STAGES, "total")],
               title=f"Offline indexing of {off['documents']} documents ({off['chunks']} chunks), medians")
        last = off["incremental"][-1]
        console.print(f"offline extraction: {off['offline_extraction_chunks_per_s']} chunks/s | re-index: "
                      f"{last['chunks_reextracted']} chunk(s) re-extracted, rows re-embedded {last['rows_reembedded']} | "
                      f"full/incremental {off['ratio_full_to_incremental']}x", highlight=False, markup=False)
    llm = result.get("llm")
    if llm:
        console.print(f"[bold]LLM mode:[/bold] {esc(llm['caveat'])}", highlight=False)
        _table(["gleaning", "chunks", "calls/chunk", "prompt tok/chunk", "completion tok/chunk", "summary calls",
                "server calls", "pipeline calls", "total s"],
               [[b["gleaning"], b["chunks_extracted"], b["calls_per_chunk"], b["prompt_tokens_per_chunk"],
                 b["completion_tokens_per_chunk"], b["summary_calls"], b["calls_server_received"],
                 b["calls_pipeline_counted"], b["seconds"]["total"]] for b in llm["builds"]],
               title=f"LLM-mode full builds of {llm['documents']} documents (local scripted server)")
        inc = llm["incremental"]
        console.print(f"re-index after editing {inc['edited_file']}: {inc['extraction_calls']} extraction calls for "
                      f"{inc['chunks_reextracted']} chunk(s), {inc['summary_calls']} summary calls; only the edited "
                      f"document's chunks: {inc['only_edited_document']}; full/incremental calls "
                      f"{llm['ratio_full_to_incremental_calls']}x", highlight=False, markup=False)
    mus = result.get("musique")
    if mus:
        _table(["passages", "triples", "entities", "relations", *mus["seconds"]],
               [[mus["passages"], mus["triples"], mus["entities"], mus["relations"], *mus["seconds"].values()]],
               title=f"{mus['dataset']}: ingest + triples import (seconds per stage)")


@bench.command("indexing")
@click.option("--docs", "n_docs", default=1000, show_default=True, help="Generated documents for the offline build.")
@click.option("--llm-docs", type=int, default=None,
              help="Generated documents for the LLM-mode builds [default: --docs]; 0 skips LLM mode.")
@click.option("--repeats", default=3, show_default=True, help="Full offline builds (the median is reported).")
@click.option("--edits", default=3, show_default=True, help="Single-document edits re-indexed (median reported).")
@click.option("--musique", "musique_dir", type=click.Path(file_okay=False, path_type=Path), default=MUSIQUE,
              show_default=True, help="musique-100 folder (corpus.jsonl + triples.jsonl); skipped when absent.")
@click.option("--no-musique", is_flag=True, help="Skip the musique-100 triples import.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where to generate corpora and indexes (default: a temp dir).")
@_update_docs_option
@click.option("--json", "as_json", is_flag=True)
def indexing(n_docs: int, llm_docs: int | None, repeats: int, edits: int, musique_dir: Path, no_musique: bool,
             workdir: Path | None, update_docs: Path | None, as_json: bool) -> None:
    """Full and incremental indexing: offline stage times, LLM call accounting, musique-100 triples import.
    ``--update-docs`` replaces the report's "Indexing, offline" section and its key-figures line with this run's."""
    if n_docs < 1 or repeats < 1 or edits < 1:
        raise click.UsageError(f"--docs {n_docs}, --repeats {repeats} and --edits {edits} must be at least 1")
    from pathrag_lab.bench.indexing import llm_bench, musique_bench, offline_bench

    log = _log(as_json)
    started = time.perf_counter()
    base = Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-indexing-"))
    result = {"offline": offline_bench(n_docs, repeats=repeats, edits=edits, workdir=base / "offline", log=log)}
    if llm_docs != 0:
        result["llm"] = llm_bench(llm_docs or n_docs, workdir=base / "llm", log=log)
    if not no_musique:
        result["musique"] = musique_bench(musique_dir, workdir=base / "musique", log=log)
        if result["musique"] is None:
            log(f"musique-100 not found at {musique_dir}: skipped")
    if update_docs is not None:
        from pathrag_lab.bench.report import (
            ReportSizes, machine_info, machine_stamp, offline_key_figure, offline_section,
        )
        from pathrag_lab.bench.report_sections import replace_key_figure, splice

        sizes = ReportSizes(index_docs=n_docs, index_repeats=repeats, index_edits=edits)
        stamp = (f"_Measured {machine_stamp(machine_info())}; `pathrag bench indexing` ran "
                 f"{time.perf_counter() - started:.0f} s._")
        splice(update_docs, "Indexing, offline", offline_section(result["offline"], sizes) + "\n\n" + stamp)
        replace_key_figure(update_docs, "Offline full index of", offline_key_figure(result["offline"]))
    if as_json:
        click.echo(json.dumps(result, indent=1))
    else:
        _print_indexing(result)


@bench.command("extractor")
@click.option("--dataset", "dataset_dir", type=click.Path(file_okay=False, path_type=Path), default=MUSIQUE,
              show_default=True, help="Dataset folder with corpus.jsonl and entities.jsonl.")
@click.option("--real-docs", "real_docs", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="Real documents in subfolders (dev/, heldout/) with hand labels in entities.tsv "
                                 "[default: data/eval/real-docs].")
@_update_docs_option
@click.option("--json", "as_json", is_flag=True)
def extractor(dataset_dir: Path, real_docs: Path | None, update_docs: Path | None, as_json: bool) -> None:
    """The offline extractor: entity precision on real documentation against hand labels, and against an LLM's
    entity lists on a QA corpus (precision/recall, relations per 1,000 passages, entity types and hubs, with the
    current rules and with the v2 rules: dates as nodes, 2 neighbours)."""
    from pathrag_lab.bench import entity_precision
    from pathrag_lab.bench.offline_extraction import compare_rules
    from pathrag_lab.bench.report import (
        ENTITY_PRECISION_HEADING,
        entity_precision_section,
        extractor_section,
        machine_info,
    )

    try:
        precision = entity_precision.measure(real_docs or entity_precision.REAL_DOCS)
    except (FileNotFoundError, entity_precision.LabelError) as exc:
        raise click.ClickException(str(exc)) from None
    have_dataset = (dataset_dir / "corpus.jsonl").is_file() and (dataset_dir / "entities.jsonl").is_file()
    result = compare_rules(dataset_dir / "corpus.jsonl", dataset_dir / "entities.jsonl") if have_dataset else None
    m = machine_info()
    section = (entity_precision_section(precision) + f"\n\n_Measured {m['date']} on {m['usable_cores']} cores "
               f"({m['cpu']}, Python {m['python']})._")
    if update_docs is not None:
        from pathrag_lab.bench.report_sections import splice

        splice(update_docs, ENTITY_PRECISION_HEADING, section, before="Offline extractor rules")
        if result is not None:
            splice(update_docs, "Offline extractor rules", extractor_section(result) + f"\n\n_Measured {m['date']} "
                   f"on {m['usable_cores']} cores ({m['cpu']}, Python {m['python']})._")
    if as_json:
        click.echo(json.dumps({"real_docs": precision, "dataset": result}, indent=1))
        return
    console.print(section, highlight=False, markup=False)
    if result is None:
        console.print(f"(no {dataset_dir}/corpus.jsonl and entities.jsonl: the LLM-list comparison is skipped)")
        return
    rows = [[r["extractor"], r["relations_per_1000_passages"], r["predicted_entities"], r["strict_precision"],
             r["strict_recall"], r["lenient_precision"], r["lenient_recall"], r["chunks_per_second"],
             ", ".join(f"{n} ({c})" for n, c in r["hubs"][:5])] for r in result.values()]
    _table(["rules", "relations / 1000 passages", "entities", "strict P", "strict R", "lenient P", "lenient R",
            "chunks/s", "hubs (passages)"], rows, title=f"Offline extractor on {dataset_dir.name}")


def _endpoint_options(f):
    """--base-url and --model: a running OpenAI-compatible endpoint instead of the bench's own llama.cpp server;
    --local-model: which installed model that server serves (bench/local_models.py)."""
    f = click.option("--local-model", "local", type=click.Choice(list(LOCAL_MODELS)), default=DEFAULT_LOCAL_MODEL,
                     show_default=True,
                     help="The model the bench's own server serves: qwen2.5-coder-0.5b ([local-llm-model] extra) "
                          "or qwen2.5-coder-1.5b ([local-llm-model-1-5b]: three times the parameters, ~3x slower).")(f)
    f = click.option("--model", default=None, help="The model the --base-url endpoint serves.")(f)
    return click.option("--base-url", default=None, help="Use this running OpenAI-compatible endpoint instead of "
                                                         "starting the local server (with --model).")(f)


@bench.command("answer-prompt")
@click.option("--reader", "readers", multiple=True, type=click.Choice(list(LOCAL_MODELS)),
              help="A local model the bench serves itself, one after the other (default: both Qwen2.5-Coder readers).")
@click.option("--dataset", "datasets", multiple=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A QA dataset, graph from the offline rules (default: musique-100).")
@click.option("--folder", "folders", multiple=True, help="A documentation folder of `bench real-folders` with its "
                                                         "questions (default: git-doc).")
@click.option("--limit", type=click.IntRange(min=1), default=30, show_default=True,
              help="Questions of each set (the first N of a dataset and of a folder's question file).")
@click.option("--budget", type=click.IntRange(min=200), default=1000, show_default=True)
@click.option("--time-limit", type=click.FloatRange(min=0.1), default=None,
              help="Minutes of answering per cell; the same command resumes.")
@click.option("--base-url", default=None, help="A running endpoint instead of the bench's own servers (with --model).")
@click.option("--model", default=None)
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Bench folder: homes, runs (resumable) and the joined models.")
@_update_docs_option
@_json_option
def answer_prompt(readers: tuple[str, ...], datasets: tuple[Path, ...], folders: tuple[str, ...], limit: int,
                  budget: int, time_limit: float | None, base_url: str | None, model: str | None, workdir: Path,
                  update_docs: Path | None, as_json: bool) -> None:
    """Which answer prompt reads best: the layouts that keep PathRAG's pruning in the loop, the paper's PathRAG and
    the flat chunk prompts, answered by each local reader on musique-100 and a documentation folder, and the rule
    that picks the default from them (bench/answer_prompt.py)."""
    from pathrag_lab.bench.answer_prompt import HEADING, READERS, decide, markdown, run_answer_prompt_bench, Cell
    from pathrag_lab.bench.llm_answers import BenchSetupError
    from pathrag_lab.bench.real_folders import FOLDERS
    from pathrag_pipeline.evaluation.answer_eval import EndpointDown
    from pathrag_pipeline.llm.client import LLMError

    unknown = [f for f in folders if f not in FOLDERS]
    if unknown:
        raise click.BadParameter(f"{unknown[0]!r}: one of {', '.join(FOLDERS)}", param_hint="--folder")
    started = time.perf_counter()
    try:
        result = run_answer_prompt_bench(workdir, readers=readers or READERS, datasets=datasets or (MUSIQUE,),
                                         folders=folders or ("git-doc",), limit=limit, budget=budget,
                                         base_url=base_url, model=model,
                                         time_limit=time_limit * 60 if time_limit else None, log=_log(as_json))
    except (BenchSetupError, EndpointDown, LLMError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    cells = [Cell(**c) for c in result["cells"]]
    section = (f"## {HEADING}\n\n" + markdown(cells, decide(cells), result["command"]) + "\n\n"
               + f"Embedder {result['embedder']}, {result['budget']}-token prompts, llama.cpp on 2 threads (without "
               "--base-url the bench serves each --reader itself; docs/llm-endpoints.md). The "
               f"{result['answers']} answers took {result['query_minutes']} min of query time in all (the sum of their "
               "wall times, earlier invocations' included: stored answers are reused). "
               + _measured(started))
    _publish(section, HEADING, update_docs, as_json, json.dumps(result, indent=1, default=str),
             before="Answers through a local LLM")


@bench.command("answers")
@click.option("--dataset", "dataset_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=MUSIQUE, show_default=True, help="QA dataset with triples.jsonl (its graph).")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Questions answered.")
@click.option("--budget", type=click.IntRange(min=200), default=1000, show_default=True,
              help="Token budget of every mode's answer prompt (a 0.5B model on 2 cores reads ~100 tokens/s).")
@click.option("--modes", default=None, help="Comma-separated modes (default: as `pathrag eval answers`).")
@click.option("--time-limit", type=click.FloatRange(min=0.1), default=None,
              help="Minutes: start no new question after this; the same command resumes.")
@click.option("--verdict-limit", type=click.IntRange(min=1), default=100, show_default=True,
              help="Then answer path, the best flat prompt and the best path layout on this many questions and "
                   "state the verdict there too (the grid's answers are reused; at most the dataset's size).")
@_endpoint_options
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Bench folder: index, runs (resumable) and the joined model (default: a temporary folder).")
@click.option("--update-docs", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Rewrite the 'Answers through a local LLM' section of this markdown file (docs/benchmarks.md).")
@click.option("--json", "as_json", is_flag=True)
def answers(dataset_dir: Path, limit: int, budget: int, modes: str | None, time_limit: float | None,
            verdict_limit: int, base_url: str | None, model: str | None, local: str, workdir: Path | None,
            update_docs: Path | None, as_json: bool) -> None:
    """Answers end to end through a real local LLM: starts llama-cpp-python's server with a small GGUF model
    (Qwen2.5-Coder-0.5B-Instruct from the [local-llm-model] extra, or the 1.5B with --local-model), runs `pathrag eval answers` on musique-100
    and reports EM/F1 per mode with paired intervals. Says what to install when the server or model is missing.
    """
    from pathrag_lab.bench.llm_answers import (HEADING, BenchSetupError, llm_answers_section,
                                                    run_llm_answers_bench, to_json)
    from pathrag_pipeline.evaluation.answer_eval import EndpointDown
    from pathrag_pipeline.evaluation.retrieval_eval import EVAL_MODES, parse_csv
    from pathrag_pipeline.llm.client import LLMError

    try:
        result = run_llm_answers_bench(
            dataset_dir, Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-llm-answers-")), limit=limit,
            budget=budget, modes=parse_csv(modes, "mode", EVAL_MODES) if modes else None,
            time_limit=time_limit * 60 if time_limit else None, base_url=base_url, model=model,
            verdict_limit=verdict_limit, local=local, log=_log(as_json))
    except (BenchSetupError, EndpointDown, LLMError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    _publish(llm_answers_section(result), HEADING, update_docs, as_json, to_json(result), before="Scale")


@bench.command("winrate")
@click.option("--dataset", "dataset_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=MUSIQUE, show_default=True, help="QA dataset with triples.jsonl (its graph).")
@click.option("--questions", type=click.IntRange(min=1), default=30, show_default=True,
              help="The first N questions: path, hybrid and naive answer each; path is judged against the other two.")
@click.option("--budget", type=click.IntRange(min=200), default=1000, show_default=True,
              help="Token budget of every mode's answer prompt.")
@_endpoint_options
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Bench folder of `bench answers` (index, home, joined model; default: a temporary folder).")
@click.option("--update-docs", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Splice the results into this report as its `## Win rates through a local LLM` section.")
@click.option("--json", "as_json", is_flag=True)
def winrate(dataset_dir: Path, questions: int, budget: int, base_url: str | None, model: str | None, local: str,
            workdir: Path | None, update_docs: Path | None, as_json: bool) -> None:
    """Judged win rates through a real local LLM (as `bench answers`): path against hybrid and naive, the
    papers' judging prompt, answers' order alternated, the same small model as judge (a weak judge, said so)."""
    from pathrag_lab.bench.llm_answers import BenchSetupError
    from pathrag_lab.bench.llm_winrate import HEADING, run_winrate_bench, winrate_section
    from pathrag_pipeline.evaluation.answer_eval import EndpointDown
    from pathrag_pipeline.llm.client import LLMError

    try:
        result = run_winrate_bench(dataset_dir, Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-winrate-")),
                                   questions=questions, budget=budget, base_url=base_url, model=model,
                                   local=local, log=_log(as_json))
    except (BenchSetupError, EndpointDown, LLMError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    _publish(winrate_section(result), HEADING, update_docs, as_json, json.dumps(result, indent=1, default=str),
             before="Scale")


def _llm_modes_command(suite_name: str, what: str):
    """`pathrag bench neuropath-llm` / `pooling-llm`: one suite of modes through a local LLM (bench/llm_modes.py)."""
    from pathrag_lab.bench.llm_modes import SUITES

    suite = SUITES[suite_name]

    @bench.command(suite_name, help=what)
    @click.option("--dataset", "dataset_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
                  default=MUSIQUE, show_default=True, help="QA dataset with triples.jsonl (its graph).")
    @click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Questions.")
    @click.option("--budget", type=click.IntRange(min=200), default=1000, show_default=True,
                  help="Token budget of every mode's answer prompt.")
    @click.option("--time-limit", type=click.FloatRange(min=0.1), default=None,
                  help="Minutes: start no new answer after this; the same command resumes the answers.")
    @_endpoint_options
    @click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
                  help="Bench folder: index (shared with `bench answers`), runs and the joined model.")
    @click.option("--update-docs", type=click.Path(dir_okay=False, path_type=Path), default=None,
                  help=f"Splice the results into this report as its `## {suite.heading}` section.")
    @click.option("--json", "as_json", is_flag=True)
    def command(dataset_dir: Path, limit: int, budget: int, time_limit: float | None, base_url: str | None,
                model: str | None, local: str, workdir: Path | None, update_docs: Path | None,
                as_json: bool) -> None:
        from pathrag_lab.bench.llm_answers import BenchSetupError
        from pathrag_lab.bench.llm_modes import modes_llm_section, run_modes_llm_bench
        from pathrag_pipeline.evaluation.answer_eval import EndpointDown
        from pathrag_pipeline.llm.client import LLMError

        try:
            result = run_modes_llm_bench(
                dataset_dir, Path(workdir or tempfile.mkdtemp(prefix=f"pathrag-bench-{suite_name}-")), suite=suite,
                limit=limit, budget=budget, base_url=base_url, model=model, local=local,
                time_limit=time_limit * 60 if time_limit else None, log=_log(as_json))
        except (BenchSetupError, EndpointDown, LLMError, ValueError) as exc:
            raise click.ClickException(str(exc)) from None
        _publish(modes_llm_section(result), suite.heading, update_docs, as_json,
                 json.dumps(result, indent=1, default=str), before="Scale")

    return command


neuropath_llm = _llm_modes_command(
    "neuropath-llm", "NeuroPath's LLM tracker through a real local LLM (as `bench answers`): recall and answer F1 of "
    "the paper's NeuroPath, our variant and the heuristic tracker on the same questions, with paired intervals.")
pooling_llm = _llm_modes_command(
    "pooling-llm", "Path Pooling through a real local LLM (as `bench answers`): recall and answer F1 of path mode "
    "with the paper's pooling and our earlier formula, rerank and reselect, on the same questions, with paired "
    "intervals.")


@bench.command("sample-answers")
@click.option("--docs", "docs_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Index this folder instead of data/sample/ (with --questions: its answer key).")
@click.option("--questions", "key_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A Markdown answer key with Question and Answer columns (e.g. data/paper_questions.md).")
@_update_docs_option
@_json_option
def sample_answers(docs_dir: Path | None, key_path: Path | None, update_docs: Path | None, as_json: bool) -> None:
    """How many sample questions (data/sample_questions.md) each mode answers offline: the answer key's lead
    name appears in the extractive answer; and musique-100's questions whose gold answer appears in it."""
    from pathrag_lab.bench.report import answers_section, docs_answers_section
    from pathrag_lab.bench.sample_answers import run_answers_bench

    if (docs_dir is None) != (key_path is None):
        raise click.UsageError("give --docs and --questions together (a folder and its answer key)")
    started = time.perf_counter()
    own = docs_dir is not None
    result = (run_answers_bench(docs_dir.resolve(), key_path.resolve(), log=_log(as_json), dataset=None) if own
              else run_answers_bench(log=_log(as_json)))
    section = ((docs_answers_section(result, docs_dir, key_path) if own else answers_section(result))
               + "\n\n" + _measured(started))
    heading = "Questions about the papers, answered offline" if own else "Sample questions answered offline"
    _publish(section, heading, update_docs, as_json, json.dumps(result, indent=1),
             before="Local embedder: torch versus onnxruntime")


@bench.command("embedder")
@click.option("--texts", default=512, show_default=True, help="Passages embedded per run.")
@click.option("--runs", default=3, show_default=True, help="Timed runs per runtime (median reported).")
@click.option("--threads", default=2, show_default=True, help="Intra-op threads for both runtimes.")
@click.option("--mix", default=2000, show_default=True,
              help="Also embed this many texts of what indexing embeds (musique-100's triples index; 0: skip).")
@click.option("--update-docs", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Replace the section in this markdown file (docs/benchmarks.md).")
@click.option("--json", "as_json", is_flag=True)
def embedder(texts: int, runs: int, threads: int, mix: int, update_docs: Path | None, as_json: bool) -> None:
    """all-MiniLM-L6-v2 on torch versus onnxruntime (needs the local-embeddings extra and optimum[onnx])."""
    if texts < 1 or runs < 1 or threads < 1 or mix < 0:
        raise click.UsageError("--texts, --runs and --threads must be at least 1, --mix at least 0")
    from pathrag_lab.bench.embedding_runtime import measure
    from pathrag_lab.bench.report import embedder_section, machine_info

    started = time.perf_counter()
    try:
        result = measure(texts=texts, runs=runs, threads=threads, mix=mix)
    except (ImportError, RuntimeError) as exc:
        raise click.ClickException(f"{exc}; install torch==2.13.0, `.[local-embeddings]` and "
                                   "`sentence-transformers[onnx]`") from None
    if update_docs is not None:
        m = machine_info()
        section = embedder_section(result) + (
            f"\n\n_Measured {m['date']}, {m['cpu']}, {m['usable_cores']} cores, Python {m['python']}; this section "
            f"ran {time.perf_counter() - started:.0f} s._")
        from pathrag_lab.bench.report_sections import splice

        splice(update_docs, "Local embedder: torch versus onnxruntime", section, before="Path pruning scaling")
    if as_json:
        click.echo(json.dumps(result, indent=1))
        return
    _table(["runtime", "load s", "texts/s (median)", "runs"],
           [[b, result[b]["load_s"], result[b]["texts_per_s_median"], result[b]["texts_per_s_runs"]]
            for b in ("torch", "onnx")],
           title=f"{result['model']}: {texts} passages, batch {result['batch']}, {threads} threads")
    console.print(f"onnx/torch speed {result['onnx_speedup']}x; lowest cosine between their vectors "
                  f"{result['min_cosine_torch_vs_onnx']}; ONNX export {result['export_s']} s",
                  highlight=False, markup=False)
    if result.get("mix"):
        _table(["runtime", "texts/s, arrival order", "texts/s, longest first", "texts/s, padded-length budget"],
               [[b, result[b]["mix_arrival"], result[b]["mix_longest_first"], result[b]["mix_budget"]]
                for b in ("torch", "onnx")],
               title=f"What indexing embeds: {result['mix']['texts']} texts of musique-100's triples index")


@bench.command("query")
@click.option("--rounds", default=3, show_default=True, help="Times each question is asked per mode.")
@_update_docs_option
@click.option("--json", "as_json", is_flag=True)
def query(rounds: int, update_docs: Path | None, as_json: bool) -> None:
    """Query latency per stage on the sample corpus, offline, for every mode (medians)."""
    if rounds < 1:
        raise click.UsageError(f"--rounds {rounds} must be at least 1")
    from pathrag_lab.bench.query import STAGE_ORDER, run_query_bench

    started = time.perf_counter()
    result = run_query_bench(rounds=rounds, log=_log(as_json))
    if update_docs is not None:
        from dataclasses import replace

        from pathrag_lab.bench.report import FULL, machine_info, machine_stamp, query_section
        from pathrag_lab.bench.report_sections import splice

        section = (query_section(result, replace(FULL, query_rounds=rounds))
                   + f"\n\n_Measured {machine_stamp(machine_info())}; this section ran "
                     f"{time.perf_counter() - started:.0f} s._")
        splice(update_docs, "Query latency per stage (sample corpus, offline)", section)
        if "path" in result["modes"]:
            from pathrag_lab.bench.report_sections import replace_key_figure

            replace_key_figure(update_docs, "Offline `path` query on the sample corpus:",
                               f"Offline `path` query on the sample corpus: median "
                               f"{result['modes']['path']['total_median_ms']} ms end to end.")
    if as_json:
        click.echo(json.dumps(result, indent=1))
        return
    stages = [s for s in STAGE_ORDER if any(s in m["median_ms"] for m in result["modes"].values())]
    _table(["mode", *stages, "total median", "total p95"],
           [[mode, *[m["median_ms"].get(s, "") for s in stages], m["total_median_ms"], m["total_p95_ms"]]
            for mode, m in result["modes"].items()],
           title=f"Median ms per stage, {result['questions']} sample questions x {result['rounds']}")


@bench.command("report")
@click.option("--quick", is_flag=True, help="Small sizes for a fast smoke run (written to a temp folder by default).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Report path [default: docs/benchmarks.md; with --quick a temp file]. The plot goes next to it.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the benchmarks build their corpora and indexes [default: a new temp folder]. A folder kept "
                   "from an earlier report is reused where the pipeline is incremental: retrieval/triples-minilm "
                   "then skips embedding musique-100 again (about 20 minutes with MiniLM on 2 cores).")
def report(quick: bool, out: Path | None, workdir: Path | None) -> None:
    """Run every benchmark and regenerate docs/benchmarks.md and docs/pruning_scaling.png."""
    from pathrag_lab.bench.report import build_report

    path = build_report(quick=quick, out=out, workdir=workdir,
                        log=lambda msg: console.print(msg, highlight=False, markup=False))
    console.print(f"wrote {path}", highlight=False, markup=False)


@bench.command("ingest")
@click.option("--docs", "n_docs", default=1000, show_default=True, help="Number of generated documents.")
@click.option("--repeats", default=3, show_default=True, help="Runs per measurement (the median is reported).")
@click.option("--workdir", type=click.Path(path_type=Path), default=None, help="Where to generate (default: a temp dir).")
@_update_docs_option
@click.option("--json", "as_json", is_flag=True)
def bench_ingest(n_docs: int, repeats: int, workdir: Path | None, update_docs: Path | None, as_json: bool) -> None:
    """Generate a corpus and measure full ingest and re-ingest after one file changed."""
    from pathrag_lab.bench.ingest import run_ingest_bench

    started = time.perf_counter()
    try:
        result = run_ingest_bench(n_docs=n_docs, repeats=repeats, workdir=workdir)
    except ValueError as exc:   # a --docs too small for the corpus's layout: say so, no traceback
        raise click.BadParameter(str(exc), param_hint="--docs") from exc
    if update_docs is not None:
        from dataclasses import replace

        from pathrag_lab.bench.report import FULL, ingest_section
        from pathrag_lab.bench.report_sections import splice

        splice(update_docs, "Ingest", ingest_section(result, replace(FULL, ingest_docs=n_docs, ingest_repeats=repeats))
               + "\n\n" + _measured(started))
    if as_json:
        click.echo(json.dumps(result, indent=1))
    else:
        print_table(list(result["rows"][0]), [tuple(r.values()) for r in result["rows"]], title=result["title"])


@bench.command("scale")
@click.option("--size-mb", default=100.0, show_default=True, help="Size of the larger generated corpus (MB of text).")
@click.option("--files", default=10_000, show_default=True, help="Files of the larger corpus.")
@click.option("--small-fraction", default=0.25, show_default=True,
              help="The smaller corpus is this fraction of the larger (size and files): two sizes show the growth.")
@click.option("--big-txt-mb", default=40.0, show_default=True, help="Size of the single large .txt file.")
@click.option("--jsonl-lines", default=200_000, show_default=True, help="Lines of the single large JSONL file.")
@click.option("--workdir", type=click.Path(path_type=Path), default=None,
              help="Where to generate and index (default: a temp dir); results.json is kept there.")
@click.option("--keep", is_flag=True, help="Keep the corpora and homes after each step.")
@click.option("--parts", type=click.Choice(["all", "corpus", "files"]), default="all", show_default=True,
              help="corpus: the two corpus sizes and the edit; files: the large .txt and JSONL files.")
@click.option("--memory-mb", default=0.0, show_default=True,
              help="Also a full build of this size (files in proportion; larger than --size-mb), so the memory "
                   "growth is read between --size-mb and it, e.g. 300.")
@click.option("--markdown", "markdown_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the report section (## Scale) to this file.")
@click.option("--update-docs", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Splice the results into this report (e.g. docs/benchmarks.md) as its `## Scale` section.")
@click.option("--json", "as_json", is_flag=True)
def bench_scale(size_mb: float, files: int, small_fraction: float, big_txt_mb: float, jsonl_lines: int,
                workdir: Path | None, keep: bool, parts: str, memory_mb: float, markdown_out: Path | None,
                update_docs: Path | None, as_json: bool) -> None:
    """Peak memory and throughput of full offline indexes at two corpus sizes, one edit, one huge file."""
    from pathrag_lab.bench.report import scale_section
    from pathrag_lab.bench.scale import run_scale_bench

    if memory_mb and memory_mb <= size_mb:
        raise click.BadParameter(f"{memory_mb:g} must be larger than --size-mb {size_mb:g} (or 0: no third build)",
                                 param_hint="--memory-mb")
    result = run_scale_bench(size_mb=size_mb, files=files, small_fraction=small_fraction, big_txt_mb=big_txt_mb,
                             jsonl_lines=jsonl_lines, workdir=workdir, log=_log(as_json), keep=keep,
                             parts=parts, memory_mb=memory_mb)
    section = scale_section(result)
    if markdown_out:
        markdown_out.write_text(section + "\n")
    _publish(section, "Scale", update_docs, as_json, json.dumps(result, indent=1), before="Retrieval recall")


ROW_LABELS = {"rule": "rule", "seeds": "seeds", "nodes": "nodes", "edges": "edges",
              "max_seed_degree": "max seed degree", "generate_s": "generate s", "build_ms": "build ms",
              "p50_ms": "p50 ms", "p95_ms": "p95 ms", "cpu_p95_ms": "cpu p95 ms", "mean_paths": "paths/query"}
SUMMARY_KEYS = ("variant", "rule", "seeds", "nodes", "edges", "n_queries", "build_ms", "p50_ms", "p95_ms",
                "cpu_p95_ms", "unknown_seeds")


@bench.command("pruning")
@click.option("--edges", "edges_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Graph as source<TAB>target lines (undirected).")
@click.option("--seeds", "seeds_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="One JSON list of node names per line (default: generated from the graph, see --seed-kind).")
@click.option("--generate", is_flag=True, help="Benchmark synthetic preferential-attachment graphs instead of --edges.")
@click.option("--edges-count", "edge_counts", type=int, multiple=True,
              help="Edge count of a generated graph; repeat for several sizes [default: 1e3 1e4 1e5 1e6].")
@click.option("--m", "m", default=10, show_default=True, help="Edges added per node by the generator.")
@click.option("--variant", type=click.Choice(["paper", "reference"]), default="paper", show_default=True)
@click.option("--seed-kind", "seed_kind", type=click.Choice(["random", "hub", "both"]), default="random",
              show_default=True,
              help="Generated seed sets: 'random' (related clusters plus unrelated nodes, mostly ordinary nodes), "
                   "'hub' (the N highest-degree nodes of the graph, what a question naming countries retrieves) "
                   "or both.")
@click.option("--rules", "rules", type=click.Choice(["default", "literal", "seed_pass", "both"]), default="default",
              show_default=True,
              help="Early-stop rule of the paper variant: 'default' (the one queries use, the paper's literal "
                   "early stop), 'literal', 'seed_pass' (seeds always pass their first hop) or both.")
@click.option("--queries", "n_queries", default=100, show_default=True, help="Generated seed sets per graph.")
@click.option("--n-seeds", default=40, show_default=True, help="Retrieved nodes per generated seed set (N).")
@click.option("--alpha", default=0.8, show_default=True, help="Decay rate.")
@click.option("--theta", type=float, default=None, help="Early-stop threshold [default: 0.05 paper, 0.3 reference].")
@click.option("--max-hops", type=int, default=None, help="Hop limit [default: 4 paper, 3 reference].")
@click.option("--top-k", default=15, show_default=True, help="Paths kept per query.")
@click.option("--time-budget", type=float, default=None,
              help="Stop timing a graph after this many seconds (useful for the exhaustive reference variant).")
@click.option("--seed", default=0, show_default=True, help="Random seed for generated graphs and seed sets.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a latency-vs-size PNG of the query-default rule (with --generate; needs matplotlib).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def pruning(edges_path: Path | None, seeds_path: Path | None, generate: bool, edge_counts: tuple[int, ...], m: int,
            variant: str, seed_kind: str, rules: str, n_queries: int, n_seeds: int, alpha: float,
            theta: float | None, max_hops: int | None, top_k: int, time_budget: float | None, seed: int,
            plot_path: Path | None, as_json: bool) -> None:
    """Time flow-based path pruning per query (p50/p95) on --edges, or on generated graphs with --generate.

    By default: the paper variant under the rule queries use, on random seed sets. `--seed-kind both --rules
    both` adds hub seeds and the seed_pass rule (the report's pruning section)."""
    from pathrag_lab.bench.pruning import (
        DEFAULT_EDGE_COUNTS,
        RULES,
        default_rule,
        load_edges_tsv,
        load_seeds_jsonl,
        plot_scaling,
        resolve_rules,
        resolve_seed_kinds,
        rule_label,
        run_bench,
        scaling_bench,
        seed_sets_for,
    )

    params = {"alpha": alpha, "theta": theta, "max_hops": max_hops, "top_k": top_k}
    if generate == (edges_path is not None):
        raise click.UsageError("give exactly one of --edges EDGES.tsv or --generate")
    if edges_path is None and seeds_path is not None:
        raise click.UsageError("--seeds needs --edges (generated graphs get generated seed sets)")
    if seeds_path is not None and seed_kind != "random":
        raise click.UsageError("--seed-kind generates seed sets; it does not apply to a --seeds file")
    if variant == "reference" and rules != "default":
        raise click.UsageError("--rules applies to the paper variant (the reference code has no early-stop rule)")
    rule_names = ["reference"] if variant == "reference" else list(resolve_rules(rules))
    kinds = resolve_seed_kinds(seed_kind)
    described = f"{', '.join(rule_names)} rule{'s' if len(rule_names) > 1 else ''} (default: {default_rule()})"
    try:
        if generate:
            rows = scaling_bench(edge_counts or DEFAULT_EDGE_COUNTS, n_queries=n_queries, n_seeds=n_seeds,
                                 variant=variant, m=m, seed=seed, time_budget_s=time_budget,
                                 seed_kinds=kinds, rules=rule_names if variant == "paper" else ("default",),
                                 **params)
            if plot_path is not None:
                plot_scaling(rows, plot_path)
            if as_json:
                click.echo(json.dumps({"rows": rows}, indent=1))
            else:
                _table(list(ROW_LABELS.values()),
                       [[rule_label(r) if k == "rule" else r[k] for k in ROW_LABELS] for r in rows],
                       title=f"Path pruning, {variant} variant, {described}, N={n_seeds} seeds, "
                             f"{n_queries} queries per graph")
                if plot_path is not None:
                    click.echo(f"plot written to {plot_path}")
            return
        if plot_path is not None:
            raise click.UsageError("--plot needs --generate (it plots latency against graph size)")
        view = load_edges_tsv(edges_path)
        inputs = ([("file", load_seeds_jsonl(seeds_path))] if seeds_path is not None
                  else [(kind, seed_sets_for(view, kind, n_queries, n_seeds=n_seeds, seed=seed)) for kind in kinds])
        results = []
        for kind, seed_sets in inputs:
            for rule in rule_names:
                extra = {} if rule == "reference" else {"seed_pass": RULES[rule]}
                result = run_bench(view, seed_sets, variant=variant, time_budget_s=time_budget, **params, **extra)
                results.append({**result, "rule": rule, "default_rule": rule == default_rule(), "seeds": kind})
    except (ValueError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(results[0] if len(results) == 1 else {"results": results}, indent=1))
        return
    _table(list(SUMMARY_KEYS), [[rule_label(r) if k == "rule" else r[k] for k in SUMMARY_KEYS] for r in results],
           title=f"Path pruning on {edges_path}")
    unknown = sum(r["unknown_seeds"] for r in results) // len(results)
    if unknown:
        click.echo(f"note: {unknown} seed names were not in the graph and were skipped")


@bench.command("startup")
@click.option("--repeats", default=5, show_default=True, help="Measured runs per command (the median is reported).")
@click.option("--baseline", default=None, metavar="REV",
              help="Also measure this git revision's code (e.g. 784bdaa) in the same run, for a before/after.")
@_update_docs_option
@click.option("--json", "as_json", is_flag=True)
def startup(repeats: int, baseline: str | None, update_docs: Path | None, as_json: bool) -> None:
    """Wall and CPU seconds of whole `pathrag` invocations (--version, --help, sql, status, ask, no-op index), medians.
    ``--update-docs`` replaces the report's "CLI start-up" section with this run's."""
    from pathrag_lab.bench.startup import run_startup_bench

    if repeats < 1:
        raise click.UsageError(f"--repeats {repeats} must be at least 1")
    started = time.perf_counter()
    try:
        result = run_startup_bench(repeats=repeats, baseline=baseline, log=_log(as_json))
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    if update_docs is not None:
        from pathrag_lab.bench.report import machine_info, machine_stamp, startup_section
        from pathrag_lab.bench.report_sections import splice

        splice(update_docs, "CLI start-up", startup_section(result) + (
            f"\n\n_Measured {machine_stamp(machine_info())}; `pathrag bench startup` ran "
            f"{time.perf_counter() - started:.0f} s._"))
    if as_json:
        click.echo(json.dumps(result, indent=1))
        return
    columns = list(result["rows"][0])
    _table(columns, [[r[c] for c in columns] for r in result["rows"]],
           title=f"CLI start-up, median of {repeats} runs" + (f" (baseline {baseline})" if baseline else ""))


@bench.command("dagster")
@click.option("--repeats", default=3, show_default=True, help="Measurements per figure (the median is reported).")
@click.option("--files", default=10_000, show_default=True, help="Files in the folder for the sensor tick time.")
@click.option("--new-files", default=1000, show_default=True, help="New files dropped at once (runs requested).")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where to generate folders and homes (default: a temp dir).")
@click.option("--update-docs", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Splice the results into this report as its `## Dagster` section (e.g. docs/benchmarks.md).")
@click.option("--json", "as_json", is_flag=True)
def bench_dagster(repeats: int, files: int, new_files: int, workdir: Path | None, update_docs: Path | None,
                  as_json: bool) -> None:
    """Sensor latency and tick time at scale, runs per batch, Dagster run start-up, what Dagster costs the CLI."""
    if repeats < 1 or files < 1 or new_files < 1:
        raise click.UsageError("--repeats, --files and --new-files must be at least 1")
    from pathrag_lab.bench.dagster import markdown_section, run_dagster_bench, to_json

    result = run_dagster_bench(repeats=repeats, files=files, new_files=new_files, workdir=workdir,
                               log=_log(as_json))
    _publish(markdown_section(result), "Dagster", update_docs, as_json, to_json(result), before="Scale")


@bench.command("vectors")
@click.option("--docs", "n_docs", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Documents in the generated corpus.")
@click.option("--runs", type=click.IntRange(min=2), default=10, show_default=True,
              help="Index runs per series, the first build included.")
@click.option("--pause", type=click.FloatRange(min=0), default=None,
              help="Seconds before each edited run (default: the version retention + 5 s).")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where to generate the corpus and the home (default: a temp dir).")
@_update_docs_option
@_json_option
def bench_vectors(n_docs: int, runs: int, pause: float | None, workdir: Path | None, update_docs: Path | None,
                  as_json: bool) -> None:
    """The LanceDB folder's size and kept versions over repeated index runs (touched files, one edit per run)."""
    from pathrag_lab.bench.vectors import HEADING, markdown_section, run_vectors_bench, to_json

    result = run_vectors_bench(n_docs=n_docs, runs=runs, pause=pause, workdir=workdir, log=_log(as_json))
    _publish(markdown_section(result), HEADING, update_docs, as_json, to_json(result), before="Answers through a local LLM")


@bench.command("kills")
@click.option("--docs", "n_docs", type=click.IntRange(min=1), default=300, show_default=True,
              help="Documents in the generated corpus.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the corpus and the homes go (default: a temp dir).")
@_update_docs_option
@_json_option
def bench_kills(n_docs: int, workdir: Path | None, update_docs: Path | None, as_json: bool) -> None:
    """kill -9 of `pathrag index` at 5 points of a run, then a plain `pathrag index`: completes, tables as clean."""
    from pathrag_lab.bench.kills import HEADING, markdown_section, run_kills_bench, to_json

    result = run_kills_bench(n_docs=n_docs, workdir=workdir, log=_log(as_json))
    _publish(markdown_section(result), HEADING, update_docs, as_json, to_json(result), before="Offline embedder width")


@bench.command("corruption")
@click.option("--docs", "n_docs", type=click.IntRange(min=1), default=100, show_default=True,
              help="Documents in the generated corpus.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the corpus and the homes go (default: a temp dir).")
@_update_docs_option
@_json_option
def bench_corruption(n_docs: int, workdir: Path | None, update_docs: Path | None, as_json: bool) -> None:
    """Each store file damaged in turn: status --check names it, ask/index say one line, the named repair restores."""
    from pathrag_lab.bench.corruption import HEADING, markdown_section, run_corruption_bench

    result = run_corruption_bench(n_docs=n_docs, workdir=workdir, log=_log(as_json))
    _publish(markdown_section(result), HEADING, update_docs, as_json, json.dumps(result, indent=1),
             before="Offline embedder width")


@bench.command("faults")
@click.option("--docs", "n_docs", type=click.IntRange(min=1), default=40, show_default=True,
              help="Documents in the generated corpus.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the corpus and the homes go (default: a temp dir).")
@_update_docs_option
@_json_option
def bench_faults(n_docs: int, workdir: Path | None, update_docs: Path | None, as_json: bool) -> None:
    """An LLM build through a scripted endpoint failing on a share of its requests (429, 500, hangs, trickles,
    malformed, schema-violating, empty, dropped): does the run complete with the good chunks, and the next one
    with the rest."""
    from pathrag_lab.bench.faults import HEADING, markdown_section, run_faults_bench

    result = run_faults_bench(n_docs=n_docs, workdir=workdir, log=_log(as_json))
    _publish(markdown_section(result), HEADING, update_docs, as_json, json.dumps(result, indent=1),
             before="Offline embedder width")


@bench.command("sql-memory")
@click.option("--docs", "n_docs", type=click.IntRange(min=1), default=300, show_default=True,
              help="Documents in the generated corpus.")
@click.option("--memory-limit", default="256MB", show_default=True, help="PATHRAG_DUCKDB_MEMORY_LIMIT of the runs.")
@click.option("--timeout", "timeout_s", type=click.IntRange(min=1), default=30, show_default=True,
              help="pathrag sql --timeout of the runs.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the corpus and the home go (default: a temp dir).")
@_update_docs_option
@_json_option
def bench_sql_memory(n_docs: int, memory_limit: str, timeout_s: int, workdir: Path | None, update_docs: Path | None,
                     as_json: bool) -> None:
    """pathrag sql's peak memory and wall time against its limits on cross joins that grow without bound."""
    from pathrag_lab.bench.sql_memory import HEADING, markdown_section, run_sql_memory_bench

    result = run_sql_memory_bench(n_docs=n_docs, memory_limit=memory_limit, timeout_s=timeout_s, workdir=workdir,
                                  log=_log(as_json))
    _publish(markdown_section(result), HEADING, update_docs, as_json, json.dumps(result, indent=1),
             before="Offline embedder width")


@bench.command("answer-page")
@click.option("--rounds", type=click.IntRange(min=1), default=20, show_default=True, help="Pages made.")
@_update_docs_option
@_json_option
def bench_answer_page(rounds: int, update_docs: Path | None, as_json: bool) -> None:
    """What drawing an answer costs: an answer with 15 paths read from the tables and rendered as a page."""
    from pathrag_lab.bench.answer_page import markdown_section, run_answer_page_bench

    result = run_answer_page_bench(rounds=rounds)
    _publish(markdown_section(result), "Drawing an answer", update_docs, as_json, json.dumps(result, indent=1),
             before="Offline embedder width")


@bench.command("fanout")
@click.option("--docs", "n_docs", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Documents in the generated corpus.")
@click.option("--workers", default="1,2,4", show_default=True, help="Shard worker counts, comma-separated.")
@click.option("--shards", type=click.IntRange(min=1, max=1024), default=4, show_default=True,
              help="Shards of every run.")
@click.option("--delay", type=click.FloatRange(min=0), default=0.2, show_default=True,
              help="Seconds the scripted LLM server waits before each answer.")
@click.option("--query-rounds", type=click.IntRange(min=1), default=5, show_default=True,
              help="Times each sample question is asked per vector store.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the corpus, the homes and the logs go (default: a temp dir).")
@_update_docs_option
@_json_option
def bench_fanout(n_docs: int, workers: str, shards: int, delay: float, query_rounds: int, workdir: Path | None,
                 update_docs: Path | None, as_json: bool) -> None:
    """extract_fanout on 1, 2, 4 dagster-celery workers (Redis, moto S3) against one process; query p50 with LanceDB
    on moto's S3 server against the home folder (the distributed extra and redis-server)."""
    try:
        counts = tuple(int(w) for w in workers.split(","))
    except ValueError:
        raise click.UsageError(f"--workers {workers!r} must be whole numbers separated by commas, e.g. 1,2,4") from None
    if not counts or min(counts) < 1:
        raise click.UsageError(f"--workers {workers!r}: every count must be at least 1")
    from pathrag_lab.bench.fanout import HEADING, ServiceUnavailable, markdown_section, run_fanout_bench, to_json

    try:
        result = run_fanout_bench(n_docs=n_docs, workers=counts, shards=shards, delay=delay,
                                  query_rounds=query_rounds, workdir=workdir, log=_log(as_json))
    except ServiceUnavailable as exc:
        raise click.ClickException(str(exc)) from None
    _publish(markdown_section(result), HEADING, update_docs, as_json, to_json(result), before="Scale")


@bench.command("offline-width")
@_dataset_option("corpus.jsonl, questions.jsonl with gold_ids")
@_update_docs_option
@_json_option
def bench_offline_width(dataset_dir: Path, update_docs: Path | None, as_json: bool) -> None:
    """Passage recall against bytes per vector for the offline embedder's width (the default's justification)."""
    from pathrag_lab.bench.offline_width import HEADING, markdown_section, run_width_bench, to_json

    result = run_width_bench(dataset_dir, log=_log(as_json))
    _publish(markdown_section(result), HEADING, update_docs, as_json, to_json(result), before="Concurrent asks")


@bench.command("quantized")
@_dataset_option("corpus.jsonl, questions.jsonl with gold_ids")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the ONNX export and its int8 file go (default: a temp dir).")
@_update_docs_option
@_json_option
def bench_quantized(dataset_dir: Path, cache: Path | None, update_docs: Path | None, as_json: bool) -> None:
    """Recall and speed of all-MiniLM-L6-v2 quantized to int8 against the full model (local-embeddings-onnx extra)."""
    import tempfile

    from pathrag_lab.bench.quantized import HEADING, markdown_section, run_quantized_bench, to_json
    from pathrag_pipeline.llm.embedding import EmbeddingError

    try:
        result = run_quantized_bench(dataset_dir, cache or Path(tempfile.mkdtemp(prefix="pathrag-q8-")),
                                     log=_log(as_json))
    except (ImportError, EmbeddingError) as exc:
        raise click.ClickException(f"{exc}; install `.[local-embeddings-onnx]`") from None
    _publish(markdown_section(result), HEADING, update_docs, as_json, to_json(result), before="Path pruning scaling")


@bench.command("concurrency")
@click.option("--asks", type=click.IntRange(min=2), default=50, show_default=True,
              help="`pathrag ask` processes started at once.")
@click.option("--single", type=click.IntRange(min=1), default=5, show_default=True,
              help="Asks run one at a time for the reference median.")
@_dataset_option("corpus.jsonl, questions.jsonl, triples.jsonl")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the index lives (default: a temp dir).")
@_update_docs_option
@_json_option
def bench_concurrency(asks: int, single: int, dataset_dir: Path, workdir: Path | None, update_docs: Path | None,
                      as_json: bool) -> None:
    """Many `pathrag ask` processes at once on the musique-100 index, idle and with an index run going."""
    from pathrag_lab.bench.concurrency import HEADING, markdown_section, run_concurrency_bench, to_json

    result = run_concurrency_bench(asks=asks, single=single, dataset=dataset_dir, workdir=workdir, log=_log(as_json))
    _publish(markdown_section(result), HEADING, update_docs, as_json, to_json(result),
             before="Answers through a local LLM")


@bench.command("local-extraction")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=Path("bench-local-extraction"),
              show_default=True, help="Where the joined model, the homes and the server logs go (kept for inspection).")
@click.option("--modes", default=",".join(("json", "md_json", "tools", "json_schema")), show_default=True,
              help="LLM modes to run, comma-separated.")
@click.option("--files", default=",".join(("aldermere_university.md", "the_varne_review.txt",
                                           "varne_valley_railway.md")), show_default=True,
              help="Files of data/sample/ to index, comma-separated (each is ~2 chunks; a chunk takes a small "
                   "model minutes on 2 cores).")
@_update_docs_option
@_json_option
def bench_local_extraction(workdir: Path, modes: str, files: str, update_docs: Path | None, as_json: bool) -> None:
    """The small local models in every LLM mode extracting the sample documents through a real llama.cpp server."""
    from pathrag_lab.bench.llm_answers import BenchSetupError
    from pathrag_lab.bench.local_extraction import HEADING, markdown_section, run_local_extraction_bench, to_json

    chosen = tuple(m.strip() for m in modes.split(",") if m.strip())
    try:
        result = run_local_extraction_bench(workdir.resolve(), modes=chosen,
                                            files=tuple(f.strip() for f in files.split(",") if f.strip()),
                                            log=_log(as_json))
    except BenchSetupError as exc:
        raise click.ClickException(str(exc)) from None
    _publish(markdown_section(result), HEADING, update_docs, as_json, to_json(result),
             before="Answers through a local LLM")


@bench.command("retrieval")
@_dataset_option("corpus.jsonl, questions.jsonl, triples.jsonl")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Evaluate only the first N questions.")
@click.option("--no-hop-check", is_flag=True,
              help="Skip the second check on the rows' single-hop sub-questions (an ORACLE decomposition: "
                   "reported, never used to choose anything).")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the evaluation indexes live; reuse one to skip re-indexing (default: a temp dir).")
@click.option("--update-docs", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Splice the results into this report as its `## Retrieval recall` section.")
@click.option("--json", "as_json", is_flag=True)
def bench_retrieval(dataset_dir: Path, limit: int | None, no_hop_check: bool, workdir: Path | None,
                    update_docs: Path | None, as_json: bool) -> None:
    """Recall@k of every mode, the flat baselines and the path ablations (the report's retrieval section):
    triples + MiniLM when the local-embeddings extra is installed, and offline; plus the oracle hop-question
    check. Baselines and ablations carry paired 95% bootstrap intervals against path."""
    from pathrag_lab.bench.report import retrieval_section, retrieval_runs

    started = time.perf_counter()
    runs = retrieval_runs(dataset_dir, limit, workdir or Path(tempfile.mkdtemp(prefix="pathrag-retrieval-")),
                          _log(as_json), hop_check=not no_hop_check)
    if not runs:
        raise click.ClickException(f"{dataset_dir} has no questions.jsonl to evaluate")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    section = (retrieval_section(runs) + f"\n\n_Measured {stamp} with `pathrag bench retrieval`, "
               f"{(time.perf_counter() - started) / 60:.1f} min, 2 cores shared; recall figures are deterministic, "
               "times are not._")
    _publish(section, "Retrieval recall", update_docs, as_json, json.dumps(runs, indent=1), before="NeuroPath retrieval")


@bench.command("neuropath")
@_dataset_option("corpus.jsonl, questions.jsonl")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Evaluate only the first N questions.")
@click.option("--minilm/--no-minilm", default=None,
              help="Also run with the MiniLM embedder (default: when the local-embeddings extra is installed).")
@click.option("--triples", is_flag=True,
              help="Also run on the graph imported from the dataset's triples (offline embedder).")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the evaluation indexes live (default: a temp dir).")
@click.option("--update-docs", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Splice the results into this report as its `## NeuroPath retrieval` section.")
@click.option("--json", "as_json", is_flag=True)
def bench_neuropath(dataset_dir: Path, limit: int | None, minilm: bool | None, triples: bool, workdir: Path | None,
                    update_docs: Path | None, as_json: bool) -> None:
    """NeuroPath recall@k, LLM tokens and ms per query beside path mode and the BM25/dense baselines."""
    from pathrag_lab.bench.neuropath import markdown_section, run_neuropath_bench

    from pathrag_lab.bench.report import machine_info, machine_stamp

    started = time.perf_counter()
    runs = run_neuropath_bench(dataset_dir, workdir or Path(tempfile.mkdtemp(prefix="pathrag-neuropath-")),
                               limit=limit, minilm=minilm, triples=triples, log=_log(as_json))
    section = (markdown_section(runs) + f"\n\n_Measured {machine_stamp(machine_info())} with `pathrag bench neuropath"
               f"{' --triples' if triples else ''}`, {(time.perf_counter() - started) / 60:.1f} min; recall figures "
               "are deterministic, times are not (each table's load average says how busy the cores were)._")
    _publish(section, "NeuroPath retrieval", update_docs, as_json, json.dumps(runs, indent=1))


@bench.command("real-folders")
@click.option("--only", "names", multiple=True, help="Only this folder of the built-in list (repeatable): "
              "git-doc, postgresql-doc, sqlite3-doc, sphinx-doc, flask-doc, python3-doc, and the encyclopedic sets sample, "
              "musique-100.")
@click.option("--folder", "extra", multiple=True, metavar="NAME=DIR=QUESTIONS",
              help="Also this folder with its own questions (JSONL of {id, question, answers, names}), e.g. a "
                   "held-out one.")
@click.option("--modes", default="path,naive", show_default=True, help="Query modes to answer in, comma-separated.")
@click.option("--baseline", default=None, metavar="REV", help="Also build and ask with this git revision's code.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the homes here (default: a temporary folder, removed).")
@_update_docs_option
@_json_option
def real_folders(names: tuple[str, ...], extra: tuple[str, ...], modes: str, baseline: str | None,
                 workdir: Path | None, update_docs: Path | None, as_json: bool) -> None:
    """Real documentation folders (Debian's git-doc, postgresql-doc-15, sqlite3-doc, sphinx-doc, python-flask-doc,
    python3-doc) indexed offline as a user would: template entities among the 50 most-mentioned, names asked about that are
    entities, answers that state the fact in their first 400 characters per mode, index time and memory, and the
    wall time of a new `pathrag ask` process."""
    from pathrag_lab.bench.real_folders import ENCYCLOPEDIC, FOLDERS, markdown, run_real_folders_bench

    unknown = [n for n in names if n not in FOLDERS and n not in ENCYCLOPEDIC]
    if unknown:
        raise click.BadParameter(f"unknown folder(s) {', '.join(unknown)}; the list: "
                                 f"{', '.join([*FOLDERS, *ENCYCLOPEDIC])}",
                                 param_hint="--only")
    folders: dict[str, tuple[Path, Path]] = {}
    for spec in extra:
        parts = spec.split("=")
        if len(parts) != 3 or not Path(parts[1]).is_dir() or not Path(parts[2]).is_file():
            raise click.BadParameter(f"{spec!r}: give NAME=DIR=QUESTIONS with an existing folder and question file",
                                     param_hint="--folder")
        folders[parts[0]] = (Path(parts[1]).resolve(), Path(parts[2]).resolve())
    started = time.perf_counter()
    result = run_real_folders_bench(list(names) or (None if not folders else []), folders,
                                    tuple(m.strip() for m in modes.split(",") if m.strip()), baseline, workdir,
                                    log=_log(as_json))
    section = "## Real documentation folders\n\n" + markdown(result) + "\n\n" + _measured(started)
    _publish(section, "Real documentation folders", update_docs, as_json, json.dumps(result, indent=1))


@bench.command("html")
@click.option("--pages", default=40, show_default=True, help="Pages per folder (every k-th by path).")
@_update_docs_option
@_json_option
def html(pages: int, update_docs: Path | None, as_json: bool) -> None:
    """Main-content extraction of HTML documentation pages (Debian's sphinx-doc, postgresql-doc-15, git-doc,
    sqlite3-doc): this indexer's reading against trafilatura, readability-lxml, jusText, resiliparse and inscriptis
    (the `bench` extra): furniture kept, content kept against a hand-made reference, structure, time."""
    from pathrag_lab.bench.html_extractors import DEBIAN_FOLDERS, INDEXER, compare, render_markdown
    from pathrag_lab.bench.report import machine_info

    folders = {name: path for name, path in DEBIAN_FOLDERS.items() if path.is_dir()}
    if not folders:
        raise click.ClickException("no documentation folder installed: apt-get install sphinx-doc postgresql-doc-15 "
                                   "git-doc sqlite3-doc")
    started = time.perf_counter()
    result = compare(folders, pages)
    intro = ("Reproduce: `pip install -e '.[bench]' && pathrag bench html --update-docs docs/benchmarks.md` (the four "
             "folders: `apt-get install sphinx-doc postgresql-doc-15 git-doc sqlite3-doc`; the `bench` extra needs pip "
             "24 or later: pip 23.2 stops on readability-lxml's `lxml[html_clean]`).\n\n"
             f"Every k-th page by path of each folder ({pages} a folder), read by each library. *Furniture*: lines of "
             "the page read whole that half of the folder's sampled pages repeat, outside a hand-made reference region "
             "(one CSS selector per generator, chosen by reading the pages: an oracle of what is content). *Recall*: "
             "the reference's lines, characters, headings, code blocks, table cells, prose list items and definition "
             "terms found in the output. The indexer's choice (first row): its own rendering of the page, each block "
             "kept where trafilatura keeps its text, the body given to trafilatura as an <article> when the page has "
             "none: trafilatura keeps the least furniture with the most content, but its own output loses half of the "
             "headings (three quarters on DocBook and SQLite pages, without the <article>) and code blocks' lines; "
             "resiliparse is 15 times faster but drops every short bulleted list and keeps DocBook's and SQLite's "
             "menus; readability-lxml and jusText lose whole sections. *What an LLM reads* (issue 58) counts every page "
             "of each folder, not the sample: the tokens of the page's text read whole against those of the main "
             "content the indexer stores, which an LLM extraction reads.\n\n")
    chosen = (INDEXER, "trafilatura xml, body as <article>", "resiliparse minimal_html, nav skipped")
    section = "## HTML main content\n\n" + intro + render_markdown(result, chosen=chosen) + "\n" + _measured(started)
    _publish(section, "HTML main content", update_docs, as_json, json.dumps(result, indent=1, default=str))


@bench.command("real-folders-llm")
@click.option("--folder", "name", default="git-doc", show_default=True, help="A folder of `bench real-folders`.")
@click.option("--modes", default="path,naive,local,global,hybrid", show_default=True)
@click.option("--limit", default=None, type=int, help="Only the first N questions.")
@click.option("--budget", default=1000, show_default=True, help="Token budget of each prompt.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Where the offline index (reused from a `bench real-folders --workdir` run) and the model live.")
@click.option("--base-url", default=None, help="An OpenAI-compatible endpoint instead of the bench's own llama.cpp "
                                               "server (with --model).")
@click.option("--model", default=None)
@_update_docs_option
@_json_option
def real_folders_llm(name: str, modes: str, limit: int | None, budget: int, workdir: Path, base_url: str | None,
                     model: str | None, update_docs: Path | None, as_json: bool) -> None:
    """One real folder's questions answered by an LLM (default: Qwen2.5-Coder-0.5B through the bench's own llama.cpp
    server, docs/llm-endpoints.md), per mode: exact match, token F1, answer in the prompt."""
    from pathrag_lab.bench.llm_answers import check_endpoint
    from pathrag_lab.bench.real_folders import FOLDERS, llm_markdown, run_folder_llm

    if name not in FOLDERS:
        raise click.BadParameter(f"{name!r}: one of {', '.join(FOLDERS)}", param_hint="--folder")
    if not FOLDERS[name].path.is_dir():
        raise click.ClickException(f"{name} is not installed: apt-get install {FOLDERS[name].package}")
    check_endpoint("bench real-folders-llm", base_url, model, "qwen2.5-coder-0.5b")
    started = time.perf_counter()
    result = run_folder_llm(name, workdir, base_url=base_url, model=model,
                            modes=tuple(m.strip() for m in modes.split(",") if m.strip()), limit=limit,
                            budget=budget, log=_log(as_json))
    section = "## Real documentation folders through a local LLM\n\n" + llm_markdown(result) + "\n\n" + _measured(started)
    _publish(section, "Real documentation folders through a local LLM", update_docs, as_json,
             json.dumps(result, indent=1))


@bench.command("peers")
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True,
              help="Fresh runs of every step (medians are reported).")
@click.option("--systems", default="ours,lightrag,nano", show_default=True,
              help="Systems to run, comma-separated (ours, lightrag, nano).")
@click.option("--questions", "n_questions", type=click.IntRange(min=1), default=20, show_default=True,
              help="Questions of the dataset (their gold passages are always in the corpus).")
@click.option("--passages", "n_passages", type=click.IntRange(min=1), default=200, show_default=True,
              help="Passages in the corpus (one .txt file each).")
@click.option("--delay", type=click.FloatRange(min=0), default=0.05, show_default=True,
              help="Seconds the scripted server waits before every reply.")
@click.option("--envs", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the peers' virtual environments are created once and reused "
                   "(default ~/.cache/pathrag/peers).")
@_dataset_option("corpus.jsonl, questions.jsonl, triples.jsonl")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the corpus and every system's stores go (default: a temp dir, removed after).")
@_update_docs_option
@_json_option
def bench_peers(repeats: int, systems: str, n_questions: int, n_passages: int, delay: float, envs: Path | None,
                dataset_dir: Path, workdir: Path | None, update_docs: Path | None, as_json: bool) -> None:
    """Ours against LightRAG and nano-graphrag (side environments) through one scripted server: full index, edit,
    delete and query, wall and CPU, calls and tokens, gold titles in the context, as ratios (issue 64)."""
    from pathrag_lab.bench.peers import DEFAULT_ENVS, HEADING, SYSTEMS, markdown_section, run_peers_bench

    chosen = tuple(s.strip() for s in systems.split(",") if s.strip())
    unknown = [s for s in chosen if s not in SYSTEMS]
    if unknown or not chosen:
        raise click.BadParameter(f"{', '.join(unknown) or '(none)'}: give some of {', '.join(SYSTEMS)}",
                                 param_hint="--systems")
    try:
        result = run_peers_bench(dataset_dir, repeats=repeats, systems=chosen, delay=delay, n_questions=n_questions,
                                 n_passages=n_passages, envs=envs or DEFAULT_ENVS, workdir=workdir,
                                 log=_log(as_json))
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    _publish(markdown_section(result), HEADING, update_docs, as_json, json.dumps(result, indent=1))
