"""`pathrag bench neuropath`: NeuroPath mode's recall, tokens and time beside path mode and the flat baselines.

Runs ``pathrag eval retrieval --modes neuropath,path,bm25[,dense]`` on a dataset (musique-100 by default) for
each configuration: the offline extractor with the offline hashing embedder, and the same graph with MiniLM
when the local-embeddings extra is installed (optionally the dataset's LLM triples too). Without an LLM the
tracker is the offline one (embedder + BM25 scoring against the question), which every row says.
``markdown_section`` renders the ``## NeuroPath retrieval`` section of docs/benchmarks.md;
``bench.report_sections.splice`` puts it into the report (replacing an older one). ``pathrag bench report`` renders the same section from its own
retrieval runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from pathrag_lab.bench.embedding_runtime import minilm_available, minilm_model
from pathrag_lab.bench.report_sections import repo_path
from pathrag_pipeline.config import Settings

SECTION_TITLE = "## NeuroPath retrieval"
COMPARED = ("neuropath", "path", "bm25", "dense")

Log = Callable[[str], None]


def command_of(dataset: Path, use_triples: bool, model: str, modes: list[str], limit: int | None) -> str:
    return ((f"HF_HUB_OFFLINE=1 PATHRAG_EMBED_MODEL={model} " if model else "")
            + f"pathrag eval retrieval --dataset {repo_path(dataset)}" + (" --use-triples" if use_triples else "")
            + f" --modes {','.join(modes)}" + (f" --limit {limit}" if limit else ""))


def run_neuropath_bench(dataset: Path, workdir: Path, *, limit: int | None = None, minilm: bool | None = None,
                        triples: bool = False, log: Log = print) -> list[dict[str, Any]]:
    """One ``evaluate_retrieval`` run per configuration; each result carries its command and load averages."""
    from pathrag_pipeline.evaluation.retrieval_eval import NEUROPATH_ABLATIONS, evaluate_retrieval

    use_minilm = minilm_available() if minilm is None else minilm
    # the triples graph runs with the offline embedder: embedding it with MiniLM takes half an hour on 2 cores
    configs = [(False, "")] + ([(False, minilm_model())] if use_minilm else []) + ([(True, "")] if triples else [])
    runs = []
    for use_triples, model in configs:
        modes = ["neuropath", "path", "bm25"] + (["dense"] if model else []) + list(NEUROPATH_ABLATIONS)
        env = {"PATHRAG_EMBED_MODEL": model} if model else {}
        settings = Settings.from_env(env=env, home=workdir / "home", docs=dataset)
        log(f"neuropath recall on {dataset.name}: graph from {'triples' if use_triples else 'offline extraction'}, "
            f"embedder {model or 'offline'}")
        load_before = _load()
        evaluation = evaluate_retrieval(
            settings, dataset, limit=limit, use_triples=use_triples, modes=modes,
            workdir=workdir / (("triples" if use_triples else "offline") + ("-minilm" if model else "")))
        runs.append({**evaluation.to_dict(), "command": command_of(dataset, use_triples, model, modes, limit),
                     "load_average": [load_before, _load()]})
    return runs


def _cores() -> int | None:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _load() -> float | None:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def md_table(columns: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table (the report's layout; this module does not import the report, which imports it)."""
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    return "\n".join(lines + ["| " + " | ".join("" if v is None else str(v) for v in row) + " |" for row in rows])


