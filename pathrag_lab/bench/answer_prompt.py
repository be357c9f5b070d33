"""Choosing the default answer prompt by answer F1 (issue 59): `pathrag bench answer-prompt`.

Every (reader, question set) cell answers the same questions in the candidate layouts, the paper's PathRAG and the
flat chunk prompts through ``evaluate_answers`` (stored answer by answer, so a cell resumes and a finished cell is
read back without an LLM call). The rule, applied by ``decide`` to the cells measured:

1. Candidates keep PathRAG's pruning in the loop: the kept paths choose, order or annotate the quoted passages, or
   appear compactly in the prompt (``CANDIDATES``).
2. A candidate qualifies when, in no cell, its F1 trails the cell's best flat chunk prompt (the flat prompt with the
   highest F1 there): the paired 95% bootstrap interval of (candidate - flat) must not lie below zero.
3. The default is the qualifying candidate with the highest F1 averaged over the cells (each cell counts once).
4. If none qualifies, the default is the passages ranked by path mode (``FALLBACK``), and the kept paths are the
   answer's evidence (returned, logged in ``path_traces``), not part of the prompt.

The rule is only as good as its cells: it needs both local readers and at least two question sets (musique-100 and
a documentation folder) before it can set a default, and says which cells are missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pathrag_pipeline.evaluation.bootstrap import RESAMPLES, SEED, format_figures, paired_bootstrap

Log = Callable[[str], None]

# layouts that keep the pruning in the loop, as evaluated modes (evaluation/retrieval_eval.py ABLATIONS)
CANDIDATES = (
    "path",                                   # the default (the rule's pick): passages, then PathRAG-lt's 5 most
                                              # reliable paths (prompt "passages_paths")
    "path:passages_first_prompt",             # passages, then every kept path as a chain (the earlier default)
    "path:passages_prompt:paths_in_walk",     # passages alone, chosen by a walk the kept paths restart
)
FALLBACK = "path:passages_prompt"             # passages ranked by path mode; the paths are evidence only
PAPER = "path:paper"                          # the paper's PathRAG, measured beside the default every time
FLAT = ("naive", "bm25+dense")
MODES = (*CANDIDATES, FALLBACK, PAPER, *FLAT)
READERS = ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
MIN_READERS, MIN_SETS = 2, 2
HEADING = "Choosing the answer prompt"


@dataclass
class Cell:
    """One reader on one question set: each mode's F1 and its paired interval against the cell's best flat."""

    reader: str
    questions_set: str
    questions: int
    f1: dict[str, float]
    best_flat: str
    vs_flat: dict[str, dict[str, Any]] = field(default_factory=dict)   # mode -> interval dict (diff, low, ...)
    run_id: str = ""
    graph: str = ""


def cell_of(reader: str, questions_set: str, evaluation: Any) -> Cell:
    """A ``Cell`` from an ``AnswerEvaluation`` (over the questions every mode answered)."""
    questions = evaluation.complete_questions
    summary = evaluation.summary()
    f1 = {m: s.scores["f1"] for m, s in summary.items()}
    flat = [m for m in FLAT if m in f1]
    if not questions or not flat:
        raise ValueError(f"{reader} on {questions_set}: no question answered in every mode, or no flat prompt")
    best = max(flat, key=lambda m: (f1[m], -flat.index(m)))

    def scores(mode: str) -> list[float]:
        return [float(evaluation.rows[mode][q].f1) for q in questions]

    vs = {m: paired_bootstrap(scores(m), scores(best)).to_dict() for m in f1 if m not in FLAT}
    return Cell(reader, questions_set, len(questions), f1, best, vs, evaluation.run_id, evaluation.graph)


def decide(cells: Sequence[Cell]) -> dict[str, Any]:
    """The rule of the module docstring over ``cells``: the chosen layout, why, and whether the cells suffice."""
    readers = sorted({c.reader for c in cells})
    sets = sorted({c.questions_set for c in cells})
    qualifying, mean_f1 = [], {}
    for mode in CANDIDATES:
        measured = [c for c in cells if mode in c.f1]
        if not measured:
            continue
        mean_f1[mode] = sum(c.f1[mode] for c in measured) / len(measured)
        if len(measured) == len(cells) and all(c.vs_flat[mode]["outcome"] != "trails" for c in measured):
            qualifying.append(mode)
    chosen = max(qualifying, key=lambda m: (mean_f1[m], -CANDIDATES.index(m))) if qualifying else FALLBACK
    complete = len(readers) >= MIN_READERS and len(sets) >= MIN_SETS
    return {"chosen": chosen, "qualifying": qualifying, "mean_f1": {m: round(v, 4) for m, v in mean_f1.items()},
            "readers": readers, "sets": sets, "complete": complete,
            "missing": [] if complete else [f"{MIN_READERS} readers and {MIN_SETS} question sets are needed; "
                                            f"measured: {', '.join(readers) or 'none'} on {', '.join(sets) or 'none'}"]}


def markdown(cells: Sequence[Cell], decision: dict[str, Any], command: str) -> str:
    """The section: the cells' table and the rule's outcome."""
    modes = [m for m in MODES if any(m in c.f1 for c in cells)]
    head = ["reader", "questions", "n", *[f"`{m}`" for m in modes], "best flat"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for c in cells:
        row = [c.reader, c.questions_set, str(c.questions)]
        for m in modes:
            if m not in c.f1:
                row.append("")
                continue
            cell = f"{c.f1[m]:.3f}"
            if m in c.vs_flat:
                i = c.vs_flat[m]
                cell += f" ({format_figures(i)} {i['outcome']})"
            row.append(cell)
        row.append(f"`{c.best_flat}`")
        lines.append("| " + " | ".join(row) + " |")
    intro = (f"Reproduce: `{command}`.\n\nAnswer F1 of each layout (SQuAD token F1 of the short answer, cut to its span) "
             "and, in brackets, its paired difference from the cell's best flat chunk prompt with the 95% bootstrap "
             f"interval over the questions ({RESAMPLES:,} resamples, seed {SEED}). The rule "
             "(`pathrag_lab/bench/answer_prompt.py`, docs/methods.md): among the layouts that keep PathRAG's pruning in the loop "
             f"({', '.join(f'`{m}`' for m in CANDIDATES)}), the default is the one with the best F1 averaged over the "
             "cells among those that trail the best flat prompt in no cell; if none qualifies, the passages ranked by "
             f"path mode (`{FALLBACK}`), the kept paths staying the answer's evidence. `{PAPER}` is the paper's PathRAG "
             "(`--preset paper`), measured beside it.")
    chosen = decision["chosen"]
    verdict = (f"**Outcome:** qualifying: {', '.join(f'`{m}`' for m in decision['qualifying']) or 'none'}; "
               f"F1 averaged over the cells: " + ", ".join(f"`{m}` {v:.3f}" for m, v in decision["mean_f1"].items())
               + f". The rule picks `{chosen}`.")
    if not decision["complete"]:
        verdict += (" Not enough cells to set the default (" + "; ".join(decision["missing"])
                    + "): the default stays as it is until the missing cells are measured.")
    return "\n".join([intro, "", *lines, "", verdict])


def folder_home(workdir: Path, name: str) -> Path:
    return workdir / "folders" / name


def run_answer_prompt_bench(workdir: Path, *, readers: Sequence[str] = READERS, datasets: Sequence[Path] = (),
                            folders: Sequence[str] = (), limit: int | None = 30, budget: int = 1000,
                            base_url: str | None = None, model: str | None = None,
                            time_limit: float | None = None, log: Log = print) -> dict[str, Any]:
    """Every reader (the bench's own llama.cpp server per local model, or the running endpoint ``base_url``/
    ``model``) answers each dataset (offline-rules graph, its first ``limit`` questions) and each real folder
    (indexed offline in ``workdir/folders/NAME``, its first ``limit`` questions) in ``MODES``; returns the cells and the rule's
    outcome. Resumable: answers are stored as they come (``workdir/home`` for datasets, each folder's own home)."""
    from pathrag_lab.bench.embedding_runtime import minilm_available, minilm_model
    from pathrag_lab.bench.llm_answers import bench_settings, check_endpoint, on_endpoint
    from pathrag_lab.bench.real_folders import FOLDERS, QUESTIONS_DIR
    from pathrag_lab.bench.report_sections import repo_path
    from pathrag_pipeline.evaluation.answer_eval import evaluate_answers
    from pathrag_pipeline.evaluation.retrieval_eval import indexing_settings
    from pathrag_pipeline.index.pipeline import run_indexing

    embed = minilm_model() if minilm_available() else None
    cells: list[Cell] = []
    spent = {"answers": 0, "seconds": 0.0}   # the cells' answers and the sum of their wall times, every invocation's
    started = time.perf_counter()

    def progress(mode: str, done: int, total: int) -> None:
        if done % 25 == 0 or done == total:
            log(f"answers: {done}/{total} ({mode})")

    def one_reader(url: str, name: str, key: str) -> None:
        for dataset in datasets:
            settings = bench_settings(url, name, embed, own_server=base_url is None, home=workdir / "home")
            log(f"{key}: {dataset.name}, {limit or 'all'} questions")
            e = evaluate_answers(settings, dataset, modes=list(MODES), limit=limit, budget=budget,
                                 time_limit=time_limit, on_answer=progress)
            if not e.stopped:
                cells.append(cell_of(key, dataset.name, e))
                spent["answers"] += len(e.complete_questions) * len(e.modes)
                spent["seconds"] += e.query_seconds
        for folder in folders:
            home = folder_home(workdir, folder)
            settings = bench_settings(url, name, embed, own_server=base_url is None, home=home)
            if not (home / "pathrag.duckdb").is_file():
                log(f"indexing {FOLDERS[folder].path} offline into {home}")
                run_indexing(indexing_settings(settings, "offline"), folder=FOLDERS[folder].path)
            log(f"{key}: {folder}")
            e = evaluate_answers(settings, questions_file=QUESTIONS_DIR / f"{folder}.questions.jsonl",
                                 modes=list(MODES), limit=limit, budget=budget, time_limit=time_limit,
                                 on_answer=progress)
            if not e.stopped:
                cells.append(cell_of(key, folder, e))
                spent["answers"] += len(e.complete_questions) * len(e.modes)
                spent["seconds"] += e.query_seconds

    servers: dict[str, Any] = {}
    if base_url is not None:
        check_endpoint("answer-prompt", base_url, model, READERS[0])
        one_reader(base_url, model or "", model or "")
    else:
        for key in readers:
            served = check_endpoint("answer-prompt", None, None, key)
            servers[key] = on_endpoint(workdir, None, None, lambda u, n, key=key: one_reader(u, n, key), log, served)
    decision = decide(cells)
    command = ("HF_HUB_OFFLINE=1 pathrag bench answer-prompt --workdir DIR"
               + (f" --base-url URL --model {model}" if base_url is not None else "")
               + "".join(f" --reader {r}" for r in readers if base_url is None and tuple(readers) != READERS)
               + "".join(f" --dataset {repo_path(Path(d))}" for d in datasets)
               + "".join(f" --folder {f}" for f in folders)
               + (f" --limit {limit}" if limit else "") + " --update-docs docs/benchmarks.md")
    return {"cells": [c.__dict__ for c in cells], "decision": decision, "command": command, "servers": servers,
            "embedder": embed or "offline hashing", "budget": budget, "answers": spent["answers"],
            "query_minutes": round(spent["seconds"] / 60, 1),
            "seconds": round(time.perf_counter() - started, 1)}
