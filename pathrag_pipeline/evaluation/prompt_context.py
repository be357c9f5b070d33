"""What the LLM reads: each mode's actual answer prompt, scored at equal token budgets without an LLM.

Recall@k scores a mode's passage *ranking*; the answer model never sees that ranking, only the prompt the mode
renders (for path mode: the kept paths, plus passages in the layouts that quote them). For every question and
budget (1k, 2k, 4k tokens by default) the evaluation renders that prompt from the same retrieval
(``PathRAG.query_many(budgets=...)``) and measures

- ``answer_in_context``: whether any gold answer, normalised as SQuAD does, occurs in the prompt
  (:func:`~pathrag_pipeline.evaluation.answer_scoring.answer_in_context`);
- ``tokens``: the prompt's size (system + user message);
- ``quoted_recall``: the share of the question's gold passages whose text the prompt quotes (a passage counts
  when the prompt carries it whole or an excerpt of it; path descriptions derived from a passage do not).

The flat baselines (naive mode with BM25, dense or both) render LightRAG's chunk prompt at the same budgets, so
the comparison is like for like: same budget, same tokenizer, same question.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pathrag_pipeline.evaluation.answer_scoring import answer_in_context
from pathrag_pipeline.query.results import BudgetedPrompt

DEFAULT_BUDGETS = (1000, 2000, 4000)


@dataclass(frozen=True)
class PromptOutcome:
    """One question's prompt at one budget."""

    budget: int
    tokens: int
    answer_in_context: bool
    quoted_recall: float                  # share of gold passages the prompt quotes (0.0 when it quotes none)
    quoted: tuple[str, ...]               # corpus ids of the quoted passages, in prompt order


def score_prompt(prompt: BudgetedPrompt, passages: Sequence[str], answers: Sequence[str],
                 gold_ids: Sequence[str]) -> PromptOutcome:
    """Score one rendered prompt; ``passages`` are the corpus ids of the documents it quotes, in order."""
    gold = set(gold_ids)
    quoted = tuple(dict.fromkeys(passages))
    recall = len(gold.intersection(quoted)) / len(gold) if gold else 0.0
    return PromptOutcome(prompt.budget, prompt.tokens, answer_in_context(prompt.text, answers), recall, quoted)


def summarize(outcomes: Sequence[dict[int, PromptOutcome]], budgets: Sequence[int]) -> dict[str, dict[str, float]]:
    """Per budget (keys ``"1000"``...): the share of questions with an answer in context, the median prompt
    tokens, the mean quoted recall and the mean number of passages quoted."""
    out: dict[str, dict[str, float]] = {}
    for budget in budgets:
        rows = [o[budget] for o in outcomes if budget in o]
        if not rows:
            continue
        out[str(budget)] = {
            "answer_in_context": round(sum(r.answer_in_context for r in rows) / len(rows), 4),
            "median_tokens": float(statistics.median(r.tokens for r in rows)),
            "quoted_recall": round(sum(r.quoted_recall for r in rows) / len(rows), 4),
            "passages_quoted": round(sum(len(r.quoted) for r in rows) / len(rows), 2),
        }
    return out


def parse_budgets(text: str) -> list[int]:
    """``"1000,2000,4000"`` -> [1000, 2000, 4000]; an empty string turns the measurement off."""
    budgets = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        if not item.isdigit() or int(item) < 200:
            raise ValueError(f"prompt budget {item!r} is not a whole number of tokens >= 200; give e.g. "
                             "--budgets 1000,2000,4000 (or --budgets '' to skip the prompt measurement)")
        budgets.append(int(item))
    return sorted(set(budgets))
