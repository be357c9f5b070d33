"""Answer evaluation: every mode's own prompt goes to the configured LLM and the answer is scored against the
gold answers (``pathrag eval answers``).

For each question of a QA dataset (the format of ``retrieval_eval``) and each evaluated mode, the mode runs end
to end as a user's query would (keywords, retrieval, its prompt at ``budget`` tokens, the answer) with
``response="short"`` (the answer alone, as QA benchmarks score it). The answer is scored by SQuAD exact match
and token F1 against every gold answer and alias (``answer_scoring.py``); the prompt the LLM read is scored by
answer-in-context (a gold answer occurs in it). Each row also keeps the LLM calls and tokens the query spent
(keywords, NeuroPath tracking, the answer), its latency and the passages' recall@k.

Rows go to ``eval_answers`` as each answer arrives, so a killed run keeps what it finished: running the same
command again resumes the newest run with the same configuration (dataset, budget, parameters, LLM, index) and
asks only what is missing or failed. Questions run one at a time through every mode, so a run stopped early
(``time_limit``) still compares the modes on the same questions. Every mode is compared with its reference
(``retrieval_eval.reference_mode``: ``path`` for a path layout or a flat baseline) question by question with a
paired 95% bootstrap interval (``bootstrap.py``), and the verdict sets the default path mode against the flat
chunk prompt with the highest F1, by the interval rule (beats / ties / trails).

``naive`` is LightRAG's naive mode: chunks by the embedder, i.e. the ``dense`` baseline, so the default runs it
once under its mode name.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pathrag_pipeline.config import Settings
from pathrag_pipeline.evaluation.answer_scoring import answer_in_context, exact_match, token_f1
from pathrag_pipeline.evaluation.bootstrap import RESAMPLES, SEED, Interval, format_figures, paired_bootstrap
from pathrag_pipeline.evaluation.retrieval_eval import (
    BASELINES,
    DEFAULT_GRAPH_MODE,
    EvalQuestion,
    _insert,
    check_run,
    default_workdir,
    graph_source,
    home_identity,
    load_question_set,
    layout_modes,
    load_dataset,
    offline_note,
    passage_ids,
    prepare_index,
    recall_at_k,
    reference_mode,
    resolve_mode,
)
from pathrag_pipeline.llm.client import LLMError, LLMOutputError, llm_from_settings
from pathrag_pipeline.llm.embedding import embedder_runtime
from pathrag_pipeline.query.engine import PathRAG
from pathrag_pipeline.query.answering import SHORT_ANSWER_VERSION
from pathrag_pipeline.query.params import QueryParams, mode_params
from pathrag_pipeline.query.prompting import PROMPT_VERSION
from pathrag_pipeline.query.retrieval import is_semantic
from pathrag_pipeline.storage.store import Store

DEFAULT_BUDGET = 2000
# The short answer's output cap: a name, a date or a number fits; a small model that rambles is cut here.
SHORT_ANSWER_TOKENS = 64
RECALL_K = 5
# The path prompt's layouts (query/params.py PROMPT_STYLES) as evaluated modes: the default is ``path``.
LAYOUT_MODES = layout_modes()
FLAT_MODES = ("naive", "bm25", "dense", "bm25+dense")   # answer from chunk prompts alone
# The paper's PathRAG end to end (query/params.py PRESETS["paper"]): every run that answers in the default path mode
# answers in it too, so the default is always measured beside the paper's method (issue 59).
PAPER_MODE = "path:paper"
SCORES = ("f1", "exact_match", "answer_in_context")
# The endpoint failing this many queries in a row (not answering at all, as opposed to a bad reply) stops the
# run: every later query would fail the same way. The rows so far are kept; the same command resumes.
MAX_CONSECUTIVE_UNAVAILABLE = 3


class EndpointDown(RuntimeError):
    """The LLM endpoint stopped answering; what is stored stays, and the same command resumes."""


def default_answer_modes(llm: bool) -> list[str]:
    """path, the paper's PathRAG (``PAPER_MODE``) and path's prompt layouts, hybrid, neuropath, naive (= dense)
    and the other flat chunk prompts; with an LLM also neuropath with its heuristic (offline) tracker (what the LLM
    tracker adds)."""
    modes = ["path", PAPER_MODE, *LAYOUT_MODES, "hybrid", "neuropath", "naive", "bm25", "bm25+dense"]
    return modes + (["neuropath:offline_tracker"] if llm else [])


@dataclass
class AnswerRow:
    """One question answered in one mode (a row of ``eval_answers``)."""

    mode: str
    question_id: str
    answer: str
    exact_match: float
    f1: float
    answer_in_context: bool
    recall: float                    # recall@RECALL_K of the passages the mode ranked
    prompt_tokens: int               # the answer prompt's own size (what the LLM read)
    llm_calls: int                   # LLM requests the query needs alone (keywords, tracking, the answer)
    llm_tokens: int                  # their prompt + completion tokens
    latency_ms: float                # wall time of the whole query, answer included
    answer_ms: float                 # of which the answer call
    error: str | None = None
    passage_ids: list[str] = field(default_factory=list)
    prompt: str = ""
    reused_from: str | None = None   # the run whose row this copies (same answer key), None when asked here
    raw_answer: str | None = None    # the reply as it came when ``answer`` was cut from it (query/answering.py)

    @property
    def failed(self) -> bool:
        return self.error is not None


@dataclass
class ModeAnswers:
    """A mode's figures over the questions every mode of the run answered."""

    scores: dict[str, float]         # SCORES -> mean over questions
    recall: float
    median_prompt_tokens: float
    llm_calls: float                 # mean per question
    llm_tokens: float
    median_latency_ms: float
    failed: int
    f1_in_context: float | None = None   # mean F1 over the questions whose prompt held a gold answer: how well the
                                         # model reads what retrieval gave it (None when no prompt held one)
    note: str = ""
    vs: str | None = None
    delta: dict[str, Interval] = field(default_factory=dict)   # SCORES -> this mode minus ``vs``


