"""Pairwise LLM judging of two answer sets: the win rates of the LightRAG/PathRAG papers (``pathrag eval winrate``).

LightRAG (Guo et al. 2024) asks an LLM which of two answers to a question is better on Comprehensiveness,
Diversity and Empowerment, then overall. PathRAG (Chen et al. 2025) keeps Comprehensiveness and Diversity,
drops Empowerment and adds Logicality, Relevance and Coherence; this module uses PathRAG's five dimensions
plus an overall winner. Verdicts come back as validated JSON (instructor, pydantic ``Verdict``), invalid
output is re-asked with the validation error.

LLM judges prefer whichever answer they read first (or second) more often than the content warrants. To
cancel that position bias the order is alternated: side A is "Answer 1" on even-numbered questions and
"Answer 2" on odd ones (``both_orders`` judges each question twice, once each way). Winners are mapped back
to A/B before counting, so a judge that always says "Answer 1" yields 50/50, and a judge that always
prefers the better content yields 100% for that side whatever the position.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from pathrag_pipeline.config import ENV_NAMES, Settings
from pathrag_pipeline.llm.client import LLMClient, LLMOutputError
from pathrag_pipeline.query.engine import PathRAG, load_questions
from pathrag_pipeline.query.params import QueryParams
from pathrag_pipeline.storage.store import Store, transaction

DIMENSIONS = ("comprehensiveness", "diversity", "logicality", "relevance", "coherence")
OVERALL = "overall"
PROMPT_VERSION = "pathrag-judge-v1"
FIRST, SECOND = "Answer 1", "Answer 2"

CRITERIA = {
    "comprehensiveness": "How much detail does the answer provide to cover all aspects and details of the question?",
    "diversity": "How varied and rich is the answer in providing different perspectives and insights on the question?",
    "logicality": "How logically does the answer respond to all parts of the question?",
    "relevance": "How relevant is the answer to the question, staying focused and addressing the intended topic "
                 "or issue?",
    "coherence": "How well does the answer maintain internal logical connections between its parts, ensuring a "
                 "smooth and consistent structure?",
}

SYSTEM_PROMPT = (
    "You are an expert tasked with evaluating two answers to the same question based on five criteria: "
    "Comprehensiveness, Diversity, Logicality, Relevance and Coherence.\n\n"
    + "\n".join(f"- {dim.capitalize()}: {text}" for dim, text in CRITERIA.items())
    + "\n\nFor each criterion, choose the better answer (either \"Answer 1\" or \"Answer 2\") and explain why. "
    "Then select an overall winner based on these five categories. The numbering is arbitrary: judge the "
    "content only, never the position, and be fair to both answers."
)

USER_TEMPLATE = """Here is the question:
{question}

Here are the two answers:

Answer 1:
{answer1}

Answer 2:
{answer2}