def _f(value: Any, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def markdown_section(runs: list[dict[str, Any]] | None) -> str:
    """The ``## NeuroPath retrieval`` section from evaluation runs that include the ``neuropath`` mode."""
    runs = [r for r in runs or [] if "neuropath" in r.get("modes", {})]
    parts = [SECTION_TITLE]
    if not runs:
        return "\n\n".join(parts + ["**Not filled in by this run:** no retrieval run evaluated `neuropath`. Fill "
                                    "it with `pathrag bench neuropath --update-docs docs/benchmarks.md`."])
    parts.append("\n".join(f"Reproduce: `{r['command']}`  " for r in runs if r.get("command")))
    first = runs[0]
    parts.append(
        f"{first['dataset']}, {first['questions']} questions; recall@k as in \"Retrieval recall\". `neuropath` is "
        "NeuroPath as its paper defines it (docs/methods.md, \"Query modes\"; `np_variant=\"paper\"`): key-entity seeds "
        "expanded by coreference sets, 2-hop path tracking with the coreference sets of expandable nodes, 30 new "
        "candidates per hop pruned by whole-path similarity, the valid paths re-judged every hop, and the union of "
        "the last valid paths' passages with a dense completion. `neuropath:ours` is our earlier variant (seed-only "
        "coreference, every hop's paths kept, newest-triple pruning, RRF merge with a BM25+dense completion). "
        "**With no LLM configured the tracker is a heuristic, not NeuroPath's LLM** (`heuristic:embedder+bm25`: "
        "the model's judgements replaced by the embedder's cosine and BM25 support against the question, fused "
        "by RRF), and every such row says `(heuristic tracker)`; its LLM calls and tokens are 0 by construction. "
        "`LLM tokens/q` counts key-entity and tracking calls (evaluation makes no answer call). Times are medians "
        "per query, end to end (keywords, seeds, tracking, completion retrieval, passage fetch), not counting the "
        "one-off name embedding of the graph. Nothing was tuned on musique-100: the paper's constants (2 hops, 30 "
        "candidates, coreference cosine 0.8, top 5) and the heuristic tracker's (5 valid paths, 3 expanded, 100 "
        "BM25 hits, RRF k=60) were fixed before the first run and not changed after it. Ablations: "
        "`neuropath:tracked` ranks only the tracked paths' passages, `neuropath:completion` only the "
        "post-retrieval completion (question + reasoning chain + requirement), `neuropath:fused` merges them by "
        "RRF instead of the union, `neuropath:1hop` stops tracking after one hop.")
    for run in runs:
        graph = "triples (gpt-3.5 OpenIE)" if run["use_triples"] else f"offline extraction ({run['index'].get('extractor')})"
        loads = run.get("load_average") or []
        load = f"; load average {loads[0]} at start, {loads[1]} at end ({_cores()} cores)" if len(loads) == 2 else ""
        parts.append(f"**Graph: {graph}; embedder {run['index'].get('embedder')}; LLM: {run['llm']}{load}.**")
        keys = [f"recall@{k}" for k in run["ks"]]
        rows = []
        for mode in [m for m in COMPARED if m in run["modes"]] + [m for m in run["modes"] if m not in COMPARED]:
            m = run["modes"][mode]
            label = mode + (f" ({m['note']})" if m.get("note") else "")
            rows.append([label, *[m.get(k) for k in keys], m.get("mean_recall"), _delta(m), _f(m.get("median_ms"), 1),
                         _f(m.get("llm_calls", 0.0), 2), _f(m.get("llm_tokens", 0.0), 0), m.get("failed", 0)])
        parts.append(md_table(["mode", *keys, "mean R", "Δ mean R [95% CI]", "median ms", "LLM calls/q",
                               "LLM tokens/q", "failed"], rows))
        hop_rows = [[mode, f"{hops} ({f['questions']} q)", *[f.get(k) for k in keys]]
                    for mode in COMPARED for hops, f in run["modes"].get(mode, {}).get("by_hops", {}).items()]
        if hop_rows:
            parts.append("By number of hops:\n\n" + md_table(["mode", "hops", *keys], hop_rows))
        parts.append("- " + comparison(run) + ".")
    parts.append(
        "For scale, the NeuroPath paper reports R@2/R@5 of 48.0/62.7 on the full MuSiQue setting (about 11k "
        "passages) with GPT-4o-mini as tracker, against 41.8/55.5 for HippoRAG 2; musique-100 pools 1,890 "
        "passages and no LLM tracked paths here, so compare only like with like.")
    return "\n\n".join(parts)


def _delta(m: dict[str, Any]) -> str:
    """A row's paired difference in mean recall (over k) from its reference row (a neuropath ablation's: the
    default ``neuropath``), with its 95% bootstrap interval and outcome."""
    from pathrag_pipeline.evaluation.bootstrap import format_figures
    from pathrag_pipeline.evaluation.retrieval_eval import MEAN_KEY

    d = (m.get("delta") or {}).get(MEAN_KEY)
    return f"{format_figures(d)} {d['outcome']} vs `{m['vs']}`" if d and m.get("vs") else ""


def comparison(run: dict[str, Any]) -> str:
    """One line: neuropath against each other compared mode of the run, at every k."""
    np_ = run["modes"]["neuropath"]
    out = []
    for mode in (m for m in COMPARED[1:] if m in run["modes"]):
        other = run["modes"][mode]
        figures = ", ".join(f"R@{k} {np_[f'recall@{k}']:.3f} vs {other[f'recall@{k}']:.3f}" for k in run["ks"])
        wins = sum(np_[f"recall@{k}"] > other[f"recall@{k}"] for k in run["ks"])
        verdict = "beats" if wins == len(run["ks"]) else ("does not beat" if wins == 0 else "partly beats")
        out.append(f"{verdict} {mode} ({figures})")
    return "neuropath " + "; ".join(out)
