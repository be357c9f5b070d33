"""Judged win rates through a real local LLM server (``pathrag bench winrate``).

PathRAG and LightRAG report pairwise win rates: an LLM reads two answers to the same question and says which is
better on each criterion. This bench runs that end to end on this machine: it starts the llama.cpp server of
``pathrag bench answers`` (the same model, the same installs; or ``--base-url``/``--model``, any running
OpenAI-compatible endpoint), lets ``path``, ``hybrid`` and ``naive`` answer the first questions of a QA dataset
over its triples graph (each mode's default answer, not the short phrase the F1 bench asks for), judges path
against the other two with the papers' prompt (``evaluation/judging.py``, the answers' order alternated by
question) and writes the "Win rates through a local LLM" section of docs/benchmarks.md.

The judge is the model that wrote the answers; with a 0.5B model that is a weak judge, and the section says so.
It is a run of its own, not a stage of ``bench answers``: the F1 grid resumes answer by answer over hours, the
judging is answered and judged again on every call (not resumable).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from pathrag_lab.bench import llm_answers
from pathrag_lab.bench.local_models import DEFAULT_LOCAL_MODEL
from pathrag_lab.bench.report_sections import repo_path

DEFAULT_QUESTIONS = 30
DEFAULT_BUDGET = 1000
PAIRS = (("path", "hybrid"), ("path", "naive"))
HEADING = "Win rates through a local LLM"

Log = Callable[[str], None]


def run_winrate_bench(dataset: Path, workdir: Path, *, questions: int = DEFAULT_QUESTIONS,
                      budget: int = DEFAULT_BUDGET, base_url: str | None = None, model: str | None = None,
                      local: str = DEFAULT_LOCAL_MODEL, log: Log = print) -> dict[str, Any]:
    """Start the local server (unless ``base_url``/``model``), answer and judge; the figures with the model, the
    machine and the time. ``workdir`` is ``pathrag bench answers``'s: the same index, home and joined model."""
    from pathrag_lab.bench.embedding_runtime import minilm_available, minilm_model

    served = llm_answers.check_endpoint("winrate", base_url, model, local)
    embed_model = minilm_model() if minilm_available() else None
    index = workdir / "retrieval" / ("triples" + ("-minilm" if embed_model else ""))
    started = time.perf_counter()
    result: dict[str, Any] = {
        "model": model or served.name, "server": {}, "embedder": embed_model or "offline hashing",
        "dataset": dataset.name, "budget": budget,
        "command": (("HF_HUB_OFFLINE=1 " if embed_model else "") + "pathrag bench winrate"
                    + llm_answers.local_model_flag(local)
                    + (f" --questions {questions}" if questions != DEFAULT_QUESTIONS else "")
                    + (f" --budget {budget}" if budget != DEFAULT_BUDGET else "")
                    + (f" --dataset {repo_path(dataset)}" if dataset.name != "musique-100" else "")
                    + " --update-docs docs/benchmarks.md")}

    def run(url: str, name: str) -> None:
        settings = llm_answers.bench_settings(url, name, embed_model, own_server=base_url is None,
                                              home=workdir / "answers" / "home")
        result["winrate"] = judge_modes(settings, dataset, index, questions, budget, log)

    result["server"] = llm_answers.on_endpoint(workdir, base_url, model, run, log, served)
    result.update(machine=llm_answers.machine(), seconds=round(time.perf_counter() - started, 1))
    return result


def judge_modes(settings: Any, dataset: Path, index: Path, questions: int, budget: int,
                log: Log) -> list[dict[str, Any]]:
    """Win rates of path against hybrid and naive on the first ``questions`` of ``dataset``: each mode answers
    (default response, ``budget``-token prompts) over the dataset's index, the configured LLM judges with the
    papers' prompt, order alternated; stored in the bench home's winrate tables."""
    from pathrag_pipeline.evaluation.judging import answer_modes, judge_pairs, pair_modes, save_winrate
    from pathrag_pipeline.evaluation.retrieval_eval import load_dataset, prepare_index
    from pathrag_pipeline.llm.client import llm_from_settings
    from pathrag_pipeline.query.params import QueryParams
    from pathrag_pipeline.storage.store import Store

    loaded = load_dataset(dataset)
    rows = [(q.id, q.question) for q in loaded.questions[:questions]]
    answer_settings, _ = prepare_index(settings, loaded, index, use_triples=True)
    modes = list(dict.fromkeys(m for pair in PAIRS for m in pair))
    log(f"win rates: answering {len(rows)} questions in {', '.join(modes)}")
    params = QueryParams(token_budget=budget)
    answers = answer_modes(answer_settings, rows, modes, params=params)
    judge = llm_from_settings(settings)
    assert judge is not None
    out = []
    for a, b in PAIRS:
        log(f"win rates: judging {a} against {b}")
        run = judge_pairs(judge, pair_modes(rows, answers, a, b), label_a=f"mode:{a}", label_b=f"mode:{b}",
                          params={"dataset": dataset.name, "token_budget": budget}, answered_by=judge.model)
        save_winrate(Store.for_settings(settings), run)
        out.append(run.to_dict())
    return out


