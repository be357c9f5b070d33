"""Answer scoring as SQuAD does it: normalised exact match, token F1, and whether a prompt holds an answer.

``normalize_answer`` is SQuAD v1.1's ``normalize_answer`` (Rajpurkar et al., 2016, the official evaluation
script): lower case, punctuation removed, the articles *a*, *an*, *the* removed, white space collapsed. MuSiQue,
HotpotQA and 2Wiki score answers with the same function, so figures here compare with theirs.

``answer_in_context`` asks the question an LLM-free evaluation can ask of a prompt: does any gold answer, so
normalised, appear in the normalised prompt as a whole-word sequence? A prompt that fails it cannot lead a
faithful model to the answer; one that passes may still bury it. It measures what the LLM reads, not what it
writes.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in str(text).lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, answers: Iterable[str]) -> float:
    """1.0 when the normalised prediction equals any normalised gold answer, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(a) for a in answers))


def token_f1(prediction: str, answers: Iterable[str]) -> float:
    """The best SQuAD token F1 of the prediction against any gold answer (0.0 with no answers)."""
    pred = normalize_answer(prediction).split()
    best = 0.0
    for answer in answers:
        gold = normalize_answer(answer).split()
        if not pred or not gold:
            best = max(best, float(pred == gold))
            continue
        common = sum((Counter(pred) & Counter(gold)).values())
        if common:
            precision, recall = common / len(pred), common / len(gold)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def answer_in_context(context: str, answers: Iterable[str]) -> bool:
    """Whether any gold answer (normalised) occurs in the normalised context as a run of whole words.

    Answers that normalise to nothing (an answer of only punctuation or articles) never match."""
    haystack = f" {normalize_answer(context)} "
    return any(needle and f" {needle} " in haystack for needle in (normalize_answer(a) for a in answers))
