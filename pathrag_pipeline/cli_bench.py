"""`pathrag bench indexing`, `pathrag bench query` and `pathrag bench report`.

Registered under the `bench` group by `pathrag_pipeline.cli`; all logic lives in `bench_indexing`,
`bench_query` and `bench_report`.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import click
from rich.table import Table

from pathrag_pipeline.bench_indexing import MUSIQUE, STAGES, llm_bench, musique_bench, offline_bench
from pathrag_pipeline.bench_query import STAGE_ORDER, run_query_bench
from pathrag_pipeline.terminal import make_console

console = make_console()


def _table(columns: list[str], rows: list[list], title: str) -> None:
    table = Table(title=title)
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*["" if v is None else str(v) for v in row])
    console.print(table)


def _log(as_json: bool):
    return (lambda _: None) if as_json else (lambda msg: console.print(f"[dim]{msg}[/dim]", highlight=False))


def _print_indexing(result: dict) -> None:
    off = result.get("offline")
    if off:
        _table(["stage", "full build s", "re-index after 1 edit s"],
               [[s, off["full_s"][s], off["incremental_s"][s]] for s in (*STAGES, "total")],
               title=f"Offline indexing of {off['documents']} documents ({off['chunks']} chunks), medians")
        last = off["incremental"][-1]
        console.print(f"offline extraction: {off['offline_extraction_chunks_per_s']} chunks/s | re-index: "
                      f"{last['chunks_reextracted']} chunk(s) re-extracted, rows re-embedded {last['rows_reembedded']} | "
                      f"full/incremental {off['ratio_full_to_incremental']}x", highlight=False)
    llm = result.get("llm")
    if llm:
        console.print(f"[bold]LLM mode:[/bold] {llm['caveat']}", highlight=False)
        if "skipped" in llm:
            console.print(f"[yellow]LLM mode skipped:[/yellow] {llm['skipped']}", highlight=False)
        else:
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
                          f"{llm['ratio_full_to_incremental_calls']}x", highlight=False)
    mus = result.get("musique")
    if mus:
        _table(["passages", "triples", "entities", "relations", *mus["seconds"]],
               [[mus["passages"], mus["triples"], mus["entities"], mus["relations"], *mus["seconds"].values()]],
               title=f"{mus['dataset']}: ingest + triples import (seconds per stage)")


@click.command("indexing")
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
@click.option("--json", "as_json", is_flag=True)
def indexing(n_docs: int, llm_docs: int | None, repeats: int, edits: int, musique_dir: Path, no_musique: bool,
             workdir: Path | None, as_json: bool) -> None:
    """Full and incremental indexing: offline stage times, LLM call accounting, musique-100 triples import."""
    if n_docs < 1 or repeats < 1 or edits < 1:
        raise click.UsageError(f"--docs {n_docs}, --repeats {repeats} and --edits {edits} must be at least 1")
    log = _log(as_json)
    base = Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-indexing-"))
    result = {"offline": offline_bench(n_docs, repeats=repeats, edits=edits, workdir=base / "offline", log=log)}
    if llm_docs != 0:
        result["llm"] = llm_bench(llm_docs or n_docs, workdir=base / "llm", log=log)
    if not no_musique:
        result["musique"] = musique_bench(musique_dir, workdir=base / "musique", log=log)
        if result["musique"] is None:
            log(f"musique-100 not found at {musique_dir}: skipped")
    if as_json:
        click.echo(json.dumps(result, indent=1))
    else:
        _print_indexing(result)


@click.command("query")
@click.option("--rounds", default=3, show_default=True, help="Times each question is asked per mode.")
@click.option("--json", "as_json", is_flag=True)
def query(rounds: int, as_json: bool) -> None:
    """Query latency per stage on the sample corpus, offline, for every mode (medians)."""
    if rounds < 1:
        raise click.UsageError(f"--rounds {rounds} must be at least 1")
    result = run_query_bench(rounds=rounds, log=_log(as_json))
    if as_json:
        click.echo(json.dumps(result, indent=1))
        return
    stages = [s for s in STAGE_ORDER if any(s in m["median_ms"] for m in result["modes"].values())]
    _table(["mode", *stages, "total median", "total p95"],
           [[mode, *[m["median_ms"].get(s, "") for s in stages], m["total_median_ms"], m["total_p95_ms"]]
            for mode, m in result["modes"].items()],
           title=f"Median ms per stage, {result['questions']} sample questions x {result['rounds']}")


@click.command("report")
@click.option("--quick", is_flag=True, help="Small sizes for a fast smoke run (written to a temp folder by default).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Report path [default: docs/benchmarks.md; with --quick a temp file]. The plot goes next to it.")
def report(quick: bool, out: Path | None) -> None:
    """Run every benchmark and regenerate docs/benchmarks.md and docs/pruning_scaling.png."""
    from pathrag_pipeline.bench_report import build_report

    path = build_report(quick=quick, out=out, log=lambda msg: console.print(msg, highlight=False))
    console.print(f"wrote {path}", highlight=False)