def _winrate_parts(runs: list[dict[str, Any]], budget: int) -> list[str]:
    from pathrag_lab.bench.report import md_table
    from pathrag_pipeline.evaluation.judging import DIMENSIONS, OVERALL

    if not runs:
        return []
    dims = [*DIMENSIONS, OVERALL]

    def cell(r: dict[str, Any], dim: str) -> str:
        w = r["win_rates"][dim]
        decided = w["wins_a"] + w["wins_b"]
        if not decided:   # no rate without a judgment (a 0% there once read as "path loses everything")
            return "n/a"
        return f"{100 * w['a']:.0f}%" + (f" of {decided}" if decided < r["judgments"] else "")

    rows = [[f"`{r['a'].removeprefix('mode:')}` vs `{r['b'].removeprefix('mode:')}`", r["questions"], r["judgments"],
             r["failed"], *[cell(r, d) for d in dims]] for r in runs]
    judge = runs[0]["judge"]
    failures = [f"{r['failed']} of {r['questions']} judgments of `{r['a'].removeprefix('mode:')}` vs "
                f"`{r['b'].removeprefix('mode:')}` failed" + (f" (first: {' '.join(str(r['first_error']).split())[:200]})"
                                                            if r.get("first_error") else "")
                for r in runs if r["failed"]]
    if not any(r["judgments"] for r in runs):
        return [f"**Win rates:** no judgment succeeded, so no rate is given: {'; '.join(failures)}."]
    return [
        f"**Win rates** (`pathrag eval winrate --dataset ... --use-triples --mode-a path --mode-b hybrid,naive "
        f"--limit {runs[0]['questions']} --budget {budget}`): each mode's default answer (concise, not the short "
        "phrase the F1 bench asks for) to the same questions, judged with the papers' prompt on PathRAG's five dimensions and "
        "overall, the answers' order alternated by question. Cells: the share of judgments path wins; \"of N\": "
        "only N judgments decided that criterion (the judge wrote a sentence naming neither answer, or both: "
        "undecided, counted for neither side; `evaluation/judging.py`).",
        md_table(["pair", "questions", "judgments", "failed", *dims], rows),
        *([f"Failed judgments are left out of the rates: {'; '.join(failures)}."] if failures else []),
        *[position_bias(r) for r in runs if r["judgments"] and "first_shown_wins" in r],
        f"**The judge is {judge}, the same small model that wrote both answers: a weak judge.** Read these "
        "rates as evidence that the chain runs end to end, not as a ranking of the modes.",
    ]


def position_bias(r: dict[str, Any]) -> str:
    """How often the judge's overall winner was the answer it read first; all or none means the rates measure
    the alternation of the order, not the answers."""
    first, n = r["first_shown_wins"], r["judgments"]
    pair = f"`{r['a'].removeprefix('mode:')}` vs `{r['b'].removeprefix('mode:')}`"
    verdict = (" Every verdict went to the same position, so the overall rate is the alternation's 50%, not a "
               "judgment of the answers." if first in (0, n) else "")
    return f"{pair}: the overall winner was the answer shown first in {first} of {n} judgments.{verdict}"


def winrate_section(r: dict[str, Any]) -> str:
    """The docs/benchmarks.md section of one run."""
    mach = r["machine"]
    runs = r.get("winrate") or []
    where = (f"served by llama-cpp-python on {mach['usable_cores']} CPU cores ({r['server']['threads']} threads, "
             f"context {r['server']['context']})" if r.get("server") else "at the endpoint given with --base-url")
    parts = [
        f"## {HEADING}",
        f"Reproduce: `{r['command']}` (the installs of `pathrag bench answers`: see docs/llm-endpoints.md).",
        f"{r['dataset']}, the first {runs[0]['questions'] if runs else '?'} questions, graph from the dataset's "
        f"triples, embedder {r['embedder']}; `path`, `hybrid` and `naive` answer at a {r['budget']}-token budget "
        f"through **{r['model']}** {where}, and the same model judges.",
        *_winrate_parts(runs, r["budget"]),
        f"_Measured {mach['date']} on {mach['usable_cores']} cores ({mach['cpu']}, Python {mach['python']}, 1-min "
        f"load {(mach['load_average'] or ['?'])[0]} at the end); {r['seconds'] / 60:.0f} min._",
    ]
    return "\n\n".join(p for p in parts if p)
