"""Answers: the LLM's, or offline an extractive one quoted from the sources of the best paths.

Without an LLM the pipeline still answers, honestly: it quotes the sentences of the retrieved evidence
that mention both the evidence's entities and the question's terms, best evidence first, and says that
it is an extract rather than a generated answer. For PathRAG one piece of evidence is one path (its
entities and its source chunks), so the quoted sentences follow path reliability.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pathrag_pipeline.llm.embedding import STOPWORDS
from pathrag_pipeline.llm.client import LLMClient, Usage
from pathrag_pipeline.index.offline_extraction import text_sentences
from pathrag_pipeline.query.params import EXTRACTIVE_LABEL
from pathrag_pipeline.query.prompting import Prompt, clip

NO_EVIDENCE = "no sentence of the retrieved sources mentions the question's terms."
DEFAULT_MAX_SENTENCES = 4
MAX_SENTENCE_TOKENS = 60  # table rows and run-on lines come out of the splitter as one "sentence"

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class Answer:
    text: str
    kind: str                 # 'llm' or 'extractive'
    usage: Usage
    found: bool = True        # extractive: a sentence sharing a word with the question was quoted


@dataclass(frozen=True)
class Evidence:
    """One unit of retrieved evidence, best first: the entities it is about and the chunks it came from."""

    entity_names: Sequence[str]
    chunk_ids: Sequence[str]
    path: bool = False        # entity_names are a path's nodes in order: consecutive names are its hops


# ``response="short"``: the answer alone, as QA benchmarks score it (exact match, token F1). Appended to the
# system message, so the context and its budget are the same as for a default answer.
SHORT_ANSWER = ("Reply with the answer alone: a short phrase such as a name, a place, a date or a number, "
                "with no explanation and no full sentence.")


def answer_with_llm(client: LLMClient, prompt: Prompt, response: str = "default") -> Answer:
    messages = prompt.messages()
    if response == "short":
        messages[0] = {"role": "system", "content": f"{prompt.system}\n\n{SHORT_ANSWER}"}
    result = client.complete(messages, stage="answer")
    return Answer(result.text.strip(), "llm", result.usage)


def _terms(text: str) -> set[str]:
    """Content words, casefolded, with a light plural strip so 'universities' meets 'university'."""
    out: set[str] = set()
    for word in _WORD.findall(text.casefold()):
        if len(word) < 3 or word in STOPWORDS:
            continue
        if word.endswith("ies") and len(word) > 4:
            word = word[:-3] + "y"
        elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
            word = word[:-1]
        out.add(word)
    return out


def mentions(sentence_folded: str, name: str) -> bool:
    """Whether a casefolded sentence names ``name`` as a whole phrase (not inside a longer word)."""
    name = name.casefold().strip()
    return bool(name) and re.search(r"(?<!\w)" + re.escape(name) + r"(?!\w)", sentence_folded) is not None


def _hops(unit: Evidence, question_terms: set[str]) -> list[tuple[str, str]]:
    """A path unit's hops, read from the end the question names (more shared words) to the other end; none when
    neither end shares a word with the question."""
    names = list(unit.entity_names)
    if len(names) < 2:
        return []
    first, last = len(_terms(names[0]) & question_terms), len(_terms(names[-1]) & question_terms)
    if not first and not last:
        return []      # a path between entities the question does not name answers nothing through its hops
    if last > first:
        names.reverse()
    return list(zip(names, names[1:]))


def extractive_answer(question: str, keywords: Sequence[str], evidence: Sequence[Evidence],
                      chunk_texts: dict[str, str], *, names: Sequence[str] = (),
                      max_sentences: int = DEFAULT_MAX_SENTENCES) -> Answer:
    """Quote the ``max_sentences`` sentences of the evidence's source chunks that best answer the question.

    A candidate sentence shares at least one content word with the question or its keywords. Sentences
    naming one of their evidence unit's entities come before those naming none; among them, for a path, the
    sentence stating the path's final hop (naming both of its entities) comes first, then one stating another
    of its hops: the final hop is where the path leaves the entities the question names, so its sentence is the
    one that answers through the path (the path is read from the end whose name shares more words with the
    question), if it shares a word with the question beyond what the question names itself. Then more shared
    words *beyond the names* rank first — the unit's entity names and ``names`` (the question's low-level
    keywords) are what retrieval matched already; words like "chancellor" or "born" are what an answering
    sentence adds — then the better
    evidence unit (the more reliable path), then more entities named, then text order.
    """
    terms = _terms(" ".join([question, *keywords]))
    question_names = _terms(" ".join(names))
    sentences_of: dict[str, list[str]] = {}
    best: dict[str, tuple[int, ...]] = {}
    order = 0
    for unit_rank, unit in enumerate(evidence):
        name_terms = question_names | _terms(" ".join(unit.entity_names))
        hops = _hops(unit, terms) if unit.path else []
        # what the question names itself: its keywords and the entity the path starts from
        asked = question_names | (_terms(hops[0][0]) if hops else set())
        for chunk_id in unit.chunk_ids:
            if chunk_id not in sentences_of:
                sentences_of[chunk_id] = text_sentences(chunk_texts.get(chunk_id, ""))
            for sentence in sentences_of[chunk_id]:
                order += 1
                if len(sentence.split()) < 4:   # headings and table cells answer nothing on their own
                    continue
                shared = terms & _terms(sentence)
                if not shared:
                    continue
                folded = sentence.casefold()
                named = sum(mentions(folded, n) for n in unit.entity_names)
                stated = [i for i, (a, b) in enumerate(hops) if mentions(folded, a) and mentions(folded, b)]
                # a hop's sentence counts when it shares a word with the question beyond what the question
                # names itself ("river" in "River Lode" does; "Pellingham" in the starting entity does not)
                hop_tier = 2 if not stated or not shared - asked else (0 if stated[-1] == len(hops) - 1 else 1)
                key = (0 if named else 1, hop_tier, -len(shared - name_terms), unit_rank, -named, order)
                if sentence not in best or key < best[sentence]:
                    best[sentence] = key
    chosen = sorted(best, key=best.__getitem__)[:max_sentences]
    body = " ".join(clip(s, MAX_SENTENCE_TOKENS) for s in chosen) if chosen else NO_EVIDENCE
    return Answer(f"{EXTRACTIVE_LABEL} {body}", "extractive", Usage(), found=bool(chosen))
