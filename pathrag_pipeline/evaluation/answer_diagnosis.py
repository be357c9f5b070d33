"""Why a mode's answers miss, read from the stored prompts and answers of ``pathrag eval answers``.

Multi-hop datasets in MuSiQue's format name the gold passage and the answer of every hop (``hops``). For each
mode this module asks of every question the mode answered:

- **which passages its prompt quoted**: a ranked passage counts as quoted when the first words of its text
  (``SIGNATURE_WORDS`` runs of letters and digits, lower case) occur in the prompt's, whatever the layout
  (plain text, CSV with its quotes doubled and row ids) or a cut at the end of the budget;
- **where the last hop's passage is**, the one that holds the final answer: its rank in the mode's ranking,
  and whether the prompt quoted it;
- **whether the prompt opens with the first hop's passage** (the question's bridge entity: a model that reads
  the first passage it sees answers with the bridge);
- **what the answer is**: right (token F1 above 0), a bridge (F1 0, and the answer is or contains the answer of
  an earlier hop: the chain was stopped half way), a refusal ("do not know"), or other.

The figures only describe stored rows: nothing here asks the LLM. Questions without ``hops`` are skipped.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pathrag_pipeline.evaluation.answer_scoring import normalize_answer

SIGNATURE_WORDS = 12      # a passage's opening words that identify it in a prompt
REFUSALS = ("not know", "dont know", "cannot answer", "no information", "not mentioned", "not provided",
            "unknown", "not specified", "not given")


@dataclass(frozen=True)
class Hops:
    """One question's chain: the gold passage and the answer of each hop, first to last."""

    passages: tuple[str, ...]
    answers: tuple[str, ...]


@dataclass
class ModeDiagnosis:
    questions: int
    quoted_per_question: float        # mean number of ranked passages the prompt quoted
    last_hop_quoted: float            # share of questions whose last hop's passage the prompt quoted
    last_hop_top5: float              # share whose last hop's passage the mode ranked in its first 5
    last_hop_median_rank: float | None   # 1-based, over the questions where the mode ranked it in its first 20
    first_hop_leads: float            # share whose prompt's first quoted passage is the first hop's
    right: float                      # share answered with token F1 > 0
    bridge: float                     # F1 0, the answer is an earlier hop's answer
    refused: float                    # F1 0, the model said it does not know
    other: float


def _words(text: str) -> str:
    """Lower-case runs of letters and digits, space-separated: punctuation and CSV quoting do not split a match."""
    return " ".join(re.findall(r"\w+", text.lower()))


def _json_object(line: str) -> dict | None:
    """A JSON Lines row as a dict; None for a blank, malformed or non-object line (the evaluation validated the
    files it used; a diagnosis never stops on what it cannot read)."""
    try:
        row = json.loads(line) if line.strip() else None
    except json.JSONDecodeError:
        return None
    return row if isinstance(row, dict) else None


def load_hops(questions_file: Path) -> dict[str, Hops]:
    """Question id -> its hops, for the rows of ``questions.jsonl`` that carry MuSiQue-style ``hops``."""
    out: dict[str, Hops] = {}
    for line in questions_file.read_text(encoding="utf-8").splitlines():
        row = _json_object(line)
        hops = row.get("hops") if row else None
        if not isinstance(hops, list) or not hops or not all(isinstance(h, dict) for h in hops):
            continue
        passages = tuple(str(h.get("gold_id", "")) for h in hops)
        answers = tuple(str(h.get("answer") or "") for h in hops)
        if all(passages):
            out[str(row.get("id"))] = Hops(passages, answers)
    return out


def passage_signatures(corpus_file: Path, ids: Iterable[str]) -> dict[str, str]:
    """Corpus id -> the opening words of its text (``_words``), for ``ids`` only (the corpus is streamed)."""
    wanted = set(ids)
    out: dict[str, str] = {}
    with corpus_file.open(encoding="utf-8") as f:
        for line in f:
            if not wanted - out.keys():
                break
            row = _json_object(line)
            if not row:
                continue
            pid = str(row.get("id"))
            if pid in wanted:
                out[pid] = " ".join(_words(str(row.get("text", ""))).split()[:SIGNATURE_WORDS])
    return out


def quoted_passages(prompt: str, ranked: Sequence[str], signatures: Mapping[str, str]) -> list[str]:
    """The ranked passages the prompt quotes, in the order they appear in it."""
    text = f" {_words(prompt)} "
    at = {p: text.find(f" {signatures[p]} ") for p in ranked if signatures.get(p)}
    return sorted((p for p, i in at.items() if i >= 0), key=lambda p: at[p])


def answer_kind(answer: str, f1: float, hops: Hops) -> str:
    """right, bridge, refused or other (see the module docstring)."""
    if f1 > 0:
        return "right"
    a = normalize_answer(answer)
    if not a:
        return "other"
    bridges = [normalize_answer(x) for x in hops.answers[:-1]]
    if any(b and (f" {b} " in f" {a} " or f" {a} " in f" {b} ") for b in bridges):
        return "bridge"
    if any(r in a for r in REFUSALS):
        return "refused"
    return "other"