@dataclass
class AnswerEvaluation:
    run_id: str
    started_at: datetime
    dataset: str
    dataset_hash: str
    config_hash: str
    budget: int
    llm: str
    embedder: str
    extractor: str
    modes: list[str]
    planned: int                     # questions the run was asked to answer (after --limit)
    rows: dict[str, dict[str, AnswerRow]]   # mode -> question id -> its newest row
    question_order: list[str]
    params: dict[str, Any]
    workdir: str
    resumed: int = 0                 # rows found from an earlier invocation of this run
    earlier_seconds: float = 0.0     # wall time of the run's earlier invocations
    semantic: bool = True            # the embedder is semantic (else bm25+dense is bm25, and the row says so)
    answered: int = 0                # rows this invocation wrote
    seconds: float = 0.0
    stopped: str = ""                # why the invocation stopped before every question was answered
    reused: int = 0                  # rows this invocation copied from earlier runs with the same answer key
    graph: str = "offline"           # where the graph came from (retrieval_eval.GRAPH_SOURCES)
    index_seconds: float = 0.0       # this invocation's (re)indexing before the answers (--time-limit leaves it out)
    answer_keys: dict[str, str] = field(default_factory=dict)   # mode -> its answer key (``answer_key``)
    dataset_path: str = ""           # the dataset folder (the diagnosis reads its hops and passages)

    def diagnosis(self) -> dict[str, dict[str, Any]]:
        """Where each mode's evidence went and what kind of wrong answers it gave, over the questions every mode
        answered (``answer_diagnosis.py``); empty unless the dataset names each question's hops (MuSiQue)."""
        if not self.dataset_path or not self.complete_questions:
            return {}
        from pathrag_pipeline.evaluation.answer_diagnosis import diagnose_run

        return diagnose_run(Path(self.dataset_path), {m: self.rows[m] for m in self.modes}, self.complete_questions)

    @property
    def complete_questions(self) -> list[str]:
        """Question ids every mode has a row for, in dataset order: the paired comparisons use these."""
        return [q for q in self.question_order if all(q in self.rows.get(m, {}) for m in self.modes)]

    @property
    def query_seconds(self) -> float:
        """Wall time of the queries behind the kept answers (every invocation's, killed ones too)."""
        return sum(r.latency_ms for rows in self.rows.values() for r in rows.values()) / 1000.0

    def summary(self) -> dict[str, ModeAnswers]:
        questions = self.complete_questions
        out: dict[str, ModeAnswers] = {}
        if not questions:
            return out
        for mode in self.modes:
            rows = [self.rows[mode][q] for q in questions]
            n = len(rows)
            out[mode] = ModeAnswers(
                scores={"f1": round(sum(r.f1 for r in rows) / n, 4),
                        "exact_match": round(sum(r.exact_match for r in rows) / n, 4),
                        "answer_in_context": round(sum(r.answer_in_context for r in rows) / n, 4)},
                recall=round(sum(r.recall for r in rows) / n, 4),
                median_prompt_tokens=float(statistics.median(r.prompt_tokens for r in rows)),
                llm_calls=round(sum(r.llm_calls for r in rows) / n, 2),
                llm_tokens=round(sum(r.llm_tokens for r in rows) / n, 1),
                median_latency_ms=round(statistics.median(r.latency_ms for r in rows), 1),
                failed=sum(r.failed for r in rows),
                f1_in_context=_mean([r.f1 for r in rows if r.answer_in_context]),
                note=_note(mode, self.llm, self.semantic),
            )
        for mode, figures in out.items():
            ref = reference_mode(mode)
            if ref is not None and ref in out:
                figures.vs = ref
                figures.delta = {s: paired_bootstrap(_scores(self, mode, s, questions), _scores(self, ref, s, questions))
                                 for s in SCORES}
        return out

    def verdict_detail(self) -> dict[str, Any] | None:
        """The default path mode against the flat chunk prompt with the highest mean F1 (on a tie, the one
        listed first), per score with the paired 95% bootstrap interval; and the best path layout by F1
        against the default. None without both sides or answered questions."""
        questions = self.complete_questions
        flat = [m for m in self.modes if m in FLAT_MODES]
        if DEFAULT_GRAPH_MODE not in self.modes or not flat or not questions:
            return None
        summary = self.summary()
        baseline = max(flat, key=lambda m: (summary[m].scores["f1"], -flat.index(m)))
        out: dict[str, Any] = {"mode": DEFAULT_GRAPH_MODE, "baseline": baseline, "questions": len(questions)}
        for s in SCORES:
            interval = paired_bootstrap(_scores(self, DEFAULT_GRAPH_MODE, s, questions),
                                        _scores(self, baseline, s, questions))
            out[s] = {"mode": summary[DEFAULT_GRAPH_MODE].scores[s], "baseline": summary[baseline].scores[s],
                      **interval.to_dict()}
        layouts = [m for m in (DEFAULT_GRAPH_MODE, *LAYOUT_MODES) if m in self.modes]
        best = max(layouts, key=lambda m: (summary[m].scores["f1"], -layouts.index(m)))
        out["best_layout"] = best
        if best != DEFAULT_GRAPH_MODE:
            out["best_layout_vs_default"] = summary[best].delta["f1"].to_dict()
        return out

    def verdict(self) -> str | None:
        d = self.verdict_detail()
        if d is None:
            return None
        f1, em = d["f1"], d["exact_match"]
        line = (f"{self.dataset}: the default path mode {f1['outcome']} the strongest flat chunk prompt "
                f"{d['baseline']} on answer F1 ({f1['mode']:.3f} vs {f1['baseline']:.3f}, {format_figures(f1)}; exact match "
                f"{em['mode']:.3f} vs {em['baseline']:.3f}, {format_figures(em)})")
        if d["best_layout"] != DEFAULT_GRAPH_MODE:
            b = d["best_layout_vs_default"]
            line += f"; best path layout by F1: {d['best_layout']} ({b['outcome']} the default, {format_figures(b)})"
        else:
            line += "; the default layout has the best F1 of the path layouts evaluated"
        return (line + f" [paired 95% bootstrap over {d['questions']} questions, {RESAMPLES:,} resamples, "
                f"seed {SEED}; answers by {self.llm} at a {self.budget}-token prompt budget]")

    def to_dict(self, per_question: bool = False) -> dict[str, Any]:
        summary = self.summary()
        modes: dict[str, Any] = {}
        for mode, m in summary.items():
            modes[mode] = {**m.scores, f"recall@{RECALL_K}": m.recall, "median_prompt_tokens": m.median_prompt_tokens,
                           "llm_calls": m.llm_calls, "llm_tokens": m.llm_tokens,
                           "median_latency_ms": m.median_latency_ms, "failed": m.failed,
                           "f1_in_context": m.f1_in_context}
            if m.note:
                modes[mode]["note"] = m.note
            if m.vs is not None:
                modes[mode]["vs"] = m.vs
                modes[mode]["delta"] = {s: i.to_dict() for s, i in m.delta.items()}
            if per_question:
                modes[mode]["per_question"] = [
                    {k: v for k, v in asdict(self.rows[mode][q]).items() if k != "prompt"}
                    for q in self.complete_questions]
        return {
            "run_id": self.run_id, "started_at": self.started_at.isoformat(), "dataset": self.dataset,
            "dataset_hash": self.dataset_hash, "config_hash": self.config_hash, "budget": self.budget,
            "llm": self.llm, "embedder": self.embedder, "extractor": self.extractor, "graph": self.graph,
            "index_seconds": round(self.index_seconds, 3), "params": self.params,
            "planned": self.planned, "questions": len(self.complete_questions), "resumed": self.resumed,
            "reused": self.reused, "answered": self.answered, "stopped": self.stopped or None, "seconds": round(self.seconds, 3),
            "run_seconds": round(self.earlier_seconds + self.seconds, 3), "query_seconds": round(self.query_seconds, 1),
            "workdir": self.workdir, "modes": modes,
            "bootstrap": {"resamples": RESAMPLES, "seed": SEED, "level": 0.95, "unit": "question"},
            "verdict": self.verdict(), "verdict_detail": self.verdict_detail(), "diagnosis": self.diagnosis(),
        }