Evaluate both answers using the five criteria and explain each choice. Reply with JSON only: for each of
comprehensiveness, diversity, logicality, relevance, coherence and overall, an object {{"winner": "Answer 1" or
"Answer 2", "explanation": "..."}}."""

_ANSWER_MENTION = re.compile(r"\banswer\s*([12])\b", re.I)
_BARE_NUMBER = re.compile(r"^\s*([12])\s*$")
_NAMED_WINNER = re.compile(r"winner\W{0,6}(?:is\s+)?answer\s*([12])\b", re.I)


def named_answer(text: Any) -> str | None:
    """"Answer 1" or "Answer 2" when ``text`` names exactly one of them as the better one, else None.

    Small judges write the winner in many shapes: "answer 1", "1", "Answer2", "Answer 2 (LightRAG)" (the
    papers' own example), or a sentence instead of the object asked for ("Answer 1 is better on ..."). A text
    that says "Winner: Answer N" names N; otherwise it must mention one answer only: a sentence that names both
    ("Answer 1 is longer than Answer 2") or neither decides nothing, and is not guessed."""
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        return None
    text = str(text)
    bare = _BARE_NUMBER.match(text)
    if bare:
        return f"Answer {bare.group(1)}"
    named = {m.group(1) for m in _NAMED_WINNER.finditer(text)}
    mentioned = named or {m.group(1) for m in _ANSWER_MENTION.finditer(text)}
    return f"Answer {mentioned.pop()}" if len(mentioned) == 1 else None


def _key(name: Any) -> str:
    """A verdict key as the model wrote it ("Comprehensiveness", "Overall Winner", "Winner") -> ours."""
    key = re.sub(r"[^a-z]+", " ", str(name).casefold()).strip()
    return key.removesuffix(" winner").strip() or key


class JudgingError(ValueError):
    """The answers cannot be judged as given; the message names the file or value and the fix."""


class DimensionVerdict(BaseModel):
    """The better answer on one criterion, with the judge's reason."""

    winner: Literal["Answer 1", "Answer 2"] = Field(description='"Answer 1" or "Answer 2"')
    explanation: str = Field(default="", description="why this answer is better on the criterion")

    @model_validator(mode="before")
    @classmethod
    def _shapes(cls, value: Any) -> Any:
        """The papers' capitalised keys ("Winner", "Explanation") read as ours; a bare sentence that names one
        answer is that answer's win with the sentence as the reason (what Qwen2.5-0.5B writes)."""
        if isinstance(value, dict):
            return {_key(k): v for k, v in value.items()}
        if isinstance(value, str) and named_answer(value) is not None:
            return {"winner": named_answer(value), "explanation": value}
        return value

    @field_validator("winner", mode="before")
    @classmethod
    def _normalise(cls, value: Any) -> Any:
        """Small models write "answer 1", "1" or "Answer1"; all mean the same, so accept them."""
        return named_answer(value) or value


class Verdict(BaseModel):
    """The judge's answer for one question: a winner per PathRAG dimension and overall.

    The overall winner is required. A criterion the judge answered without naming one answer (a sentence about
    the answers, the habit of small models) is undecided (None): left out of that criterion's rate, never
    guessed; ``undecided`` counts them."""

    comprehensiveness: DimensionVerdict | None = None
    diversity: DimensionVerdict | None = None
    logicality: DimensionVerdict | None = None
    relevance: DimensionVerdict | None = None
    coherence: DimensionVerdict | None = None
    overall: DimensionVerdict

    @model_validator(mode="before")
    @classmethod
    def _criteria(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        out = {_key(k): v for k, v in value.items()}
        if "winner" in out and OVERALL not in out and not any(d in out for d in DIMENSIONS):
            # one verdict with no criteria ({"winner": ..., "explanation": ...}): the overall winner alone
            out = {OVERALL: {k: out[k] for k in ("winner", "explanation") if k in out}}
        for dim in DIMENSIONS:
            if isinstance(out.get(dim), str) and named_answer(out[dim]) is None:
                out[dim] = None      # a sentence naming neither answer (or both): undecided
        return out

    @property
    def undecided(self) -> tuple[str, ...]:
        return tuple(d for d in DIMENSIONS if getattr(self, d) is None)


@dataclass(frozen=True)
class AnswerRecord:
    id: str | None
    question: str
    answer: str


@dataclass(frozen=True)
class AnswerPair:
    question_id: str
    question: str
    answer_a: str
    answer_b: str


@dataclass
class Judgment:
    pair: AnswerPair
    a_position: str                               # "Answer 1" or "Answer 2": where side A was shown
    winners: dict[str, str] | None = None         # dimension/overall -> "A" or "B", un-swapped
    verdict: Verdict | None = None
    error: str | None = None


@dataclass(frozen=True)
class DimensionRate:
    wins_a: int
    wins_b: int

    @property
    def rate_a(self) -> float:
        total = self.wins_a + self.wins_b
        return self.wins_a / total if total else 0.0

    @property
    def rate_b(self) -> float:
        total = self.wins_a + self.wins_b
        return self.wins_b / total if total else 0.0


@dataclass
class WinRateRun:
    run_id: str
    started_at: datetime
    label_a: str
    label_b: str
    judge: str
    orders: str                                   # 'alternate' or 'both'
    questions: int
    judgments: list[Judgment]
    rates: dict[str, DimensionRate]
    params: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    judge_note: str = ""                          # e.g. WEAK_JUDGE: the judge also wrote the answers

    @property
    def judged(self) -> int:
        return sum(1 for j in self.judgments if j.winners is not None)

    @property
    def failed(self) -> int:
        return sum(1 for j in self.judgments if j.winners is None)

    @property
    def first_shown_wins(self) -> int:
        """Judgments whose overall winner is the answer shown first, whichever side that was."""
        return sum(1 for j in self.judgments if j.verdict is not None and j.verdict.overall.winner == FIRST)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "started_at": self.started_at.isoformat(),
            "a": self.label_a,
            "b": self.label_b,
            "judge": self.judge,
            "orders": self.orders,
            "questions": self.questions,
            "judgments": self.judged,
            "failed": self.failed,
            "win_rates": {dim: {"a": round(r.rate_a, 4), "b": round(r.rate_b, 4), "wins_a": r.wins_a,
                                "wins_b": r.wins_b} for dim, r in self.rates.items()},
            "params": self.params,
            "seconds": round(self.seconds, 3),
            "judge_note": self.judge_note or None,
            # why judgments failed: the first failure's error, so a report never shows rates without saying
            "first_error": next((j.error for j in self.judgments if j.winners is None and j.error), None),
            # position bias: how often the overall winner was the answer shown first (a judge that always names
            # "Answer 1" gives exactly 50% under alternation, which says nothing about the answers)
            "first_shown_wins": self.first_shown_wins,
        }


def no_judge_message() -> str:
    return (f"win rates need an LLM judge and none is configured: set {ENV_NAMES['llm_base_url']} (e.g. "
            f"http://localhost:11434/v1) and {ENV_NAMES['llm_model']} (the model the endpoint serves), plus "
            f"{ENV_NAMES['llm_api_key']} if it needs a key")


# ---- inputs -------------------------------------------------------------------------------------

def _norm(question: str) -> str:
    return " ".join(question.split()).casefold()


def load_answers(path: Path) -> list[AnswerRecord]:
    """Answers from JSONL, one ``{"question", "answer"}`` (optional ``"id"``) per line."""
    records: list[AnswerRecord] = []
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise JudgingError(f"{path}:{lineno}: not valid JSON ({exc.msg}); fix or remove the line") from None
        if not isinstance(row, dict) or not isinstance(row.get("question"), str) or not row["question"].strip():
            raise JudgingError(f"{path}:{lineno}: expected an object with a non-empty \"question\" and an \"answer\"")
        answer = row.get("answer")
        if not isinstance(answer, str) or not answer.strip():
            raise JudgingError(f"{path}:{lineno}: \"answer\" is missing or empty")
        qid = row.get("id")
        records.append(AnswerRecord(None if qid is None else str(qid), row["question"].strip(), answer.strip()))
    if not records:
        raise JudgingError(f"{path} holds no answers; give one JSON object per line with question and answer")
    return records


def match_answers(side_a: Sequence[AnswerRecord], side_b: Sequence[AnswerRecord]) -> list[AnswerPair]:
    """Pairs in A's order: matched by id when both records have one, else by question text (whitespace and
    case ignored). Questions only one side answered are skipped; no match at all is an error."""
    by_id = {r.id: r for r in side_b if r.id is not None}
    by_question = {_norm(r.question): r for r in side_b}
    pairs: list[AnswerPair] = []
    for i, a in enumerate(side_a, start=1):
        b = by_id.get(a.id) if a.id is not None else None
        if b is None:
            b = by_question.get(_norm(a.question))
        if b is not None:
            pairs.append(AnswerPair(a.id or b.id or str(i), a.question, a.answer, b.answer))
    if not pairs:
        raise JudgingError("no question of answers A matches one of answers B (by id or by question text); "
                           "check that both files answer the same questions")
    return pairs


def load_eval_questions(path: Path) -> list[tuple[str, str]]:
    """(id, question) pairs: a JSONL file whose every row has an ``id`` keeps those ids (a dataset's
    questions.jsonl); any other question file (see ``query.load_questions``) is numbered from 1."""
    path = Path(path)
    questions = load_questions(path)
    if path.suffix.lower() == ".jsonl":
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if all(isinstance(r, dict) and r.get("id") is not None for r in rows):
            return [(str(r["id"]), q) for r, q in zip(rows, questions)]
    return [(str(i), q) for i, q in enumerate(questions, start=1)]


def answer_modes(settings: Settings, questions: Sequence[tuple[str, str]], modes: Sequence[str],
                 on_answer: Callable[[], None] | None = None, params: QueryParams | None = None) -> dict[str, list[str]]:
    """Every question answered in each mode (once per mode, however many pairs use it), in question order."""
    rag = PathRAG(settings)
    out: dict[str, list[str]] = {}
    for mode in dict.fromkeys(modes):
        out[mode] = []
        for _, question in questions:
            out[mode].append(rag.query_many([question], mode, params=params or QueryParams())[0].answer)
            if on_answer is not None:
                on_answer()
    return out


def pair_modes(questions: Sequence[tuple[str, str]], answers: dict[str, list[str]], mode_a: str,
               mode_b: str) -> list[AnswerPair]:
    return [AnswerPair(qid, q, a, b) for (qid, q), a, b in zip(questions, answers[mode_a], answers[mode_b])]


WEAK_JUDGE = ("the judge, {judge}, is the same model that wrote both answers: a weak judge of its own output, so "
              "read these rates as a check that the pipeline runs end to end, not as a quality ranking")


# ---- judging ------------------------------------------------------------------------------------

def judge_messages(question: str, answer1: str, answer2: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": USER_TEMPLATE.format(question=question, answer1=answer1, answer2=answer2)}]


def schedule(pairs: Sequence[AnswerPair], both_orders: bool) -> list[tuple[AnswerPair, str]]:
    """(pair, position of A) per judge call: alternating by question, or both positions for every question."""
    if both_orders:
        return [(p, pos) for p in pairs for pos in (FIRST, SECOND)]
    return [(p, FIRST if i % 2 == 0 else SECOND) for i, p in enumerate(pairs)]


def unswap(verdict: Verdict, a_position: str) -> dict[str, str]:
    """Winner per dimension (and overall) as side "A" or "B", given where A was shown."""
    if a_position not in (FIRST, SECOND):
        raise ValueError(f"a_position={a_position!r} must be {FIRST!r} or {SECOND!r}")
    return {dim: "A" if getattr(verdict, dim).winner == a_position else "B" for dim in (*DIMENSIONS, OVERALL)
            if getattr(verdict, dim) is not None}


def win_rates(judgments: Sequence[Judgment]) -> dict[str, DimensionRate]:
    """Wins of each side per dimension and overall, over the judgments that returned a verdict and decided that
    dimension (an undecided criterion counts for neither side)."""
    rates: dict[str, DimensionRate] = {}
    for dim in (*DIMENSIONS, OVERALL):
        wins = [j.winners[dim] for j in judgments if j.winners is not None and dim in j.winners]
        rates[dim] = DimensionRate(wins.count("A"), wins.count("B"))
    return rates


def judge_pairs(llm: LLMClient, pairs: Sequence[AnswerPair], *, label_a: str = "A", label_b: str = "B",
                both_orders: bool = False, params: dict[str, Any] | None = None,
                on_judgment: Callable[[], None] | None = None, answered_by: str | None = None) -> WinRateRun:
    """Judge every pair (concurrently, within the client's bound). A verdict that stays invalid after the
    re-asks is recorded as failed and left out of the rates; an unreachable endpoint raises. ``answered_by``:
    the model that wrote the answers, when known; the judge being that model is said in ``judge_note``."""
    if not pairs:
        raise JudgingError("nothing to judge: no answer pairs")
    started = time.perf_counter()
    started_at = datetime.now(timezone.utc).replace(tzinfo=None)

    def judge(job: tuple[AnswerPair, str]) -> Judgment:
        pair, a_position = job
        first, second = (pair.answer_a, pair.answer_b) if a_position == FIRST else (pair.answer_b, pair.answer_a)
        try:
            verdict = llm.structured(judge_messages(pair.question, first, second), Verdict, stage="judge").value
            judgment = Judgment(pair, a_position, unswap(verdict, a_position), verdict)
        except LLMOutputError as exc:
            judgment = Judgment(pair, a_position, error=str(exc))
        if on_judgment is not None:
            on_judgment()
        return judgment

    judgments = llm.map(judge, schedule(pairs, both_orders))
    identity = llm.identity
    run = WinRateRun(
        run_id=uuid.uuid4().hex, started_at=started_at, label_a=label_a, label_b=label_b, judge=llm.model,
        orders="both" if both_orders else "alternate", questions=len(pairs), judgments=judgments,
        rates=win_rates(judgments),
        params={"judge": identity, "prompt_version": PROMPT_VERSION, **(params or {}),
                **({"answered_by": answered_by} if answered_by else {})},
        seconds=time.perf_counter() - started,
        judge_note=WEAK_JUDGE.format(judge=llm.model) if answered_by == llm.model else "",
    )
    if run.judge_note:
        run.params["judge_note"] = run.judge_note
    return run


def save_winrate(store: Store, run: WinRateRun) -> None:
    """Append the run to winrate_runs, its rates to winrate_results and every judgment to winrate_verdicts."""
    with store.connect() as con, transaction(con):
        con.execute("INSERT INTO winrate_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [run.run_id, run.started_at, run.label_a, run.label_b, run.judge, run.questions, run.judged,
                     run.failed, run.orders, json.dumps(run.params, default=str), round(run.seconds, 3)])
        con.executemany("INSERT INTO winrate_results VALUES (?, ?, ?, ?, ?, ?)",
                        [(run.run_id, dim, r.wins_a, r.wins_b, r.rate_a, r.rate_b) for dim, r in run.rates.items()])
        con.executemany(
            "INSERT INTO winrate_verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(run.run_id, j.pair.question_id, j.pair.question, j.a_position, j.pair.answer_a, j.pair.answer_b,
              None if j.winners is None else json.dumps(j.winners),
              None if j.verdict is None else j.verdict.model_dump_json(), j.error) for j in run.judgments],
        )

