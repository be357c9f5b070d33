"""`pathrag bench neuropath-llm` and `pathrag bench pooling-llm`: query modes through a real local LLM server.

Starts llama-cpp-python's server with the bench model of ``pathrag bench answers`` (Qwen2.5-Coder-0.5B-Instruct,
the ``[local-llm-model]`` extra; or ``--base-url``/``--model``: any running OpenAI-compatible endpoint) and, on
the dataset's triples graph (MiniLM when its extra is installed), measures one suite of modes on the same
questions:

- **recall** (``evaluate_retrieval``), with the LLM calls and tokens per question and paired bootstrap intervals;
- **answers** (``evaluate_answers``, resumable): EM/F1 of the suite's modes, each answering from its own prompt at
  ``budget`` tokens, with paired intervals.

Suites: ``NEUROPATH`` (the paper's NeuroPath with its LLM tracker, our variant, the heuristic tracker; answers
with ``path`` too) and ``POOLING`` (path mode with Path Pooling's rerank and reselect, the paper's Algorithm 1
and our earlier formula). ``modes_llm_section`` renders a suite's section of docs/benchmarks.md.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pathrag_lab.bench.local_models import DEFAULT_LOCAL_MODEL
from pathrag_lab.bench.neuropath import md_table
from pathrag_lab.bench.report_sections import repo_path

DEFAULT_LIMIT = 50
DEFAULT_BUDGET = 1000
# The suites share one home, so an answer one suite asked (``path``) is reused by the other (same question, same
# per-mode configuration: eval_answers.answer_key). Named for the first suite that used it.
HOME_FOLDER = "neuropath-llm"

Log = Callable[[str], None]


@dataclass(frozen=True)
class Suite:
    command: str               # `pathrag bench <command>`
    heading: str               # its docs/benchmarks.md section
    recall_modes: tuple[str, ...]
    answer_modes: tuple[str, ...]
    about: str                 # what the rows are, for the section's opening paragraph


NEUROPATH = Suite(
    "neuropath-llm", "NeuroPath with an LLM tracker",
    ("neuropath", "neuropath:ours", "neuropath:offline_tracker"),
    ("path", "neuropath", "neuropath:ours", "neuropath:offline_tracker"),
    "`neuropath` is the paper's method with its LLM tracker (its NER and tracking prompts, per-hop coreference, "
    "re-judged paths, whole-path pruning, union with a dense completion); `neuropath:ours` is our earlier variant "
    "with the same LLM; `neuropath:offline_tracker` is the paper's loop with the heuristic tracker (no LLM call for "
    "tracking; its key entities still come from the LLM's NER prompt). LLM calls and tokens per question count the "
    "key entities (or keywords) and the tracking; the answer rows add the answer call. A 0.5B model is a weak "
    "tracker: these rows compare the variants on the same model, not NeuroPath's published GPT-4o-mini figures.")
POOLING = Suite(
    "pooling-llm", "Path Pooling through a local LLM",
    ("path", "path:pool_rerank", "path:pool_reselect", "path:pool_rerank_ours", "path:pool_reselect_ours"),
    ("path", "path:pool_rerank", "path:pool_reselect", "path:pool_rerank_ours", "path:pool_reselect_ours"),
    "`path` is the default path mode; `path:pool_rerank` orders its passages by Path Pooling's pooled triple "
    "scores (the paper's Algorithm 1: max over the kernels, positional score s_min / (i a), unreachable triples "
    "as one-hop kernels), `path:pool_reselect` also lets pooling choose which triples' passages enter; the `_ours` "
    "rows are the same with our earlier formula (mean over kernels, interpolated with the raw score). Pooling "
    "applies to the path mode's triple-level context, as the paper applies it to its host retriever's. LLM calls "
    "and tokens per question count the keyword call of the modes that make one (`path:paper`, the paper's PathRAG, "
    "which every answer run measures beside the default; `path` and its pooling rows take their keywords from the "
    "offline rules); the answer rows add the answer call.")
SUITES = {s.command: s for s in (NEUROPATH, POOLING)}


def run_modes_llm_bench(dataset: Path, workdir: Path, *, suite: Suite = NEUROPATH, limit: int = DEFAULT_LIMIT,
                       budget: int = DEFAULT_BUDGET, base_url: str | None = None, model: str | None = None,
                       time_limit: float | None = None, local: str = DEFAULT_LOCAL_MODEL,
                       log: Log = print) -> dict[str, Any]:
    """Start the local server (unless ``base_url``/``model``), then recall and answers of the suite's modes.
    ``workdir``: ``retrieval/triples[-minilm]`` the dataset's index (shared with ``pathrag bench answers``),
    ``neuropath-llm/home`` the runs (the answers resume; both suites), ``models`` the joined GGUF."""
    from pathrag_lab.bench import llm_answers
    from pathrag_lab.bench.embedding_runtime import minilm_available, minilm_model
    from pathrag_pipeline.evaluation.retrieval_eval import evaluate_retrieval, save_evaluation
    from pathrag_pipeline.storage.store import Store

    served = llm_answers.check_endpoint(suite.command, base_url, model, local)
    embed_model = minilm_model() if minilm_available() else None
    index = workdir / "retrieval" / ("triples" + ("-minilm" if embed_model else ""))
    started = time.perf_counter()
    result: dict[str, Any] = {
        "model": model or served.name, "embedder": embed_model or "offline hashing",
        "dataset": dataset.name, "limit": limit, "budget": budget,
        "suite": suite.command,
        "command": (("HF_HUB_OFFLINE=1 " if embed_model else "") + f"pathrag bench {suite.command}"
                    + llm_answers.local_model_flag(local)
                    + (f" --limit {limit}" if limit != DEFAULT_LIMIT else "")
                    + (f" --budget {budget}" if budget != DEFAULT_BUDGET else "")
                    + (f" --dataset {repo_path(dataset)}" if dataset.name != "musique-100" else "")
                    + " --update-docs docs/benchmarks.md")}

    def run(url: str, name: str) -> None:
        settings = llm_answers.bench_settings(url, name, embed_model, own_server=base_url is None,
                                              home=workdir / HOME_FOLDER / "home")
        log(f"recall through {name} on {limit} questions: {', '.join(suite.recall_modes)}")
        recall = evaluate_retrieval(settings, dataset, modes=list(suite.recall_modes), limit=limit,
                                    use_triples=True, workdir=index, budgets=())
        save_evaluation(Store.for_settings(settings), recall)
        result["recall"] = recall.to_dict()
        grid = llm_answers.answer_all(settings, dataset, index, limit, budget, list(suite.answer_modes), time_limit,
                                      log)
        result["answers"] = grid.to_dict()

    result["server"] = llm_answers.on_endpoint(workdir, base_url, model, run, log, served)
    result.update(machine=llm_answers.machine(), seconds=round(time.perf_counter() - started, 1))
    return result


def _interval(d: dict[str, Any] | None, vs: str | None) -> str:
    from pathrag_pipeline.evaluation.bootstrap import format_figures

    return f"{format_figures(d)} {d['outcome']} vs `{vs}`" if d and vs else ""


def modes_llm_section(r: dict[str, Any]) -> str:
    """A suite's section of docs/benchmarks.md from :func:`run_modes_llm_bench`'s result."""
    from pathrag_pipeline.evaluation.retrieval_eval import MEAN_KEY

    suite = SUITES[r.get("suite", NEUROPATH.command)]
    parts = [f"## {suite.heading}", f"Reproduce: `{r['command']}`"]
    recall = r.get("recall")
    answers = r.get("answers")
    parts.append(
        f"{r['dataset']}, the first {r['limit']} questions, graph from the dataset's triples, embedder "
        f"{r['embedder']}, LLM **{r['model']}** served by llama-cpp-python on this machine "
        f"({(r.get('server') or {}).get('threads', '?')} threads). {suite.about} Δ: paired difference "
        "(10,000 bootstrap resamples, seed 0) over the same questions, \"beats\" only when the 95% interval "
        "lies above zero.")
    if recall:
        keys = [f"recall@{k}" for k in recall["ks"]]
        rows = []
        for mode, m in recall["modes"].items():
            label = f"`{mode}`" + (f" ({m['note']})" if m.get("note") else "")
            rows.append([label, *[m.get(k) for k in keys], m.get("mean_recall"),
                         _interval((m.get("delta") or {}).get(MEAN_KEY), m.get("vs")),
                         f"{m.get('llm_calls', 0.0):.2f}", f"{m.get('llm_tokens', 0.0):.0f}", m.get("failed", 0)])
        parts.append("**Recall** (`pathrag eval retrieval`, no answer call):\n\n" + md_table(
            ["mode", *keys, "mean R", "Δ mean R [95% CI]", "LLM calls/q", "LLM tokens/q", "failed"], rows))
    if answers:
        rows = []
        for mode, m in answers.get("modes", {}).items():
            label = f"`{mode}`" + (f" ({m['note']})" if m.get("note") else "")
            delta = (m.get("delta") or {}).get("f1")
            rows.append([label, f"{m['f1']:.3f}", f"{m['exact_match']:.3f}", f"{m['answer_in_context']:.2f}",
                         _interval(delta, m.get("vs")), f"{m.get('llm_calls', 0.0):.1f}",
                         f"{m.get('llm_tokens', 0.0):.0f}", m.get("failed", 0)])
        parts.append(f"**Answers** (`pathrag eval answers`, {answers.get('questions', '?')} questions, "
                     f"{r['budget']}-token prompts, the answer alone as a short phrase):\n\n" + md_table(
                         ["mode", "F1", "EM", "in context", "Δ F1 [95% CI]", "LLM calls/q", "LLM tokens/q",
                          "failed"], rows))
    m = r.get("machine") or {}
    parts.append(f"_Measured {m.get('date', '?')} on {m.get('cpu', '?')}, {m.get('cores', '?')} cores; "
                 f"{r.get('seconds', 0) / 60:.0f} min._")
    return "\n\n".join(parts)