def _llm_key(rag: PathRAG) -> dict[str, str] | str:
    """The LLM as far as answers depend on it: model and structured-output mode. Not the endpoint's address:
    the same model served on another port (``pathrag bench answers`` picks a free one) resumes the same run."""
    if rag.llm is None:
        return "offline"
    return {"model": rag.llm.model, "mode": rag.llm.mode}


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _note(mode: str, llm: str, semantic: bool) -> str:
    if mode == "naive":
        return "naive = dense: LightRAG's naive mode ranks chunks by the embedder"
    return offline_note(mode, semantic, llm != "offline")


def _scores(e: AnswerEvaluation, mode: str, score: str, questions: Sequence[str]) -> list[float]:
    return [float(getattr(e.rows[mode][q], score)) for q in questions]




# ---- running ------------------------------------------------------------------------------------

def _digest(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def config_of(*, dataset_hash: str, budget: int, params: QueryParams, llm: dict[str, str] | str, embedder: str,
              extractor: str) -> tuple[dict[str, Any], str]:
    """What a run's answers depend on (never a credential: ``llm`` is the model and its output mode), and its
    hash: rows with the same hash can be resumed into. ``PROMPT_VERSION`` changes with the prompts' wording."""
    config = {"dataset_hash": dataset_hash, "budget": budget, "params": asdict(params), "llm": llm,
              "embedder": embedder, "extractor": extractor, "prompt_version": PROMPT_VERSION,
              "short_answer": SHORT_ANSWER_VERSION}
    return config, _digest(config)


def answer_key(config: dict[str, Any], mode: str) -> str:
    """What one evaluated mode's answers depend on: the run's ``config`` with its parameters narrowed to the
    query mode's own (``params.mode_params`` of the base parameters with the mode's overrides). Two runs whose
    base parameters differ only in what this mode does not read (a path-only default for naive, say) give it
    the same key, so a run after such a change copies the mode's answers instead of asking the LLM again."""
    query_mode, overrides = resolve_mode(mode)
    base = QueryParams(**{k: tuple(v) if isinstance(v, list) else v for k, v in config["params"].items()})
    effective = dataclasses.replace(base, **overrides)
    return _digest({**{k: v for k, v in config.items() if k != "params"}, "query_mode": query_mode,
                    "params": mode_params(query_mode, effective)})


def answer_row(rag: PathRAG, q: EvalQuestion, mode: str, params: QueryParams, budget: int, *,
               documents: bool = False) -> AnswerRow:
    """Ask one question in one evaluated mode and score the answer; a failed query (the LLM's output stayed
    invalid, NeuroPath's tracker failed) is a row with ``error`` set and zero scores, not an exception.
    An endpoint that does not answer at all raises (``LLMError`` other than ``LLMOutputError``). ``documents``:
    the question's gold ids name the home's documents (a user's QA set), not a dataset's passages; recall is 0
    for a question without them."""
    query_mode, overrides = resolve_mode(mode)
    mode_params = dataclasses.replace(params, **overrides)
    started = time.perf_counter()
    try:
        result = rag.query_many([q.question], query_mode, params=mode_params, budgets=(budget,))[0]
    except LLMOutputError as exc:
        return AnswerRow(mode, q.id, "", 0.0, 0.0, False, 0.0, 0, exc.usage.calls, exc.usage.total_tokens,
                         round((time.perf_counter() - started) * 1000.0, 1), 0.0, error=str(exc))
    prompt = result.prompts[budget]
    ranked = list(dict.fromkeys(result.document_ids)) if documents else passage_ids(result.document_ids)
    calls, tokens = result.standalone_llm
    answer = result.answer if result.answer_kind != "failed" else ""
    return AnswerRow(
        mode=mode, question_id=q.id, answer=answer, exact_match=exact_match(answer, q.answers),
        f1=round(token_f1(answer, q.answers), 4), answer_in_context=answer_in_context(prompt.text, q.answers),
        recall=recall_at_k(ranked, q.gold_ids, RECALL_K) if q.gold_ids else 0.0, prompt_tokens=prompt.tokens,
        llm_calls=calls,
        llm_tokens=tokens, latency_ms=round(result.total_ms, 1), answer_ms=round(result.timings_ms.get("answer", 0.0), 1),
        error=result.error, passage_ids=ranked[:20], prompt=prompt.text, raw_answer=result.raw_answer)


def evaluate_answers(settings: Settings, dataset_dir: Path | str | None = None, *,
                     questions_file: Path | str | None = None, modes: Sequence[str] | None = None,
                     limit: int | None = None, budget: int = DEFAULT_BUDGET, use_triples: bool = False,
                     graph: str = "offline", workdir: Path | None = None, params: QueryParams | None = None,
                     fresh: bool = False,
                     time_limit: float | None = None, store: Store | None = None,
                     on_answer: Callable[[str, int, int], None] | None = None,
                     index_progress: Callable[[int, int], None] | None = None) -> AnswerEvaluation:
    """Index the dataset (or reuse its index), then answer every question in every mode, storing each row as
    it comes (``store``: the user's store, default ``settings``'). Resumes the newest run with the same
    configuration unless ``fresh``. ``questions_file`` instead of ``dataset_dir``: a user's own QA set
    (``retrieval_eval.load_question_set``) answered over the home of ``settings`` as it is indexed (graph "home";
    recall counts the documents its rows name). ``graph``: where the dataset's graph comes from
    (``GRAPH_SOURCES``: the offline rules unless asked, even with an LLM endpoint set; ``use_triples`` is
    "triples"). ``time_limit`` (seconds of
    answering, counted after the index is ready): start no new question after it (the run stays resumable).
    ``on_answer(mode, done, total)`` after each row."""
    started = time.perf_counter()
    started_at = datetime.now(timezone.utc).replace(tzinfo=None)
    check_run(modes, limit)
    if budget < 200:
        raise ValueError(f"budget={budget} is too small; give at least 200 tokens (default {DEFAULT_BUDGET})")
    params = dataclasses.replace(params or QueryParams(), token_budget=budget, response="short", answer=True).resolved()
    if (dataset_dir is None) == (questions_file is None):
        raise ValueError("give a dataset folder or a question file over the home, one of the two")
    index_started = time.perf_counter()
    if questions_file is not None:
        identity, extractor = home_identity(Store.for_settings(settings))
        dataset = load_question_set(questions_file, identity)
        graph, workdir, eval_settings, use_triples = "home", settings.home, settings, False
    else:
        dataset = load_dataset(dataset_dir)
        graph = graph_source(use_triples, graph)
        use_triples = graph == "triples"
        workdir = Path(workdir).expanduser().resolve() if workdir else default_workdir(settings, dataset, False, graph)
    questions = dataset.questions[:limit] if limit else dataset.questions
    unanswerable = [q.id for q in questions if not q.answers]
    if unanswerable:
        raise ValueError(f"{dataset.path / 'questions.jsonl'}: question {unanswerable[0]!r} (and "
                         f"{len(unanswerable) - 1} more) has no gold \"answers\" list; answers are scored against "
                         "it, so give each question \"answers\": [the answer and its aliases]")
    if questions_file is None:
        eval_settings, report = prepare_index(settings, dataset, workdir, use_triples=False, graph=graph,
                                              progress=index_progress)
        extractor = report.mode.get("extractor", "")
    index_seconds = time.perf_counter() - index_started
    llm = llm_from_settings(eval_settings, max_tokens={"*": eval_settings.llm_answer_max_tokens,
                                                       "answer": SHORT_ANSWER_TOKENS})
    rag = PathRAG(eval_settings, llm=llm, record=False)
    llm_name = rag.llm.model if rag.llm is not None else "offline"
    modes = list(modes) if modes is not None else default_answer_modes(rag.llm is not None)
    if DEFAULT_GRAPH_MODE in modes and PAPER_MODE not in modes:
        modes.insert(modes.index(DEFAULT_GRAPH_MODE) + 1, PAPER_MODE)
    embedder = rag.embedder.identity
    config, config_hash = config_of(dataset_hash=dataset.fingerprint(use_triples), budget=budget, params=params,
                                    llm=_llm_key(rag), embedder=embedder, extractor=extractor)
    store = store or Store.for_settings(settings)
    run_id, previous = (uuid.uuid4().hex, {}) if fresh else resume_point(store, config_hash)
    run_id = run_id or uuid.uuid4().hex
    evaluation = AnswerEvaluation(
        run_id=run_id, started_at=started_at, dataset=dataset.name, dataset_hash=dataset.fingerprint(use_triples),
        config_hash=config_hash, budget=budget, llm=llm_name,
        embedder=embedder_runtime(rag.embedder) or embedder, extractor=extractor, modes=modes,
        planned=len(questions), rows={m: {} for m in modes}, question_order=[q.id for q in questions],
        params=asdict(params), workdir=str(workdir), dataset_path=str(dataset.path) if graph != "home" else "",
        graph=graph,
        index_seconds=index_seconds)
    evaluation.answer_keys = {m: answer_key(config, m) for m in modes}
    wanted = {q.id for q in questions}
    for (mode, qid), row in previous.items():
        if mode in evaluation.rows and qid in wanted and not row.failed:   # a wider run's rows stay out
            evaluation.rows[mode][qid] = row
    evaluation.resumed = sum(len(r) for r in evaluation.rows.values())
    if not fresh:
        # answers another run already got with the same per-mode key: copied into this run, not asked again
        copies = [dataclasses.replace(row, mode=mode, reused_from=source)
                  for (mode, qid), (source, row) in reusable_rows(store, config, evaluation.answer_keys).items()
                  if qid in wanted and qid not in evaluation.rows[mode] and source != run_id]
        if copies:
            save_answer_rows(store, evaluation, copies)
            for row in copies:
                evaluation.rows[row.mode][row.question_id] = row
            evaluation.reused = len(copies)
    evaluation.earlier_seconds = run_seconds(store, run_id) if previous else 0.0
    semantic = evaluation.semantic = is_semantic(rag.embedder)
    if "dense" in modes and not semantic:
        raise ValueError("--modes dense needs a semantic embedder (set PATHRAG_EMBED_MODEL); offline the dense "
                         "baseline is not a meaningful row")
    total = len(questions) * len(modes)
    done = evaluation.resumed + evaluation.reused
    unavailable = 0
    answering = time.perf_counter()   # the time limit counts answering alone: indexing may take longer than it
    try:
        for q in questions:
            if time_limit is not None and time.perf_counter() - answering > time_limit:
                evaluation.stopped = f"time limit of {time_limit / 60:.0f} min reached"
                break
            for mode in modes:
                if q.id in evaluation.rows[mode]:
                    continue
                try:
                    row = answer_row(rag, q, mode, params, budget, documents=graph == "home")
                    unavailable = 0
                except LLMError as exc:   # the endpoint did not answer: record it, stop after a few in a row
                    row = AnswerRow(mode, q.id, "", 0.0, 0.0, False, 0.0, 0, 0, 0, 0.0, 0.0, error=str(exc))
                    unavailable += 1
                save_answer_rows(store, evaluation, [row])
                evaluation.answered += 1
                evaluation.rows[mode][q.id] = row
                done += 1
                if on_answer is not None:
                    on_answer(mode, done, total)
                if unavailable >= MAX_CONSECUTIVE_UNAVAILABLE:
                    raise EndpointDown(
                        f"the LLM endpoint failed {unavailable} queries in a row (last: {row.error}); "
                        f"{evaluation.answered} answers of this invocation are stored in eval_answers (run "
                        f"{run_id}). Check the server and run the same command again to resume.")
    finally:
        evaluation.seconds = time.perf_counter() - started
    if not evaluation.stopped and len(evaluation.complete_questions) < len(questions):
        evaluation.stopped = "some answers failed; run the same command again to retry them"
    save_answer_run(store, evaluation)
    return evaluation


# ---- storage ------------------------------------------------------------------------------------

ANSWER_COLUMNS = ("run_id", "config_hash", "mode", "question_id", "answer", "exact_match", "f1",
                  "answer_in_context", f"recall_at_{RECALL_K}", "prompt_tokens", "llm_calls", "llm_tokens",
                  "latency_ms", "answer_ms", "error", "passage_ids", "prompt", "answered_at", "answer_key",
                  "reused_from", "raw_answer")
# the columns an AnswerRow is read back from, in its field order
ROW_COLUMNS = ("mode", "question_id", "answer", "exact_match", "f1", "answer_in_context", f"recall_at_{RECALL_K}",
               "prompt_tokens", "llm_calls", "llm_tokens", "latency_ms", "answer_ms", "error", "passage_ids",
               "prompt", "reused_from", "raw_answer")


def _row(values: Sequence[Any]) -> AnswerRow:
    (mode, qid, answer, em, f1, aic, recall, ptok, calls, tokens, latency, answer_ms, error, pids, prompt,
     reused_from, raw_answer) = values
    return AnswerRow(mode, qid, answer, em, f1, aic, recall, ptok, calls, tokens, latency, answer_ms, error,
                     list(pids or []), prompt or "", reused_from, raw_answer)


def save_answer_rows(store: Store, e: AnswerEvaluation, rows: Sequence[AnswerRow]) -> None:
    """Append rows to eval_answers at once (one short write per answer: a killed run keeps what it did)."""
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    with store.connect() as con:
        _insert(con, "eval_answers", ANSWER_COLUMNS, [
            (e.run_id, e.config_hash, r.mode, r.question_id, r.answer, r.exact_match, r.f1, r.answer_in_context,
             r.recall, r.prompt_tokens, r.llm_calls, r.llm_tokens, r.latency_ms, r.answer_ms, r.error,
             r.passage_ids, r.prompt, now, e.answer_keys.get(r.mode), r.reused_from, r.raw_answer) for r in rows])


def reusable_rows(store: Store, config: dict[str, Any], keys: dict[str, str]
                  ) -> dict[tuple[str, str], tuple[str, AnswerRow]]:
    """(mode, question id) -> (run id, row): the newest answered row of any run whose answer key equals the
    mode's in ``keys``. Rows written before keys were stored count when their run's configuration is verified:
    its stored base parameters with this run's dataset, budget, LLM, embedder, graph source and prompt wording
    give back the run's stored config_hash; their key is then computed from those parameters."""
    modes_of: dict[str, list[str]] = {}
    for mode, key in keys.items():
        modes_of.setdefault(key, []).append(mode)
    found: dict[tuple[str, str], tuple[datetime, str, AnswerRow]] = {}

    def offer(key: str, run_id: str, at: datetime, values: Sequence[Any]) -> None:
        for mode in modes_of.get(key, ()):
            row = _row(values)
            slot = (mode, row.question_id)
            if slot not in found or at > found[slot][0]:
                found[slot] = (at, run_id, row)

    cols = ", ".join(ROW_COLUMNS)
    with store.connect() as con:
        for run_id, key, at, *values in con.execute(
                f"SELECT run_id, answer_key, answered_at, {cols} FROM eval_answers WHERE error IS NULL AND "
                f"answer_key IN (SELECT unnest(?::VARCHAR[]))", [sorted(modes_of)]).fetchall():
            offer(key, run_id, at, values)
        runs = con.execute("SELECT DISTINCT run_id, config_hash, params::VARCHAR FROM eval_answer_runs "
                           "WHERE dataset_hash = ? AND budget = ?",
                           [config["dataset_hash"], config["budget"]]).fetchall()
        for run_id, run_hash, params_json in runs:
            legacy = {**config, "params": json.loads(params_json)}
            if _digest(legacy) != run_hash:
                continue   # another LLM, embedder, graph or prompt wording: not this configuration
            for key_mode, key, at, *values in con.execute(
                    f"SELECT mode, NULL, answered_at, {cols} FROM eval_answers WHERE run_id = ? AND "
                    "error IS NULL AND answer_key IS NULL", [run_id]).fetchall():
                try:
                    legacy_key = answer_key(legacy, key_mode)
                except (ValueError, TypeError):
                    continue   # a mode or a parameter this version no longer knows
                offer(legacy_key, run_id, at, values)
    return {slot: (run_id, row) for slot, (_, run_id, row) in found.items()}


def save_answer_run(store: Store, e: AnswerEvaluation) -> None:
    """Append this invocation's row to eval_answer_runs (a resumed run has one row per invocation)."""
    with store.connect() as con:
        _insert(con, "eval_answer_runs", (
            "run_id", "started_at", "dataset", "dataset_hash", "config_hash", "budget", "llm", "embedder",
            "extractor", "modes", "planned", "questions", "resumed", "answered", "stopped", "params", "workdir",
            "seconds", "verdict", "reused", "graph", "index_seconds"), [
            (e.run_id, e.started_at, e.dataset, e.dataset_hash, e.config_hash, e.budget, e.llm, e.embedder,
             e.extractor, e.modes, e.planned, len(e.complete_questions), e.resumed, e.answered, e.stopped or None,
             json.dumps(e.params), e.workdir, round(e.seconds, 3), e.verdict(), e.reused, e.graph,
             round(e.index_seconds, 3))])


def run_seconds(store: Store, run_id: str) -> float:
    """Wall time of a run's recorded invocations (a killed invocation wrote no run row: its time is unknown)."""
    with store.connect() as con:
        return float(con.execute("SELECT coalesce(sum(seconds), 0) FROM eval_answer_runs WHERE run_id = ?",
                                 [run_id]).fetchone()[0])


def resume_point(store: Store, config_hash: str) -> tuple[str | None, dict[tuple[str, str], AnswerRow]]:
    """The newest run with this configuration and its newest row per (mode, question); (None, {}) if none."""
    with store.connect() as con:   # read-write: an older home gains the eval_answers table here
        found = con.execute("SELECT run_id FROM eval_answers WHERE config_hash = ? "
                            "ORDER BY answered_at DESC LIMIT 1", [config_hash]).fetchone()
        if found is None:
            return None, {}
        run_id = found[0]
        rows = con.execute(f"""
            SELECT {', '.join(ROW_COLUMNS)} FROM eval_answers WHERE run_id = ?
            QUALIFY row_number() OVER (PARTITION BY mode, question_id ORDER BY answered_at DESC) = 1""",
                           [run_id]).fetchall()
    return run_id, {(r.mode, r.question_id): r for r in map(_row, rows)}