def diagnose(rows: Mapping[str, Mapping[str, Any]], hops: Mapping[str, Hops],
             signatures: Mapping[str, str], questions: Sequence[str]) -> dict[str, ModeDiagnosis]:
    """Per mode, over ``questions`` that have hops: ``rows[mode][question_id]`` holds ``answer``, ``f1``,
    ``passage_ids`` (ranked, best first) and ``prompt`` (an ``AnswerRow`` or a mapping with those fields)."""
    out: dict[str, ModeDiagnosis] = {}
    qs = [q for q in questions if q in hops]
    for mode, by_question in rows.items():
        n = 0
        quoted_total = last_quoted = last_top5 = first_leads = 0
        ranks: list[int] = []
        kinds = {"right": 0, "bridge": 0, "refused": 0, "other": 0}
        for q in qs:
            row = by_question.get(q)
            if row is None:
                continue
            get = row.get if isinstance(row, Mapping) else lambda k, r=row: getattr(r, k)
            ranked = list(get("passage_ids") or [])
            quoted = quoted_passages(get("prompt") or "", ranked, signatures)
            h = hops[q]
            n += 1
            quoted_total += len(quoted)
            last_quoted += h.passages[-1] in quoted
            if h.passages[-1] in ranked:
                rank = ranked.index(h.passages[-1]) + 1
                ranks.append(rank)
                last_top5 += rank <= 5
            first_leads += bool(quoted) and quoted[0] == h.passages[0]
            kinds[answer_kind(get("answer") or "", float(get("f1") or 0.0), h)] += 1
        if n:
            out[mode] = ModeDiagnosis(
                n, round(quoted_total / n, 2), round(last_quoted / n, 3), round(last_top5 / n, 3),
                float(statistics.median(ranks)) if ranks else None, round(first_leads / n, 3),
                *(round(kinds[k] / n, 3) for k in ("right", "bridge", "refused", "other")))
    return out


def diagnose_run(dataset_dir: Path, rows: Mapping[str, Mapping[str, Any]],
                 questions: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``diagnose`` for a dataset folder (its questions.jsonl and corpus.jsonl), as plain dicts; empty when the
    dataset has no hops."""
    from pathrag_pipeline.evaluation.retrieval_eval import CORPUS_FILE, QUESTIONS_FILE

    hops = load_hops(dataset_dir / QUESTIONS_FILE)
    if not hops:
        return {}
    ids = {p for by_q in rows.values() for q, r in by_q.items() if q in hops
           for p in (r.get("passage_ids") if isinstance(r, Mapping) else r.passage_ids) or []}
    signatures = passage_signatures(dataset_dir / CORPUS_FILE, ids)
    return {m: asdict(d) for m, d in diagnose(rows, hops, signatures, questions).items()}


DIAGNOSIS_COLUMNS = ("mode", "questions", "passages quoted/q", "last hop quoted", "last hop in top 5",
                     "last hop median rank", "first hop leads", "right", "bridge", "refused", "other")


def _pct(share: float) -> str:
    return f"{100 * share:.0f}%"


def diagnosis_row(mode: str, d: Mapping[str, Any]) -> list[Any]:
    """One table row of a mode's diagnosis (``DIAGNOSIS_COLUMNS``), shares as percentages."""
    pct = _pct
    rank = d["last_hop_median_rank"]
    return [mode, d["questions"], f"{d['quoted_per_question']:.1f}", pct(d["last_hop_quoted"]),
            pct(d["last_hop_top5"]), "" if rank is None else f"{rank:g}", pct(d["first_hop_leads"]),
            pct(d["right"]), pct(d["bridge"]), pct(d["refused"]), pct(d["other"])]


def diagnosis_sentence(diagnosis: Mapping[str, Mapping[str, Any]], mode: str, baseline: str) -> str:
    """What the stored prompts say about ``mode`` against ``baseline`` (both in ``diagnosis``), in figures."""
    if mode not in diagnosis or baseline not in diagnosis:
        return ""
    a, b = diagnosis[mode], diagnosis[baseline]
    return (f"`{mode}`'s prompts quoted {a['quoted_per_question']:.1f} passages per question against "
            f"`{baseline}`'s {b['quoted_per_question']:.1f}; the passage holding the final answer (the last hop's) "
            f"was quoted in {100 * a['last_hop_quoted']:.0f}% of them against {100 * b['last_hop_quoted']:.0f}%, "
            f"though `{mode}` ranked it in its first 5 in {100 * a['last_hop_top5']:.0f}% against "
            f"{100 * b['last_hop_top5']:.0f}%. `{mode}` answered with an earlier hop's answer (a bridge entity) in "
            f"{100 * a['bridge']:.0f}% against {100 * b['bridge']:.0f}%.")
